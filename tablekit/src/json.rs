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
//! Two readers, by what a text is:
//! - a **document**, to be written ([`from_str`], and
//!   [`schema::from_json`](crate::schema::from_json) for a typed value), is
//!   taken only if tablekit could have written it: keys, names, values, the
//!   number of properties and the entity's size are checked as a write checks
//!   them, so what is read can be written back;
//! - a **row as a store sent it** ([`row_from_str`], [`entities_from_str`]) is
//!   checked only by the JSON's own rules. A store's limits are the store's
//!   to keep, and some keep less than the service: Azurite stores property
//!   names the service refuses, and such a row must stay readable.
//!
//! Typed entities skip the [`Entity`]: [`EntityWriter`] writes the text
//! straight from their fields ([`schema::to_json`](crate::schema::to_json)),
//! and [`schema::from_json`](crate::schema::from_json) reads each member
//! into its field.
//!
//! ```
//! use tablekit::{json, Entity};
//! let e = Entity::new("p", "r1").with("I64", 9_223_372_036_854_775_807_i64);
//! let text = json::to_string(&e);
//! assert_eq!(text, r#"{"PartitionKey":"p","RowKey":"r1","I64":"9223372036854775807","I64@odata.type":"Edm.Int64"}"#);
//! assert_eq!(json::from_str(&text)?, e);
//! # Ok::<(), tablekit::InvalidInput>(())
//! ```

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Number, Value as Json};

use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, Properties, PropertyName};
use crate::error::{Error, InvalidInput, SchemaError};
use crate::props::{MemberSlot, PropertySink};
use crate::value::{EdmType, Value, ValueRef};

pub(crate) use crate::props::ANNOTATION_SUFFIX;

/// The entity as a JSON object, ready to send. ETag and Timestamp are not
/// written (the service ignores a client's Timestamp).
pub fn to_json(entity: &Entity) -> Json {
    let mut out = Vec::new();
    write(entity, &mut out);
    // The writer writes valid JSON: reading it back cannot fail.
    serde_json::from_slice(&out).unwrap_or(Json::Null)
}

/// The JSON text of [`to_json`], written directly (no JSON tree is built).
pub fn to_string(entity: &Entity) -> String {
    let mut out = Vec::with_capacity(encoded_len_bound(entity));
    write(entity, &mut out);
    into_string(out)
}

/// Appends the JSON text of [`to_json`] to `out`.
pub fn write(entity: &Entity, out: &mut Vec<u8>) {
    open(out, &entity.partition_key, &entity.row_key);
    for (name, value) in entity.properties.iter() {
        member(out, name, value.as_value_ref(), false);
    }
    out.push(b'}');
}

/// The number of bytes of [`to_string`].
pub fn encoded_len(entity: &Entity) -> usize {
    let mut out = Vec::with_capacity(encoded_len_bound(entity));
    write(entity, &mut out);
    out.len()
}

