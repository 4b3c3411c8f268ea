//! `Table::update` under contention and faults: every increment is applied
//! exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::unique_table;
use tablekit::Error;
use tablekit::backend::TableBackend;
use tablekit::layer::{Fault, FaultHandle, FaultInjection, Injection, Operation};
use tablekit::table::{Table, UpdateOptions};

/// A counter row.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Counters", kind = "CTR")]
struct Counter {
    #[tablekit(partition_key)]
    name: String,
    #[tablekit(row_key)]
    id: u32,
    count: i64,
}

/// What one run of [`counter_increments_land_exactly_once`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterRun {
    /// Increments that `update` reported applied.
    pub applied: usize,
    /// Updates that gave up (attempts ran out).
    pub gave_up: usize,
    /// Updates whose outcome stayed unknown.
    pub unknown: usize,
    /// Writes sent to the store, to compare with `applied` (amplification).
    pub writes: usize,
    /// The counter's final value.
    pub final_count: i64,
}

/// `writers` tasks each increment one counter `increments` times through
/// `Table::update`, while `transient` of all calls fail before reaching the
/// store and `lost` lose their response after it acted. The counter ends at
/// exactly the number of increments reported applied, and none is unknown.
pub async fn counter_increments_land_exactly_once(backend: Arc<dyn TableBackend>) {
    // Generous attempts: this checks that nothing is lost or applied twice,
    // not how patient the default is on a loaded machine.
    let options = UpdateOptions::default().attempts(400);
    let run = run_counter(backend, 32, 20, 0.15, 0.10, options).await;
    assert_eq!(run.final_count, run.applied as i64, "{run:?}");
    assert_eq!(run.unknown, 0, "{run:?}");
    assert_eq!(run.gave_up, 0, "{run:?}");
}

