//! The typed wire-JSON path: `schema::to_json` writes what `to_entity` then
//! `json::to_string` write, checks what the service checks, and refuses with
//! the same typed errors.

use proptest::prelude::*;
use tablekit::json::{self, EntityWriter};
use tablekit::schema::{self, PropertySink};
use tablekit::{DateTime, Error, InvalidInput, SchemaError, TableEntity, TableFields, ValueRef};

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Reviews",
    kind = "REV",
    version = 2,
    rename_all = "PascalCase"
)]
struct Review {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key = 0)]
    employee: u32,
    #[tablekit(row_key = 1)]
    year: i16,
    name: String,
    rating: i32,
    small: u8,
    salary: f64,
    ratio: f32,
    active: bool,
    hired: DateTime,
    badge: tablekit::uuid::Uuid,
    score: i64,
    big: u64,
    count: u32,
    photo: Vec<u8>,
    notes: Option<String>,
    nothing: Option<i64>,
}

#[derive(TableFields, Debug, Clone, PartialEq, Default)]
struct Address {
    street: String,
    zip: Option<u32>,
}

/// Every role that makes names at run time, or converts values.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "People")]
struct Person {
    #[tablekit(partition_key)]
    team: String,
    #[tablekit(row_key)]
    id: u64,
    #[tablekit(flatten(prefix = "Home", delimiter = "_"))]
    home: Address,
    #[tablekit(series)]
    hourly: Vec<f64>,
    #[tablekit(json)]
    tags: Vec<String>,
    #[tablekit(with = upper)]
    code: String,
}

mod common;
use common::upper;

fn review(name: String, notes: Option<String>, photo: Vec<u8>, salary: f64) -> Review {
    Review {
        department: "Sales \"EU\" / North".into(),
        employee: 7,
        year: -3,
        name,
        rating: -5,
        small: 200,
        salary,
        ratio: 0.25,
        active: true,
        hired: DateTime::parse("2020-01-02T03:04:05.1234567Z").unwrap(),
        badge: tablekit::uuid::Uuid::from_u128(0xc9da6455_213d_42c9_9a79_3e9149a57833),
        score: i64::MIN,
        big: u64::MAX,
        count: u32::MAX,
        photo,
        notes,
        nothing: None,
    }
}

fn person(hourly: Vec<f64>) -> Person {
    Person {
        team: "core".into(),
        id: 42,
        home: Address {
            street: "Main St".into(),
            zip: Some(12345),
        },
        hourly,
        tags: vec!["a".into(), "b \"quoted\"".into()],
        code: "abc".into(),
    }
}

/// The typed writer and the property map agree byte for byte.
fn same_text<T: TableEntity>(value: &T) {
    let via_entity = json::to_string(&schema::to_entity(value).unwrap());
    assert_eq!(schema::to_json(value).unwrap(), via_entity);
}

#[test]
fn typed_json_is_the_entity_json() {
    same_text(&review(
        "Ada".into(),
        Some("x".into()),
        vec![0, 1, 255],
        1.5,
    ));
    same_text(&review(String::new(), None, Vec::new(), f64::NAN));
    same_text(&review(
        "∞ é 😀".into(),
        None,
        vec![7; 10],
        f64::NEG_INFINITY,
    ));
    same_text(&person(vec![1.0, 2.5, -0.0]));
    same_text(&person(Vec::new()));
    // The text reads back as the row.
    let r = review("Ada".into(), Some("x".into()), vec![0, 1, 255], 1.5);
    let read = json::from_str(&schema::to_json(&r).unwrap()).unwrap();
    assert_eq!(read, schema::to_entity(&r).unwrap());
    assert_eq!(schema::from_entity::<Review>(&read).unwrap(), r);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn typed_json_matches_for_any_text(
        name in any::<String>(),
        notes in proptest::option::of(any::<String>()),
        photo in proptest::collection::vec(any::<u8>(), 0..40),
        salary in any::<f64>(),
        hourly in proptest::collection::vec(any::<f64>(), 0..30),
    ) {
        let r = review(name, notes, photo, salary);
        prop_assert_eq!(
            schema::to_json(&r).unwrap(),
            json::to_string(&schema::to_entity(&r).unwrap())
        );
        let p = person(hourly);
        prop_assert_eq!(
            schema::to_json(&p).unwrap(),
            json::to_string(&schema::to_entity(&p).unwrap())
        );
    }
}