/// The text of what [`write`] wrote: only UTF-8 input and ASCII are ever
/// written, so the check cannot fail.
fn into_string(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Writes a JSON string with serde_json's escaping.
fn string(out: &mut Vec<u8>, s: &str) {
    // Writing into memory cannot fail.
    let _ = serde::Serializer::serialize_str(&mut serde_json::Serializer::new(out), s);
}

/// Writes `{"PartitionKey":…,"RowKey":…` and returns where the two keys'
/// JSON strings lie in `out`.
fn open(out: &mut Vec<u8>, partition_key: &str, row_key: &str) -> [(usize, usize); 2] {
    out.extend_from_slice(b"{\"PartitionKey\":");
    let pk_start = out.len();
    string(out, partition_key);
    let pk_end = out.len();
    out.extend_from_slice(b",\"RowKey\":");
    let rk_start = out.len();
    string(out, row_key);
    [(pk_start, pk_end), (rk_start, out.len())]
}

/// `,"name":value` and, for the types that need it, `,"name@odata.type":"Edm.…"`.
/// A name known to be a valid property name (letters, digits, `_`) is
/// written as is; any other is escaped.
fn member(out: &mut Vec<u8>, name: &str, value: ValueRef<'_>, checked_name: bool) {
    #[inline(always)]
    fn write_name(out: &mut Vec<u8>, name: &str, checked_name: bool) {
        if checked_name {
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.push(b'"');
        } else {
            string(out, name);
        }
    }
    out.reserve(2 * name.len() + 64);
    out.push(b',');
    write_name(out, name, checked_name);
    out.push(b':');
    // Text that never needs escaping (digits, dates, GUIDs, base64) is
    // written as is; through serde's `collect_str` it would be scanned for
    // escapes piece by piece.
    let quoted = |out: &mut Vec<u8>, text: &[u8]| {
        out.push(b'"');
        out.extend_from_slice(text);
        out.push(b'"');
    };
    let mut ser = serde_json::Serializer::new(&mut *out);
    // Writing into memory cannot fail.
    let _ = match value {
        ValueRef::String(v) => serde::Serializer::serialize_str(&mut ser, v),
        ValueRef::Int32(v) => serde::Serializer::serialize_i32(&mut ser, v),
        ValueRef::Boolean(v) => serde::Serializer::serialize_bool(&mut ser, v),
        ValueRef::Double(v) if v.is_finite() => serde::Serializer::serialize_f64(&mut ser, v),
        ValueRef::Double(v) => {
            let text: &[u8] = if v.is_nan() {
                b"NaN"
            } else if v > 0.0 {
                b"Infinity"
            } else {
                b"-Infinity"
            };
            quoted(out, text);
            Ok(())
        }
        ValueRef::Int64(v) => {
            out.push(b'"');
            let _ =
                serde::Serializer::serialize_i64(&mut serde_json::Serializer::new(&mut *out), v);
            out.push(b'"');
            Ok(())
        }
        ValueRef::DateTime(v) => {
            quoted(out, v.iso_text(":", true).as_bytes());
            Ok(())
        }
        ValueRef::Guid(v) => {
            let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
            quoted(out, v.hyphenated().encode_lower(&mut buf).as_bytes());
            Ok(())
        }
        ValueRef::Binary(v) => {
            out.push(b'"');
            let start = out.len();
            out.resize(start + v.len().div_ceil(3) * 4, 0);
            // The slot is exactly as long as the padded encoding.
            let _ = BASE64.encode_slice(v, &mut out[start..]);
            out.push(b'"');
            Ok(())
        }
    };
    let edm = value.edm_type();
    if !matches!(edm, EdmType::String | EdmType::Int32 | EdmType::Boolean) {
        out.push(b',');
        write_name(out, name, checked_name);
        // Turn the name's closing quote into the annotation suffix's.
        out.pop();
        out.extend_from_slice(b"@odata.type\":\"");
        out.extend_from_slice(edm.as_str().as_bytes());
        out.push(b'"');
    }
}

/// Writes the wire JSON of a row straight from a typed entity, property by
/// property, checking as it goes what the service checks: the keys, each
/// name and value, the number of properties and the entity's size. It is the
/// [`PropertySink`] behind [`schema::to_json`](crate::schema::to_json): no
/// property map is built and no field is copied.
///
/// ```
/// use tablekit::json::EntityWriter;
/// use tablekit::schema::PropertySink;
/// use tablekit::ValueRef;
/// let mut w = EntityWriter::new("p".into(), "r".into())?;
/// w.push("Name".into(), ValueRef::String("Ada"))?;
/// w.push("Visits".into(), ValueRef::Int64(3))?;
/// assert_eq!(
///     w.finish()?,
///     r#"{"PartitionKey":"p","RowKey":"r","Name":"Ada","Visits":"3","Visits@odata.type":"Edm.Int64"}"#
/// );
/// # Ok::<(), tablekit::Error>(())
/// ```
#[derive(Debug)]
pub struct EntityWriter {
    out: Vec<u8>,
    /// Where the keys' JSON strings lie in `out`: they are read back only
    /// for an error message.
    keys: [(usize, usize); 2],
    /// The keys' part of the service's entity-size formula.
    keys_size: usize,
    count: usize,
    size: usize,
    /// Where each name lies in `out`, to find one written twice; `None` when
    /// the names are known valid and distinct.
    names: Option<Vec<(usize, usize)>>,
}

impl EntityWriter {
    /// Starts a row with these keys, refusing keys the service refuses.
    pub fn new(partition_key: String, row_key: String) -> Result<EntityWriter, InvalidInput> {
        EntityWriter::start(&partition_key, &row_key, false)
    }

    /// [`new`](EntityWriter::new) for borrowed keys; with `checked_names` the
    /// property names were all checked at compile time (valid and distinct:
    /// [`EntityDescriptor::checked_names`]), so only values, count and size are
    /// checked for each property.
    ///
    /// [`EntityDescriptor::checked_names`]: crate::schema::EntityDescriptor::checked_names
    pub(crate) fn start(
        partition_key: &str,
        row_key: &str,
        checked_names: bool,
    ) -> Result<EntityWriter, InvalidInput> {
        crate::validate::keys(partition_key, row_key)?;
        let mut out = Vec::with_capacity(512 + partition_key.len() + row_key.len());
        let keys = open(&mut out, partition_key, row_key);
        Ok(EntityWriter {
            out,
            keys,
            keys_size: crate::validate::keys_size(partition_key, row_key),
            count: 0,
            size: 0,
            names: (!checked_names).then(|| Vec::with_capacity(16)),
        })
    }

    /// The keys, read back from the text, for an error message.
    fn key_texts(&self) -> (String, String) {
        let [pk, rk] = self
            .keys
            .map(|(start, end)| serde_json::from_slice(&self.out[start..end]).unwrap_or_default());
        (pk, rk)
    }

    /// The JSON text, once the row is known to be one the service takes: no
    /// name twice ([`SchemaError::NameCollision`]), within the entity size.
    pub fn finish(mut self) -> Result<String, Error> {
        if let Some(names) = &self.names {
            let names: Vec<&[u8]> = names
                .iter()
                .map(|&(start, end)| &self.out[start..end])
                .collect();
            if let Some(name) = crate::props::first_duplicate(&names) {
                return Err(SchemaError::NameCollision {
                    name: String::from_utf8_lossy(name).into_owned(),
                }
                .into());
            }
        }
        if self.keys_size + self.size > crate::validate::limits::MAX_ENTITY_SIZE {
            let (pk, rk) = self.key_texts();
            crate::validate::entity_size(&pk, &rk, self.size)?;
        }
        self.out.push(b'}');
        Ok(into_string(self.out))
    }
}

impl PropertySink for EntityWriter {
    fn push(&mut self, name: PropertyName, value: ValueRef<'_>) -> Result<(), Error> {
        self.size += match &mut self.names {
            Some(names) => {
                let size = crate::validate::property(&name, value)?;
                // `,"` comes before the name, which is a checked identifier
                // and so written as it is.
                let start = self.out.len() + 2;
                names.push((start, start + name.len()));
                size
            }
            None => {
                crate::validate::property_value_ref(&name, value)?;
                crate::validate::property_size(&name, value)
            }
        };
        self.count += 1;
        if self.count > crate::validate::limits::MAX_PROPERTIES {
            let (pk, rk) = self.key_texts();
            crate::validate::property_count(&pk, &rk, self.count)?;
        }
        member(&mut self.out, &name, value, true);
        Ok(())
    }
}

/// An upper bound of [`encoded_len`], found without writing anything: exact
/// for texts and binaries (escapes counted as serde_json writes them), the
/// widest form for numbers, dates and GUIDs. For sizing batches cheaply.
pub fn encoded_len_bound(entity: &Entity) -> usize {
    /// A JSON string: quotes, bytes, and what escaping adds.
    fn text(s: &str) -> usize {
        // Most texts have nothing to escape: that is checked first.
        if !needs_escape(s.as_bytes()) {
            return 2 + s.len();
        }
        let escapes: usize = s
            .bytes()
            .map(|b| match b {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
                0..=0x1f => 5,
                _ => 0,
            })
            .sum();
        2 + s.len() + escapes
    }
    // `{`, `}`, and `"PartitionKey":…,"RowKey":…`.
    let mut len = 2 + 15 + text(&entity.partition_key) + 10 + text(&entity.row_key);
    for (name, value) in entity.properties.iter() {
        // `,"name":value`
        len += 2 + text(name);
        len += match value {
            Value::String(v) => text(v),
            Value::Int32(_) => 11,
            // Quoted, `-9223372036854775808`.
            Value::Int64(_) => 22,
            // The longest shortest round-trip form is 24 characters.
            Value::Double(_) => 25,
            Value::Boolean(_) => 5,
            Value::DateTime(_) => 30,
            Value::Guid(_) => 38,
            Value::Binary(v) => 2 + v.len().div_ceil(3) * 4,
        };
        if needs_annotation(value) {
            // `,"name@odata.type":"Edm.DateTime"`
            len += 2 + text(name) + ANNOTATION_SUFFIX.len() + 14;
        }
    }
    len
}

/// Whether JSON escapes any of `bytes` (a control character, `"` or `\\`).
/// Sixteen bytes at a time, without branches inside, so that it vectorizes:
/// a history or a long text is scanned at a fraction of a cycle a byte.
fn needs_escape(bytes: &[u8]) -> bool {
    let special = |b: u8| u8::from(b < 0x20) | u8::from(b == b'"') | u8::from(b == b'\\');
    let mut chunks = bytes.chunks_exact(16);
    for chunk in &mut chunks {
        if chunk.iter().fold(0, |any, &b| any | special(b)) != 0 {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| special(b) != 0)
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

/// Reads an entity document from a JSON object (a request body, or a row
/// given to tablekit to write), with the checks of [`from_str`]: what a write
/// would refuse is refused here.
pub fn from_json(json: &Json) -> Result<Entity, InvalidInput> {
    let entity = row_from_json(json)?;
    crate::validate::entity(&entity)?;
    Ok(entity)
}

/// [`from_json`] for a row as a store holds it: only the JSON's own rules
/// are checked, as [`row_from_str`] checks them.
pub(crate) fn row_from_json(json: &Json) -> Result<Entity, InvalidInput> {
    let Json::Object(map) = json else {
        return Err(InvalidInput::PropertyValue {
            property: String::new(),
            reason: "an entity must be a JSON object".into(),
        });
    };
    let mut collector = Collector::default();
    for (name, value) in map {
        collector.add(Cow::Borrowed(name), Raw::from(value));
    }
    collector.into_entity()
}

/// Reads an entity document from JSON text, straight from the text (no JSON
/// tree is built): a request body, a line of an export, a row given to
/// tablekit to write.
///
/// A document is taken only if tablekit could have written it, so whatever
/// this returns can be written back. Besides the JSON's own rules (see
/// [`row_from_str`]), it refuses what a write refuses: keys over 512 UTF-16
/// units or with a character the service forbids, a property name that is
/// not an identifier, a value over the service's limits, more than 252
/// properties, an entity over 1 MiB. [`schema::from_json`] takes a
/// document by the same rule, so the two agree on every text: a document
/// one of them refuses, the other refuses too.
///
/// [`schema::from_json`]: crate::schema::from_json
pub fn from_str(text: &str) -> Result<Entity, InvalidInput> {
    let entity = row_from_str(text)?;
    crate::validate::entity(&entity)?;
    Ok(entity)
}

/// Reads a row as a store sent it (the body of a point read), straight from
/// the text. Only the JSON's own rules are checked: a member given twice is
/// refused with [`InvalidInput::DuplicateProperty`], as the service refuses
/// it (`DuplicatePropertiesSpecified`), as are an annotation that names no
/// type and a value its type cannot hold. The store's limits and naming
/// rules are the store's to keep: Azurite, for one, keeps property names the
/// service refuses, and a row it holds stays readable. Use [`from_str`] for
/// a document to be written.
pub fn row_from_str(text: &str) -> Result<Entity, InvalidInput> {
    parse_object(text, MembersVisitor, "a JSON object")?.into_entity()
}

/// The members of an entity's JSON text, names borrowed from it.
pub(crate) fn members_from_str(text: &str) -> Result<Members<'_>, InvalidInput> {
    parse_object(text, MembersVisitor, "a JSON object")?.into_members()
}

/// Reads a whole text as one JSON object with `visitor`; `what` names the
/// object in the error.
fn parse_object<'de, V: serde::de::Visitor<'de>>(
    text: &'de str,
    visitor: V,
    what: &str,
) -> Result<V::Value, InvalidInput> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde::Deserializer::deserialize_map(&mut de, visitor)
        .and_then(|read| de.end().map(|()| read))
        .map_err(|e| InvalidInput::PropertyValue {
            property: String::new(),
            reason: format!("not {what}: {e}"),
        })
}

/// Reads the entities of a query response (`{"value":[…], …}`), straight
/// from the text, each row as [`row_from_str`] reads it; other members of the response are
/// skipped. A row that is valid JSON but not a valid entity (a DateTime
/// outside 1601–9999, say) is returned apart, with its keys and the reason,
/// so the other rows are not lost; text that is not a query response at all
/// is an error.
pub fn entities_from_str(text: &str) -> Result<(Vec<Entity>, Vec<UndecodableRow>), InvalidInput> {
    /// One element of `value`.
    struct Item<'de>(Collector<'de>);
    impl<'de> serde::Deserialize<'de> for Item<'de> {
        fn deserialize<D: serde::Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Item<'de>, D::Error> {
            deserializer.deserialize_map(MembersVisitor).map(Item)
        }
    }
    /// The response object.
    struct PageVisitor;
    impl<'de> serde::de::Visitor<'de> for PageVisitor {
        type Value = Option<Vec<Item<'de>>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a query response object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut items = None;
            while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
                if name == "value" {
                    // A second `value` would make one of them win silently.
                    if items.is_some() {
                        return Err(serde::de::Error::duplicate_field("value"));
                    }
                    items = Some(map.next_value::<Vec<Item<'de>>>()?);
                } else {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            Ok(items)
        }
    }
    match parse_object(text, PageVisitor, "a query response")? {
        Some(items) => {
            let mut entities = Vec::with_capacity(items.len());
            let mut undecodable = Vec::new();
            for Item(collector) in items {
                let keys = collector.keys();
                match collector.into_entity() {
                    Ok(entity) => entities.push(entity),
                    Err(reason) => undecodable.push(UndecodableRow {
                        partition_key: keys.0,
                        row_key: keys.1,
                        reason,
                    }),
                }
            }
            Ok((entities, undecodable))
        }
        None => Err(InvalidInput::PropertyValue {
            property: String::new(),
            reason: "a query response without `value`".into(),
        }),
    }
}

