//! Time, as the parts of tablekit that wait see it: the queue worker, the
//! outbox sweeper, and the in-memory queue's visibility and expiry.
//!
//! [`SystemClock`] is the real time. [`ManualClock`] stands still until a
//! test moves it, so code that waits minutes (a visibility timeout, a sweep
//! age) is tested in microseconds, and exactly:
//!
//! ```
//! use std::time::Duration;
//! use tablekit::clock::{Clock, ManualClock};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let clock = ManualClock::new();
//! let start = clock.now();
//! let nap = clock.sleep(Duration::from_secs(60));
//! clock.advance(Duration::from_secs(60));
//! nap.await; // returns at once: the clock has passed its deadline
//! assert_eq!(clock.now(), start.saturating_add(Duration::from_secs(60)));
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::datetime::DateTime;

/// A source of the current time that can also wait.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> DateTime;

    /// A future that completes once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> DateTime {
        (**self).now()
    }
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        (**self).sleep(duration)
    }
}

/// The system's clock, sleeping with tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime {
        DateTime::now()
    }
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A clock that moves only when told to. Clones share one time.
///
/// Sleepers wake when [`advance`](ManualClock::advance) or
/// [`set`](ManualClock::set) moves the time to or past their deadline.
#[derive(Clone)]
pub struct ManualClock {
    time: Arc<tokio::sync::watch::Sender<DateTime>>,
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}

impl Default for ManualClock {
    fn default() -> ManualClock {
        ManualClock::new()
    }
}

impl ManualClock {
    /// A clock at the current system time, standing still.
    pub fn new() -> ManualClock {
        ManualClock::at(DateTime::now())
    }

    /// A clock standing at `time`.
    pub fn at(time: DateTime) -> ManualClock {
        ManualClock {
            time: Arc::new(tokio::sync::watch::Sender::new(time)),
        }
    }

    /// Moves the time forward by `by`, waking every sleeper whose deadline
    /// it reaches.
    pub fn advance(&self, by: Duration) {
        self.time
            .send_modify(|time| *time = time.saturating_add(by));
    }

    /// Sets the time (forward only: an earlier time is ignored, as time
    /// does not run backwards for the code under test).
    pub fn set(&self, time: DateTime) {
        self.time.send_if_modified(|now| {
            let later = time > *now;
            if later {
                *now = time;
            }
            later
        });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime {
        *self.time.borrow()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let deadline = self.now().saturating_add(duration);
        let mut time = self.time.subscribe();
        Box::pin(async move {
            // The sender lives as long as any clone of the clock; if every
            // clone is gone, nobody can move time, and the sleep ends.
            let _ = time.wait_for(|now| *now >= deadline).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn manual_sleepers_wake_at_their_deadline() {
        let clock = ManualClock::new();
        let start = clock.now();
        let mut short = clock.sleep(Duration::from_secs(5));
        let mut long = clock.sleep(Duration::from_secs(50));
        assert!((&mut short).now_or_never().is_none());
        clock.advance(Duration::from_secs(4));
        assert!((&mut short).now_or_never().is_none());
        clock.advance(Duration::from_secs(1));
        assert!((&mut short).now_or_never().is_some());
        assert!((&mut long).now_or_never().is_none());
        clock.set(start);
        assert_eq!(
            clock.now(),
            start.saturating_add(Duration::from_secs(5)),
            "time never runs back"
        );
        clock.set(start.saturating_add(Duration::from_secs(60)));
        assert!(long.now_or_never().is_some());
        assert!(clock.sleep(Duration::ZERO).now_or_never().is_some());
    }
}
