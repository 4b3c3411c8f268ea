//! The stored form of keys and rows.
//!
//! **Keys**: a table's rows are one engine table whose key is the stored
//! PartitionKey ([`encode_key`]), a zero byte, and the stored RowKey. Keys
//! never contain U+0000 (the validator refuses control characters), so the
//! byte order of that key is the order of (PartitionKey, RowKey) by UTF-16
//! code units, as the service sorts.
//!
//! **Rows**: a CRC-32 of the row's engine key and of the rest of the row (4
//! bytes, little-endian; checked on every read, so that a byte changed in
//! the file, or a row found under another key, is damage and never a value),
//! the write time in ticks (8 bytes, little-endian), the number
//! of properties, then each property as its name and its value in
//! [`encode_value`]'s form. A name is a varint: twice the name's id (see
//! [`crate::names`]), or, for a name without an id, one more than twice its
//! length, then its UTF-8 bytes. Hand-written, as a private storage layout.

use std::ops::Bound;

use tablekit_core::backend::sorted::{
    KeyRange, RowFilter, RowLender, decode_key, decode_value, encode_key, encode_value,
    encoded_value_len, put_varint, skip_value, take_bytes, take_varint, varint_len,
};
use tablekit_core::{DateTime, ETag, Entity, Properties, PropertyName, RowRef};

use crate::names::NameOf;
#[cfg(test)]
use crate::seal::checked;
use crate::seal::{CHECKSUM_LEN, checksum};

/// The engine key of the row at (`pk`, `rk`).
pub(crate) fn row_key(pk: &str, rk: &str) -> Vec<u8> {
    let (pk, rk) = (encode_key(pk), encode_key(rk));
    let mut key = Vec::with_capacity(pk.len() + 1 + rk.len());
    key.extend_from_slice(&pk);
    key.push(0);
    key.extend_from_slice(&rk);
    key
}

/// The stored PartitionKey and RowKey of an engine key.
pub(crate) fn split_key(key: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = key.iter().position(|&b| b == 0)?;
    Some((&key[..at], &key[at + 1..]))
}

/// The engine-key range of the rows whose PartitionKey is in `pk` and, when
/// `pk` is one partition, whose RowKey is in `rk`; `None` when empty.
pub(crate) fn key_bounds(pk: &KeyRange, rk: &KeyRange) -> Option<KeyRange> {
    pk.bounds()?;
    let with = |p: &[u8], tail: &[u8]| [p, tail].concat();
    if let (Bound::Included(lo), Bound::Included(hi)) = (&pk.lower, &pk.upper)
        && lo == hi
    {
        rk.bounds()?;
        let lower = match &rk.lower {
            Bound::Included(r) => Bound::Included(with(lo, &[&[0], r.as_slice()].concat())),
            Bound::Excluded(r) => Bound::Excluded(with(lo, &[&[0], r.as_slice()].concat())),
            Bound::Unbounded => Bound::Included(with(lo, &[0])),
        };
        let upper = match &rk.upper {
            Bound::Included(r) => Bound::Included(with(lo, &[&[0], r.as_slice()].concat())),
            Bound::Excluded(r) => Bound::Excluded(with(lo, &[&[0], r.as_slice()].concat())),
            Bound::Unbounded => Bound::Excluded(with(lo, &[1])),
        };
        return Some(KeyRange { lower, upper });
    }
    // Every key of partition p lies in [p\0, p\1): keys hold no byte below 0x20.
    let lower = match &pk.lower {
        Bound::Included(p) => Bound::Included(with(p, &[0])),
        Bound::Excluded(p) => Bound::Included(with(p, &[1])),
        Bound::Unbounded => Bound::Unbounded,
    };
    let upper = match &pk.upper {
        Bound::Included(p) => Bound::Excluded(with(p, &[1])),
        Bound::Excluded(p) => Bound::Excluded(with(p, &[0])),
        Bound::Unbounded => Bound::Unbounded,
    };
    Some(KeyRange { lower, upper })
}

