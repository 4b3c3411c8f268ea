use serde_json::json;

use super::*;
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity};
use crate::error::InvalidInput;
use crate::props::MemberSlot;
use crate::value::Value;
use serde_json::Value as Json;

#[test]
fn a_position_hint_is_checked_not_trusted() {
    use crate::props::PropertySource;
    const NAMES: &[&str] = &["A", "B"];
    let slot = |name: &str| MemberSlot::search(NAMES, name);
    let text = r#"{"PartitionKey":"p","RowKey":"r","B":"b","A":1,"C":true}"#;
    let mut buffer = SlotBuffer::new();
    let mut fields = fields_from_str(text, NAMES, slot, None, &mut buffer).unwrap();
    // A wrong or out-of-range hint falls back to the search by name.
    assert_eq!(fields.take_at(0, "B"), Some(Value::String("b".into())));
    assert_eq!(fields.take_at(7, "A"), Some(Value::Int32(1)));
    assert_eq!(fields.take_at(0, "A"), None);
    assert_eq!(fields.take_at(2, "C"), None);
}

/// The typed reader's source converts a value when it is taken, keeps
/// the first that does not convert, converts what is left when one is
/// read by reference, and counts what an entity would count; for a type
/// of few fields and for one whose slots do not fit on the stack.
#[test]
fn typed_slots_convert_when_taken() {
    use crate::props::PropertySource;
    fn names_of(count: usize) -> &'static [&'static str] {
        Vec::leak(
            (0..count)
                .map(|i| &*String::leak(format!("F{i}")))
                .collect(),
        )
    }
    static FEW: std::sync::LazyLock<&'static [&'static str]> =
        std::sync::LazyLock::new(|| names_of(5));
    static MANY: std::sync::LazyLock<&'static [&'static str]> =
        std::sync::LazyLock::new(|| names_of(40));
    let few: fn(&str) -> MemberSlot = |name| MemberSlot::search(&FEW, name);
    let many: fn(&str) -> MemberSlot = |name| MemberSlot::search(&MANY, name);
    for (names, slot) in [(*FEW, few), (*MANY, many)] {
        let fields_count = names.len();
        let text = format!(
            r#"{{"PartitionKey":"p","RowKey":"r","_Kind":"K","_Version":1,"F0":"a","F1":null,"F2":"x","F2@odata.type":"Edm.Int64","F3":"2020-01-02T03:04:05Z","F3@odata.type":"Edm.DateTime","F{last}":7}}"#,
            last = fields_count - 1
        );
        let read = |buffer| fields_from_str(&text, names, slot, Some("K"), buffer).unwrap();

        // Taken in order: a value that does not convert is kept, not lost.
        let mut buffer = SlotBuffer::new();
        let mut fields = read(&mut buffer);
        // Kind, version, F0, F2, F3 and the last; `null` is absent.
        assert_eq!(fields.count(), 6);
        assert_eq!(fields.take_at(0, "F0"), Some(Value::String("a".into())));
        assert_eq!(fields.take_at(1, "F1"), None);
        assert_eq!(fields.take_at(2, "F2"), None, "not an Int64");
        let dt = DateTime::parse("2020-01-02T03:04:05Z").unwrap();
        assert_eq!(fields.take_at(3, "F3"), Some(Value::DateTime(dt)));
        assert!(matches!(
            fields.value_error(),
            Some(InvalidInput::PropertyValue { property, .. }) if property == "F2"
        ));
        assert!(fields.value_error().is_none(), "reported once");

        // Taken out of order, one twice, the bad one never: refused.
        let mut buffer = SlotBuffer::new();
        let mut fields = read(&mut buffer);
        assert_eq!(fields.take_at(3, "F3"), Some(Value::DateTime(dt)));
        assert_eq!(fields.take_at(0, "F0"), Some(Value::String("a".into())));
        assert_eq!(fields.take_at(0, "F0"), None);
        assert_eq!(fields.take_at(1, "F1"), None);
        assert!(matches!(
            fields.value_error(),
            Some(InvalidInput::PropertyValue { property, .. }) if property == "F2"
        ));

        // Never taken: still refused.
        let mut buffer = SlotBuffer::new();
        let mut fields = read(&mut buffer);
        assert!(matches!(
            fields.value_error(),
            Some(InvalidInput::PropertyValue { property, .. }) if property == "F2"
        ));

        // Read by reference: the rest is converted at once, a taken
        // value stays taken, and the error is the same.
        let mut buffer = SlotBuffer::new();
        let mut fields = read(&mut buffer);
        assert_eq!(fields.take_at(0, "F0"), Some(Value::String("a".into())));
        assert_eq!(fields.get("F3"), Some(&Value::DateTime(dt)));
        assert_eq!(fields.get("F0"), None);
        assert_eq!(
            fields.get(crate::props::VERSION_PROPERTY),
            Some(&Value::Int32(1))
        );
        let last = names[fields_count - 1];
        assert_eq!(
            fields.take_at(fields_count - 1, last),
            Some(Value::Int32(7))
        );
        assert_eq!(fields.get(last), None);
        assert!(fields.present().is_err());
        assert!(matches!(
            fields.value_error(),
            Some(InvalidInput::PropertyValue { property, .. }) if property == "F2"
        ));

        // Every value good: nothing to report, whichever way it was read.
        let good = text.replace(r#""F2":"x""#, r#""F2":"12""#);
        let mut buffer = SlotBuffer::new();
        let mut fields = fields_from_str(&good, names, slot, Some("K"), &mut buffer).unwrap();
        assert_eq!(fields.get("F2"), Some(&Value::Int64(12)));
        let present: Vec<_> = fields.present().unwrap().map(|(n, _)| n).collect();
        assert_eq!(present, ["_Version", "F0", "F2", "F3", last]);
        assert!(fields.value_error().is_none());
    }
}