/// A JSON member value before its type annotation is known. Strings are
/// borrowed from the input when they hold no escapes, so annotations and
/// values that are parsed (Int64, DateTime, Guid, Binary) cost no allocation.
#[derive(Clone)]
enum Raw<'de> {
    Str(Cow<'de, str>),
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Null,
    Compound,
}

impl<'de> serde::Deserialize<'de> for Raw<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Raw<'de>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Raw<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Raw<'de>, E> {
                Ok(Raw::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Raw<'de>, E> {
                Ok(Raw::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Raw<'de>, E> {
                Ok(Raw::Str(Cow::Owned(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Raw<'de>, E> {
                Ok(Raw::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Raw<'de>, E> {
                Ok(match i64::try_from(v) {
                    Ok(v) => Raw::Int(v),
                    Err(_) => Raw::UInt(v),
                })
            }
            fn visit_f64<E>(self, v: f64) -> Result<Raw<'de>, E> {
                Ok(Raw::Float(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Raw<'de>, E> {
                Ok(Raw::Bool(v))
            }
            fn visit_unit<E>(self) -> Result<Raw<'de>, E> {
                Ok(Raw::Null)
            }
            fn visit_none<E>(self) -> Result<Raw<'de>, E> {
                Ok(Raw::Null)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Raw<'de>, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Raw::Compound)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Raw<'de>, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Raw::Compound)
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl<'a> From<&'a Json> for Raw<'a> {
    fn from(json: &'a Json) -> Raw<'a> {
        match json {
            Json::String(s) => Raw::Str(Cow::Borrowed(s)),
            Json::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Raw::Int(i),
                (None, Some(u)) => Raw::UInt(u),
                _ => Raw::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::Bool(b) => Raw::Bool(*b),
            Json::Null => Raw::Null,
            Json::Array(_) | Json::Object(_) => Raw::Compound,
        }
    }
}

/// A member name: borrowed from the input when it holds no escapes.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// Reads a JSON object into a [`Collector`], member by member.
struct MembersVisitor;

impl<'de> serde::de::Visitor<'de> for MembersVisitor {
    type Value = Collector<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an entity as a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut collector = Collector::default();
        while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
            let value = if name.starts_with("odata.") && name != "odata.etag" {
                map.next_value::<serde::de::IgnoredAny>()?;
                Raw::Null
            } else {
                map.next_value::<Raw<'de>>()?
            };
            collector.add(name, value);
        }
        Ok(collector)
    }
}

/// A field's member as read: its value and its type annotation, each when
/// present.
type Slot<'de> = (Option<Raw<'de>>, Option<Raw<'de>>);

/// Where [`fields_from_str`] keeps a document's members until they are
/// taken, held by the caller: on the stack for a type of up to 16 fields,
/// so a typed read allocates nothing of its own.
pub(crate) struct SlotBuffer<'de> {
    inline: [Slot<'de>; 16],
    heap: Vec<Slot<'de>>,
}

impl<'de> SlotBuffer<'de> {
    /// An empty buffer.
    #[inline]
    pub(crate) fn new() -> Self {
        SlotBuffer {
            inline: Default::default(),
            heap: Vec::new(),
        }
    }

    /// `n` empty slots.
    #[inline]
    fn slots(&mut self, n: usize) -> &mut [Slot<'de>] {
        if n <= self.inline.len() {
            return &mut self.inline[..n];
        }
        self.heap.resize_with(n, || (None, None));
        &mut self.heap
    }
}

/// The values of the slots left when they were converted at once, and the
/// first that did not convert.
type Converted = (Vec<Option<Value>>, Option<Box<InvalidInput>>);

/// The members of an entity's JSON that a typed entity has fields for, each
/// in its field's slot: what [`schema::from_json`](crate::schema::from_json)
/// reads a type with [`checked_names`](crate::schema::EntityDescriptor::checked_names)
/// from.
///
/// A value is converted from its JSON when the reader takes it
/// ([`take_at`](crate::props::PropertySource::take_at)), so it goes from the
/// text to its field without a pass of its own. A value that does not
/// convert is kept as the source's [`value_error`](Fields::value_error),
/// which the caller checks after reading: a field that can be absent must
/// not turn a bad value into a missing one. The first value read by
/// reference ([`get`](crate::props::PropertySource::get)) converts all that
/// are left at once.
pub(crate) struct Fields<'s, 'de> {
    partition_key: Cow<'de, str>,
    row_key: Cow<'de, str>,
    kind: Option<Value>,
    version: Option<Value>,
    names: &'static [&'static str],
    /// The members not yet taken, in `names`' order.
    slots: &'s mut [Slot<'de>],
    /// Every member left, converted at once: when one is read by reference,
    /// or all are checked.
    converted: std::cell::OnceCell<Converted>,
    /// The first value a take could not convert.
    error: Option<Box<InvalidInput>>,
    /// How many properties no slot holds: the kind and the version (each 1
    /// or 0, when given) and the members of no field.
    listed: usize,
    /// The members of no field's part of the entity's size.
    extras_size: usize,
    /// Every slot before this one is taken: the reader takes them in order,
    /// so this reaches the end and nothing is left to check.
    next: usize,
}

impl<'de> Fields<'_, 'de> {
    /// Whether the document has properties no field reads, besides the
    /// kind and the version.
    pub(crate) fn has_extras(&self) -> bool {
        self.extras_size > 0
    }

