//! The idle tool as shipped: a short run on the in-memory stores makes its
//! tenants, counts a window, and reports every kind of table operation.
//! Its figures are measured by hand (see `service_idle`); here, that it
//! runs and counts what the service does.

#[path = "../service/idle_run.rs"]
mod idle_run;

use std::time::Duration;

use tablekit_examples::service::{Names, Stores};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_idle_run_counts_the_services_own_work() {
    let (_app, report) = idle_run::run(
        Stores::in_memory(),
        Names::default(),
        5,
        Duration::ZERO,
        Duration::from_secs(1),
    )
    .await
    .expect("run");
    assert_eq!(report.operations.len(), 7, "every table operation");
    // The name search polls at once after the writes (its first pause is
    // half a second), and reads the feed's directory and checkpoints.
    let queries = report
        .operations
        .iter()
        .find(|(op, _)| *op == tablekit::layer::Operation::QueryEntities)
        .map(|(_, n)| *n);
    assert!(queries.is_some_and(|n| n > 0), "{:?}", report.operations);
    assert_eq!(report.window, Duration::from_secs(1));
    assert!(report.total() >= queries.unwrap_or(0));
    assert!(report.made_in > Duration::ZERO);
    // Linux says how much CPU a process used (`/proc/self/stat`).
    assert!(report.cpu.is_some_and(|cpu| cpu >= 0.0), "{:?}", report.cpu);
}
