//! A model run of rows that expire: random writes (each with a random
//! expiry time, or none), moves of the clock, reads and sweeps, with
//! transient failures and lost answers injected at random steps. After
//! each step, against the rows as stored: a typed read sees exactly the
//! entities whose time has not come; every stored entity that expires has
//! its expiry index row; a sweep deleted no live entity. After each run,
//! sweeps with time past every expiry leave the entities that never
//! expire, and no index row.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tablekit::backend::{Query, TableBackend};
use tablekit::clock::{Clock, ManualClock};
use tablekit::layer::{Fault, FaultInjection, Injection};
use tablekit::table::Table;
use tablekit::{DateTime, Entity, Error, TableBackendExt, TableEntity, Value, schema};

use super::fresh_table;

/// A token that expires at its own time.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Tokens", kind = "TOK")]
struct Token {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    value: u32,
    #[tablekit(expires)]
    expires_at: Option<DateTime>,
}

/// The same, with a unique value (few, so that writes meet holders, live
/// and expired) and a change feed: rows beside each entity.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Tokens", kind = "TOK", changes)]
#[tablekit(index(name = "value", tag = "value"))]
struct UniqueToken {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "value")]
    value: u32,
    #[tablekit(expires)]
    expires_at: Option<DateTime>,
}

/// A token of the model, plain or with rows beside it.
pub(crate) trait ModelToken:
    TableEntity<PartitionKey = String, RowKey = u32> + Sync
{
    /// How many values the tokens draw from.
    const VALUES: u32;
    fn make(user: &str, id: u32, value: u32, expires_at: Option<DateTime>) -> Self;
    fn id(&self) -> u32;
    fn value(&self) -> u32;
    fn set(&mut self, value: u32, expires_at: Option<DateTime>);
}

macro_rules! model_token {
    ($t:ty, $values:expr) => {
        impl ModelToken for $t {
            const VALUES: u32 = $values;
            fn make(user: &str, id: u32, value: u32, expires_at: Option<DateTime>) -> Self {
                Self {
                    user: user.to_owned(),
                    id,
                    value,
                    expires_at,
                }
            }
            fn id(&self) -> u32 {
                self.id
            }
            fn value(&self) -> u32 {
                self.value
            }
            fn set(&mut self, value: u32, expires_at: Option<DateTime>) {
                self.value = value;
                self.expires_at = expires_at;
            }
        }
    };
}
model_token!(Token, u32::MAX);
model_token!(UniqueToken, 3);

#[derive(Debug, Clone, Copy)]
enum Step {
    Insert,
    Upsert,
    Update,
    Delete,
    Bulk,
    Transaction,
    Advance,
    Sweep,
}

const STEPS: [Step; 8] = [
    Step::Insert,
    Step::Upsert,
    Step::Update,
    Step::Delete,
    Step::Bulk,
    Step::Transaction,
    Step::Advance,
    Step::Sweep,
];

/// What the runs did, to show they were varied.
#[derive(Debug, Default)]
pub struct ExpiryModelOutcomes {
    /// Writes and sweeps that succeeded.
    pub applied: usize,
    /// Steps a fault ended.
    pub faulted: usize,
    /// Writes refused (a taken key, no entity).
    pub refused: usize,
    /// Entities the sweeps of the runs deleted.
    pub swept: usize,
    /// Entities the sweeps after the runs deleted.
    pub cleared: usize,
}

/// The entities stored in partition `pk`, by id, as rows.
async fn stored(backend: &dyn TableBackend, name: &str, pk: &str) -> BTreeMap<u32, Entity> {
    let query = Query::new().filter(tablekit::filter::Filter::partition_key().eq(pk));
    let rows = backend.query_all(name, query).await.expect("rows");
    rows.into_iter()
        .filter_map(|r| Some((r.row_key.strip_prefix("TOK_")?.parse().ok()?, r)))
        .collect()
}

/// The expiry index rows, as (entity RowKey, expiry ticks in the key).
async fn index_rows(backend: &dyn TableBackend, name: &str) -> Vec<(String, String)> {
    let rows = backend.query_all(name, Query::new()).await.expect("rows");
    rows.into_iter()
        .filter(|r| r.partition_key.starts_with(schema::EXPIRY_PARTITIONS))
        .map(|r| {
            let rk = match r.get(schema::EXPIRY_RK) {
                Some(Value::String(rk)) => rk.clone(),
                other => panic!("an index row without its entity's RowKey: {other:?}"),
            };
            (rk, r.row_key)
        })
        .collect()
}

