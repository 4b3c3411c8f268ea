//! The library's own upkeep: the background work that brings every
//! multi-row write back in step, whatever stopped its writer.
//!
//! A typed write that spans rows finishes its own work at once. But a
//! process can crash, and a caller's future can be dropped at any await
//! point (a client hangs up, a timeout fires). What such a write leaves is
//! always recorded in the store, and [`Upkeep`] finishes it:
//!
//! - **Outbox records** (changes kept in other partitions or tables: indexes
//!   kept elsewhere, moves) are finished by an [`OutboxWorker`] on the
//!   table's queue, and by a sweep of records older than
//!   [`record_age`](UpkeepConfig::record_age), for those whose notice was
//!   never put.
//! - **Fence rows** (which keep an older step from undoing a newer one) are
//!   removed once past [`fence_horizon`](UpkeepConfig::fence_horizon).
//! - **Orphan blobs** (uploaded for a write that never committed, or left
//!   by a write that replaced them) are deleted after
//!   [`blob_grace`](UpkeepConfig::blob_grace).
//! - **Expired entities** (of types with an `#[tablekit(expires)]` field)
//!   are deleted, up to [`expiry_batch`](UpkeepConfig::expiry_batch) per
//!   type each round ([`Table::sweep_expired`]).
//! - **Change feeds** (of kinds with `#[tablekit(changes)]`) are trimmed
//!   of the changes older than
//!   [`change_retention`](UpkeepConfig::change_retention) that every
//!   registered consumer has committed (see [`changes`](crate::changes)).
//!   A round reads the feed's directory, and only the partitions where
//!   something may be due: the upkeep remembers, of each partition it
//!   read, until when its oldest change is too young, or that its
//!   consumers must commit more first. So a round of an idle feed costs
//!   the directory's queries, however many partitions it has.
//!
//! Each round is logged (`tablekit::upkeep`, at `info` when it did
//! something, `warn` when a part failed) and counted ([`UpkeepStats`]).
//!
//! ```
//! use std::sync::Arc;
//! use tablekit::{Table, TableEntity};
//! use tablekit::upkeep::Upkeep;
//!
//! #[derive(TableEntity)]
//! #[tablekit(table = "Staff", kind = "EMP")]
//! struct Employee {
//!     #[tablekit(partition_key)]
//!     department: String,
//!     #[tablekit(row_key)]
//!     id: u32,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! let staff: Table<Employee> = Table::new(tablekit_mem::MemBackend::new());
//! staff.create_if_missing().await?;
//! // One call, with the defaults: a round every 30 seconds, on tokio.
//! let upkeep = Upkeep::new().watch(&staff).spawn();
//! // ... serve ...
//! let stats = upkeep.shutdown().await;
//! assert_eq!(stats.records_finished, 0);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;

use crate::backend::TableBackend;
use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::outbox::{OutboxWorker, WorkerConfig, WorkerStats};
use crate::pending;
use crate::schema::TableEntity;
use crate::table::Table;

/// How often and how carefully the upkeep works.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpkeepConfig {
    /// The time between two rounds.
    pub interval: Duration,
    /// Outbox records older than this are finished by the sweep (younger
    /// ones are left to their writer and their notice).
    pub record_age: Duration,
    /// Fence rows last moved longer ago than this (and before the oldest
    /// record still pending in any watched table) are removed. It must be
    /// longer than any writer or worker may stall between reading a record
    /// and applying its steps: a step that arrives after its fence is gone
    /// could undo a newer one. (A notice carries no steps, only the keys of
    /// the records to finish, so how long a queue message lives does not
    /// matter.)
    pub fence_horizon: Duration,
    /// Blobs no row references are deleted once this old. It must be
    /// longer than the longest write, since a blob is uploaded before its
    /// row is written.
    pub blob_grace: Duration,
    /// How the outbox workers work.
    pub worker: WorkerConfig,
    /// How long the change feed of a watched kind with
    /// `#[tablekit(changes)]` keeps its changes: older ones that every
    /// registered consumer has committed are trimmed
    /// ([`Changes::trim`](crate::changes::Changes::trim)).
    pub change_retention: Duration,
    /// How long a registered consumer that has not committed them holds
    /// changes back: older ones are trimmed all the same, and the consumer
    /// is told by its next poll
    /// ([`Changes::trim_with_limit`](crate::changes::Changes::trim_with_limit)).
    /// `None` (the default): as long as it stays registered.
    pub change_limit: Option<Duration>,
    /// How many expired entities of each watched type a round deletes at
    /// most ([`Table::sweep_expired`]); the rest go in the next rounds.
    pub expiry_batch: usize,
}

