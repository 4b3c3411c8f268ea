//! Writes that span rows of one partition: a wide entity's parts, and the
//! rows kept beside an entity ([`CompanionRows`]: an index's rows), sent as
//! one entity group transaction guarded by the ETag of the entity's row.
//! The planner knows those rows only through their descriptor part: how
//! many slots, how each is shared, how its rows are formed.
//!
//! The transaction is planned from the entity's current state: the rows it
//! occupies now (its parts, its index rows) and the rows it will occupy.
//! That state is read first, unless the caller holds it (a [`Loaded`]
//! replaced or deleted as it was read, whose index rows are known), and the
//! ETag read guards the transaction, so a writer that raced this one makes it
//! fail as a whole and nothing is half written.
//!
//! Repairs happen on the way: an old index row found missing is not deleted
//! again; a unique index row that names no entity holding its value (left by
//! a writer other than tablekit) is taken over under its own ETag.
//!
//! [`Loaded`]: super::Loaded

use std::borrow::Cow;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::future::BoxFuture;
use smallvec::SmallVec;

use super::rows::RowWrite;
use super::{Table, UPDATE_ATTEMPTS};
use crate::backend::{BatchOperation, GetOptions, TableBackend, UpdateMode};
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::ext::{TableBackendExt, send_operations, too_many_operations};
use crate::pending::{self, lists::ROW_PROPERTY};
use crate::schema::{
    self, CompanionRows, Sharing, TableEntity, companions, local_slots, remote_slots,
};
use crate::validate::limits::MAX_BATCH_OPERATIONS;

/// The stored state of an entity.
pub(crate) struct Current {
    /// The logical row (a wide entity's parts joined), with its ETag.
    pub(crate) entity: Entity,
    /// The ETag that guards a write over it.
    pub(crate) etag: ETag,
    /// How many part rows a wide entity has (0 otherwise).
    pub(crate) parts: usize,
}

/// What an operation of a planned transaction is for. A companion row's
/// key is the operation's RowKey.
#[derive(Debug, Clone, Copy)]
pub(super) enum Role {
    /// The entity's row, or a wide entity's first part: its ETag is the
    /// write's.
    Row,
    /// Another part of a wide entity, or an outbox record.
    Entity,
    /// Deletes an old companion row (an index row).
    CompanionDelete,
    /// Writes a row of local slot `slot` (an index row).
    CompanionWrite(usize),
    /// Changes a [listed](Sharing::Listed) row (an index entity), guarded by
    /// its ETag.
    List,
}

impl<T: TableEntity> Table<T> {
    /// The entity's stored state, read with one request: a point read, or
    /// for a wide entity one query over its parts. For a renamed kind whose
    /// entity is not found under its RowKey, the RowKeys it had under each
    /// previous kind are read in turn: the state found there is the
    /// entity's (its `entity.row_key` tells where it lies).
    pub(crate) async fn read_current(&self, pk: &str, rk: &str) -> Result<Option<Current>> {
        let found = self.read_current_at(pk, rk).await?;
        if found.is_some() || T::DESCRIPTOR.previous_kinds.is_empty() {
            return Ok(found);
        }
        for previous in T::DESCRIPTOR.previous_row_keys(rk) {
            if let Some(current) = Box::pin(self.read_current_at(pk, &previous)).await? {
                return Ok(Some(current));
            }
        }
        Ok(None)
    }