fn expiry_of(row: &Entity) -> Option<DateTime> {
    match row.get("expires_at") {
        Some(Value::DateTime(at)) => Some(*at),
        _ => None,
    }
}

/// Random runs of `steps` steps each; see the module.
async fn expiry_model_runs<T: ModelToken>(
    backend: Arc<dyn TableBackend>,
    runs: usize,
    steps: usize,
    seed: u64,
) -> ExpiryModelOutcomes {
    let mut outcomes = ExpiryModelOutcomes::default();
    let name = fresh_table(&*backend, "expmodel").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let handle = layer.handle();
    handle.seed(seed);
    let start =
        DateTime::from_unix_nanos(DateTime::now().unix_nanos() / 1_000_000_000 * 1_000_000_000)
            .expect("a time");
    let clock = ManualClock::at(start);
    let t: Table<T> = Table::from_arc(Arc::new(layer), &name).with_clock(Arc::new(clock.clone()));
    let plain: Table<T> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    let mut rng = fastrand::Rng::with_seed(seed);
    for run in 0..runs {
        let pk = format!("run{run}");
        for _ in 0..steps {
            if rng.f64() < 0.4 {
                let fault = if rng.bool() {
                    Fault::Transient
                } else {
                    Fault::LostResponse
                };
                handle.inject(Injection::any().skip(rng.usize(0..4)).fault(fault));
            }
            let now = clock.now();
            let live_before: Vec<u32> = stored(&*backend, &name, &pk)
                .await
                .into_iter()
                .filter(|(_, row)| !schema::expired::<T, _>(&row.properties, now))
                .map(|(id, _)| id)
                .collect();
            let step = STEPS[rng.usize(0..STEPS.len())];
            let result = apply(step, &t, &clock, &pk, &mut rng).await;
            handle.clear();
            if let Err(Error::UniqueViolation { held_by, value, .. }) = &result {
                // Only a live holder keeps a value from a write.
                let holder = stored(&*backend, &name, &pk).await;
                let holder = holder.values().find(|row| row.row_key == *held_by);
                assert!(
                    holder.is_some_and(|row| !schema::expired::<T, _>(&row.properties, now)),
                    "run {run}: {value} refused for a holder that is not live: {holder:?}"
                );
            }
            match &result {
                Ok(swept) => {
                    outcomes.applied += 1;
                    outcomes.swept += swept;
                }
                Err(e) if e.is_transient() || e.is_outcome_unknown() => outcomes.faulted += 1,
                Err(_) => outcomes.refused += 1,
            }
            if matches!(step, Step::Sweep) {
                let after = stored(&*backend, &name, &pk).await;
                for id in &live_before {
                    assert!(
                        after.contains_key(id),
                        "run {run}: a sweep deleted live entity {id}"
                    );
                }
            }
            holds(&plain, &*backend, &name, &pk, run, step).await;
        }
        // Past every expiry, sweeps leave what never expires, and no index row.
        clock.advance(Duration::from_secs(24 * 3600));
        loop {
            let sweep = plain.sweep_expired(1000).await.expect("a sweep");
            outcomes.cleared += sweep.deleted;
            if !sweep.more {
                break;
            }
        }
        let left = stored(&*backend, &name, &pk).await;
        assert!(
            left.values().all(|row| expiry_of(row).is_none()),
            "run {run}: {left:?}"
        );
        let index = index_rows(&*backend, &name).await;
        assert!(index.is_empty(), "run {run}: index rows left: {index:?}");
    }
    backend.delete_table(&name).await.expect("drop");
    outcomes
}

