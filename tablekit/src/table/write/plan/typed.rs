//! The typed planner: the operations of one typed write (its row or wide
//! parts, its index rows and index entities, the outbox record of its
//! indexes kept elsewhere, a renamed kind's old row), from the state it
//! replaces.

use std::borrow::Cow;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Learned, Pending, Planned, RemoteState, Role, State, StoredList, Typed};
use crate::backend::{BatchOperation, TableBackend, UpdateMode};
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::ext::TableBackendExt;
use crate::schema::{CompanionRows, Sharing, TableEntity, companions, local_slots, remote_slots};
use crate::table::Current;
use crate::table::Table;
use crate::table::write::RowWrite;
use crate::{pending, schema};

impl<T: TableEntity> Typed<'_, T> {
    /// Whether the write needs to know the stored state: a wide entity's
    /// parts, an entity's index rows.
    fn needs_state() -> bool {
        T::DESCRIPTOR.wide()
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

    /// The row a merge of this write over `current` leaves.
    fn merged_over(&self, current: &Current) -> Entity {
        let (pk, rk) = self.keys();
        let mut merged = Entity::new(pk, rk);
        // Overlays the write's properties on the stored ones, as a merge does.
        merged.properties = current.entity.properties.clone();
        for (name, value) in self.entity.properties.clone() {
            merged.properties.insert(name, value);
        }
        merged
    }

    /// The state, with the index entities the write changes.
    async fn read_state(
        &self,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        learned: &Learned,
    ) -> Result<State<'_>> {
        let mut state = self.base_state(backend, table, learned).await?;
        if let Some(rows) = companions::<T>().filter(|rows| rows.remote() != 0) {
            let remote = self.remote_state(rows, backend, table, &state).await?;
            state.remote = Some(Box::new(remote));
        }
        if !any_listed::<T>() {
            return Ok(state);
        }
        let (pk, rk) = self.keys();
        let new_keys = match (&self.write, &state.current) {
            (RowWrite::Delete(_), _) => None,
            _ if self.new_keys.is_some() => self.new_keys.as_deref().map(<[String]>::to_vec),
            (
                RowWrite::Update(UpdateMode::Merge, _) | RowWrite::Upsert(UpdateMode::Merge),
                Some(current),
            ) => Some(schema::local_keys(
                &schema::read_for_keys::<T>(&self.merged_over(current))?,
                rk,
            )?),
            _ => Some(schema::local_keys(
                &schema::read_for_keys::<T>(&self.entity)?,
                rk,
            )?),
        };
        // A renamed kind's entity moving to its own RowKey changes its entry
        // in an index entity even where the value stays.
        let renamed = state
            .current
            .as_ref()
            .is_some_and(|current| current.entity.row_key != rk);
        for (i, rows) in local_slots_of::<T>() {
            if rows.sharing(i) != Sharing::Listed {
                continue;
            }
            // (An empty key: no row, for a value that is `None`.)
            let old = state
                .old_keys
                .as_ref()
                .and_then(|keys| keys.get(i))
                .filter(|key| !key.is_empty())
                .cloned();
            let new = new_keys
                .as_ref()
                .and_then(|keys| keys.get(i))
                .filter(|key| !key.is_empty())
                .cloned();
            if old == new && !renamed {
                continue;
            }
            let same = old == new;
            for key in [old, (!same).then_some(new).flatten()]
                .into_iter()
                .flatten()
            {
                let row = backend.try_get_entity(table, pk, &key).await?;
                let stored = row.map(|row| {
                    let etag = row.etag.clone().unwrap_or_else(|| ETag::new(""));
                    (etag, pending::lists::list_members(&row))
                });
                state.lists.retain(|(k, _)| *k != key);
                state.lists.push((key, stored));
            }
        }
        Ok(state)
    }

    /// The value the write leaves, `None` for a delete.
    fn new_value(&self, current: Option<&Current>) -> Result<Option<T>> {
        Ok(match (&self.write, current) {
            (RowWrite::Delete(_), _) => None,
            (
                RowWrite::Update(UpdateMode::Merge, _) | RowWrite::Upsert(UpdateMode::Merge),
                Some(current),
            ) => Some(schema::read_for_keys::<T>(&self.merged_over(current))?),
            _ => Some(schema::read_for_keys::<T>(&self.entity)?),
        })
    }

    /// The sequence number of this write and the RowKeys of its rows in
    /// the indexes kept elsewhere: one above the stored entity's, and above
    /// the fence of every row it newly writes (a row an earlier entity with
    /// these keys may have left a fence on).
    async fn remote_state(
        &self,
        rows: &'static dyn CompanionRows,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        state: &State<'_>,
    ) -> Result<RemoteState> {
        let (pk, rk) = self.keys();
        let current = state.current.as_deref();
        let old_value = current
            .map(|current| schema::read_for_keys::<T>(&current.entity))
            .transpose()?;
        let new_value = self.new_value(current)?;
        let keys = |value: &Option<T>| -> Result<Vec<Option<String>>> {
            (0..rows.remote())
                .map(|i| {
                    // An empty key: an optional value that is `None`, no row.
                    value
                        .as_ref()
                        .map(|v| schema::remote_key(v, i, rk))
                        .transpose()
                        .map(|key| key.filter(|key| !key.is_empty()))
                })
                .collect()
        };
        let (old, new) = (keys(&old_value)?, keys(&new_value)?);
        let mut seq = match current {
            Some(current) => pending::seq_of(&current.entity),
            // No row to carry the number: an earlier life of the entity may
            // have left records whose steps are still to come.
            None => pending::pending_records(backend.as_ref(), table, pk, rk)
                .await?
                .iter()
                .map(|record| record.seq)
                .max()
                .unwrap_or(0),
        };
        // The fences of the rows it newly writes, read at once.
        let fences = (0..rows.remote()).filter_map(|i| {
            let key = new[i].as_ref()?;
            (old[i].as_ref() != Some(key)).then(|| {
                let (index_table, partition, fence) = rows.remote_place(i, table, pk, key, rk);
                async move {
                    pending::read_fence(backend.as_ref(), &index_table, &partition, &fence).await
                }
            })
        });
        for fence in futures::future::try_join_all(fences).await? {
            seq = seq.max(fence);
        }
        Ok(RemoteState {
            rows,
            table: table.to_owned(),
            seq: seq + 1,
            old,
            new,
        })
    }

    /// The outbox record of the steps of the indexes kept elsewhere, and
    /// the sequence number the entity's row takes.
    fn remote_record(
        &self,
        remote: &RemoteState,
        new_row: Option<&Entity>,
        at: DateTime,
    ) -> Entity {
        let (pk, rk) = self.keys();
        let steps = remote.rows.remote_steps(
            &remote.table,
            (pk, rk),
            remote.seq,
            &remote.old,
            &remote.new,
            new_row,
            T::DESCRIPTOR.kind_properties,
        );
        let kind = remote.rows.record_kind();
        pending::record_row(&remote.table, pk, rk, remote.seq, at, kind, &steps)
    }

    /// The entity's own state when it is known without reading: nothing
    /// is needed, or the write is an insert, or the caller holds the
    /// version it writes over with its index rows.
    fn known_base(&self, learned: &Learned) -> Option<State<'_>> {
        if !Self::needs_state() {
            return Some(State::none(None));
        }
        // A renamed kind's entity may lie under a previous kind's RowKey,
        // even for an insert: it is always looked for.
        if !T::DESCRIPTOR.previous_kinds.is_empty() {
            return None;
        }
        // A merge that moves no index value needs nothing stored: its
        // index rows are merged with the same values as the entity.
        let merge_in_place = matches!(
            &self.write,
            RowWrite::Update(UpdateMode::Merge, IfMatch::ETag(_))
        ) && !learned.read
            && self.new_keys.is_some()
            && self.new_keys.as_deref() == self.known.as_deref();
        let use_known = !T::DESCRIPTOR.wide()
            && remote_slots::<T>() == 0
            && (merge_in_place
                || matches!(
                    &self.write,
                    RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(_))
                        | RowWrite::Delete(IfMatch::ETag(_))
                ));
        match (&self.write, &self.known) {
            (RowWrite::Insert, _) => Some(State::none(None)),
            (
                RowWrite::Update(_, IfMatch::ETag(etag)) | RowWrite::Delete(IfMatch::ETag(etag)),
                Some(keys),
            ) if use_known => Some(State {
                old_keys: Some(Cow::Borrowed(keys)),
                ..State::none(Some(Cow::Borrowed(etag)))
            }),
            _ => None,
        }
    }

    /// The entity's own state: what is stored, or what the caller knows.
    async fn base_state(
        &self,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        learned: &Learned,
    ) -> Result<State<'_>> {
        if let Some(state) = self.known_base(learned) {
            return Ok(state);
        }
        let (pk, rk) = (
            self.entity.partition_key.as_str(),
            self.entity.row_key.as_str(),
        );
        let reader: Table<T> = Table::from_arc(Arc::clone(backend), table);
        let current = reader.read_current(pk, rk).await?;
        let expected = match &self.write {
            RowWrite::Update(_, if_match) | RowWrite::Delete(if_match) => Some(if_match),
            _ => None,
        };
        let Some(current) = current else {
            if expected.is_some() {
                return Err(self.error(table, |table, partition_key, row_key| {
                    Error::EntityNotFound {
                        table,
                        partition_key,
                        row_key,
                    }
                }));
            }
            return Ok(State {
                current: None,
                old_keys: None,
                guard: None,
                retry: true,
                lists: Vec::new(),
                remote: None,
            });
        };
        // Only a renamed kind's insert reads: it finds its entity under a
        // previous kind's RowKey.
        if matches!(self.write, RowWrite::Insert) {
            return Err(self.error(table, |table, partition_key, row_key| {
                Error::EntityAlreadyExists {
                    table,
                    partition_key,
                    row_key,
                }
            }));
        }
        if let Some(IfMatch::ETag(expected)) = expected
            && *expected != current.etag
        {
            return Err(self.error(table, |table, partition_key, row_key| {
                Error::PreconditionFailed {
                    table,
                    partition_key,
                    row_key,
                }
            }));
        }
        let keys = if local_slots::<T>() == 0 {
            Vec::new()
        } else {
            // Under the RowKey the entity lies at (a previous kind's, for a
            // renamed kind's row not moved yet).
            let stored: T = schema::read_for_keys(&current.entity)?;
            schema::local_keys(&stored, &current.entity.row_key)?
        };
        Ok(State {
            guard: Some(Cow::Owned(current.etag.clone())),
            old_keys: Some(Cow::Owned(keys)),
            current: Some(Box::new(current)),
            retry: !matches!(expected, Some(IfMatch::ETag(_))),
            lists: Vec::new(),
            remote: None,
        })
    }
}

