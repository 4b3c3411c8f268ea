//! The change feed on the in-memory store: 64 writers inserting into one
//! partition at once, for a kind with a feed beside the same kind without
//! one (see `tablekit_conformance::change_bench::concurrent_writers`).
//!
//! `cargo bench -p tablekit-mem --bench changes`
//!
//! A load measurement, not a statistical micro-benchmark: no criterion.

use std::sync::Arc;

use tablekit::TableBackend;
use tablekit_conformance::change_bench::concurrent_writers;
use tablekit_mem::MemBackend;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let backend: Arc<dyn TableBackend> = Arc::new(MemBackend::new());
    println!("change feed on the in-memory store");
    concurrent_writers(Arc::clone(&backend), "Concurrent1", 1, 2000, 5).await;
    concurrent_writers(Arc::clone(&backend), "Concurrent", 4, 500, 5).await;
    concurrent_writers(Arc::clone(&backend), "Concurrent64", 64, 50, 5).await;
    // The same at a steady state: 500 writes each.
    concurrent_writers(backend, "Concurrent64Long", 64, 500, 3).await;
}