/// How a row names a property: its id, or the name itself.
fn name_tag(id: Option<u64>, name: &str) -> u64 {
    match id {
        Some(id) => id << 1,
        None => ((name.len() as u64) << 1) | 1,
    }
}

/// Encodes the row of engine key `key` written at `ticks` with `props`,
/// checksum first; `ids` holds the id of each property's name, in order
/// (`None` for a name kept in the row).
pub(crate) fn encode_row(
    key: &[u8],
    ticks: i64,
    props: &Properties,
    ids: &[Option<u64>],
) -> Vec<u8> {
    debug_assert_eq!(props.len(), ids.len());
    let mut size = CHECKSUM_LEN + 8 + varint_len(props.len() as u64);
    for ((name, value), id) in props.iter().zip(ids) {
        size += varint_len(name_tag(*id, name)) + encoded_value_len(value);
        if id.is_none() {
            size += name.len();
        }
    }
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&[0; CHECKSUM_LEN]);
    out.extend_from_slice(&ticks.to_le_bytes());
    put_varint(&mut out, props.len() as u64);
    for ((name, value), id) in props.iter().zip(ids) {
        put_varint(&mut out, name_tag(*id, name));
        if id.is_none() {
            out.extend_from_slice(name.as_bytes());
        }
        encode_value(value, &mut out);
    }
    debug_assert_eq!(out.len(), size);
    let sum = checksum(key, &out[CHECKSUM_LEN..]);
    out[..CHECKSUM_LEN].copy_from_slice(&sum);
    out
}

/// The write time of a stored row, in ticks.
pub(crate) fn row_ticks(row: &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(row.get(..8)?.try_into().ok()?))
}

/// The ETag of a row written at `ticks`.
pub(crate) fn etag_of(ticks: i64) -> ETag {
    ETag::from_timestamp(DateTime::from_ticks(ticks).unwrap_or(DateTime::MIN))
}

/// The properties of a stored row, their names read with `names`; with
/// `select`, only those named. `None` if the bytes are not a row.
pub(crate) fn row_properties(
    row: &[u8],
    select: Option<&[String]>,
    names: &impl NameOf,
) -> Option<Properties> {
    let mut props = Properties::new();
    let wanted = |name: &str| select.is_none_or(|names| names.iter().any(|n| n == name));
    let room = select.map_or(usize::MAX, <[String]>::len);
    read_properties(row, (wanted, room), names, &mut props)?;
    Some(props)
}

/// [`row_properties`] into `props`, which must be empty: the properties
/// whose names `wanted` accepts (`room`: at most how many it accepts), the
/// others passed over unread.
fn read_properties(
    row: &[u8],
    (wanted, room): (impl Fn(&str) -> bool, usize),
    names: &impl NameOf,
    props: &mut Properties,
) -> Option<()> {
    debug_assert!(props.is_empty());
    let mut bytes = row.get(8..)?;
    let count = usize::try_from(take_varint(&mut bytes)?).ok()?;
    props.reserve(count.min(room).min(256));
    for _ in 0..count {
        let tag = take_varint(&mut bytes)?;
        let name = if tag & 1 == 0 {
            let name = names.property_name(tag >> 1)?;
            wanted(&name).then_some(name)
        } else {
            let len = usize::try_from(tag >> 1).ok()?;
            let name = std::str::from_utf8(take_bytes(&mut bytes, len)?).ok()?;
            wanted(name).then(|| PropertyName::Owned(name.to_owned()))
        };
        let Some(name) = name else {
            skip_value(&mut bytes)?;
            continue;
        };
        let value = decode_value(&mut bytes)?;
        // A name twice is damage, never a value silently replaced.
        if props.insert(name, value).is_some() {
            return None;
        }
    }
    bytes.is_empty().then_some(())
}