impl Default for UpkeepConfig {
    /// A round every 30 s; records finished after 60 s; fences removed
    /// after a day; orphan blobs deleted after an hour; changes kept for a
    /// day; up to 10,000 expired entities of each type deleted a round
    /// (about 29 million a day, well above what one table's writes make).
    fn default() -> UpkeepConfig {
        UpkeepConfig {
            interval: Duration::from_secs(30),
            record_age: Duration::from_secs(60),
            fence_horizon: Duration::from_secs(24 * 3600),
            blob_grace: Duration::from_secs(3600),
            worker: WorkerConfig::default(),
            change_retention: Duration::from_secs(24 * 3600),
            change_limit: None,
            expiry_batch: 10_000,
        }
    }
}

impl UpkeepConfig {
    /// Sets how many expired entities of each type a round deletes at most.
    #[must_use]
    pub fn expiry_batch(mut self, batch: usize) -> UpkeepConfig {
        self.expiry_batch = batch;
        self
    }

    /// Sets the time between two rounds.
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> UpkeepConfig {
        self.interval = interval;
        self
    }

    /// Sets the age past which the sweep finishes an outbox record.
    #[must_use]
    pub fn record_age(mut self, age: Duration) -> UpkeepConfig {
        self.record_age = age;
        self
    }

    /// Sets the age past which a fence row is removed.
    #[must_use]
    pub fn fence_horizon(mut self, horizon: Duration) -> UpkeepConfig {
        self.fence_horizon = horizon;
        self
    }

    /// Sets the age past which an orphan blob is deleted.
    #[must_use]
    pub fn blob_grace(mut self, grace: Duration) -> UpkeepConfig {
        self.blob_grace = grace;
        self
    }

    /// Sets how the outbox workers work.
    #[must_use]
    pub fn worker(mut self, worker: WorkerConfig) -> UpkeepConfig {
        self.worker = worker;
        self
    }

    /// Sets how long change feeds keep their changes.
    #[must_use]
    pub fn change_retention(mut self, retention: Duration) -> UpkeepConfig {
        self.change_retention = retention;
        self
    }

    /// Sets how long a registered consumer may hold changes back (see
    /// [`change_limit`](UpkeepConfig::change_limit)).
    #[must_use]
    pub fn change_limit(mut self, limit: Option<Duration>) -> UpkeepConfig {
        self.change_limit = limit;
        self
    }
}

/// Counts of what an upkeep did, over all its rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpkeepStats {
    /// Rounds run.
    pub rounds: u64,
    /// Outbox records finished by the sweep.
    pub records_finished: u64,
    /// Fence rows removed.
    pub fences_removed: u64,
    /// Orphan blobs deleted.
    pub blobs_removed: u64,
    /// Changes trimmed from change feeds.
    pub changes_trimmed: u64,
    /// Expired entities deleted.
    pub expired_deleted: u64,
    /// Parts of rounds that failed (each logged; tried again next round).
    pub failures: u64,
    /// What the outbox workers did.
    pub worker: WorkerStats,
}

/// What one round did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RoundReport {
    /// Outbox records finished.
    pub records_finished: usize,
    /// Outbox records still pending after the round, per table: younger
    /// than the age, or failed.
    pub pending: BTreeMap<String, usize>,
    /// Fence rows removed.
    pub fences_removed: usize,
    /// Orphan blobs deleted.
    pub blobs_removed: usize,
    /// Changes trimmed from change feeds.
    pub changes_trimmed: usize,
    /// Expired entities deleted.
    pub expired_deleted: usize,
    /// What failed, as text (each part is tried again next round).
    pub failures: Vec<String>,
}

#[derive(Debug, Default)]
struct Counters {
    rounds: AtomicU64,
    records_finished: AtomicU64,
    fences_removed: AtomicU64,
    blobs_removed: AtomicU64,
    changes_trimmed: AtomicU64,
    expired_deleted: AtomicU64,
    failures: AtomicU64,
}

type BlobSweep = Arc<dyn Fn(Duration) -> BoxFuture<'static, Result<usize>> + Send + Sync>;

/// A trim of one kind's change feed, given the retention; how many changes
/// it deleted.
type Trim =
    Arc<dyn Fn(Duration, Option<Duration>) -> BoxFuture<'static, Result<usize>> + Send + Sync>;

