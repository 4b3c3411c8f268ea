//! The one retry policy of the typed writes: how often a write goes round
//! again, and after which outcomes.
//!
//! - **A lost answer** (the request's fate unknown): a write that records
//!   itself is settled by reading the row back (`settle.rs`); settled as
//!   not applied, it is sent again. A write that holds no condition (an
//!   upsert, or a write under `*`) is sent again as it is: writing the same
//!   value twice leaves what writing it once does. A delete is settled by
//!   whether the row is gone. Each is sent at most [`LOST_WRITE_ATTEMPTS`]
//!   times ([`Resends`]).
//! - **A lost race** (the ETag a planned transaction or a blob write was
//!   guarded by has changed under it): the state is read again and the
//!   write planned again, at most [`RACE_ATTEMPTS`] times. A write the
//!   caller guarded with an ETag of its own is never retried after a race:
//!   the [`PreconditionFailed`](Error::PreconditionFailed) is its answer.
//! - [`Table::update`](super::Table::update) retries its read, change and
//!   write with the caller's [`UpdateOptions`](super::update::UpdateOptions),
//!   with back-off.

use crate::error::{Error, Result};

/// How many times a typed write is sent when its answer was lost and it
/// turned out not applied.
pub(super) const LOST_WRITE_ATTEMPTS: usize = 4;

/// How many times a write is planned from the state read when another
/// writer changed that state first.
pub(crate) const RACE_ATTEMPTS: usize = 16;

/// The resends of one write whose answers were lost.
#[derive(Debug, Default)]
pub(super) struct Resends {
    /// Attempts whose answer was lost so far.
    lost: usize,
}

impl Resends {
    /// After an attempt whose answer `lost` was lost and that was not
    /// applied: `Ok` to send again, or `lost` itself once the attempts are
    /// spent.
    pub(super) fn again(&mut self, lost: Error) -> Result<()> {
        self.lost += 1;
        if self.lost < LOST_WRITE_ATTEMPTS {
            Ok(())
        } else {
            Err(lost)
        }
    }

    /// [`again`](Resends::again) when `error` is a lost answer that
    /// reading back settled as not applied; any other error is the write's
    /// answer, returned as it is.
    pub(super) fn again_if_not_applied(&mut self, error: Error) -> Result<()> {
        if is_settled_not_applied(&error) {
            self.again(error)
        } else {
            Err(error)
        }
    }

    /// Whether an earlier attempt's answer was lost.
    pub(super) fn any_lost(&self) -> bool {
        self.lost > 0
    }
}

/// Whether `error` is a lost answer that reading back showed not applied
/// (settling reports it as [`Error::Transient`]).
pub(super) fn is_settled_not_applied(error: &Error) -> bool {
    error.is_transient()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost() -> Error {
        Error::OutcomeUnknown {
            message: "lost".into(),
        }
    }

    #[test]
    fn a_write_is_sent_at_most_the_attempts() {
        let mut resends = Resends::default();
        assert!(!resends.any_lost());
        for _ in 1..LOST_WRITE_ATTEMPTS {
            resends.again(lost()).expect("room for another attempt");
            assert!(resends.any_lost());
        }
        assert!(matches!(
            resends.again(lost()),
            Err(Error::OutcomeUnknown { .. })
        ));
    }

    #[test]
    fn only_a_write_settled_as_not_applied_goes_again() {
        let mut resends = Resends::default();
        let not_applied = Error::Transient {
            message: "the write was not applied".into(),
        };
        resends.again_if_not_applied(not_applied).expect("again");
        assert!(matches!(
            resends.again_if_not_applied(lost()),
            Err(Error::OutcomeUnknown { .. })
        ));
    }
}
