//! The outbox's queue: the writer's notice, and the worker that finishes
//! records when their notices come due.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::json;
use tracing::Instrument as _;

use crate::backend::TableBackend;
use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::pending::{Announce, Announced, Notice, finish_entity};
use crate::queue::{PutMessageOptions, QueueMessage, QueueStore};

/// The name of the poison queue of `queue`: `{queue}-poison`.
pub fn poison_queue_name(queue: &str) -> String {
    format!("{queue}-poison")
}

/// Where a writer sends its notices: a queue, and how long a notice waits
/// before a worker may take it (the writer finishes the record itself in
/// the meantime, and deletes the notice).
#[derive(Clone, Debug)]
pub struct Outbox {
    queues: Arc<dyn QueueStore>,
    queue: String,
    delay: Duration,
}

impl Outbox {
    /// Notices go to `queue` of `queues`, due after 30 seconds.
    pub fn new(queues: Arc<dyn QueueStore>, queue: impl Into<String>) -> Outbox {
        Outbox {
            queues,
            queue: queue.into(),
            delay: Duration::from_secs(30),
        }
    }

    /// Sets how long a notice waits before a worker may take it: longer
    /// than a writer takes to apply its steps.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Outbox {
        self.delay = delay;
        self
    }

    /// The queue notices go to.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The queue store notices go to.
    pub(crate) fn queues(&self) -> Arc<dyn QueueStore> {
        Arc::clone(&self.queues)
    }
}

/// The outbox's queue announces a writer's pending work: the notice is put
/// with the outbox's delay, and deleted once the writer finished.
impl Announce for Outbox {
    fn announce<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<Announced>> {
        Box::pin(async move {
            let sent = self
                .queues
                .put_message(
                    &self.queue,
                    &notice.to_text(None),
                    &PutMessageOptions::default().delay(self.delay),
                )
                .await?;
            Ok(Announced {
                id: sent.id,
                receipt: sent.pop_receipt,
            })
        })
    }

    fn withdraw<'a>(&'a self, announced: &'a Announced) -> BoxFuture<'a, Result<()>> {
        Box::pin(
            self.queues
                .delete_message(&self.queue, &announced.id, &announced.receipt),
        )
    }
}

impl<T> crate::table::Table<T> {
    /// Sends the notices of this table's changes that span partitions (see
    /// [`outbox`](crate::outbox)) to `outbox`'s queue, where an
    /// [`OutboxWorker`] finishes what a writer that stopped left undone.
    /// Without one, only the [sweeper](crate::outbox::sweep) does.
    pub fn with_outbox(mut self, outbox: Outbox) -> crate::table::Table<T> {
        self.outbox = Some(Arc::new(outbox));
        self
    }
}

/// The outbox a table's notices go to, if it has one.
pub(crate) fn outbox_of<T>(table: &crate::table::Table<T>) -> Option<&Outbox> {
    let announce: &dyn std::any::Any = table.outbox.as_deref()?;
    announce.downcast_ref::<Outbox>()
}

/// How an [`OutboxWorker`] works.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// Messages taken per get (1–32).
    pub batch: u32,
    /// How long a taken message stays hidden; the worker renews it every
    /// half of this while it works on it.
    pub visibility: Duration,
    /// A message taken more than this many times goes to the poison queue
    /// with its last error.
    pub max_dequeue: u32,
    /// How long the worker waits when the queue has nothing for it.
    pub idle_wait: Duration,
}

impl Default for WorkerConfig {
    /// 16 messages per get, hidden for 30 s, poison after 5 deliveries,
    /// 1 s between empty gets.
    fn default() -> WorkerConfig {
        WorkerConfig {
            batch: 16,
            visibility: Duration::from_secs(30),
            max_dequeue: 5,
            idle_wait: Duration::from_secs(1),
        }
    }
}

impl WorkerConfig {
    /// Sets the messages taken per get (1–32).
    #[must_use]
    pub fn batch(mut self, batch: u32) -> WorkerConfig {
        self.batch = batch;
        self
    }

    /// Sets how long a taken message stays hidden (renewed every half).
    #[must_use]
    pub fn visibility(mut self, visibility: Duration) -> WorkerConfig {
        self.visibility = visibility;
        self
    }