    /// [`read_current`](Table::read_current) at exactly `(pk, rk)`.
    async fn read_current_at(&self, pk: &str, rk: &str) -> Result<Option<Current>> {
        if let Some(rule) = T::DESCRIPTOR.rows {
            let query = crate::backend::Query::new().filter(rule.rows_filter(pk, rk));
            let rows = self.backend.query_all(&self.name, query).await?;
            return Ok(rule.join(rk, rows)?.and_then(|(entity, parts)| {
                let etag = entity.etag.clone()?;
                Some(Current {
                    entity,
                    etag,
                    parts,
                })
            }));
        }
        match self
            .backend
            .get_entity(&self.name, pk, rk, &GetOptions::default())
            .await
        {
            Ok(entity) => {
                let etag = entity.etag.clone().unwrap_or_else(|| ETag::new(""));
                Ok(Some(Current {
                    entity,
                    etag,
                    parts: 0,
                }))
            }
            Err(Error::EntityNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `entity` (the row as `write` sends it) with its parts and index
    /// rows in one transaction. `known` holds the RowKeys of the index rows
    /// of the version `write`'s ETag names, when the caller knows them.
    pub(super) async fn write_planned(
        &self,
        entity: &Entity,
        write: RowWrite,
        hint: super::rows::IndexHint<'_>,
    ) -> Result<ETag> {
        let pending = Typed::<T> {
            entity: Cow::Borrowed(entity),
            write,
            known: hint.old.map(Cow::Borrowed),
            new_keys: hint.new.map(Cow::Borrowed),
            _marker: PhantomData,
        };
        let writes: [&dyn Pending; 1] = [&pending];
        match run(&self.backend, &self.name, &writes, self.clock.as_ref()).await {
            Ok(etags) => {
                if remote_slots::<T>() != 0 {
                    self.finish_after_commit(&entity.partition_key, &entity.row_key)
                        .await;
                }
                Ok(etags
                    .into_iter()
                    .next()
                    .flatten()
                    .unwrap_or_else(|| ETag::new("")))
            }
            // The caller wrote one entity, not a batch: report the cause.
            Err(Error::BatchFailed { source, .. }) => Err(*source),
            Err(e) => Err(e),
        }
    }

    /// Deletes the entity `(pk, rk)` at version `etag` with its index rows
    /// `keys`, in one transaction built straight from them: the common
    /// delete, through a [`Loaded`] of a type whose indexes all live in its
    /// partition (no index entities, no parts, no blobs, no indexes kept
    /// elsewhere). It sends what the planned path would, without planning.
    /// `None` when it does not apply, or when an index row turned out to be
    /// gone already: the planned path then repairs as it goes (one request
    /// more, on that rare path).
    pub(super) async fn delete_known(
        &self,
        pk: &str,
        rk: &str,
        etag: &ETag,
        keys: Option<&[String]>,
    ) -> Option<Result<()>> {
        let simple = T::DESCRIPTOR.writable()
            && !T::DESCRIPTOR.wide()
            && T::DESCRIPTOR.previous_kinds.is_empty()
            && remote_slots::<T>() == 0
            && !T::DESCRIPTOR.write_needs().blobs
            && !any_listed::<T>();
        let keys = keys.filter(|keys| simple && keys.len() == local_slots::<T>())?;
        let mut operations = Vec::with_capacity(1 + keys.len());
        operations.push(BatchOperation::Delete {
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
            if_match: IfMatch::ETag(etag.clone()),
        });
        operations.extend(keys.iter().filter(|key| !key.is_empty()).map(|key| {
            BatchOperation::Delete {
                partition_key: pk.to_owned(),
                row_key: key.clone(),
                if_match: IfMatch::Any,
            }
        }));
        let sent = send_operations(self.backend.as_ref(), &self.name, &operations).await;
        Some(match sent {
            Ok(_) => Ok(()),
            // The entity's row, in the caller's terms.
            Err(Error::BatchFailed { index: 0, source }) => {
                Err(restated(*source, &self.name, (pk, rk)))
            }
            // An index row already gone: the planned path leaves it out.
            Err(Error::BatchFailed { source, .. })
                if matches!(*source, Error::EntityNotFound { .. }) =>
            {
                return None;
            }
            Err(Error::BatchFailed { source, .. }) => Err(*source),
            Err(e) => Err(e),
        })
    }

    /// Decides about a row `key` of the [exclusive](Sharing::Exclusive)
    /// slot `i` (a unique index) that already exists when the entity
    /// `(pk, rk)` wants it: its own row, or a row naming an entity that does
    /// not hold the value, is taken over under the returned ETag; a row of
    /// another entity holding the value is a
    /// [`UniqueViolation`](Error::UniqueViolation). `None`: the row is gone.
    pub(super) async fn claim_unique(
        &self,
        i: usize,
        key: &str,
        pk: &str,
        rk: &str,
    ) -> Result<Option<ETag>> {
        let Some(rows) = companions::<T>() else {
            return Ok(None);
        };
        let row = match self
            .backend
            .get_entity(
                &self.name,
                pk,
                key,
                &GetOptions::default().select([ROW_PROPERTY]),
            )
            .await
        {
            Ok(row) => row,
            Err(Error::EntityNotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let etag = row.etag.clone().unwrap_or_else(|| ETag::new(""));
        let holder = match row.properties.get(ROW_PROPERTY) {
            Some(crate::value::Value::String(holder)) => holder.clone(),
            _ => return Ok(Some(etag)),
        };
        if holder == rk {
            return Ok(Some(etag));
        }
        let holds = match self.read_current(pk, &holder).await? {
            Some(current) => match schema::read_for_keys::<T>(&current.entity) {
                Ok(value) => schema::local_key(&value, i, &holder)? == key,
                // Not an entity of this type: it cannot hold the value.
                Err(_) => false,
            },
            None => false,
        };
        if holds {
            return Err(Error::UniqueViolation {
                table: self.name.to_string(),
                partition_key: pk.to_owned(),
                index: rows.name(i),
                value: rows.value_of(i, key).to_owned(),
                held_by: holder,
            });
        }
        Ok(Some(etag))
    }
}

/// What earlier attempts of a transaction learned about one write's index
/// rows: old ones found missing, unique ones to take over under their ETag.
/// (A few rows at most, one per index: lists, which cost nothing to make.)
#[derive(Default)]
pub(super) struct Learned {
    missing: Vec<String>,
    take_over: Vec<(String, ETag)>,
    /// An index row a merge planned without reading was not there: read.
    read: bool,
}

impl Learned {
    fn take_over(&self, key: &str) -> Option<&ETag> {
        self.take_over
            .iter()
            .find_map(|(k, etag)| (k == key).then_some(etag))
    }
}

/// An index entity as stored: its ETag and the RowKeys it lists.
type StoredList = (ETag, Vec<String>);

/// The state a write replaces, as planned: what is stored, the RowKeys of
/// its index rows, the ETag that guards the write, and whether a lost race
/// may be tried again. (The stored row and the remote state are boxed: a
/// write that knows its state carries a small struct, not their room.)
pub(super) struct State<'a> {
    current: Option<Box<Current>>,
    old_keys: Option<Cow<'a, [String]>>,
    /// (Lent by the write when it holds it: cloned once, into the
    /// operation.)
    guard: Option<Cow<'a, ETag>>,
    retry: bool,
    /// The index entities the write changes, as stored (`None`: absent).
    /// (A list, not a map: two rows per index at most, and an empty list
    /// costs nothing to make.)
    lists: Vec<(String, Option<StoredList>)>,
    /// What the steps of the indexes kept elsewhere need.
    remote: Option<Box<RemoteState>>,
}

/// The companion rows of a write kept in other partitions or tables (the
/// indexes kept elsewhere): the part that keeps them, the write's sequence
/// number, and each slot's old and new RowKey.
pub(super) struct RemoteState {
    rows: &'static dyn CompanionRows,
    table: String,
    seq: i64,
    old: Vec<Option<String>>,
    new: Vec<Option<String>>,
}

/// The operations of a transaction, with the write each belongs to and what
/// it is for. Each write adds its own, one of them its [`Role::Row`].
pub(super) struct Planned {
    operations: Vec<BatchOperation>,
    /// Kept inline for a transaction of a few rows: one allocation less.
    owners: SmallVec<[(usize, Role); 8]>,
    /// The write adding operations now.
    write: usize,
}

impl Planned {
    fn with_capacity(room: usize) -> Planned {
        Planned {
            operations: Vec::with_capacity(room),
            owners: SmallVec::with_capacity(room),
            write: 0,
        }
    }

    fn push(&mut self, operation: BatchOperation, role: Role) {
        self.operations.push(operation);
        self.owners.push((self.write, role));
    }
}

/// One write of a transaction, its type erased.
pub(super) trait Pending: Send + Sync {
    /// The entity's keys.
    fn keys(&self) -> (&str, &str);
    /// What the write replaces, when it knows it without reading; `None`
    /// when [`state`](Pending::state) must read it. By default a write of a
    /// row alone: nothing stored is needed.
    fn known_state(&self, _learned: &Learned) -> Option<State<'_>> {
        Some(State::none(None))
    }
    /// How many operations the write plans, as far as is known before.
    fn room(&self) -> usize {
        1
    }
    /// Reads what the write replaces (or knows it without reading). By
    /// default nothing.
    fn state<'a>(
        &'a self,
        _backend: &'a Arc<dyn TableBackend>,
        _table: &'a str,
        _learned: &'a Learned,
    ) -> BoxFuture<'a, Result<State<'a>>> {
        Box::pin(async { Ok(State::none(None)) })
    }
    /// Adds the write's operations over `state` to `out`, its entity's row
    /// (or first part) as [`Role::Row`]; whether a lost race may be tried
    /// again. `at` is the time of
    /// the write (for an outbox record; read only when a write of the
    /// transaction records one).
    fn plan(
        &self,
        state: State<'_>,
        learned: &Learned,
        at: DateTime,
        out: &mut Planned,
    ) -> Result<bool>;
    /// The entity's keys, when its write records outbox steps to finish
    /// after the transaction.
    fn spans(&self) -> Option<(&str, &str)> {
        None
    }
    /// Decides about a unique index row this write found taken (see
    /// `claim_unique`). By default the write has none.
    fn claim<'a>(
        &'a self,
        _backend: &'a Arc<dyn TableBackend>,
        _table: &'a str,
        _index: usize,
        _key: &'a str,
    ) -> BoxFuture<'a, Result<Option<ETag>>> {
        Box::pin(async { Ok(None) })
    }
}