/// The entity stored under engine key `key` as `row`; with `select`, only
/// the named properties (and the Timestamp only if named). `None` if the
/// bytes are not a row.
pub(crate) fn entity(
    key: &[u8],
    row: &[u8],
    select: Option<&[String]>,
    names: &impl NameOf,
) -> Option<Entity> {
    entity_with(key, row, select, names, decode_key, |_, written| {
        ETag::from_timestamp(written)
    })
}

/// [`entity`], with the PartitionKey decoded by `partition_key` and the
/// ETag made by `etag` (from the row's ticks and time).
fn entity_with(
    key: &[u8],
    row: &[u8],
    select: Option<&[String]>,
    names: &impl NameOf,
    partition_key: impl FnOnce(&[u8]) -> Option<String>,
    etag: impl FnOnce(i64, DateTime) -> ETag,
) -> Option<Entity> {
    let (pk, rk) = split_key(key)?;
    let mut entity = Entity::new(partition_key(pk)?, decode_key(rk)?);
    entity.properties = row_properties(row, select, names)?;
    let ticks = row_ticks(row)?;
    let written = DateTime::from_ticks(ticks).ok()?;
    entity.etag = Some(etag(ticks, written));
    if select.is_none_or(|names| names.iter().any(|n| n == "Timestamp")) {
        entity.timestamp = Some(written);
    }
    Some(entity)
}

/// Reads the rows of a range, sharing what consecutive rows have in
/// common ([`RowLender`]: a PartitionKey decoded once for the rows of one
/// partition, one ETag for the rows written by one transaction, and the
/// room of the properties borrowed rows are read into).
#[derive(Default)]
pub(crate) struct RowReader {
    lender: RowLender,
}

impl RowReader {
    /// As [`entity`].
    pub(crate) fn entity(
        &mut self,
        key: &[u8],
        row: &[u8],
        select: Option<&[String]>,
        names: &impl NameOf,
    ) -> Option<Entity> {
        let partition_key = self.lender.partition_key(split_key(key)?.0)?.to_owned();
        let etag = |ticks, written| self.lender.etag(ticks, written).clone();
        entity_with(key, row, select, names, |_| Some(partition_key), etag)
    }

