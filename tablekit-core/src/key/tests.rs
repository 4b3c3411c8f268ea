use std::cmp::Ordering;

use proptest::prelude::*;

use super::*;
use crate::datetime::DateTime;
use crate::keyorder::cmp_utf16;
use crate::validate::is_forbidden_key_char;

/// Checks the codec contract for one pair of values.
fn check_pair<K: KeyTuple + PartialEq + std::fmt::Debug>(
    a: &K,
    b: &K,
    order: impl Fn(&K, &K) -> Ordering,
) -> Result<(), TestCaseError> {
    check_pair_ordered(a, b, order, true)
}

/// Whether `text` holds a control character U+0000–U+001F: the store forbids
/// them, and in a string that ends a key they sort after a space (which is
/// written as it is), not before it.
fn has_control(text: &str) -> bool {
    text.chars().any(|c| c < ' ')
}

/// [`check_pair`], checking the order only when `ordered`.
fn check_pair_ordered<K: KeyTuple + PartialEq + std::fmt::Debug>(
    a: &K,
    b: &K,
    order: impl Fn(&K, &K) -> Ordering,
    ordered: bool,
) -> Result<(), TestCaseError> {
    let (ea, eb) = (encode(a), encode(b));
    prop_assert_eq!(
        &K::decode(&ea).map_err(|e| TestCaseError::fail(e.to_string()))?,
        a
    );
    prop_assert_eq!(
        &K::decode(&eb).map_err(|e| TestCaseError::fail(e.to_string()))?,
        b
    );
    prop_assert!(
        !ordered || cmp_utf16(&ea, &eb) == order(a, b),
        "{:?} {:?} -> {:?} {:?}",
        a,
        b,
        ea,
        eb
    );
    for e in [&ea, &eb] {
        prop_assert!(
            !e.chars().any(is_forbidden_key_char),
            "forbidden character in {:?}",
            e
        );
    }
    Ok(())
}

/// Strings rich in the characters the encoding treats specially.
fn tricky_string() -> impl Strategy<Value = String> {
    let special = prop_oneof![
        Just('\u{0}'),
        Just('\u{1F}'),
        Just(' '),
        Just('!'),
        Just('"'),
        Just('#'),
        Just('.'),
        Just('/'),
        Just('>'),
        Just('?'),
        Just('['),
        Just('\\'),
        Just('_'),
        Just('`'),
        Just('~'),
        Just('\u{7F}'),
        Just('\u{9F}'),
        Just('\u{A0}'),
        Just('\u{100}'),
        Just('\u{120}'),
        Just('\u{E000}'),
        Just('\u{FFFC}'),
        Just('\u{FFFD}'),
        Just('\u{FFFF}'),
        Just('\u{10000}'),
        Just('\u{1F600}'),
        Just('a'),
        Just('b'),
        Just('|'),
        Just('%'),
        Just('}'),
    ];
    proptest::collection::vec(special, 0..6).prop_map(|cs| cs.into_iter().collect())
}

fn any_string() -> impl Strategy<Value = String> {
    prop_oneof![tricky_string(), any::<String>()]
}

