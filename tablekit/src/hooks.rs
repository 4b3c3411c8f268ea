//! What the conformance suite (the `tablekit-conformance` crate) needs from
//! inside the library to check it: row layouts it compares with what a
//! backend stores, and the count of finishing work still running. Not
//! public API: it may change in any release.

use std::cmp::Ordering;

use crate::datetime::DateTime;
use crate::entity::Entity;
use crate::error::Error;
use crate::filter::Filter;
use crate::index::IndexDef;
use crate::pending::Step;
use crate::schema::TableEntity;

/// The row of `row`'s entity in index `def`, under `key`.
pub fn index_row<T: TableEntity>(def: &IndexDef, key: String, row: &Entity) -> Entity {
    crate::index::index_row::<T>(def, key, row)
}

/// The RowKey of `value`'s row in its `i`-th index kept elsewhere (empty
/// for none).
pub fn remote_index_key<T: TableEntity>(
    value: &T,
    i: usize,
    row_key: &str,
) -> Result<String, Error> {
    crate::schema::remote_key(value, i, row_key)
}

/// An outbox record row, as a write leaves it.
pub fn record_row(
    table: &str,
    partition_key: &str,
    row_key: &str,
    seq: i64,
    at: DateTime,
    what: &str,
    steps: &[Step],
) -> Entity {
    crate::pending::record_row(table, partition_key, row_key, seq, at, what, steps)
}

/// RowKeys starting with `prefix`.
pub fn row_key_prefix(prefix: &str) -> Filter {
    crate::pending::row_key_prefix(prefix)
}

/// Two keys in the store's order.
pub fn cmp_keys(a: (&str, &str), b: (&str, &str)) -> Ordering {
    crate::order::cmp_keys(a, b)
}

/// How many writes' finishing work runs detached right now, in this
/// process.
pub fn detached_in_flight() -> usize {
    crate::pending::detached_in_flight()
}
