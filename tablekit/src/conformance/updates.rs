//! `Table::update` under contention and faults: every increment is applied
//! exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::unique_table;
use crate::backend::TableBackend;
use crate::error::Error;
use crate::layer::{Fault, FaultInjection, Injection};
use crate::table::{Table, UpdateOptions};

/// A counter row.
#[derive(crate::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(crate = ::tablekit, table = "Counters", kind = "CTR")]
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
    let run = run_counter(backend, 32, 20, 0.15, 0.10, UpdateOptions::default()).await;
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
    let writes = faults.calls(crate::layer::Operation::UpdateEntity);
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
