//! Typed writes that span partitions, through the outbox.

use std::sync::Arc;

use super::{Loaded, Table};
use crate::error::{Error, Result};
use crate::ext::TableBackendExt;
use crate::outbox::{self, Notice, Step, StepOp};
use crate::schema::{self, TableEntity};

/// Finishes the outbox records of `(pk, rk)` after the transaction that
/// wrote them committed: puts the notice (if there is an outbox), applies
/// the steps, deletes the records and the notice. Failures are logged and
/// left to the worker and the [upkeep](crate::upkeep): the change committed,
/// and reporting it failed would make the caller do it twice.
///
/// Inside a tokio runtime the work runs as a task of its own, which the
/// caller awaits: a caller whose future is dropped (a client that hung up,
/// a timeout) no longer takes the finishing work down with it. Outside one
/// it runs in the caller's future, and the upkeep is what finishes it.
pub(crate) async fn finish_after_commit(
    backend: &Arc<dyn crate::TableBackend>,
    table: &Arc<str>,
    outbox: Option<&crate::outbox::Outbox>,
    pk: &str,
    rk: &str,
) {
    let notice = Notice {
        table: table.to_string(),
        partition_key: pk.to_owned(),
        row_key: rk.to_owned(),
    };
    let work = finish_detached(Arc::clone(backend), outbox.cloned(), notice);
    match tokio::runtime::Handle::try_current() {
        // The task is spawned before this future first yields, so dropping
        // the caller at any await point leaves it running.
        Ok(runtime) => {
            let running = Running::start();
            let work = async move {
                work.await;
                drop(running);
            };
            if let Err(error) = runtime.spawn(work).await {
                tracing::warn!(%error, %table, "outbox steps did not run to their end; the upkeep will finish them");
            }
        }
        Err(_) => work.await,
    }
}

/// How many finishing tasks run detached from their callers.
static DETACHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts one detached finishing task while it lives.
struct Running;

