//! The entity's own row: the row a write stores, the RowKeys of its index
//! rows, and the operation that writes it.

use std::borrow::Cow;

use super::super::{Planned, RemoteState, Role, Typed};
use crate::backend::{BatchOperation, UpdateMode};
use crate::entity::{Entity, IfMatch};
use crate::error::Result;
use crate::schema::{TableEntity, local_slots};
use crate::table::Current;
use crate::table::write::RowWrite;
use crate::{pending, schema};

impl<T: TableEntity> Typed<'_, T> {
    /// The row the write stores (`None`: a delete): the row sent, or for a
    /// merge over a stored row, the two merged; carrying the write's
    /// sequence number when it has steps elsewhere, for the next write.
    pub(super) fn new_row(
        &self,
        current: Option<&Current>,
        remote: Option<&RemoteState>,
    ) -> Option<Entity> {
        let new_row = match (&self.write, current) {
            (RowWrite::Delete(_), _) => None,
            (write, Some(current)) if write.is_merge() => Some(self.merged_over(current)),
            _ => Some(self.entity.as_ref().clone()),
        };
        match (new_row, remote) {
            (Some(mut row), Some(remote)) => {
                row.properties.insert(pending::SEQ_PROPERTY, remote.seq);
                Some(row)
            }
            (row, _) => row,
        }
    }

    /// The RowKeys of the index rows of `new_row` (`None`: a delete), borrowed
    /// by the caller when it knows them.
    pub(super) fn new_keys(&self, new_row: Option<&Entity>) -> Result<Option<Cow<'_, [String]>>> {
        Ok(match (new_row, local_slots::<T>() == 0) {
            (Some(_), false) if self.new_keys.is_some() => {
                self.new_keys.as_deref().map(Cow::Borrowed)
            }
            (Some(row), false) => Some(Cow::Owned(schema::stored_local_keys::<T>(row)?)),
            (Some(_), true) => Some(Cow::Owned(Vec::new())),
            (None, _) => None,
        })
    }
}

/// The entity's own row, alone: inserted when nothing guards it, else
/// written under the guard (merged when the write was planned without
/// reading), or deleted.
pub(super) fn plan_row(
    (pk, rk): (&str, &str),
    guard_match: Option<IfMatch>,
    new_row: Option<Entity>,
    merge_in_place: bool,
    out: &mut Planned,
) {
    let mode = if merge_in_place {
        UpdateMode::Merge
    } else {
        UpdateMode::Replace
    };
    let operation = match (new_row, guard_match) {
        (Some(row), None) => BatchOperation::Insert(row),
        (Some(row), Some(if_match)) => BatchOperation::Update {
            entity: row,
            mode,
            if_match,
        },
        (None, if_match) => BatchOperation::Delete {
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
            if_match: if_match.unwrap_or(IfMatch::Any),
        },
    };
    out.push(operation, Role::Row);
}
