//! The members of a row read as text (names and raw values), their
//! conversion into values, and a row that does not decode.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::Value as Json;

use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, Properties};
use crate::error::InvalidInput;
use crate::props::ANNOTATION_SUFFIX;
use crate::value::{EdmType, Value};

/// An entity read from JSON, its property names borrowed from the text when
/// they hold no escapes: what [`schema::from_json`](crate::schema::from_json)
/// reads a typed entity with flattened or series fields from, without
/// copying any name.
#[derive(Debug)]
#[doc(hidden)]
pub struct Members<'de> {
    #[doc(hidden)]
    pub partition_key: Cow<'de, str>,
    #[doc(hidden)]
    pub row_key: Cow<'de, str>,
    /// Each property, `None` once a typed reader has taken it.
    #[doc(hidden)]
    pub properties: Vec<(Cow<'de, str>, Option<Value>)>,
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
pub(super) struct Collector<'de> {
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
pub(super) struct Extras {
    /// The type the kind's annotation names, if it has one.
    pub(super) kind_edm: Option<EdmType>,
    /// The type the version's annotation names, if it has one.
    pub(super) version_edm: Option<EdmType>,
    /// How many properties they are (`null` is none).
    pub(super) count: usize,
    /// Their part of the service's entity-size formula.
    pub(super) size: usize,
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
    pub(super) fn keys(&self) -> (String, String) {
        let text = |raw: &Option<Raw<'de>>| match raw {
            Some(Raw::Str(s)) => s.to_string(),
            _ => String::new(),
        };
        (text(&self.partition_key), text(&self.row_key))
    }

    pub(super) fn add(&mut self, name: Cow<'de, str>, raw: Raw<'de>) {
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
    pub(super) fn into_entity(self) -> Result<Entity, InvalidInput> {
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
    pub(super) fn into_members(self) -> Result<Members<'de>, InvalidInput> {
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
    pub(super) fn check_extras(self) -> Result<Extras, InvalidInput> {
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
pub(super) fn timestamp_of(raw: &Option<Raw<'_>>) -> Result<Option<DateTime>, InvalidInput> {
    match raw {
        Some(Raw::Str(text)) => Ok(Some(DateTime::parse(text)?)),
        _ => Ok(None),
    }
}

/// The text of a key member (`PartitionKey` or `RowKey`), which must be a
/// string and present.
pub(super) fn key_text<'de>(
    raw: Option<Raw<'de>>,
    name: &str,
) -> Result<Cow<'de, str>, InvalidInput> {
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
pub(super) fn value_from(
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
pub(super) fn annotation_type(name: &str, raw: &Raw<'_>) -> Result<EdmType, InvalidInput> {
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
pub(super) fn value_from_raw(
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

/// A JSON member value before its type annotation is known. Strings are
/// borrowed from the input when they hold no escapes, so annotations and
/// values that are parsed (Int64, DateTime, Guid, Binary) cost no allocation.
#[derive(Clone)]
pub(super) enum Raw<'de> {
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
