//! Throughput against a local Azurite (started by the bench itself, as the
//! tests do): 10,000 entities through the bulk writer (batches of up to 100,
//! several in flight) beside one-by-one inserts at the same parallelism and
//! strictly sequential, then point reads sequential and in parallel.
//! Reports entities per second; each figure is the best of `ROUNDS` runs.
//!
//! `cargo bench -p tablekit-azure --bench azurite`
//!
//! This is a load measurement, not a statistical micro-benchmark, so it does
//! not use criterion: one 10,000-entity load takes seconds, and what matters
//! is the ratio between strategies within one run on one Azurite.

#[path = "../tests/azurite/mod.rs"]
mod azurite;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt, TryStreamExt};
use tablekit::{Table, TableBackend, TableEntity};
use tablekit_azure::AzureTables;

const ENTITIES: usize = 10_000;
const PARTITIONS: usize = 20;
const ROUNDS: usize = 2;
const READS: usize = 2_000;

#[derive(TableEntity, Clone)]
#[tablekit(table = "BenchItems", kind = "I")]
struct Item {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    amount: i64,
    price: f64,
    active: bool,
}

fn items() -> Vec<Item> {
    (0..ENTITIES)
        .map(|i| Item {
            tenant: format!("tenant{:02}", i % PARTITIONS),
            id: i as u32,
            name: format!("item number {i}"),
            amount: i as i64 * 3,
            price: i as f64 / 7.0,
            active: i % 2 == 0,
        })
        .collect()
}

async fn fresh(backend: &Arc<dyn TableBackend>, round: &str) -> Table<Item> {
    let name = format!("bench{round}{}", fastrand::u32(..));
    let table = Table::from_arc(Arc::clone(backend), &name);
    table.create_if_missing().await.expect("create the table");
    table
}

fn per_second(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

/// Runs `round` `ROUNDS` times and returns the best rate.
async fn best<F, Fut>(label: &str, count: usize, mut round: F) -> f64
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Duration>,
{
    let mut best = 0f64;
    for r in 0..ROUNDS {
        let rate = per_second(count, round(r).await);
        best = best.max(rate);
    }
    println!("{label:<44} {best:>9.0} entities/s");
    best
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let backend: Arc<dyn TableBackend> =
        Arc::new(AzureTables::new(azurite::account()).expect("a client for Azurite"));
    let data = items();
    println!(
        "{ENTITIES} entities (6 properties) over {PARTITIONS} partitions, Azurite {} in memory",
        azurite::VERSION
    );

    let loaded = std::cell::RefCell::new(None);
    let bulk = best("bulk writer, 4 batches in flight", ENTITIES, |r| {
        let backend = Arc::clone(&backend);
        let data = &data;
        let loaded = &loaded;
        async move {
            let table = fresh(&backend, &format!("b{r}")).await;
            let started = Instant::now();
            let report = table.bulk().unpaced().parallelism(4).insert(data).await;
            let elapsed = started.elapsed();
            assert!(report.is_complete(), "{:?}", report.failures.first());
            assert_eq!(report.written, ENTITIES);
            *loaded.borrow_mut() = Some(table);
            elapsed
        }
    })
    .await;

    let parallel = best("one-by-one inserts, 16 in flight", ENTITIES, |r| {
        let backend = Arc::clone(&backend);
        let data = &data;
        async move {
            let table = fresh(&backend, &format!("p{r}")).await;
            let started = Instant::now();
            stream::iter(data.iter().map(|item| table.insert(item)))
                .buffer_unordered(16)
                .try_for_each(|_| async { Ok(()) })
                .await
                .expect("insert");
            started.elapsed()
        }
    })
    .await;

    let sequential_count = ENTITIES / 5;
    let sequential = best(
        &format!("one-by-one inserts, sequential ({sequential_count})"),
        sequential_count,
        |r| {
            let backend = Arc::clone(&backend);
            let data = &data[..sequential_count];
            async move {
                let table = fresh(&backend, &format!("s{r}")).await;
                let started = Instant::now();
                for item in data {
                    table.insert(item).await.expect("insert");
                }
                started.elapsed()
            }
        },
    )
    .await;

    let table = loaded.into_inner().expect("the bulk load left a table");
    let keys: Vec<(String, u32)> = (0..READS)
        .map(|_| {
            let item = &data[fastrand::usize(..ENTITIES)];
            (item.tenant.clone(), item.id)
        })
        .collect();
    let reads_sequential = best(&format!("point reads, sequential ({READS})"), READS, |_| {
        let table = &table;
        let keys = &keys;
        async move {
            let started = Instant::now();
            for (tenant, id) in keys {
                let found = table.get(tenant.as_str(), *id).await.expect("read");
                assert!(found.is_some());
            }
            started.elapsed()
        }
    })
    .await;
    let reads_parallel = best(
        &format!("point reads, 16 in flight ({READS})"),
        READS,
        |_| {
            let table = &table;
            let keys = &keys;
            async move {
                let started = Instant::now();
                let found: Vec<_> = stream::iter(
                    keys.iter()
                        .map(|(tenant, id)| table.get(tenant.as_str(), *id)),
                )
                .buffer_unordered(16)
                .try_collect()
                .await
                .expect("read");
                assert!(found.iter().all(Option::is_some));
                started.elapsed()
            }
        },
    )
    .await;

    println!(
        "bulk writer vs one-by-one: {:.1}x (16 in flight), {:.1}x (sequential); \
         parallel vs sequential reads: {:.1}x",
        bulk / parallel,
        bulk / sequential,
        reads_parallel / reads_sequential
    );
}