#[allow(clippy::ptr_arg)] // the codec compares the `String` key type itself
fn utf16_order(a: &String, b: &String) -> Ordering {
    cmp_utf16(a, b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn unsigned(a: u64, b: u64, c: u8, d: u8, e: u16, f: u16, g: u32, h: u32) {
        check_pair(&a, &b, Ord::cmp)?;
        check_pair(&c, &d, Ord::cmp)?;
        check_pair(&e, &f, Ord::cmp)?;
        check_pair(&g, &h, Ord::cmp)?;
    }

    #[test]
    fn signed(a: i64, b: i64, c: i8, d: i8, e: i16, f: i16, g: i32, h: i32) {
        check_pair(&a, &b, Ord::cmp)?;
        check_pair(&c, &d, Ord::cmp)?;
        check_pair(&e, &f, Ord::cmp)?;
        check_pair(&g, &h, Ord::cmp)?;
    }

    #[test]
    fn bools_and_uuids(a: bool, b: bool, x: u128, y: u128) {
        check_pair(&a, &b, Ord::cmp)?;
        check_pair(&uuid::Uuid::from_u128(x), &uuid::Uuid::from_u128(y), Ord::cmp)?;
    }

    #[test]
    fn datetimes(a in DateTime::MIN.ticks()..=DateTime::MAX.ticks(), b in DateTime::MIN.ticks()..=DateTime::MAX.ticks()) {
        let (a, b) = (DateTime::from_ticks(a).unwrap(), DateTime::from_ticks(b).unwrap());
        check_pair(&a, &b, Ord::cmp)?;
        check_pair(&InvertedTime(a), &InvertedTime(b), Ord::cmp)?;
    }

    /// Strings sort as their text does, but for control characters, which
    /// the store forbids and which sort after a space in a key's last string.
    #[test]
    fn strings(a in any_string(), b in any_string()) {
        check_pair_ordered(&a, &b, utf16_order, !has_control(&a) && !has_control(&b))?;
    }

    /// A string that another component follows sorts as its text followed
    /// by `|` (but for control characters and `|` itself); keys with the
    /// same leading strings sort by what follows; a last string as
    /// [`strings`] says.
    #[test]
    fn compound_keys(a in (any_string(), any::<u16>(), any_string()), b in (any_string(), any::<u16>(), any_string())) {
        let inner = |x: &String, y: &String| {
            if x == y { Ordering::Equal } else { cmp_utf16(&format!("{x}|"), &format!("{y}|")) }
        };
        let inner_ordered = a.0 == b.0
            || ![&a.0, &b.0].iter().any(|s| has_control(s) || s.contains('|'));
        let order = |x: &(String, u16, String), y: &(String, u16, String)| {
            inner(&x.0, &y.0).then(x.1.cmp(&y.1)).then_with(|| cmp_utf16(&x.2, &y.2))
        };
        let last_ordered = !has_control(&a.2) && !has_control(&b.2);
        check_pair_ordered(&a, &b, order, inner_ordered && (last_ordered || a.0 != b.0 || a.1 != b.1))?;
        let order2 = |x: &(String, String), y: &(String, String)| inner(&x.0, &y.0).then_with(|| cmp_utf16(&x.1, &y.1));
        check_pair_ordered(&(a.0.clone(), a.2.clone()), &(b.0.clone(), b.2.clone()), order2, inner_ordered && (last_ordered || a.0 != b.0))?;
        let order3 = |x: &(u16, String), y: &(u16, String)| x.0.cmp(&y.0).then_with(|| cmp_utf16(&x.1, &y.1));
        let first_ordered = !has_control(&a.0) && !has_control(&b.0);
        check_pair_ordered(&(a.1, a.0.clone()), &(b.1, b.0.clone()), order3, first_ordered || a.1 != b.1)?;
    }

    /// A prefix range holds exactly the keys whose leading component is the prefix.
    #[test]
    fn prefix_ranges_stay_inside(p in any_string(), keys in proptest::collection::vec((any_string(), any_string()), 0..12), n: u32) {
        let mut with_prefix = keys.clone();
        with_prefix.push((p.clone(), String::new()));
        with_prefix.push((p.clone(), "x".into()));
        let mut encoded = String::new();
        <(String, String) as KeyPrefix<(String,)>>::write_prefix(&(p.clone(),), &RowKeyLayout::NONE, &mut encoded);
        let (start, end) = prefix_range(encoded, <(String, String) as KeyPrefix<(String,)>>::last_separator());
        for key in &with_prefix {
            let e = encode(key);
            let inside = cmp_utf16(&e, &start) != Ordering::Less && cmp_utf16(&e, &end) == Ordering::Less;
            prop_assert_eq!(inside, key.0 == p, "{:?} -> {:?} in [{:?}, {:?})", key, e, start, end);
        }
        let mut encoded = String::new();
        <(u32, String) as KeyPrefix<(u32,)>>::write_prefix(&(n,), &RowKeyLayout::NONE, &mut encoded);
        let (start, end) = prefix_range(encoded, <(u32, String) as KeyPrefix<(u32,)>>::last_separator());
        for other in [n.saturating_sub(1), n, n.saturating_add(1)] {
            let e = encode(&(other, p.clone()));
            let inside = cmp_utf16(&e, &start) != Ordering::Less && cmp_utf16(&e, &end) == Ordering::Less;
            prop_assert_eq!(inside, other == n);
        }
    }
}

#[test]
fn documented_encodings() {
    assert_eq!(encode(&123u32), "0000000123");
    assert_eq!(encode(&-123i32), "-9999999877");
    assert_eq!(encode(&123i32), "00000000123");
    assert_eq!(encode(&i64::MIN), "-0776627963145224192");
    assert_eq!(encode(&true), "1");
    assert_eq!(
        encode(&"a b".to_string()),
        "a b",
        "a last string keeps its spaces"
    );
    assert_eq!(encode(&"Ada Lovelace".to_string()), "Ada Lovelace");
    assert_eq!(encode(&"O'Brien".to_string()), "O'Brien");
    assert_eq!(
        encode(&"jonesj@contoso.com".to_string()),
        "jonesj@contoso.com"
    );
    assert_eq!(
        encode(&("a b".to_string(), 1u8)),
        "a b|001",
        "so does one that another component follows"
    );
    assert_eq!(
        encode(&("a|b".to_string(), "100%".to_string())),
        "a%7Cb|100%",
        "`|` and `%` are escaped before a separator only"
    );
    assert_eq!(encode(&("50%".to_string(), 1u8)), "50%25|001");
    assert_eq!(
        encode(&("R&D / Labs #1?".to_string(), 1u8)),
        "R&D .\u{FFFD}0 Labs \"\u{FFFD}01>\u{FFFD}0|001"
    );
    assert_eq!(
        encode(&("acme".to_string(), "alice".to_string())),
        "acme|alice"
    );
    assert_eq!(encode(&(1u8, "a b".to_string())), "001_a b");
    assert_eq!(encode(&("a".to_string(), 1u8)), "a|001");
    assert_eq!(encode(&(1u8, "a".to_string())), "001_a");
    let t = DateTime::parse("2020-01-02T03:04:05.1234567Z").unwrap();
    assert_eq!(encode(&t), "2020-01-02T03:04:05.1234567Z");
    assert_eq!(encode(&InvertedTime(DateTime::MAX)), "0000000000000000000");
}

#[test]
fn decoding_rejects_what_encoding_never_writes() {
    for bad in [
        "12",
        "000000012x",
        "-0000000000",
        "+0000000001",
        "-9999999999x",
    ] {
        assert!(<i32 as KeyTuple>::decode(bad).is_err(), "{bad}");
    }
    assert!(<u32 as KeyTuple>::decode("123").is_err());
    // Digits of another width: the error says how to read them.
    let padded = <u32 as KeyTuple>::decode("00000123").unwrap_err();
    assert!(padded.to_string().contains("key::Padded<8>"), "{padded}");
    // Twenty digits above u64::MAX, and digits above a narrower type's range.
    assert!(<u64 as KeyTuple>::decode("99999999999999999999").is_err());
    assert_eq!(
        <u64 as KeyTuple>::decode("18446744073709551615"),
        Ok(u64::MAX)
    );
    assert!(<u8 as KeyTuple>::decode("256").is_err());
    assert!(<u16 as KeyTuple>::decode("0012a").is_err());
    for forbidden in ["a#b", "a/b", "a?b", "a\\b", "a\u{7f}", "a\tb"] {
        assert!(
            <String as KeyTuple>::decode(forbidden).is_err(),
            "{forbidden:?} is never written unescaped"
        );
    }
    assert_eq!(<String as KeyTuple>::decode("a b").unwrap(), "a b");
    assert!(
        <String as KeyTuple>::decode("a \u{FFFD}\u{120}b").is_err(),
        "an escaped space in a last string"
    );
    assert_eq!(
        <(String, u8) as KeyTuple>::decode("a b|001").unwrap(),
        ("a b".to_string(), 1)
    );
    assert_eq!(
        <(String, u8) as KeyTuple>::decode("a%7Cb%25|001").unwrap(),
        ("a|b%".to_string(), 1)
    );
    for bad in [
        "a%|001", "a%2|001", "a%7c|001", "a%41|001", "a|b|001", "a 001",
    ] {
        assert!(
            <(String, u8) as KeyTuple>::decode(bad).is_err(),
            "{bad:?} is never written"
        );
    }
    assert!(
        <String as KeyTuple>::decode("a\u{FFFD}").is_err(),
        "a stray escape mark"
    );
    assert!(
        <String as KeyTuple>::decode("a\u{FFFD}x").is_err(),
        "an escape with a bad base"
    );
    assert!(
        <(String, u8) as KeyTuple>::decode("abc").is_err(),
        "no separator"
    );
    assert!(
        <(u8, u8) as KeyTuple>::decode("001-002").is_err(),
        "wrong separator"
    );
    assert!(<uuid::Uuid as KeyTuple>::decode("C9DA6455-213D-42C9-9A79-3E9149A57833").is_err());
}

/// Mutates `text` at `at`: replaces, inserts or removes one character.
fn mutate(text: &str, at: usize, how: u8, with: char) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let at = if chars.is_empty() {
        0
    } else {
        at % chars.len()
    };
    match how % 3 {
        0 if !chars.is_empty() => chars[at] = with,
        1 => chars.insert(at, with),
        _ if !chars.is_empty() => {
            chars.remove(at);
        }
        _ => chars.push(with),
    }
    chars.into_iter().collect()
}

