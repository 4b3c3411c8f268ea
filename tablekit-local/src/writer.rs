//! The writer: one thread that runs every write of a store, so that no
//! engine commit (and no sync of the file) runs on an async runtime's
//! worker, and so that writes that arrive together share one commit.
//!
//! # Group commit
//! A write is a job sent to the thread. The thread takes every job waiting
//! (up to [`MAX_GROUP`]), runs them one after another in one engine
//! transaction, and commits it to the engine without a sync. That commit is
//! not durable yet, and readers are not shown it: they read the last state
//! made durable ([`LocalStorage::begin_read`]).
//!
//! A second thread, the *syncer* ([`Syncer`]), makes groups durable: it
//! takes every group committed since its last sync, writes their changes to
//! the journal as one record ([`crate::journal`]), syncs it, shows readers
//! the state after them, and only then answers their jobs. A write is
//! therefore acknowledged once it is durable and readable, and the writer
//! runs the next groups while the journal syncs: one sync serves every
//! write that came while the last one ran. A lone writer, with nothing to
//! run meanwhile, syncs its group itself.
//!
//! **A sync that fails** leaves the groups in its record refused, and the
//! groups committed after them ran on writes that never became durable:
//! they are refused too. The record is taken back, so that no replay applies
//! it, and the engine's commits since its last checkpoint are discarded (it
//! writes nothing more, and the next operation opens it again on its file
//! and the journal: [`LocalStorage::discard_unsynced`]).
//!
//! Work that needs the engine to itself (a compaction,
//! [`LocalStorage::compact`]) is sent to the thread too, and runs between
//! two groups, when no write is under way.
//!
//! Jobs run in the order they were sent, each on the state the jobs before
//! it left, so a write decides on everything committed before it and on the
//! writes grouped ahead of it: ETag checks, inserts of existing rows and
//! transactions keep their meaning, as if each job had its own commit.
//!
//! **A job that fails.** A job's error (a condition not met, a missing
//! table) may come after it changed the transaction, and the engine has no
//! way to take back a part of a transaction. The thread then drops the
//! whole transaction and runs the group again without that job: jobs are
//! functions of the state they run on, so the others decide again on the
//! state they will be committed on. The failed job is answered with its
//! error once the group is committed; if the commit fails, it is answered
//! with the commit's error instead, since the state it failed on was never
//! committed.
//!
//! **A dropped future** has either not sent its job (nothing is written) or
//! sent it, and the job then runs to its end: a write is applied completely
//! or not at all, whatever poll its future is dropped at. A job counts as
//! [`InFlight`] until it is answered, so that a program can wait for the
//! writes its dropped futures left running.
//!
//! Written by hand: the engine (redb) commits one transaction at a time and
//! has no group commit of its own, and channels and two threads are all it
//! takes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use redb::{Durability, WriteTransaction};
use tablekit_core::backend::InFlight;
use tablekit_core::{Error, Result, StorageFailure};
use tokio::sync::oneshot;

use crate::journal::{Appended, Journal};
use crate::logged::Txn;
use crate::{LocalStorage, io_error, mark_checkpoint, set_durability};

/// The most jobs one commit takes: a bound on the work a failed job makes
/// the thread do again, and on how long the first job of a group waits.
const MAX_GROUP: usize = 128;

/// What a store's writer thread has done since the store was opened: see
/// [`LocalStorage::write_stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WriteStats {
    /// Writes the writer thread has taken (committed or refused).
    pub writes: u64,
    /// Groups of writes committed: each one record appended to the journal
    /// and one sync (or a checkpoint, see `checkpoints`), fewer
    /// than the writes when writes shared them. A group that changed
    /// nothing (a read of an empty queue, say) is not committed.
    pub commits: u64,
    /// Groups of writes run again without a write that failed in them.
    pub reruns: u64,
    /// Records of the journal the last open (or a reopen after a failed
    /// write) applied again: groups of writes acknowledged before a crash
    /// that the engine's file did not hold yet. Zero after a clean close.
    pub replayed: u64,
    /// Checkpoints: commits of the engine made durable with its own sync,
    /// each when the journal was full or the engine held 512 changes since
    /// the last (the writes of the group that found it so ride on it).
    pub checkpoints: u64,
}

