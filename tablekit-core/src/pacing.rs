//! Pacing: keeping a bulk load at the rate the store takes (see [`Pacing`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// The rates a `BulkWriter` keeps to, shared by every
/// writer it is given to (the account's rate is the account's, however many
/// writers there are). Copies (`tablekit::copy`) and migrations
/// (`tablekit::Table::migrate`) are paced the same way.
/// By default a writer uses the pacing its backend keeps for the account
/// ([`TableBackend::pacing`](crate::TableBackend::pacing)), so that every
/// writer of one account shares one controller; a backend without one
/// gives each writer its own.
///
/// The service takes about 2,000 entities a second per partition and 20,000
/// per account; above that it answers 503 Server Busy (Cosmos DB for Table
/// answers 429, with the time to wait). A paced writer spaces its
/// transactions so that each partition, and the account, stays at its rate.
///
/// **Adaptive, by default** ([`Pacing::service_targets`]): the rates start at
/// the service's targets and follow the store. Each transaction the store
/// takes raises its partition's rate and the account's a little (additive
/// increase); each one it throttles cuts the rate to 85% (multiplicative
/// decrease), and the next transaction of that partition waits at least the
/// store's `Retry-After`. A throttle is put down to the account when the
/// account has been sent nearly its whole rate in the last second, else to
/// the partition. After the first throttle the increase is a small share of
/// the rate the store throttled at, so the rate settles just under what the
/// store takes: about 90% of it on average, with a few throttled
/// transactions in a hundred. Before the first throttle the rise is a slow
/// start: each entity the store takes raises the rate by eight, so a lane
/// sending all it may doubles its rate about every 90 ms, and a store that
/// never throttles (Azurite, a local backend) stops holding the writer back
/// within a fraction of a second.
///
/// Each rate is kept as a token bucket: an adaptive lane that has been
/// quiet may send a second's worth at once (the targets are per second),
/// then keeps to its rate; a throttle empties the bucket. A load that fits
/// in a second's worth is not held back at all.
///
/// [`Pacing::new`] keeps fixed rates instead. A batch the store throttles
/// waits (its `Retry-After`, or a doubling back-off) and goes again, up to
/// [`Pacing::MAX_THROTTLED`] times.
///
/// The waits use tokio's timer; outside a tokio runtime (a plain
/// `block_on`) a writer cannot wait, and its batches go unspaced.
///
/// ```
/// use tablekit::pacing::Pacing;
/// let shared = Pacing::service_targets(); // adaptive, from 2,000 / 20,000 a second
/// let gentle = Pacing::new(500.0, 5_000.0); // fixed: entities per second
/// # let _ = (shared, gentle);
/// ```
#[derive(Debug, Clone)]
pub struct Pacing {
    per_partition: f64,
    per_account: f64,
    adaptive: bool,
    /// How far ahead of its rate a lane may send after a pause: a second's
    /// worth for adaptive rates, none for fixed ones.
    burst: Duration,
    /// The account, as the pacing metric names it.
    account: Arc<str>,
    state: Arc<Mutex<State>>,
}

/// The pace of one partition, or of the account.
#[derive(Debug, Clone)]
struct Lane {
    /// Entities a second now.
    rate: f64,
    /// When its next entity may go.
    next: Option<Instant>,
    /// The rate the store was taking when it last throttled this lane.
    throttled_at: Option<f64>,
    /// When the rate was last cut.
    cut: Option<Instant>,
    /// The entities the store took in the last second.
    taken: VecDeque<(Instant, usize)>,
}

impl Lane {
    fn new(rate: f64) -> Lane {
        Lane {
            rate,
            next: None,
            throttled_at: None,
            cut: None,
            taken: VecDeque::new(),
        }
    }