/// Runs the counter workload and reports what happened (for tests and
/// benchmarks); see [`counter_increments_land_exactly_once`].
pub async fn run_counter(
    backend: Arc<dyn TableBackend>,
    writers: usize,
    increments: usize,
    transient: f64,
    lost: f64,
    options: UpdateOptions,
) -> CounterRun {
    let name = unique_table("ctr");
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    let table: Table<Counter> = Table::from_arc(Arc::new(layer), &name);
    table.create_if_missing().await.expect("create table");
    table
        .insert(&Counter {
            name: "c".into(),
            id: 1,
            count: 0,
        })
        .await
        .expect("insert");
    faults.seed(0x5EED);
    faults.inject(Injection::any().times(usize::MAX).probability(transient));
    faults.inject(
        Injection::any()
            .times(usize::MAX)
            .probability(lost)
            .fault(Fault::LostResponse),
    );
    let (applied, gave_up, unknown) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let tasks: Vec<_> = (0..writers)
        .map(|_| {
            let (table, options) = (table.clone(), options.clone());
            let (applied, gave_up, unknown) = (
                Arc::clone(&applied),
                Arc::clone(&gave_up),
                Arc::clone(&unknown),
            );
            async move {
                for _ in 0..increments {
                    let outcome = table
                        .update_with("c", 1u32, &options, |mut c| async move {
                            c.count += 1;
                            Ok::<_, Error>(c)
                        })
                        .await;
                    let counter = match outcome {
                        Ok(_) => &applied,
                        Err(e) if e.is_outcome_unknown() => &unknown,
                        Err(_) => &gave_up,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
        .collect();
    // The writers interleave at every request, as concurrent clients do.
    futures::future::join_all(tasks).await;
    faults.clear();
    let writes = faults.calls(tablekit::layer::Operation::UpdateEntity);
    let final_count = table
        .get("c", 1u32)
        .await
        .expect("read")
        .expect("stored")
        .count;
    backend.delete_table(&name).await.expect("delete table");
    CounterRun {
        applied: applied.load(Ordering::Relaxed),
        gave_up: gave_up.load(Ordering::Relaxed),
        unknown: unknown.load(Ordering::Relaxed),
        writes,
        final_count,
    }
}

/// A lost upsert (or upsert_merge) is sent again and lands once, whatever
/// the answer; an update whose write failed after it was applied (a 5xx
/// behind the store's back) recognises its own write and does not apply it
/// twice.
async fn resent_upserts_and_updates_land_once(table: &Table<Counter>, faults: &FaultHandle) {
    let counter = |id, count| Counter {
        name: "c".into(),
        id,
        count,
    };
    let lose = |operation| faults.inject(Injection::on(operation).fault(Fault::LostResponse));
    // A lost upsert is sent again: it lands once, whatever the answer.
    lose(Operation::UpsertEntity);
    table.upsert(&counter(4, 7)).await.expect("sent again");
    assert_eq!(
        table.get("c", 4u32).await.expect("get").map(|c| c.count),
        Some(7)
    );
    lose(Operation::UpsertEntity);
    lose(Operation::UpsertEntity);
    table
        .upsert_merge(&counter(4, 8))
        .await
        .expect("sent again");
    assert_eq!(
        table.get("c", 4u32).await.expect("get").map(|c| c.count),
        Some(8)
    );
    faults.clear();
    // An update whose write failed after it was applied (a 5xx behind the
    // store's back) recognises its own write and does not apply it twice.
    table.insert(&counter(5, 0)).await.expect("insert");
    faults.inject(Injection::on(Operation::UpdateEntity).fault(Fault::FailsAfterApply));
    let updated = table
        .update("c", 5u32, |c| c.count += 1)
        .await
        .expect("settled as written");
    assert_eq!(updated.count, 1);
    assert_eq!(
        table.get("c", 5u32).await.expect("get").map(|c| c.count),
        Some(1),
        "applied once"
    );
    faults.clear();
}

/// Eight writers increment counter 2 through read, change, replace, 20
/// times each, under transient failures and lost answers: the count is the
/// number of replaces reported applied, and none is left unsettled.
async fn concurrent_replaces_count_once(table: &Table<Counter>, faults: &FaultHandle) {
    table
        .insert(&Counter {
            name: "c".into(),
            id: 2,
            count: 0,
        })
        .await
        .expect("insert");
    faults.seed(7);
    faults.inject(Injection::any().times(usize::MAX).probability(0.1));
    faults.inject(
        Injection::any()
            .times(usize::MAX)
            .probability(0.1)
            .fault(Fault::LostResponse),
    );
    let applied = Arc::new(AtomicUsize::new(0));
    let writers = (0..8).map(|_| {
        let (table, applied) = (table.clone(), Arc::clone(&applied));
        async move {
            for _ in 0..20 {
                for _ in 0..200 {
                    let Ok(Some(mut c)) = table.get("c", 2u32).await else {
                        continue;
                    };
                    c.count += 1;
                    match table.replace(&mut c).await {
                        Ok(_) => {
                            applied.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        Err(e) if e.is_outcome_unknown() => panic!("unsettled: {e}"),
                        Err(_) => {}
                    }
                }
            }
        }
    });
    futures::future::join_all(writers).await;
    faults.clear();
    let count = table
        .get("c", 2u32)
        .await
        .expect("get")
        .expect("stored")
        .count;
    assert_eq!(count, applied.load(Ordering::Relaxed) as i64);
}

/// Inserts, writes through a `Loaded` and deletes whose answers are lost are
/// settled by reading the row back: they report what happened, never a
/// failure for a write that landed or success for one that did not.
pub async fn lost_answers_of_typed_writes_are_settled(backend: Arc<dyn TableBackend>) {
    use tablekit::layer::Operation;
    let name = unique_table("lost");
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    let table: Table<Counter> = Table::from_arc(Arc::new(layer), &name);
    table.create_if_missing().await.expect("create table");
    let counter = |id, count| Counter {
        name: "c".into(),
        id,
        count,
    };
    let lose = |operation| faults.inject(Injection::on(operation).fault(Fault::LostResponse));

    // An insert that landed.
    lose(Operation::InsertEntity);
    table
        .insert(&counter(1, 0))
        .await
        .expect("settled as written");
    // An insert that met an existing row: refused, even though its answer was lost.
    lose(Operation::InsertEntity);
    let again = table.insert(&counter(1, 5)).await;
    assert!(
        matches!(again, Err(Error::EntityAlreadyExists { .. })),
        "{again:?}"
    );

    // A replace that landed refreshes the ETag held.
    let mut loaded = table.get("c", 1u32).await.expect("get").expect("stored");
    let mut stale = loaded.clone();
    loaded.count = 1;
    lose(Operation::UpdateEntity);
    table
        .replace(&mut loaded)
        .await
        .expect("settled as written");
    let stored = table.get("c", 1u32).await.expect("get").expect("stored");
    assert_eq!(stored.count, 1);
    assert_eq!(
        tablekit::Loaded::etag(&stored),
        tablekit::Loaded::etag(&loaded)
    );
    // One that was refused (another writer came first) stays refused.
    stale.count = 100;
    lose(Operation::UpdateEntity);
    let refused = table.replace(&mut stale).await;
    assert!(
        matches!(refused, Err(Error::PreconditionFailed { .. })),
        "{refused:?}"
    );
    // A merge through the same value, after its own replace.
    loaded.count = 2;
    lose(Operation::UpdateEntity);
    table.merge(&mut loaded).await.expect("settled as written");
    assert_eq!(
        table
            .get("c", 1u32)
            .await
            .expect("get")
            .expect("stored")
            .count,
        2
    );

    // A delete that landed.
    lose(Operation::DeleteEntity);
    table.delete(&loaded).await.expect("settled as deleted");
    assert!(table.get("c", 1u32).await.expect("get").is_none());

    // An unconditional delete that landed is settled by the row being gone.
    table.insert(&counter(3, 0)).await.expect("insert");
    lose(Operation::DeleteEntity);
    table
        .delete_unconditionally("c", 3u32)
        .await
        .expect("settled as deleted");
    assert!(table.get("c", 3u32).await.expect("get").is_none());
    // One that failed before it reached the store is reported as it is,
    // and the row stays.
    table.insert(&counter(3, 0)).await.expect("insert");
    faults.inject(Injection::on(Operation::DeleteEntity));
    let deleted = table.delete_unconditionally("c", 3u32).await;
    assert!(
        matches!(deleted, Err(Error::Transient { .. })),
        "a plain failure is reported: {deleted:?}"
    );
    assert!(table.get("c", 3u32).await.expect("get").is_some());
    resent_upserts_and_updates_land_once(&table, &faults).await;

    // Many writers incrementing through read, change, replace.
    concurrent_replaces_count_once(&table, &faults).await;
    backend.delete_table(&name).await.expect("delete table");
}

/// A bulk load under transient failures and lost answers reports exactly
/// what the store holds: every item reported written is stored, and every
/// item reported failed (but for an unknown outcome) is not.
pub async fn bulk_reports_match_the_store_under_faults(backend: Arc<dyn TableBackend>) {
    let name = unique_table("bulkf");
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    let table: Table<Counter> = Table::from_arc(Arc::new(layer), &name);
    table.create_if_missing().await.expect("create table");
    let items: Vec<Counter> = (0..600)
        .map(|i| Counter {
            name: format!("p{}", i % 3),
            id: i,
            count: i64::from(i),
        })
        .collect();
    // A tenth of the rows are there already, as another writer left them.
    for item in items.iter().step_by(10) {
        table.insert(item).await.expect("insert");
    }
    faults.seed(11);
    faults.inject(Injection::any().times(usize::MAX).probability(0.15));
    faults.inject(
        Injection::any()
            .times(usize::MAX)
            .probability(0.10)
            .fault(Fault::LostResponse),
    );
    let report = table.bulk().insert(&items).await;
    faults.clear();
    let stored: std::collections::HashSet<u32> = table
        .query()
        .collect()
        .await
        .expect("query")
        .iter()
        .map(|c| c.id)
        .collect();
    let failed: std::collections::HashMap<usize, &Error> = report
        .failures
        .iter()
        .map(|f| (f.index, &*f.error))
        .collect();
    assert_eq!(
        report.written + report.failures.len(),
        items.len(),
        "{report:?}"
    );
    for (index, item) in items.iter().enumerate() {
        match failed.get(&index) {
            None => assert!(stored.contains(&item.id), "item {index} reported written"),
            Some(Error::EntityAlreadyExists { .. }) => {
                assert!(index % 10 == 0, "item {index} conflicted with nothing")
            }
            Some(e) if e.is_outcome_unknown() => {}
            Some(e) => assert!(
                !stored.contains(&item.id) || index % 10 == 0,
                "item {index} reported failed ({e}) is stored"
            ),
        }
    }
    backend.delete_table(&name).await.expect("delete table");
}

/// Writes the store applied and the transport sent again (after a proxy's
/// 503 that came once they were applied) take effect once, and report
/// success: `update` never applies its change twice, an insert, a replace
/// through what was read and a bulk load never report their own rows as a
/// conflict.
pub async fn resent_writes_apply_once(backend: Arc<dyn TableBackend>) {
    let name = unique_table("resent");
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    let table: Table<Counter> = Table::from_arc(Arc::new(layer), &name);
    table.create_if_missing().await.expect("create table");
    let counter = |id: u32, count: i64| Counter {
        name: "c".into(),
        id,
        count,
    };
    let resent = |operation| Injection::on(operation).fault(Fault::Resent);

    faults.inject(resent(Operation::InsertEntity));
    table
        .insert(&counter(1, 0))
        .await
        .expect("a resent insert is ours");
    for _ in 0..5 {
        faults.inject(resent(Operation::UpdateEntity));
        table
            .update("c", 1u32, |c| c.count += 1)
            .await
            .expect("a resent update lands once");
    }
    let read = table.get("c", 1u32).await.expect("get").expect("stored");
    assert_eq!(read.count, 5, "each update applied once");
    let mut read = read;
    read.count = 50;
    faults.inject(resent(Operation::UpdateEntity));
    table
        .replace(&mut read)
        .await
        .expect("a resent replace is ours");
    assert_eq!(
        table
            .get("c", 1u32)
            .await
            .expect("get")
            .expect("stored")
            .count,
        50
    );

    let items: Vec<Counter> = (10..310).map(|i| counter(i, i64::from(i))).collect();
    faults.inject(
        Injection::on(Operation::SubmitTransaction)
            .times(usize::MAX)
            .fault(Fault::Resent),
    );
    let report = table.bulk().insert(&items).await;
    faults.clear();
    assert!(report.failures.is_empty(), "{:?}", report.failures.first());
    assert_eq!(report.written, items.len());
    let stored = table.query().collect().await.expect("query");
    assert_eq!(stored.len(), items.len() + 1);
    backend.delete_table(&name).await.expect("delete table");
}
