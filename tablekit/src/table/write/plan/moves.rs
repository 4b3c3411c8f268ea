//! Moves: an entity's insert at its new keys with the outbox record that
//! deletes it at its old ones, and that delete as an outbox step.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::typed::local_slots_of;
use super::{Learned, Pending, Planned, Role, State, Typed};
use crate::backend::{BatchOperation, TableBackend, TableBackendExt};
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::pending;
use crate::schema::{Sharing, TableEntity};
use crate::table::Table;
use crate::table::write::RowWrite;

/// The outbox record of a move, written in the new partition beside the
/// moved entity: one step, which deletes the entity at its old keys. Its
/// RowKey number is above every record of the new keys, stored or planned
/// in the same transaction (the moved entity's own index record), so the
/// records never collide and finish in order.
pub(in crate::table) struct MoveRecord {
    /// The new partition, and the placeholder key `check_writes` sees.
    pub(in crate::table) keys: (String, String),
    /// The moved entity's new RowKey, which owns the record.
    pub(in crate::table) owner: String,
    /// The lowest number the record may take.
    pub(in crate::table) floor: i64,
    pub(in crate::table) step: pending::Step,
}

impl Pending for MoveRecord {
    fn keys(&self) -> (&str, &str) {
        (&self.keys.0, &self.keys.1)
    }
    fn spans(&self) -> Option<(&str, &str)> {
        Some(self.keys())
    }
    fn plan(&self, _: State<'_>, _: &Learned, at: DateTime, out: &mut Planned) -> Result<bool> {
        let prefix = pending::records_prefix(&self.owner);
        let planned = out
            .operations
            .iter()
            .filter_map(|op| match op {
                BatchOperation::Insert(row) if pending::is_outbox_row(row) => {
                    row.row_key.strip_prefix(&prefix)?.parse::<i64>().ok()
                }
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let number = self.floor.max(planned) + 1;
        let row = pending::record_row(
            &self.step.table,
            &self.keys.0,
            &self.owner,
            number,
            at,
            pending::MOVE,
            std::slice::from_ref(&self.step),
        );
        out.push(BatchOperation::Insert(row), Role::Row);
        Ok(false)
    }
}

/// The insert of a moved entity at its new keys. In its old partition, the
/// unique index rows the entity itself holds there (under its old RowKey)
/// are taken over: the delete of the old row leaves them.
pub(in crate::table) struct MovedInsert<'a, T> {
    pub(in crate::table) insert: Typed<'a, T>,
    /// The old RowKey, when the move stays in its partition.
    pub(in crate::table) from: Option<String>,
}

impl<T: TableEntity> Pending for MovedInsert<'_, T> {
    fn keys(&self) -> (&str, &str) {
        self.insert.keys()
    }
    fn known_state(&self, learned: &Learned) -> Option<State<'_>> {
        self.insert.known_state(learned)
    }
    fn room(&self) -> usize {
        self.insert.room()
    }
    fn state<'a>(
        &'a self,
        backend: &'a Arc<dyn TableBackend>,
        table: &'a str,
        learned: &'a Learned,
    ) -> BoxFuture<'a, Result<State<'a>>> {
        self.insert.state(backend, table, learned)
    }
    fn plan(
        &self,
        state: State<'_>,
        learned: &Learned,
        at: DateTime,
        out: &mut Planned,
    ) -> Result<bool> {
        self.insert.plan(state, learned, at, out)
    }
    fn spans(&self) -> Option<(&str, &str)> {
        self.insert.spans()
    }
    fn change(&self) -> Option<super::ChangeOf<'_>> {
        self.insert.change()
    }
    fn claim<'a>(
        &'a self,
        backend: &'a Arc<dyn TableBackend>,
        table: &'a str,
        index: usize,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<ETag>>> {
        Box::pin(async move {
            match self.insert.claim(backend, table, index, key).await {
                Err(Error::UniqueViolation { held_by, .. })
                    if self.from.as_deref() == Some(held_by.as_str()) =>
                {
                    let (pk, _) = self.keys();
                    Ok(backend
                        .try_get_entity(table, pk, key)
                        .await?
                        .and_then(|row| row.etag))
                }
                other => other,
            }
        })
    }
}

impl<T: TableEntity> Table<T> {
    /// The delete of the entity `(pk, rk)` at version `etag` as the
    /// operations of an outbox step in its partition, planned from the
    /// stored state but not sent: the row (each part of a wide entity) and
    /// its index rows, its leaving its index entities, and the outbox record
    /// of its indexes kept elsewhere. Index rows whose RowKeys are in `keep`
    /// (taken over by the entity's new row) are left. For a kind with a
    /// change feed, the step records the delete in the old partition's feed.
    pub(in crate::table) async fn delete_as_step(
        &self,
        pk: &str,
        rk: &str,
        etag: &ETag,
        keep: &[String],
    ) -> Result<Vec<pending::StepOp>> {
        let entity = Entity::new(pk, rk);
        let write = Typed::<T> {
            entity: Cow::Borrowed(&entity),
            write: RowWrite::Delete(IfMatch::ETag(etag.clone())),
            known: None,
            new_keys: None,
            _marker: PhantomData,
        };
        let learned = Learned::default();
        let state = match write.known_state(&learned) {
            Some(state) => state,
            None => write.state(&self.backend, &self.name, &learned).await?,
        };
        let old_keys: Vec<String> = state.old_keys.as_deref().unwrap_or_default().to_vec();
        let mut planned = Planned::with_capacity(write.room());
        write.plan(state, &learned, self.clock.now(), &mut planned)?;
        let mut ops = Vec::with_capacity(planned.operations.len());
        for (operation, &(_, role)) in planned.operations.into_iter().zip(&planned.owners) {
            ops.push(match (operation, role) {
                // Left by the old row, found again from its keys below.
                (_, Role::List) => continue,
                (BatchOperation::Delete { row_key, .. }, _) if keep.contains(&row_key) => continue,
                (
                    BatchOperation::Delete {
                        row_key,
                        if_match: IfMatch::ETag(etag),
                        ..
                    },
                    _,
                ) => pending::StepOp::DeleteIf { row_key, etag },
                (BatchOperation::Delete { row_key, .. }, _) => pending::StepOp::Delete(row_key),
                (BatchOperation::Insert(record), Role::Other)
                    if pending::is_outbox_row(&record) =>
                {
                    pending::StepOp::Put(record)
                }
                (operation, _) => {
                    return Err(Error::Decode {
                        message: format!(
                            "a delete planned an operation a step cannot hold: {:?}",
                            operation.keys()
                        ),
                    });
                }
            });
        }
        if T::DESCRIPTOR.write_needs().changes {
            ops.push(pending::StepOp::Change {
                row_key: rk.to_owned(),
                op: RowWrite::Delete(IfMatch::Any).name().to_owned(),
            });
        }
        for (i, rows) in local_slots_of::<T>() {
            let listed = rows.sharing(i) == Sharing::Listed;
            if let (true, Some(key)) = (listed, old_keys.get(i).filter(|k| !k.is_empty())) {
                ops.push(pending::StepOp::ListRemove {
                    row_key: key.clone(),
                    member: rk.to_owned(),
                    marker: T::DESCRIPTOR
                        .kind_properties
                        .then(|| rows.name(i).to_owned()),
                });
            }
        }
        Ok(ops)
    }
}
