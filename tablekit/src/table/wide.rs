//! Wide entities: one logical entity stored as several rows of one partition
//! (a row holds at most 252 properties and 1 MiB), always written in one entity group transaction.
//!
//! # Layout
//! The entity's RowKey `K` is never a row itself. Its parts are the rows
//! `K` + U+FFFD U+FFFD + a two-digit part number (`00`, `01`, …): the pair of
//! escape marks never occurs in an encoded key (the marker is always followed
//! by an escape selector), so part keys cannot collide with another entity,
//! another kind or an index row, and they sort together right after `K`. One
//! range query, `[K + "\u{FFFD}\u{FFFD}", K + "\u{FFFD}\u{FFFE}")`, reads them all.
//!
//! Properties are packed in order, each part holding at most
//! [`PART_PROPERTIES`] of them and staying under the 1 MiB entity size. Part 0
//! holds the kind, the version and `_Parts`, the number of parts.
//!
//! # ETag
//! The ETag of a wide entity is the ETag of part 0. Every write rewrites part
//! 0 under `If-Match` in the same transaction as the other parts, so a writer
//! holding a stale ETag fails as a whole ([`PreconditionFailed`]) and no reader
//! ever sees parts of two versions.
//!
//! [`PreconditionFailed`]: crate::Error::PreconditionFailed

use crate::backend::{BatchOperation, UpdateMode};
use crate::entity::{Entity, IfMatch};
use crate::error::{Error, InvalidInput, SchemaError, ValueError};
use crate::filter::Filter;
use crate::key::ESCAPE_MARK;
use crate::schema::RowRule;
use crate::validate::limits::{MAX_BATCH_OPERATIONS, MAX_ENTITY_SIZE, MAX_PROPERTIES};
use crate::value::Value;

/// The property of part 0 that counts the parts.
pub const PARTS_PROPERTY: &str = "_Parts";
/// Properties of one part, leaving room for kind, version and `_Parts`.
pub const PART_PROPERTIES: usize = MAX_PROPERTIES - 3;
/// Size kept free in each part for its keys and bookkeeping properties.
const PART_SIZE_RESERVE: usize = 4 * 1024;

/// The RowKey of part `index` of the entity whose RowKey is `base`.
pub fn part_key(base: &str, index: usize) -> String {
    format!("{base}{ESCAPE_MARK}{ESCAPE_MARK}{index:02}")
}

/// The filter that reads every part of the entity `(pk, base)`, and nothing else.
pub fn parts_filter(pk: &str, base: &str) -> Filter {
    let start = format!("{base}{ESCAPE_MARK}{ESCAPE_MARK}");
    Filter::partition_key().eq(pk)
        & Filter::row_key().ge(start)
        & Filter::row_key().lt(parts_end(base))
}

/// The first RowKey after every part of the entity whose RowKey is `base`.
pub fn parts_end(base: &str) -> String {
    format!("{base}{ESCAPE_MARK}\u{FFFE}")
}

/// The entity RowKey a part's RowKey belongs to, if it is a part key.
pub fn base_of(row_key: &str) -> Option<&str> {
    let marks: String = [ESCAPE_MARK, ESCAPE_MARK].iter().collect();
    let at = row_key.rfind(&marks)?;
    let digits = &row_key[at + marks.len()..];
    (digits.len() == 2 && digits.bytes().all(|b| b.is_ascii_digit())).then_some(&row_key[..at])
}

/// Splits a logical entity into its part rows. `kind` properties (already in
/// `entity`) go to part 0, with `_Parts`.
pub fn split(entity: Entity, bookkeeping: &[&str]) -> Result<Vec<Entity>, Error> {
    let Entity {
        partition_key,
        row_key,
        properties,
        ..
    } = entity;
    let new_part = |index: usize| Entity::new(partition_key.clone(), part_key(&row_key, index));
    let mut parts = vec![new_part(0)];
    let mut first_props = Vec::new();
    let mut size = 0usize;
    for (name, value) in properties {
        if bookkeeping.contains(&&*name) {
            first_props.push((name, value));
            continue;
        }
        let cost = 8 + 2 * crate::keyorder::utf16_len(&name) + value.stored_size();
        let current = parts.last().map_or(0, |p| p.properties.len());
        if current == PART_PROPERTIES || size + cost > MAX_ENTITY_SIZE - PART_SIZE_RESERVE {
            parts.push(new_part(parts.len()));
            size = 0;
        }
        size += cost;
        if let Some(part) = parts.last_mut() {
            // Names come from one entity: each appears once.
            part.properties.push_unchecked(name, value);
        }
    }
    if parts.len() > MAX_BATCH_OPERATIONS {
        return Err(InvalidInput::BatchTooManyOperations {
            count: parts.len(),
            max: MAX_BATCH_OPERATIONS,
        }
        .into());
    }
    let count = parts.len() as i32;
    let first = &mut parts[0].properties;
    for (name, value) in first_props {
        first.insert(name, value);
    }
    first.insert(PARTS_PROPERTY, count);
    Ok(parts)
}