    /// The part of the entity's size of the properties no field reads,
    /// besides the kind and the version.
    pub(crate) fn extras_size(&self) -> usize {
        self.extras_size
    }

    /// How many properties the document holds (the kind and version and the
    /// members of no field included), before any is taken: members that are
    /// not `null`.
    pub(crate) fn count(&self) -> usize {
        let values = self.slots.iter();
        self.listed
            + values
                .filter(|(raw, _)| !matches!(raw, None | Some(Raw::Null)))
                .count()
    }

    /// Every value, with its property name (the kind and version
    /// included); the first value that does not convert is the error.
    pub(crate) fn present(&mut self) -> Result<impl Iterator<Item = (&str, &Value)>, InvalidInput> {
        let values = match self.converted() {
            (_, Some(e)) => return Err(InvalidInput::clone(e)),
            (values, None) => values,
        };
        let kind = self.kind.as_ref().map(|v| (crate::props::KIND_PROPERTY, v));
        let version = self
            .version
            .as_ref()
            .map(|v| (crate::props::VERSION_PROPERTY, v));
        let values = self
            .names
            .iter()
            .zip(values)
            .filter_map(|(name, value)| Some((*name, value.as_ref()?)));
        Ok(kind.into_iter().chain(version).chain(values))
    }

    /// Takes the keys out.
    pub(crate) fn take_keys(&mut self) -> (Cow<'de, str>, Cow<'de, str>) {
        (
            std::mem::take(&mut self.partition_key),
            std::mem::take(&mut self.row_key),
        )
    }