fn every_type() -> Entity {
    Entity::new("p", "r1")
        .with("S", "hello")
        .with("I32", 42)
        .with("D", 1.5)
        .with("I64", i64::MAX)
        .with("B", true)
        .with(
            "Dt",
            DateTime::parse("2020-01-02T03:04:05.1234567Z").unwrap(),
        )
        .with(
            "G",
            uuid::Uuid::parse_str("c9da6455-213d-42c9-9a79-3e9149a57833").unwrap(),
        )
        .with("Bin", vec![1u8, 2, 3, 255])
        .with("Dnan", f64::NAN)
}

/// The Insert Entity request body the service documents, less `Nul` (nulls are not stored)
/// and with `D` annotated as the SDKs send it.
#[test]
fn writes_the_documented_request() {
    let expected = json!({"PartitionKey":"p","RowKey":"r1","S":"hello","I32":42,"D":1.5,"D@odata.type":"Edm.Double",
        "I64":"9223372036854775807","I64@odata.type":"Edm.Int64","B":true,
        "Dt":"2020-01-02T03:04:05.1234567Z","Dt@odata.type":"Edm.DateTime",
        "G":"c9da6455-213d-42c9-9a79-3e9149a57833","G@odata.type":"Edm.Guid",
        "Bin":"AQID/w==","Bin@odata.type":"Edm.Binary",
        "Dnan":"NaN","Dnan@odata.type":"Edm.Double"});
    assert_eq!(to_json(&every_type()), expected);
}

/// The Insert Entity 201 response body the service documents, byte for byte.
#[test]
fn reads_the_documented_response() {
    let body = r#"{"odata.metadata":"http://127.0.0.1:20002/devstoreaccount1/$metadata#types/@Element",
 "odata.etag":"W/\"datetime'2026-11-21T22%3A36%3A51.8779396Z'\"",
 "PartitionKey":"p","RowKey":"r1","S":"hello","I32":42,"D":1.5,
 "I64@odata.type":"Edm.Int64","I64":"9223372036854775807","B":true,
 "Dt@odata.type":"Edm.DateTime","Dt":"2020-01-02T03:04:05.1234567Z",
 "G@odata.type":"Edm.Guid","G":"c9da6455-213d-42c9-9a79-3e9149a57833",
 "Bin@odata.type":"Edm.Binary","Bin":"AQID/w==",
 "Dnan@odata.type":"Edm.Double","Dnan":"NaN",
 "Timestamp":"2026-11-21T22:36:51.8779396Z"}"#;
    let read = from_str(body).unwrap();
    let mut expected = every_type();
    expected.etag = Some(ETag::new(
        "W/\"datetime'2026-11-21T22%3A36%3A51.8779396Z'\"",
    ));
    expected.timestamp = Some(DateTime::parse("2026-11-21T22:36:51.8779396Z").unwrap());
    assert_eq!(read.partition_key, expected.partition_key);
    assert_eq!(read.etag, expected.etag);
    assert_eq!(read.timestamp, expected.timestamp);
    assert_eq!(read.properties.len(), expected.properties.len());
    for (name, value) in expected.properties.iter() {
        assert_eq!(read.get(name), Some(value), "{name}");
    }
    assert_eq!(read.etag.unwrap().timestamp(), read.timestamp);
}

