//! Finishing pending work after the transaction that recorded it
//! committed, in a task of its own, so that a caller whose future is
//! dropped does not take the finishing work down with it.

use std::sync::Arc;

use super::{Announce, Notice, finish_entity};
use crate::backend::{InFlight, TableBackend};
use crate::error::Result;

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
    backend: &Arc<dyn TableBackend>,
    table: &Arc<str>,
    outbox: Option<&Arc<dyn Announce>>,
    pk: &str,
    rk: &str,
) {
    let notice = Notice {
        table: table.to_string(),
        partition_key: pk.to_owned(),
        row_key: rk.to_owned(),
    };
    let _ = detached(finish_detached(
        Arc::clone(backend),
        outbox.cloned(),
        notice,
    ))
    .await;
}

/// Runs `work` as a tokio task of its own, which the caller awaits, when a
/// runtime exists: the task is spawned before this future first yields, so
/// dropping the caller at any await point leaves it running. Outside a
/// runtime it runs in the caller's future. `None` when the task did not run
/// to its end (the runtime shut down, or it panicked).
pub(crate) async fn detached<R: Send + 'static>(
    work: impl Future<Output = R> + Send + 'static,
) -> Option<R> {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            let running = InFlight::start();
            // The task belongs to the operation that starts it: its calls
            // are the operation's children, and timed as part of it.
            let work = crate::telemetry::carried(async move {
                let done = work.await;
                drop(running);
                done
            });
            match runtime.spawn(work).await {
                Ok(done) => Some(done),
                Err(error) => {
                    tracing::warn!(%error, "outbox steps did not run to their end; the upkeep will finish them");
                    None
                }
            }
        }
        Err(_) => Some(work.await),
    }
}

/// How many writes' finishing work runs detached right now, in this
/// process (work whose callers may have gone), with the backends' writes
/// that outlive their futures.
#[cfg(feature = "conformance")]
pub(crate) fn detached_in_flight() -> usize {
    InFlight::count()
}

/// [`finish_after_commit`]'s work, owning what it needs: the error that
/// stopped the steps, which it logged.
pub(crate) async fn finish_detached(
    backend: Arc<dyn TableBackend>,
    outbox: Option<Arc<dyn Announce>>,
    notice: Notice,
) -> Result<()> {
    let table = notice.table.as_str();
    // The notice goes out while the steps are applied: it waits its delay
    // before a worker may take it anyway.
    let notify = async {
        match &outbox {
            Some(outbox) => match outbox.announce(&notice).await {
                Ok(sent) => Some((outbox, sent)),
                Err(error) => {
                    tracing::warn!(%error, table, "could not put the outbox notice; the upkeep will finish the record");
                    None
                }
            },
            None => None,
        }
    };
    let finish = finish_entity(
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
            Ok(())
        }
        Err(error) => {
            tracing::warn!(%error, table, "outbox steps failed; the worker or the upkeep will finish them");
            Err(error)
        }
    }
}