fn invalid(result: Result<String, Error>) -> InvalidInput {
    match result {
        Err(Error::Invalid(e)) => e,
        other => panic!("expected invalid input, got {other:?}"),
    }
}

#[test]
fn values_the_service_refuses_are_typed_errors() {
    let long = "x".repeat(32_001);
    assert!(matches!(
        invalid(schema::to_json(&review(long, None, Vec::new(), 0.0))),
        InvalidInput::StringTooLong { ref property, utf16_len: 32_001, .. } if property == "Name"
    ));
    assert!(matches!(
        invalid(schema::to_json(&review("a".into(), None, vec![0; 64_001], 0.0))),
        InvalidInput::BinaryTooLong { ref property, len: 64_001, .. } if property == "Photo"
    ));
    // 249 elements and the flattened, json and with properties: over 252.
    assert!(matches!(
        invalid(schema::to_json(&person(vec![0.0; 249]))),
        InvalidInput::TooManyProperties {
            count: 253,
            max: 252,
            ..
        }
    ));
    // Within the count but over 1 MiB: 40 strings of 16,000 UTF-16 units.
    let wide: Vec<String> = (0..40).map(|_| "y".repeat(16_000)).collect();
    #[derive(TableEntity)]
    #[tablekit(table = "Big")]
    struct Big {
        #[tablekit(partition_key)]
        pk: String,
        #[tablekit(series)]
        texts: Vec<String>,
    }
    assert!(matches!(
        invalid(schema::to_json(&Big { pk: "p".into(), texts: wide })),
        InvalidInput::EntityTooLarge { size, max: 1_048_576, .. } if size > 1_048_576
    ));
    // A key longer than the store allows names the fields.
    let mut r = review("a".into(), None, Vec::new(), 0.0);
    r.department = "d".repeat(600);
    assert!(matches!(
        invalid(schema::to_json(&r)),
        InvalidInput::EncodedKeyTooLong {
            fields: "department",
            ..
        }
    ));
}

#[derive(TableEntity, Debug)]
#[tablekit(table = "Clash")]
struct Clash {
    #[tablekit(partition_key)]
    key: String,
    #[tablekit(rename = "Home_street")]
    street: String,
    #[tablekit(flatten(prefix = "Home", delimiter = "_"))]
    home: Address,
}

#[test]
fn names_made_at_run_time_are_checked() {
    let clash = Clash {
        key: "k".into(),
        street: "a".into(),
        home: Address::default(),
    };
    assert!(matches!(
        schema::to_json(&clash),
        Err(Error::Schema(SchemaError::NameCollision { ref name })) if name == "Home_street"
    ));
    assert!(matches!(
        schema::to_entity(&clash),
        Err(Error::Schema(SchemaError::NameCollision { ref name })) if name == "Home_street"
    ));
}

