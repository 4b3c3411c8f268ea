//! The change feed on the local store: a durable typed write with the feed
//! and without; the bulk writer's rate beside one consumer's; and the delay
//! from a write's commit to its delivery (see
//! `tablekit_conformance::change_bench`).
//!
//! `cargo bench -p tablekit-local --bench changes`
//!
//! A load measurement, not a statistical micro-benchmark: no criterion.

use std::sync::Arc;
use std::time::Duration;

use tablekit::TableBackend;
use tablekit_conformance::change_bench::{
    concurrent_writers, consumer_rate, delivery_delay, requests_per_write, write_cost,
};
use tablekit_local::LocalStorage;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = tempfile::tempdir().expect("a directory");
    let store = LocalStorage::open(dir.path()).expect("open");
    let backend: Arc<dyn TableBackend> = Arc::new(store);
    println!("change feed on the local store (durable writes)");
    requests_per_write(Arc::clone(&backend), "Requests", 100).await;
    write_cost(Arc::clone(&backend), "Cost", 200, 5).await;
    concurrent_writers(Arc::clone(&backend), "Concurrent", 4, 200, 3).await;
    concurrent_writers(Arc::clone(&backend), "Concurrent64", 64, 20, 3).await;
    // The same at a steady state: 200 writes each, so that what a round
    // pays once (the partition's first change lists it in the feed's
    // directory) counts for less, and the rows are more.
    concurrent_writers(Arc::clone(&backend), "Concurrent64Long", 64, 200, 3).await;
    consumer_rate(Arc::clone(&backend), "Rate", 20_000, 20, 1000).await;
    delivery_delay(backend, "Delay", 500, 4, Duration::from_millis(5)).await;
}