    /// The first value of the document that does not convert, in field
    /// order: one met while reading, else one of those never read. `None`
    /// when every value converts.
    pub(crate) fn value_error(&mut self) -> Option<InvalidInput> {
        if let Some(e) = self.error.take() {
            return Some(*e);
        }
        if let Some((_, error)) = self.converted.get_mut() {
            return error.take().map(|e| *e);
        }
        let next = self.next;
        self.slots[next..]
            .iter_mut()
            .zip(&self.names[next..])
            .find_map(|(slot, name)| slot_value(name, std::mem::take(slot)).err())
            .map(|e| *e)
    }

    /// The members left, converted (once).
    fn converted(&self) -> &Converted {
        self.converted.get_or_init(|| {
            let mut error = None;
            let values = self
                .slots
                .iter()
                .zip(self.names)
                .map(|((raw, annotation), name)| {
                    slot_value(name, (raw.clone(), annotation.clone())).unwrap_or_else(|e| {
                        error.get_or_insert(e);
                        None
                    })
                })
                .collect();
            (values, error)
        })
    }

    /// Takes the value at `index` out, converting it.
    #[inline]
    fn take_slot(&mut self, index: usize) -> Option<Value> {
        if let Some((values, _)) = self.converted.get_mut() {
            return values[index].take();
        }
        /// Keeps the first error met (rarely: out of the common path).
        #[cold]
        fn keep(error: &mut Option<Box<InvalidInput>>, e: Box<InvalidInput>) -> Option<Value> {
            error.get_or_insert(e);
            None
        }
        let slot = std::mem::take(&mut self.slots[index]);
        if index == self.next {
            self.next += 1;
        }
        match slot_value(self.names[index], slot) {
            Ok(value) => value,
            Err(e) => keep(&mut self.error, e),
        }
    }
}

impl crate::props::PropertySource for Fields<'_, '_> {
    fn get(&self, name: &str) -> Option<&Value> {
        match name {
            crate::props::KIND_PROPERTY => self.kind.as_ref(),
            crate::props::VERSION_PROPERTY => self.version.as_ref(),
            _ => {
                let i = self.names.iter().position(|n| *n == name)?;
                self.converted().0[i].as_ref()
            }
        }
    }
    fn take(&mut self, name: &str) -> Option<Value> {
        let i = self.names.iter().position(|n| *n == name)?;
        self.take_slot(i)
    }
    #[inline]
    fn take_at(&mut self, index: usize, name: &str) -> Option<Value> {
        // The slots are in `names`' order; the hint is checked, not trusted.
        // The generated reader passes the very text the list holds: equal
        // pointers settle the check without comparing the text.
        match self.names.get(index) {
            Some(n) if std::ptr::eq(*n, name) || *n == name => self.take_slot(index),
            _ => self.take(name),
        }
    }
    fn extract(&mut self, select: &mut dyn FnMut(&str) -> bool) -> Vec<(String, Value)> {
        let names = self.names;
        names
            .iter()
            .enumerate()
            .filter(|(_, name)| select(name))
            .filter_map(|(i, name)| Some(((*name).to_owned(), self.take_slot(i)?)))
            .collect()
    }
}

/// A field's value from its member and annotation; `None` when absent or
/// `null`. The error is boxed: this runs for every field, and a small
/// result keeps the common path free of large moves.
#[inline]
fn slot_value(name: &str, (raw, annotation): Slot<'_>) -> Result<Option<Value>, Box<InvalidInput>> {
    let edm = match annotation {
        None => None,
        Some(annotation) => Some(annotation_type(name, &annotation).map_err(Box::new)?),
    };
    match raw {
        Some(raw) => value_from_raw(name, raw, edm),
        None => Ok(None),
    }
}

/// Reads the members into `read`, which the caller holds: the read state
/// is written in place, never moved through serde's result.
struct FieldsVisitor<'r, 's, 'de> {
    fields: usize,
    slot_of: fn(&str) -> MemberSlot,
    read: &'r mut Read<'s, 'de>,
}
struct Read<'s, 'de> {
    /// The keys, kind, version, ETag and Timestamp, in that order.
    keys: [Option<Raw<'de>>; 6],
    slots: &'s mut [Slot<'de>],
    repeated: Option<String>,
    /// The members of no field (boxed, and only when there are any):
    /// not read into the value, but checked as the wire reader checks
    /// them, so a document it refuses is refused here too.
    extras: Option<Box<Collector<'de>>>,
}
impl<'de> serde::de::Visitor<'de> for FieldsVisitor<'_, '_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an entity as a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let read = self.read;
        while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
            let slot = match &*name {
                "PartitionKey" => &mut read.keys[0],
                "RowKey" => &mut read.keys[1],
                crate::props::KIND_PROPERTY => &mut read.keys[2],
                crate::props::VERSION_PROPERTY => &mut read.keys[3],
                n => match (self.slot_of)(n) {
                    MemberSlot::Value(i) if i < self.fields => &mut read.slots[i].0,
                    MemberSlot::Annotation(i) if i < self.fields => &mut read.slots[i].1,
                    // A member of no field: a response's own, or one
                    // to check as the wire reader would.
                    _ => match n {
                        "odata.etag" => &mut read.keys[4],
                        "Timestamp" => &mut read.keys[5],
                        // The other OData control members are ignored.
                        _ if n.starts_with("odata.") => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                        _ => {
                            let value = map.next_value::<Raw<'de>>()?;
                            read.extras.get_or_insert_default().add(name, value);
                            continue;
                        }
                    },
                },
            };
            if slot.replace(map.next_value::<Raw<'de>>()?).is_some() {
                read.repeated.get_or_insert_with(|| name.into_owned());
            }
        }
        Ok(())
    }
}

