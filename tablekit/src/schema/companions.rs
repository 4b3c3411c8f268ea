//! The RowKeys of an entity's companion rows ([`CompanionRows`]), computed
//! from a typed value: what the typed client plans writes with and the
//! patterns that keep such rows check them with.

use tablekit_encrypt::{ENVELOPE_PROPERTY, Envelope, IndexKey};

use super::{CompanionRows, TableEntity, encrypted};
use crate::entity::Entity;
use crate::error::{EncryptionError, Error};
use crate::value::Value;

/// The companion rows `T` declares, if any.
pub(crate) fn companions<T: TableEntity>() -> Option<&'static dyn CompanionRows> {
    T::DESCRIPTOR.companion_rows()
}

/// How many slots of companion rows `T` keeps in the entity's partition.
pub(crate) fn local_slots<T: TableEntity>() -> usize {
    companions::<T>().map_or(0, |rows| rows.local())
}

/// Whether `T`'s local slot `slot` keys its rows by a hash of the value
/// (an index on an encrypted field).
pub(crate) fn sealed_slot<T: TableEntity>(slot: usize) -> bool {
    companions::<T>().is_some_and(|rows| rows.sealed(slot))
}

/// How many slots of companion rows `T` keeps elsewhere.
pub(crate) fn remote_slots<T: TableEntity>() -> usize {
    companions::<T>().map_or(0, |rows| rows.remote())
}

/// The RowKeys of `value`'s rows in `T`'s local slots, in slot order;
/// `row_key` is the entity's stored RowKey. An empty RowKey stands for no
/// row: an optional value that is `None`.
pub(crate) fn local_keys<T: TableEntity>(value: &T, row_key: &str) -> Result<Vec<String>, Error> {
    hashed_keys(value, row_key, None)
}

/// [`local_keys`], the values of indexes on encrypted fields hashed with
/// `hash` (which a type with such indexes needs).
pub(crate) fn hashed_keys<T: TableEntity>(
    value: &T,
    row_key: &str,
    hash: Option<&IndexKey>,
) -> Result<Vec<String>, Error> {
    (0..local_slots::<T>())
        .map(|i| key_of(value, i, false, row_key, hash))
        .collect()
}

/// The RowKey of `value`'s row in local slot `slot`; empty when it has none.
pub(crate) fn local_key<T: TableEntity>(
    value: &T,
    slot: usize,
    row_key: &str,
) -> Result<String, Error> {
    key_of(value, slot, false, row_key, None)
}

/// [`local_key`], a sealed slot's value hashed with `hash`.
pub(crate) fn hashed_key<T: TableEntity>(
    value: &T,
    slot: usize,
    row_key: &str,
    hash: Option<&IndexKey>,
) -> Result<String, Error> {
    key_of(value, slot, false, row_key, hash)
}

/// The RowKeys of the local companion rows of the entity stored as `row`.
/// A sealed row of a type with encrypted fields records them in its
/// envelope (its values are not read, which would need its keys); other
/// rows are read for them.
pub(crate) fn stored_local_keys<T: TableEntity>(row: &Entity) -> Result<Vec<String>, Error> {
    let Some(rows) = companions::<T>().filter(|rows| rows.local() != 0) else {
        return Ok(Vec::new());
    };
    let envelope = match row.properties.get(ENVELOPE_PROPERTY) {
        Some(Value::String(text)) if encrypted::<T>().is_some() => Envelope::from_text(text)?,
        _ => return local_keys(&read_for_keys::<T>(row)?, &row.row_key),
    };
    // Recorded for the indexes the type declares now, each under its own
    // tag (or empty, for no row).
    let keys = envelope.indexed;
    let matches = keys.len() == rows.local()
        && (keys.iter().enumerate())
            .all(|(i, k)| k.is_empty() || rows.value_of(i, k).len() < k.len());
    if !matches {
        return Err(EncryptionError::IndexRowsUnknown {
            partition_key: row.partition_key.clone(),
            row_key: row.row_key.clone(),
        }
        .into());
    }
    Ok(keys)
}

/// The RowKey of `value`'s row in remote slot `slot` (numbered among the
/// remote ones); empty when it has none.
pub(crate) fn remote_key<T: TableEntity>(
    value: &T,
    slot: usize,
    row_key: &str,
) -> Result<String, Error> {
    key_of(value, slot, true, row_key, None)
}

/// [`stored_local_keys`], each key on its own: one that does not encode
/// leaves the others known.
pub(crate) fn stored_keys_each<T: TableEntity>(
    row: &Entity,
) -> Result<Vec<Result<String, Error>>, Error> {
    if encrypted::<T>().is_some() {
        return Ok(stored_local_keys::<T>(row)?.into_iter().map(Ok).collect());
    }
    let value = read_for_keys::<T>(row)?;
    Ok((0..local_slots::<T>())
        .map(|i| local_key(&value, i, &row.row_key))
        .collect())
}

/// What `write_index_key` writes for `value` at the local or `remote` slot
/// `slot`, made a RowKey by the part; empty when it writes nothing. The
/// value of a sealed slot is hashed with `hash`, and without one refused.
fn key_of<T: TableEntity>(
    value: &T,
    slot: usize,
    remote: bool,
    row_key: &str,
    hash: Option<&IndexKey>,
) -> Result<String, Error> {
    let Some(rows) = companions::<T>() else {
        return Ok(String::new());
    };
    let mut encoded = String::with_capacity(row_key.len() + 32);
    // `write_index_key` numbers the remote slots after the local ones.
    let number = if remote { rows.local() + slot } else { slot };
    value.write_index_key(number, &mut encoded);
    if !encoded.is_empty() && !remote && rows.sealed(slot) {
        let hash = hash.ok_or(Error::NotSupported {
            operation: "the index key of an encrypted value, outside a table given keys",
        })?;
        let tag = encoded.len() - rows.value_of(slot, &encoded).len();
        encoded = hashed(&encoded[..tag], &encoded, hash);
    }
    if encoded.is_empty() {
        Ok(encoded)
    } else if remote {
        rows.remote_key(slot, encoded, row_key)
    } else {
        rows.local_key(slot, encoded, row_key)
    }
}

/// The RowKey start of a sealed slot's value `encoded` (laid out as for a
/// plain value, its tag `tag` and all): the tag, then the keyed hash of
/// the whole.
pub(crate) fn hashed(tag: &str, encoded: &str, hash: &IndexKey) -> String {
    let mut key = String::with_capacity(tag.len() + 64);
    key.push_str(tag);
    key.push_str(&hash.hash(encoded));
    key
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
