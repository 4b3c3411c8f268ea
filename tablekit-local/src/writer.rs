//! The writer: one thread that runs every write of a store, so that no
//! engine commit (and no sync of the file) runs on an async runtime's
//! worker, and so that writes that arrive together share one commit.
//!
//! # Group commit
//! A write is a job sent to the thread. The thread takes every job waiting
//! (up to [`MAX_GROUP`]), runs them one after another in one engine
//! transaction, makes it durable (one record of the journal, one sync: see
//! [`crate::journal`]), commits it, and only then answers each job. A write
//! is therefore acknowledged once it is durable, and jobs that came while
//! the last commit was syncing ride on the next one.
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
//! has no group commit of its own, and a channel and a thread are all it
//! takes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use redb::{Durability, WriteTransaction};
use tablekit::backend::InFlight;
use tablekit::{Error, Result, StorageFailure};
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
    /// and one sync (or, when the journal is full, a checkpoint), fewer
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
    /// each when the journal was full (the writes of the group that found
    /// it full ride on it).
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
        let thread = std::thread::Builder::new()
            .name("tablekit-local writer".into())
            .spawn(move || {
                while let Ok(first) = queue.recv() {
                    let (mut group, mut between) = (Vec::new(), None);
                    match first {
                        Message::Write(job) => group.push(job),
                        Message::Between(work) => between = Some(work),
                    }
                    // Such work ends the group: the writes sent after it
                    // wait for it.
                    while between.is_none() && !group.is_empty() && group.len() < MAX_GROUP {
                        match queue.try_recv() {
                            Ok(Message::Write(job)) => group.push(job),
                            Ok(Message::Between(work)) => between = Some(work),
                            Err(_) => break,
                        }
                    }
                    if !group.is_empty() {
                        store.commit_group(group);
                    }
                    if let Some(work) = between {
                        work(&store);
                    }
                }
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

    /// Runs `group` in one transaction and commits it (see the module docs).
    fn commit_group(&self, mut group: Vec<Box<dyn Job>>) {
        let stats = &self.shared.stats;
        stats
            .writes
            .fetch_add(group.len() as u64, Ordering::Relaxed);
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
                        return Ok(Some((at, e)));
                    }
                }
                let changes = logged.into_changes();
                self.commit_changes(txn, &changes).map(|()| None)
            });
            match attempt {
                Ok(Some((at, error))) => {
                    failed.push((group.remove(at), error));
                    if !group.is_empty() {
                        stats.reruns.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
            if group.is_empty() {
                break Ok(());
            }
        };
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
}

impl LocalStorage {
    /// Makes the changes of `txn` (recorded as `changes`) durable and
    /// visible: through the journal, or, when it is full, by a checkpoint
    /// (see [`crate::journal`]).
    fn commit_changes(&self, mut txn: WriteTransaction, changes: &[u8]) -> Result<()> {
        if changes.is_empty() {
            // Nothing changed: the transaction is dropped, not committed,
            // and nothing is synced.
            return Ok(());
        }
        // Settled before anything is written: once the record is in the
        // journal, the only way back is to take it back.
        let path = &self.shared.path;
        // Durable in the journal: the engine need not sync.
        set_durability(path, &mut txn, Durability::None)?;
        let mut slot = self.shared.journal.lock();
        let Some(journal) = slot.as_mut() else {
            return Err(self.journal_lost());
        };
        match journal.append(changes) {
            Ok(Appended::Written) => {
                if let Err(e) = txn.commit() {
                    // Not applied: the record must never be replayed.
                    if journal.retract().is_err() {
                        *slot = None;
                    }
                    return Err(self.error(e.into()));
                }
                self.shared.stats.commits.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Ok(Appended::Full) => {
                set_durability(path, &mut txn, Durability::Immediate)?;
                self.commit_checkpoint(txn, journal)?;
                self.shared.stats.commits.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(io_error(&self.shared.path, &e)),
        }
    }

    /// Commits every change so far durably with the engine, so that the
    /// journal holds nothing to replay (on the writer thread, between two
    /// groups).
    pub(crate) fn checkpoint(&self) -> Result<()> {
        let mut slot = self.shared.journal.lock();
        let Some(journal) = slot.as_mut() else {
            return Err(self.journal_lost());
        };
        if journal.is_empty() {
            return Ok(());
        }
        self.commit_checkpoint(self.begin_write()?, journal)
    }

    /// Commits `txn` durably as a checkpoint: the engine then holds every
    /// record of `journal`, which starts again.
    fn commit_checkpoint(&self, txn: WriteTransaction, journal: &mut Journal) -> Result<()> {
        let last = journal.last();
        mark_checkpoint(&txn, last).map_err(|e| self.error(e))?;
        self.commit(txn)?;
        journal.restart(last);
        self.shared
            .stats
            .checkpoints
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A last [`checkpoint`](LocalStorage::checkpoint), then the journal's
    /// file emptied: for a clean close.
    fn close_journal(&self) -> Result<()> {
        self.checkpoint()?;
        match self.shared.journal.lock().as_mut() {
            Some(journal) => journal.clear().map_err(|e| io_error(&self.shared.path, &e)),
            None => Ok(()),
        }
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