#[test]
fn the_writer_checks_what_it_is_given() {
    assert!(matches!(
        EntityWriter::new("a/b".into(), "r".into()),
        Err(InvalidInput::KeyForbiddenCharacter { character: '/', .. })
    ));
    let mut w = EntityWriter::new("p".into(), "r".into()).unwrap();
    assert!(matches!(
        w.push("bad name".into(), ValueRef::Int32(1)),
        Err(Error::Invalid(InvalidInput::PropertyNameInvalid { .. }))
    ));
    assert!(matches!(
        w.push("RowKey".into(), ValueRef::Int32(1)),
        Err(Error::Invalid(InvalidInput::PropertyNameReserved { .. }))
    ));
    w.push("A".into(), ValueRef::Int32(1)).unwrap();
    w.push("A".into(), ValueRef::Boolean(true)).unwrap();
    assert!(matches!(
        w.finish(),
        Err(Error::Schema(SchemaError::NameCollision { ref name })) if name == "A"
    ));
    let mut w = EntityWriter::new("p".into(), "r".into()).unwrap();
    for i in 0..252 {
        w.push(format!("P{i}").into(), ValueRef::Boolean(true))
            .unwrap();
    }
    assert!(matches!(
        w.push("P252".into(), ValueRef::Boolean(true)),
        Err(Error::Invalid(InvalidInput::TooManyProperties {
            count: 253,
            ..
        }))
    ));
}

/// The typed reader and the property map agree: same value, or the same
/// kind of error.
fn same_value<T: TableEntity + PartialEq + std::fmt::Debug>(value: &T) {
    let text = schema::to_json(value).unwrap();
    let via_entity = schema::from_entity::<T>(&json::from_str(&text).unwrap()).unwrap();
    assert_eq!(&via_entity, value);
    assert_eq!(&schema::from_json::<T>(&text).unwrap(), value);
}

#[test]
fn typed_reads_give_the_value_back() {
    same_value(&review(
        "Ada".into(),
        Some("x".into()),
        vec![0, 1, 255],
        1.5,
    ));
    same_value(&review(String::new(), None, Vec::new(), f64::INFINITY));
    same_value(&person(vec![1.0, 2.5, -0.0]));
    same_value(&person(Vec::new()));
    // The service's response order (annotation first), its metadata members
    // and members the type has no field for.
    let text = r#"{"odata.metadata":"m","odata.etag":"W/\"x\"","PartitionKey":"core","RowKey":"00000000000000000042",
        "Timestamp":"2026-11-21T22:36:51.8779396Z","Extra":"ignored","Extra@odata.type":"Edm.String",
        "Home_street":"Main St","Home_zip@odata.type":"Edm.Int64","Home_zip":"12345",
        "hourly_0@odata.type":"Edm.Double","hourly_0":"NaN","tags":"[]","code":"ABC"}"#;
    let read = schema::from_json::<Person>(text).unwrap();
    assert_eq!(read.home.zip, Some(12345));
    assert!(read.hourly[0].is_nan());
    assert_eq!(read.code, "abc");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn typed_reads_match_for_any_value(
        name in any::<String>(),
        notes in proptest::option::of(any::<String>()),
        photo in proptest::collection::vec(any::<u8>(), 0..40),
        salary in any::<f64>().prop_filter("NaN is not equal to itself", |v| !v.is_nan()),
    ) {
        let r = review(name, notes, photo, salary);
        let text = schema::to_json(&r).unwrap();
        prop_assert_eq!(&schema::from_json::<Review>(&text).unwrap(), &r);
    }
}

