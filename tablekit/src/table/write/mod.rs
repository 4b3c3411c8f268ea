//! The write pipeline of [`Table`], read top to bottom:
//!
//! 1. **Entry**: every write method of `Table` (`insert`, `replace`,
//!    `merge`, `upsert`, `delete`, their unconditional forms,
//!    `merge_element`, `update`, a batch's submit, the bulk
//!    writer and migrations) says what it asks for as one [`Write`] and
//!    enters [`Table::enter`], below: the one place a typed write starts.
//!    `enter` observes the single-entity writes (the others are observed
//!    whole by their caller) and hands each shape to its body in this file.
//!    The public methods are declared in `table/mod.rs` beside `Table`, so
//!    that the compiler's messages name them `Table::insert`; each is one
//!    call of `enter`. Reads are `table/read.rs`'s; `update.rs` lowers an
//!    update's change over the row as read.
//! 2. **Execute** (`execute.rs`): a single-entity write, lowered to its
//!    row ([`Lowered`]), is executed by [`Table::execute`], the one loop of
//!    the single-entity writes: it sends the row, settles a lost answer by
//!    reading it back, sends it again while it was not applied, and makes
//!    an update again from the row as read after a lost race. The retry
//!    policy of the typed writes is written there.
//! 3. **Record and settle** (`settle.rs`): a write records its tag in the
//!    row's history, and a lost answer is settled by reading the row back.
//! 4. **The row** (`row.rs`): offloaded values go to blobs before the
//!    write; then the row goes out as one request when the type needs
//!    nothing beside it, or as a planned transaction when it does.
//! 5. **Plan and run** (`plan/`): a typed write's transaction (its row or
//!    wide parts, index rows, outbox records, a renamed kind's old row) is
//!    planned from the entity's current state and run, planning again after
//!    a lost race; the offloaded values the replaced row referred to are
//!    discarded once it commits. Transactions and batches run their writes through the
//!    same runner (`plan::run`), as do the bulk writer and migrations for
//!    types whose rows need rows beside them.

mod execute;
mod row;
mod settle;

pub(crate) mod plan;
pub mod update;

pub(crate) use execute::RACE_ATTEMPTS;
pub(in crate::table) use execute::{Done, Lowered, Remake};
pub(super) use row::RowWrite;
pub(super) use settle::{Recorded, history_has};

use std::borrow::Cow;
use std::future::Future;

use futures::future::Either;

use super::{Loaded, Table, Transaction, new_index_keys, operation, unknown};
use crate::backend::{BatchOperation, UpdateMode};
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::schema::{self, KeyArg, TableEntity};

