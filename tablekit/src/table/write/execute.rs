//! The executor of single-row writes, and the one retry policy of the
//! typed writes: how often a write goes round again, and after which
//! outcomes.
//!
//! Every single-entity write of [`Table`] (an insert, a put, a write
//! through a [`Loaded`](crate::table::Loaded), a delete, a merge of one
//! element, [`update`](Table::update)'s write back) is lowered to a row and
//! a [`RowWrite`] and sent by [`Table::execute`], the one loop that sends
//! it and settles a lost answer:
//!
//! - **A lost answer** (the request's fate unknown): a write that records
//!   itself is settled by reading the row back (`settle.rs`); settled as
//!   not applied, it is sent again. A write that holds no condition (an
//!   upsert, or a write under `*`) is sent again as it is: writing the same
//!   value twice leaves what writing it once does. A delete is settled by
//!   whether the row is gone. Each is sent at most [`LOST_WRITE_ATTEMPTS`]
//!   times.
//! - **A refusal that may answer a resend** (a 409 to an insert, a 412 to
//!   a write guarded by an ETag, after a transport sent it again): a write
//!   that records itself reads the row back, and its tag says whether it
//!   landed; if not, the refusal stands.
//! - **A lost race** (the ETag a planned transaction or a blob write was
//!   guarded by has changed under it): the state is read again and the
//!   write planned again, at most [`RACE_ATTEMPTS`] times (`plan/run.rs`,
//!   `row.rs`). A write the caller guarded with an ETag of its own is never
//!   retried after a race: the [`PreconditionFailed`](Error::PreconditionFailed)
//!   is its answer.
//! - [`Table::update`] retries its read, change and write with the caller's
//!   [`UpdateOptions`](super::update::UpdateOptions), with back-off.

use super::row::{IndexHint, RowWrite};
use super::settle::{Recorded, Settled, is_refusal};
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
}

/// What a write records in the row's history, and who sends it again.
pub(in crate::table) enum Recording<'a> {
    /// Nothing: a lost answer is settled by what the write is (see
    /// [`next`]).
    None,
    /// Its tag: a lost answer, or a refusal that may answer a resend, is
    /// settled by the row's history, and the executor sends the write again
    /// while it turns out not applied.
    Tag(&'a mut Recorded),
    /// Its tag, for a caller that sends the write again itself
    /// ([`update`](Table::update)'s write back, under the caller's
    /// options): a lost answer is settled, and one not applied is returned
    /// as [`Error::Transient`].
    TagForCaller(&'a mut Recorded),
}

/// How a write records itself, as [`next`] needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tagged {
    /// It records nothing.
    No,
    /// It records its tag (`false`: the row had no room for it), and the
    /// executor sends it again.
    Here(bool),
    /// It records its tag, and its caller sends it again.
    ByCaller(bool),
}

