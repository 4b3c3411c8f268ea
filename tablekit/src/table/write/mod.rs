//! The write pipeline of [`Table`], read top to bottom:
//!
//! 1. **Entry**: every write method of `Table` (`insert`, `replace`,
//!    `merge`, `upsert`, `delete`, their unconditional forms,
//!    `merge_element`, `update`'s write back, a batch's submit, the bulk
//!    writer and migrations) says what it asks for as one [`Write`] and
//!    enters [`Table::enter`], below: the one place a typed write starts.
//!    `enter` observes the single-entity writes (the others are observed
//!    whole by their caller) and hands each shape to its body in this file.
//!    The public methods are declared in `table/mod.rs` beside `Table`, so
//!    that the compiler's messages name them `Table::insert`; each is one
//!    call of `enter`. Reads are `table/read.rs`'s; [`Table::update`] (read,
//!    change, write back) is `update.rs`'s.
//! 2. **Retry** (`retry.rs`): the one policy for a write whose answer was
//!    lost: how often it is sent again, and on which outcomes.
//! 3. **Record and settle** (`settle.rs`): a write records its tag in the
//!    row's history, and a lost answer is settled by reading the row back.
//! 4. **The row** (`row.rs`): offloaded values go to blobs around the
//!    write; then the row goes out as one request when the type needs
//!    nothing beside it, or as a planned transaction when it does.
//! 5. **Plan and run** (`plan/`): a typed write's transaction (its row or
//!    wide parts, index rows, outbox records, a renamed kind's old row) is
//!    planned from the entity's current state and run, planning again after
//!    a lost race. Transactions and batches run their writes through the
//!    same runner (`plan::run`), as do the bulk writer and migrations for
//!    types whose rows need rows beside them.

mod retry;
mod row;
mod settle;

pub(crate) mod plan;
pub mod update;

