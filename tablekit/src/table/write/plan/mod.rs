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
//! The parts: `typed/` plans one typed write (its row or wide parts, index
//! rows, index entities, the record of its indexes kept elsewhere, a
//! renamed kind's old row; a file each) from the state `table/stored.rs`
//! reads; `run.rs` runs a transaction of planned writes, planning again
//! after a lost race or a lost answer; `moves.rs` and `then_put.rs` plan
//! the outbox records of a move and of a transaction's puts elsewhere.
//! This file holds what they share, and the entry points of `Table`.
//!
//! [`Loaded`]: super::Loaded

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::future::BoxFuture;
use smallvec::SmallVec;

use super::RowWrite;
use crate::backend::{BatchOperation, GetOptions, TableBackend};
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::exec::send_operations;
use crate::pending::lists::ROW_PROPERTY;
use crate::schema::{self, CompanionRows, TableEntity, companions, local_slots, remote_slots};
use crate::table::{Current, Table, current_of};

mod changes;
mod lane;
mod moves;
mod run;
mod then_put;
mod typed;

#[cfg(test)]
mod tests;

pub(in crate::table) use changes::ChangeOf;
pub(in crate::table) use moves::{MoveRecord, MovedInsert};
use run::restated;
pub(in crate::table) use run::run;
pub(in crate::table) use then_put::ThenRecord;
use typed::any_listed;

/// What an operation of a planned transaction is for. A companion row's
/// key is the operation's RowKey.
#[derive(Debug, Clone, Copy)]
pub(in crate::table) enum Role {
    /// The entity's row, or a wide entity's first part: its ETag is the
    /// write's.
    Row,
    /// Another row the write makes: a wide entity's later part, an outbox
    /// record, a renamed kind's old row.
    Other,
    /// Deletes an old companion row (an index row).
    CompanionDelete,
    /// Writes a row of local slot `slot` (an index row).
    CompanionWrite(usize),
    /// Changes a [listed](Sharing::Listed) row (an index entity), guarded by
    /// its ETag.
    List,
}