/// The counters behind [`WriteStats`].
#[derive(Default)]
pub(crate) struct Counters {
    writes: AtomicU64,
    commits: AtomicU64,
    reruns: AtomicU64,
    pub(crate) replayed: AtomicU64,
    checkpoints: AtomicU64,
}

/// A write waiting for the writer thread.
pub(crate) trait Job: Send {
    /// Runs the write in `txn`. An error means the job may have changed
    /// `txn` half way: the transaction must not be committed.
    fn run(&mut self, store: &LocalStorage, txn: &Txn<'_>) -> Result<()>;

    /// Answers the job's caller: `Ok` if the job ran and was committed,
    /// otherwise why not.
    fn answer(self: Box<Self>, outcome: Result<()>);
}

/// A job whose write `op` returns a `T`.
struct Pending<F, T> {
    op: F,
    value: Option<T>,
    reply: oneshot::Sender<Result<T>>,
    /// Counted from its sending to its answer: it may outlive its caller.
    _in_flight: InFlight,
}

impl<F, T> Job for Pending<F, T>
where
    F: FnMut(&LocalStorage, &Txn<'_>) -> Result<T> + Send,
    T: Send,
{
    fn run(&mut self, store: &LocalStorage, txn: &Txn<'_>) -> Result<()> {
        self.value = Some((self.op)(store, txn)?);
        Ok(())
    }

    fn answer(self: Box<Self>, outcome: Result<()>) {
        let answer = match (outcome, self.value) {
            (Ok(()), Some(value)) => Ok(value),
            (Err(e), _) => Err(e),
            (Ok(()), None) => Err(Error::Storage {
                path: String::new(),
                failure: StorageFailure::Io,
                message: "the writer answered a write it did not run".into(),
            }),
        };
        // The caller may have stopped waiting (its future was dropped): the
        // write is done all the same.
        let _ = self.reply.send(answer);
    }
}

/// What the writer thread is sent.
pub(crate) enum Message {
    /// A write.
    Write(Box<dyn Job>),
    /// Work run between two groups, when no write is under way.
    Between(Box<dyn FnOnce(&LocalStorage) + Send>),
}

/// The writer thread of a writable store, stopped (after the jobs sent) when
/// the last handle of the store is dropped.
pub(crate) struct Writer {
    jobs: Option<mpsc::Sender<Message>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer thread of `store` (a handle without a writer: the
    /// thread holds the store open until it stops).
    pub(crate) fn start(store: LocalStorage) -> std::io::Result<Writer> {
        let (jobs, queue) = mpsc::channel::<Message>();
        let mut syncer = Syncer::start(&store)?;
        let thread = std::thread::Builder::new()
            .name("tablekit-local writer".into())
            .spawn(move || {
                let mut inbox = Inbox { queue, next: None };
                while let Some(first) = inbox.recv() {
                    let (mut group, mut between) = (Vec::new(), None);
                    match first {
                        Message::Write(job) => group.push(job),
                        Message::Between(work) => between = Some(work),
                    }
                    // Such work ends the group: the writes sent after it
                    // wait for it.
                    while between.is_none() && !group.is_empty() && group.len() < MAX_GROUP {
                        match inbox.try_recv() {
                            Some(Message::Write(job)) => group.push(job),
                            Some(Message::Between(work)) => between = Some(work),
                            None => break,
                        }
                    }
                    if !group.is_empty() {
                        store.commit_group(group, &mut syncer, &mut inbox);
                    }
                    if let Some(work) = between {
                        // Every write before the work is durable first.
                        let _ = syncer.drain(&store);
                        work(&store);
                    }
                }
                let _ = syncer.drain(&store);
                syncer.stop();
                // Closed cleanly: the next open has nothing to replay.
                if let Err(e) = store.guarded(|| store.close_journal()) {
                    tracing::warn!(error = %e, "the store's last checkpoint failed; the next open replays its journal");
                }
            })?;
        Ok(Writer {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }
}

/// The writer thread's queue, with a message taken early (to see whether
/// one waits) kept for the next group.
struct Inbox {
    queue: mpsc::Receiver<Message>,
    next: Option<Message>,
}

impl Inbox {
    /// The next message, waiting for one; `None` once every handle is gone.
    fn recv(&mut self) -> Option<Message> {
        self.next.take().or_else(|| self.queue.recv().ok())
    }

    /// The next message if one waits.
    fn try_recv(&mut self) -> Option<Message> {
        self.next.take().or_else(|| self.queue.try_recv().ok())
    }

    /// Whether a message waits.
    fn is_empty(&mut self) -> bool {
        if self.next.is_none() {
            self.next = self.queue.try_recv().ok();
        }
        self.next.is_none()
    }
}

/// A group of writes committed to the engine and not durable yet: once
/// its changes are in the journal and synced, readers are shown `snapshot`
/// and its jobs are answered.
struct Unsynced {
    group: Vec<Box<dyn Job>>,
    failed: Vec<(Box<dyn Job>, Error)>,
    commit: Commit,
    /// The writer's [`Syncer::epoch`] when the group ran.
    epoch: u64,
}

/// A group's commit to the engine, not durable yet.
#[derive(Default)]
struct Commit {
    /// The group's changes, as the journal stores them; empty when it
    /// changed nothing, and only waits for the groups before it.
    changes: Vec<u8>,
    /// The engine's state after the group; `None` when it changed nothing.
    snapshot: Option<Arc<crate::snapshot::Published>>,
    /// The room in the journal kept for `changes`.
    reserved: u64,
}

/// What the syncer did with the groups it took at once.
struct Synced {
    groups: usize,
    reserved: u64,
    /// Why they are not durable, if they are not.
    failure: Option<Error>,
}

/// The writer's side of the thread that makes groups durable (the
/// *syncer*), so that the writer runs the next groups while the journal
/// syncs.
///
/// The syncer takes every group waiting at once and writes their changes
/// as one record of the journal (a record is whole or absent after a crash,
/// so records reach the disk in order), syncs it, shows readers the last
/// group's state, and answers the groups in order. When a sync fails, the
/// groups after it ran on writes that never became durable: the syncer
/// fails every group of the same epoch, and the writer, once told, discards
/// the engine's commits since the last checkpoint
/// ([`LocalStorage::discard_unsynced`]) and starts a new epoch.
struct Syncer {
    groups: Option<mpsc::Sender<Unsynced>>,
    done: mpsc::Receiver<Synced>,
    /// Groups sent whose [`Synced`] is not taken yet.
    pending: usize,
    /// The journal room they keep.
    reserved: u64,
    epoch: u64,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    fn start(store: &LocalStorage) -> std::io::Result<Syncer> {
        let (groups, queue) = mpsc::channel::<Unsynced>();
        let (report, done) = mpsc::channel();
        let store = store.clone();
        let thread = std::thread::Builder::new()
            .name("tablekit-local sync".into())
            .spawn(move || store.run_syncer(&queue, &report))?;
        Ok(Syncer {
            groups: Some(groups),
            done,
            pending: 0,
            reserved: 0,
            epoch: 0,
            thread: Some(thread),
        })
    }

    /// Hands `unsynced` to the syncer; if it is gone, makes it durable
    /// here.
    fn send(&mut self, store: &LocalStorage, unsynced: Unsynced) {
        let reserved = unsynced.commit.reserved;
        let returned = match &self.groups {
            Some(groups) => groups.send(unsynced).err().map(|e| e.0),
            None => Some(unsynced),
        };
        match returned {
            None => {
                self.pending += 1;
                self.reserved += reserved;
            }
            Some(unsynced) => {
                // The syncer's thread is gone: made durable here.
                let synced = store.sync_groups(vec![unsynced], &mut None);
                let _ = self.record(store, synced);
            }
        }
    }

    /// Takes what the syncer reported: waiting for all of it if `all`.
    /// `Err` if a group failed since the last call.
    fn take(&mut self, store: &LocalStorage, all: bool) -> Result<()> {
        let mut outcome = Ok(());
        while self.pending > 0 {
            // After a failure, the groups still held fail too: waited for,
            // so that the engine is opened again without them.
            let all = all || outcome.is_err();
            let synced = if all {
                self.done.recv().ok()
            } else {
                self.done.try_recv().ok()
            };
            let Some(synced) = synced else {
                if all {
                    // The syncer's thread is gone (it never panics on
                    // purpose), and with it the jobs it held, answered as
                    // gone: nothing it held is durable. Later groups are
                    // made durable on this thread.
                    self.groups = None;
                    self.pending = 0;
                    self.reserved = 0;
                    store.shared.unsynced.store(0, Ordering::Release);
                    store.discard_unsynced();
                    self.epoch += 1;
                    outcome = Err(store.writer_gone());
                }
                break;
            };
            self.pending -= synced.groups;
            self.reserved -= synced.reserved;
            if let Err(e) = self.record(store, synced)
                && outcome.is_ok()
            {
                outcome = Err(e);
            }
        }
        outcome
    }

    /// Waits until every group sent is durable (or failed).
    fn drain(&mut self, store: &LocalStorage) -> Result<()> {
        self.take(store, true)
    }

    /// Acts on a report: after a failure, the engine's commits since the
    /// last checkpoint are discarded and a new epoch starts.
    fn record(&mut self, store: &LocalStorage, synced: Synced) -> Result<()> {
        match synced.failure {
            None => Ok(()),
            Some(failure) => {
                store.discard_unsynced();
                self.epoch += 1;
                Err(failure)
            }
        }
    }

    /// Stops the thread, after the groups sent.
    fn stop(&mut self) {
        drop(self.groups.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Writer {
    /// Stops the thread once it has run the jobs sent, and waits for it: the
    /// store's file is closed when the last handle is gone, so that it can be
    /// opened again at once.
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl LocalStorage {
    /// What the store's writer thread has done since the store was opened:
    /// how many writes it answered, in how many commits. Writes that arrive
    /// while a commit syncs share the next one, so under concurrent writers
    /// `commits` grows slower than `writes`. All zero for a read-only store.
    pub fn write_stats(&self) -> WriteStats {
        let stats = &self.shared.stats;
        WriteStats {
            writes: stats.writes.load(Ordering::Relaxed),
            commits: stats.commits.load(Ordering::Relaxed),
            reruns: stats.reruns.load(Ordering::Relaxed),
            replayed: stats.replayed.load(Ordering::Relaxed),
            checkpoints: stats.checkpoints.load(Ordering::Relaxed),
        }
    }

    /// Runs the write `op` on the writer thread, in a transaction it may
    /// share with other writes, and answers once that is committed. `op` may
    /// run more than once (see the module docs): it must be a function of
    /// the transaction's state, and return an error for anything it refuses.
    pub(crate) async fn write<T, F>(&self, op: F) -> Result<T>
    where
        F: FnMut(&LocalStorage, &Txn<'_>) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Box::new(Pending {
            op,
            value: None,
            reply,
            _in_flight: InFlight::start(),
        });
        self.send(Message::Write(job))?;
        answer.await.map_err(|_| self.writer_gone())?
    }

    /// Sends `message` to the writer thread.
    pub(crate) fn send(&self, message: Message) -> Result<()> {
        let Some(writer) = &self.writer else {
            return Err(self.read_only_error());
        };
        let sent = writer.jobs.as_ref().map(|jobs| jobs.send(message));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(self.writer_gone()),
        }
    }

    /// The error when the writer thread is gone (it panicked outside the
    /// engine, which the store never does on purpose).
    pub(crate) fn writer_gone(&self) -> Error {
        Error::Storage {
            path: self.shared.path.display().to_string(),
            failure: StorageFailure::Io,
            message: "the store's writer thread has stopped; open the store again".into(),
        }
    }

    /// Runs `group` in one transaction and commits it to the engine (see
    /// the module docs), then hands it to `syncer` to be made durable and
    /// answered; or, when no other write waits in `inbox` to run meanwhile,
    /// makes it durable here, sparing a lone writer the hand-over.
    fn commit_group(&self, mut group: Vec<Box<dyn Job>>, syncer: &mut Syncer, inbox: &mut Inbox) {
        let stats = &self.shared.stats;
        stats
            .writes
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        // A failure reported since the last group discards the engine's
        // commits before this one runs.
        let _ = syncer.take(self, false);
        let mut failed: Vec<(Box<dyn Job>, Error)> = Vec::new();
        let outcome = loop {
            let attempt = self.guarded(|| {
                let txn = self.begin_write()?;
                let logged = Txn::new(&txn);
                for (at, job) in group.iter_mut().enumerate() {
                    if let Err(e) = job.run(self, &logged) {
                        // Dropped, not committed: the job may have changed it.
                        drop(logged);
                        drop(txn);
                        return Ok(Err((at, e)));
                    }
                }
                let (recorded, learned) = logged.into_changes();
                let committed = self.commit_changes(txn, recorded, syncer)?;
                self.learn(learned);
                Ok(Ok(committed))
            });
            match attempt {
                Ok(Err((at, error))) => {
                    failed.push((group.remove(at), error));
                    if !group.is_empty() {
                        stats.reruns.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(Ok(committed)) => break Ok(committed),
                Err(e) => break Err(e),
            }
            if group.is_empty() {
                break Ok(Committed::Unsynced(Commit::default()));
            }
        };
        // A group that changed nothing is answered after the groups before
        // it too, since it ran on them.
        let commit = match outcome {
            Ok(Committed::Unsynced(commit)) => commit,
            Ok(Committed::Durable) => return answer(group, failed, Ok(())),
            Err(e) => {
                let settled = syncer.drain(self);
                return answer(group, failed, settled.and(Err(e)));
            }
        };
        let unsynced = Unsynced {
            group,
            failed,
            commit,
            epoch: syncer.epoch,
        };
        if syncer.pending == 0 && inbox.is_empty() {
            let synced = self.sync_groups(vec![unsynced], &mut None);
            let _ = syncer.record(self, synced);
        } else {
            syncer.send(self, unsynced);
        }
    }

    /// The syncer's thread: see [`Syncer`].
    fn run_syncer(&self, queue: &mpsc::Receiver<Unsynced>, report: &mpsc::Sender<Synced>) {
        // The epoch of the last failure, and its error.
        let mut broken: Option<(u64, Error)> = None;
        while let Ok(first) = queue.recv() {
            let mut batch = vec![first];
            while let Ok(next) = queue.try_recv() {
                batch.push(next);
            }
            if report.send(self.sync_groups(batch, &mut broken)).is_err() {
                break;
            }
        }
    }

    /// Makes `batch` durable (one record of the journal, one sync), shows
    /// readers its last state and answers its groups, in order. Groups of
    /// the epoch of an earlier failure (`broken`) ran on writes that never
    /// became durable: they fail with it.
    fn sync_groups(&self, batch: Vec<Unsynced>, broken: &mut Option<(u64, Error)>) -> Synced {
        let groups = batch.len();
        let reserved = batch.iter().map(|u| u.commit.reserved).sum();
        let changed = batch.iter().filter(|u| u.commit.snapshot.is_some()).count();
        // Epochs only grow along the queue: the failed groups come first.
        let (dead, live): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .partition(|u| broken.as_ref().is_some_and(|(at, _)| u.epoch <= *at));
        if let Some((_, error)) = broken.as_ref() {
            for unsynced in dead {
                answer(unsynced.group, unsynced.failed, Err(copy_of(error)));
            }
        }
        let mut failure = None;
        let mut settled = false;
        if !live.is_empty() {
            match self.make_durable(&live) {
                Ok(()) => {
                    if let Some(snapshot) =
                        live.iter().rev().find_map(|u| u.commit.snapshot.clone())
                    {
                        self.publish_snapshot(Some(snapshot));
                    }
                    // Durable: settled before they are answered, so that an
                    // operation their callers make next may open the engine
                    // again if it must (see `reopen`).
                    self.shared.unsynced.fetch_sub(changed, Ordering::AcqRel);
                    settled = true;
                    for unsynced in live {
                        answer(unsynced.group, unsynced.failed, Ok(()));
                    }
                }
                Err(error) => {
                    let epoch = live.iter().map(|u| u.epoch).max().unwrap_or_default();
                    for unsynced in live {
                        answer(unsynced.group, unsynced.failed, Err(copy_of(&error)));
                    }
                    *broken = Some((epoch, copy_of(&error)));
                    failure = Some(error);
                }
            }
        }
        if !settled {
            self.shared.unsynced.fetch_sub(changed, Ordering::AcqRel);
        }
        Synced {
            groups,
            reserved,
            failure,
        }
    }

    /// Writes the changes of `batch` to the journal as one record and syncs
    /// it. A record whose sync failed is taken back, so that no replay
    /// applies it.
    fn make_durable(&self, batch: &[Unsynced]) -> Result<()> {
        // Written as they are, one after another: no copy of the batch.
        let parts: Vec<&[u8]> = batch
            .iter()
            .map(|unsynced| unsynced.commit.changes.as_slice())
            .filter(|changes| !changes.is_empty())
            .collect();
        if parts.is_empty() {
            // Nothing to write: the groups before are synced already.
            return Ok(());
        }
        let path = &self.shared.path;
        let file = match self.shared.journal.lock().as_mut() {
            Some(journal) => match journal.write(&parts) {
                Ok(Appended::Written) => journal.file(),
                // The writer keeps room for every group it sends.
                Ok(Appended::Full) => return Err(self.journal_lost()),
                Err(e) => return Err(io_error(path, &e)),
            },
            None => return Err(self.journal_lost()),
        };
        if let Err(e) = self.sync_journal(&file) {
            let mut slot = self.shared.journal.lock();
            if let Some(journal) = slot.as_mut()
                && journal.retract().is_err()
            {
                *slot = None;
            }
            return Err(io_error(path, &e));
        }
        self.shared.stats.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl LocalStorage {
    /// Syncs the journal's `file`.
    #[cfg(not(test))]
    fn sync_journal(&self, file: &std::fs::File) -> std::io::Result<()> {
        file.sync_data()
    }

    /// Syncs the journal's `file`, or fails as the tests ask.
    #[cfg(test)]
    fn sync_journal(&self, file: &std::fs::File) -> std::io::Result<()> {
        let fail = &self.shared.failing_syncs;
        if fail
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(std::io::Error::other("a sync failed, as the test asked"));
        }
        file.sync_data()
    }
}

/// What [`LocalStorage::commit_changes`] did.
enum Committed {
    /// Committed to the engine (or nothing was changed), not durable yet.
    Unsynced(Commit),
    /// Durable and shown to readers already (a checkpoint).
    Durable,
}

/// Answers a group's jobs: those that ran with `outcome`, those that
/// failed with their errors if the group was committed, and with the
/// commit's error if it was not (the state they failed on never was).
fn answer(group: Vec<Box<dyn Job>>, failed: Vec<(Box<dyn Job>, Error)>, outcome: Result<()>) {
    match outcome {
        Ok(()) => {
            for job in group {
                job.answer(Ok(()));
            }
            for (job, error) in failed {
                job.answer(Err(error));
            }
        }
        Err(error) => {
            for job in group
                .into_iter()
                .chain(failed.into_iter().map(|(job, _)| job))
            {
                job.answer(Err(copy_of(&error)));
            }
        }
    }
}

impl LocalStorage {
    /// Commits the changes of `txn` (recorded as `changes`) to the engine:
    /// without a sync when the journal has room for them, and then not
    /// shown to readers until the journal holds them; otherwise as a
    /// checkpoint, once every group before it is durable (see
    /// [`crate::journal`]).
    fn commit_changes(
        &self,
        mut txn: WriteTransaction,
        recorded: crate::logged::Recorded,
        syncer: &mut Syncer,
    ) -> Result<Committed> {
        let (changes, count) = (recorded.bytes, recorded.count);
        if changes.is_empty() {
            // Nothing changed: the transaction is dropped, not committed.
            return Ok(Committed::Unsynced(Commit::default()));
        }
        let path = &self.shared.path;
        let reserved = crate::journal::record_len(changes.len());
        let room = match self.shared.journal.lock().as_ref() {
            Some(journal) => journal.has_room(syncer.reserved + reserved),
            None => return Err(self.journal_lost()),
        };
        let held = self.shared.held.load(Ordering::Relaxed);
        if !room || held.saturating_add(count) > crate::journal::MOST_HELD {
            syncer.drain(self)?;
            let mut slot = self.shared.journal.lock();
            let Some(journal) = slot.as_mut() else {
                return Err(self.journal_lost());
            };
            set_durability(path, &mut txn, Durability::Immediate)?;
            self.commit_checkpoint(txn, journal)?;
            drop(slot);
            self.publish()?;
            self.shared.stats.commits.fetch_add(1, Ordering::Relaxed);
            return Ok(Committed::Durable);
        }
        // Durable through the journal: the engine need not sync.
        set_durability(path, &mut txn, Durability::None)?;
        self.shared.held.fetch_add(count, Ordering::Relaxed);
        // Counted before the commit: the engine is not opened again while
        // it holds commits the journal may not (see `reopen`).
        self.shared.unsynced.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = txn.commit() {
            self.shared.unsynced.fetch_sub(1, Ordering::AcqRel);
            return Err(self.error(e.into()));
        }
        // The engine just committed to, as it is: never opened again here
        // (not while it holds this commit), whatever a reader asked for.
        let snapshot = match &*self.shared.db.read() {
            Some(engine) => engine.begin_read().map_err(|e| self.error(e.into())),
            None => Err(self.not_reopened()),
        };
        match snapshot {
            Ok(snapshot) => Ok(Committed::Unsynced(Commit {
                changes,
                snapshot: Some(crate::snapshot::Published::new(snapshot)),
                reserved,
            })),
            Err(e) => {
                // The engine holds a commit that will never be durable.
                self.discard_unsynced();
                self.shared.unsynced.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }

    /// Commits every change so far durably with the engine, so that the
    /// journal holds nothing to replay (on the writer thread, between two
    /// groups).
    pub(crate) fn checkpoint(&self) -> Result<()> {
        // The engine's transaction first: taking it may open the engine
        // again, which takes the journal's lock itself.
        let txn = self.begin_write()?;
        let mut slot = self.shared.journal.lock();
        let Some(journal) = slot.as_mut() else {
            return Err(self.journal_lost());
        };
        if journal.is_empty() {
            return Ok(());
        }
        self.commit_checkpoint(txn, journal)
    }

    /// Commits `txn` durably as a checkpoint: the engine then holds every
    /// record of `journal`, which starts again.
    fn commit_checkpoint(&self, txn: WriteTransaction, journal: &mut Journal) -> Result<()> {
        let last = journal.last();
        mark_checkpoint(&txn, last).map_err(|e| self.error(e))?;
        self.commit(txn)?;
        journal.restart(last);
        self.shared.held.store(0, Ordering::Relaxed);
        self.shared
            .stats
            .checkpoints
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A last [`checkpoint`](LocalStorage::checkpoint), then the journal's
    /// file emptied: for a clean close.
    fn close_journal(&self) -> Result<()> {
        // The engine's transaction first, as in `checkpoint`.
        let txn = self.begin_write()?;
        let mut slot = self.shared.journal.lock();
        let Some(journal) = slot.as_mut() else {
            return Err(self.journal_lost());
        };
        // Closed cleanly: the engine holds everything, and a journal that
        // goes missing from here loses nothing.
        crate::mark_in_use(&txn, false).map_err(|e| self.error(e))?;
        self.store_last_ticks(&txn).map_err(|e| self.error(e))?;
        self.commit_checkpoint(txn, journal)?;
        journal.clear().map_err(|e| io_error(&self.shared.path, &e))
    }

    /// The error when the journal was lost to a failed write: the engine
    /// is opened again (with its journal) by the next operation.
    fn journal_lost(&self) -> Error {
        self.shared.needs_reopen.store(true, Ordering::Release);
        Error::Storage {
            path: self.shared.path.display().to_string(),
            failure: StorageFailure::Io,
            message: "a write to the store's journal failed; the store is opened again \
                      before its next write"
                .into(),
        }
    }
}

/// The same error again, for every job of a group whose commit failed
/// (tablekit's [`Error`] is not `Clone`; a commit fails with
/// [`Error::Storage`]).
fn copy_of(error: &Error) -> Error {
    match error {
        Error::Storage {
            path,
            failure,
            message,
        } => Error::Storage {
            path: path.clone(),
            failure: *failure,
            message: message.clone(),
        },
        other => Error::Storage {
            path: String::new(),
            failure: StorageFailure::Io,
            message: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    use tablekit::TableBackendExt;
    use tablekit_core::{Entity, Query, TableBackend};

    use super::*;

    /// Sixteen writers insert rows while syncs of the journal fail at
    /// random moments, and a reader reads all the time. Every insert
    /// acknowledged is read at once and is there after a reopen; every
    /// insert refused is never read by anyone, then or after; and the
    /// writers go on after each failure. Each row has a property name of
    /// its own, so that the ids given to names by refused writes are given
    /// again to other names: every row read has its own name and value.
    #[test]
    fn failed_syncs_keep_what_was_acknowledged_and_nothing_refused() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (acknowledged, refused, seen) = runtime.block_on(async {
            let store = LocalStorage::open(dir.path()).unwrap();
            store.create_table("Things").await.unwrap();
            let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
            let refused = Arc::new(Mutex::new(BTreeSet::new()));
            let seen = Arc::new(Mutex::new(BTreeSet::new()));
            let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let writers: Vec<_> = (0..16)
                .map(|w| {
                    let (store, acknowledged, refused) =
                        (store.clone(), acknowledged.clone(), refused.clone());
                    tokio::spawn(async move {
                        for i in 0..120 {
                            let key = format!("w{w:02}-{i:03}");
                            let row =
                                Entity::new("p", key.clone()).with(name_of(&key), key.clone());
                            match store.insert_entity("Things", &row).await {
                                Ok(_) => {
                                    // Read at once by its writer.
                                    let read = store
                                        .get_entity("Things", "p", &key, &Default::default())
                                        .await;
                                    assert!(read.is_ok(), "{key} acknowledged, not read: {read:?}");
                                    acknowledged.lock().unwrap().insert(key);
                                }
                                Err(_) => {
                                    refused.lock().unwrap().insert(key);
                                }
                            }
                        }
                    })
                })
                .collect();
            let reader = {
                let (store, seen, done) = (store.clone(), seen.clone(), done.clone());
                tokio::spawn(async move {
                    while !done.load(Ordering::Acquire) {
                        if let Ok(rows) = store.query_all("Things", Query::new()).await {
                            assert!(rows.iter().all(as_written), "{rows:?}");
                            seen.lock()
                                .unwrap()
                                .extend(rows.into_iter().map(|e| e.row_key));
                        }
                        tokio::task::yield_now().await;
                    }
                })
            };
            for _ in 0..12 {
                tokio::time::sleep(std::time::Duration::from_millis(3)).await;
                store.shared.failing_syncs.store(1, Ordering::Release);
            }
            for writer in writers {
                writer.await.unwrap();
            }
            // Writes shared syncs: the syncer's thread took part.
            let stats = store.write_stats();
            assert!(stats.writes > 2 * stats.commits, "{stats:?}");
            done.store(true, Ordering::Release);
            reader.await.unwrap();
            let now = row_keys(&store).await;
            let acknowledged = acknowledged.lock().unwrap().clone();
            assert_same(&now, &acknowledged);
            let refused = refused.lock().unwrap().clone();
            let seen = seen.lock().unwrap().clone();
            (acknowledged, refused, seen)
        });
        assert!(
            !refused.is_empty() && acknowledged.len() > refused.len(),
            "failures came, and writes went on: {} acknowledged, {} refused",
            acknowledged.len(),
            refused.len()
        );
        assert!(
            seen.is_disjoint(&refused),
            "a reader saw a refused write: {:?}",
            seen.intersection(&refused).next()
        );
        // After a reopen (the clean close checkpointed), the same.
        let reopened = runtime.block_on(row_keys(&LocalStorage::open(dir.path()).unwrap()));
        assert_same(&reopened, &acknowledged);
    }

    /// The RowKeys of the rows stored, each row checked as written.
    async fn row_keys(store: &LocalStorage) -> BTreeSet<String> {
        let rows = store.query_all("Things", Query::new()).await.unwrap();
        assert!(rows.iter().all(as_written), "{rows:?}");
        rows.into_iter().map(|e| e.row_key).collect()
    }

    /// The property name of the row whose RowKey is `key`.
    fn name_of(key: &str) -> String {
        format!("P{}", key.replace('-', "x"))
    }

    /// Whether a row read holds exactly its own property, with its key.
    fn as_written(row: &Entity) -> bool {
        let expected = [(name_of(&row.row_key), row.row_key.as_str())];
        let props = row
            .properties
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_str()));
        props.eq(expected.map(|(n, k)| (n, Some(k))))
    }

    /// The stored keys are the acknowledged ones; else the first that
    /// differ.
    fn assert_same(stored: &BTreeSet<String>, acknowledged: &BTreeSet<String>) {
        let mut extra = stored.difference(acknowledged);
        let mut lost = acknowledged.difference(stored);
        assert!(
            stored == acknowledged,
            "stored, not acknowledged: {:?}; acknowledged, not stored: {:?}",
            extra.next(),
            lost.next()
        );
    }
}
