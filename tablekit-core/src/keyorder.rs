//! The store's string order: ordinal by UTF-16 code unit.
//!
//! Rust's `str` order is by code point (equal to UTF-8 byte order). The two
//! differ only when a character in U+E000..=U+FFFF meets a supplementary
//! character (U+10000 and above): in UTF-16 the supplementary character starts
//! with a surrogate (0xD800..=0xDBFF), which sorts *before* U+E000.

use std::cmp::Ordering;

/// Whether two texts are equal, at compile time (for the derive's checks
/// and constant layouts).
#[doc(hidden)]
pub const fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Length of `s` in UTF-16 code units, the unit of the store's length limits.
#[inline]
pub fn utf16_len(s: &str) -> usize {
    // ASCII is the common case, and one vectorised check decides it.
    if s.is_ascii() {
        return s.len();
    }
    s.chars().map(char::len_utf16).sum()
}

/// Compares two strings by UTF-16 code units, as the store orders keys.
///
/// ```
/// use std::cmp::Ordering;
/// use tablekit::keyorder::cmp_utf16;
/// assert_eq!(cmp_utf16("B", "a"), Ordering::Less); // case-sensitive, upper first
/// // U+10000 sorts before U+E000 in UTF-16, after it by code point.
/// assert_eq!(cmp_utf16("\u{10000}", "\u{E000}"), Ordering::Less);
/// ```
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let n = ab.len().min(bb.len());
    // The shared prefix, eight bytes at a time: keys often share a long one.
    let mut i = 0;
    while i + 8 <= n && ab[i..i + 8] == bb[i..i + 8] {
        i += 8;
    }
    let Some(first_diff) = ab[i..n].iter().zip(&bb[i..n]).position(|(x, y)| x != y) else {
        return ab.len().cmp(&bb.len());
    };
    let (x, y) = (ab[i + first_diff], bb[i + first_diff]);
    // After a shared prefix both bytes lead a character, or both continue
    // one with the same lead byte. UTF-8 byte order is code point order,
    // which is UTF-16 order but where a character of U+E000..=U+FFFF (lead
    // byte 0xEE or 0xEF) meets a supplementary one (lead byte 0xF0..): in
    // UTF-16 the supplementary one starts with a surrogate and sorts first.
    let private = |b: u8| (0xEE..=0xEF).contains(&b);
    let supplementary = |b: u8| b >= 0xF0;
    if private(x) && supplementary(y) {
        Ordering::Greater
    } else if supplementary(x) && private(y) {
        Ordering::Less
    } else {
        x.cmp(&y)
    }
}

