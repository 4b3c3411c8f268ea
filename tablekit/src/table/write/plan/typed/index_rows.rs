//! The index rows of a typed write kept in the entity's partition: which
//! slots move, and the operations that move them (listed slots are
//! `listed.rs`'s).

use super::super::{Learned, Planned, Role, StoredList};
use super::local_slots_of;
use crate::backend::{BatchOperation, UpdateMode};
use crate::entity::{Entity, IfMatch};
use crate::error::Result;
use crate::schema::{CompanionRows, Sharing, TableEntity};

/// Slot `i`'s RowKey in `keys`; an empty key stands for no row (an optional
/// value that is `None`).
pub(super) fn slot_key(keys: Option<&[String]>, i: usize) -> Option<&String> {
    keys.and_then(|keys| keys.get(i))
        .filter(|key| !key.is_empty())
}

/// What the index rows of one write in the entity's partition are planned
/// from.
pub(super) struct IndexRows<'p> {
    pub(super) pk: &'p str,
    pub(super) rk: &'p str,
    /// The previous kind's RowKey the entity was found under, if any.
    pub(super) renamed: Option<&'p str>,
    /// Each slot's RowKey before and after the write (empty: no row).
    pub(super) old_keys: Option<&'p [String]>,
    pub(super) new_keys: Option<&'p [String]>,
    /// The index entities the write changes, as stored.
    pub(super) lists: &'p [(String, Option<StoredList>)],
    pub(super) learned: &'p Learned,
    /// The entity's row after the write (`None`: a delete).
    pub(super) new_row: Option<&'p Entity>,
    /// A merge planned without reading: index rows are merged too.
    pub(super) merge_in_place: bool,
}

impl IndexRows<'_> {
    /// The operations of every index slot of `T` kept in the entity's
    /// partition.
    pub(super) fn plan<T: TableEntity>(&self, out: &mut Planned) -> Result<()> {
        let kind_properties = T::DESCRIPTOR.kind_properties;
        for (i, rows) in local_slots_of::<T>() {
            let keys = (slot_key(self.old_keys, i), slot_key(self.new_keys, i));
            if rows.sharing(i) == Sharing::Listed {
                self.plan_list(rows, i, keys, kind_properties, out)?;
            } else {
                self.plan_row(rows, i, keys, kind_properties, out);
            }
        }
        Ok(())
    }

    /// The index row of a slot that is not listed: the old one deleted when
    /// the value moves, the new one written (over a row it takes over, or
    /// inserted where the value is its alone).
    pub(super) fn plan_row(
        &self,
        rows: &dyn CompanionRows,
        i: usize,
        (old, new): (Option<&String>, Option<&String>),
        kind_properties: bool,
        out: &mut Planned,
    ) {
        if let Some(old) = old
            && new != Some(old)
            && !self.learned.missing.contains(old)
        {
            let operation = BatchOperation::Delete {
                partition_key: self.pk.to_owned(),
                row_key: old.clone(),
                if_match: IfMatch::Any,
            };
            out.push(operation, Role::CompanionDelete);
        }
        let (Some(new), Some(row)) = (new, self.new_row) else {
            return;
        };
        let index_row = rows.local_row(i, new.clone(), row, kind_properties);
        let operation = match self.learned.take_over(new) {
            Some(etag) => BatchOperation::Update {
                entity: index_row,
                mode: UpdateMode::Replace,
                if_match: IfMatch::ETag(etag.clone()),
            },
            None if self.merge_in_place => BatchOperation::Update {
                entity: index_row,
                mode: UpdateMode::Merge,
                if_match: IfMatch::Any,
            },
            None if rows.sharing(i) == Sharing::Exclusive && old != Some(new) => {
                BatchOperation::Insert(index_row)
            }
            None => BatchOperation::Upsert {
                entity: index_row,
                mode: UpdateMode::Replace,
            },
        };
        out.push(operation, Role::CompanionWrite(i));
    }
}
