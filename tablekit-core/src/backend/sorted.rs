//! Building blocks for a backend that keeps rows in an ordered key-value
//! store, as the in-memory backend (a `BTreeMap`) and the local backend (an
//! embedded database) do:
//!
//! - [`encode_key`] / [`decode_key`]: a stored form of PartitionKey and
//!   RowKey whose byte order is the service's key order;
//! - [`key_ranges`]: the key ranges a filter allows, so a scan skips rows
//!   that cannot match (every row it meets is still tested against the whole
//!   filter);
//! - [`continuation_token`] / [`resume_at`]: continuation tokens shaped like
//!   the service's, naming the next row's stored keys;
//! - [`encode_value`] / [`decode_value`]: a compact binary form of one
//!   property value;
//! - [`RowLender`]: stored rows lent to a typed reader by reference;
//! - [`EntityWrite`] and [`decide`]: what one write does to the row stored at its
//!   keys (insert, replace, merge, delete, their conditions and errors),
//!   decided before anything changes, so a transaction can decide all its
//!   writes and apply them only when every one succeeds.
//!
//! Hand-written because these are private storage layouts, not interchange
//! formats.

use std::borrow::Cow;
use std::ops::Bound;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::{ContinuationToken, EntityWrite, UpdateMode};
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, IfMatch, Properties};
use crate::error::{Error, InvalidInput, Result};
use crate::filter::{CompareOp, Filter};
use crate::value::Value;

/// The stored form of a PartitionKey or RowKey: its UTF-8 bytes, in which the
/// lead bytes of U+E000..=U+FFFF (`0xEE`, `0xEF`) become `0xF5`, `0xF6`
/// (bytes UTF-8 never uses). Byte order of that form equals the store's
/// UTF-16 code-unit order ([`crate::keyorder`]), and most keys (no such
/// characters) need no copy.
///
/// ```
/// use tablekit::backend::sorted::{decode_key, encode_key};
/// // U+10000 sorts before U+E000 in UTF-16, after it by code point.
/// assert!(encode_key("\u{10000}") < encode_key("\u{E000}"));
/// assert_eq!(decode_key(&encode_key("\u{E000}")).as_deref(), Some("\u{E000}"));
/// ```
pub fn encode_key(key: &str) -> Cow<'_, [u8]> {
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

/// The key text of a key stored by [`encode_key`]; `None` if the bytes are
/// not such a key.
pub fn decode_key(stored: &[u8]) -> Option<String> {
    let bytes: Vec<u8> = stored
        .iter()
        .map(|b| match b {
            0xF5 => 0xEE,
            0xF6 => 0xEF,
            other => *other,
        })
        .collect();
    String::from_utf8(bytes).ok()
}

/// The text of a key stored by [`encode_key`], borrowed from `stored` when
/// it holds none of the bytes the encoding changes (the usual key); `None`
/// if the bytes are not such a key.
pub fn key_text(stored: &[u8]) -> Option<Cow<'_, str>> {
    if stored.iter().any(|b| matches!(b, 0xF5 | 0xF6)) {
        return decode_key(stored).map(Cow::Owned);
    }
    std::str::from_utf8(stored).ok().map(Cow::Borrowed)
}

/// Lends stored rows to a reader by reference ([`RowRef`](super::RowRef),
/// for [`TableBackend::read_rows`](super::TableBackend::read_rows)), one
/// after another, sharing what consecutive rows have in common: the
/// PartitionKey decoded once for the rows of one partition, one ETag for
/// the rows written at one time, and the room each row's properties are
/// decoded into (the reader takes the values it keeps out of it).
#[derive(Debug, Default)]
pub struct RowLender {
    partition: Option<(Vec<u8>, String)>,
    etag: Option<(i64, ETag)>,
    properties: Properties,
    /// The room of the properties a filter is asked of ([`RowLender::meets`]).
    filtered: Properties,
}