impl<T: TableEntity> Typed<'_, T> {
    /// The rows of an entity found under a previous kind's RowKey (`stored`):
    /// they go, guarded as the write is, and the entity's rows under its own
    /// RowKey are inserted.
    fn plan_renamed(
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
                Role::Entity
            };
            out.push(operation, role);
        }
        for (n, operation) in inserts.into_iter().enumerate() {
            out.push(operation, if n == 0 { Role::Row } else { Role::Entity });
        }
        Ok(())
    }
}

/// Slot `i`'s RowKey in `keys`; an empty key stands for no row (an optional
/// value that is `None`).
fn slot_key(keys: Option<&[String]>, i: usize) -> Option<&String> {
    keys.and_then(|keys| keys.get(i))
        .filter(|key| !key.is_empty())
}

/// What the index rows of one write in the entity's partition are planned
/// from.
struct IndexRows<'p> {
    pk: &'p str,
    rk: &'p str,
    /// The previous kind's RowKey the entity was found under, if any.
    renamed: Option<&'p str>,
    /// Each slot's RowKey before and after the write (empty: no row).
    old_keys: Option<&'p [String]>,
    new_keys: Option<&'p [String]>,
    /// The index entities the write changes, as stored.
    lists: &'p [(String, Option<StoredList>)],
    learned: &'p Learned,
    /// The entity's row after the write (`None`: a delete).
    new_row: Option<&'p Entity>,
    /// A merge planned without reading: index rows are merged too.
    merge_in_place: bool,
}

