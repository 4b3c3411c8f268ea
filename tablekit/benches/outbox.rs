//! Changes across partitions through the outbox, on the in-memory stores:
//! requests and latency of a move finished by its writer, and the worker's
//! drain rate for moves whose writer stopped after its commit.
//!
//! `cargo bench -p tablekit --bench outbox`
//!
//! A throughput measurement, not a statistical micro-benchmark, so it does
//! not use criterion.

use std::sync::Arc;

use tablekit_conformance::outbox_drain;
use tablekit_mem::{MemBackend, MemQueueStore};

const MOVES: usize = 5000;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let figures = outbox_drain(
        Arc::new(MemBackend::new()),
        Arc::new(MemQueueStore::new()),
        MOVES,
    )
    .await;
    println!("outbox on the in-memory stores, {MOVES} moves each way");
    println!(
        "move finished by its writer: {:.1} requests, {:.1} µs",
        figures.requests_per_move,
        figures.move_latency.as_secs_f64() * 1e6
    );
    println!(
        "worker drain: {} messages in {:.1} ms, {:.0} messages/s",
        figures.drained,
        figures.drain_time.as_secs_f64() * 1e3,
        figures.drained as f64 / figures.drain_time.as_secs_f64()
    );
}
