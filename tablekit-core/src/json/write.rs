//! Writing an entity's JSON: from an [`Entity`](crate::Entity), or from a
//! typed value's fields through [`EntityWriter`].

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Number, Value as Json};

use crate::entity::{Entity, PropertyName};
use crate::error::{Error, InvalidInput, SchemaError};
use crate::props::{ANNOTATION_SUFFIX, PropertySink};
use crate::value::{EdmType, Value, ValueRef};

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
/// [`PropertySink`] behind `tablekit::schema::to_json`: no
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
    #[doc(hidden)]
    pub fn start(
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