/// A sweep of one type's expired entities, given how many it may delete;
/// how many it deleted.
type ExpirySweep = Arc<dyn Fn(usize) -> BoxFuture<'static, Result<usize>> + Send + Sync>;

/// One table the upkeep looks after.
#[derive(Clone)]
struct Watched {
    backend: Arc<dyn TableBackend>,
    table: Arc<str>,
    /// Whether its own writes leave outbox records (rather than being only
    /// the target of other tables' steps, where fences live).
    records: bool,
    /// The orphan-blob sweeps of the entity types written to it, one per
    /// type (each type keeps its blobs under a prefix of its kind).
    blobs: Vec<(std::any::TypeId, BlobSweep)>,
    /// The change feeds of the kinds written to it that record changes.
    trims: Vec<(std::any::TypeId, Trim)>,
    /// The sweeps of the types written to it whose entities expire.
    expiries: Vec<(std::any::TypeId, ExpirySweep)>,
}

/// The background upkeep of a set of tables: see the [module](self).
///
/// Build it with [`watch`](Upkeep::watch) for every typed table whose
/// writes span rows, then [`spawn`](Upkeep::spawn) it on tokio (or call
/// [`run_round`](Upkeep::run_round) from a scheduler of your own). Several
/// processes may run it on the same tables: every step it takes is fenced
/// or guarded by an ETag, so racing upkeeps do no harm.
#[derive(Clone)]
pub struct Upkeep {
    watched: Vec<Watched>,
    workers: Vec<OutboxWorker>,
    config: UpkeepConfig,
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
}

impl fmt::Debug for Upkeep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upkeep")
            .field(
                "tables",
                &self.watched.iter().map(|w| &*w.table).collect::<Vec<_>>(),
            )
            .field("workers", &self.workers.len())
            .field("config", &self.config)
            .finish()
    }
}

impl Default for Upkeep {
    fn default() -> Upkeep {
        Upkeep::new()
    }
}

impl Upkeep {
    /// An upkeep of nothing yet, with the [default](UpkeepConfig::default)
    /// configuration and the system's clock.
    pub fn new() -> Upkeep {
        Upkeep {
            watched: Vec::new(),
            workers: Vec::new(),
            config: UpkeepConfig::default(),
            clock: Arc::new(SystemClock),
            counters: Arc::default(),
        }
    }

    /// Sets how it works.
    #[must_use]
    pub fn config(mut self, config: UpkeepConfig) -> Upkeep {
        self.config = config;
        self
    }