impl RowLender {
    /// Lends the row stored under keys `pk` and `rk` (as [`encode_key`]
    /// stores them), written at `ticks`, to `read`; `fill` decodes its
    /// properties into the (empty) room given it. `None`, `read` not
    /// called, when the keys, the time or the properties do not decode.
    pub fn lend<R>(
        &mut self,
        (pk, rk): (&[u8], &[u8]),
        ticks: i64,
        fill: impl FnOnce(&mut Properties) -> Option<()>,
        read: impl FnOnce(super::RowRef<'_>) -> R,
    ) -> Option<R> {
        let row_key = key_text(rk)?;
        let written = DateTime::from_ticks(ticks).ok()?;
        self.properties.clear();
        fill(&mut self.properties)?;
        let partition_key = shared_partition(&mut self.partition, pk)?;
        let etag = shared_etag(&mut self.etag, ticks, written);
        Some(read(super::RowRef::new(
            partition_key,
            &row_key,
            etag,
            written,
            &mut self.properties,
        )))
    }

    /// Whether the row stored under keys `pk` and `rk`, written at
    /// `ticks`, meets `filter`, asked of its time, of its keys if the
    /// filter compares them, and of the properties `fill` decodes into the
    /// (empty) room given it: those the filter compares
    /// ([`RowFilter::properties`]) are enough, so a row the filter passes
    /// by is not read whole. `None` when the keys, the time or the
    /// properties do not decode.
    pub fn meets(
        &mut self,
        (pk, rk): (&[u8], &[u8]),
        ticks: i64,
        fill: impl FnOnce(&mut Properties) -> Option<()>,
        filter: &RowFilter<'_>,
    ) -> Option<bool> {
        let written = DateTime::from_ticks(ticks).ok()?;
        self.filtered.clear();
        fill(&mut self.filtered)?;
        // Keys a filter does not compare are never looked at.
        let (partition_key, row_key) = match filter.keys {
            true => (shared_partition(&mut self.partition, pk)?, key_text(rk)?),
            false => ("", Cow::Borrowed("")),
        };
        let view = crate::filter::RowView {
            partition_key,
            row_key: &row_key,
            timestamp: Some(written),
            properties: &self.filtered,
        };
        Some(filter.filter.matches_row(&view))
    }

    /// The text of the stored PartitionKey `pk`, decoded once for the rows
    /// of one partition.
    pub fn partition_key(&mut self, pk: &[u8]) -> Option<&str> {
        shared_partition(&mut self.partition, pk)
    }

    /// The ETag of a row written at `ticks` (`written`), made once for the
    /// rows written at that time.
    pub fn etag(&mut self, ticks: i64, written: DateTime) -> &ETag {
        shared_etag(&mut self.etag, ticks, written)
    }
}

/// A query's filter as each row of a scan of its key ranges
/// ([`key_ranges`]) is asked of it before it is read
/// ([`RowLender::meets`]): without the comparisons those ranges already
/// hold for every such row, with what the rest looks at (the properties
/// it compares, and whether it compares the keys).
#[derive(Debug)]
pub struct RowFilter<'f> {
    filter: Cow<'f, Filter>,
    keys: bool,
    properties: Vec<&'f str>,
}

impl<'f> RowFilter<'f> {
    /// `filter`, for the rows of a scan of its own key ranges; `None` when
    /// those ranges hold the whole of it ([`keys_only`]).
    pub fn new(filter: &'f Filter) -> Option<RowFilter<'f>> {
        let rest = beyond_ranges(filter)?;
        let keys =
            (rest.comparisons()).any(|(name, _, _)| matches!(name, "PartitionKey" | "RowKey"));
        // The comparisons left out are of keys: the properties are the same.
        let mut properties: Vec<&str> = filter
            .comparisons()
            .map(|(name, _, _)| name)
            .filter(|name| !matches!(*name, "PartitionKey" | "RowKey" | "Timestamp"))
            .collect();
        properties.sort_unstable();
        properties.dedup();
        Some(RowFilter {
            filter: rest,
            keys,
            properties,
        })
    }

    /// The properties the filter compares (not the keys or the
    /// Timestamp), each once: what a row must hold for the filter to be
    /// asked of it.
    pub fn properties(&self) -> &[&'f str] {
        &self.properties
    }
}

/// `filter` without the comparisons joined by `and` at its top that its key
/// ranges hold ([`keys_only`]'s comparisons): what is left to ask of a row
/// of those ranges, or `None` when nothing is. Recursion follows the `and`s
/// at the top alone, which the door checks bound.
fn beyond_ranges(filter: &Filter) -> Option<Cow<'_, Filter>> {
    let Filter::And(a, b) = filter else {
        return (!keys_only(filter)).then_some(Cow::Borrowed(filter));
    };
    match (beyond_ranges(a), beyond_ranges(b)) {
        (None, None) => None,
        (Some(rest), None) | (None, Some(rest)) => Some(rest),
        (Some(Cow::Borrowed(x)), Some(Cow::Borrowed(y)))
            if std::ptr::eq(x, &**a) && std::ptr::eq(y, &**b) =>
        {
            Some(Cow::Borrowed(filter))
        }
        (Some(x), Some(y)) => Some(Cow::Owned(x.into_owned() & y.into_owned())),
    }
}

