//! The typed planner: the operations of one typed write, from the state it
//! replaces (`state.rs`). `plan` here puts them together; each concern has
//! a planner of its own: the entity's row (`row.rs`), a wide entity's parts
//! (`parts.rs`), its index rows (`index_rows.rs`), its listed indexes
//! (`listed.rs`), the outbox record of its indexes kept elsewhere
//! (`outbox.rs`), and a renamed kind's old row (`renamed.rs`).

use std::sync::Arc;

use futures::future::BoxFuture;

mod index_rows;
mod listed;
mod outbox;
mod parts;
mod renamed;
mod row;
mod state;

use index_rows::IndexRows;
use parts::plan_parts;
use row::plan_row;

use super::{Learned, Pending, Planned, Role, State, Typed};
use crate::backend::{BatchOperation, TableBackend, UpdateMode};
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::schema::{CompanionRows, Sharing, TableEntity, companions, local_slots, remote_slots};
use crate::table::write::RowWrite;

impl<T: TableEntity> Typed<'_, T> {
    /// Whether the write needs to know the stored state: a wide entity's
    /// parts, an entity's index rows, the offloaded values it replaces.
    fn needs_state() -> bool {
        let needs = T::DESCRIPTOR.write_needs();
        T::DESCRIPTOR.wide()
            || needs.blobs
            || needs.previous
            || !T::DESCRIPTOR.previous_kinds.is_empty()
            || local_slots::<T>() != 0
            || remote_slots::<T>() != 0
    }

    fn error(&self, table: &str, make: fn(String, String, String) -> Error) -> Error {
        make(
            table.to_owned(),
            self.entity.partition_key.clone(),
            self.entity.row_key.clone(),
        )
    }
}

