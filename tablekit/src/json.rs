//! The JSON wire form of an entity (OData v3, `minimalmetadata`), as the Table
//! service reads and writes it.
//!
//! Writing follows the advice in the service's payload-format reference and the
//! official SDKs: a JSON string or `true`/`false` is read back as String or
//! Boolean and needs no annotation, an integer JSON number is Int32; every other
//! type carries a `Name@odata.type` annotation, Int64 travels as a string of
//! digits, and doubles are always annotated (Azurite would otherwise turn an
//! integral double such as `1.0` into an Int32). Non-finite doubles are the
//! annotated strings `"NaN"`, `"Infinity"` and `"-Infinity"`.
//!
//! Reading accepts the minimal-metadata responses of the service and Azurite:
//! `odata.etag` becomes the ETag, `Timestamp` the timestamp, other `odata.*`
//! members are ignored, `null` means absent.
//!
//! ```
//! use tablekit::{json, Entity};
//! let e = Entity::new("p", "r1").with("I64", 9_223_372_036_854_775_807_i64);
//! let text = json::to_string(&e);
//! assert_eq!(text, r#"{"PartitionKey":"p","RowKey":"r1","I64":"9223372036854775807","I64@odata.type":"Edm.Int64"}"#);
//! assert_eq!(json::from_str(&text)?, e);
//! # Ok::<(), tablekit::InvalidInput>(())
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Number, Value as Json};

use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, Properties};
use crate::error::InvalidInput;
use crate::value::{EdmType, Value};

const ANNOTATION_SUFFIX: &str = "@odata.type";

/// The entity as a JSON object, ready to send. ETag and Timestamp are not
/// written (the service ignores a client's Timestamp).
pub fn to_json(entity: &Entity) -> Json {
    let mut map = Map::with_capacity(2 + 2 * entity.properties.len());
    map.insert(
        "PartitionKey".into(),
        Json::String(entity.partition_key.clone()),
    );
    map.insert("RowKey".into(), Json::String(entity.row_key.clone()));
    write_properties(&mut map, &entity.properties);
    Json::Object(map)
}

/// Adds each property (and its annotation when one is needed) to `map`.
pub fn write_properties(map: &mut Map<String, Json>, properties: &Properties) {
    for (name, value) in properties.iter() {
        let (json, annotate) = value_to_json(value);
        map.insert(name.to_owned(), json);
        if annotate {
            map.insert(
                format!("{name}{ANNOTATION_SUFFIX}"),
                Json::String(value.edm_type().as_str().into()),
            );
        }
    }
}

/// The JSON text of [`to_json`].
pub fn to_string(entity: &Entity) -> String {
    to_json(entity).to_string()
}

/// The number of bytes of [`to_string`], without building the string or
/// any JSON value: primitives are serialized into a byte counter.
pub fn encoded_len(entity: &Entity) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    fn len_of(value: &impl serde::Serialize) -> usize {
        let mut counter = Counter(0);
        // Writing into a counter cannot fail.
        let _ = serde_json::to_writer(&mut counter, value);
        counter.0
    }
    // `{"PartitionKey":` + pk + `,"RowKey":` + rk + `}`
    let mut len = 16 + len_of(&entity.partition_key) + 10 + len_of(&entity.row_key) + 1;
    for (name, value) in entity.properties.iter() {
        let name_len = len_of(&name);
        // `,` + name + `:` + value
        len += 2 + name_len;
        len += match value {
            Value::String(s) => len_of(s),
            Value::Int32(v) => len_of(v),
            Value::Int64(v) => len_of(&v.to_string()),
            Value::Double(v) if v.is_finite() => len_of(v),
            Value::Double(v) if v.is_nan() => 5,
            Value::Double(v) => {
                if *v > 0.0 {
                    10
                } else {
                    11
                }
            }
            Value::Boolean(v) => {
                if *v {
                    4
                } else {
                    5
                }
            }
            Value::DateTime(v) => 2 + v.to_string().len(),
            Value::Guid(_) => 38,
            Value::Binary(b) => 2 + b.len().div_ceil(3) * 4,
        };
        if needs_annotation(value) {
            // `,"` + name + `@odata.type":"` + type + `"`; the name's escaped
            // form is its JSON length less the two quotes.
            len +=
                2 + (name_len - 2) + ANNOTATION_SUFFIX.len() + 4 + value.edm_type().as_str().len();
        }
    }
    len
}