/// One step; the number of entities a sweep deleted.
async fn apply<T: ModelToken>(
    step: Step,
    t: &Table<T>,
    clock: &ManualClock,
    pk: &str,
    rng: &mut fastrand::Rng,
) -> tablekit::Result<usize> {
    let now = clock.now();
    let id = rng.u32(1..=4);
    // No expiry, one to come, or one already past.
    let expires_at = match rng.usize(0..4) {
        0 => None,
        1 => Some(now.saturating_add(Duration::from_secs(rng.u64(1..=1800)))),
        2 => Some(DateTime::from_ticks(now.ticks() - rng.i64(0..=6_000_000_000)).expect("a time")),
        _ => Some(now.saturating_add(Duration::from_secs(rng.u64(1..=60) * 60))),
    };
    let token = T::make(pk, id, rng.u32(0..T::VALUES), expires_at);
    match step {
        Step::Insert => t.insert(&token).await.map(|_| 0),
        Step::Upsert => t.upsert(&token).await.map(|_| 0),
        Step::Update => t
            .update(pk, id, |stored: &mut T| {
                stored.set(token.value(), expires_at)
            })
            .await
            .map(|_| 0),
        Step::Delete => t.delete_unconditionally(pk, id).await.map(|_| 0),
        Step::Bulk => {
            let report = t.bulk().upsert(std::slice::from_ref(&token)).await;
            match report.failures.first() {
                None => Ok(0),
                Some(failure) => Err(Error::Transient {
                    message: failure.error.to_string(),
                }),
            }
        }
        Step::Transaction => {
            let mut tx = t.transaction();
            tx.upsert(&token)?;
            tx.submit().await.map(|_| 0)
        }
        Step::Advance => {
            clock.advance(Duration::from_secs(rng.u64(0..=1200)));
            Ok(0)
        }
        Step::Sweep => t.sweep_expired(rng.usize(1..=4)).await.map(|s| s.deleted),
    }
}

/// The invariants after a step, against the rows as stored.
async fn holds<T: ModelToken>(
    plain: &Table<T>,
    backend: &dyn TableBackend,
    name: &str,
    pk: &str,
    run: usize,
    step: Step,
) {
    let rows = stored(backend, name, pk).await;
    let now_rows: Vec<u32> = {
        let read = plain
            .query()
            .partition(pk)
            .collect()
            .await
            .expect("a query");
        read.iter().map(|token| token.id()).collect()
    };
    let index = index_rows(backend, name).await;
    let mut live = Vec::new();
    for (id, row) in &rows {
        // Typed reads see what has not expired, as a query does.
        let seen = plain.get(pk, *id).await.expect("get").is_some();
        let expired = now_rows.binary_search(id).is_err();
        assert_eq!(
            seen, !expired,
            "run {run}, after {step:?}: get and query disagree on {id}"
        );
        if !expired {
            live.push(*id);
        }
        // Each entity that expires has its index row, at its time.
        if let Some(at) = expiry_of(row) {
            let ticks = format!("{:019}", at.ticks());
            assert!(
                index
                    .iter()
                    .any(|(rk, key)| *rk == row.row_key && key.contains(&ticks)),
                "run {run}, after {step:?}: {id} (expiring {at}) has no index row"
            );
        }
    }
    assert_eq!(now_rows, live, "run {run}, after {step:?}");
    // Index rows move with their entities, expired or not.
    let audit = plain.verify_indexes(pk).await.expect("an audit");
    assert!(audit.is_clean(), "run {run}, after {step:?}: {audit:?}");
}

/// Model runs on a backend: varied, and every invariant held.
pub async fn expiring_rows_stay_in_step_under_faults(backend: Arc<dyn TableBackend>) {
    let outcomes = expiry_model_runs::<Token>(Arc::clone(&backend), 6, 40, 0x5eed_0068).await;
    assert!(
        // (Which sweeps a fault stops depends on which of their
        // concurrent requests it meets: only that sweeps deleted some.)
        outcomes.applied > 20 && outcomes.faulted > 3 && outcomes.swept + outcomes.cleared > 0,
        "{outcomes:?}"
    );
    let outcomes = expiry_model_runs::<UniqueToken>(backend, 6, 40, 0x5eed_1068).await;
    assert!(
        // (Which sweeps a fault stops depends on which of their
        // concurrent requests it meets: only that sweeps deleted some.)
        outcomes.applied > 20 && outcomes.faulted > 3 && outcomes.swept + outcomes.cleared > 0,
        "{outcomes:?}"
    );
}
