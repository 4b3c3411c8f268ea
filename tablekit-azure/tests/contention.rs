//! `Table::update` against Azurite: 32 writers on one row, with and without
//! injected faults. Every update lands exactly once, none gives up, and the
//! back-off keeps the number of writes near the number of updates. The
//! figures are printed (`cargo test -p tablekit-azure --test contention --
//! --nocapture`).
//!
//! The default options (64 attempts) gave up on none of 1,600 updates in
//! every run seen; the tests allow more attempts so that a slow, loaded CI
//! machine cannot make them flaky: what they check is that nothing is lost
//! or applied twice.

mod azurite;

use std::sync::Arc;

use tablekit::{TableBackend, UpdateOptions};
use tablekit_azure::AzureTables;
use tablekit_conformance::run_counter;

fn patient() -> UpdateOptions {
    UpdateOptions::default().attempts(400)
}

fn backend() -> Arc<dyn TableBackend> {
    Arc::new(AzureTables::new(azurite::account()).expect("a table client"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_writers_on_one_row_never_give_up() {
    let run = run_counter(backend(), 32, 50, 0.0, 0.0, patient()).await;
    println!(
        "32 writers x 50 increments, no faults: {} applied, {} gave up, {} unknown, {} writes ({:.2} per update)",
        run.applied,
        run.gave_up,
        run.unknown,
        run.writes,
        run.writes as f64 / 1600.0
    );
    assert_eq!(run.applied, 1600, "{run:?}");
    assert_eq!(run.final_count, 1600, "{run:?}");
    assert_eq!(run.gave_up, 0, "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_writers_under_faults_count_exactly() {
    let run = run_counter(backend(), 32, 50, 0.15, 0.10, patient()).await;
    println!(
        "32 writers x 50 increments, 15% transient + 10% lost responses: {} applied, {} gave up, {} unknown, final {}, {} writes ({:.2} per update)",
        run.applied,
        run.gave_up,
        run.unknown,
        run.final_count,
        run.writes,
        run.writes as f64 / 1600.0
    );
    assert_eq!(run.final_count, run.applied as i64, "{run:?}");
    assert_eq!(run.unknown, 0, "{run:?}");
    assert_eq!(run.gave_up, 0, "{run:?}");
}