/// What follows a failed attempt of `write` with `error`: `tagged` says how
/// the write records itself, `lost_before` whether an earlier attempt's
/// answer was lost. A pure function of its arguments, so that the policy
/// is tested without a store.
fn next(write: &RowWrite, tagged: Tagged, error: &Error, lost_before: bool) -> Next {
    let lost = error.is_outcome_unknown();
    match (write, tagged) {
        (_, Tagged::Here(true)) if lost || is_refusal(error) => Next::ByHistory,
        (_, Tagged::ByCaller(true)) if lost => Next::ByHistory,
        // A failure the store reports before it applies anything: a write
        // that records itself may go again (settling a lost answer as not
        // applied also reports one).
        (_, Tagged::Here(_)) if error.is_transient() => Next::Resend,
        (_, Tagged::Here(_) | Tagged::ByCaller(_)) => Next::Fail,
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

impl<T: TableEntity> Table<T> {
    /// Sends `row` as `write` says, settling a lost answer, and sending it
    /// again while it turns out not applied. `recording` is the tag the
    /// write records in the row's history (an insert, or an update guarded
    /// by the ETag it read), when it records one.
    ///
    /// `Ok(Some(etag))`: written, `etag` is its version's (empty for a
    /// delete). `Ok(None)`: written (its answer was lost), but overwritten
    /// since; or, for a delete, the row is gone.
    pub(in crate::table) async fn execute(
        &self,
        row: &mut Entity,
        write: RowWrite,
        recording: Recording<'_>,
        hint: IndexHint<'_>,
    ) -> Result<Option<ETag>> {
        let room = |recorded: &mut Recorded, row: &mut Entity| {
            row.properties.contains(WRITES_PROPERTY)
                || recorded.add_to::<T>(row, self.record_writes)
        };
        let (tagged, recorded) = match recording {
            Recording::None => (Tagged::No, None),
            Recording::Tag(recorded) => (Tagged::Here(room(recorded, row)), Some(recorded)),
            Recording::TagForCaller(recorded) => {
                (Tagged::ByCaller(room(recorded, row)), Some(recorded))
            }
        };
        let mut lost = 0;
        loop {
            let mut error = match self.write_lent(row, write.clone(), hint).await {
                Ok(etag) => return Ok(Some(etag)),
                Err(e) => e,
            };
            let (pk, rk) = (&row.partition_key, &row.row_key);
            match next(&write, tagged, &error, lost > 0) {
                Next::Fail => return Err(error),
                Next::Resend => {}
                Next::Gone => return Ok(None),
                Next::ByHistory => {
                    // (A write is settled by its history only when tagged.)
                    let Some(recorded) = recorded.as_deref() else {
                        return Err(error);
                    };
                    let answer_lost = error.is_outcome_unknown();
                    // Boxed, as a rare path: the write's future stays small.
                    match Box::pin(self.settle_write(pk, rk, recorded)).await {
                        Settled::Applied(stored) => {
                            if answer_lost {
                                crate::telemetry::settled(true);
                            }
                            return Box::pin(self.landed(pk, rk, recorded, stored)).await;
                        }
                        Settled::NotApplied if answer_lost => {
                            crate::telemetry::settled(false);
                            error = Error::Transient {
                                message: format!("the write was not applied ({error})"),
                            };
                            if matches!(tagged, Tagged::ByCaller(_)) {
                                return Err(error);
                            }
                        }
                        Settled::NotApplied | Settled::Unknown => return Err(error),
                    }
                }
                Next::ByPresence => match Box::pin(self.row_after_lost_delete(pk, rk)).await {
                    Ok(None) => return Ok(None),
                    Ok(Some(stored)) => {
                        let unchanged = match &write {
                            RowWrite::Delete(IfMatch::ETag(read)) => {
                                stored.etag.as_ref() == Some(read)
                            }
                            _ => true,
                        };
                        if !unchanged {
                            // Another writer changed it: the store cannot
                            // tell whether this delete came first.
                            return Err(error);
                        }
                    }
                    Err(_) => return Err(error),
                },
            }
            lost += 1;
            if lost >= LOST_WRITE_ATTEMPTS {
                return Err(error);
            }
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

    /// Settles a delete of `(pk, rk)` whose answer was lost by whether the
    /// row is gone: `None` when it is (its outbox records, if it wrote any,
    /// are then finished), else the row as it stands.
    async fn row_after_lost_delete(&self, pk: &str, rk: &str) -> Result<Option<Entity>> {
        let stored = self.read_stored(pk, rk).await?;
        if stored.is_none() && T::DESCRIPTOR.write_needs().follow_up {
            self.finish_after_commit(pk, rk).await;
        }
        Ok(stored)
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
                (w(), Tagged::Here(true), lost(), false, Next::ByHistory),
                // A refusal may answer a resend of this very write.
                (w(), Tagged::Here(true), conflict(), false, Next::ByHistory),
                // No room for the history: a lost answer stands.
                (w(), Tagged::Here(false), lost(), false, Next::Fail),
                (w(), Tagged::Here(false), conflict(), false, Next::Fail),
                // Settled as not applied, or refused before applying: again.
                (w(), Tagged::Here(true), transient(), true, Next::Resend),
                (w(), Tagged::Here(false), transient(), false, Next::Resend),
            ]);
        }
        // For a caller that sends the write again itself, the executor
        // settles a lost answer and nothing else.
        let u = || update.clone();
        check(&[
            (u(), Tagged::ByCaller(true), lost(), false, Next::ByHistory),
            (u(), Tagged::ByCaller(true), conflict(), false, Next::Fail),
            (u(), Tagged::ByCaller(true), transient(), false, Next::Fail),
            (u(), Tagged::ByCaller(false), lost(), false, Next::Fail),
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
