//! The RowKeys of an entity's companion rows ([`CompanionRows`]), computed
//! from a typed value: what the typed client plans writes with and the
//! patterns that keep such rows check them with.

use super::{CompanionRows, TableEntity};
use crate::entity::Entity;
use crate::error::Error;

/// The companion rows `T` declares, if any.
pub(crate) fn companions<T: TableEntity>() -> Option<&'static dyn CompanionRows> {
    T::DESCRIPTOR.companion_rows()
}

/// How many slots of companion rows `T` keeps in the entity's partition.
pub(crate) fn local_slots<T: TableEntity>() -> usize {
    companions::<T>().map_or(0, |rows| rows.local())
}

/// How many slots of companion rows `T` keeps elsewhere.
pub(crate) fn remote_slots<T: TableEntity>() -> usize {
    companions::<T>().map_or(0, |rows| rows.remote())
}

/// The RowKeys of `value`'s rows in `T`'s local slots, in slot order;
/// `row_key` is the entity's stored RowKey. An empty RowKey stands for no
/// row: an optional value that is `None`.
pub(crate) fn local_keys<T: TableEntity>(value: &T, row_key: &str) -> Result<Vec<String>, Error> {
    (0..local_slots::<T>())
        .map(|i| local_key(value, i, row_key))
        .collect()
}

/// The RowKey of `value`'s row in local slot `slot`; empty when it has none.
pub(crate) fn local_key<T: TableEntity>(
    value: &T,
    slot: usize,
    row_key: &str,
) -> Result<String, Error> {
    key_of(value, slot, false, row_key)
}

/// The RowKey of `value`'s row in remote slot `slot` (numbered among the
/// remote ones); empty when it has none.
pub(crate) fn remote_key<T: TableEntity>(
    value: &T,
    slot: usize,
    row_key: &str,
) -> Result<String, Error> {
    key_of(value, slot, true, row_key)
}

/// What `write_index_key` writes for `value` at the local or `remote` slot
/// `slot`, made a RowKey by the part; empty when it writes nothing.
fn key_of<T: TableEntity>(
    value: &T,
    slot: usize,
    remote: bool,
    row_key: &str,
) -> Result<String, Error> {
    let Some(rows) = companions::<T>() else {
        return Ok(String::new());
    };
    let mut encoded = String::with_capacity(row_key.len() + 32);
    // `write_index_key` numbers the remote slots after the local ones.
    let number = if remote { rows.local() + slot } else { slot };
    value.write_index_key(number, &mut encoded);
    if encoded.is_empty() {
        Ok(encoded)
    } else if remote {
        rows.remote_key(slot, encoded, row_key)
    } else {
        rows.local_key(slot, encoded, row_key)
    }
}

/// Reads `row` as `T` to compute its companion keys: a value kept outside
/// the row (whose row holds a reference in place of it, and which is never
/// part of a key) reads as empty.
pub(crate) fn read_for_keys<T: TableEntity>(row: &Entity) -> Result<T, Error> {
    if let Some(external) = T::DESCRIPTOR.external_values()
        && let Some(blanked) = external.blanked(row)?
    {
        return super::from_entity(&blanked);
    }
    super::from_entity(row)
}
