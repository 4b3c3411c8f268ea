//! The executor of single-entity writes, and the one retry policy of the
//! typed writes: how often a write goes round again, and after which
//! outcomes.
//!
//! Every single-entity write of [`Table`] (an insert, a put, a write
//! through a [`Loaded`](crate::table::Loaded), a delete, a merge of one
//! element, and [`update`](Table::update)'s read, change and write back) is
//! lowered to a [`Lowered`] row and sent by [`Table::execute`], the one
//! loop of the single-entity writes. Each turn is one step: send the row,
//! read it back to settle an answer, or (for an update) read it and make
//! the write again from what was read:
//!
//! - **A lost answer** (the request's fate unknown): a write that records
//!   itself is settled by reading the row back (`settle.rs`); settled as
//!   not applied, it is sent again. A write that holds no condition (an
//!   upsert, or a write under `*`) is sent again as it is: writing the same
//!   value twice leaves what writing it once does. A delete is settled by
//!   whether the row is gone. Each is sent at most [`LOST_WRITE_ATTEMPTS`]
//!   times; a read that fails is tried again, at most [`SETTLE_READS`]
//!   times.
//! - **A refusal that may answer a resend** (a 409 to an insert, a 412 to
//!   a write guarded by an ETag, after a transport sent it again): a write
//!   that records itself reads the row back, and its tag says whether it
//!   landed; if not, the refusal stands.
//! - **A lost race of an update** (another writer changed the row after it
//!   was read), or a failure before the store applied it: the row is read
//!   again after a back-off, and the change made again, under the caller's
//!   [`UpdateOptions`]; the read also settles whether the last attempt
//!   landed after all.
//! - **A lost race of a planned transaction** (the ETag of the state it was
//!   planned from changed under it): the transaction runner (`plan/run.rs`)
//!   reads the state again and plans again, at most [`RACE_ATTEMPTS`]
//!   times. A write the caller guarded with an ETag of its own is never
//!   retried after a race: the [`PreconditionFailed`](Error::PreconditionFailed)
//!   is its answer.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::row::{IndexHint, RowWrite};
use super::settle::{Recorded, Settled, is_refusal};
use super::update::UpdateOptions;
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::props::WRITES_PROPERTY;
use crate::schema::TableEntity;
use crate::table::Table;

/// How many times a typed write is sent when its answer was lost and it
/// turned out not applied.
pub(super) const LOST_WRITE_ATTEMPTS: usize = 4;

/// How many times a write is planned from the state read when another
/// writer changed that state first.
pub(crate) const RACE_ATTEMPTS: usize = 16;

/// How many times the row is read to settle an answer, when reads fail:
/// the first few at once (the sooner the row is read, the fewer writes can
/// have pushed this one out of its history), then with a back-off.
pub(super) const SETTLE_READS: u32 = 10;
/// Expired holders of its unique values one write deletes at most (others
/// may take a value back in between).
const FREES: usize = 4;

/// A single-entity write, lowered: the row it sends, how, the tag it
/// records in the row's history, and what the caller knows of the index
/// rows, so that the write need not read or decode to find them.
pub(in crate::table) struct Lowered<'a> {
    pub(in crate::table) row: Entity,
    pub(in crate::table) write: RowWrite,
    /// The write's tag, when it records one (an insert, a write over the
    /// version read): a lost answer, or a refusal that may answer a resend,
    /// is then settled by the row's history.
    pub(in crate::table) recorded: Option<Recorded>,
    /// The RowKeys of the index rows of the version the write's ETag names.
    pub(in crate::table) old_keys: Option<Cow<'a, [String]>>,
    /// The RowKeys of the index rows of the value written.
    pub(in crate::table) new_keys: Option<Cow<'a, [String]>>,
}

