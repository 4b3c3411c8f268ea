//! The in-memory layout of keys and rows.
//!
//! Hand-written because it is a private storage layout, not an interchange
//! format: a general serializer would need a serde model of `Value` and would
//! still store every property name in every row.
//!
//! **Keys** are stored as UTF-8 in which the lead bytes of U+E000..=U+FFFF
//! (`0xEE`, `0xEF`) become `0xF5`, `0xF6` (bytes UTF-8 never uses). Byte order
//! of that form equals the store's UTF-16 code-unit order, so a plain
//! `BTreeMap<Box<[u8]>, _>` sorts keys as the service does, and most keys (no
//! such characters) are looked up without copying.
//!
//! **Rows** are one allocation: the write time in ticks, then each property as
//! (name id, type tag, payload). Names are interned per table.

use rustc_hash::FxHashMap;
use std::borrow::Cow;

use tablekit::{DateTime, Entity, Properties, Value};

/// The stored form of a PartitionKey or RowKey.
pub(crate) fn encode_key(key: &str) -> Cow<'_, [u8]> {
    let bytes = key.as_bytes();
    if !bytes.iter().any(|b| matches!(b, 0xEE | 0xEF)) {
        return Cow::Borrowed(bytes);
    }
    Cow::Owned(
        bytes
            .iter()
            .map(|b| match b {
                0xEE => 0xF5,
                0xEF => 0xF6,
                other => *other,
            })
            .collect(),
    )
}

/// The key text of a stored key.
pub(crate) fn decode_key(stored: &[u8]) -> String {
    let bytes: Vec<u8> = stored
        .iter()
        .map(|b| match b {
            0xF5 => 0xEE,
            0xF6 => 0xEF,
            other => *other,
        })
        .collect();
    // Stored keys come from `encode_key` of valid UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

/// Property names of one table, interned: rows hold a small id per name.
#[derive(Debug, Default)]
pub(crate) struct Names {
    names: Vec<Box<str>>,
    /// Fx hashing: names are short, trusted-size keys looked up on every write.
    ids: FxHashMap<Box<str>, u32>,
}

impl Names {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        id
    }

    fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |n| n)
    }

    /// The id of `name`, if any row ever used it.
    pub(crate) fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }
}

const STRING: u8 = 0;
const INT32: u8 = 1;
const INT64: u8 = 2;
const DOUBLE: u8 = 3;
const BOOLEAN: u8 = 4;
const DATETIME: u8 = 5;
const GUID: u8 = 6;
const BINARY: u8 = 7;

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over a stored row.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        while let Some((&b, rest)) = self.bytes.split_first() {
            self.bytes = rest;
            v |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        v
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.bytes.len());
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        head
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N));
        out
    }
}

/// A stored row: write time and properties in one allocation.
#[derive(Debug, Clone)]
pub(crate) struct Row(Box<[u8]>);

