//! Moves of an entity to other keys, which span partitions: a copy, then
//! the old row given up in a pending step.

use std::sync::Arc;

use super::{Loaded, Table};
use crate::error::{Error, Result};
use crate::pending::{self, Notice, Step, detached, finish_detached};
use crate::schema::{self, TableEntity};

impl<T> Table<T> {
    /// The sequence number a fence row of this table holds for `rk` in
    /// partition `pk` (0 when there is none).
    async fn fence_of(&self, pk: &str, rk: &str) -> Result<i64> {
        pending::read_fence(self.backend.as_ref(), &self.name, pk, rk).await
    }
}

impl<T: TableEntity> Table<T> {
    /// Moves the entity `loaded` to the keys of `moved` (another partition:
    /// the employee who changes department), with `moved`'s values.
    ///
    /// The entity is copied first, then given up: one transaction in the new
    /// partition inserts it (with its index rows there, each unique value
    /// claimed) and records the move in the outbox; then the row at the old
    /// keys is deleted (with its index rows, its place in index entities,
    /// its rows in indexes kept elsewhere) if it is still the version read.
    /// A reader finds the entity in the old partition, the new one, or for
    /// a moment both, with the same values; never in neither. If the writer
    /// stops after the first transaction, the [upkeep](crate::upkeep) (or
    /// the [`OutboxWorker`](crate::outbox::OutboxWorker)) finishes the move.
    /// Wide entities, offloaded values (copied to new blobs; the old ones are
    /// removed after), index entities and indexes kept elsewhere all move.
    /// A kind with a [change feed](crate::changes) records an insert at the
    /// new keys with the copy and a delete at the old keys with the old
    /// row's removal, each in its own partition's feed.
    ///
    /// Fails with [`PreconditionFailed`](Error::PreconditionFailed) if the
    /// entity changed since it was read (also when it changes while the move
    /// runs: the copy is taken back), with
    /// [`EntityAlreadyExists`](Error::EntityAlreadyExists) if an entity
    /// holds the new keys already, and with
    /// [`UniqueViolation`](Error::UniqueViolation) if another entity of the
    /// new partition holds one of its unique values: nothing is changed.
    /// New keys in the same partition take the entity's own unique values
    /// over. The same keys are a [`replace`](Table::replace).
    ///
    /// Only if the entity changes at its old keys after the copy and the
    /// writer stops before it sees it, both copies stay: the record is kept,
    /// and the upkeep reports the conflict on every round
    /// (`PreconditionFailed` on the old keys) until one copy is deleted.
    ///
    /// Requests: reads of the old row and the new keys, the state a delete
    /// and an insert plan from, the transaction, then the notice (with an
    /// outbox), the old partition's step (a fence read and a transaction)
    /// and the record's delete.
    pub async fn move_to(&self, loaded: &Loaded<T>, moved: &T) -> Result<()> {
        Self::refuse_unwritable()?;
        let (old_pk, old_rk) = (
            schema::partition_key_of(&loaded.value)?,
            schema::row_key_of(&loaded.value)?,
        );
        let (new_pk, new_rk) = (schema::partition_key_of(moved)?, schema::row_key_of(moved)?);
        if (&old_pk, &old_rk) == (&new_pk, &new_rk) {
            // Nowhere to go: a replace of the version read.
            let write = super::write::RowWrite::Update(
                crate::backend::UpdateMode::Replace,
                crate::entity::IfMatch::ETag(loaded.etag.clone()),
            );
            let write = super::write::Write::Put(moved, write, &loaded.unknown);
            return self.enter(write).await.map(drop);
        }
        let (old_rk, ops, stale) = self
            .give_up_plan(loaded, moved, (&old_pk, &old_rk), (&new_pk, &new_rk))
            .await?;
        // Above every step that ever reached the old row: no older step can
        // undo this one, and this one is never taken for old.
        let seq = self.fence_of(&old_pk, &old_rk).await? + 1;
        let step = Step {
            table: self.name.to_string(),
            partition_key: old_pk.clone(),
            fence: old_rk.clone(),
            seq,
            ops,
        };
        let (new_etag, written) = self
            .copy_with_record(loaded, moved, &old_pk, &old_rk, step)
            .await?;
        let copied = Copied {
            new_etag,
            seq,
            written,
            stale,
        };
        let table = self.clone();
        let keys = [old_pk, old_rk, new_pk, new_rk];
        detached(async move { table.finish_move(keys, copied).await })
            .await
            .unwrap_or(Ok(()))
    }