/// Reads the members of an entity's JSON text that `names` lists (and the
/// keys, kind and version), each into its slot; other members are skipped.
/// A listed member given twice is refused, as [`from_str`] refuses it.
pub(crate) fn fields_from_str<'s, 'de>(
    text: &'de str,
    names: &'static [&'static str],
    slot_of: fn(&str) -> MemberSlot,
    kind: Option<&str>,
    buffer: &'s mut SlotBuffer<'de>,
) -> Result<Fields<'s, 'de>, InvalidInput> {
    let fields = names.len();
    let mut read = Read {
        keys: [None, None, None, None, None, None],
        slots: buffer.slots(fields),
        repeated: None,
        extras: None,
    };
    let visitor = FieldsVisitor {
        fields,
        read: &mut read,
        slot_of,
    };
    parse_object(text, visitor, "a JSON object")?;
    if let Some(name) = read.repeated {
        return Err(InvalidInput::DuplicateProperty { name });
    }
    // The members of no field: refused where the wire reader refuses them.
    // An annotation of the kind or the version applies to it, as there.
    let extras = match read.extras {
        Some(extras) => extras.check_extras()?,
        None => Extras {
            kind_edm: None,
            version_edm: None,
            count: 0,
            size: 0,
        },
    };
    let (kind_edm, version_edm) = (extras.kind_edm, extras.version_edm);
    let [
        partition_key,
        row_key,
        stored_kind,
        version,
        _etag,
        timestamp,
    ] = read.keys;
    // A service's response carries the row's time: it must be one.
    timestamp_of(&timestamp)?;
    // Counted here, before any is taken: `null` is an absent property.
    let present = |raw: &Option<Raw<'_>>| !matches!(raw, None | Some(Raw::Null));
    let listed = usize::from(present(&stored_kind)) + usize::from(present(&version));
    // The expected kind is settled here, without building its value; any
    // other is kept for the reader to refuse.
    let stored_kind = match (stored_kind, kind, kind_edm) {
        (Some(Raw::Str(stored)), Some(kind), None) if stored == kind => None,
        (stored, _, _) => stored,
    };
    Ok(Fields {
        partition_key: key_text(partition_key, "PartitionKey")?,
        row_key: key_text(row_key, "RowKey")?,
        kind: value_from(crate::props::KIND_PROPERTY, stored_kind, kind_edm)?,
        version: value_from(crate::props::VERSION_PROPERTY, version, version_edm)?,
        names,
        slots: read.slots,
        converted: std::cell::OnceCell::new(),
        error: None,
        listed: listed + extras.count,
        extras_size: extras.size,
        next: 0,
    })
}

/// An entity read from JSON, its property names borrowed from the text when
/// they hold no escapes: what [`schema::from_json`](crate::schema::from_json)
/// reads a typed entity with flattened or series fields from, without
/// copying any name.
#[derive(Debug)]
pub(crate) struct Members<'de> {
    pub(crate) partition_key: Cow<'de, str>,
    pub(crate) row_key: Cow<'de, str>,
    /// Each property, `None` once a typed reader has taken it.
    pub(crate) properties: Vec<(Cow<'de, str>, Option<Value>)>,
    /// Where the next search for a name starts: a typed reader takes the
    /// fields in the order they were written, so each is usually found first.
    cursor: usize,
}

impl Members<'_> {
    /// The index of `name`'s value, searching from the cursor on and then
    /// from the start.
    fn position(&self, name: &str) -> Option<usize> {
        let (before, after) = self
            .properties
            .split_at(self.cursor.min(self.properties.len()));
        let found = |entries: &[(Cow<'_, str>, Option<Value>)]| {
            entries.iter().position(|(n, v)| v.is_some() && n == name)
        };
        found(after)
            .map(|i| i + before.len())
            .or_else(|| found(before))
    }
}

impl crate::props::PropertySource for Members<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.position(name)
            .and_then(|i| self.properties[i].1.as_ref())
    }
    fn take(&mut self, name: &str) -> Option<Value> {
        let i = self.position(name)?;
        self.cursor = i + 1;
        self.properties[i].1.take()
    }
    fn extract(&mut self, select: &mut dyn FnMut(&str) -> bool) -> Vec<(String, Value)> {
        self.properties
            .iter_mut()
            .filter(|(name, value)| value.is_some() && select(name))
            .filter_map(|(name, value)| Some((name.to_string(), value.take()?)))
            .collect()
    }
}

/// A cheap summary of a name: its length and a few of its bytes. Names with
/// different fingerprints differ; only equal fingerprints need comparing.
fn fingerprint(name: &str) -> u64 {
    let b = name.as_bytes();
    let at = |i: usize| u64::from(b.get(i).copied().unwrap_or(0));
    let last = |i: usize| u64::from(b.len().checked_sub(i).map_or(0, |j| b[j]));
    (b.len() as u64) << 48
        | at(0) << 40
        | at(1) << 32
        | at(2) << 24
        | last(3) << 16
        | last(2) << 8
        | last(1)
}

/// Sorts an entity's JSON members as they arrive: keys, ETag and Timestamp
/// apart, annotations apart (their type read at once), properties in order.
/// [`into_entity`](Collector::into_entity) and
/// [`into_members`](Collector::into_members) then apply the rules of
/// [`from_json`].
#[derive(Default)]
struct Collector<'de> {
    partition_key: Option<Raw<'de>>,
    row_key: Option<Raw<'de>>,
    etag: Option<Raw<'de>>,
    timestamp: Option<Raw<'de>>,
    /// A system member given twice.
    repeated: Option<&'static str>,
    /// Each annotation: its base name's fingerprint, the base name, the
    /// annotation's value and the type it names (`None`: not one).
    annotations: Vec<(u64, Cow<'de, str>, Raw<'de>, Option<EdmType>)>,
    /// Each property: name, value, and the name's fingerprint.
    properties: Vec<(Cow<'de, str>, Raw<'de>, u64)>,
}

/// What [`Collector::check_extras`] found of the members no field reads.
struct Extras {
    /// The type the kind's annotation names, if it has one.
    kind_edm: Option<EdmType>,
    /// The type the version's annotation names, if it has one.
    version_edm: Option<EdmType>,
    /// How many properties they are (`null` is none).
    count: usize,
    /// Their part of the service's entity-size formula.
    size: usize,
}