#[test]
fn typed_reads_refuse_what_from_entity_refuses() {
    let r = review("Ada".into(), None, Vec::new(), 1.5);
    let text = schema::to_json(&r).unwrap();
    let schema_error = |text: &str| match schema::from_json::<Review>(text) {
        Err(Error::Schema(e)) => e,
        other => panic!("expected a schema error, got {other:?}"),
    };
    // Another kind, by its RowKey.
    let other_kind = text.replace("\"REV_", "\"EMP_");
    assert!(matches!(
        schema_error(&other_kind),
        SchemaError::WrongKind { .. }
    ));
    // Another kind, by its property.
    let other_kind = text.replace("\"_Kind\":\"REV\"", "\"_Kind\":\"EMP\"");
    assert_ne!(other_kind, text);
    assert!(matches!(
        schema_error(&other_kind),
        SchemaError::WrongKind { .. }
    ));
    // A version this type does not read.
    let newer = text.replace("\"_Version\":2", "\"_Version\":3");
    assert!(matches!(
        schema_error(&newer),
        SchemaError::UnsupportedVersion { found: 3, .. }
    ));
    // A value of another type.
    let mistyped = text.replace("\"Rating\":-5", "\"Rating\":\"five\"");
    assert!(matches!(
        schema_error(&mistyped),
        SchemaError::Property { ref property, .. } if property == "Rating"
    ));
    // An Int64 whose annotation is lost reads as a String: a typed error.
    let unannotated = text.replace(",\"Score@odata.type\":\"Edm.Int64\"", "");
    assert!(matches!(
        schema_error(&unannotated),
        SchemaError::Property { ref property, .. } if property == "Score"
    ));
    // A key that does not decode.
    let bad_key = text.replace("\"REV_", "\"REV_x");
    assert!(matches!(
        schema_error(&bad_key),
        SchemaError::KeyDecode { .. }
    ));
    // A field given twice, an unknown annotation, broken JSON.
    let invalid = |text: &str| match schema::from_json::<Review>(text) {
        Err(Error::Invalid(e)) => e,
        other => panic!("expected invalid input, got {other:?}"),
    };
    let twice = text.replace("\"Rating\":-5", "\"Rating\":-5,\"Rating\":4");
    assert!(matches!(
        invalid(&twice),
        InvalidInput::DuplicateProperty { ref name } if name == "Rating"
    ));
    let unknown_type = text.replace("Edm.Int64", "Edm.Int128");
    assert!(matches!(
        invalid(&unknown_type),
        InvalidInput::PropertyValue { .. }
    ));
    assert!(matches!(
        invalid(&text[..text.len() - 1]),
        InvalidInput::Json {
            expected: "a JSON object",
            ..
        }
    ));
    let no_keys = r#"{"Name":"x"}"#;
    assert!(matches!(
        invalid(no_keys),
        InvalidInput::PropertyValue { ref property, .. } if property == "PartitionKey"
    ));
    // A value that does not fit its annotation, in an optional field: the
    // field does not read as absent, the document is refused.
    for (field, value) in [("Notes", "x"), ("Nothing", "12x")] {
        let base = text.replace(&format!(",\"{field}\":null"), "");
        let bad = base.replacen(
            "{",
            &format!("{{\"{field}\":\"{value}\",\"{field}@odata.type\":\"Edm.Int64\","),
            1,
        );
        assert_ne!(bad, text);
        assert!(json::from_str(&bad).is_err(), "the wire reader refuses it");
        assert!(matches!(
            invalid(&bad),
            InvalidInput::PropertyValue { ref property, .. } if property == field
        ));
    }
    // And a good value in the optional field reads.
    let notes = text.replacen("{", "{\"Notes\":\"fine\",", 1);
    let notes = notes.replace(",\"Notes\":null", "");
    assert_eq!(
        schema::from_json::<Review>(&notes)
            .unwrap()
            .notes
            .as_deref(),
        Some("fine")
    );
}

#[derive(tablekit::TableValue, Debug, Clone, Copy, PartialEq)]
enum Status {
    Active,
    OnLeave,
}

/// Every role a type with compile-time-checked names can have: json, with,
/// default, skip, optional, and a unit enum.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Profiles")]
struct Profile {
    #[tablekit(partition_key)]
    team: String,
    #[tablekit(row_key)]
    id: tablekit::uuid::Uuid,
    #[tablekit(json)]
    tags: Vec<String>,
    #[tablekit(with = upper)]
    code: String,
    #[tablekit(default)]
    nick: String,
    #[tablekit(skip)]
    cache: Option<String>,
    age: Option<i32>,
    status: Status,
    previous: Option<Status>,
}

