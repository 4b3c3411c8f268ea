//! Pacing: keeping a bulk load under the store's scalability targets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// The rates a [`BulkWriter`](super::BulkWriter) keeps to, shared by every
/// writer it is given to (the account's rate is the account's, however many
/// writers there are).
///
/// The service takes about 2,000 entities a second per partition and 20,000
/// per account ([`Pacing::service_targets`]); above that it answers 503
/// Server Busy. A paced writer spaces its transactions so that each
/// partition, and the account, stays at or under its rate; and a batch the
/// store throttles anyway waits (the store's `Retry-After`, or a doubling
/// back-off) and goes again, up to [`Pacing::MAX_THROTTLED`] times.
///
/// Every [`BulkWriter`](super::BulkWriter) is paced at the service's targets
/// unless told otherwise ([`BulkWriter::unpaced`](super::BulkWriter::unpaced)).
/// At those targets a transaction of 100 rows books 50 ms of its partition
/// and 5 ms of the account: a writer's first transaction goes at once, and
/// a load of a few hundred rows waits some tens of milliseconds. The waits use tokio's timer; outside a
/// tokio runtime (a plain `block_on`) a writer cannot wait, and its batches
/// go unspaced.
///
/// ```
/// use tablekit::table::Pacing;
/// let shared = Pacing::service_targets();
/// let gentle = Pacing::new(500.0, 5_000.0); // entities per second
/// # let _ = (shared, gentle);
/// ```
#[derive(Debug, Clone)]
pub struct Pacing {
    per_partition: f64,
    per_account: f64,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// When the account's next entity may go.
    account: Option<Instant>,
    /// When each partition's next entity may go.
    partitions: HashMap<String, Instant>,
}

impl Pacing {
    /// How often a throttled batch goes again before it fails.
    pub const MAX_THROTTLED: u32 = 8;

    /// At most `per_partition` entities a second to one partition and
    /// `per_account` to all (each at least 1).
    pub fn new(per_partition: f64, per_account: f64) -> Pacing {
        Pacing {
            per_partition: per_partition.max(1.0),
            per_account: per_account.max(1.0),
            state: Arc::default(),
        }
    }

    /// The service's targets: 2,000 entities a second per partition, 20,000
    /// per account.
    pub fn service_targets() -> Pacing {
        Pacing::new(2_000.0, 20_000.0)
    }

    /// Waits `wait` on tokio's timer, when there is a tokio runtime to wait
    /// on; returns at once otherwise.
    pub(crate) async fn wait(wait: Duration) {
        if !wait.is_zero() && tokio::runtime::Handle::try_current().is_ok() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Reserves room for `entities` writes to `partition` and returns how
    /// long to wait before sending them.
    pub(crate) fn reserve(&self, partition: &str, entities: usize) -> Duration {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let n = entities.max(1) as f64;
        let account_at = state.account.map_or(now, |at| at.max(now));
        let partition_at = state
            .partitions
            .get(partition)
            .map_or(now, |&at| at.max(now));
        let start = account_at.max(partition_at);
        // The account's share is booked on its own timeline, so a batch
        // that waits for its partition does not hold the others back.
        state.account = Some(account_at + Duration::from_secs_f64(n / self.per_account));
        state.partitions.insert(
            partition.to_owned(),
            start + Duration::from_secs_f64(n / self.per_partition),
        );
        // Partitions idle for a while need no memory.
        if state.partitions.len() > 10_000 {
            state.partitions.retain(|_, at| *at > now);
        }
        start - now
    }

    /// How long a batch throttled for the `attempt`th time (from 0) waits.
    pub(crate) fn back_off(attempt: u32, retry_after: Option<Duration>) -> Duration {
        retry_after.unwrap_or(Duration::from_millis(50) * 2u32.pow(attempt.min(6)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn reservations_space_partitions_and_the_account() {
        let pacing = Pacing::new(100.0, 300.0);
        // The first batch goes at once; the next to the same partition waits
        // for the first's share of the partition's second.
        assert_eq!(pacing.reserve("a", 50), Duration::ZERO);
        let wait = pacing.reserve("a", 50);
        assert!(
            wait > Duration::from_millis(450) && wait <= Duration::from_millis(500),
            "{wait:?}"
        );
        // Another partition waits only for the account: 100 entities so far at 300/s.
        let other = pacing.reserve("b", 10);
        assert!(
            other > Duration::from_millis(280) && other <= Duration::from_millis(334),
            "{other:?}"
        );
        assert_eq!(Pacing::back_off(0, None), Duration::from_millis(50));
        assert_eq!(Pacing::back_off(2, None), Duration::from_millis(200));
        assert_eq!(
            Pacing::back_off(9, Some(Duration::from_secs(1))),
            Duration::from_secs(1)
        );
    }
}