/// [`RowLender::partition_key`], on the lender's field alone (so that it
/// can be borrowed beside the others).
fn shared_partition<'p>(
    partition: &'p mut Option<(Vec<u8>, String)>,
    pk: &[u8],
) -> Option<&'p str> {
    if !matches!(partition, Some((stored, _)) if stored == pk) {
        *partition = Some((pk.to_vec(), decode_key(pk)?));
    }
    partition.as_ref().map(|(_, text)| text.as_str())
}

/// [`RowLender::etag`], on the lender's field alone.
fn shared_etag(etag: &mut Option<(i64, ETag)>, ticks: i64, written: DateTime) -> &ETag {
    if etag.as_ref().is_some_and(|(at, _)| *at != ticks) {
        *etag = None;
    }
    &etag
        .get_or_insert_with(|| (ticks, ETag::from_timestamp(written)))
        .1
}

/// A range of byte keys as `BTreeMap::range` and similar take it.
pub type ByteBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// Key bounds a filter implies, over keys stored by [`encode_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// The lower bound.
    pub lower: Bound<Vec<u8>>,
    /// The upper bound.
    pub upper: Bound<Vec<u8>>,
}

impl Default for KeyRange {
    fn default() -> KeyRange {
        KeyRange::all()
    }
}

impl KeyRange {
    /// Every key.
    pub fn all() -> KeyRange {
        KeyRange {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        }
    }

    fn tighten_lower(&mut self, new: Bound<Vec<u8>>) {
        let replace = match (&self.lower, &new) {
            (Bound::Unbounded, _) => true,
            (_, Bound::Unbounded) => false,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                b > a || (b == a && matches!(new, Bound::Excluded(_)))
            }
        };
        if replace {
            self.lower = new;
        }
    }

    fn tighten_upper(&mut self, new: Bound<Vec<u8>>) {
        let replace = match (&self.upper, &new) {
            (Bound::Unbounded, _) => true,
            (_, Bound::Unbounded) => false,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                b < a || (b == a && matches!(new, Bound::Excluded(_)))
            }
        };
        if replace {
            self.upper = new;
        }
    }

    /// This range with its lower bound raised to at least `start` (inclusive).
    pub fn starting_at(&self, start: &[u8]) -> KeyRange {
        let mut range = self.clone();
        range.tighten_lower(Bound::Included(start.to_vec()));
        range
    }

    /// Whether `key` is inside the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        let above = match &self.lower {
            Bound::Included(b) => key >= b.as_slice(),
            Bound::Excluded(b) => key > b.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match &self.upper {
            Bound::Included(b) => key <= b.as_slice(),
            Bound::Excluded(b) => key < b.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    }

    /// The bounds as `BTreeMap::range` and similar take them, or `None` when
    /// the range is empty (for which `BTreeMap::range` would panic).
    pub fn bounds(&self) -> Option<ByteBounds<'_>> {
        fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
            match b {
                Bound::Included(v) => Bound::Included(v.as_slice()),
                Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
                Bound::Unbounded => Bound::Unbounded,
            }
        }
        let empty = match (&self.lower, &self.upper) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
            _ => false,
        };
        (!empty).then(|| (as_ref(&self.lower), as_ref(&self.upper)))
    }
}