#[test]
fn typed_reads_cover_every_role() {
    let p = Profile {
        team: "core".into(),
        id: tablekit::uuid::Uuid::from_u128(7),
        tags: vec!["a".into(), "b".into()],
        code: "xyz".into(),
        nick: "ada".into(),
        cache: None,
        age: Some(36),
        status: Status::OnLeave,
        previous: Some(Status::Active),
    };
    const { assert!(Profile::DESCRIPTOR.checked_names) };
    same_text(&p);
    same_value(&p);
    // An absent `default` field reads as its default, an absent option as None;
    // a skipped field is never read.
    let text = schema::to_json(&p)
        .unwrap()
        .replace(",\"nick\":\"ada\"", "")
        .replace(",\"age\":36", "");
    let read = schema::from_json::<Profile>(&text).unwrap();
    assert_eq!((read.nick.as_str(), read.age), ("", None));
    // A field that must be present is a typed error when it is not.
    let no_code = text.replace(",\"code\":\"XYZ\"", "");
    assert!(matches!(
        schema::from_json::<Profile>(&no_code),
        Err(Error::Schema(SchemaError::Property { ref property, .. })) if property == "code"
    ));
    // Members of no field are skipped...
    let extra = text.replace("{", "{\"x\":1,\"y\":\"z\",\"odata.metadata\":[],");
    assert_eq!(schema::from_json::<Profile>(&extra).unwrap(), read);
    // ...but refused where the wire reader refuses them: given twice, or
    // holding what no property can.
    for bad in [
        "{\"x\":1,\"x\":2,",
        "{\"x\":[1],",
        "{\"x\":\"a\",\"x@odata.type\":\"Edm.Int64\",",
        "{\"x@odata.type\":\"Edm.Nothing\",",
        "{\"Timestamp\":\"yesterday\",",
    ] {
        let doc = text.replacen("{", bad, 1);
        assert!(
            matches!(schema::from_json::<Profile>(&doc), Err(Error::Invalid(_))),
            "{doc}"
        );
        assert!(json::from_str(&doc).is_err(), "{doc}");
    }
}

#[test]
fn typed_reads_with_names_made_at_run_time_refuse_duplicates() {
    const { assert!(!Person::DESCRIPTOR.checked_names) };
    let text = schema::to_json(&person(vec![1.0])).unwrap();
    let twice = text.replace("\"code\":\"ABC\"", "\"code\":\"ABC\",\"code\":\"DEF\"");
    assert_ne!(twice, text);
    assert!(matches!(
        schema::from_json::<Person>(&twice),
        Err(Error::Invalid(InvalidInput::DuplicateProperty { ref name })) if name == "code"
    ));
}

#[test]
fn the_generated_member_match_agrees_with_the_search() {
    use tablekit::schema::MemberSlot;
    const { assert!(Review::DESCRIPTOR.checked_names && Profile::DESCRIPTOR.checked_names) };
    fn agree<T: TableEntity>() {
        assert!(!T::DESCRIPTOR.field_names.is_empty());
        for (i, name) in T::DESCRIPTOR.field_names.iter().enumerate() {
            assert_eq!(T::member_slot(name), MemberSlot::Value(i), "{name}");
            let annotation = format!("{name}@odata.type");
            assert_eq!(T::member_slot(&annotation), MemberSlot::Annotation(i));
            for probe in [name.to_string(), annotation] {
                assert_eq!(
                    T::member_slot(&probe),
                    MemberSlot::search(T::DESCRIPTOR.field_names, &probe)
                );
            }
        }
        for other in [
            "",
            "PartitionKey",
            "_Kind",
            "Unknown",
            "@odata.type",
            "Unknown@odata.type",
            "odata.etag",
        ] {
            assert_eq!(T::member_slot(other), MemberSlot::Other, "{other}");
            assert_eq!(
                MemberSlot::search(T::DESCRIPTOR.field_names, other),
                MemberSlot::Other
            );
        }
    }
    agree::<Review>();
    agree::<Profile>();
    // Names are matched exactly: neither case nor a prefix matches.
    assert_eq!(Review::member_slot("name"), MemberSlot::Other);
    assert_eq!(Review::member_slot("Nam"), MemberSlot::Other);
    assert_eq!(Review::DESCRIPTOR.field_names[0], "Name");
}