/// What an entity's JSON says besides its properties.
struct Header<'de> {
    partition_key: Cow<'de, str>,
    row_key: Cow<'de, str>,
    etag: Option<ETag>,
    timestamp: Option<DateTime>,
}

impl<'de> Collector<'de> {
    /// The keys as far as they are strings, for a row that fails to read.
    fn keys(&self) -> (String, String) {
        let text = |raw: &Option<Raw<'de>>| match raw {
            Some(Raw::Str(s)) => s.to_string(),
            _ => String::new(),
        };
        (text(&self.partition_key), text(&self.row_key))
    }

    fn add(&mut self, name: Cow<'de, str>, raw: Raw<'de>) {
        let (slot, system) = match &*name {
            "PartitionKey" => (&mut self.partition_key, "PartitionKey"),
            "RowKey" => (&mut self.row_key, "RowKey"),
            "odata.etag" => (&mut self.etag, "odata.etag"),
            "Timestamp" => (&mut self.timestamp, "Timestamp"),
            n if n.starts_with("odata.") => return,
            n if n.ends_with(ANNOTATION_SUFFIX) => {
                let base = match name {
                    Cow::Borrowed(n) => Cow::Borrowed(&n[..n.len() - ANNOTATION_SUFFIX.len()]),
                    Cow::Owned(mut n) => {
                        n.truncate(n.len() - ANNOTATION_SUFFIX.len());
                        Cow::Owned(n)
                    }
                };
                let edm = annotation_type(&base, &raw).ok();
                self.annotations.push((fingerprint(&base), base, raw, edm));
                return;
            }
            n => {
                let print = fingerprint(n);
                self.properties.push((name, raw, print));
                return;
            }
        };
        if slot.replace(raw).is_some() {
            self.repeated.get_or_insert(system);
        }
    }

    /// The entity, its names copied out of the text.
    fn into_entity(self) -> Result<Entity, InvalidInput> {
        let mut properties = Properties::with_capacity(self.properties.len());
        let header = self.finish(|name, value| {
            properties.push_unchecked(Cow::Owned(name.into_owned()), value);
        })?;
        let mut entity = Entity::new(header.partition_key, header.row_key);
        entity.etag = header.etag;
        entity.timestamp = header.timestamp;
        entity.properties = properties;
        Ok(entity)
    }

    /// The entity's members, names borrowed from the text.
    fn into_members(self) -> Result<Members<'de>, InvalidInput> {
        let mut properties = Vec::with_capacity(self.properties.len());
        let header = self.finish(|name, value| properties.push((name, Some(value))))?;
        Ok(Members {
            partition_key: header.partition_key,
            row_key: header.row_key,
            properties,
            cursor: 0,
        })
    }

    /// Checks the members and hands each property's typed value to `push`,
    /// in order.
    fn finish(
        mut self,
        push: impl FnMut(Cow<'de, str>, Value),
    ) -> Result<Header<'de>, InvalidInput> {
        self.check_members()?;
        let header = Header {
            partition_key: key_text(self.partition_key.take(), "PartitionKey")?,
            row_key: key_text(self.row_key.take(), "RowKey")?,
            etag: match self.etag.take() {
                Some(Raw::Str(tag)) => Some(ETag::new(tag.into_owned())),
                _ => None,
            },
            timestamp: timestamp_of(&self.timestamp)?,
        };
        self.convert(push)?;
        Ok(header)
    }

    /// The checks of [`finish`](Collector::finish) for the members of a
    /// typed entity's JSON that no field reads (the typed reader takes the
    /// keys, ETag and Timestamp itself): what the wire reader would refuse
    /// in them is refused, and so is what a write refuses (a name that is
    /// not an identifier, a value over the limits), as [`from_str`] refuses
    /// it. Their values are dropped. Returns the types the annotations of the
    /// kind and the version name, which apply to them as they do on the wire
    /// reader's path, and how many properties the members are and their part
    /// of the entity's size, for the checks of the whole document.
    fn check_extras(self) -> Result<Extras, InvalidInput> {
        self.check_members()?;
        let edm_of = |name: &str| {
            self.annotations
                .iter()
                .find(|(_, base, _, _)| base == name)
                .and_then(|(_, _, _, edm)| *edm)
        };
        let mut extras = Extras {
            kind_edm: edm_of(crate::props::KIND_PROPERTY),
            version_edm: edm_of(crate::props::VERSION_PROPERTY),
            count: 0,
            size: 0,
        };
        let mut refused = None;
        self.convert(|name, value| {
            if refused.is_none() {
                match crate::validate::property(&name, value.as_value_ref()) {
                    Ok(size) => extras.size += size,
                    Err(e) => refused = Some(e),
                }
            }
            extras.count += 1;
        })?;
        match refused {
            Some(e) => Err(e),
            None => Ok(extras),
        }
    }

    /// Refuses a member given twice and an annotation that names no type.
    fn check_members(&self) -> Result<(), InvalidInput> {
        // Entities hold at most a few hundred members; fingerprints keep the
        // pairwise check to integer compares.
        fn first_repeated<T>(entries: &[T], key: impl Fn(&T) -> (u64, &str)) -> Option<&str> {
            entries.iter().enumerate().find_map(|(i, entry)| {
                let (print, name) = key(entry);
                entries[..i]
                    .iter()
                    .any(|earlier| key(earlier) == (print, name))
                    .then_some(name)
            })
        }
        let repeated = self
            .repeated
            .or_else(|| first_repeated(&self.properties, |(n, _, p)| (*p, &**n)))
            .map(str::to_owned)
            .or_else(|| {
                first_repeated(&self.annotations, |(p, n, _, _)| (*p, &**n))
                    .map(|base| format!("{base}{ANNOTATION_SUFFIX}"))
            });
        if let Some(name) = repeated {
            return Err(InvalidInput::DuplicateProperty { name });
        }
        if let Some((_, base, raw, _)) = self.annotations.iter().find(|a| a.3.is_none()) {
            annotation_type(base, raw)?;
        }
        Ok(())
    }

    /// Hands each property's typed value to `push`, in order.
    fn convert(self, mut push: impl FnMut(Cow<'de, str>, Value)) -> Result<(), InvalidInput> {
        for (name, raw, print) in self.properties {
            let edm = self
                .annotations
                .iter()
                .find(|(p, base, _, _)| *p == print && *base == name)
                .and_then(|(_, _, _, edm)| *edm);
            if let Some(value) = value_from_raw(&name, raw, edm).map_err(|e| *e)? {
                push(name, value);
            }
        }
        Ok(())
    }
}