    /// Sets after how many deliveries a message is poison.
    #[must_use]
    pub fn max_dequeue(mut self, max_dequeue: u32) -> WorkerConfig {
        self.max_dequeue = max_dequeue;
        self
    }

    /// Sets the wait after a get that found nothing.
    #[must_use]
    pub fn idle_wait(mut self, idle_wait: Duration) -> WorkerConfig {
        self.idle_wait = idle_wait;
        self
    }
}

/// Counts of what a worker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Messages whose records were finished (or were finished already).
    pub applied: u64,
    /// Messages that failed and were left to come back.
    pub retried: u64,
    /// Messages moved to the poison queue, each counted once however often
    /// it was put there (a message whose delete failed comes back and is
    /// put again: the poison queue may hold it twice, with the same `id`).
    /// The worker remembers at most 4,096 such messages at a time; one that
    /// comes back after 4,096 others failed to be deleted counts again.
    pub poisoned: u64,
}

#[derive(Debug, Default)]
struct Counters {
    applied: AtomicU64,
    retried: AtomicU64,
    poisoned: AtomicU64,
    /// The messages set aside that may come back to be set aside again.
    may_return: parking_lot::Mutex<MayReturn>,
}

/// The ids of the messages set aside whose original may come back (its
/// delete failed, or whether the put reached the poison queue is unknown),
/// so that such a message counts once. An id leaves once its original is
/// deleted, so the set holds only messages still on the queue; and it keeps
/// at most [`MayReturn::CAP`] ids, dropping an old one for a new one past
/// that, so a queue whose deletes always fail cannot grow it without end.
/// A message whose id was dropped counts again when it comes back: a count
/// one too high, never a memory that grows for the worker's life.
#[derive(Debug, Default)]
struct MayReturn {
    ids: std::collections::HashSet<String>,
    order: std::collections::VecDeque<String>,
}

impl MayReturn {
    /// The most ids kept.
    const CAP: usize = 4096;

    fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    fn insert(&mut self, id: &str) {
        if self.ids.contains(id) {
            return;
        }
        if self.order.len() >= Self::CAP
            && let Some(oldest) = self.order.pop_front()
        {
            self.ids.remove(&oldest);
        }
        self.ids.insert(id.to_owned());
        self.order.push_back(id.to_owned());
    }

    fn remove(&mut self, id: &str) {
        if self.ids.remove(id) {
            self.order.retain(|kept| kept != id);
        }
    }
}

/// Finishes outbox records as their notices come due on a queue.
///
/// Each notice names an entity; the worker applies the steps of every
/// record of that entity and deletes them, then deletes the notice. A
/// notice that fails stays, and comes back when its visibility ends, with
/// its error written into it; one taken more than
/// [`max_dequeue`](WorkerConfig::max_dequeue) times goes to the poison queue
/// (`{queue}-poison`) with that error, for a person to look at. Steps are
/// fenced, so a notice delivered twice, or to two workers, does no harm.
///
/// ```
/// use std::sync::Arc;
/// use tablekit::outbox::OutboxWorker;
/// use tablekit::QueueStore;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tablekit::Result<()> {
/// let tables = Arc::new(tablekit_mem::MemBackend::new());
/// let queues = Arc::new(tablekit_mem::MemQueueStore::new());
/// let worker = OutboxWorker::new(tables, queues, "outbox");
/// worker.create_queues().await?;
/// // Runs until the future given resolves (ctrl-c, say), then stops after
/// // the messages in hand.
/// worker.run(async {}).await?;
/// assert_eq!(worker.stats().applied, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct OutboxWorker {
    tables: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    queue: String,
    config: WorkerConfig,
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
}

impl OutboxWorker {
    /// A worker for the notices of `queue`, applying steps to `tables`.
    pub fn new(
        tables: Arc<dyn TableBackend>,
        queues: Arc<dyn QueueStore>,
        queue: impl Into<String>,
    ) -> OutboxWorker {
        OutboxWorker {
            tables,
            queues,
            queue: queue.into(),
            config: WorkerConfig::default(),
            clock: Arc::new(SystemClock),
            counters: Arc::default(),
        }
    }