impl Row {
    /// Encodes `props`, interning their names in `names`.
    pub(crate) fn encode(ticks: i64, props: &Properties, names: &mut Names) -> Row {
        // Intern first, so the exact size is known: one allocation of the
        // right length (a shrinking reallocation churns the allocator).
        let mut ids = [0u32; tablekit::validate::limits::MAX_PROPERTIES];
        let mut size = 8 + varint_len(props.len() as u64);
        for ((name, value), id) in props.iter().zip(ids.iter_mut()) {
            *id = names.intern(name);
            size += varint_len(u64::from(*id)) + 1;
            size += match value {
                Value::String(s) => varint_len(s.len() as u64) + s.len(),
                Value::Binary(b) => varint_len(b.len() as u64) + b.len(),
                Value::Int32(_) => 4,
                Value::Boolean(_) => 1,
                Value::Guid(_) => 16,
                Value::Int64(_) | Value::Double(_) | Value::DateTime(_) => 8,
            };
        }
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&ticks.to_le_bytes());
        put_varint(&mut out, props.len() as u64);
        for ((_, value), id) in props.iter().zip(ids) {
            put_varint(&mut out, u64::from(id));
            match value {
                Value::String(s) => {
                    out.push(STRING);
                    put_varint(&mut out, s.len() as u64);
                    out.extend_from_slice(s.as_bytes());
                }
                Value::Int32(v) => {
                    out.push(INT32);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                Value::Int64(v) => {
                    out.push(INT64);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                Value::Double(v) => {
                    out.push(DOUBLE);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                Value::Boolean(v) => {
                    out.push(BOOLEAN);
                    out.push(u8::from(*v));
                }
                Value::DateTime(v) => {
                    out.push(DATETIME);
                    out.extend_from_slice(&v.ticks().to_le_bytes());
                }
                Value::Guid(v) => {
                    out.push(GUID);
                    out.extend_from_slice(v.as_bytes());
                }
                Value::Binary(v) => {
                    out.push(BINARY);
                    put_varint(&mut out, v.len() as u64);
                    out.extend_from_slice(v);
                }
            }
        }
        debug_assert_eq!(out.len(), size);
        Row(out.into_boxed_slice())
    }

    /// The write time, in ticks.
    pub(crate) fn ticks(&self) -> i64 {
        let mut head = [0u8; 8];
        head.copy_from_slice(&self.0[..8]);
        i64::from_le_bytes(head)
    }

    /// Bytes held on the heap for this row.
    #[cfg(test)]
    pub(crate) fn heap_size(&self) -> usize {
        self.0.len()
    }

    /// Decodes the properties; with `select`, only properties whose name id is
    /// listed.
    pub(crate) fn properties(&self, names: &Names, select: Option<&[u32]>) -> Properties {
        let mut reader = Reader {
            bytes: &self.0[8..],
        };
        let count = reader.varint() as usize;
        let mut props = Properties::with_capacity(select.map_or(count, <[u32]>::len));
        for _ in 0..count {
            let id = reader.varint() as u32;
            let tag = reader.take(1).first().copied().unwrap_or(u8::MAX);
            let value = match tag {
                STRING => {
                    let len = reader.varint() as usize;
                    let bytes = reader.take(len);
                    Value::String(String::from_utf8_lossy(bytes).into_owned())
                }
                INT32 => Value::Int32(i32::from_le_bytes(reader.array())),
                INT64 => Value::Int64(i64::from_le_bytes(reader.array())),
                DOUBLE => Value::Double(f64::from_le_bytes(reader.array())),
                BOOLEAN => Value::Boolean(reader.take(1) == [1]),
                DATETIME => {
                    let ticks = i64::from_le_bytes(reader.array());
                    Value::DateTime(DateTime::from_ticks(ticks).unwrap_or(DateTime::MIN))
                }
                GUID => Value::Guid(tablekit::uuid::Uuid::from_bytes(reader.array())),
                _ => {
                    let len = reader.varint() as usize;
                    Value::Binary(reader.take(len).to_vec())
                }
            };
            if select.is_none_or(|ids| ids.contains(&id)) {
                // A row holds each name once.
                props.push_unique(names.name(id).to_owned(), value);
            }
        }
        props
    }

    /// The entity this row stores.
    pub(crate) fn entity(
        &self,
        pk: &[u8],
        rk: &[u8],
        names: &Names,
        select: Option<&Selection>,
    ) -> Entity {
        let mut entity = Entity::new(decode_key(pk), decode_key(rk));
        entity.properties = self.properties(names, select.map(|s| s.ids.as_slice()));
        let written = DateTime::from_ticks(self.ticks()).unwrap_or(DateTime::MIN);
        entity.etag = Some(tablekit::ETag::from_timestamp(written));
        if select.is_none_or(|s| s.timestamp) {
            entity.timestamp = Some(written);
        }
        entity
    }
}

/// A `$select` resolved against a table's names.
#[derive(Debug)]
pub(crate) struct Selection {
    ids: Vec<u32>,
    timestamp: bool,
}

impl Selection {
    pub(crate) fn new(select: &[String], names: &Names) -> Selection {
        Selection {
            // A selected name no row ever used cannot match anything.
            ids: select.iter().filter_map(|n| names.id(n)).collect(),
            timestamp: select.iter().any(|n| n == "Timestamp"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablekit::keyorder::cmp_utf16;

    #[test]
    fn key_bytes_sort_like_utf16() {
        let keys = [
            "a",
            "\u{E000}",
            "\u{10000}",
            "\u{FF21}",
            "\u{1F600}",
            "\u{D7FF}",
            "é",
            "",
            "\u{FFFF}x",
        ];
        for a in keys {
            for b in keys {
                let bytes = encode_key(a).cmp(&encode_key(b));
                assert_eq!(bytes, cmp_utf16(a, b), "{a:?} vs {b:?}");
            }
            assert_eq!(decode_key(&encode_key(a)), a);
        }
    }

    #[test]
    fn rows_round_trip_every_type() {
        let mut names = Names::default();
        let props: Properties = [
            ("S", Value::String("héllo".into())),
            ("I", Value::Int32(-5)),
            ("L", Value::Int64(i64::MIN)),
            ("D", Value::Double(f64::NAN)),
            ("B", Value::Boolean(true)),
            ("T", Value::DateTime(DateTime::MAX)),
            ("G", Value::Guid(tablekit::uuid::Uuid::from_u128(7))),
            ("X", Value::Binary(vec![0, 255, 7])),
            ("E", Value::String(String::new())),
        ]
        .into_iter()
        .collect();
        let row = Row::encode(42, &props, &mut names);
        assert_eq!(row.ticks(), 42);
        assert_eq!(row.properties(&names, None), props);
        let only = row.properties(&names, Some(&[names.id("L").unwrap()]));
        assert_eq!(only.len(), 1);
        assert_eq!(only.get("L"), Some(&Value::Int64(i64::MIN)));
        assert!(row.heap_size() < 100);
    }
}