/// The characters a mutation puts in: those the encodings use, and a few
/// that a hand-made key might hold instead.
fn mutation_char() -> impl Strategy<Value = char> {
    prop_oneof![
        prop::sample::select(vec![
            '0', '1', '5', '9', '-', '+', '_', ' ', ':', '.', 'T', 'Z', 'z', 'a', 'A', 'F', 'f',
            '{', '}', '\u{FFFD}', '\u{FFFC}', '\u{100}', '\u{120}', '"', '~', '[', '>', '|', '%',
            'C', '7', '2'
        ]),
        any::<char>(),
    ]
}

/// Whenever `text` decodes, it is the one text its value encodes to.
fn check_canonical<K: KeyTuple + std::fmt::Debug>(text: &str) -> Result<(), TestCaseError> {
    if let Ok(value) = K::decode(text) {
        prop_assert_eq!(encode(&value), text, "{:?} decoded to {:?}", text, value);
    }
    Ok(())
}

/// Checks canonical decoding for `value`'s encoding under one mutation.
fn check_mutated<K: KeyTuple + std::fmt::Debug>(
    value: &K,
    at: usize,
    how: u8,
    with: char,
) -> Result<(), TestCaseError> {
    let text = encode(value);
    check_canonical::<K>(&text)?;
    check_canonical::<K>(&mutate(&text, at, how, with))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// For every key type, `decode(s)` succeeds only when `encode(decode(s)) == s`,
    /// over encodings with one character replaced, inserted or removed.
    #[test]
    fn decoders_accept_only_what_encoders_write(
        n: u64, i: i64, t in DateTime::MIN.ticks()..=DateTime::MAX.ticks(), g: u128,
        s in any_string(), s2 in any_string(),
        at: usize, how: u8, with in mutation_char(),
    ) {
        let t = DateTime::from_ticks(t).unwrap();
        check_mutated(&(n as u8), at, how, with)?;
        check_mutated(&(n as u16), at, how, with)?;
        check_mutated(&(n as u32), at, how, with)?;
        check_mutated(&n, at, how, with)?;
        check_mutated(&(i as i8), at, how, with)?;
        check_mutated(&(i as i16), at, how, with)?;
        check_mutated(&(i as i32), at, how, with)?;
        check_mutated(&i, at, how, with)?;
        check_mutated(&(n % 2 == 0), at, how, with)?;
        check_mutated(&t, at, how, with)?;
        check_mutated(&InvertedTime(t), at, how, with)?;
        check_mutated(&uuid::Uuid::from_u128(g), at, how, with)?;
        check_mutated(&Padded::<6>::new(n % 1_000_000).unwrap(), at, how, with)?;
        check_mutated(&(Padded::<6>::new(n % 1_000_000).unwrap(), Padded::<4>::new(n % 10_000).unwrap()), at, how, with)?;
        check_mutated(&s, at, how, with)?;
        check_mutated(&(s.clone(), n as u16), at, how, with)?;
        check_mutated(&(n as u16, s.clone()), at, how, with)?;
        check_mutated(&(s.clone(), s2.clone()), at, how, with)?;
        check_mutated(&(t, s.clone(), i as i32), at, how, with)?;
    }

    /// Arbitrary text, not derived from an encoding.
    #[test]
    fn decoders_refuse_arbitrary_text_they_would_not_write(text in "[-+0-9_: .TZa-fC|%\u{FFFD}\u{FFFC}\u{100}\u{120}]{0,40}") {
        check_canonical::<u8>(&text)?;
        check_canonical::<i16>(&text)?;
        check_canonical::<i64>(&text)?;
        check_canonical::<DateTime>(&text)?;
        check_canonical::<InvertedTime>(&text)?;
        check_canonical::<String>(&text)?;
        check_canonical::<(String, u8)>(&text)?;
        check_canonical::<(String, String)>(&text)?;
        // A key of one part and nothing else is read straight; it reads
        // what the reader of every other layout reads, refusals alike.
        check_bare::<u8>(&text)?;
        check_bare::<i64>(&text)?;
        check_bare::<DateTime>(&text)?;
        check_bare::<InvertedTime>(&text)?;
        check_bare::<String>(&text)?;
    }
}