    /// What a move gives up at the old keys, checked against the version
    /// read: the RowKey the entity lies under (a renamed kind's row not
    /// moved yet lies under a previous kind's), the operations of the old
    /// partition's step, and the blobs the old row referenced. Refuses a
    /// changed entity and taken new keys, as [`move_to`](Table::move_to)
    /// says.
    async fn give_up_plan(
        &self,
        loaded: &Loaded<T>,
        moved: &T,
        (old_pk, old_rk): (&str, &str),
        (new_pk, new_rk): (&str, &str),
    ) -> Result<(String, Vec<pending::StepOp>, Vec<String>)> {
        let gone = || Error::EntityNotFound {
            table: self.name.to_string(),
            partition_key: old_pk.to_owned(),
            row_key: old_rk.to_owned(),
        };
        let current = self.read_current(old_pk, old_rk).await?.ok_or_else(gone)?;
        if current.etag != loaded.etag {
            return Err(Error::PreconditionFailed {
                table: self.name.to_string(),
                partition_key: old_pk.to_owned(),
                row_key: old_rk.to_owned(),
            });
        }
        let old_rk = current.entity.row_key.clone();
        let taken = self.row_under_any_name(new_pk, new_rk).await?;
        if taken {
            return Err(Error::EntityAlreadyExists {
                table: self.name.to_string(),
                partition_key: new_pk.to_owned(),
                row_key: new_rk.to_owned(),
            });
        }
        // The index rows the new row takes over from the old one: its own
        // unique values, when it stays in its partition.
        let keep = if old_pk == new_pk && !crate::index::local_indexes::<T>().is_empty() {
            let old = crate::schema::stored_local_keys::<T>(&current.entity)?;
            let new = self.index_keys_of(moved, new_rk).await?;
            old.into_iter().filter(|key| new.contains(key)).collect()
        } else {
            Vec::new()
        };
        let ops = self
            .delete_as_step(old_pk, &old_rk, &loaded.etag, &keep)
            .await?;
        // With its fence, and a change feed's head beside its change row.
        let sent = ops.len() + 1 + usize::from(T::DESCRIPTOR.write_needs().changes);
        if sent > crate::validate::limits::MAX_BATCH_OPERATIONS {
            return Err(crate::exec::too_many_operations(sent));
        }
        let stale: Vec<String> =
            super::offload::references(&current.entity, crate::table::offload::blob_fields::<T>())?
                .into_iter()
                .map(|(_, reference)| reference.name)
                .collect();
        Ok((old_rk, ops, stale))
    }

    /// The move's first transaction: the entity inserted at its new keys
    /// (its offloaded values copied to new blobs first) with the outbox
    /// record of `step`, which gives up the old row. The new row's ETag and
    /// the blobs written; those are deleted again if the transaction surely
    /// failed.
    async fn copy_with_record(
        &self,
        loaded: &Loaded<T>,
        moved: &T,
        old_pk: &str,
        old_rk: &str,
        step: Step,
    ) -> Result<(Option<crate::entity::ETag>, Vec<String>)> {
        let (new_pk, new_rk) = (schema::partition_key_of(moved)?, schema::row_key_of(moved)?);
        let floor = pending::pending_records(self.backend.as_ref(), &self.name, &new_pk, &new_rk)
            .await?
            .iter()
            .map(|record| record.seq)
            .max()
            .unwrap_or(0);
        let mut row = self.row_of(moved, false).await?;
        // The entity moves whole: what its type does not know goes with it.
        super::unknown::restore(&mut row, &loaded.unknown);
        // The expiry index row before the moved entity's (see `index_expiry`).
        self.index_expiry(&row).await?;
        let written = if crate::table::offload::blob_fields::<T>().is_empty() {
            Vec::new()
        } else {
            super::offload::offload(
                self.blob_target_for(&row)?,
                &self.blob_prefix(),
                &mut row,
                crate::table::offload::blob_fields::<T>(),
            )
            .await?
        };
        let insert = super::plan::MovedInsert {
            insert: super::plan::Typed::<T> {
                entity: std::borrow::Cow::Borrowed(&row),
                write: super::write::RowWrite::Insert,
                known: None,
                new_keys: None,
                _marker: std::marker::PhantomData,
            },
            from: (old_pk == new_pk).then(|| old_rk.to_owned()),
        };
        let record = super::plan::MoveRecord {
            keys: (new_pk.clone(), pending::records_prefix(&new_rk)),
            owner: new_rk.clone(),
            floor,
            step,
        };
        let writes: [&dyn super::plan::Pending; 2] = [&insert, &record];
        let planned = self.enter(super::write::Write::Planned(&writes)).await;
        match planned.map(super::write::Written::etags) {
            Ok(etags) => Ok((etags.first().cloned().flatten(), written)),
            Err(error) => {
                let error = match error {
                    Error::BatchFailed { source, .. } => *source,
                    error => error,
                };
                if !error.is_transient()
                    && !error.is_outcome_unknown()
                    && let Some(target) = &self.blobs
                {
                    super::offload::delete_quietly(target, &written).await;
                }
                Err(error)
            }
        }
    }