/// The least text that sorts (by UTF-16 code units) after every text that
/// starts with `prefix`: the exclusive end of a prefix range. `None` when no
/// text does (a prefix of U+FFFF characters only, or an empty one).
///
/// ```
/// use tablekit::keyorder::prefix_end;
/// assert_eq!(prefix_end("EMP_").as_deref(), Some("EMP`"));
/// assert_eq!(prefix_end("a\u{FFFF}").as_deref(), Some("b"));
/// assert_eq!(prefix_end(""), None);
/// ```
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        // The next character in UTF-16 order: the BMP below the surrogates,
        // then the supplementary planes (which start with a surrogate), then
        // U+E000–U+FFFF.
        let next = match last {
            '\u{D7FF}' => Some('\u{10000}'),
            '\u{10FFFF}' => Some('\u{E000}'),
            '\u{FFFF}' => None,
            c => char::from_u32(c as u32 + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// Thirty keys in the order the Azurite emulator returned them: mixed
/// case, Latin-1, the private-use area and supplementary characters, sorted
/// by UTF-16 code units.
pub const VERIFIED_ORDER: [&str; 30] = [
    " ",
    "!",
    "0",
    "9",
    "A",
    "B",
    "Z",
    "_",
    "a",
    "a b",
    "a-",
    "a.",
    "aa",
    "ab",
    "b",
    "o'k",
    "ss",
    "z",
    "~",
    "\u{A0}",
    "É",
    "ß",
    "ä",
    "é",
    "ÿ",
    "Ā",
    "\u{10000}",
    "\u{1F600}",
    "\u{E000}",
    "\u{FF21}",
];

/// A string ordered by UTF-16 code units, for use as a map key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Utf16Key(pub Box<str>);

impl Utf16Key {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Ord for Utf16Key {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_utf16(&self.0, &other.0)
    }
}

impl PartialOrd for Utf16Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::borrow::Borrow<str> for Utf16Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Utf16Key {
    fn from(s: &str) -> Utf16Key {
        Utf16Key(s.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn utf16_order(a: &str, b: &str) -> Ordering {
        a.encode_utf16().cmp(b.encode_utf16())
    }

    #[test]
    fn azurite_verified_order() {
        let mut keys: Vec<&str> = VERIFIED_ORDER.iter().rev().copied().collect();
        keys.sort_by(|a, b| cmp_utf16(a, b));
        assert_eq!(keys, VERIFIED_ORDER);
    }

    /// The pairs reported from outside: U+E000..=U+FFFF against the last
    /// supplementary plane.
    #[test]
    fn private_use_planes_do_not_alias() {
        assert_eq!(cmp_utf16("\u{E000}", "\u{10E000}"), Ordering::Greater);
        assert_eq!(cmp_utf16("\u{10FFFD}", "\u{F8FF}"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{FFFF}", "\u{10FFFF}"), Ordering::Greater);
        assert_eq!(cmp_utf16("\u{10E000}", "\u{10E000}"), Ordering::Equal);
    }

    #[test]
    fn utf16_len_counts_surrogates() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("\u{1F600}"), 2);
        assert_eq!(utf16_len("a\u{1F600}\u{E000}"), 4);
    }

    proptest! {
        #[test]
        fn matches_utf16_code_unit_order(a in "\\PC{0,8}", b in "\\PC{0,8}") {
            prop_assert_eq!(cmp_utf16(&a, &b), utf16_order(&a, &b));
        }

        /// Any characters at all, the private-use planes and U+E000..=U+FFFF
        /// included (`\\PC` leaves out private-use and unassigned code points).
        #[test]
        fn matches_over_all_code_points(a in proptest::collection::vec(any::<char>(), 0..6),
                                        b in proptest::collection::vec(any::<char>(), 0..6)) {
            let (a, b): (String, String) = (a.into_iter().collect(), b.into_iter().collect());
            prop_assert_eq!(cmp_utf16(&a, &b), utf16_order(&a, &b));
        }

        /// Strings that share a prefix and differ in one character from each
        /// end of the code space.
        #[test]
        fn matches_across_planes(prefix in "[a\u{E000}\u{10E000}]{0,12}",
                                 x in prop_oneof![0xE000u32..=0xFFFF, 0x10000u32..=0x10FFFF, 0u32..0xD800],
                                 y in prop_oneof![0xE000u32..=0xFFFF, 0x10000u32..=0x10FFFF, 0u32..0xD800]) {
            let (x, y) = (char::from_u32(x).unwrap_or('x'), char::from_u32(y).unwrap_or('y'));
            let (a, b) = (format!("{prefix}{x}"), format!("{prefix}{y}"));
            prop_assert_eq!(cmp_utf16(&a, &b), utf16_order(&a, &b));
        }

        #[test]
        fn matches_on_tricky_alphabet(a in "[a\u{E000}\u{FFFF}\u{10000}\u{1F600}\u{D7FF}]{0,5}",
                                      b in "[a\u{E000}\u{FFFF}\u{10000}\u{1F600}\u{D7FF}]{0,5}") {
            prop_assert_eq!(cmp_utf16(&a, &b), utf16_order(&a, &b));
            prop_assert_eq!(utf16_len(&a), a.encode_utf16().count());
        }
    }
}

#[cfg(test)]
mod prefix_end_tests {
    use super::*;
    use proptest::prelude::*;

    fn edge_text() -> impl Strategy<Value = String> {
        let c = prop_oneof![
            prop::sample::select(vec![
                'a',
                'b',
                '`',
                '_',
                '\u{D7FF}',
                '\u{E000}',
                '\u{FFFE}',
                '\u{FFFF}',
                '\u{10000}',
                '\u{10FFFF}',
                '\u{103FF}'
            ]),
            any::<char>(),
        ];
        proptest::collection::vec(c, 0..4).prop_map(|cs| cs.into_iter().collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        /// `[prefix, prefix_end(prefix))` holds exactly the texts that start with `prefix`.
        #[test]
        fn prefix_ranges_are_exact(prefix in edge_text(), tail in edge_text(), other in edge_text()) {
            let end = prefix_end(&prefix);
            for text in [format!("{prefix}{tail}"), other.clone(), format!("{other}{tail}")] {
                let inside = cmp_utf16(&text, &prefix) != Ordering::Less
                    && end.as_deref().is_none_or(|end| cmp_utf16(&text, end) == Ordering::Less);
                prop_assert_eq!(inside, text.starts_with(&prefix), "{:?} in [{:?}, {:?})", text, prefix, end);
            }
        }
    }
}

/// Whether a byte of a key's text is plain: printable ASCII other than the
/// four characters the store refuses in keys (`/`, `\`, `#`, `?`). A key
/// of plain bytes needs no further look: it holds no forbidden character,
/// and a string key part needs no escape. One table lookup per byte, for
/// the checks every write and every typed read makes of its keys.
#[doc(hidden)]
pub fn is_plain_key_byte(b: u8) -> bool {
    const PLAIN: [bool; 256] = {
        let mut table = [false; 256];
        let mut b = 0x20;
        while b < 0x7f {
            table[b] = !matches!(b as u8, b'/' | b'\\' | b'#' | b'?');
            b += 1;
        }
        table
    };
    PLAIN[usize::from(b)]
}