impl<'a> Lowered<'a> {
    /// `row`, written as `write` says, recording nothing, its index rows
    /// unknown.
    pub(in crate::table) fn new(row: Entity, write: RowWrite) -> Lowered<'a> {
        Lowered {
            row,
            write,
            recorded: None,
            old_keys: None,
            new_keys: None,
        }
    }

    /// The history the write left, taken back out of the row it sent (or
    /// as kept when the row had no room for it); empty when it records
    /// none.
    pub(in crate::table) fn history(&mut self) -> String {
        match self.recorded.as_mut() {
            Some(recorded) => recorded.history_in(&mut self.row),
            None => String::new(),
        }
    }

    fn hint(&self) -> IndexHint<'_> {
        IndexHint {
            old: self.old_keys.as_deref(),
            new: self.new_keys.as_deref(),
        }
    }
}

/// A write made again from the row as read before each attempt:
/// [`update`](Table::update)'s read, change and write back. The executor
/// reads the row; the write lowers itself over it.
pub(in crate::table) trait Remake<T: TableEntity>: Send {
    /// How often, and how patiently, the write is made again.
    fn options(&self) -> &UpdateOptions;
    /// The write lowered over `stored`, the row as read; `None` when the
    /// caller's change failed (the caller holds its error), and nothing is
    /// sent.
    fn lower_over<'s>(
        &'s mut self,
        table: &'s Table<T>,
        stored: Entity,
    ) -> BoxFuture<'s, Result<Option<Lowered<'static>>>>;
}

/// What a write executed to.
pub(in crate::table) enum Done {
    /// Written: its version's ETag (empty for a delete). `None`: written
    /// (its answer was lost) but overwritten since; or, for a delete, the
    /// row is gone.
    Written(Option<ETag>),
    /// An earlier attempt of a remade write had landed after all: the row
    /// as read.
    Found(Box<Entity>),
    /// The caller's change failed: nothing was written by this attempt.
    Stopped,
}

impl Done {
    /// The ETag of the version written, as [`Done::Written`] says it.
    pub(in crate::table) fn etag(self) -> Option<ETag> {
        match self {
            Done::Written(etag) => etag,
            Done::Found(stored) => stored.etag,
            Done::Stopped => None,
        }
    }
}

/// What the executor does after an attempt failed with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// The error is the write's answer.
    Fail,
    /// Send the write again as it is.
    Resend,
    /// Read the row back: the write's tag in its history says whether it
    /// landed.
    ByHistory,
    /// Read the row back: a delete landed when the row is gone.
    ByPresence,
    /// The row is gone after an earlier answer was lost: that delete (or
    /// another) landed.
    Gone,
    /// Read the row again after a back-off, settle whether this attempt
    /// landed by it, and make the write again from it.
    Remake,
}

/// How a write records itself, as [`next`] needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tagged {
    /// It records nothing.
    No,
    /// It records its tag (`false`: the row had no room for it).
    Yes(bool),
    /// It is made again from the row as read (an update), and records its
    /// tag (`false`: the row had no room for it).
    Remade(bool),
}

/// What follows a failed attempt of `write` with `error`: `tagged` says how
/// the write records itself, `lost_before` whether an earlier attempt's
/// answer was lost. A pure function of its arguments, so that the policy
/// is tested without a store.
fn next(write: &RowWrite, tagged: Tagged, error: &Error, lost_before: bool) -> Next {
    let lost = error.is_outcome_unknown();
    let raced = matches!(error, Error::PreconditionFailed { .. });
    match (write, tagged) {
        (_, Tagged::Yes(true)) if lost || is_refusal(error) => Next::ByHistory,
        (_, Tagged::Remade(true)) if lost => Next::ByHistory,
        // A failure the store reports before it applies anything: a write
        // that records itself may go again (settling a lost answer as not
        // applied also reports one).
        (_, Tagged::Yes(_)) if error.is_transient() => Next::Resend,
        (_, Tagged::Remade(_)) if error.is_transient() || raced => Next::Remake,
        (_, Tagged::Yes(_) | Tagged::Remade(_)) => Next::Fail,
        (RowWrite::Delete(IfMatch::Any), Tagged::No)
            if lost_before && matches!(error, Error::EntityNotFound { .. }) =>
        {
            Next::Gone
        }
        (RowWrite::Delete(_), Tagged::No) if lost => Next::ByPresence,
        (RowWrite::Upsert(_) | RowWrite::Update(_, IfMatch::Any), Tagged::No) if lost => {
            Next::Resend
        }
        _ => Next::Fail,
    }
}