    /// Finishes a move whose copy committed: deletes the old row (through
    /// the move's record), then the old blobs; takes the copy back if the
    /// old row changed since it was read.
    async fn finish_move(self, keys: [String; 4], copied: Copied) -> Result<()> {
        let [old_pk, old_rk, new_pk, new_rk] = keys;
        let notice = Notice {
            table: self.name.to_string(),
            partition_key: new_pk.clone(),
            row_key: new_rk.clone(),
        };
        let finished =
            finish_detached(Arc::clone(&self.backend), self.outbox.clone(), notice).await;
        match finished {
            Ok(()) => {
                if let Some(target) = &self.blobs {
                    super::offload::delete_quietly(target, &copied.stale).await;
                }
                Ok(())
            }
            Err(Error::PreconditionFailed {
                partition_key,
                row_key,
                ..
            }) if (partition_key.as_str(), row_key.as_str()) == (&old_pk, &old_rk) => {
                let changed = Error::PreconditionFailed {
                    table: self.name.to_string(),
                    partition_key: old_pk.clone(),
                    row_key: old_rk.clone(),
                };
                // The move's record: the one whose step gives up the old row
                // (read on this rare path only).
                let pending =
                    pending::pending_records(self.backend.as_ref(), &self.name, &new_pk, &new_rk)
                        .await;
                let record = pending.ok().and_then(|records| {
                    records.into_iter().find(|record| {
                        record.what == pending::MOVE
                            && record.steps.first().is_some_and(|step| {
                                step.seq == copied.seq
                                    && (step.partition_key.as_str(), step.fence.as_str())
                                        == (&old_pk, &old_rk)
                            })
                    })
                });
                let (Some(new_etag), Some(record)) = (copied.new_etag, record) else {
                    return Err(changed);
                };
                // The entity changed at its old keys after it was read: the
                // copy is taken back, with the record, in one transaction.
                let row = crate::entity::Entity::new(&new_pk, &new_rk);
                let delete = super::plan::Typed::<T> {
                    entity: std::borrow::Cow::Borrowed(&row),
                    write: super::write::RowWrite::Delete(crate::entity::IfMatch::ETag(new_etag)),
                    known: None,
                    new_keys: None,
                    _marker: std::marker::PhantomData,
                };
                let record = super::plan::Raw(crate::backend::BatchOperation::Delete {
                    partition_key: new_pk.clone(),
                    row_key: record.row_key,
                    if_match: crate::entity::IfMatch::ETag(record.etag),
                });
                let writes: [&dyn super::plan::Pending; 2] = [&delete, &record];
                match self.enter(super::write::Write::Planned(&writes)).await {
                    Ok(_) => {
                        if let Some(target) = &self.blobs {
                            super::offload::delete_quietly(target, &copied.written).await;
                        }
                        if !crate::index::remote_indexes::<T>().is_empty() {
                            self.finish_after_commit(&new_pk, &new_rk).await;
                        }
                    }
                    Err(error) => {
                        tracing::error!(%error, table = %self.name, old_pk, old_rk, new_pk, new_rk, "a moved entity changed at both its keys: both copies are kept, and the upkeep reports the move until one is deleted");
                    }
                }
                Err(changed)
            }
            // Committed: the upkeep finishes the rest.
            Err(_) => Ok(()),
        }
    }
}

/// What the first transaction of a move wrote.
struct Copied {
    /// The ETag of the entity's new row.
    new_etag: Option<crate::entity::ETag>,
    /// The sequence number of the move's step.
    seq: i64,
    /// The blobs the new row references.
    written: Vec<String>,
    /// The blobs the old row references.
    stale: Vec<String>,
}