    /// The entities the store took in the second before `now`.
    fn taken_in_last_second(&mut self, now: Instant) -> usize {
        while self
            .taken
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > Duration::from_secs(1))
        {
            self.taken.pop_front();
        }
        self.taken.iter().map(|(_, n)| n).sum()
    }

    /// The rise after the store took `entities`. Until the store first
    /// throttles this lane, a slow start: [`SLOW_START`] for each entity
    /// taken (at least a twentieth of the starting rate), so that a lane
    /// that sends all its rate doubles about every 90 ms, and a store that
    /// never throttles soon stops holding it back.
    /// Then additive increase: for each second's worth of entities taken,
    /// 1.5% of the rate it throttled at (a steady rise in time, whatever
    /// the size of the transactions).
    fn increase(&mut self, now: Instant, entities: usize, start: f64) {
        self.taken.push_back((now, entities));
        self.taken_in_last_second(now);
        let step = match self.throttled_at {
            None => (start / 20.0).max(SLOW_START * entities as f64),
            Some(at) => INCREASE * at * entities as f64 / self.rate,
        };
        self.rate = (self.rate + step).min(start * MAX_FACTOR);
    }

    /// Multiplicative decrease from what the store was taking, after it
    /// throttled a transaction of `entities`: the rate, or what it took in
    /// the last second when that is less (a store throttles once a
    /// second's worth is in); at most once a second. And a wait of at least
    /// `retry_after`.
    fn decrease(
        &mut self,
        now: Instant,
        entities: usize,
        retry_after: Option<Duration>,
        burst: Duration,
    ) {
        // One cut per second: the throttles of the retries that follow
        // within it are the same crowding, not a store that takes less.
        let cut_lately = self
            .cut
            .is_some_and(|at| now.saturating_duration_since(at) < Duration::from_secs(1));
        if !cut_lately {
            self.cut = Some(now);
            let taken = self.taken_in_last_second(now);
            let base = if taken > 0 {
                self.rate.min(taken as f64)
            } else {
                self.rate
            };
            self.throttled_at = Some(base);
            self.rate = (base * DECREASE).max(MIN_RATE).min(self.rate);
        }
        // The retry goes when the oldest transaction of the last second
        // leaves it (the store counts a second at a time), or one slot at
        // the new rate after the last one taken, whichever is later.
        // The bucket is emptied: no burst until the lane has been quiet.
        let mut retry = now;
        if let (Some(&(first, _)), Some(&(last, _))) = (self.taken.front(), self.taken.back()) {
            let slot = Duration::from_secs_f64(entities.max(1) as f64 / self.rate);
            retry = (first + Duration::from_secs(1)).max(last + slot).max(now);
        }
        if let Some(wait) = retry_after {
            retry = retry.max(now + wait);
        }
        self.next = Some(retry + burst);
    }
}

/// How much a lane's rate rises for each entity the store took, until the
/// store first throttles it: the rate then grows with what it sends, by
/// e⁸ a second when it sends all of it (TCP's slow start, steeper). A
/// twentieth of the starting rate per transaction, as before, kept a lane
/// that one writer fills (a single partition) at half a non-throttling
/// store's speed for the first seconds: 0.62× the unpaced writer on
/// Azurite with 20,000 entities in one partition.
const SLOW_START: f64 = 8.0;
/// The share of its rate a lane keeps when the store throttles it.
const DECREASE: f64 = 0.85;
/// How much of the rate it throttled at a lane gains per second's worth
/// of entities taken.
const INCREASE: f64 = 0.015;
/// The lowest rate a lane is cut to, in entities a second.
const MIN_RATE: f64 = 1.0;
/// How far above its starting rate a lane may rise.
const MAX_FACTOR: f64 = 50.0;

#[derive(Debug)]
struct State {
    account: Lane,
    partitions: HashMap<String, Lane>,
    /// The entities sent to the account in the last second, for telling an
    /// account's throttle from a partition's.
    sent: VecDeque<(Instant, usize)>,
}

impl State {
    /// Whether the account was sent nearly its whole rate in the second
    /// before `now` (booked sends still ahead count too).
    fn account_bound(&self, now: Instant) -> bool {
        let recent: usize = self
            .sent
            .iter()
            .filter(|(at, _)| now.saturating_duration_since(*at) <= Duration::from_secs(1))
            .map(|(_, n)| n)
            .sum();
        recent as f64 >= 0.8 * self.account.rate
    }
}

impl Pacing {
    /// How often a throttled batch goes again before it fails.
    pub const MAX_THROTTLED: u32 = 8;

    /// Fixed rates: at most `per_partition` entities a second to one
    /// partition and `per_account` to all (each at least 1).
    pub fn new(per_partition: f64, per_account: f64) -> Pacing {
        Pacing::with(per_partition, per_account, false)
    }

    /// Adaptive rates starting at `per_partition` and `per_account`
    /// entities a second (see the type's documentation).
    pub fn adaptive(per_partition: f64, per_account: f64) -> Pacing {
        Pacing::with(per_partition, per_account, true)
    }

    /// Adaptive rates starting at the service's targets: 2,000 entities a
    /// second per partition, 20,000 per account. The default of every
    /// writer.
    pub fn service_targets() -> Pacing {
        Pacing::adaptive(2_000.0, 20_000.0)
    }