    /// Sets the clock it reads ages from and waits on.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Upkeep {
        self.clock = clock;
        self
    }

    /// Looks after `table`: its outbox records (with a worker on its
    /// [outbox](Table::with_outbox)'s queue, if it has one), the fences its
    /// steps leave in the tables they reach, and its orphan blobs (if its
    /// type has blob fields and the table a blob store). Watching a table
    /// twice, or two tables with the same outbox queue, runs one worker.
    #[must_use]
    pub fn watch<T: TableEntity + 'static>(mut self, table: &Table<T>) -> Upkeep {
        let backend = Arc::clone(table.backend());
        let blobs: Vec<(std::any::TypeId, BlobSweep)> =
            if !crate::table::offload::blob_fields::<T>().is_empty() && table.has_blob_store() {
                let table = table.clone();
                let sweep: BlobSweep = Arc::new(move |grace: Duration| {
                    let table = table.clone();
                    async move { table.sweep_orphan_blobs(grace).await }.boxed()
                });
                vec![(std::any::TypeId::of::<T>(), sweep)]
            } else {
                Vec::new()
            };
        let trims: Vec<(std::any::TypeId, Trim)> = if T::DESCRIPTOR.write_needs().changes {
            let table = table.clone();
            // What each round learns of the partitions, for the next: a
            // round reads only those where something may be due.
            let memo = Arc::new(parking_lot::Mutex::new(crate::changes::TrimMemo::default()));
            let trim: Trim = Arc::new(move |retention: Duration, limit: Option<Duration>| {
                let (table, memo) = (table.clone(), Arc::clone(&memo));
                async move {
                    // Out of the lock while the trim runs (a round that
                    // overlaps this one starts from nothing known).
                    let mut known = std::mem::take(&mut *memo.lock());
                    let trimmed = table
                        .feed()
                        .trim_remembering(retention, limit, &mut known)
                        .await;
                    *memo.lock() = known;
                    Ok(trimmed?.removed)
                }
                .boxed()
            });
            vec![(std::any::TypeId::of::<T>(), trim)]
        } else {
            Vec::new()
        };
        let expiries: Vec<(std::any::TypeId, ExpirySweep)> =
            if crate::schema::expiry_property::<T>().is_some() {
                let table = table.clone();
                let sweep: ExpirySweep = Arc::new(move |limit: usize| {
                    let table = table.clone();
                    async move { Ok(table.sweep_expired(limit).await?.deleted) }.boxed()
                });
                vec![(std::any::TypeId::of::<T>(), sweep)]
            } else {
                Vec::new()
            };
        self.add(Watched {
            backend: Arc::clone(&backend),
            table: table.name().into(),
            records: true,
            blobs,
            trims,
            expiries,
        });
        for def in crate::index::remote_indexes::<T>() {
            self.add(Watched {
                backend: Arc::clone(&backend),
                table: def.table.unwrap_or(table.name()).into(),
                records: false,
                blobs: Vec::new(),
                trims: Vec::new(),
                expiries: Vec::new(),
            });
        }
        if let Some(outbox) = crate::outbox::outbox_of(table) {
            let known = self.workers.iter().any(|w| w.queue() == outbox.queue());
            if !known {
                let worker = OutboxWorker::new(backend, outbox.queues(), outbox.queue())
                    .config(self.config.worker.clone())
                    .clock(Arc::clone(&self.clock));
                self.workers.push(worker);
            }
        }
        self
    }

    fn add(&mut self, watched: Watched) {
        match self.watched.iter_mut().find(|w| w.table == watched.table) {
            Some(known) => {
                known.records |= watched.records;
                for (kind, sweep) in watched.blobs {
                    if !known.blobs.iter().any(|(k, _)| *k == kind) {
                        known.blobs.push((kind, sweep));
                    }
                }
                for (kind, trim) in watched.trims {
                    if !known.trims.iter().any(|(k, _)| *k == kind) {
                        known.trims.push((kind, trim));
                    }
                }
                for (kind, sweep) in watched.expiries {
                    if !known.expiries.iter().any(|(k, _)| *k == kind) {
                        known.expiries.push((kind, sweep));
                    }
                }
            }
            None => self.watched.push(watched),
        }
    }

    /// The tables it looks after.
    pub fn tables(&self) -> impl Iterator<Item = &str> {
        self.watched.iter().map(|w| &*w.table)
    }

    /// What it did so far (over every round, and its workers).
    pub fn stats(&self) -> UpkeepStats {
        let mut worker = WorkerStats::default();
        for w in &self.workers {
            let s = w.stats();
            worker.applied += s.applied;
            worker.retried += s.retried;
            worker.poisoned += s.poisoned;
        }
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        UpkeepStats {
            rounds: load(&self.counters.rounds),
            records_finished: load(&self.counters.records_finished),
            fences_removed: load(&self.counters.fences_removed),
            blobs_removed: load(&self.counters.blobs_removed),
            changes_trimmed: load(&self.counters.changes_trimmed),
            expired_deleted: load(&self.counters.expired_deleted),
            failures: load(&self.counters.failures),
            worker,
        }
    }

    /// The outbox records not yet finished, per watched table: the work a
    /// writer committed and that is still to reach other rows.
    pub async fn pending(&self) -> Result<BTreeMap<String, usize>> {
        let mut pending = BTreeMap::new();
        for watched in self.watched.iter().filter(|w| w.records) {
            let count = pending::pending_count(watched.backend.as_ref(), &watched.table).await?;
            pending.insert(watched.table.to_string(), count);
        }
        Ok(pending)
    }

    /// Runs one round over every watched table: the sweep of outbox records
    /// older than the age, the fences past the horizon, the orphan blobs
    /// past the grace. A part that fails is logged, counted and reported,
    /// and the round goes on.
    pub async fn run_round(&self) -> RoundReport {
        self.round_with(
            self.config.record_age,
            self.config.fence_horizon,
            self.config.blob_grace,
        )
        .await
    }

    /// Finishes everything now, whatever its age: every outbox record, every
    /// fence nothing pending needs, every blob no row references. For tests
    /// and for a store no writer uses at the moment; with writers running,
    /// a blob being uploaded for a write may be taken for an orphan, and a
    /// record may be finished while its writer finishes it too (harmless).
    pub async fn run_round_now(&self) -> RoundReport {
        self.round_with(Duration::ZERO, Duration::ZERO, Duration::ZERO)
            .await
    }

    async fn round_with(&self, age: Duration, horizon: Duration, grace: Duration) -> RoundReport {
        let mut report = RoundReport::default();
        let now = self.clock.now();
        // Fences may go only once no step that could still arrive is older:
        // before the oldest record left pending in any watched table.
        let mut cutoff = now
            .checked_sub(horizon)
            .unwrap_or(crate::datetime::DateTime::MIN);
        // Records first: finishing them may leave fences and orphan blobs
        // that the same round then removes.
        for watched in self.watched.iter().filter(|w| w.records) {
            match pending::sweep(
                watched.backend.as_ref(),
                &watched.table,
                age,
                None,
                self.clock.as_ref(),
            )
            .await
            {
                Ok(sweep) => {
                    report.records_finished += sweep.finished;
                    let pending = sweep.young + sweep.failed.len();
                    report.pending.insert(watched.table.to_string(), pending);
                    if let Some(oldest) = sweep.oldest_pending {
                        cutoff = cutoff.min(oldest);
                    }
                    for (record, error) in sweep.failed {
                        report.failures.push(format!(
                            "outbox record {:?} of table {}: {error}",
                            record.row_key, watched.table
                        ));
                    }
                }
                Err(error) => {
                    // Nothing known of what is pending: keep every fence.
                    cutoff = crate::datetime::DateTime::MIN;
                    report
                        .failures
                        .push(format!("outbox sweep of table {}: {error}", watched.table));
                }
            }
        }
        for watched in &self.watched {
            // Counted as they go: a failed delete keeps the count of the
            // others.
            let mut removed = 0;
            let result = pending::remove_fences_counting(
                watched.backend.as_ref(),
                &watched.table,
                cutoff,
                &mut removed,
            )
            .await;
            report.fences_removed += removed;
            if let Err(error) = result {
                report
                    .failures
                    .push(format!("fences of table {}: {error}", watched.table));
            }
            for (_, sweep) in &watched.blobs {
                match sweep(grace).await {
                    Ok(removed) => report.blobs_removed += removed,
                    Err(error) => report
                        .failures
                        .push(format!("orphan blobs of table {}: {error}", watched.table)),
                }
            }
            for (_, trim) in &watched.trims {
                match trim(self.config.change_retention, self.config.change_limit).await {
                    Ok(trimmed) => report.changes_trimmed += trimmed,
                    Err(error) => report
                        .failures
                        .push(format!("change feed of table {}: {error}", watched.table)),
                }
            }
            for (_, sweep) in &watched.expiries {
                match sweep(self.config.expiry_batch).await {
                    Ok(deleted) => report.expired_deleted += deleted,
                    Err(error) => report.failures.push(format!(
                        "expired entities of table {}: {error}",
                        watched.table
                    )),
                }
            }
        }
        self.count(&report);
        report
    }

    fn count(&self, report: &RoundReport) {
        let add = |c: &AtomicU64, n: usize| c.fetch_add(n as u64, Ordering::Relaxed);
        add(&self.counters.rounds, 1);
        add(&self.counters.records_finished, report.records_finished);
        add(&self.counters.fences_removed, report.fences_removed);
        add(&self.counters.blobs_removed, report.blobs_removed);
        add(&self.counters.changes_trimmed, report.changes_trimmed);
        add(&self.counters.expired_deleted, report.expired_deleted);
        add(&self.counters.failures, report.failures.len());
        for failure in &report.failures {
            tracing::warn!(target: "tablekit::upkeep", %failure, "upkeep: a part failed; it is tried again next round");
        }
        crate::telemetry::upkeep_round(
            report.records_finished,
            report.fences_removed,
            report.blobs_removed,
            report.pending.iter().map(|(table, n)| (table.as_str(), *n)),
        );
        let pending: usize = report.pending.values().sum();
        let did = report.records_finished
            + report.fences_removed
            + report.blobs_removed
            + report.expired_deleted;
        if did > 0 {
            tracing::info!(
                target: "tablekit::upkeep",
                records_finished = report.records_finished,
                fences_removed = report.fences_removed,
                blobs_removed = report.blobs_removed,
                expired_deleted = report.expired_deleted,
                pending,
                "upkeep round"
            );
        } else {
            tracing::debug!(target: "tablekit::upkeep", pending, "upkeep round: nothing to do");
        }
    }

    /// Creates the workers' queues (and their poison queues) if missing.
    pub async fn create_queues(&self) -> Result<()> {
        for worker in &self.workers {
            worker.create_queues().await?;
        }
        Ok(())
    }

    /// Runs until `shutdown` resolves: the outbox workers all along, and a
    /// round every [`interval`](UpkeepConfig::interval) (the first at once).
    /// The workers' queues are created first; a failure to create them is
    /// logged and tried again by the workers' own retries.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        if let Err(error) = self.create_queues().await {
            tracing::warn!(target: "tablekit::upkeep", %error, "upkeep could not create its queues");
        }
        let (stop, stopped) = futures::channel::oneshot::channel::<()>();
        let stopped = stopped.shared();
        let workers = futures::future::join_all(self.workers.iter().map(|worker| {
            let stopped = stopped.clone();
            async move {
                let _ = worker.run(stopped.map(drop)).await;
            }
        }));
        let rounds = async {
            loop {
                self.run_round().await;
                futures::select! {
                    () = self.clock.sleep(self.config.interval).fuse() => {}
                    _ = stopped.clone().fuse() => return,
                }
            }
        };
        let shutdown = async {
            shutdown.await;
            let _ = stop.send(());
        };
        futures::future::join3(workers, rounds, shutdown).await;
    }

    /// Runs it as a tokio task ([`run`](Upkeep::run)) until the handle's
    /// [`shutdown`](UpkeepHandle::shutdown) (or the handle is dropped).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(self) -> UpkeepHandle {
        let (stop, stopped) = futures::channel::oneshot::channel::<()>();
        let upkeep = self.clone();
        let task = tokio::spawn(async move {
            upkeep.run(stopped.map(drop)).await;
        });
        UpkeepHandle {
            upkeep: self,
            stop: Some(stop),
            task: Some(task),
        }
    }
}

