//! Tables, partitions and key-range scans.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rustc_hash::FxHashMap;
use tablekit::filter::{CompareOp, Filter};
use tablekit::{ContinuationToken, Error, InvalidInput, Value};

use crate::codec::{Names, Row, encode_key};

/// The rows of one partition, by stored RowKey.
pub(crate) type Partition = BTreeMap<Box<[u8]>, Row>;

/// One table.
#[derive(Debug)]
pub(crate) struct Table {
    /// The name as created.
    pub(crate) name: String,
    pub(crate) names: Names,
    pub(crate) partitions: BTreeMap<Box<[u8]>, Partition>,
}

/// Everything the backend stores, behind one lock.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Tables by lower-cased name (names compare case-insensitively).
    pub(crate) tables: FxHashMap<Box<str>, Table>,
    /// Recently deleted tables, by lower-cased name, with the time of deletion.
    pub(crate) deleted: FxHashMap<Box<str>, Instant>,
    /// Ticks of the latest write, so every write gets a later timestamp.
    pub(crate) last_ticks: i64,
}

/// Longest table name; validated names fit a stack buffer.
const MAX_TABLE_NAME: usize = 63;

/// Runs `f` with the lower-cased form of a validated table name, without allocating.
pub(crate) fn with_folded<R>(table: &str, f: impl FnOnce(&str) -> R) -> R {
    let mut buf = [0u8; MAX_TABLE_NAME];
    let len = table.len().min(MAX_TABLE_NAME);
    buf[..len].copy_from_slice(&table.as_bytes()[..len]);
    buf[..len].make_ascii_lowercase();
    // Validated names are ASCII, so the folded bytes are UTF-8.
    f(std::str::from_utf8(&buf[..len]).unwrap_or_default())
}

impl State {
    /// The table, or the error for a missing one (which says "being deleted"
    /// within `delay` of its deletion, as the service does).
    pub(crate) fn table(&self, table: &str, delay: Duration) -> Result<&Table, Error> {
        with_folded(table, |key| match self.tables.get(key) {
            Some(t) => Ok(t),
            None => Err(self.missing(key, table, delay)),
        })
    }

    /// Mutable form of [`State::table`].
    pub(crate) fn table_mut(&mut self, table: &str, delay: Duration) -> Result<&mut Table, Error> {
        with_folded(table, |key| {
            if self.tables.contains_key(key) {
                Ok(self.tables.get_mut(key).expect("checked above"))
            } else {
                Err(self.missing(key, table, delay))
            }
        })
    }

    fn missing(&self, key: &str, table: &str, delay: Duration) -> Error {
        match self.deleted.get(key) {
            Some(at) if at.elapsed() < delay => Error::TableBeingDeleted {
                table: table.into(),
            },
            _ => Error::TableNotFound {
                table: table.into(),
            },
        }
    }

    /// A write time later than every earlier one.
    pub(crate) fn next_ticks(&mut self) -> i64 {
        let now = tablekit::DateTime::now().ticks();
        self.last_ticks = now.max(self.last_ticks + 1);
        self.last_ticks
    }
}

/// A byte-key range as `BTreeMap::range` takes it.
pub(crate) type ByteBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// Key bounds a filter implies, used to scan only what can match.
#[derive(Debug, Clone)]
pub(crate) struct KeyRange {
    pub(crate) lower: Bound<Vec<u8>>,
    pub(crate) upper: Bound<Vec<u8>>,
}

impl KeyRange {
    fn all() -> KeyRange {
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

    /// Raises the lower bound to at least `start` (inclusive).
    pub(crate) fn starting_at(&self, start: &[u8]) -> KeyRange {
        let mut range = self.clone();
        range.tighten_lower(Bound::Included(start.to_vec()));
        range
    }

    /// The bounds as `BTreeMap::range` takes them, or `None` when empty (for
    /// which `range` would panic).
    pub(crate) fn bounds(&self) -> Option<ByteBounds<'_>> {
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

/// The PartitionKey and RowKey ranges that the `and`-connected key
/// comparisons at the top of `filter` allow. Every row is still tested against
/// the whole filter; this only skips rows that cannot match.
pub(crate) fn plan(filter: Option<&Filter>) -> (KeyRange, KeyRange) {
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

/// Every row inside the key ranges, from `resume` on, in key order.
pub(crate) fn scan<'a>(
    table: &'a Table,
    pk: &'a KeyRange,
    rk: &'a KeyRange,
    resume: Option<&'a (Vec<u8>, Vec<u8>)>,
) -> impl Iterator<Item = (&'a [u8], &'a [u8], &'a Row)> + 'a {
    let pk_range = match resume {
        Some((start, _)) => pk.starting_at(start),
        None => pk.clone(),
    };
    let partitions = pk_range
        .bounds()
        .map(|b| table.partitions.range::<[u8], _>(b))
        .into_iter()
        .flatten();
    partitions.flat_map(move |(pk_bytes, partition)| {
        let rk_range = match resume {
            Some((start_pk, start_rk)) if start_pk.as_slice() == &**pk_bytes => {
                rk.starting_at(start_rk)
            }
            _ => rk.clone(),
        };
        let rows = rk_range
            .bounds()
            .map(|b| partition.range::<[u8], _>(b))
            .into_iter()
            .flatten();
        rows.map(move |(rk_bytes, row)| (&**pk_bytes, &**rk_bytes, row))
    })
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

/// The token that resumes at (pk, rk).
pub(crate) fn make_token(pk: &[u8], rk: &[u8]) -> ContinuationToken {
    ContinuationToken::new(token_part(pk), Some(token_part(rk)))
}

/// The (pk, rk) position a token resumes at.
pub(crate) fn read_token(token: &ContinuationToken) -> Result<(Vec<u8>, Vec<u8>), InvalidInput> {
    let pk = read_token_part(token.next_partition_key())?;
    let rk = match token.next_row_key() {
        Some(rk) => read_token_part(rk)?,
        None => Vec::new(),
    };
    Ok((pk, rk))
}