    fn with(per_partition: f64, per_account: f64, adaptive: bool) -> Pacing {
        let per_partition = per_partition.max(MIN_RATE);
        let per_account = per_account.max(MIN_RATE);
        Pacing {
            per_partition,
            per_account,
            adaptive,
            burst: if adaptive {
                Duration::from_secs(1)
            } else {
                Duration::ZERO
            },
            account: Arc::from(""),
            state: Arc::new(Mutex::new(State {
                account: Lane::new(per_account),
                partitions: HashMap::new(),
                sent: VecDeque::new(),
            })),
        }
    }

    /// Names the account this pacing keeps to, for the metric of its rate
    /// (`tablekit.pacing.rate`, see [`crate::telemetry`]).
    pub fn for_account(mut self, account: &str) -> Pacing {
        self.account = account.into();
        self
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rates now, in entities a second: `partition`'s and the account's.
    pub fn rates(&self, partition: &str) -> (f64, f64) {
        let state = self.state();
        let partition = state
            .partitions
            .get(partition)
            .map_or(self.per_partition, |lane| lane.rate);
        (partition, state.account.rate)
    }

    /// Waits `wait` on tokio's timer, when there is a tokio runtime to wait
    /// on; returns at once otherwise.
    #[doc(hidden)]
    pub async fn wait(wait: Duration) {
        if !wait.is_zero() && tokio::runtime::Handle::try_current().is_ok() {
            crate::telemetry::paced(wait);
            tokio::time::sleep(wait).await;
        }
    }

    /// Waits after the store throttled a batch for the `attempt`th time
    /// (from 0), reporting the retry ([`crate::telemetry`]), and the
    /// throttled answer where the store's client did not report it (see
    /// [`crate::telemetry::throttled_here`]).
    #[doc(hidden)]
    pub async fn wait_throttled(
        store: &crate::telemetry::StoreInfo,
        attempt: u32,
        retry_after: Option<Duration>,
    ) {
        let wait = Pacing::back_off(attempt, retry_after);
        crate::telemetry::throttled_here(store, wait, retry_after);
        crate::telemetry::retry(store.system(), "throttled", attempt + 1, wait);
        Pacing::wait(wait).await;
    }

    /// Reserves room for `entities` writes to `partition` and returns how
    /// long to wait before sending them.
    #[doc(hidden)]
    pub fn reserve(&self, partition: &str, entities: usize) -> Duration {
        let now = Instant::now();
        let per_partition = self.per_partition;
        let mut state = self.state();
        let n = entities.max(1) as f64;
        // Each lane is a token bucket (the generic cell rate algorithm): its
        // theoretical next time moves on by each transaction's share of the
        // rate, and a transaction may go as long as that time is no more
        // than the burst ahead of now.
        let burst = self.burst;
        let allowed = |tat: Instant| tat.checked_sub(burst).map_or(now, |at| at.max(now));
        let account_tat = state.account.next.map_or(now, |at| at.max(now));
        let account_at = allowed(account_tat);
        let lane = match state.partitions.get_mut(partition) {
            Some(lane) => lane,
            None => state
                .partitions
                .entry(partition.to_owned())
                .or_insert_with(|| Lane::new(per_partition)),
        };
        let partition_tat = lane.next.map_or(now, |at| at.max(now));
        let start = account_at.max(allowed(partition_tat));
        lane.next = Some(partition_tat.max(start) + Duration::from_secs_f64(n / lane.rate));
        // The account's share is booked on its own timeline, so a batch
        // that waits for its partition does not hold the others back.
        state.account.next = Some(account_tat + Duration::from_secs_f64(n / state.account.rate));
        state.sent.push_back((start, entities));
        while state
            .sent
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > Duration::from_secs(1))
        {
            state.sent.pop_front();
        }
        // Partitions idle for a while need no memory (their learnt rate
        // goes with them).
        if state.partitions.len() > 10_000 {
            state
                .partitions
                .retain(|_, lane| lane.next.is_some_and(|at| at > now));
        }
        start - now
    }

    /// The store took a transaction of `entities` to `partition`: the
    /// rates rise a little.
    #[doc(hidden)]
    pub fn accepted(&self, partition: &str, entities: usize) {
        if !self.adaptive {
            return;
        }
        let now = Instant::now();
        let (per_partition, per_account) = (self.per_partition, self.per_account);
        let mut state = self.state();
        if let Some(lane) = state.partitions.get_mut(partition) {
            lane.increase(now, entities, per_partition);
        }
        state.account.increase(now, entities, per_account);
        crate::telemetry::pacing_rate(&self.account, state.account.rate);
    }