    /// Sets how the worker works.
    #[must_use]
    pub fn config(mut self, config: WorkerConfig) -> OutboxWorker {
        self.config = config;
        self
    }

    /// Sets the clock it waits on.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> OutboxWorker {
        self.clock = clock;
        self
    }

    /// The queue it takes notices from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Creates the queue and its poison queue, if they do not exist.
    pub async fn create_queues(&self) -> Result<()> {
        crate::validate::queue_name(&poison_queue_name(&self.queue))?;
        self.queues.create_queue(&self.queue).await?;
        self.queues
            .create_queue(&poison_queue_name(&self.queue))
            .await?;
        Ok(())
    }

    /// What the worker (and its clones) did so far.
    pub fn stats(&self) -> WorkerStats {
        WorkerStats {
            applied: self.counters.applied.load(Ordering::Relaxed),
            retried: self.counters.retried.load(Ordering::Relaxed),
            poisoned: self.counters.poisoned.load(Ordering::Relaxed),
        }
    }

    /// Takes one batch of messages and handles each; the number taken.
    pub async fn run_once(&self) -> Result<usize> {
        let messages = self
            .queues
            .get_messages(&self.queue, self.config.batch, self.config.visibility)
            .await?;
        let taken = messages.len();
        futures::future::join_all(messages.into_iter().map(|m| self.handle(m))).await;
        Ok(taken)
    }

    /// Works until `shutdown` resolves, then returns after the messages in
    /// hand are handled. A failure to reach the queue is retried after the
    /// idle wait, and never ends the run.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let shutdown = shutdown.fuse();
        futures::pin_mut!(shutdown);
        loop {
            if (&mut shutdown).now_or_never().is_some() {
                return Ok(());
            }
            let taken = match self.run_once().await {
                Ok(taken) => taken,
                Err(error) => {
                    tracing::warn!(queue = %self.queue, %error, "outbox worker cannot reach its queue");
                    0
                }
            };
            if taken == 0 {
                futures::select! {
                    () = self.clock.sleep(self.config.idle_wait).fuse() => {}
                    () = &mut shutdown => return Ok(()),
                }
            }
        }
    }

    /// Handles one message: finishes its entity's records, or records why
    /// not, or sets it aside as poison.
    async fn handle(&self, message: QueueMessage) {
        let span = tracing::info_span!(
            "tablekit::outbox::message",
            queue = %self.queue,
            id = %message.id,
            dequeue_count = message.dequeue_count,
        );
        async {
            let Some((notice, last_error)) = Notice::from_text(&message.text) else {
                self.poison(&message, "the message is not an outbox notice")
                    .await;
                return;
            };
            if message.dequeue_count > self.config.max_dequeue {
                let why = last_error.unwrap_or_else(|| "taken too many times".into());
                self.poison(&message, &why).await;
                return;
            }
            let (outcome, receipt) = self.finish_renewing(&notice, &message).await;
            match outcome {
                Ok(records) => {
                    tracing::debug!(records, "finished");
                    self.counters.applied.fetch_add(1, Ordering::Relaxed);
                    // Gone or taken by another worker since: it finishes
                    // nothing that is not finished.
                    let _ = self
                        .queues
                        .delete_message(&self.queue, &message.id, &receipt)
                        .await;
                }
                Err(error) => {
                    tracing::warn!(%error, "steps failed; the message comes back");
                    self.counters.retried.fetch_add(1, Ordering::Relaxed);
                    // Keep the error with the message, for the poison queue.
                    let _ = self
                        .queues
                        .update_message(
                            &self.queue,
                            &message.id,
                            &receipt,
                            self.config.visibility,
                            Some(&notice.to_text(Some(&error.to_string()))),
                        )
                        .await;
                }
            }
        }
        .instrument(span)
        .await;
    }

    /// Finishes the notice's records, renewing the message's visibility
    /// every half of it meanwhile; the outcome and the latest receipt.
    async fn finish_renewing(
        &self,
        notice: &Notice,
        message: &QueueMessage,
    ) -> (Result<usize>, String) {
        let mut receipt = message.pop_receipt.clone();
        let work = finish_entity(
            self.tables.as_ref(),
            &notice.table,
            &notice.partition_key,
            &notice.row_key,
        )
        .fuse();
        futures::pin_mut!(work);
        loop {
            let renew = self.clock.sleep(self.config.visibility / 2).fuse();
            futures::pin_mut!(renew);
            futures::select! {
                outcome = work => return (outcome, receipt),
                () = renew => {
                    match self
                        .queues
                        .update_message(&self.queue, &message.id, &receipt, self.config.visibility, None)
                        .await
                    {
                        Ok(update) => receipt = update.pop_receipt,
                        Err(error) => {
                            tracing::warn!(%error, "could not renew the message");
                        }
                    }
                }
            }
        }
    }

    /// Counts the message `id` as set aside, unless it was set aside
    /// before and came back.
    fn count_poisoned(&self, id: &str) {
        if !self.counters.may_return.lock().contains(id) {
            self.counters.poisoned.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes whether the original of the message `id`, set aside, may come
    /// back: it may unless it was `deleted`.
    fn set_aside(&self, id: &str, deleted: bool) {
        let mut may_return = self.counters.may_return.lock();
        if deleted {
            may_return.remove(id);
        } else {
            may_return.insert(id);
        }
    }

    /// Moves a message to the poison queue with `why`, then deletes it.
    async fn poison(&self, message: &QueueMessage, why: &str) {
        tracing::error!(why, "outbox message set aside as poison");
        crate::telemetry::poisoned();
        let text = json!({
            "id": message.id,
            "message": message.text,
            "error": why,
            "dequeue_count": message.dequeue_count,
        })
        .to_string();
        let poison = poison_queue_name(&self.queue);
        let put = self
            .queues
            .put_message(&poison, &text, &PutMessageOptions::default())
            .await;
        match put {
            Ok(_) => self.count_poisoned(&message.id),
            Err(error) => {
                if error.is_outcome_unknown() {
                    // It may be on the poison queue: counted now, so that
                    // its second put (the original comes back) counts once.
                    self.count_poisoned(&message.id);
                    self.set_aside(&message.id, false);
                }
                tracing::warn!(%error, "could not set the message aside; it comes back");
                return;
            }
        }
        let deleted = self
            .queues
            .delete_message(&self.queue, &message.id, &message.pop_receipt)
            .await;
        self.set_aside(&message.id, deleted.is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The set of messages that may come back holds only those not yet
    /// deleted, and never more than its cap.
    #[test]
    fn the_messages_that_may_come_back_are_bounded() {
        let mut set = MayReturn::default();
        set.insert("a");
        set.insert("a");
        assert_eq!(set.ids.len(), 1, "one id once");
        set.remove("a");
        assert!(!set.contains("a"));
        assert_eq!(
            (set.ids.len(), set.order.len()),
            (0, 0),
            "deleted: forgotten"
        );
        for i in 0..3 * MayReturn::CAP {
            set.insert(&i.to_string());
        }
        assert_eq!(
            (set.ids.len(), set.order.len()),
            (MayReturn::CAP, MayReturn::CAP)
        );
        assert!(!set.contains("0"), "the oldest went first");
        assert!(set.contains(&(3 * MayReturn::CAP - 1).to_string()));
        set.remove(&(3 * MayReturn::CAP - 1).to_string());
        assert_eq!(
            (set.ids.len(), set.order.len()),
            (MayReturn::CAP - 1, MayReturn::CAP - 1)
        );
    }

    #[test]
    fn notices_round_trip() {
        let notice = Notice {
            table: "Staff".into(),
            partition_key: "Sales \"q\"".into(),
            row_key: "EMP_1".into(),
        };
        assert_eq!(
            Notice::from_text(&notice.to_text(None)),
            Some((notice.clone(), None))
        );
        assert_eq!(
            Notice::from_text(&notice.to_text(Some("boom"))),
            Some((notice, Some("boom".to_owned())))
        );
        assert_eq!(Notice::from_text("not json"), None);
        assert_eq!(poison_queue_name("outbox"), "outbox-poison");
    }
}