/// A running [`Upkeep`]: stops it when shut down or dropped.
#[derive(Debug)]
pub struct UpkeepHandle {
    upkeep: Upkeep,
    stop: Option<futures::channel::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl UpkeepHandle {
    /// What it did so far.
    pub fn stats(&self) -> UpkeepStats {
        self.upkeep.stats()
    }

    /// The upkeep it runs (for [`pending`](Upkeep::pending) counts, or a
    /// round run now).
    pub fn upkeep(&self) -> &Upkeep {
        &self.upkeep
    }

    /// Stops it after the work in hand; what it did.
    pub async fn shutdown(mut self) -> UpkeepStats {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take()
            && let Err(error) = task.await
        {
            tracing::warn!(target: "tablekit::upkeep", %error, "the upkeep task ended badly");
        }
        self.upkeep.stats()
    }
}

impl Drop for UpkeepHandle {
    fn drop(&mut self) {
        // The task sees its channel closed and stops after the work in hand.
        self.stop.take();
    }
}

/// What the upkeep has still to do in one table, read from the rows it
/// works from (it keeps no state of its own in the store): see
/// [`pending_work`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingWork {
    /// Outbox records not finished yet (writes across partitions whose
    /// later steps wait).
    pub outbox_records: usize,
    /// Rows of the expiry indexes: entities that will expire.
    pub expiring: usize,
    /// Of those, the ones due at `now`: expired entities the sweep has yet
    /// to delete.
    pub expired: usize,
}