/// The PartitionKey and RowKey ranges (stored form) that the `and`-connected
/// key comparisons at the top of `filter` allow.
///
/// ```
/// use tablekit::backend::sorted::key_ranges;
/// use tablekit::filter::prop;
/// let filter = prop("PartitionKey").eq("p").and(prop("RowKey").ge("m"));
/// let (pks, rks) = key_ranges(Some(&filter));
/// assert!(pks.contains(b"p") && !pks.contains(b"q"));
/// assert!(rks.contains(b"n") && !rks.contains(b"a"));
/// ```
pub fn key_ranges(filter: Option<&Filter>) -> (KeyRange, KeyRange) {
    let mut pk = KeyRange::all();
    let mut rk = KeyRange::all();
    fn walk(filter: &Filter, pk: &mut KeyRange, rk: &mut KeyRange) {
        match filter {
            Filter::And(a, b) => {
                walk(a, pk, rk);
                walk(b, pk, rk);
            }
            Filter::Compare {
                property,
                op,
                value: Value::String(v),
            } => {
                let range = match property.as_str() {
                    "PartitionKey" => pk,
                    "RowKey" => rk,
                    _ => return,
                };
                let key = encode_key(v).into_owned();
                match op {
                    CompareOp::Eq => {
                        range.tighten_lower(Bound::Included(key.clone()));
                        range.tighten_upper(Bound::Included(key));
                    }
                    CompareOp::Gt => range.tighten_lower(Bound::Excluded(key)),
                    CompareOp::Ge => range.tighten_lower(Bound::Included(key)),
                    CompareOp::Lt => range.tighten_upper(Bound::Excluded(key)),
                    CompareOp::Le => range.tighten_upper(Bound::Included(key)),
                    CompareOp::Ne => {}
                }
            }
            _ => {}
        }
    }
    if let Some(filter) = filter {
        walk(filter, &mut pk, &mut rk);
    }
    (pk, rk)
}

/// Whether `filter` says nothing but what [`key_ranges`] takes from it:
/// comparisons of `PartitionKey` and `RowKey` with strings (other than
/// `ne`), joined by `and`. A row of a table stored in key order whose keys
/// lie in both ranges then meets the filter, so a backend that reads only
/// such rows need not evaluate it on each.
///
/// ```
/// use tablekit::backend::sorted::keys_only;
/// use tablekit::filter::prop;
/// assert!(keys_only(&prop("PartitionKey").eq("p").and(prop("RowKey").ge("m"))));
/// assert!(!keys_only(&prop("PartitionKey").eq("p").and(prop("Total").gt(5))));
/// assert!(!keys_only(&prop("RowKey").ne("m")));
/// ```
pub fn keys_only(filter: &Filter) -> bool {
    match filter {
        Filter::And(a, b) => keys_only(a) && keys_only(b),
        Filter::Compare {
            property,
            op,
            value: Value::String(_),
        } => matches!(property.as_str(), "PartitionKey" | "RowKey") && *op != CompareOp::Ne,
        _ => false,
    }
}

/// One opaque token part, shaped like the service's (`1!<len>!<base64>`).
fn token_part(bytes: &[u8]) -> String {
    let b64 = BASE64.encode(bytes).replace('=', "-");
    format!("1!{}!{b64}", b64.len())
}

fn read_token_part(text: &str) -> Result<Vec<u8>, InvalidInput> {
    let bad = |reason| InvalidInput::ContinuationToken { reason };
    let rest = text
        .strip_prefix("1!")
        .ok_or(bad("unknown token version"))?;
    let (len, b64) = rest.split_once('!').ok_or(bad("malformed token"))?;
    if len.parse::<usize>().ok() != Some(b64.len()) {
        return Err(bad("token length does not match"));
    }
    BASE64
        .decode(b64.replace('-', "="))
        .map_err(|_| bad("token is not base64"))
}

/// The token that resumes a query at the row with stored keys `pk`, `rk`.
pub fn continuation_token(pk: &[u8], rk: &[u8]) -> ContinuationToken {
    ContinuationToken::new(token_part(pk), Some(token_part(rk)))
}

/// The stored keys a token made by [`continuation_token`] resumes at.
///
/// # Errors
/// [`InvalidInput::ContinuationToken`] for a token this module did not make.
pub fn resume_at(token: &ContinuationToken) -> Result<(Vec<u8>, Vec<u8>), InvalidInput> {
    let pk = read_token_part(token.next_partition_key())?;
    let rk = match token.next_row_key() {
        Some(rk) => read_token_part(rk)?,
        None => Vec::new(),
    };
    Ok((pk, rk))
}

const STRING: u8 = 0;
const INT32: u8 = 1;
const INT64: u8 = 2;
const DOUBLE: u8 = 3;
const BOOLEAN: u8 = 4;
const DATETIME: u8 = 5;
const GUID: u8 = 6;
const BINARY: u8 = 7;