/// A step of the executor.
enum Step {
    /// Send the row.
    Send,
    /// Read the row back to settle the answer `.0` of the last send.
    Settle(Error),
    /// Read the row, and make the write again from it.
    Read,
    /// The unique value the write gives was refused (`.0`) as held by
    /// another entity: delete that one if it has expired, and send again.
    Free(Error),
}

/// What follows a step: another step, or the write's outcome.
enum Flow {
    Go(Step),
    Done(Result<Done>),
}

/// The executor's state between the steps of one write.
struct Progress<'l, 'k> {
    lowered: &'l mut Lowered<'k>,
    tagged: Tagged,
    /// Sends after a lost answer.
    resent: usize,
    /// Reads in a row that failed.
    failed_reads: u32,
    /// A remade write's attempts, when it began, and the error of its
    /// last; whether that attempt may have landed (the next read says).
    attempts: u32,
    started: Option<Instant>,
    last: Option<Error>,
    maybe_landed: bool,
    /// Expired holders of a unique value deleted for the write.
    freed: usize,
}

impl Progress<'_, '_> {
    /// What follows a send that failed with `error`.
    fn after_send(&mut self, error: Error, record_writes: bool) -> Flow {
        match next(&self.lowered.write, self.tagged, &error, self.resent > 0) {
            Next::Fail => Flow::Done(Err(error)),
            Next::Resend => self.resend(error),
            Next::Gone => Flow::Done(Ok(Done::Written(None))),
            Next::ByHistory | Next::ByPresence => Flow::Go(Step::Settle(error)),
            Next::Remake => {
                self.maybe_landed = record_writes;
                self.last = Some(error);
                Flow::Go(Step::Read)
            }
        }
    }

    /// Sends the write again after `error`, unless it was sent too often.
    fn resend(&mut self, error: Error) -> Flow {
        self.resent += 1;
        if self.resent >= LOST_WRITE_ATTEMPTS {
            return Flow::Done(Err(error));
        }
        Flow::Go(Step::Send)
    }

    /// After a read that failed with `error`: whether to read again (after
    /// a short wait), or give the read up.
    async fn read_again(&mut self, error: &Error) -> bool {
        if !error.is_transient() || self.failed_reads + 1 >= SETTLE_READS {
            return false;
        }
        self.failed_reads += 1;
        if self.failed_reads >= 3 {
            let wait = Duration::from_millis(5 << (self.failed_reads - 3).min(6));
            tokio::time::sleep(wait.mul_f64(fastrand::f64())).await;
        }
        true
    }
}

