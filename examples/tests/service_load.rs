//! The load tool as shipped: a short run on the in-memory stores, through
//! the real server with the upkeep running, where every request succeeds.
//! (It used to post activity for users it never made: 496 requests failed.)

#[path = "../service/load_run.rs"]
mod load_run;

use tablekit_examples::service::{App, Names, Stores};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_load_run_succeeds_on_every_request() {
    let app = App::open(Stores::in_memory(), Names::default())
        .await
        .expect("open");
    let report = load_run::run(app, 256, 4, None).await.expect("run");
    assert_eq!(report.requests, 256);
    assert_eq!(report.failed, 0, "{:?}", report.failures);
    assert!(report.p50 <= report.p99 && report.p99 <= report.elapsed);
    // Each route of the mix, with its own figures, and the `/healthz`
    // probe beside them (not counted in the totals).
    assert_eq!(report.routes.len(), 7);
    let (probe, mix): (Vec<_>, Vec<_>) = report
        .routes
        .iter()
        .partition(|r| r.route == "GET /healthz (probe)");
    assert_eq!(mix.iter().map(|r| r.requests).sum::<usize>(), 256);
    assert_eq!(probe.len(), 1);
    for route in &report.routes {
        assert!(route.p50 <= route.p99, "{}", route.route);
        assert_eq!(route.failed, 0, "{}", route.route);
    }
}