/// A typed write of an entity of type `T`.
pub(super) struct Typed<'a, T> {
    pub(super) entity: Cow<'a, Entity>,
    pub(super) write: RowWrite,
    /// The RowKeys of the index rows of the version the write's ETag names.
    pub(super) known: Option<Cow<'a, [String]>>,
    /// The RowKeys of the index rows of the value written (not of a merge
    /// of one field, whose other values are stored).
    pub(super) new_keys: Option<Cow<'a, [String]>>,
    pub(super) _marker: PhantomData<fn() -> T>,
}

/// A raw operation added to a typed batch.
pub(super) struct Raw(pub(super) BatchOperation);

impl State<'_> {
    /// Nothing stored is known or needed.
    fn none(guard: Option<Cow<'_, ETag>>) -> State<'_> {
        State {
            current: None,
            old_keys: None,
            guard,
            retry: false,
            lists: Vec::new(),
            remote: None,
        }
    }
}

impl Pending for Raw {
    fn keys(&self) -> (&str, &str) {
        self.0.keys()
    }
    fn plan(&self, _: State<'_>, _: &Learned, _: DateTime, out: &mut Planned) -> Result<bool> {
        out.push(self.0.clone(), Role::Row);
        Ok(false)
    }
}

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

/// Runs `writes` as one entity group transaction with every row they need
/// (parts, index rows), trying again where a write without an ETag of its
/// own lost a race. One ETag per write (`None` for a delete). A failure is
/// [`BatchFailed`](Error::BatchFailed) with the index of the write (not of
/// the row) in `writes`.
pub(super) async fn run(
    backend: &Arc<dyn TableBackend>,
    table: &str,
    writes: &[&(dyn Pending + '_)],
    clock: &dyn crate::clock::Clock,
) -> Result<Vec<Option<ETag>>> {
    check_writes(writes)?;
    // The time is for outbox records alone: not read for other writes.
    let at = if writes.iter().any(|w| w.spans().is_some()) {
        clock.now()
    } else {
        DateTime::MIN
    };
    // One write is the common case: it gets by without a list per write.
    let single = writes.len() == 1;
    let mut learned_one = [Learned::default()];
    let mut learned_many: Vec<Learned> = Vec::new();
    if !single {
        learned_many.resize_with(writes.len(), Learned::default);
    }
    let learned: &mut [Learned] = if single {
        &mut learned_one
    } else {
        &mut learned_many
    };
    let room: usize = writes.iter().map(|w| w.room()).sum();
    let mut last = None;
    for _ in 0..UPDATE_ATTEMPTS {
        let mut planned = Planned::with_capacity(room);
        // Whether each write may try again after a lost race.
        let retry = if let [write] = writes {
            let state = match write.known_state(&learned[0]) {
                Some(state) => state,
                None => write
                    .state(backend, table, &learned[0])
                    .await
                    .map_err(|e| e.in_batch(0))?,
            };
            let retry = write
                .plan(state, &learned[0], at, &mut planned)
                .map_err(|e| e.in_batch(0))?;
            Retry::One(retry)
        } else {
            // Boxed: a transaction of one write does not carry its room.
            Box::pin(plan_many(backend, table, writes, learned, at, &mut planned)).await?
        };
        let Planned {
            operations, owners, ..
        } = planned;
        if operations.len() > MAX_BATCH_OPERATIONS {
            return Err(too_many_operations(operations.len()));
        }
        let (at, source) = match send_operations(backend.as_ref(), table, &operations).await {
            Ok(etags) => return Ok(write_etags(etags, &owners, writes.len())),
            Err(Error::BatchFailed { index, source }) => (index, *source),
            Err(e) => return Err(e),
        };
        match failed(
            table,
            writes,
            &operations,
            &owners,
            &retry,
            learned,
            at,
            source,
        ) {
            Next::Fail(e) => return Err(e),
            Next::Retry(e) => last = Some(e),
            Next::Claim { w, index, key } => {
                if let Some(etag) = writes[w]
                    .claim(backend, table, index, &key)
                    .await
                    .map_err(|e| e.in_batch(w))?
                {
                    learned[w].take_over.retain(|(k, _)| *k != key);
                    learned[w].take_over.push((key, etag));
                }
                last = Some(precondition(table, writes[w], w));
            }
        }
    }
    Err(last.unwrap_or(Error::Transient {
        message: "the transaction made no attempt".into(),
    }))
}

/// One partition, each entity once: checked in the caller's terms.
fn check_writes(writes: &[&(dyn Pending + '_)]) -> Result<()> {
    let Some(first) = writes.first() else {
        return Err(crate::error::InvalidInput::BatchEmpty.into());
    };
    let (first_pk, _) = first.keys();
    for (index, write) in writes.iter().enumerate() {
        let (pk, rk) = write.keys();
        if pk != first_pk {
            return Err(crate::error::InvalidInput::BatchPartitionMismatch {
                index,
                expected: first_pk.to_owned(),
                found: pk.to_owned(),
            }
            .into());
        }
        if let Some(first) = writes[..index].iter().position(|w| w.keys().1 == rk) {
            return Err(crate::error::InvalidInput::BatchDuplicateEntity {
                first,
                index,
                row_key: rk.to_owned(),
            }
            .into());
        }
    }
    Ok(())
}

/// Whether each write of a transaction may try again after a lost race.
enum Retry {
    One(bool),
    Each(Vec<bool>),
}

/// Plans the writes of a transaction of several, their states read at once.
async fn plan_many(
    backend: &Arc<dyn TableBackend>,
    table: &str,
    writes: &[&(dyn Pending + '_)],
    learned: &[Learned],
    at: DateTime,
    planned: &mut Planned,
) -> Result<Retry> {
    let states = futures::future::try_join_all(writes.iter().zip(learned).enumerate().map(
        |(w, (write, learned))| async move {
            match write.known_state(learned) {
                Some(state) => Ok(state),
                None => write
                    .state(backend, table, learned)
                    .await
                    .map_err(|e| e.in_batch(w)),
            }
        },
    ))
    .await?;
    let mut retry = Vec::with_capacity(writes.len());
    for (w, (write, state)) in writes.iter().zip(states).enumerate() {
        planned.write = w;
        let retried = write
            .plan(state, &learned[w], at, planned)
            .map_err(|e| e.in_batch(w))?;
        retry.push(retried);
    }
    check_rows(&planned.operations, &planned.owners)?;
    Ok(Retry::Each(retry))
}

/// What a transaction does after the store refused one of its operations.
enum Next {
    /// Fails with this error.
    Fail(Error),
    /// Tries again; this error if it runs out of attempts.
    Retry(Error),
    /// A unique index row of write `w` is taken: see whose it is, then try
    /// again.
    Claim { w: usize, index: usize, key: String },
}

/// A write's keys, precondition failed, in the caller's terms.
fn precondition(table: &str, write: &(dyn Pending + '_), w: usize) -> Error {
    let (pk, rk) = write.keys();
    Error::PreconditionFailed {
        table: table.to_owned(),
        partition_key: pk.to_owned(),
        row_key: rk.to_owned(),
    }
    .in_batch(w)
}

/// A refusal of an entity's row (or part), restated in the caller's terms:
/// with the entity's table and keys. Any other error is returned as it is.
fn restated(source: Error, table: &str, (pk, rk): (&str, &str)) -> Error {
    let keys = || (table.to_owned(), pk.to_owned(), rk.to_owned());
    match source {
        Error::PreconditionFailed { .. } => {
            let (table, partition_key, row_key) = keys();
            Error::PreconditionFailed {
                table,
                partition_key,
                row_key,
            }
        }
        Error::EntityNotFound { .. } => {
            let (table, partition_key, row_key) = keys();
            Error::EntityNotFound {
                table,
                partition_key,
                row_key,
            }
        }
        Error::EntityAlreadyExists { .. } => {
            let (table, partition_key, row_key) = keys();
            Error::EntityAlreadyExists {
                table,
                partition_key,
                row_key,
            }
        }
        other => other,
    }
}

/// Decides what to do after operation `at` failed with `source`, learning
/// about the write's index rows on the way. Out of line and cold: the
/// common transaction never comes here, and its code stays compact.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn failed(
    table: &str,
    writes: &[&(dyn Pending + '_)],
    operations: &[BatchOperation],
    owners: &[(usize, Role)],
    retry: &Retry,
    learned: &mut [Learned],
    at: usize,
    source: Error,
) -> Next {
    let Some(&(w, role)) = owners.get(at) else {
        return Next::Fail(source);
    };
    let may_retry = match retry {
        Retry::One(retry) => *retry,
        Retry::Each(retry) => retry[w],
    };
    // The failed operation's row: for an index row, its key.
    let key = || operations[at].keys().1.to_owned();
    let write = writes[w];
    match (role, source) {
        (
            Role::Row | Role::Entity,
            Error::PreconditionFailed { .. }
            | Error::EntityAlreadyExists { .. }
            | Error::EntityNotFound { .. },
        ) if may_retry => Next::Retry(precondition(table, write, w)),
        (
            Role::Row | Role::Entity,
            source @ (Error::PreconditionFailed { .. }
            | Error::EntityAlreadyExists { .. }
            | Error::EntityNotFound { .. }),
        ) => Next::Fail(restated(source, table, write.keys()).in_batch(w)),
        (
            Role::List,
            Error::PreconditionFailed { .. }
            | Error::EntityAlreadyExists { .. }
            | Error::EntityNotFound { .. },
        ) => {
            // Another writer changed the index entity first: read it
            // again and retry.
            Next::Retry(precondition(table, write, w))
        }
        (Role::CompanionDelete, Error::EntityNotFound { .. }) => {
            learned[w].missing.push(key());
            Next::Retry(precondition(table, write, w))
        }
        (Role::CompanionWrite(index), Error::EntityAlreadyExists { .. }) => Next::Claim {
            w,
            index,
            key: key(),
        },
        (
            Role::CompanionWrite(_),
            Error::PreconditionFailed { .. } | Error::EntityNotFound { .. },
        ) => {
            // A row to take over changed or went, or a merge planned
            // without reading met a missing index row: look again, from
            // the stored entity.
            let key = key();
            learned[w].take_over.retain(|(k, _)| *k != key);
            learned[w].read = true;
            Next::Retry(precondition(table, write, w))
        }
        (_, source) => Next::Fail(source.in_batch(w)),
    }
}

/// Each write's ETag, its [`Role::Row`]'s (`None` for a delete), from the
/// ETags of the operations sent, in place: each write has one such row, in
/// the order of the writes, and every write has at least one operation, so
/// the row of write `w` is never before operation `w`.
fn write_etags(
    mut etags: Vec<Option<ETag>>,
    owners: &[(usize, Role)],
    writes: usize,
) -> Vec<Option<ETag>> {
    let mut next = 0;
    for (i, &(w, role)) in owners.iter().enumerate() {
        if w == next && matches!(role, Role::Row) {
            etags.swap(w, i);
            next += 1;
        }
    }
    etags.truncate(writes);
    for etag in &mut etags {
        if etag.as_ref().is_some_and(|e| e.as_str().is_empty()) {
            *etag = None;
        }
    }
    etags
}

/// Refuses two writes of one transaction that would touch the same row (an
/// index value two entities want, or one gives up and another takes), in
/// the caller's terms: the store refuses a transaction that names a row twice.
fn check_rows(operations: &[BatchOperation], owners: &[(usize, Role)]) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (operation, (w, _)) in operations.iter().zip(owners) {
        let rk = operation.keys().1;
        match seen.get(rk) {
            Some(&first) if first != *w => {
                return Err(crate::error::InvalidInput::BatchDuplicateEntity {
                    first,
                    index: *w,
                    row_key: rk.to_owned(),
                }
                .into());
            }
            _ => {
                seen.insert(rk, *w);
            }
        }
    }
    Ok(())
}

/// The outbox record of a move, written in the new partition beside the
/// moved entity: one step, which deletes the entity at its old keys. Its
/// RowKey number is above every record of the new keys, stored or planned
/// in the same transaction (the moved entity's own index record), so the
/// records never collide and finish in order.
pub(super) struct MoveRecord {
    /// The new partition, and the placeholder key `check_writes` sees.
    pub(super) keys: (String, String),
    /// The moved entity's new RowKey, which owns the record.
    pub(super) owner: String,
    /// The lowest number the record may take.
    pub(super) floor: i64,
    pub(super) step: pending::Step,
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

/// The outbox record of the rows a transaction puts elsewhere once it
/// commits ([`Transaction::then_put`](super::Transaction::then_put)): one
/// step per row, numbered by the time it is planned (the writer's clock),
/// so that of two puts of one row the later one stays, and a step applied
/// again changes nothing.
pub(super) struct ThenRecord {
    /// The transaction's table.
    pub(super) table: String,
    /// The transaction's partition, and the placeholder key `check_writes`
    /// sees.
    pub(super) keys: (String, String),
    /// The RowKey the record is filed under: the transaction's own, made
    /// up for it.
    pub(super) owner: String,
    /// Each row, with its table.
    pub(super) rows: Vec<(String, Entity)>,
}

impl ThenRecord {
    pub(super) fn new(table: &str, partition_key: &str, rows: Vec<(String, Entity)>) -> ThenRecord {
        let owner = format!("then|{:032x}", fastrand::u128(..));
        ThenRecord {
            table: table.to_owned(),
            keys: (partition_key.to_owned(), pending::records_prefix(&owner)),
            owner,
            rows,
        }
    }
}

impl Pending for ThenRecord {
    fn keys(&self) -> (&str, &str) {
        (&self.keys.0, &self.keys.1)
    }
    fn spans(&self) -> Option<(&str, &str)> {
        Some((&self.keys.0, &self.owner))
    }
    fn plan(&self, _: State<'_>, _: &Learned, at: DateTime, out: &mut Planned) -> Result<bool> {
        let steps: Vec<pending::Step> = self
            .rows
            .iter()
            .map(|(table, row)| pending::Step {
                table: table.clone(),
                partition_key: row.partition_key.clone(),
                fence: row.row_key.clone(),
                seq: at.ticks(),
                ops: vec![pending::StepOp::Put(row.clone())],
            })
            .collect();
        let row = pending::record_row(
            &self.table,
            &self.keys.0,
            &self.owner,
            1,
            at,
            pending::THEN,
            &steps,
        );
        out.push(BatchOperation::Insert(row), Role::Entity);
        Ok(false)
    }
}

/// The insert of a moved entity at its new keys. In its old partition, the
/// unique index rows the entity itself holds there (under its old RowKey)
/// are taken over: the delete of the old row leaves them.
pub(super) struct MovedInsert<'a, T> {
    pub(super) insert: Typed<'a, T>,
    /// The old RowKey, when the move stays in its partition.
    pub(super) from: Option<String>,
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
    /// (taken over by the entity's new row) are left.
    pub(super) async fn delete_as_step(
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
                (BatchOperation::Insert(record), Role::Entity)
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

/// The RowKeys of `value`'s index rows, for a write to plan with or a
/// [`Loaded`](super::Loaded) to carry; `None`
/// for a type without indexes (or keys that do not encode, which the write
/// reports when it plans).
pub(crate) fn new_index_keys<T: TableEntity>(value: &T, row_key: &str) -> Option<Vec<String>> {
    if local_slots::<T>() == 0 {
        return None;
    }
    schema::local_keys(value, row_key).ok()
}

/// Whether `T` keeps index rows beside its entities (so a [`Loaded`](super::Loaded)
/// carries their RowKeys).
pub(crate) fn has_index_rows<T: TableEntity>() -> bool {
    local_slots::<T>() != 0
}

/// Each slot of `T`'s companion rows kept in the entity's partition, with
/// the part that keeps it.
fn local_slots_of<T: TableEntity>() -> impl Iterator<Item = (usize, &'static dyn CompanionRows)> {
    companions::<T>()
        .into_iter()
        .flat_map(|rows| (0..rows.local()).map(move |i| (i, rows)))
}

/// Whether a local slot of `T` is shared as a list (an index entity), whose
/// rows are read and changed under their ETag by every write.
fn any_listed<T: TableEntity>() -> bool {
    companions::<T>()
        .is_some_and(|rows| (0..rows.local()).any(|i| rows.sharing(i) == Sharing::Listed))
}