impl<T: TableEntity> Table<T> {
    /// Executes a single-entity write: sends `lowered`, settles a lost
    /// answer, sends it again while it turns out not applied, and, for a
    /// write that `remake`s itself from the row as read (an update), reads
    /// and makes it again after a lost race. `lowered` holds the row last
    /// sent when it returns.
    pub(in crate::table) async fn execute(
        &self,
        lowered: &mut Lowered<'_>,
        mut remake: Option<&mut (dyn Remake<T> + '_)>,
    ) -> Result<Done> {
        let remade = remake.is_some();
        let tagged = self.tagged(lowered, remade);
        let mut run = Progress {
            lowered,
            tagged,
            resent: 0,
            failed_reads: 0,
            attempts: 0,
            started: None,
            last: None,
            maybe_landed: false,
            freed: 0,
        };
        let mut step = if remade { Step::Read } else { Step::Send };
        loop {
            let flow = match step {
                Step::Send => {
                    let lowered = &*run.lowered;
                    let sent = self.send_row(&lowered.row, lowered.write.clone(), lowered.hint());
                    match sent.await {
                        Ok(etag) => return Ok(Done::Written(Some(etag))),
                        Err(error) if run.freed < FREES && self.may_have_expired(&error) => {
                            Flow::Go(Step::Free(error))
                        }
                        Err(error) => run.after_send(error, self.record_writes),
                    }
                }
                Step::Free(error) => {
                    run.freed += 1;
                    match Box::pin(self.free_unique(&error)).await {
                        Ok(true) => Flow::Go(Step::Send),
                        Ok(false) => run.after_send(error, self.record_writes),
                        Err(e) => Flow::Done(Err(e)),
                    }
                }
                // Boxed, as rare paths: the write's future stays small.
                Step::Settle(error) => Box::pin(self.settle(&mut run, error)).await,
                Step::Read => match remake.as_deref_mut() {
                    Some(remake) => Box::pin(self.remade(&mut run, remake)).await,
                    None => Flow::Done(Err(run.last.take().unwrap_or(Error::Transient {
                        message: "the write has nothing to read again from".into(),
                    }))),
                },
            };
            step = match flow {
                Flow::Go(step) => step,
                Flow::Done(done) => return done,
            };
        }
    }

    /// How `lowered` records itself, its history moved into its row when
    /// it records one and the row has room.
    fn tagged(&self, lowered: &mut Lowered<'_>, remade: bool) -> Tagged {
        let room = match lowered.recorded.as_mut() {
            Some(recorded) => {
                lowered.row.properties.contains(WRITES_PROPERTY)
                    || recorded.add_to::<T>(&mut lowered.row, self.record_writes)
            }
            None if !remade => return Tagged::No,
            None => false,
        };
        if remade {
            Tagged::Remade(room)
        } else {
            Tagged::Yes(room)
        }
    }

    /// Reads the row back to settle the answer `error` of the last send.
    async fn settle(&self, run: &mut Progress<'_, '_>, error: Error) -> Flow {
        let (pk, rk) = (&run.lowered.row.partition_key, &run.lowered.row.row_key);
        let stored = match self.read_stored(pk, rk).await {
            Ok(stored) => stored,
            Err(e) if run.read_again(&e).await => return Flow::Go(Step::Settle(error)),
            // The store cannot tell: the answer stands.
            Err(_) => return Flow::Done(Err(error)),
        };
        run.failed_reads = 0;
        let Some(recorded) = &run.lowered.recorded else {
            return self.settle_delete(run, stored, error).await;
        };
        let answer_lost = error.is_outcome_unknown();
        match recorded.settle(stored) {
            Settled::Applied(stored) => {
                if answer_lost {
                    crate::telemetry::settled(true);
                }
                Flow::Done(
                    self.landed(pk, rk, recorded, stored)
                        .await
                        .map(Done::Written),
                )
            }
            Settled::NotApplied if answer_lost => {
                crate::telemetry::settled(false);
                let error = Error::Transient {
                    message: format!("the write was not applied ({error})"),
                };
                run.after_send(error, self.record_writes)
            }
            Settled::NotApplied | Settled::Unknown => Flow::Done(Err(error)),
        }
    }

    /// Settles a delete whose answer `error` was lost by the row as read:
    /// gone, the delete (or another) landed, and its outbox records, if it
    /// wrote any, are finished; still the version it deleted, it is sent
    /// again.
    async fn settle_delete(
        &self,
        run: &mut Progress<'_, '_>,
        stored: Option<Entity>,
        error: Error,
    ) -> Flow {
        let Some(stored) = stored else {
            if T::DESCRIPTOR.write_needs().follow_up {
                let row = &run.lowered.row;
                self.finish_after_commit(&row.partition_key, &row.row_key)
                    .await;
            }
            return Flow::Done(Ok(Done::Written(None)));
        };
        let unchanged = match &run.lowered.write {
            RowWrite::Delete(IfMatch::ETag(read)) => stored.etag.as_ref() == Some(read),
            _ => true,
        };
        if !unchanged {
            // Another writer changed it: the store cannot tell whether
            // this delete came first.
            return Flow::Done(Err(error));
        }
        run.resend(error)
    }

    /// An attempt of a remade write: reads the row (after a back-off, but
    /// for the first), settles by it whether the last attempt landed, and
    /// lowers the write over it again.
    async fn remade(&self, run: &mut Progress<'_, '_>, remake: &mut (dyn Remake<T> + '_)) -> Flow {
        let options = remake.options();
        let started = *run.started.get_or_insert_with(Instant::now);
        run.attempts += 1;
        let out_of_time = run.attempts > 1
            && !self
                .wait_to_retry(options, started, run.attempts, run.last.as_ref())
                .await;
        if out_of_time || run.attempts > options.attempts_allowed() {
            return Flow::Done(Err(run.last.take().unwrap_or(Error::Transient {
                message: "the update's deadline passed before its first attempt".into(),
            })));
        }
        let (pk, rk) = (&run.lowered.row.partition_key, &run.lowered.row.row_key);
        let stored = match self.read_row(pk, rk).await {
            Ok(Some(stored)) => stored,
            Ok(None) => return Flow::Done(Err(self.not_found(pk, rk))),
            Err(e) if e.is_transient() => {
                run.last = Some(e);
                return Flow::Go(Step::Read);
            }
            Err(e) => return Flow::Done(Err(e)),
        };
        // A newer program's row: a write through this type would drop
        // what it does not know.
        if let Err(e) = self.refuse_newer(&stored) {
            return Flow::Done(Err(e));
        }
        let landed = std::mem::take(&mut run.maybe_landed)
            && run
                .lowered
                .recorded
                .as_ref()
                .is_some_and(|recorded| recorded.landed_in(&stored));
        if landed {
            // It landed: the failure came after. Its outbox records, if it
            // wrote any, are still to finish.
            if T::DESCRIPTOR.write_needs().follow_up {
                self.finish_after_commit(pk, rk).await;
            }
            return Flow::Done(Ok(Done::Found(Box::new(stored))));
        }
        // An expired entity is not there for a write through its value.
        if self.has_expired(&stored.properties) {
            return Flow::Done(Err(self.not_found(pk, rk)));
        }
        match remake.lower_over(self, stored).await {
            Ok(Some(lowered)) => {
                *run.lowered = lowered;
                run.tagged = self.tagged(run.lowered, true);
                Flow::Go(Step::Send)
            }
            Ok(None) => Flow::Done(Ok(Done::Stopped)),
            Err(e) => Flow::Done(Err(e)),
        }
    }

    /// A write that landed, as `stored` shows: its ETag (`None` if written
    /// and overwritten since), once its follow-up work is started.
    async fn landed(
        &self,
        pk: &str,
        rk: &str,
        recorded: &Recorded,
        stored: Entity,
    ) -> Result<Option<ETag>> {
        // Applied: so were its outbox records, if it wrote any, whose steps
        // are still to do.
        if T::DESCRIPTOR.write_needs().follow_up {
            self.finish_after_commit(pk, rk).await;
        }
        let ours = recorded.first_in(&stored);
        Ok(stored.etag.filter(|_| ours))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::UpdateMode;

    fn lost() -> Error {
        Error::OutcomeUnknown {
            message: "lost".into(),
        }
    }

    fn transient() -> Error {
        Error::Transient {
            message: "busy".into(),
        }
    }

    /// An error about the row `(p, r)` of table `T`.
    fn about_row(make: fn(String, String, String) -> Error) -> Error {
        make("T".into(), "p".into(), "r".into())
    }

    fn conflict() -> Error {
        about_row(|table, partition_key, row_key| Error::EntityAlreadyExists {
            table,
            partition_key,
            row_key,
        })
    }

    fn not_found() -> Error {
        about_row(|table, partition_key, row_key| Error::EntityNotFound {
            table,
            partition_key,
            row_key,
        })
    }

    fn raced() -> Error {
        about_row(|table, partition_key, row_key| Error::PreconditionFailed {
            table,
            partition_key,
            row_key,
        })
    }

    fn guarded() -> IfMatch {
        IfMatch::ETag(ETag::new("W/\"1\""))
    }

    /// Each case: the write, how it records itself, the error, whether an
    /// earlier answer was lost, and what follows.
    fn check(cases: &[(RowWrite, Tagged, Error, bool, Next)]) {
        for (write, tagged, error, lost_before, expected) in cases {
            assert_eq!(
                next(write, *tagged, error, *lost_before),
                *expected,
                "{:?} {tagged:?} {error:?} lost before: {lost_before}",
                write.name()
            );
        }
    }

    #[test]
    fn a_write_that_records_itself_is_settled_by_its_history() {
        let update = RowWrite::Update(UpdateMode::Replace, guarded());
        for write in [RowWrite::Insert, update.clone()] {
            let w = || write.clone();
            check(&[
                (w(), Tagged::Yes(true), lost(), false, Next::ByHistory),
                // A refusal may answer a resend of this very write.
                (w(), Tagged::Yes(true), conflict(), false, Next::ByHistory),
                // No room for the history: a lost answer stands.
                (w(), Tagged::Yes(false), lost(), false, Next::Fail),
                (w(), Tagged::Yes(false), conflict(), false, Next::Fail),
                // Settled as not applied, or refused before applying: again.
                (w(), Tagged::Yes(true), transient(), true, Next::Resend),
                (w(), Tagged::Yes(false), transient(), false, Next::Resend),
            ]);
        }
        // An update, made again from the row as read: a lost answer is
        // settled by its history; a lost race, or a failure before the
        // store applied it, reads and changes again.
        let u = || update.clone();
        check(&[
            (u(), Tagged::Remade(true), lost(), false, Next::ByHistory),
            (u(), Tagged::Remade(true), raced(), false, Next::Remake),
            (u(), Tagged::Remade(false), raced(), false, Next::Remake),
            (u(), Tagged::Remade(true), transient(), false, Next::Remake),
            (u(), Tagged::Remade(true), not_found(), false, Next::Fail),
            // No room for the history: a lost answer stands.
            (u(), Tagged::Remade(false), lost(), false, Next::Fail),
        ]);
    }

    #[test]
    fn a_write_without_a_condition_is_sent_again_as_it_is() {
        for write in [
            RowWrite::Upsert(UpdateMode::Replace),
            RowWrite::Upsert(UpdateMode::Merge),
            RowWrite::Update(UpdateMode::Merge, IfMatch::Any),
        ] {
            let w = || write.clone();
            check(&[
                (w(), Tagged::No, lost(), false, Next::Resend),
                (w(), Tagged::No, transient(), false, Next::Fail),
                (w(), Tagged::No, conflict(), false, Next::Fail),
            ]);
        }
        // A write guarded by the caller's ETag, recording nothing: its
        // lost answer, or a failure, is its answer.
        let u = || RowWrite::Update(UpdateMode::Replace, guarded());
        check(&[
            (u(), Tagged::No, lost(), false, Next::Fail),
            (u(), Tagged::No, transient(), false, Next::Fail),
        ]);
    }

    #[test]
    fn a_delete_is_settled_by_whether_the_row_is_gone() {
        for delete in [RowWrite::Delete(IfMatch::Any), RowWrite::Delete(guarded())] {
            let d = || delete.clone();
            check(&[
                (d(), Tagged::No, lost(), false, Next::ByPresence),
                (d(), Tagged::No, transient(), false, Next::Fail),
                (d(), Tagged::No, not_found(), false, Next::Fail),
            ]);
        }
        check(&[
            // Gone after a lost answer: that delete, or another, landed.
            (
                RowWrite::Delete(IfMatch::Any),
                Tagged::No,
                not_found(),
                true,
                Next::Gone,
            ),
            // A delete of the version read finds it gone only if another
            // writer deleted it: that is its answer.
            (
                RowWrite::Delete(guarded()),
                Tagged::No,
                not_found(),
                true,
                Next::Fail,
            ),
        ]);
    }
}
