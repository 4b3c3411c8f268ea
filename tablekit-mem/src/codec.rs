//! The in-memory layout of keys and rows.
//!
//! Hand-written because it is a private storage layout, not an interchange
//! format: a general serializer would need a serde model of `Value` and would
//! still store every property name in every row.
//!
//! **Keys** are stored by [`encode_key`], whose byte order is the store's
//! UTF-16 code-unit order, so a plain `BTreeMap<Box<[u8]>, _>` sorts keys as
//! the service does, and most keys are looked up without copying.
//!
//! **Rows** are one allocation: the write time in ticks, then each property as
//! (name id, value in [`encode_value`]'s form). Names are interned per table.

use rustc_hash::FxHashMap;

#[cfg(doc)]
use tablekit_core::backend::sorted::encode_key;
use tablekit_core::backend::sorted::{
    decode_key, decode_value, encode_value, encoded_value_len, put_varint, skip_value, take_varint,
    varint_len,
};
use tablekit_core::{DateTime, Entity, Properties};

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

/// A stored row: write time and properties in one allocation.
#[derive(Debug, Clone)]
pub(crate) struct Row(Box<[u8]>);

impl Row {
    /// Encodes `props`, interning their names in `names`.
    pub(crate) fn encode(ticks: i64, props: &Properties, names: &mut Names) -> Row {
        // Intern first, so the exact size is known: one allocation of the
        // right length (a shrinking reallocation churns the allocator).
        let mut ids = [0u32; tablekit_core::validate::limits::MAX_PROPERTIES];
        let mut size = 8 + varint_len(props.len() as u64);
        for ((name, value), id) in props.iter().zip(ids.iter_mut()) {
            *id = names.intern(name);
            size += varint_len(u64::from(*id)) + encoded_value_len(value);
        }
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&ticks.to_le_bytes());
        put_varint(&mut out, props.len() as u64);
        for ((_, value), id) in props.iter().zip(ids) {
            put_varint(&mut out, u64::from(id));
            encode_value(value, &mut out);
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
        let mut props = Properties::new();
        self.read_properties(names, select, &mut props);
        props
    }

    /// [`properties`](Row::properties) into `props`, which must be empty.
    pub(crate) fn read_properties(
        &self,
        names: &Names,
        select: Option<&[u32]>,
        props: &mut Properties,
    ) {
        debug_assert!(props.is_empty());
        let mut bytes = &self.0[8..];
        let count = take_varint(&mut bytes).unwrap_or(0) as usize;
        props.reserve(select.map_or(count, <[u32]>::len));
        for _ in 0..count {
            // Rows are only ever made by `encode` above, so they decode.
            let Some(id) = take_varint(&mut bytes) else {
                debug_assert!(false, "a row the backend encoded does not decode");
                break;
            };
            let id = id as u32;
            if !select.is_none_or(|ids| ids.contains(&id)) {
                // Passed over unread.
                let skipped = skip_value(&mut bytes);
                debug_assert!(
                    skipped.is_some(),
                    "a row the backend encoded does not decode"
                );
                continue;
            }
            let Some(value) = decode_value(&mut bytes) else {
                debug_assert!(false, "a row the backend encoded does not decode");
                break;
            };
            // A row holds each name once.
            props.push_unique(names.name(id).to_owned(), value);
        }
    }

    /// The entity this row stores.
    pub(crate) fn entity(
        &self,
        pk: &[u8],
        rk: &[u8],
        names: &Names,
        select: Option<&Selection>,
    ) -> Entity {
        let key = |stored: &[u8]| decode_key(stored).unwrap_or_default();
        let mut entity = Entity::new(key(pk), key(rk));
        entity.properties = self.properties(names, select.map(|s| s.ids.as_slice()));
        let written = DateTime::from_ticks(self.ticks()).unwrap_or(DateTime::MIN);
        entity.etag = Some(tablekit_core::ETag::from_timestamp(written));
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
    use tablekit_core::Value;

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
            ("G", Value::Guid(tablekit_core::uuid::Uuid::from_u128(7))),
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
