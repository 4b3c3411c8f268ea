//! Changes across partitions through the outbox, against a local Azurite
//! (started by the bench itself, as the tests do): requests and latency of
//! a move finished by its writer, and the worker's drain rate for moves
//! whose writer stopped after its commit.
//!
//! `cargo bench -p tablekit-azure --bench azurite_outbox`
//!
//! A load measurement over HTTP, not a statistical micro-benchmark, so it
//! does not use criterion.

#[path = "../tests/azurite/mod.rs"]
mod azurite;

use std::sync::Arc;

use tablekit::conformance::outbox_drain;
use tablekit_azure::{AzureQueues, AzureTables};

const MOVES: usize = 300;

#[tokio::main]
async fn main() {
    let account = azurite::account();
    let figures = outbox_drain(
        Arc::new(AzureTables::new(account.clone()).expect("a table client")),
        Arc::new(AzureQueues::new(account).expect("a queue client")),
        MOVES,
    )
    .await;
    println!(
        "outbox on Azurite {}, {MOVES} moves each way",
        azurite::VERSION
    );
    println!(
        "move finished by its writer: {:.1} requests, {:.0} µs",
        figures.requests_per_move,
        figures.move_latency.as_secs_f64() * 1e6
    );
    println!(
        "worker drain: {} messages in {:.0} ms, {:.0} messages/s",
        figures.drained,
        figures.drain_time.as_secs_f64() * 1e3,
        figures.drained as f64 / figures.drain_time.as_secs_f64()
    );
}