pub(crate) use retry::RACE_ATTEMPTS;
use retry::Resends;
pub(super) use row::{IndexHint, RowWrite};
pub(super) use settle::{Recorded, history_has};

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
    /// [`merge_element`](Table::merge_element): a row of one property.
    Element(Entity, IfMatch),
    /// [`update`](Table::update)'s write back of the value it changed, with
    /// the write's tag for its history, which settles a lost answer.
    Back {
        row: &'a mut Entity,
        write: RowWrite,
        recorded: &'a mut Recorded,
        hint: IndexHint<'a>,
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
            Write::Back { .. } | Write::Transaction(_) | Write::Planned(_) | Write::Rows(_) => {
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
    /// An update's write back: `None` when it landed but another writer
    /// changed the row before its lost answer was settled.
    Settled(Option<ETag>),
    /// One ETag per write of a transaction, in order (`None` for a delete).
    Many(Vec<Option<ETag>>),
}

impl Written {
    /// The ETag of a single-entity write.
    pub(in crate::table) fn etag(self) -> ETag {
        match self {
            Written::One(etag) | Written::Settled(Some(etag)) => etag,
            Written::Deleted | Written::Settled(None) => ETag::new(""),
            Written::Many(etags) => etags
                .into_iter()
                .next()
                .flatten()
                .unwrap_or_else(|| ETag::new("")),
        }
    }

    /// The outcome of an update's write back.
    pub(in crate::table) fn settled(self) -> Option<ETag> {
        match self {
            Written::Settled(etag) => etag,
            other => Some(other.etag()),
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
    pub(in crate::table) async fn enter(&self, write: Write<'_, T>) -> Result<Written> {
        match write.observed_as() {
            Some(op) => self.write_operation(op).run(self.apply(write)).await,
            None => self.apply(write).await,
        }
    }

    /// Runs `write` by its shape.
    async fn apply(&self, write: Write<'_, T>) -> Result<Written> {
        let one = Written::One;
        match write {
            Write::Insert(value) => self.insert_unobserved(value).await.map(one),
            Write::Put(value, write, unknown) => {
                self.write_keeping(value, write, unknown).await.map(one)
            }
            Write::Loaded(loaded, mode) => self.write_loaded(loaded, mode).await.map(one),
            Write::Delete(loaded) => self.delete_loaded(loaded).await.map(|()| Written::Deleted),
            Write::DeleteKeys(pk, rk) => {
                self.delete_encoded(pk, rk).await.map(|()| Written::Deleted)
            }
            Write::Element(row, if_match) => {
                let write = RowWrite::Update(UpdateMode::Merge, if_match);
                self.write_row(row, write, IndexHint::default())
                    .await
                    .map(one)
            }
            // Boxed, these three: their futures are large, and the single
            // writes above should not carry their room.
            Write::Back {
                row,
                write,
                recorded,
                hint,
            } => Box::pin(self.write_recorded(row, write, recorded, hint))
                .await
                .map(Written::Settled),
            Write::Transaction(transaction) => Box::pin(transaction.run()).await.map(Written::Many),
            Write::Planned(writes) => Box::pin(plan::run(
                &self.backend,
                &self.name,
                writes,
                self.clock.as_ref(),
            ))
            .await
            .map(Written::Many),
            Write::Rows(operations) => self
                .backend
                .submit_transaction(&self.name, operations)
                .await
                .map(Written::Many),
        }
    }

    /// A typed write `op` of this table, observed ([`operation`]).
    pub(super) fn write_operation(&self, op: &'static str) -> crate::telemetry::Call {
        operation(&*self.backend, op, &self.name, T::DESCRIPTOR.kind, None)
    }

    pub(super) async fn insert_unobserved(&self, value: &T) -> Result<ETag> {
        // An insert whose answer is lost is settled by reading the row back:
        // absent, it is sent again; present, its history says whose it is.
        let mut row = schema::to_entity(value)?;
        let mut recorded = if self.record_writes {
            Recorded::insert()
        } else {
            Recorded::none()
        };
        let new_keys = new_index_keys(value, &row.row_key);
        let hint = IndexHint {
            old: None,
            new: new_keys.as_deref(),
        };
        let mut resends = Resends::default();
        loop {
            match self
                .write_recorded_settled(&mut row, RowWrite::Insert, &mut recorded, hint)
                .await
            {
                Ok(Some(etag)) => return Ok(etag),
                Ok(None) => return Err(self.overwritten(&row)),
                Err(e) => resends.again_if_not_applied(e)?,
            }
        }
    }

    /// An insert that landed but whose row was replaced before it could be
    /// settled: its ETag is gone.
    fn overwritten(&self, row: &crate::entity::Entity) -> Error {
        Error::OutcomeUnknown {
            message: format!(
                "entity ({:?}, {:?}) in table `{}` was written, then changed by another writer before the lost answer was settled",
                row.partition_key, row.row_key, self.name
            ),
        }
    }

    /// A write of `value` (`write` says how) in a row that also holds
    /// `unknown`: the properties of the row it replaces that `T` does not
    /// know.
    async fn write_keeping(
        &self,
        value: &T,
        write: RowWrite,
        unknown: &crate::entity::Properties,
    ) -> Result<ETag> {
        let mut row = schema::to_entity(value)?;
        unknown::restore(&mut row, unknown);
        let new_keys = new_index_keys(value, &row.row_key);
        let hint = IndexHint {
            old: None,
            new: new_keys.as_deref(),
        };
        // A write that holds no condition (an upsert, or one under `*`)
        // whose answer was lost is sent again: writing the same value twice
        // leaves what writing it once does.
        let resend = matches!(
            write,
            RowWrite::Upsert(_) | RowWrite::Update(_, IfMatch::Any)
        );
        if !resend {
            return self.write_row(row, write, hint).await;
        }
        let mut resends = Resends::default();
        loop {
            match self.write_lent(&row, write.clone(), hint).await {
                Err(e) if e.is_outcome_unknown() => resends.again(e)?,
                outcome => return outcome,
            }
        }
    }

    pub(super) async fn write_loaded(
        &self,
        loaded: &mut Loaded<T>,
        mode: UpdateMode,
    ) -> Result<ETag> {
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
        let mut recorded = if self.record_writes {
            Recorded::on(loaded.writes.as_deref(), &loaded.etag)
        } else {
            Recorded::none()
        };
        let mut row = schema::to_entity(&loaded.value)?;
        if mode == UpdateMode::Replace {
            unknown::restore(&mut row, &loaded.unknown);
        }
        let new_keys = new_index_keys(&loaded.value, &row.row_key);
        let old_keys = loaded.index_keys();
        let hint = IndexHint {
            old: old_keys.as_deref(),
            new: new_keys.as_deref(),
        };
        let write = || RowWrite::Update(mode, IfMatch::ETag(loaded.etag.clone()));
        let mut resends = Resends::default();
        let outcome = loop {
            match self
                .write_recorded_settled(&mut row, write(), &mut recorded, hint)
                .await
            {
                Err(e) => {
                    if let Err(e) = resends.again_if_not_applied(e) {
                        break Err(e);
                    }
                }
                written => break written,
            }
        };
        match outcome? {
            Some(etag) => {
                Loaded::set_etag(loaded, etag.clone());
                loaded.writes = self.record_writes.then(|| recorded.history_in(&mut row));
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

    pub(super) async fn delete_loaded(&self, loaded: &Loaded<T>) -> Result<()> {
        let (pk, rk) = (
            schema::partition_key_of(&loaded.value)?,
            schema::row_key_of(&loaded.value)?,
        );
        let entity = crate::entity::Entity::new(pk, rk);
        let (pk, rk) = (&entity.partition_key, &entity.row_key);
        let delete = || RowWrite::Delete(IfMatch::ETag(loaded.etag.clone()));
        let mut resends = Resends::default();
        let old_keys = loaded.index_keys();
        loop {
            let hint = IndexHint {
                old: old_keys.as_deref(),
                new: None,
            };
            let deleted = match self.delete_known(pk, rk, &loaded.etag, hint.old).await {
                Some(deleted) => deleted,
                None => self.write_lent(&entity, delete(), hint).await.map(drop),
            };
            match deleted {
                Ok(()) => return Ok(()),
                // A lost answer: the row gone means deleted; the version read
                // still there means not applied (try again); anything else,
                // another writer changed it, and the store cannot tell whether
                // this delete came first.
                Err(e) if e.is_outcome_unknown() => {
                    match self.row_after_lost_delete(pk, rk).await {
                        Ok(None) => return Ok(()),
                        Ok(Some(stored)) if stored.etag.as_ref() == Some(&loaded.etag) => {
                            resends.again(e)?;
                        }
                        _ => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Settles a delete of `(pk, rk)` whose answer was lost by whether the
    /// row is gone: `None` when it is (its outbox records, if it wrote any,
    /// are then finished), else the row as it stands.
    async fn row_after_lost_delete(
        &self,
        pk: &str,
        rk: &str,
    ) -> Result<Option<crate::entity::Entity>> {
        // Boxed, as a rare path: the delete's future stays small.
        let stored = Box::pin(self.read_stored(pk, rk)).await?;
        if stored.is_none() && T::DESCRIPTOR.write_needs().follow_up {
            self.finish_after_commit(pk, rk).await;
        }
        Ok(stored)
    }

    /// [`delete_unconditionally`](Table::delete_unconditionally) of the
    /// encoded keys.
    pub(super) async fn delete_encoded(&self, pk: String, rk: String) -> Result<()> {
        let entity = crate::entity::Entity::new(pk, rk);
        let (pk, rk) = (&entity.partition_key, &entity.row_key);
        let mut resends = Resends::default();
        loop {
            let delete = RowWrite::Delete(IfMatch::Any);
            match self.write_lent(&entity, delete, IndexHint::default()).await {
                Ok(_) => return Ok(()),
                // Gone after an answer was lost: that delete landed (or
                // another did; either way the entity is gone).
                Err(Error::EntityNotFound { .. }) if resends.any_lost() => return Ok(()),
                // Still there: not applied, and sent again.
                Err(e) if e.is_outcome_unknown() => {
                    match self.row_after_lost_delete(pk, rk).await {
                        Ok(None) => return Ok(()),
                        Ok(Some(_)) => resends.again(e)?,
                        Err(_) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
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