    /// Lends the row stored under engine key `key` as `row` to `f`, all its
    /// properties read into this reader's room; `None` if the bytes are not
    /// a row.
    pub(crate) fn with_row<R>(
        &mut self,
        key: &[u8],
        row: &[u8],
        names: &impl NameOf,
        f: impl FnOnce(RowRef<'_>) -> R,
    ) -> Option<R> {
        let keys = split_key(key)?;
        let fill =
            |props: &mut Properties| read_properties(row, (|_: &_| true, usize::MAX), names, props);
        self.lender.lend(keys, row_ticks(row)?, fill, f)
    }

    /// Whether the row stored under engine key `key` as `row` meets
    /// `filter` ([`RowLender::meets`]), with only the properties it
    /// compares read; `None` if the bytes are not a row.
    pub(crate) fn meets(
        &mut self,
        key: &[u8],
        row: &[u8],
        names: &impl NameOf,
        filter: &RowFilter<'_>,
    ) -> Option<bool> {
        let needed = filter.properties();
        let wanted = |name: &str| needed.contains(&name);
        let fill =
            |props: &mut Properties| read_properties(row, (wanted, needed.len()), names, props);
        self.lender
            .meets(split_key(key)?, row_ticks(row)?, fill, filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablekit_core::Value;

    /// Names by id, for the tests: id `n` is the `n`-th name.
    struct Names(&'static [&'static str]);

    impl NameOf for Names {
        fn with_name<R>(&self, id: u64, f: impl FnOnce(&str) -> R) -> Option<R> {
            self.0.get(usize::try_from(id).ok()?).map(|name| f(name))
        }

        fn or_damaged(
            &self,
            damaged: impl FnOnce() -> tablekit_core::Error,
        ) -> tablekit_core::Error {
            damaged()
        }
    }

    const NAMES: Names = Names(&["S", "L"]);

    #[test]
    fn rows_round_trip_and_damage_is_refused() {
        let props: Properties = [
            ("S", Value::String("héllo".into())),
            ("L", Value::Int64(i64::MIN)),
            ("X", Value::Binary(vec![0, 255, 7])),
        ]
        .into_iter()
        .collect();
        // "S" and "L" are named by their ids, "X" is kept in the row.
        let ids = [Some(0), Some(1), None];
        let ticks = DateTime::now().ticks();
        let key = row_key("p\u{E000}", "r");
        let stored = encode_row(&key, ticks, &props, &ids);
        let row = checked(&key, &stored).expect("its checksum");
        // Any byte changed, or the row under another key, is refused.
        for at in 0..stored.len() {
            let mut changed = stored.clone();
            changed[at] ^= 0x01;
            assert_eq!(checked(&key, &changed), None, "byte {at} changed");
        }
        assert_eq!(checked(&row_key("p\u{E000}", "s"), &stored), None);
        assert_eq!(checked(&key, &stored[..3]), None);
        assert_eq!(row_ticks(row), Some(ticks));
        assert_eq!(row_properties(row, None, &NAMES).as_ref(), Some(&props));
        for selected in ["L", "X"] {
            let only = row_properties(row, Some(&[selected.to_owned()]), &NAMES).unwrap();
            assert_eq!(only.len(), 1);
            assert_eq!(only.get(selected), props.get(selected));
        }
        for cut in 8..row.len() {
            let read = row_properties(&row[..cut], None, &NAMES);
            assert_eq!(read, None, "cut at {cut}");
        }
        // An id the store has no name for is damage, never a property
        // under another name.
        assert_eq!(row_properties(row, None, &Names(&["S"])), None);
        let entity = entity(&key, row, None, &NAMES).unwrap();
        assert_eq!(
            (entity.partition_key.as_str(), entity.row_key.as_str()),
            ("p\u{E000}", "r")
        );
        // A reader of many rows shares a partition's key and a time's
        // ETag between rows, and reads each row as alone.
        let mut reader = RowReader::default();
        for (pk, rk, at) in [("p", "a", ticks), ("p", "b", ticks), ("q", "a", ticks + 1)] {
            let key = row_key(pk, rk);
            let stored = encode_row(&key, at, &props, &ids);
            let row = checked(&key, &stored).unwrap();
            let alone = super::entity(&key, row, None, &NAMES);
            let shared = reader.entity(&key, row, None, &NAMES);
            assert_eq!(shared, alone);
            assert_eq!(shared.unwrap().etag, Some(etag_of(at)));
        }
    }

    #[test]
    fn key_bounds_follow_partitions() {
        let keys = [
            ("a", "1"),
            ("a", "2"),
            ("ab", "0"),
            ("b", ""),
            ("b", "z"),
            ("c", "x"),
        ];
        let pk = |lower, upper| KeyRange { lower, upper };
        let v = |s: &str| s.as_bytes().to_vec();
        let cases = [
            (
                pk(Bound::Included(v("a")), Bound::Included(v("a"))),
                KeyRange::all(),
                2,
            ),
            (
                pk(Bound::Excluded(v("a")), Bound::Unbounded),
                KeyRange::all(),
                4,
            ),
            (
                pk(Bound::Unbounded, Bound::Excluded(v("b"))),
                KeyRange::all(),
                3,
            ),
            (
                pk(Bound::Unbounded, Bound::Included(v("b"))),
                KeyRange::all(),
                5,
            ),
            (
                pk(Bound::Included(v("b")), Bound::Included(v("b"))),
                pk(Bound::Excluded(v("")), Bound::Unbounded),
                1,
            ),
        ];
        for (pks, rks, expected) in cases {
            let range = key_bounds(&pks, &rks).unwrap();
            let found = keys
                .iter()
                .filter(|(p, r)| range.contains(&row_key(p, r)))
                .count();
            assert_eq!(found, expected, "{pks:?} {rks:?}");
        }
    }
}