/// The `Timestamp` member's time, when it is a string: it must be a time.
fn timestamp_of(raw: &Option<Raw<'_>>) -> Result<Option<DateTime>, InvalidInput> {
    match raw {
        Some(Raw::Str(text)) => Ok(Some(DateTime::parse(text)?)),
        _ => Ok(None),
    }
}

/// The text of a key member (`PartitionKey` or `RowKey`), which must be a
/// string and present.
fn key_text<'de>(raw: Option<Raw<'de>>, name: &str) -> Result<Cow<'de, str>, InvalidInput> {
    match raw {
        Some(Raw::Str(key)) => Ok(key),
        other => Err(InvalidInput::PropertyValue {
            property: name.into(),
            reason: if other.is_some() {
                "keys must be strings"
            } else {
                "missing"
            }
            .into(),
        }),
    }
}

/// A member's value of type `edm` (when annotated); `None` when absent or
/// `null`.
fn value_from(
    name: &str,
    raw: Option<Raw<'_>>,
    edm: Option<EdmType>,
) -> Result<Option<Value>, InvalidInput> {
    match raw {
        Some(raw) => value_from_raw(name, raw, edm).map_err(|e| *e),
        None => Ok(None),
    }
}

/// The type a `name@odata.type` member names.
fn annotation_type(name: &str, raw: &Raw<'_>) -> Result<EdmType, InvalidInput> {
    let bad = |reason: String| InvalidInput::PropertyValue {
        property: name.to_owned(),
        reason,
    };
    match raw {
        Raw::Str(type_name) => EdmType::from_annotation(type_name)
            .ok_or_else(|| bad(format!("unsupported type annotation {type_name:?}"))),
        _ => Err(bad("type annotation must be a string".into())),
    }
}

/// Reads one property value; `Ok(None)` for `null` (an absent property).
pub fn value_from_json(
    name: &str,
    json: &Json,
    edm: Option<EdmType>,
) -> Result<Option<Value>, InvalidInput> {
    value_from_raw(name, Raw::from(json), edm).map_err(|e| *e)
}

#[inline]
fn value_from_raw(
    name: &str,
    raw: Raw<'_>,
    edm: Option<EdmType>,
) -> Result<Option<Value>, Box<InvalidInput>> {
    // The error is boxed: this runs for every member, and a small result
    // keeps the common path free of large moves.
    let bad = |reason: &str| {
        Box::new(InvalidInput::PropertyValue {
            property: name.to_owned(),
            reason: reason.to_owned(),
        })
    };
    let value = match (edm, raw) {
        (_, Raw::Null) => return Ok(None),
        (_, Raw::Compound) => return Err(bad("arrays and objects cannot be stored")),
        (None | Some(EdmType::String), Raw::Str(s)) => Value::String(s.into_owned()),
        (None | Some(EdmType::Boolean), Raw::Bool(b)) => Value::Boolean(b),
        (Some(EdmType::Boolean), Raw::Str(s)) => match &*s {
            "true" => Value::Boolean(true),
            "false" => Value::Boolean(false),
            _ => return Err(bad("not a Boolean")),
        },
        // An unannotated integer is Int32; one outside Int32's range (which
        // the service itself never sends) is kept losslessly as Int64.
        (None, Raw::Int(i)) => match i32::try_from(i) {
            Ok(small) => Value::Int32(small),
            Err(_) => Value::Int64(i),
        },
        (None | Some(EdmType::Int32 | EdmType::Int64), Raw::UInt(_)) => {
            return Err(bad("integer out of range"));
        }
        (None | Some(EdmType::Double), Raw::Float(v)) => Value::Double(v),
        (Some(EdmType::Int32), Raw::Int(i)) => {
            Value::Int32(i32::try_from(i).map_err(|_| bad("out of Int32 range"))?)
        }
        (Some(EdmType::Int32), Raw::Str(s)) => {
            Value::Int32(s.parse().map_err(|_| bad("not an Int32"))?)
        }
        (Some(EdmType::Int64), Raw::Str(s)) => {
            Value::Int64(s.parse().map_err(|_| bad("not an Int64"))?)
        }
        (Some(EdmType::Int64), Raw::Int(i)) => Value::Int64(i),
        (Some(EdmType::Double), Raw::Int(i)) => Value::Double(i as f64),
        (Some(EdmType::Double), Raw::UInt(u)) => Value::Double(u as f64),
        (Some(EdmType::Double), Raw::Str(s)) => Value::Double(match &*s {
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
        (Some(EdmType::DateTime), Raw::Str(s)) => {
            Value::DateTime(DateTime::parse(&s).map_err(Box::new)?)
        }
        (Some(EdmType::Guid), Raw::Str(s)) => {
            Value::Guid(uuid::Uuid::try_parse(&s).map_err(|_| bad("not a GUID"))?)
        }
        (Some(EdmType::Binary), Raw::Str(s)) => {
            Value::Binary(BASE64.decode(&*s).map_err(|_| bad("not standard base64"))?)
        }
        (Some(edm), _) => return Err(bad(&format!("JSON value does not fit {edm}"))),
    };
    Ok(Some(value))
}

/// A row of a query response that could not be read as an entity.
#[derive(Debug, Clone, PartialEq)]
pub struct UndecodableRow {
    /// Its PartitionKey, as far as it could be read (empty if not at all).
    pub partition_key: String,
    /// Its RowKey, as far as it could be read (empty if not at all).
    pub row_key: String,
    /// What is wrong with it.
    pub reason: crate::error::InvalidInput,
}

impl From<UndecodableRow> for crate::error::Error {
    fn from(row: UndecodableRow) -> crate::error::Error {
        crate::error::Error::UndecodableRow {
            partition_key: row.partition_key,
            row_key: row.row_key,
            reason: row.reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            assert!(entities_from_str(bad).is_err(), "{bad} accepted");
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
}