/// `from_json` refuses what `to_json` refuses: keys too long or with a
/// forbidden character, values over the service's limits.
#[test]
fn from_json_refuses_what_to_json_refuses() {
    let value = review("Ada".into(), None, vec![1, 2], 1.5);
    let text = schema::to_json(&value).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let refused = |doc: &serde_json::Value| match schema::from_json::<Review>(&doc.to_string()) {
        Err(Error::Invalid(e)) => e,
        other => panic!("expected invalid input, got {other:?}"),
    };
    assert!(schema::from_json::<Review>(&doc.to_string()).is_ok());
    // A PartitionKey of 613 UTF-16 code units, which to_json refuses too.
    let mut long = doc.clone();
    long["PartitionKey"] = "p".repeat(613).into();
    assert!(matches!(refused(&long), InvalidInput::KeyTooLong { .. }));
    let too_long = Review {
        department: "p".repeat(613),
        ..value.clone()
    };
    assert!(matches!(schema::to_json(&too_long), Err(Error::Invalid(_))));
    // A forbidden character in a key.
    let mut slash = doc.clone();
    slash["PartitionKey"] = "a/b".into();
    refused(&slash);
    // A string over 32K UTF-16 code units, which to_json refuses too.
    let mut big = doc.clone();
    big["Name"] = "n".repeat(40_000).into();
    assert!(matches!(refused(&big), InvalidInput::StringTooLong { .. }));
    assert!(schema::to_json(&review("n".repeat(40_000), None, vec![], 1.5)).is_err());
}