/// Bytes [`put_varint`] writes for `v`.
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Writes `v` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a LEB128 varint from the front of `bytes`; `None` if it is cut
/// short or longer than 64 bits.
pub fn take_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        v |= u64::from(b & 0x7F) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Takes `n` bytes from the front of `bytes`; `None` if there are fewer.
pub fn take_bytes<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if bytes.len() < n {
        return None;
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Some(head)
}

fn take_array<const N: usize>(bytes: &mut &[u8]) -> Option<[u8; N]> {
    take_bytes(bytes, N).and_then(|b| b.try_into().ok())
}

/// Bytes [`encode_value`] writes for `value`.
pub fn encoded_value_len(value: &Value) -> usize {
    1 + match value {
        Value::String(s) => varint_len(s.len() as u64) + s.len(),
        Value::Binary(b) => varint_len(b.len() as u64) + b.len(),
        Value::Int32(_) => 4,
        Value::Boolean(_) => 1,
        Value::Guid(_) => 16,
        Value::Int64(_) | Value::Double(_) | Value::DateTime(_) => 8,
    }
}

/// Appends `value` in the compact form: a type tag, then the payload
/// (fixed-width little-endian numbers, length-prefixed text and bytes).
pub fn encode_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::String(s) => {
            out.push(STRING);
            put_varint(out, s.len() as u64);
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
            put_varint(out, v.len() as u64);
            out.extend_from_slice(v);
        }
    }
}

/// Reads a value written by [`encode_value`] from the front of `bytes`;
/// `None` if the bytes are not such a value (cut short, an unknown tag,
/// text that is not UTF-8, a time out of range): a damaged store, never a
/// value quietly different from the one written.
pub fn decode_value(bytes: &mut &[u8]) -> Option<Value> {
    let [tag] = take_array(bytes)?;
    Some(match tag {
        STRING => {
            let len = usize::try_from(take_varint(bytes)?).ok()?;
            let text = take_bytes(bytes, len)?;
            Value::String(std::str::from_utf8(text).ok()?.to_owned())
        }
        INT32 => Value::Int32(i32::from_le_bytes(take_array(bytes)?)),
        INT64 => Value::Int64(i64::from_le_bytes(take_array(bytes)?)),
        DOUBLE => Value::Double(f64::from_le_bytes(take_array(bytes)?)),
        BOOLEAN => match take_array(bytes)? {
            [0] => Value::Boolean(false),
            [1] => Value::Boolean(true),
            _ => return None,
        },
        DATETIME => {
            let ticks = i64::from_le_bytes(take_array(bytes)?);
            Value::DateTime(DateTime::from_ticks(ticks).ok()?)
        }
        GUID => Value::Guid(uuid::Uuid::from_bytes(take_array(bytes)?)),
        BINARY => {
            let len = usize::try_from(take_varint(bytes)?).ok()?;
            Value::Binary(take_bytes(bytes, len)?.to_vec())
        }
        _ => return None,
    })
}

/// Passes over a value written by [`encode_value`] at the front of
/// `bytes` without reading it (nothing is copied or checked but its
/// length); `None` if the bytes are cut short or name no type.
pub fn skip_value(bytes: &mut &[u8]) -> Option<()> {
    let [tag] = take_array(bytes)?;
    let len = match tag {
        STRING | BINARY => usize::try_from(take_varint(bytes)?).ok()?,
        INT32 => 4,
        INT64 | DOUBLE | DATETIME => 8,
        BOOLEAN => 1,
        GUID => 16,
        _ => return None,
    };
    take_bytes(bytes, len).map(|_| ())
}

/// The row stored at a write's keys, as [`decide`] needs to see it.
pub trait StoredRow {
    /// The ETag the store issued for this version of the row.
    fn etag(&self) -> ETag;
    /// Whether `tag` is that ETag (a store may compare without making it).
    fn etag_is(&self, tag: &ETag) -> bool {
        self.etag() == *tag
    }
    /// The row's properties (for a merge).
    ///
    /// # Errors
    /// The store's error if the row cannot be read.
    fn properties(&self) -> Result<Properties>;
}

/// What a write does to the row at its keys.
#[derive(Debug, PartialEq)]
pub enum Decision<'a> {
    /// Store a row with these properties (the write's own, or the stored
    /// ones merged with them).
    Put(Cow<'a, Properties>),
    /// Remove the row.
    Remove,
}