/// Whether a value's JSON form carries a type annotation.
fn needs_annotation(value: &Value) -> bool {
    !matches!(
        value,
        Value::String(_) | Value::Int32(_) | Value::Boolean(_)
    )
}

/// A value's JSON form, and whether it needs a type annotation.
pub fn value_to_json(value: &Value) -> (Json, bool) {
    let json = match value {
        Value::String(s) => Json::String(s.clone()),
        Value::Int32(v) => Json::Number((*v).into()),
        Value::Int64(v) => Json::String(v.to_string()),
        Value::Double(v) => match Number::from_f64(*v) {
            Some(n) => Json::Number(n),
            None if v.is_nan() => Json::String("NaN".into()),
            None if *v > 0.0 => Json::String("Infinity".into()),
            None => Json::String("-Infinity".into()),
        },
        Value::Boolean(v) => Json::Bool(*v),
        Value::DateTime(v) => Json::String(v.to_string()),
        Value::Guid(v) => Json::String(v.hyphenated().to_string()),
        Value::Binary(v) => Json::String(BASE64.encode(v)),
    };
    (json, needs_annotation(value))
}

/// Reads an entity from a JSON object (a minimal- or full-metadata response,
/// or a request body).
pub fn from_json(json: &Json) -> Result<Entity, InvalidInput> {
    let Json::Object(map) = json else {
        return Err(InvalidInput::PropertyValue {
            property: String::new(),
            reason: "an entity must be a JSON object".into(),
        });
    };
    let key = |name: &str| -> Result<String, InvalidInput> {
        match map.get(name) {
            Some(Json::String(s)) => Ok(s.clone()),
            Some(_) => Err(InvalidInput::PropertyValue {
                property: name.into(),
                reason: "keys must be strings".into(),
            }),
            None => Err(InvalidInput::PropertyValue {
                property: name.into(),
                reason: "missing".into(),
            }),
        }
    };
    let mut entity = Entity::new(key("PartitionKey")?, key("RowKey")?);
    entity.properties = Properties::with_capacity(map.len());
    for (name, json) in map {
        match name.as_str() {
            "PartitionKey" | "RowKey" => {}
            "odata.etag" => {
                if let Json::String(tag) = json {
                    entity.etag = Some(ETag::new(tag.clone()));
                }
            }
            "Timestamp" => {
                if let Json::String(text) = json {
                    entity.timestamp = Some(DateTime::parse(text)?);
                }
            }
            _ if name.starts_with("odata.") || name.ends_with(ANNOTATION_SUFFIX) => {}
            _ => {
                let annotation = map.get(&format!("{name}{ANNOTATION_SUFFIX}"));
                let edm = match annotation {
                    None => None,
                    Some(Json::String(type_name)) => {
                        Some(EdmType::from_annotation(type_name).ok_or_else(|| {
                            InvalidInput::PropertyValue {
                                property: name.clone(),
                                reason: format!("unsupported type annotation {type_name:?}"),
                            }
                        })?)
                    }
                    Some(_) => {
                        return Err(InvalidInput::PropertyValue {
                            property: name.clone(),
                            reason: "type annotation must be a string".into(),
                        });
                    }
                };
                if let Some(value) = value_from_json(name, json, edm)? {
                    // A JSON object cannot hold a name twice, so no duplicate check.
                    entity.properties.push_unchecked(name.clone(), value);
                }
            }
        }
    }
    Ok(entity)
}

/// Reads an entity from JSON text. Unlike [`from_json`], this sees a member
/// given twice and refuses it with [`InvalidInput::DuplicateProperty`], as the
/// service does (`DuplicatePropertiesSpecified`).
pub fn from_str(text: &str) -> Result<Entity, InvalidInput> {
    /// The members of a JSON object in order, duplicates kept.
    struct Members(Vec<(String, Json)>);
    impl<'de> serde::Deserialize<'de> for Members {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Members;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Members, A::Error> {
                    let mut members = Vec::with_capacity(map.size_hint().unwrap_or(16));
                    while let Some(member) = map.next_entry()? {
                        members.push(member);
                    }
                    Ok(Members(members))
                }
            }
            deserializer.deserialize_map(Visitor)
        }
    }
    let Members(members) = serde_json::from_str(text).map_err(|e| InvalidInput::PropertyValue {
        property: String::new(),
        reason: format!("not a JSON object: {e}"),
    })?;
    let mut map = Map::with_capacity(members.len());
    for (name, value) in members {
        if map.contains_key(&name) {
            return Err(InvalidInput::DuplicateProperty { name });
        }
        map.insert(name, value);
    }
    from_json(&Json::Object(map))
}