impl IndexRows<'_> {
    /// The operations of every index slot of `T` kept in the entity's
    /// partition.
    fn plan<T: TableEntity>(&self, out: &mut Planned) -> Result<()> {
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

    /// The index entities of the old and the new value of a listed slot:
    /// this entity leaves one and joins the other (or, moving to its own
    /// RowKey, changes its entry in the one it stays in), each guarded by
    /// its own ETag.
    fn plan_list(
        &self,
        rows: &dyn CompanionRows,
        i: usize,
        (old, new): (Option<&String>, Option<&String>),
        kind_properties: bool,
        out: &mut Planned,
    ) -> Result<()> {
        if old == new && self.renamed.is_none() {
            return Ok(());
        }
        let (pk, rk) = (self.pk, self.rk);
        let leaving = self.renamed.unwrap_or(rk);
        let changes = if old == new {
            [(old, true, true), (None, false, false)]
        } else {
            [(old, true, false), (new, false, true)]
        };
        for (key, leaves, joins) in changes {
            let Some(key) = key else { continue };
            let stored = self
                .lists
                .iter()
                .find_map(|(k, stored)| (k == key).then(|| stored.clone()))
                .flatten();
            let mut members = stored.as_ref().map(|(_, m)| m.clone()).unwrap_or_default();
            if leaves && let Ok(at) = members.binary_search_by(|m| m.as_str().cmp(leaving)) {
                members.remove(at);
            }
            if joins && let Err(at) = members.binary_search_by(|m| m.as_str().cmp(rk)) {
                members.insert(at, rk.to_owned());
            }
            let operation = match (stored, members.is_empty()) {
                (None, true) => continue,
                (None, false) => {
                    BatchOperation::Insert(rows.list_row(i, pk, key, &members, kind_properties)?)
                }
                (Some((etag, _)), true) => BatchOperation::Delete {
                    partition_key: pk.to_owned(),
                    row_key: key.clone(),
                    if_match: IfMatch::ETag(etag),
                },
                (Some((etag, _)), false) => BatchOperation::Update {
                    entity: rows.list_row(i, pk, key, &members, kind_properties)?,
                    mode: UpdateMode::Replace,
                    if_match: IfMatch::ETag(etag),
                },
            };
            out.push(operation, Role::List);
        }
        Ok(())
    }

    /// The index row of a slot that is not listed: the old one deleted when
    /// the value moves, the new one written (over a row it takes over, or
    /// inserted where the value is its alone).
    fn plan_row(
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

impl<T: TableEntity> Pending for Typed<'_, T> {
    fn keys(&self) -> (&str, &str) {
        (&self.entity.partition_key, &self.entity.row_key)
    }

    fn known_state(&self, learned: &Learned) -> Option<State<'_>> {
        // Indexes kept elsewhere and index entities are read every time.
        if remote_slots::<T>() != 0 || any_listed::<T>() {
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

    fn plan(
        &self,
        state: State<'_>,
        learned: &Learned,
        at: DateTime,
        out: &mut Planned,
    ) -> Result<bool> {
        let (pk, rk) = self.keys();
        let entity: &Entity = &self.entity;
        if !Self::needs_state() {
            // The row alone, as the caller asked for it.
            out.push(self.write.operation(entity.clone()), Role::Row);
            return Ok(false);
        }
        let State {
            current,
            old_keys,
            guard,
            retry,
            lists,
            remote,
        } = state;
        // A renamed kind's entity found under a previous kind's RowKey: the
        // transaction moves it to its own, deleting the row found there.
        let renamed: Option<&str> = current
            .as_ref()
            .map(|current| current.entity.row_key.as_str())
            .filter(|stored| *stored != rk);
        // The row to store.
        let new_row = match (&self.write, &current) {
            (RowWrite::Delete(_), _) => None,
            (
                RowWrite::Update(UpdateMode::Merge, _) | RowWrite::Upsert(UpdateMode::Merge),
                Some(current),
            ) => Some(self.merged_over(current)),
            _ => Some(entity.clone()),
        };
        // The row carries the write's sequence number, for the next one.
        let new_row = match (new_row, &remote) {
            (Some(mut row), Some(remote)) => {
                row.properties.insert(pending::SEQ_PROPERTY, remote.seq);
                Some(row)
            }
            (row, _) => row,
        };
        let record = remote
            .as_ref()
            .map(|remote| self.remote_record(remote, new_row.as_ref(), at));
        let new_keys: Option<Cow<'_, [String]>> = match (&new_row, local_slots::<T>() == 0) {
            (Some(_), false) if self.new_keys.is_some() => {
                self.new_keys.as_deref().map(Cow::Borrowed)
            }
            (Some(row), false) => {
                let value: T = schema::read_for_keys(row)?;
                Some(Cow::Owned(schema::local_keys(&value, rk)?))
            }
            (Some(_), true) => Some(Cow::Owned(Vec::new())),
            (None, _) => None,
        };
        // The entity's own operations.
        let guard_match = guard.map(|etag| IfMatch::ETag(etag.into_owned()));
        // A merge planned without reading (no index value moves): the
        // entity and its index rows are merged with the values sent.
        let merge_in_place =
            current.is_none() && matches!(self.write, RowWrite::Update(UpdateMode::Merge, _));
        let row_mode = if merge_in_place {
            UpdateMode::Merge
        } else {
            UpdateMode::Replace
        };
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
            let operations = match new_row {
                Some(row) => {
                    let bookkeeping = [schema::KIND_PROPERTY, schema::VERSION_PROPERTY];
                    rule.write(row, &bookkeeping, parts, guard_match)?
                }
                None => rule.delete(pk, rk, parts, guard_match.unwrap_or(IfMatch::Any)),
            };
            // The first part's ETag is the write's.
            for (n, operation) in operations.into_iter().enumerate() {
                out.push(operation, if n == 0 { Role::Row } else { Role::Entity });
            }
        } else {
            let operation = match (new_row, guard_match) {
                (Some(row), None) => BatchOperation::Insert(row),
                (Some(row), Some(if_match)) => BatchOperation::Update {
                    entity: row,
                    mode: row_mode,
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
        if let Some(record) = record {
            out.push(BatchOperation::Insert(record), Role::Entity);
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
        Box::pin(async move {
            let reader: Table<T> = Table::from_arc(Arc::clone(backend), table);
            let (pk, rk) = self.keys();
            reader.claim_unique(index, key, pk, rk).await
        })
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