/// Joins the part rows read by [`parts_filter`] into the logical entity,
/// checking that every part is there. `None` when there are no parts.
pub fn join(base: &str, mut rows: Vec<Entity>) -> Result<Option<(Entity, usize)>, Error> {
    if rows.is_empty() {
        return Ok(None);
    }
    rows.sort_by(|a, b| a.row_key.cmp(&b.row_key));
    let broken = |reason: String| -> Error {
        SchemaError::Property {
            property: PARTS_PROPERTY.into(),
            problem: ValueError::Invalid(reason),
            row: None,
        }
        .into()
    };
    let expected = match rows[0].get(PARTS_PROPERTY) {
        Some(Value::Int32(n)) if *n >= 1 => *n as usize,
        _ => {
            return Err(broken(format!(
                "part 0 of {base:?} is missing or has no part count"
            )));
        }
    };
    if rows.len() != expected
        || rows
            .iter()
            .enumerate()
            .any(|(i, r)| r.row_key != part_key(base, i))
    {
        return Err(broken(format!(
            "{base:?} should have {expected} parts, found {}",
            rows.len()
        )));
    }
    let mut rows = rows.into_iter();
    let mut entity = rows.next().ok_or_else(|| broken("no part 0".into()))?;
    entity.row_key = base.to_owned();
    entity.properties.remove(PARTS_PROPERTY);
    for part in rows {
        for (name, value) in part.properties {
            // The parts of one entity hold disjoint names.
            entity.properties.push_unchecked(name, value);
        }
    }
    Ok(Some((entity, expected)))
}

/// The operations that write `parts` over an entity stored in `old_parts`
/// rows: part 0 under `first` (an insert, or a guarded replace), the others
/// upserted, surplus old parts deleted — one transaction.
pub fn write_operations(
    parts: Vec<Entity>,
    old_parts: usize,
    first: Option<IfMatch>,
) -> Vec<BatchOperation> {
    let count = parts.len();
    let pk = parts[0].partition_key.clone();
    let base = base_of(&parts[0].row_key).unwrap_or_default().to_owned();
    let mut ops = Vec::with_capacity(count.max(old_parts));
    for (index, part) in parts.into_iter().enumerate() {
        ops.push(match (&first, index) {
            (Some(if_match), 0) => BatchOperation::Update {
                entity: part,
                mode: UpdateMode::Replace,
                if_match: if_match.clone(),
            },
            (None, _) => BatchOperation::Insert(part),
            (Some(_), _) => BatchOperation::Upsert {
                entity: part,
                mode: UpdateMode::Replace,
            },
        });
    }
    for index in count..old_parts {
        ops.push(BatchOperation::Delete {
            partition_key: pk.clone(),
            row_key: part_key(&base, index),
            if_match: IfMatch::Any,
        });
    }
    ops
}

/// The operations that delete an entity stored in `parts` rows, part 0 under `if_match`.
pub fn delete_operations(
    pk: &str,
    base: &str,
    parts: usize,
    if_match: IfMatch,
) -> Vec<BatchOperation> {
    (0..parts.max(1))
        .map(|index| BatchOperation::Delete {
            partition_key: pk.to_owned(),
            row_key: part_key(base, index),
            if_match: if index == 0 {
                if_match.clone()
            } else {
                IfMatch::Any
            },
        })
        .collect()
}

/// The row rule of `#[tablekit(wide)]` entities: parts `K` + U+FFFD
/// U+FFFD + a two-digit number, as the module docs describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WideRows;

impl RowRule for WideRows {
    fn owns_property(&self, name: &str) -> bool {
        name == PARTS_PROPERTY
    }

    fn rows_filter(&self, partition_key: &str, row_key: &str) -> Filter {
        parts_filter(partition_key, row_key)
    }

    fn rows_end(&self, row_key: &str) -> String {
        parts_end(row_key)
    }

    fn entity_of<'a>(&self, stored_row_key: &'a str) -> Option<&'a str> {
        base_of(stored_row_key)
    }

    fn join(&self, row_key: &str, rows: Vec<Entity>) -> Result<Option<(Entity, usize)>, Error> {
        join(row_key, rows)
    }

    fn write(
        &self,
        entity: Entity,
        bookkeeping: &[&str],
        stored: usize,
        guard: Option<IfMatch>,
    ) -> Result<Vec<BatchOperation>, Error> {
        Ok(write_operations(split(entity, bookkeeping)?, stored, guard))
    }

    fn delete(
        &self,
        partition_key: &str,
        row_key: &str,
        stored: usize,
        guard: IfMatch,
    ) -> Vec<BatchOperation> {
        delete_operations(partition_key, row_key, stored, guard)
    }
}