/// What the upkeep has still to do in `table` at `now`: its outbox records
/// (one read of their RowKeys across the table) and the rows of its
/// expiry indexes (one range of partitions). For a program that shows a
/// store, or an operator's check that the upkeep keeps up.
pub async fn pending_work(
    backend: &dyn TableBackend,
    table: &str,
    now: crate::datetime::DateTime,
) -> Result<PendingWork> {
    use crate::backend::{Query, TableBackendExt};
    use crate::filter::Filter;
    let outbox_records = pending::pending_count(backend, table).await?;
    let start = crate::schema::EXPIRY_PARTITIONS;
    let end = crate::keyorder::prefix_end(start).unwrap_or_default();
    let mut query =
        Query::new().filter(Filter::partition_key().ge(start) & Filter::partition_key().lt(end));
    query.select = Some(vec!["PartitionKey".into(), "RowKey".into()]);
    let rows = backend.query_all(table, query).await?;
    let due = |rk: &str| {
        let ticks = rk.strip_prefix(pending::EXPIRY_PREFIX)?.split('|').next()?;
        Some(ticks.parse::<i64>().ok()? <= now.ticks())
    };
    Ok(PendingWork {
        outbox_records,
        expiring: rows.len(),
        expired: rows
            .iter()
            .filter(|r| due(&r.row_key) == Some(true))
            .count(),
    })
}