/// Reads one property value; `Ok(None)` for `null` (an absent property).
pub fn value_from_json(
    name: &str,
    json: &Json,
    edm: Option<EdmType>,
) -> Result<Option<Value>, InvalidInput> {
    let bad = |reason: &str| InvalidInput::PropertyValue {
        property: name.to_owned(),
        reason: reason.to_owned(),
    };
    if json.is_null() {
        return Ok(None);
    }
    let value = match (edm, json) {
        (None | Some(EdmType::String), Json::String(s)) => Value::String(s.clone()),
        (None | Some(EdmType::Boolean), Json::Bool(b)) => Value::Boolean(*b),
        (Some(EdmType::Boolean), Json::String(s)) => match s.as_str() {
            "true" => Value::Boolean(true),
            "false" => Value::Boolean(false),
            _ => return Err(bad("not a Boolean")),
        },
        (None, Json::Number(n)) => {
            // An unannotated integer is Int32; one outside Int32's range (which
            // the service itself never sends) is kept losslessly as Int64.
            if let Some(i) = n.as_i64() {
                match i32::try_from(i) {
                    Ok(small) => Value::Int32(small),
                    Err(_) => Value::Int64(i),
                }
            } else if n.is_u64() {
                return Err(bad("integer out of range"));
            } else {
                Value::Double(n.as_f64().ok_or_else(|| bad("not a number"))?)
            }
        }
        (Some(EdmType::Int32), Json::Number(n)) => {
            let i = n.as_i64().ok_or_else(|| bad("not an Int32"))?;
            Value::Int32(i32::try_from(i).map_err(|_| bad("out of Int32 range"))?)
        }
        (Some(EdmType::Int32), Json::String(s)) => {
            Value::Int32(s.parse().map_err(|_| bad("not an Int32"))?)
        }
        (Some(EdmType::Int64), Json::String(s)) => {
            Value::Int64(s.parse().map_err(|_| bad("not an Int64"))?)
        }
        (Some(EdmType::Int64), Json::Number(n)) => {
            Value::Int64(n.as_i64().ok_or_else(|| bad("not an Int64"))?)
        }
        (Some(EdmType::Double), Json::Number(n)) => {
            Value::Double(n.as_f64().ok_or_else(|| bad("not a Double"))?)
        }
        (Some(EdmType::Double), Json::String(s)) => Value::Double(match s.as_str() {
            "NaN" => f64::NAN,
            "Infinity" | "INF" => f64::INFINITY,
            "-Infinity" | "-INF" => f64::NEG_INFINITY,
            other => {
                let v: f64 = other.parse().map_err(|_| bad("not a Double"))?;
                if !v.is_finite() {
                    return Err(bad("not a Double"));
                }
                v
            }
        }),
        (Some(EdmType::DateTime), Json::String(s)) => Value::DateTime(DateTime::parse(s)?),
        (Some(EdmType::Guid), Json::String(s)) => {
            Value::Guid(uuid::Uuid::try_parse(s).map_err(|_| bad("not a GUID"))?)
        }
        (Some(EdmType::Binary), Json::String(s)) => {
            Value::Binary(BASE64.decode(s).map_err(|_| bad("not standard base64"))?)
        }
        (_, Json::Array(_) | Json::Object(_)) => {
            return Err(bad("arrays and objects cannot be stored"));
        }
        (Some(edm), _) => return Err(bad(&format!("JSON value does not fit {edm}"))),
        (None, Json::Null) => return Ok(None),
    };
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    /// The request body of AZURE_TABLE.md §2.3, less `Nul` (nulls are not stored)
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

    /// The 201 response body of AZURE_TABLE.md §2.3, byte for byte.
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

    /// AZURE_TABLE.md Appendix A.2: without metadata, types that need an
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
        let e =
            from_str(r#"{"PartitionKey":"p","RowKey":"r","a":3,"b":2.75,"c":3000000000,"n":null}"#)
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

    proptest::proptest! {
        #[test]
        fn encoded_len_matches_any_text(pk in "\\PC{0,6}", rk in ".{0,6}", s in "(?s).{0,12}", d in proptest::num::f64::ANY, i in proptest::prelude::any::<i64>()) {
            let e = Entity::new(pk, rk).with("S", s).with("D", d).with("I", i).with("J", i as i32);
            proptest::prop_assert_eq!(encoded_len(&e), to_string(&e).len());
        }
    }
}