/// A document changed at random: bytes replaced, removed or inserted, and
/// members' texts swapped for ones that test the readers' rules.
fn mutated(text: &str, edits: &[(usize, u8, u8)]) -> String {
    const PIECES: &[&str] = &[
        "\"",
        "\\",
        "\\u0000",
        "\\ud800",
        "@odata.type",
        "\"Edm.Int64\"",
        "\"Edm.Guid\"",
        "\"Edm.DateTime\"",
        "\"Edm.Binary\"",
        "\"Edm.Double\"",
        "null",
        "[]",
        "{}",
        "1e999",
        "-0",
        "18446744073709551616",
        "\"NaN\"",
        ",\"Name\":\"twice\"",
        ",\"Score@odata.type\":\"Edm.Int32\"",
        "\"PartitionKey\"",
        "\"RowKey\"",
        "\"_Kind\"",
        "\"_Version\"",
        "\"Edm.String\"",
        "\"Edm.Boolean\"",
        "\"Edm.Int32\"",
        "true",
        "\"true\"",
        "2147483648",
        "-2147483649",
        "1.0",
        "\"1.5\"",
        "\"INF\"",
        "\"-Infinity\"",
        ",\"Timestamp\":\"2020-01-01T00:00:00Z\"",
        ",\"odata.etag\":\"W/x\"",
        "@odata.type\":\"Edm.Int64\",\"",
    ];
    let mut bytes = text.as_bytes().to_vec();
    for &(at, op, value) in edits {
        let at = at % (bytes.len() + 1);
        match op % 4 {
            0 if at < bytes.len() => bytes[at] = value,
            1 if at < bytes.len() => {
                bytes.remove(at);
            }
            2 => bytes.insert(at, value),
            _ => {
                let piece = PIECES[usize::from(value) % PIECES.len()];
                bytes.splice(at..at, piece.bytes());
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// The typed reader and the property map's reader agree on any text,
    /// however damaged: both read the same value, or both refuse it. So no
    /// shortcut of the typed path reads a value the entity path would not,
    /// and neither takes a document the other refuses.
    #[test]
    fn both_readers_agree_on_damaged_documents(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6),
        person_doc in any::<bool>(),
    ) {
        if person_doc {
            let text = mutated(&schema::to_json(&person(vec![1.5, -2.0])).unwrap(), &edits);
            let typed = schema::from_json::<Person>(&text);
            let via_entity = json::from_str(&text)
                .map_err(Error::from)
                .and_then(schema::from_entity_owned::<Person>);
            agree(&text, &typed, &via_entity)?;
        } else {
            let r = review("Ada".into(), Some("n".into()), vec![1, 2], 1.5);
            let text = mutated(&schema::to_json(&r).unwrap(), &edits);
            let typed = schema::from_json::<Review>(&text);
            let via_entity = json::from_str(&text)
                .map_err(Error::from)
                .and_then(schema::from_entity_owned::<Review>);
            agree(&text, &typed, &via_entity)?;
        }
    }
}

/// See `both_readers_agree_on_damaged_documents`.
fn agree<T: PartialEq + std::fmt::Debug>(
    text: &str,
    typed: &Result<T, Error>,
    via_entity: &Result<T, Error>,
) -> Result<(), TestCaseError> {
    match (typed, via_entity) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        _ => prop_assert!(
            false,
            "{text}: typed {typed:?}, via the entity {via_entity:?}"
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]
    /// A query page reads each of its rows as the entity reader reads it
    /// alone: a row it reads is the same entity, a row it sets apart is one
    /// the entity reader refuses; damage that breaks the page's structure
    /// fails the whole page.
    #[test]
    fn page_rows_read_as_rows_alone(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6),
    ) {
        let r = review("Ada".into(), Some("n".into()), vec![1, 2], 1.5);
        let good = schema::to_json(&r).unwrap();
        let row = mutated(&good, &edits);
        let page = format!("{{\"value\":[{good},{row}],\"odata.metadata\":\"x\"}}");
        // Page rows are rows as a store holds them.
        let alone = json::row_from_str(&row);
        match json::entities_from_str(&page) {
            Ok((rows, apart)) => {
                prop_assert_eq!(&rows[0], &json::from_str(&good).unwrap());
                match alone {
                    Ok(entity) => {
                        prop_assert_eq!(rows.len(), 2);
                        prop_assert_eq!(&rows[1], &entity);
                        prop_assert!(apart.is_empty());
                    }
                    Err(_) => {
                        prop_assert_eq!(rows.len(), 1);
                        prop_assert_eq!(apart.len(), 1);
                    }
                }
            }
            // The damage broke the JSON itself: the row alone is no entity
            // either.
            Err(_) => prop_assert!(alone.is_err(), "{page}"),
        }
    }
}

/// A point read's response carries the row's OData members, ETag and time
/// beside its properties: the typed reader reads the value from it, and
/// refuses what the wire reader refuses in those members.
#[test]
fn typed_reads_take_responses() {
    let r = review("Ada".into(), None, vec![1], 2.5);
    let text = schema::to_json(&r).unwrap();
    let response = text.replacen(
        "{",
        "{\"odata.metadata\":\"https://x/$metadata#Reviews/@Element\",\"odata.etag\":\"W/\\\"datetime'2020'\\\"\",\"Timestamp\":\"2020-01-02T03:04:05.1234567Z\",",
        1,
    );
    assert_eq!(schema::from_json::<Review>(&response).unwrap(), r);
    for bad in [
        response.replace("\"Timestamp\":\"2020", "\"Timestamp\":\"x2020"),
        response.replace(
            "\"Timestamp\"",
            "\"Timestamp\":\"2020-01-01T00:00:00Z\",\"Timestamp\"",
        ),
        response.replace("\"odata.etag\"", "\"odata.etag\":\"a\",\"odata.etag\""),
    ] {
        assert!(
            matches!(schema::from_json::<Review>(&bad), Err(Error::Invalid(_))),
            "{bad}"
        );
        assert!(json::from_str(&bad).is_err(), "{bad}");
    }
}

/// A type told apart by a property: its JSON holds the property, and a
/// document of another type's value is refused, never read as this type.
#[test]
fn a_discriminator_is_written_and_checked_in_json() {
    #[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
    #[tablekit(
        table = "Ledger",
        discriminator(property = "EntityType", value = "Payment")
    )]
    struct Payment {
        #[tablekit(partition_key)]
        account: String,
        #[tablekit(row_key)]
        id: String,
        #[tablekit(rename = "Amount")]
        amount: f64,
    }
    let payment = Payment {
        account: "a".into(),
        id: "1".into(),
        amount: 2.5,
    };
    let text = tablekit::schema::to_json(&payment).unwrap();
    assert!(text.contains(r#""EntityType":"Payment""#), "{text}");
    assert_eq!(
        tablekit::schema::from_json::<Payment>(&text).unwrap(),
        payment
    );
    let other = text.replace(r#""EntityType":"Payment""#, r#""EntityType":"Invoice""#);
    assert!(tablekit::schema::from_json::<Payment>(&other).is_err());
}

/// Both readers by one rule, for the members a type has no field for and
/// for the keys: a type whose names are all known (`Review`) and one that
/// makes names at run time (`Person`) refuse the same documents as
/// `from_entity_owned(json::from_str(..))`, and a row as a store holds it
/// (`json::row_from_str`, then `from_entity`) is still read.
#[test]
fn both_readers_take_a_document_by_one_rule() {
    fn both<T: TableEntity + std::fmt::Debug>(text: &str) -> (bool, bool) {
        let typed = schema::from_json::<T>(text);
        let via_entity = json::from_str(text)
            .map_err(Error::from)
            .and_then(schema::from_entity_owned::<T>);
        (typed.is_ok(), via_entity.is_ok())
    }
    let texts = [
        schema::to_json(&review("Ada".into(), None, vec![1], 1.5)).unwrap(),
        schema::to_json(&person(vec![1.0])).unwrap(),
    ];
    let many: String = (0..260).map(|i| format!("\"X{i}\":{i},")).collect();
    let wide = format!("\"Blob\":\"{}\",", "b".repeat(31_000));
    let wides = wide.repeat(20);
    let edits: [(&str, String); 5] = [
        ("a name that is not an identifier", "\"2x\":1,".to_owned()),
        ("an empty name", "\"\":1,".to_owned()),
        ("more than 252 properties", many),
        ("an entity over 1 MiB", wides),
        (
            "a string over the limit",
            format!("\"Long\":\"{}\",", "s".repeat(40_000)),
        ),
    ];
    for (i, text) in texts.iter().enumerate() {
        let read = |t: &str| {
            if i == 0 {
                both::<Review>(t)
            } else {
                both::<Person>(t)
            }
        };
        assert_eq!(read(text), (true, true));
        for (what, member) in &edits {
            let bad = text.replacen('{', &format!("{{{member}"), 1);
            assert_eq!(read(&bad), (false, false), "{what}, type {i}");
            // As a store sent it, the row is read: the store's limits are
            // the store's to keep.
            if i == 0 && what.starts_with("a name") {
                let row = json::row_from_str(&bad).unwrap();
                schema::from_entity_owned::<Review>(row).unwrap();
            }
        }
        // A PartitionKey of 613 UTF-16 code units: no store holds it.
        let mut doc: serde_json::Value = serde_json::from_str(text).unwrap();
        doc["PartitionKey"] = "p".repeat(613).into();
        assert_eq!(
            read(&doc.to_string()),
            (false, false),
            "a long key, type {i}"
        );
        // A member of no field that is a fine property is ignored by both.
        let extra = text.replacen('{', "{\"Extra\":\"kept elsewhere\",", 1);
        assert_eq!(read(&extra), (true, true));
    }
}