/// [`KeyTuple::decode`] of one part (the bare layout, read straight) is
/// what the layouts' reader makes of the same text.
fn check_bare<P: KeyPart + PartialEq + std::fmt::Debug>(text: &str) -> Result<(), TestCaseError> {
    let by_reader = {
        let mut reader = KeyReader::new(text);
        RowKeyLayout::NONE
            .read_part::<P>(0, 1, &mut reader)
            .and_then(|value| reader.finish().map(|()| value))
    };
    let straight = P::decode(text);
    prop_assert!(RowKeyLayout::NONE.is_bare());
    match (&straight, &by_reader) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
        (Err(a), Err(b)) => prop_assert_eq!((a.component, &a.reason), (b.component, &b.reason)),
        _ => prop_assert!(false, "{text:?}: {straight:?} against {by_reader:?}"),
    }
    Ok(())
}

/// The case reported from outside: a timestamp with an offset and a short
/// fraction is 28 characters long too.
#[test]
fn datetime_keys_with_another_spelling_are_refused() {
    assert!(<DateTime as KeyTuple>::decode("2020-01-02T03:04:05.12+00:00").is_err());
    assert!(<DateTime as KeyTuple>::decode("2020-01-02T03:04:05.1200000Z").is_ok());
    assert!(<DateTime as KeyTuple>::decode("2020-01-02t03:04:05.1200000Z").is_err());
    assert!(<DateTime as KeyTuple>::decode("2020-01-02T03:04:05.1200000z").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// `Ordered` keeps the full order, control characters included, in any
    /// position, and decodes only what it writes.
    #[test]
    fn ordered_strings_keep_every_order(a in any_string(), b in any_string(), n: u8, at: usize, how: u8, with in mutation_char()) {
        let (oa, ob) = (Ordered(a.clone()), Ordered(b.clone()));
        let order = |x: &Ordered, y: &Ordered| cmp_utf16(x, y);
        check_pair(&oa, &ob, order)?;
        let order2 = |x: &(Ordered, u8), y: &(Ordered, u8)| cmp_utf16(&x.0, &y.0).then(x.1.cmp(&y.1));
        check_pair(&(oa.clone(), n), &(ob.clone(), n), order2)?;
        check_mutated(&oa, at, how, with)?;
        check_mutated(&(oa, n), at, how, with)?;
    }

    /// `Verbatim` writes its text as it is and reads any text back.
    #[test]
    fn verbatim_round_trips(text in any::<String>(), n: u16) {
        let v = Verbatim(text.clone());
        prop_assert_eq!(encode(&v), text.clone());
        prop_assert_eq!(<Verbatim as KeyTuple>::decode(&text).unwrap(), v.clone());
        let key = encode(&(n, v.clone()));
        prop_assert_eq!(<(u16, Verbatim) as KeyTuple>::decode(&key).unwrap(), (n, v));
    }
}

proptest! {
    /// Borrowed text is written exactly as the owned `String` would be.
    #[test]
    fn borrowed_text_encodes_as_owned(text in any_string(), last: bool) {
        let (mut borrowed, mut owned) = (String::new(), String::new());
        write_text_component(&text, &mut borrowed, last);
        write_component(&text, &mut owned, last);
        prop_assert_eq!(borrowed, owned);
    }
}

proptest! {
    /// Text with no character the store forbids is stored without the
    /// escape mark in any position, and as it is wherever it holds no `|`
    /// or `%`; and a verbatim part after a string splits off again.
    #[test]
    fn readable_text_stays_readable(a in any_string(), b in any_string(), n: u16) {
        let plain = |s: &str| !s.chars().any(|c| is_forbidden_key_char(c) || ('\u{FFFD}'..='\u{FFFF}').contains(&c));
        for key in [encode(&a), encode(&(a.clone(), b.clone())), encode(&(a.clone(), n, b.clone())), encode(&(n, a.clone()))] {
            if plain(&a) && plain(&b) {
                prop_assert!(!key.contains(ESCAPE_MARK), "{:?}", key);
            }
        }
        if plain(&a) && !a.contains(['|', '%']) {
            prop_assert_eq!(encode(&(a.clone(), n)), format!("{a}|{:05}", n));
        }
        let key = (a.clone(), Verbatim(b.clone()));
        prop_assert_eq!(<(String, Verbatim) as KeyTuple>::decode(&encode(&key)).unwrap(), key);
    }
}

/// The layouts of a collection: a customer (a string key) heading it, its
/// orders, their lines, and a note nested under the customer with no key
/// of its own.
const CUSTOMER: RowKeyLayout = RowKeyLayout::kind("C").heading_collection();
const ORDER: RowKeyLayout = CUSTOMER.nested("ORD", 1).heading_collection();
const LINE: RowKeyLayout = ORDER.nested("LINE", 2);
const NOTE: RowKeyLayout = CUSTOMER.nested("NOTE", 1);

/// One row of the collection, by kind.
#[derive(Debug, Clone, PartialEq)]
enum Row {
    Customer(String),
    Order(String, u32),
    Line(String, u32, u16),
    Note(String),
}

impl Row {
    fn customer(&self) -> &str {
        match self {
            Row::Customer(c) | Row::Order(c, _) | Row::Line(c, _, _) | Row::Note(c) => c,
        }
    }

    fn encode(&self) -> String {
        match self {
            Row::Customer(c) => CUSTOMER.encode(c),
            Row::Order(c, o) => ORDER.encode(&(c.clone(), *o)),
            Row::Line(c, o, l) => LINE.encode(&(c.clone(), *o, *l)),
            Row::Note(c) => NOTE.encode(c),
        }
    }

    /// Every layout that decodes `key`, as rows.
    fn decode_all(key: &str) -> Vec<Row> {
        let mut rows = Vec::new();
        if let Ok(c) = String::decode_laid_out(key, &CUSTOMER) {
            rows.push(Row::Customer(c));
        }
        if let Ok((c, o)) = <(String, u32)>::decode_laid_out(key, &ORDER) {
            rows.push(Row::Order(c, o));
        }
        if let Ok((c, o, l)) = <(String, u32, u16)>::decode_laid_out(key, &LINE) {
            rows.push(Row::Line(c, o, l));
        }
        if let Ok(c) = String::decode_laid_out(key, &NOTE) {
            rows.push(Row::Note(c));
        }
        rows
    }
}

fn any_row() -> impl Strategy<Value = Row> {
    let customer = prop_oneof![
        Just("acme".to_string()),
        Just("acme2".to_string()),
        Just("acme corp".to_string()),
        Just("acme|eu".to_string()),
        Just("acme/eu".to_string()),
        Just("acme%".to_string()),
        any_string(),
    ];
    (customer, 0..4u8, any::<u32>(), any::<u16>()).prop_map(|(c, kind, o, l)| match kind {
        0 => Row::Customer(c),
        1 => Row::Order(c, o % 3),
        2 => Row::Line(c, o % 3, l % 3),
        _ => Row::Note(c),
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Every row of a collection has a key no row of another kind (or of the
    /// same kind with other values) has, and decodes under its own layout
    /// only.
    #[test]
    fn collection_keys_are_injective_across_kinds(a in any_row(), b in any_row()) {
        let (ka, kb) = (a.encode(), b.encode());
        prop_assert_eq!(ka == kb, a == b, "{:?} and {:?} both stored as {:?}", a, b, ka);
        prop_assert_eq!(Row::decode_all(&ka), vec![a.clone()], "{:?} as {:?}", a, ka);
        prop_assert!(!ka.chars().any(is_forbidden_key_char));
    }

    /// The range of a customer's collection holds its own row and every row
    /// nested under it, and no other customer's rows; in it each row sorts
    /// right before the rows nested under it.
    #[test]
    fn collection_ranges_hold_exactly_their_rows(head in any_row(), rows in proptest::collection::vec(any_row(), 0..16)) {
        let c = head.customer().to_string();
        let own = CUSTOMER.encode(&c);
        let inner = CUSTOMER.opened().encode(&c);
        let separator = inner.chars().last().unwrap();
        let (_, end) = prefix_range(inner, separator);
        for row in rows.iter().chain([&head]) {
            let key = row.encode();
            let inside = cmp_utf16(&key, &own) != Ordering::Less && cmp_utf16(&key, &end) == Ordering::Less;
            prop_assert_eq!(inside, row.customer() == c, "{:?} -> {:?} in [{:?}, {:?})", row, key, own, end);
        }
        // An order's lines follow it, before the next order.
        let order = ORDER.encode(&(c.clone(), 1u32));
        let line = LINE.encode(&(c.clone(), 1u32, 0u16));
        let next = ORDER.encode(&(c.clone(), 2u32));
        prop_assert!(cmp_utf16(&own, &order) == Ordering::Less);
        prop_assert!(cmp_utf16(&order, &line) == Ordering::Less);
        prop_assert!(cmp_utf16(&line, &next) == Ordering::Less);
    }
}

#[test]
fn collection_keys_read_as_written() {
    assert_eq!(CUSTOMER.encode(&"acme".to_string()), "C_acme|");
    assert_eq!(
        LINE.encode(&("acme".to_string(), 7u32, 1u16)),
        "C_acme|ORD_0000000007_LINE_00001"
    );
    assert_eq!(NOTE.encode(&"acme".to_string()), "C_acme|NOTE_");
    let employee = RowKeyLayout::kind("EMP").heading_collection();
    let review = employee.nested("REV", 1);
    assert_eq!(employee.encode(&223u32), "EMP_0000000223");
    assert_eq!(
        review.encode(&(223u32, 2012u16)),
        "EMP_0000000223_REV_02012"
    );
}

/// Templates with texts before, between and after the fields.
const TEMPLATE: RowKeyLayout = RowKeyLayout::template()
    .literal("rev:", 0)
    .literal("-", 1)
    .literal(".json", 2);
const BARE_TEMPLATE: RowKeyLayout = RowKeyLayout::template().literal("_", 1);

/// Whenever `text` decodes under `layout`, it is the one text its value
/// encodes to.
fn check_canonical_laid_out<K: KeyTuple + std::fmt::Debug>(
    text: &str,
    layout: &RowKeyLayout,
) -> Result<(), TestCaseError> {
    if let Ok(value) = K::decode_laid_out(text, layout) {
        prop_assert_eq!(
            layout.encode(&value),
            text,
            "{:?} decoded to {:?}",
            text,
            value
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// A template's keys decode back, and only what it writes decodes.
    #[test]
    fn templates_round_trip_and_decode_only_what_they_write(
        n: u32, s in any_string(), v in any::<String>(), at: usize, how: u8, with in mutation_char(),
    ) {
        let key = (n, s.clone());
        let text = TEMPLATE.encode(&key);
        prop_assert!(text.starts_with("rev:") && text.ends_with(".json"));
        prop_assert_eq!(<(u32, String)>::decode_laid_out(&text, &TEMPLATE).unwrap(), key);
        check_canonical_laid_out::<(u32, String)>(&mutate(&text, at, how, with), &TEMPLATE)?;
        let key = (n, Verbatim(v.clone()));
        let text = BARE_TEMPLATE.encode(&key);
        prop_assert_eq!(text.clone(), format!("{n:010}_{v}"));
        prop_assert_eq!(<(u32, Verbatim)>::decode_laid_out(&text, &BARE_TEMPLATE).unwrap(), key);
        check_canonical_laid_out::<(u32, Verbatim)>(&mutate(&text, at, how, with), &BARE_TEMPLATE)?;
    }
}