/// The one shape of a write of [`Table`]: what a write method asks for.
pub(in crate::table) enum Write<'a, T> {
    /// [`insert`](Table::insert): a new entity, refused if its keys are taken.
    Insert(&'a T),
    /// [`upsert`](Table::upsert), [`upsert_merge`](Table::upsert_merge),
    /// the unconditional updates (`RowWrite::Upsert`, or `RowWrite::Update`
    /// under `IfMatch::Any`: a value written whatever version is stored),
    /// and a [move](Table::move_to) to the same keys (a replace of the
    /// version read). The row also holds the properties given, those of
    /// the row it replaces that `T` does not know.
    Put(&'a T, RowWrite, &'a crate::entity::Properties),
    /// [`replace`](Table::replace), [`merge`](Table::merge): a value read,
    /// written back if the stored row is still the version read.
    Loaded(&'a mut Loaded<T>, UpdateMode),
    /// [`delete`](Table::delete): the version read.
    Delete(&'a Loaded<T>),
    /// [`delete_unconditionally`](Table::delete_unconditionally): the
    /// encoded keys.
    DeleteKeys(String, String),
    /// The delete of an expired entity (by the expiry sweep, or before a
    /// write takes its keys or a unique value it holds): the encoded keys
    /// and the ETag it was read with, which guards it. A change feed
    /// records it as a delete made because the entity expired.
    Expire(String, String, ETag),
    /// [`merge_element`](Table::merge_element): a row of one property.
    Element(Entity, IfMatch),
    /// [`update`](Table::update): read, change and write back, made again
    /// from the row as read after a lost race. `lowered` holds the row last
    /// sent.
    Update {
        lowered: &'a mut Lowered<'static>,
        remake: &'a mut (dyn Remake<T> + 'a),
    },
    /// A [batch](Table::batch)'s transaction, or a migration's.
    Transaction(&'a Transaction),
    /// Typed writes planned and run as one transaction: a
    /// [move](Table::move_to)'s copy with its record, and its undo.
    Planned(&'a [&'a (dyn plan::Pending + 'a)]),
    /// Rows alone (of a type that needs no row beside its own), of one
    /// partition, sent as one transaction: the bulk writer's and a
    /// migration's chunks.
    Rows(&'a [BatchOperation]),
}

impl<T> Write<'_, T> {
    /// The operation a single-entity write is observed as; `None` for the
    /// writes their caller observes whole (an update, a batch, the bulk
    /// writer, a migration).
    fn observed_as(&self) -> Option<&'static str> {
        Some(match self {
            Write::Insert(_) => "insert",
            Write::Put(_, write, _) => write.name(),
            Write::Loaded(_, UpdateMode::Replace) => "replace",
            Write::Loaded(_, UpdateMode::Merge) | Write::Element(..) => "merge",
            Write::Delete(_) | Write::DeleteKeys(..) => "delete",
            Write::Expire(..) => "expire",
            Write::Update { .. } | Write::Transaction(_) | Write::Planned(_) | Write::Rows(_) => {
                return None;
            }
        })
    }
}

/// What a [`Write`] gave back.
pub(in crate::table) enum Written {
    /// The new version's ETag.
    One(ETag),
    /// A delete's: no version is left.
    Deleted,
    /// An update's outcome.
    Updated(Done),
    /// One ETag per write of a transaction, in order (`None` for a delete).
    Many(Vec<Option<ETag>>),
}

impl Written {
    /// The ETag of a single-entity write.
    pub(in crate::table) fn etag(self) -> ETag {
        match self {
            Written::One(etag) => etag,
            Written::Deleted => ETag::new(""),
            Written::Updated(done) => done.etag().unwrap_or_else(|| ETag::new("")),
            Written::Many(etags) => etags
                .into_iter()
                .next()
                .flatten()
                .unwrap_or_else(|| ETag::new("")),
        }
    }

    /// The outcome of an update.
    pub(in crate::table) fn updated(self) -> Done {
        match self {
            Written::Updated(done) => done,
            other => Done::Written(Some(other.etag())),
        }
    }

    /// The ETags of a transaction's writes.
    pub(in crate::table) fn etags(self) -> Vec<Option<ETag>> {
        match self {
            Written::Many(etags) => etags,
            one => vec![Some(one.etag())],
        }
    }
}

impl<T: TableEntity> Table<T> {
    /// The entry of every write of `Table`: observes a single-entity write
    /// and hands each shape to its body.
    ///
    /// Not an `async fn`: the write's future is the observed body itself,
    /// one frame less on every write.
    pub(in crate::table) fn enter<'a>(
        &'a self,
        write: Write<'a, T>,
    ) -> impl Future<Output = Result<Written>> + Send + 'a
    where
        T: Sync,
    {
        let call = write.observed_as().map(|op| self.write_operation(op));
        let body = self.apply(write);
        match call {
            Some(call) => Either::Left(call.run(body)),
            None => Either::Right(body),
        }
    }

    /// Runs `write` by its shape: a single-entity write is lowered to its
    /// row and sent by the [executor](Table::execute).
    async fn apply(&self, write: Write<'_, T>) -> Result<Written> {
        match write {
            Write::Insert(value) => {
                let row = self.row_of(value, false).await?;
                let new_keys = new_index_keys(value, &row);
                let mut lowered = Lowered {
                    recorded: Some(self.recorded(Recorded::insert)),
                    new_keys: new_keys.as_deref().map(Cow::Borrowed),
                    ..Lowered::new(row, RowWrite::Insert)
                };
                match self.execute(&mut lowered, None).await?.etag() {
                    Some(etag) => Ok(Written::One(etag)),
                    None => Err(self.overwritten(&lowered.row)),
                }
            }
            Write::Put(value, write, unknown) => {
                let mut row = self.row_of(value, write.is_merge()).await?;
                unknown::restore(&mut row, unknown);
                let new_keys = new_index_keys(value, &row);
                let mut lowered = Lowered {
                    new_keys: new_keys.as_deref().map(Cow::Borrowed),
                    ..Lowered::new(row, write)
                };
                let written = self.execute(&mut lowered, None).await?.etag();
                Ok(Written::One(written.unwrap_or_else(|| ETag::new(""))))
            }
            Write::Loaded(loaded, mode) => self.write_loaded(loaded, mode).await.map(Written::One),
            Write::Delete(loaded) => {
                let (pk, rk) = (
                    schema::partition_key_of(&loaded.value)?,
                    schema::row_key_of(&loaded.value)?,
                );
                let delete = RowWrite::Delete(IfMatch::ETag(loaded.etag.clone()));
                let old_keys = loaded.index_keys();
                let mut lowered = Lowered {
                    old_keys: old_keys.as_deref().map(Cow::Borrowed),
                    ..Lowered::new(Entity::new(pk, rk), delete)
                };
                self.execute(&mut lowered, None).await?;
                Ok(Written::Deleted)
            }
            Write::Expire(pk, rk, etag) => {
                let delete = RowWrite::Delete(IfMatch::ETag(etag));
                let mut keys = Entity::new(pk, rk);
                // Carried to the change row (see `pending::changes::REASON`).
                use crate::pending::changes::{EXPIRED, REASON};
                keys.properties.insert(REASON, EXPIRED);
                let mut lowered = Lowered::new(keys, delete);
                self.execute(&mut lowered, None).await?;
                Ok(Written::Deleted)
            }
            Write::DeleteKeys(pk, rk) => {
                let delete = RowWrite::Delete(IfMatch::Any);
                let mut lowered = Lowered::new(Entity::new(pk, rk), delete);
                self.execute(&mut lowered, None).await?;
                Ok(Written::Deleted)
            }
            Write::Element(row, if_match) => {
                let write = RowWrite::Update(UpdateMode::Merge, if_match);
                let mut lowered = Lowered::new(row, write);
                let written = self.execute(&mut lowered, None).await?.etag();
                Ok(Written::One(written.unwrap_or_else(|| ETag::new(""))))
            }
            // Boxed, these: their futures are large, and the single writes
            // above should not carry their room.
            Write::Update { lowered, remake } => Box::pin(self.execute(lowered, Some(remake)))
                .await
                .map(Written::Updated),
            Write::Transaction(transaction) => Box::pin(transaction.run()).await.map(Written::Many),
            Write::Planned(writes) => Box::pin(plan::run(
                &self.backend,
                &self.name,
                writes,
                self.clock.as_ref(),
                &mut Vec::new(),
            ))
            .await
            .map(Written::Many),
            Write::Rows(operations) => {
                if schema::expiry_property::<T>().is_some() {
                    // The expiry index rows before the entities'.
                    Box::pin(self.index_expiries(operations.iter().filter_map(|op| op.entity())))
                        .await?;
                }
                crate::exec::submit_transaction(self.backend.as_ref(), &self.name, operations)
                    .await
                    .map(Written::Many)
            }
        }
    }

    /// A typed write `op` of this table, observed ([`operation`]).
    pub(super) fn write_operation(&self, op: &'static str) -> crate::telemetry::Call {
        operation(&*self.backend, op, &self.name, T::DESCRIPTOR.kind, None)
    }

    /// The history entry `new` makes, when this table records its writes.
    fn recorded(&self, new: impl FnOnce() -> Recorded) -> Recorded {
        if self.record_writes {
            new()
        } else {
            Recorded::none()
        }
    }

    /// An insert that landed but whose row was replaced before it could be
    /// settled: its ETag is gone.
    fn overwritten(&self, row: &Entity) -> Error {
        Error::OutcomeUnknown {
            message: format!(
                "entity ({:?}, {:?}) in table `{}` was written, then changed by another writer before the lost answer was settled",
                row.partition_key, row.row_key, self.name
            ),
        }
    }

    /// A write back of `loaded` ([`replace`](Table::replace),
    /// [`merge`](Table::merge)), guarded by the ETag it was read at; on
    /// success `loaded` holds the version written.
    async fn write_loaded(&self, loaded: &mut Loaded<T>, mode: UpdateMode) -> Result<ETag> {
        // A value this program read holds the version it read (never newer
        // than its own), and the ETag guard keeps the row as read. One made
        // elsewhere (`Loaded::new` with a client's ETag) may name a row a
        // newer program wrote: its version is read first, and a replace
        // over it refused. (A merge drops nothing.)
        if mode == UpdateMode::Replace
            && loaded.version.is_none()
            && written_version::<T>().is_some()
        {
            let (pk, rk) = (
                schema::partition_key_of(&loaded.value)?,
                schema::row_key_of(&loaded.value)?,
            );
            let options = crate::backend::GetOptions::default().select([schema::VERSION_PROPERTY]);
            match self
                .backend
                .get_entity(&self.name, &pk, &rk, &options)
                .await
            {
                Ok(stored) => self.refuse_newer(&stored)?,
                // The write itself reports these.
                Err(Error::EntityNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        // The write records itself in the row's history, so that a lost
        // answer is settled by reading the row back (see `update`).
        let recorded = self.recorded(|| Recorded::on(loaded.writes.as_deref(), &loaded.etag));
        let mut row = self
            .row_of(&loaded.value, mode == UpdateMode::Merge)
            .await?;
        if mode == UpdateMode::Replace {
            unknown::restore(&mut row, &loaded.unknown);
        }
        if loaded.keeps_last_write {
            unknown::keep_last_write(&mut row, &loaded.unknown);
        }
        let new_keys = new_index_keys(&loaded.value, &row);
        let old_keys = loaded.index_keys();
        let write = RowWrite::Update(mode, IfMatch::ETag(loaded.etag.clone()));
        let mut lowered = Lowered {
            recorded: Some(recorded),
            old_keys: old_keys.as_deref().map(Cow::Borrowed),
            new_keys: new_keys.as_deref().map(Cow::Borrowed),
            ..Lowered::new(row, write)
        };
        match self.execute(&mut lowered, None).await?.etag() {
            Some(etag) => {
                Loaded::set_etag(loaded, etag.clone());
                loaded.writes = self.record_writes.then(|| lowered.history());
                loaded.index_keys = super::loaded::IndexKeys::known(new_keys);
                loaded.version = written_version::<T>();
                loaded.previous_kind = None;
                Ok(etag)
            }
            // Written, and overwritten since: the ETag held is stale, as it
            // should be, and is returned as it is.
            None => Ok(loaded.etag.clone()),
        }
    }
}

/// The schema version a write of `T` records: its current one, when rows
/// of `T` record a version at all.
pub(crate) fn written_version<T: TableEntity>() -> Option<u32> {
    (T::DESCRIPTOR.kind.is_some() && T::DESCRIPTOR.kind_properties).then_some(T::DESCRIPTOR.version)
}

/// The row a merge of one series element writes: the entity's keys and the
/// element's property alone.
pub(super) fn element_row<T: TableEntity, E: schema::PropertyValue>(
    pk: &impl KeyArg<T::PartitionKey>,
    rk: &impl KeyArg<T::RowKey>,
    element: &schema::Element<E>,
    value: &E,
) -> Result<crate::entity::Entity> {
    let (pk, rk) = schema::encode_keys::<T>(pk, rk)?;
    let mut entity = crate::entity::Entity::new(pk, rk);
    schema::write_property(&mut entity.properties, element.property_name(), value)?;
    if entity.properties.is_empty() {
        // A merge writes the properties it sends, and removes none.
        return Err(crate::error::InvalidInput::PropertyValue {
            property: element.property_name().into_owned(),
            reason: "a `None` element is stored as no property, and a merge cannot remove one: \
                     replace the entity to remove an element"
                .to_owned(),
        }
        .into());
    }
    Ok(entity)
}