/// Decides what `write` does to `existing` (the row stored at its keys, if
/// any) in `table`, or its error, as the service would: an insert over a row
/// fails with [`Error::EntityAlreadyExists`], an update or delete of no row
/// with [`Error::EntityNotFound`], a condition that does not hold with
/// [`Error::PreconditionFailed`], and a merge whose union of properties no
/// longer fits one entity with that limit's [`InvalidInput`].
///
/// # Errors
/// As above, and [`StoredRow::properties`]'s.
pub fn decide<'a>(
    table: &str,
    write: EntityWrite<'a>,
    existing: Option<&dyn StoredRow>,
) -> Result<Decision<'a>> {
    let (pk, rk) = write.keys();
    let error =
        |make: fn(String, String, String) -> Error| make(table.into(), pk.into(), rk.into());
    let not_found = || {
        error(|table, partition_key, row_key| Error::EntityNotFound {
            table,
            partition_key,
            row_key,
        })
    };
    let check = |if_match: &IfMatch, old: &dyn StoredRow| match if_match {
        IfMatch::Any => Ok(()),
        // The exact text the store issued for this version.
        IfMatch::ETag(tag) if old.etag_is(tag) => Ok(()),
        IfMatch::ETag(_) => Err(error(|table, partition_key, row_key| {
            Error::PreconditionFailed {
                table,
                partition_key,
                row_key,
            }
        })),
    };
    let (entity, merge_into) = match write {
        EntityWrite::Insert(entity) => {
            if existing.is_some() {
                return Err(error(|table, partition_key, row_key| {
                    Error::EntityAlreadyExists {
                        table,
                        partition_key,
                        row_key,
                    }
                }));
            }
            (entity, None)
        }
        EntityWrite::Update(entity, mode, if_match) => {
            let old = existing.ok_or_else(not_found)?;
            check(if_match, old)?;
            (entity, (mode == UpdateMode::Merge).then_some(old))
        }
        EntityWrite::Upsert(entity, mode) => {
            (entity, existing.filter(|_| mode == UpdateMode::Merge))
        }
        EntityWrite::Delete(_, _, if_match) => {
            check(if_match, existing.ok_or_else(not_found)?)?;
            return Ok(Decision::Remove);
        }
    };
    let Some(old) = merge_into else {
        return Ok(Decision::Put(Cow::Borrowed(&entity.properties)));
    };
    let mut merged = Entity::new(pk, rk);
    merged.properties = old.properties()?;
    for (name, value) in entity.properties.entries() {
        merged.properties.insert(name.clone(), value.clone());
    }
    // Each part was valid; their union must still fit one entity.
    crate::validate::entity(&merged)?;
    Ok(Decision::Put(Cow::Owned(merged.properties)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::prop;
    use crate::keyorder::cmp_utf16;

    /// A row of a scan of a filter's key ranges meets the filter exactly
    /// when it meets what [`RowFilter`] leaves of it; the comparisons left
    /// out are those the ranges hold, and the keys are read only when what
    /// is left compares them.
    #[test]
    fn a_row_filter_leaves_out_what_the_ranges_hold() {
        let pk = || Filter::partition_key();
        let rk = || Filter::row_key();
        let n = || prop("n");
        let filters = [
            pk().eq("p") & rk().ge("b"),
            pk().eq("p") & n().gt(3),
            n().gt(3) & (pk().ge("p") & rk().lt("c")),
            (pk().eq("p") & rk().lt("z")) & (n().gt(1) & prop("m").eq(2)),
            pk().eq("p") | n().gt(3),
            pk().ne("p") & n().gt(3),
            pk().eq(5) & n().gt(3),
            !(rk().eq("b")) & pk().le("q"),
            pk().eq("p") & (rk().eq("a") | rk().eq("c")),
        ];
        let mut rows = Vec::new();
        for p in ["o", "p", "q"] {
            for r in ["a", "b", "c"] {
                for value in [None, Some(1), Some(4)] {
                    let mut row = Entity::new(p, r).with("m", 2);
                    if let Some(value) = value {
                        row = row.with("n", value);
                    }
                    rows.push(row);
                }
            }
        }
        let mut checked = 0;
        for filter in &filters {
            let (pk_range, rk_range) = key_ranges(Some(filter));
            let row_filter = RowFilter::new(filter);
            assert_eq!(row_filter.is_none(), keys_only(filter), "{filter:?}");
            for row in &rows {
                let in_ranges = pk_range.contains(&encode_key(&row.partition_key))
                    && rk_range.contains(&encode_key(&row.row_key));
                if !in_ranges {
                    assert!(!filter.matches(row), "{filter:?} {row:?}");
                    continue;
                }
                let meets = row_filter.as_ref().is_none_or(|asked| {
                    let (partition_key, row_key) = match asked.keys {
                        true => (row.partition_key.as_str(), row.row_key.as_str()),
                        false => ("", ""),
                    };
                    let view = crate::filter::RowView {
                        partition_key,
                        row_key,
                        timestamp: None,
                        properties: &row.properties,
                    };
                    asked.filter.matches_row(&view)
                });
                assert_eq!(meets, filter.matches(row), "{filter:?} {row:?}");
                checked += 1;
            }
        }
        assert!(checked > 40, "{checked}");
        fn kept(filter: &Filter) -> Option<(bool, Vec<&str>)> {
            RowFilter::new(filter).map(|f| (f.keys, f.properties))
        }
        assert_eq!(kept(&filters[1]), Some((false, vec!["n"])));
        assert_eq!(kept(&filters[3]), Some((false, vec!["m", "n"])));
        assert_eq!(kept(&filters[4]).map(|k| k.0), Some(true));
        assert_eq!(kept(&filters[5]).map(|k| k.0), Some(true));
        assert_eq!(kept(&filters[6]).map(|k| k.0), Some(true));
        // What is left whole is borrowed, not copied.
        let Filter::And(_, rest) = &filters[3] else {
            unreachable!()
        };
        let asked = RowFilter::new(&filters[3]).unwrap();
        assert!(matches!(&asked.filter, Cow::Borrowed(f) if std::ptr::eq(*f, &**rest)));
    }

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
            assert_eq!(decode_key(&encode_key(a)).as_deref(), Some(a));
        }
    }

    #[test]
    fn values_round_trip_and_damage_is_refused() {
        let values = [
            Value::String("héllo".into()),
            Value::Int32(-5),
            Value::Int64(i64::MIN),
            Value::Double(-0.0),
            Value::Boolean(true),
            Value::DateTime(DateTime::MAX),
            Value::Guid(uuid::Uuid::from_u128(7)),
            Value::Binary(vec![0, 255, 7]),
            Value::String(String::new()),
        ];
        for value in &values {
            let mut out = Vec::new();
            encode_value(value, &mut out);
            assert_eq!(out.len(), encoded_value_len(value));
            let mut read = out.as_slice();
            let back = decode_value(&mut read).unwrap();
            assert!(read.is_empty());
            // Passed over, it ends where it was read to, before what follows.
            let followed = [out.as_slice(), &[7]].concat();
            let mut skipped = followed.as_slice();
            assert_eq!(skip_value(&mut skipped), Some(()));
            assert_eq!(skipped, &[7]);
            match (value, &back) {
                (Value::Double(a), Value::Double(b)) => assert_eq!(a.to_bits(), b.to_bits()),
                _ => assert_eq!(&back, value),
            }
            // Every cut-short form is refused, never read as another value.
            for cut in 0..out.len() {
                assert_eq!(
                    decode_value(&mut &out[..cut]),
                    None,
                    "{value:?} cut at {cut}"
                );
                assert_eq!(skip_value(&mut &out[..cut]), None, "{value:?} cut at {cut}");
            }
        }
        assert_eq!(decode_value(&mut &[99u8][..]), None);
        assert_eq!(skip_value(&mut &[99u8][..]), None);
        assert_eq!(decode_value(&mut &[BOOLEAN, 2][..]), None);
        assert_eq!(decode_value(&mut &[STRING, 1, 0xFF][..]), None);
    }

    #[test]
    fn tokens_round_trip_and_strangers_are_refused() {
        let token = continuation_token(b"p\xF5", b"");
        assert_eq!(resume_at(&token).unwrap(), (b"p\xF5".to_vec(), Vec::new()));
        let stranger = ContinuationToken::new("xyz", None);
        assert!(resume_at(&stranger).is_err());
    }
}