impl<T: TableEntity> Pending for Typed<'_, T> {
    fn keys(&self) -> (&str, &str) {
        (&self.entity.partition_key, &self.entity.row_key)
    }

    fn prepare<'a>(&'a mut self, table: &'a crate::table::Table<()>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let plain = crate::schema::expiry_property::<T>().is_none()
                && crate::schema::encrypted::<T>().is_none();
            if plain || matches!(self.write, RowWrite::Delete(_)) {
                return Ok(());
            }
            let table: crate::table::Table<T> = table.of();
            // A time to live counts from each write; the expiry index row
            // goes before the entity's (see `index_expiry`).
            crate::schema::stamp_write::<T>(self.entity.to_mut(), table.clock.now());
            table.index_expiry(&self.entity).await?;
            if matches!(self.write, RowWrite::Insert) {
                // An expired entity does not hold its keys: the insert
                // replaces it, guarded by the version read.
                if let Some(etag) = table.expired_at(&self.entity).await? {
                    if T::DESCRIPTOR.write_needs().any() {
                        // Rows beside it are its own: deleted first, as
                        // the sweep would (see `insert_over_expired`).
                        table.expire(&self.entity, etag).await?;
                    } else {
                        let write = RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(etag));
                        self.write = write;
                    }
                }
            }
            if crate::schema::encrypted::<T>().is_none() {
                return Ok(());
            }
            let merge = self.write.is_merge();
            table.seal_lowered(self.entity.to_mut(), merge).await?;
            // Read back from the envelope, where they were just recorded.
            if local_slots::<T>() != 0 {
                let keys = crate::schema::stored_local_keys::<T>(&self.entity)?;
                self.new_keys = Some(std::borrow::Cow::Owned(keys));
            }
            Ok(())
        })
    }

    fn free<'a>(
        &'a self,
        table: &'a crate::table::Table<()>,
        error: &'a crate::error::Error,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let table: crate::table::Table<T> = table.of();
            if !table.may_have_expired(error) {
                return Ok(false);
            }
            table.free_unique(error).await
        })
    }

    fn known_state(&self, learned: &Learned) -> Option<State<'_>> {
        // Indexes kept elsewhere and index entities are read every time;
        // so is the value a change feed records as the previous one.
        let previous =
            T::DESCRIPTOR.write_needs().previous && !matches!(self.write, RowWrite::Insert);
        if remote_slots::<T>() != 0 || any_listed::<T>() || previous {
            return None;
        }
        self.known_base(learned)
    }

    fn room(&self) -> usize {
        // The entity's row; for each index a delete and a write; an
        // outbox record.
        1 + 2 * local_slots::<T>() + usize::from(remote_slots::<T>() != 0)
    }

    fn state<'a>(
        &'a self,
        backend: &'a Arc<dyn TableBackend>,
        table: &'a str,
        learned: &'a Learned,
    ) -> BoxFuture<'a, Result<State<'a>>> {
        Box::pin(self.read_state(backend, table, learned))
    }

    fn spans(&self) -> Option<(&str, &str)> {
        (remote_slots::<T>() != 0).then(|| self.keys())
    }

    fn change(&self) -> Option<super::ChangeOf<'_>> {
        if !T::DESCRIPTOR.write_needs().changes {
            return None;
        }
        Some(super::ChangeOf {
            op: self.write.name(),
            row: &self.entity,
        })
    }

    fn plan(
        &self,
        state: State<'_>,
        learned: &Learned,
        at: DateTime,
        out: &mut Planned,
    ) -> Result<bool> {
        let (pk, rk) = self.keys();
        if !Self::needs_state() {
            // The row alone, as the caller asked for it.
            let entity: &Entity = &self.entity;
            out.push(self.write.operation(entity.clone()), Role::Row);
            return Ok(false);
        }
        if let Some(current) = &state.current
            && T::DESCRIPTOR.write_needs().previous
        {
            out.feed.previous.push((out.write, current.entity.clone()));
        }
        let State {
            current,
            old_keys,
            guard,
            retry,
            lists,
            remote,
        } = state;
        if let Some(external) = T::DESCRIPTOR.external_values() {
            let merge = self.write.is_merge();
            if let Some(current) = &current {
                let replaced = external.replaced(&current.entity, &self.entity, merge)?;
                out.discard.extend(replaced);
            }
            if let RowWrite::Upsert(mode) = &self.write {
                // An upsert of offloaded values replaces the version it
                // read, so that the values that version referred to can go;
                // its change says so.
                let op = match current {
                    Some(_) => RowWrite::Update(*mode, IfMatch::Any).name(),
                    None => RowWrite::Insert.name(),
                };
                out.feed.ops.push((out.write, op));
            }
        }
        // A renamed kind's entity found under a previous kind's RowKey: the
        // transaction moves it to its own, deleting the row found there.
        let renamed: Option<&str> = current
            .as_ref()
            .map(|current| current.entity.row_key.as_str())
            .filter(|stored| *stored != rk);
        let new_row = self.new_row(current.as_deref(), remote.as_deref());
        let record = remote
            .as_ref()
            .map(|remote| self.remote_record(remote, new_row.as_ref(), at));
        let new_keys = self.new_keys(new_row.as_ref())?;
        let guard_match = guard.map(|etag| IfMatch::ETag(etag.into_owned()));
        // A merge planned without reading (no index value moves): the
        // entity and its index rows are merged with the values sent.
        let merge_in_place =
            current.is_none() && matches!(self.write, RowWrite::Update(UpdateMode::Merge, _));
        // The index rows first, from the row, which the entity's own
        // operation then takes.
        IndexRows {
            pk,
            rk,
            renamed,
            old_keys: old_keys.as_deref(),
            new_keys: new_keys.as_deref(),
            lists: &lists,
            learned,
            new_row: new_row.as_ref(),
            merge_in_place,
        }
        .plan::<T>(out)?;
        let parts = current.as_ref().map_or(0, |c| c.parts);
        if let Some(stored) = renamed {
            Self::plan_renamed(pk, stored, parts, guard_match, new_row, out)?;
        } else if let Some(rule) = T::DESCRIPTOR.rows {
            plan_parts(rule, (pk, rk), parts, guard_match, new_row, out)?;
        } else {
            plan_row((pk, rk), guard_match, new_row, merge_in_place, out);
        }
        if let Some(record) = record {
            out.push(BatchOperation::Insert(record), Role::Other);
        }
        Ok(retry)
    }

    fn claim<'a>(
        &'a self,
        backend: &'a Arc<dyn TableBackend>,
        table: &'a str,
        index: usize,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<ETag>>> {
        Box::pin(super::claim_unique::<T>(
            backend.as_ref(),
            table,
            index,
            key,
            self.keys(),
        ))
    }
}

/// Each slot of `T`'s companion rows kept in the entity's partition, with
/// the part that keeps it.
pub(super) fn local_slots_of<T: TableEntity>()
-> impl Iterator<Item = (usize, &'static dyn CompanionRows)> {
    companions::<T>()
        .into_iter()
        .flat_map(|rows| (0..rows.local()).map(move |i| (i, rows)))
}

/// Whether a local slot of `T` is shared as a list (an index entity), whose
/// rows are read and changed under their ETag by every write.
pub(super) fn any_listed<T: TableEntity>() -> bool {
    companions::<T>()
        .is_some_and(|rows| (0..rows.local()).any(|i| rows.sharing(i) == Sharing::Listed))
}