/// A response without metadata (captured from Azurite), types that need an
/// annotation come back as plain strings.
#[test]
fn reads_nometadata_as_strings() {
    let body = r#"{"PartitionKey":"p","RowKey":"r1","S":"hello","I32":42,"I64":"9223372036854775807","B":true}"#;
    let e = from_str(body).unwrap();
    assert_eq!(
        e.get("I64"),
        Some(&Value::String("9223372036854775807".into()))
    );
    assert_eq!(e.get("I32"), Some(&Value::Int32(42)));
}

#[test]
fn unannotated_numbers() {
    let e = from_str(r#"{"PartitionKey":"p","RowKey":"r","a":3,"b":2.75,"c":3000000000,"n":null}"#)
        .unwrap();
    assert_eq!(e.get("a"), Some(&Value::Int32(3)));
    assert_eq!(e.get("b"), Some(&Value::Double(2.75)));
    assert_eq!(e.get("c"), Some(&Value::Int64(3_000_000_000)));
    assert_eq!(e.get("n"), None);
}

#[test]
fn doubles_keep_their_type_and_specials() {
    for v in [
        1.0,
        0.0,
        -0.5,
        1e300,
        1.23456789012346e24,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        let e = Entity::new("p", "r").with("d", v);
        let back = from_str(&to_string(&e)).unwrap();
        assert_eq!(back.get("d"), Some(&Value::Double(v)), "{v}");
    }
    let e = from_str(r#"{"PartitionKey":"p","RowKey":"r","d":"1.23456789012346e+24","d@odata.type":"Edm.Double"}"#)
        .unwrap();
    assert_eq!(e.get("d"), Some(&Value::Double(1.23456789012346e24)));
}

#[test]
fn rejects_bad_values() {
    for body in [
        r#"{"PartitionKey":"p","RowKey":"r","x":"abc","x@odata.type":"Edm.Int64"}"#,
        r#"{"PartitionKey":"p","RowKey":"r","x":"xyz","x@odata.type":"Edm.Guid"}"#,
        r#"{"PartitionKey":"p","RowKey":"r","x":"!!notbase64!!","x@odata.type":"Edm.Binary"}"#,
        r#"{"PartitionKey":"p","RowKey":"r","x":"not a date","x@odata.type":"Edm.DateTime"}"#,
        r#"{"PartitionKey":"p","RowKey":"r","x":"1600-01-01T00:00:00Z","x@odata.type":"Edm.DateTime"}"#,
        r#"{"PartitionKey":"p","RowKey":"r","x":1.5,"x@odata.type":"Edm.Int32"}"#,
        r#"{"PartitionKey":"p","RowKey":"r","x":3000000000,"x@odata.type":"Edm.Int32"}"#,
        r#"{"PartitionKey":"p","RowKey":"r","x":"1","x@odata.type":"Edm.Decimal"}"#,
        r#"{"PartitionKey":"p","RowKey":"r","x":"INFX","x@odata.type":"Edm.Double"}"#,
        r#"{"PartitionKey":"p","RowKey":"r","x":[1]}"#,
        r#"{"PartitionKey":1,"RowKey":"r"}"#,
        r#"{"RowKey":"r"}"#,
        r#"[1, 2]"#,
    ] {
        assert!(from_str(body).is_err(), "{body} accepted");
    }
}

/// Strings with escapes take the owned path, the rest are borrowed from
/// the input; both must read the same.
#[test]
fn escaped_and_plain_strings_read_alike() {
    let body = r#"{"PartitionKey":"p\"q","RowKey":"r\u00e9","s":"a\nb","t":"plain","n":"\u0031\u0032","n@odata.type":"Edm.Int64","odata.etag":"W/\"x\""}"#;
    let entity = from_str(body).unwrap();
    assert_eq!(entity.partition_key, "p\"q");
    assert_eq!(entity.row_key, "r\u{e9}");
    assert_eq!(
        entity.properties.get("s"),
        Some(&Value::String("a\nb".into()))
    );
    assert_eq!(
        entity.properties.get("t"),
        Some(&Value::String("plain".into()))
    );
    assert_eq!(entity.properties.get("n"), Some(&Value::Int64(12)));
    assert_eq!(entity.etag.as_ref().map(ETag::as_str), Some("W/\"x\""));
    let tree: Json = serde_json::from_str(body).unwrap();
    assert_eq!(from_json(&tree).unwrap(), entity);
    assert_eq!(
        from_str(&to_string(&entity)).unwrap().properties,
        entity.properties
    );
}

#[test]
fn reads_query_responses() {
    let body = r#"{"odata.metadata":"x","value":[{"PartitionKey":"p","RowKey":"1","n":"5","n@odata.type":"Edm.Int64"},{"PartitionKey":"p","RowKey":"2","s":"a\"b"}],"odata.nextLink":"y"}"#;
    let (entities, undecodable) = entities_from_str(body).unwrap();
    assert!(undecodable.is_empty());
    assert_eq!(entities.len(), 2);
    assert_eq!(entities[0].properties.get("n"), Some(&Value::Int64(5)));
    assert_eq!(entities[1].row_key, "2");
    assert_eq!(
        entities[1].properties.get("s"),
        Some(&Value::String("a\"b".into()))
    );
    assert_eq!(
        entities_from_str(r#"{"value":[]}"#).unwrap(),
        (Vec::<Entity>::new(), Vec::new())
    );
    for bad in [
        r#"{"odata.metadata":"x"}"#,
        r#"{"value":[],"value":[{"PartitionKey":"p","RowKey":"r"}]}"#,
        r#"{"value":[{"PartitionKey":"p","RowKey":"r"}],"x":1,"value":[]}"#,
        r#"{"value":[1]}"#,
        r#"{"value":[]} trailing"#,
        "[]",
    ] {
        assert!(
            matches!(
                entities_from_str(bad),
                Err(InvalidInput::Json {
                    expected: "a query response",
                    ..
                })
            ),
            "{bad}"
        );
    }
    // A row that is not an object, or not JSON: said so, not blamed on a
    // property.
    for bad in ["[1]", "{\"PartitionKey\":", "{} {}"] {
        let err = row_from_str(bad).unwrap_err();
        assert!(
            matches!(
                err,
                InvalidInput::Json {
                    expected: "a JSON object",
                    ..
                }
            ),
            "{bad}: {err:?}"
        );
        assert!(err.to_string().starts_with("not a JSON object: "), "{err}");
    }
}

/// A row that is JSON but no valid entity (a DateTime in the year 1000,
/// which Azurite stores; a row without a PartitionKey) is set apart with
/// its keys and reason; the page's other rows are read.
#[test]
fn an_unreadable_row_costs_no_other_row() {
    let body = r#"{"value":[
        {"PartitionKey":"p","RowKey":"1","v":1},
        {"PartitionKey":"p","RowKey":"2","t":"1000-01-01T00:00:00Z","t@odata.type":"Edm.DateTime"},
        {"RowKey":"3"},
        {"PartitionKey":"p","RowKey":"4","g":"not a guid","g@odata.type":"Edm.Guid"},
        {"PartitionKey":"p","RowKey":"5","v":5}
    ]}"#;
    let (entities, undecodable) = entities_from_str(body).unwrap();
    let read: Vec<&str> = entities.iter().map(|e| e.row_key.as_str()).collect();
    assert_eq!(read, ["1", "5"]);
    let failed: Vec<(&str, &str)> = undecodable
        .iter()
        .map(|r| (r.partition_key.as_str(), r.row_key.as_str()))
        .collect();
    assert_eq!(failed, [("p", "2"), ("", "3"), ("p", "4")]);
    assert!(
        matches!(undecodable[0].reason, InvalidInput::DateTime { .. }),
        "{:?}",
        undecodable[0]
    );
}

#[test]
fn duplicate_members_are_refused() {
    let body = r#"{"PartitionKey":"p","RowKey":"r","a":1,"b":2,"a":3}"#;
    assert_eq!(
        from_str(body),
        Err(InvalidInput::DuplicateProperty { name: "a".into() })
    );
}

#[test]
fn encoded_len_matches() {
    let e = every_type()
        .with(
            "Esc",
            "quote \" back \\ nl \n tab \t bell \u{7} é \u{1F600}",
        )
        .with("Neg", f64::NEG_INFINITY)
        .with("Inf", f64::INFINITY)
        .with("Tiny", 5e-324)
        .with("Empty", Vec::<u8>::new())
        .with("Odd", vec![1u8, 2, 3, 4, 5]);
    assert_eq!(encoded_len(&e), to_string(&e).len());
}

/// serde_json's default float parser may miss by one unit in the last
/// place; `float_roundtrip` makes it exact.
#[test]
fn doubles_read_back_exactly() {
    let e = Entity::new("p", "r").with("D", 5.280_936_204_421_704_6e-110);
    assert_eq!(from_str(&to_string(&e)).unwrap(), e);
}

#[test]
fn escapes_are_counted_anywhere_in_a_long_text() {
    // The check runs sixteen bytes at a time: a character to escape in
    // any chunk, or in the bytes after the last one, is found.
    for len in [15, 16, 17, 40, 600] {
        for at in 0..len {
            for special in ['"', '\\', '\n', '\u{1}'] {
                let mut text: Vec<char> = vec!['a'; len];
                text[at] = special;
                let text: String = text.into_iter().collect();
                let e = Entity::new("p", "r").with("S", text.as_str());
                assert_eq!(encoded_len_bound(&e), to_string(&e).len(), "{len} {at}");
            }
        }
        let e = Entity::new("p", "r").with("S", "é".repeat(len));
        assert_eq!(encoded_len_bound(&e), to_string(&e).len());
    }
}

proptest::proptest! {
    #[test]
    fn encoded_len_matches_any_text(pk in "\\PC{0,6}", rk in ".{0,6}", s in "(?s).{0,12}", d in proptest::num::f64::ANY, i in proptest::prelude::any::<i64>()) {
        let e = Entity::new(pk, rk).with("S", s).with("D", d).with("I", i).with("J", i as i32);
        proptest::prop_assert_eq!(encoded_len(&e), to_string(&e).len());
        // Every value reads back exactly, doubles to the last bit.
        proptest::prop_assert_eq!(&row_from_str(&to_string(&e)).unwrap(), &e);
        let bound = encoded_len_bound(&e);
        proptest::prop_assert!(bound >= encoded_len(&e), "{} < {}", bound, encoded_len(&e));
        // Loose only by the widths of the four numbers and annotations.
        proptest::prop_assert!(bound <= encoded_len(&e) + 80, "{} vs {}", bound, encoded_len(&e));
    }

    #[test]
    fn encoded_len_bound_holds_for_every_type(
        s in "(?s)\\PC{0,3}[\\x00-\\x1f\"\\\\]{0,4}.{0,8}",
        b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        d in proptest::num::f64::ANY,
        i in proptest::prelude::any::<i64>(),
        g in proptest::prelude::any::<u128>(),
        t in proptest::prelude::any::<u32>(),
        flag in proptest::prelude::any::<bool>(),
    ) {
        let e = Entity::new("p\"k", "r\\k")
            .with("S", s)
            .with("B", b)
            .with("D", d)
            .with("I", i)
            .with("J", i as i32)
            .with("G", uuid::Uuid::from_u128(g))
            .with("T", DateTime::from_unix_nanos(i128::from(t) * 1_000_000_123).unwrap())
            .with("F", flag);
        let exact = to_string(&e).len();
        proptest::prop_assert!(encoded_len_bound(&e) >= exact, "{} < {}", encoded_len_bound(&e), exact);
    }
}