    /// The store throttled a transaction of `partition`: its rate, or the
    /// account's when the account was sent nearly its whole rate in the
    /// last second, is cut; the partition waits at least `retry_after`.
    #[doc(hidden)]
    pub fn throttled(&self, partition: &str, entities: usize, retry_after: Option<Duration>) {
        let now = Instant::now();
        let burst = self.burst;
        let mut state = self.state();
        let account_bound = state.account_bound(now);
        let adaptive = self.adaptive;
        if let Some(lane) = state.partitions.get_mut(partition) {
            if adaptive && !account_bound {
                lane.decrease(now, entities, retry_after, burst);
            } else if let Some(wait) = retry_after {
                let until = now + wait + burst;
                lane.next = Some(lane.next.map_or(until, |next| next.max(until)));
            }
        }
        if adaptive && account_bound {
            state.account.decrease(now, entities, None, burst);
        }
        crate::telemetry::pacing_rate(&self.account, state.account.rate);
    }

    /// How long a batch throttled for the `attempt`th time (from 0) waits.
    #[doc(hidden)]
    pub fn back_off(attempt: u32, retry_after: Option<Duration>) -> Duration {
        retry_after.unwrap_or(Duration::from_millis(50) * 2u32.pow(attempt.min(6)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        // Fixed rates stay fixed.
        pacing.accepted("a", 50);
        pacing.throttled("a", 50, None);
        assert_eq!(pacing.rates("a"), (100.0, 300.0));
    }

    #[derive(Debug, Clone)]
    enum Event {
        Accepted,
        Throttled(Option<u64>),
    }

    fn events() -> impl Strategy<Value = Vec<(u8, usize, Event)>> {
        proptest::collection::vec(
            (
                0u8..3,
                1usize..=100,
                prop_oneof![
                    4 => Just(Event::Accepted),
                    1 => proptest::option::of(0u64..2000).prop_map(Event::Throttled),
                ],
            ),
            1..200,
        )
    }

    proptest! {
        /// The rate model: rates stay within their bounds; a transaction
        /// taken never lowers them and a throttle never raises them; a
        /// throttle put down to the partition cuts its rate to 85%; a
        /// `Retry-After` holds the partition's next transaction back at
        /// least that long; and two reservations of a partition are never
        /// closer than the first one's share of the rate it was booked at.
        #[test]
        fn the_rate_model_holds(events in events()) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
            runtime.block_on(async {
                let pacing = Pacing::adaptive(100.0, 1_000.0);
                for (p, n, event) in events {
                    let partition = format!("p{p}");
                    let wait = pacing.reserve(&partition, n);
                    let (rate, account) = pacing.rates(&partition);
                    prop_assert!((MIN_RATE..=100.0 * MAX_FACTOR).contains(&rate), "{rate}");
                    prop_assert!((MIN_RATE..=1_000.0 * MAX_FACTOR).contains(&account), "{account}");
                    // The next reservation is spaced by this one's share.
                    let next = pacing.state().partitions[&partition].next.unwrap();
                    let booked = Instant::now() + wait;
                    prop_assert!(next >= booked + Duration::from_secs_f64(n as f64 / rate) - Duration::from_micros(1));
                    match event {
                        Event::Accepted => {
                            pacing.accepted(&partition, n);
                            let (after, account_after) = pacing.rates(&partition);
                            prop_assert!(after >= rate && account_after >= account);
                        }
                        Event::Throttled(retry) => {
                            let retry = retry.map(Duration::from_millis);
                            let account_bound = pacing.state().account_bound(Instant::now());
                            let cut_lately = pacing.state().partitions[&partition]
                                .cut
                                .is_some_and(|at| Instant::now().saturating_duration_since(at) < Duration::from_secs(1));
                            pacing.throttled(&partition, n, retry);
                            let (after, account_after) = pacing.rates(&partition);
                            prop_assert!(after <= rate && account_after <= account);
                            if !account_bound && !cut_lately {
                                prop_assert!(after <= (rate * DECREASE).max(MIN_RATE) + 1e-9, "{after} from {rate}");
                            }
                            if let Some(retry) = retry {
                                let held = pacing.reserve(&partition, 1);
                                prop_assert!(held >= retry, "{held:?} < {retry:?}");
                            }
                        }
                    }
                    tokio::time::advance(wait).await;
                }
                Ok(())
            })?;
        }
    }
}
