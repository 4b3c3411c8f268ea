//! The change feed on Azurite (started by the bench itself, as the tests
//! do): requests per write with the feed and without; a typed write's time
//! with and without; 64 writers of one partition with and without; the
//! bulk writer's rate beside one consumer's; and the delay from a write's
//! commit to its delivery (see `tablekit_conformance::change_bench`).
//!
//! `cargo bench -p tablekit-azure --bench azurite_changes`
//!
//! A load measurement over HTTP, not a statistical micro-benchmark: no
//! criterion.

#[path = "../tests/azurite/mod.rs"]
mod azurite;

use std::sync::Arc;
use std::time::Duration;

use tablekit::TableBackend;
use tablekit_azure::AzureTables;
use tablekit_conformance::change_bench::{
    concurrent_writers, consumer_rate, delivery_delay, requests_per_write, write_cost,
};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let backend: Arc<dyn TableBackend> =
        Arc::new(AzureTables::new(azurite::account()).expect("a table client"));
    let tag = std::process::id();
    println!("change feed on Azurite {}", azurite::VERSION);
    requests_per_write(Arc::clone(&backend), &format!("benchreq{tag}"), 100).await;
    write_cost(Arc::clone(&backend), &format!("benchcost{tag}"), 100, 3).await;
    concurrent_writers(Arc::clone(&backend), &format!("benchmany{tag}"), 64, 20, 3).await;
    consumer_rate(
        Arc::clone(&backend),
        &format!("benchrate{tag}"),
        5_000,
        20,
        1000,
    )
    .await;
    delivery_delay(
        backend,
        &format!("benchdelay{tag}"),
        300,
        4,
        Duration::from_millis(10),
    )
    .await;
}
