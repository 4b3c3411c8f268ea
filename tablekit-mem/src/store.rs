//! Tables, partitions and key-range scans.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use tablekit_core::Error;
use tablekit_core::backend::sorted::KeyRange;

use crate::codec::{Names, Row};

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
        let now = tablekit_core::DateTime::now().ticks();
        self.last_ticks = now.max(self.last_ticks + 1);
        self.last_ticks
    }
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