impl Running {
    fn start() -> Running {
        DETACHED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        DETACHED.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How many writes' finishing work runs detached right now, in this
/// process (work whose callers may have gone).
#[cfg(feature = "conformance")]
pub(crate) fn detached_in_flight() -> usize {
    DETACHED.load(std::sync::atomic::Ordering::SeqCst)
}

/// [`finish_after_commit`]'s work, owning what it needs.
async fn finish_detached(
    backend: Arc<dyn crate::TableBackend>,
    outbox: Option<crate::outbox::Outbox>,
    notice: Notice,
) {
    let table = notice.table.as_str();
    // The notice goes out while the steps are applied: it waits its delay
    // before a worker may take it anyway.
    let notify = async {
        match &outbox {
            Some(outbox) => match outbox.notify(&notice).await {
                Ok(sent) => Some((outbox, sent)),
                Err(error) => {
                    tracing::warn!(%error, table, "could not put the outbox notice; the upkeep will finish the record");
                    None
                }
            },
            None => None,
        }
    };
    let finish = outbox::finish_entity(
        backend.as_ref(),
        table,
        &notice.partition_key,
        &notice.row_key,
    );
    let (sent, finished) = futures::future::join(notify, finish).await;
    match finished {
        Ok(_) => {
            if let Some((outbox, sent)) = sent {
                // A notice left behind finds nothing to do.
                let _ = outbox.withdraw(&sent).await;
            }
        }
        Err(error) => {
            tracing::warn!(%error, table, "outbox steps failed; the worker or the upkeep will finish them");
        }
    }
}

impl<T> Table<T> {
    /// Finishes the outbox records of `(pk, rk)` after the transaction that
    /// wrote them committed (see [`finish_after_commit`]).
    pub(crate) async fn finish_after_commit(&self, pk: &str, rk: &str) {
        // Boxed: the writes that call this hold a pointer in their state,
        // not the steps' whole future.
        Box::pin(finish_after_commit(
            &self.backend,
            &self.name,
            self.outbox.as_ref(),
            pk,
            rk,
        ))
        .await;
    }

    /// The sequence number a fence row of this table holds for `rk` in
    /// partition `pk` (0 when there is none).
    async fn fence_of(&self, pk: &str, rk: &str) -> Result<i64> {
        outbox::read_fence(self.backend.as_ref(), &self.name, pk, rk).await
    }
}

impl<T: TableEntity> Table<T> {
    /// Moves the entity `loaded` to the keys of `moved` (another partition:
    /// the employee who changes department), with `moved`'s values.
    ///
    /// One transaction deletes the entity (with its index rows) from its
    /// partition, if it is still the version read, and records the move in
    /// the outbox; then the entity is inserted in its new partition (with
    /// its index rows there). Until that second part is done (at once,
    /// unless the writer stops; then by the
    /// [`OutboxWorker`](crate::outbox::OutboxWorker) or the
    /// [sweeper](crate::outbox::sweep)), readers find the entity in neither
    /// partition; never in both, and never twice.
    ///
    /// Fails with [`PreconditionFailed`](Error::PreconditionFailed) if the
    /// entity changed since it was read, with
    /// [`EntityAlreadyExists`](Error::EntityAlreadyExists) if an entity
    /// holds the new keys already, and with
    /// [`UniqueViolation`](Error::UniqueViolation) if another entity of the
    /// new partition holds one of its unique values: nothing is changed. If
    /// another entity takes them after this check and before the move
    /// reaches them, the move stops there: its record (holding the entity)
    /// stays, and its notice goes to the poison queue with the reason.
    /// Nothing is overwritten, and nothing is lost.
    ///
    /// New keys in the same partition take the same way (a transaction
    /// cannot both give up and take a unique value); the same keys are a
    /// [`replace`](Table::replace). Not offered for wide entities, entities
    /// with offloaded values, with index entities (`list` indexes, whose
    /// lists in the new partition no step can change safely) or with
    /// indexes kept elsewhere: [`NotSupported`](Error::NotSupported).
    ///
    /// Requests: 3 reads (the new keys, and the fences of the old and the
    /// new keys) and one per unique index, the transaction, and the move's
    /// own: a notice put and deleted (with an outbox), a query for the
    /// records, the step (a read and a transaction), the record's delete.
    pub async fn move_to(&self, loaded: &Loaded<T>, moved: &T) -> Result<()> {
        if T::WIDE
            || !T::BLOB_FIELDS.is_empty()
            || T::INDEXES.iter().any(|def| def.list)
            || !T::REMOTE_INDEXES.is_empty()
        {
            return Err(Error::NotSupported {
                operation: "moving a wide entity, or one with offloaded values, index entities or indexes kept elsewhere, to other keys",
            });
        }
        let (old_pk, old_rk) = (
            schema::partition_key_of(&loaded.value)?,
            schema::row_key_of(&loaded.value)?,
        );
        let (new_pk, new_rk) = (schema::partition_key_of(moved)?, schema::row_key_of(moved)?);
        if (&old_pk, &old_rk) == (&new_pk, &new_rk) {
            // Nowhere to go: a replace of the version read.
            let write = super::rows::RowWrite::Update(
                crate::UpdateMode::Replace,
                crate::IfMatch::ETag(loaded.etag.clone()),
            );
            return self.write(moved, write).await.map(drop);
        }
        if self
            .backend
            .try_get_entity(&self.name, &new_pk, &new_rk)
            .await?
            .is_some()
        {
            return Err(Error::EntityAlreadyExists {
                table: self.name.to_string(),
                partition_key: new_pk,
                row_key: new_rk,
            });
        }
        // Above every step that ever reached either place: so that no older
        // step can undo this one, and this one is never taken for old.
        let seq = self
            .fence_of(&old_pk, &old_rk)
            .await?
            .max(self.fence_of(&new_pk, &new_rk).await?)
            + 1;
        let row = schema::to_entity(moved)?;
        let mut ops = Vec::with_capacity(1 + T::INDEXES.len());
        for (i, def) in T::INDEXES.iter().enumerate() {
            let key = crate::index::index_key(moved, i, &new_rk)?;
            let index_row = crate::index::index_row::<T>(def, key.clone(), &row);
            if def.unique {
                // Claimed, never taken: a value another entity holds there
                // refuses the move now, or stops its step later.
                let held = self
                    .backend
                    .try_get_entity(&self.name, &new_pk, &key)
                    .await?;
                if let Some(held) = held {
                    let held_by = match held.properties.get(crate::index::ROW_PROPERTY) {
                        Some(crate::Value::String(holder)) => holder.clone(),
                        _ => String::new(),
                    };
                    // The entity's own row, which the move gives up first.
                    let own = new_pk == old_pk && held_by == old_rk;
                    if !own {
                        return Err(Error::UniqueViolation {
                            table: self.name.to_string(),
                            partition_key: new_pk,
                            index: def.name,
                            value: crate::index::value_of(def, &key).to_owned(),
                            held_by,
                        });
                    }
                }
                ops.push(StepOp::Insert(index_row));
            } else {
                ops.push(StepOp::Put(index_row));
            }
        }
        ops.insert(0, StepOp::Insert(row));
        let step = Step {
            table: self.name.to_string(),
            partition_key: new_pk,
            fence: new_rk,
            seq,
            ops,
        };
        let record = outbox::record_row(
            &self.name,
            &old_pk,
            &old_rk,
            seq,
            self.clock.now(),
            "move",
            std::slice::from_ref(&step),
        );
        let mut transaction = self.transaction();
        transaction.delete(loaded)?;
        transaction.push_raw(crate::BatchOperation::Insert(record));
        transaction.submit().await?;
        self.finish_after_commit(&old_pk, &old_rk).await;
        Ok(())
    }
}