impl<T: TableEntity> Table<T> {
    /// Writes `entity` (the row as `write` sends it) with its parts and index
    /// rows in one transaction. `known` holds the RowKeys of the index rows
    /// of the version `write`'s ETag names, when the caller knows them.
    pub(in crate::table) async fn write_planned(
        &self,
        entity: &Entity,
        write: RowWrite,
        hint: super::row::IndexHint<'_>,
    ) -> Result<ETag> {
        // The common delete goes out as built from what the caller holds.
        if let RowWrite::Delete(IfMatch::ETag(etag)) = &write
            && let Some(deleted) = self
                .delete_known(&entity.partition_key, &entity.row_key, etag, hint.old)
                .await
        {
            return deleted.map(|()| ETag::new(""));
        }
        let pending = Typed::<T> {
            entity: Cow::Borrowed(entity),
            write,
            known: hint.old.map(Cow::Borrowed),
            new_keys: hint.new.map(Cow::Borrowed),
            _marker: PhantomData,
        };
        let writes: [&dyn Pending; 1] = [&pending];
        let mut replaced = Vec::new();
        let clock = self.clock.as_ref();
        match run(&self.backend, &self.name, &writes, clock, &mut replaced).await {
            Ok(etags) => {
                if remote_slots::<T>() != 0 {
                    self.finish_after_commit(&entity.partition_key, &entity.row_key)
                        .await;
                }
                if let (Some(target), Some(external), false) = (
                    &self.blobs,
                    T::DESCRIPTOR.external_values(),
                    replaced.is_empty(),
                ) {
                    external.discard(target, &replaced).await;
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
    async fn delete_known(
        &self,
        pk: &str,
        rk: &str,
        etag: &ETag,
        keys: Option<&[String]>,
    ) -> Option<Result<()>> {
        let simple = T::DESCRIPTOR.writable()
            && !T::DESCRIPTOR.wide()
            && !T::DESCRIPTOR.write_needs().changes
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
}

/// Decides about a row `key` of the [exclusive](Sharing::Exclusive) slot
/// `i` (a unique index) of `T` in `table` that already exists when the
/// entity `(pk, rk)` wants it: its own row, or a row naming an entity that
/// does not hold the value, is taken over under the returned ETag; a row of
/// another entity holding the value is a
/// [`UniqueViolation`](Error::UniqueViolation). `None`: the row is gone.
pub(in crate::table) async fn claim_unique<T: TableEntity>(
    backend: &dyn TableBackend,
    table: &str,
    i: usize,
    key: &str,
    (pk, rk): (&str, &str),
) -> Result<Option<ETag>> {
    let Some(rows) = companions::<T>() else {
        return Ok(None);
    };
    let select = GetOptions::default().select([ROW_PROPERTY]);
    let row = match backend.get_entity(table, pk, key, &select).await {
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
    let holds = match current_of::<T>(backend, table, pk, &holder).await? {
        Some(current) => match schema::stored_local_keys::<T>(&current.entity) {
            Ok(keys) => keys.get(i).is_some_and(|held| held == key),
            // Not an entity of this type: it cannot hold the value.
            Err(_) => false,
        },
        None => false,
    };
    if holds {
        return Err(Error::UniqueViolation {
            table: table.to_owned(),
            partition_key: pk.to_owned(),
            index: rows.name(i),
            value: rows.value_of(i, key).to_owned(),
            held_by: holder,
        });
    }
    Ok(Some(etag))
}

/// What earlier attempts of a transaction learned about one write's index
/// rows: old ones found missing, unique ones to take over under their ETag.
/// (A few rows at most, one per index: lists, which cost nothing to make.)
#[derive(Default)]
pub(in crate::table) struct Learned {
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
pub(in crate::table) struct State<'a> {
    current: Option<Box<Current>>,
    old_keys: Option<Cow<'a, [String]>>,
    /// (Borrowed from the write when it holds it: cloned once, into the
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
pub(in crate::table) struct RemoteState {
    rows: &'static dyn CompanionRows,
    table: String,
    seq: i64,
    old: Vec<Option<String>>,
    new: Vec<Option<String>>,
}

/// The operations of a transaction, with the write each belongs to and what
/// it is for. Each write adds its own, one of them its [`Role::Row`].
pub(in crate::table) struct Planned {
    operations: Vec<BatchOperation>,
    /// Kept inline for a transaction of a few rows: one allocation less.
    owners: SmallVec<[(usize, Role); 8]>,
    /// The write adding operations now.
    write: usize,
    /// What the change feed learns from the plan.
    feed: changes::FeedNotes,
    /// The offloaded values the stored rows refer to that the writes
    /// replace: discarded once the transaction commits.
    discard: Vec<String>,
}

impl Planned {
    fn with_capacity(room: usize) -> Planned {
        Planned {
            operations: Vec::with_capacity(room),
            owners: SmallVec::with_capacity(room),
            write: 0,
            feed: changes::FeedNotes::default(),
            discard: Vec::new(),
        }
    }

    fn push(&mut self, operation: BatchOperation, role: Role) {
        self.operations.push(operation);
        self.owners.push((self.write, role));
    }
}

/// One write of a transaction, its type erased.
pub(in crate::table) trait Pending: Send + Sync {
    /// The entity's keys.
    fn keys(&self) -> (&str, &str);
    /// Readies the write with `table` (its transaction's), once, before it
    /// is planned: puts its expiry index row, and seals its encrypted
    /// values with the table's keys. By default nothing.
    fn prepare<'a>(&'a mut self, _table: &'a crate::table::Table<()>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
    /// After its transaction was refused with `error`, this write's:
    /// whether an entity that has expired was in its way (holding a unique
    /// value it gives) and is deleted now, so that the transaction may run
    /// again. By default `false`.
    fn free<'a>(
        &'a self,
        _table: &'a crate::table::Table<()>,
        _error: &'a Error,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async { Ok(false) })
    }
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
    /// The change the write records in the change feed, when its kind
    /// records changes. By default none.
    fn change(&self) -> Option<ChangeOf<'_>> {
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
pub(in crate::table) struct Typed<'a, T> {
    pub(in crate::table) entity: Cow<'a, Entity>,
    pub(in crate::table) write: RowWrite,
    /// The RowKeys of the index rows of the version the write's ETag names.
    pub(in crate::table) known: Option<Cow<'a, [String]>>,
    /// The RowKeys of the index rows of the value written (not of a merge
    /// of one field, whose other values are stored).
    pub(in crate::table) new_keys: Option<Cow<'a, [String]>>,
    pub(in crate::table) _marker: PhantomData<fn() -> T>,
}

/// A raw operation added to a typed batch.
pub(in crate::table) struct Raw(pub(in crate::table) BatchOperation);

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
