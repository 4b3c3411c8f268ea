//! A renamed kind's entity found under a previous kind's RowKey: its rows
//! there go, and it is written under its own.

use super::super::{Planned, Role, Typed};
use crate::backend::BatchOperation;
use crate::entity::{Entity, IfMatch};
use crate::error::Result;
use crate::schema::{self, TableEntity};

impl<T: TableEntity> Typed<'_, T> {
    /// The rows of an entity found under a previous kind's RowKey (`stored`):
    /// they go, guarded as the write is, and the entity's rows under its own
    /// RowKey are inserted.
    pub(super) fn plan_renamed(
        pk: &str,
        stored: &str,
        parts: usize,
        guard_match: Option<IfMatch>,
        new_row: Option<Entity>,
        out: &mut Planned,
    ) -> Result<()> {
        let if_match = guard_match.unwrap_or(IfMatch::Any);
        let deletes = match T::DESCRIPTOR.rows {
            Some(rule) => rule.delete(pk, stored, parts, if_match),
            None => vec![BatchOperation::Delete {
                partition_key: pk.to_owned(),
                row_key: stored.to_owned(),
                if_match,
            }],
        };
        let inserts = match (new_row, T::DESCRIPTOR.rows) {
            (None, _) => Vec::new(),
            (Some(row), Some(rule)) => {
                let bookkeeping = [schema::KIND_PROPERTY, schema::VERSION_PROPERTY];
                rule.write(row, &bookkeeping, 0, None)?
            }
            (Some(row), None) => vec![BatchOperation::Insert(row)],
        };
        // The write's ETag is its new row's; a delete's, the old row's.
        let row_is_delete = inserts.is_empty();
        for (n, operation) in deletes.into_iter().enumerate() {
            let role = if row_is_delete && n == 0 {
                Role::Row
            } else {
                Role::Other
            };
            out.push(operation, role);
        }
        for (n, operation) in inserts.into_iter().enumerate() {
            out.push(operation, if n == 0 { Role::Row } else { Role::Other });
        }
        Ok(())
    }
}
