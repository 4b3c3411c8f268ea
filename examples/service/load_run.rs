//! The load run itself, shared by the `service_load` example and its test:
//! the service served by its real server (its limits, its timeouts) with the
//! library's upkeep running, driven by concurrent clients.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tablekit_examples::service::App;
use tablekit_examples::service::server::{ServeConfig, serve};
use tablekit_examples::service::telemetry::Telemetry;

/// What a run measured.
pub(crate) struct Report {
    /// Requests sent (and timed).
    pub(crate) requests: usize,
    /// Requests that failed: no answer, or an answer that is not a success.
    pub(crate) failed: usize,
    /// The first few failures, as `METHOD path: status`.
    pub(crate) failures: Vec<String>,
    /// From the first request to the last answer.
    pub(crate) elapsed: Duration,
    /// The median of the requests' times.
    pub(crate) p50: Duration,
    /// Their 99th percentile.
    pub(crate) p99: Duration,
    /// The same, per route; also `GET /healthz (probe)`: a probe that asks
    /// for `/healthz` every 10 ms while the clients run (not counted in the
    /// totals), which shows how the load holds up a request that does no
    /// work of its own.
    pub(crate) routes: Vec<RouteFigures>,
}

/// The route name of the `/healthz` probe's requests.
const PROBE: &str = "GET /healthz (probe)";

/// What a run measured of one route.
pub(crate) struct RouteFigures {
    /// The route, as `METHOD /path/{param}`.
    pub(crate) route: &'static str,
    /// Requests sent to it.
    pub(crate) requests: usize,
    /// Those that failed.
    pub(crate) failed: usize,
    /// The median of their times.
    pub(crate) p50: Duration,
    /// Their 99th percentile.
    pub(crate) p99: Duration,
}

/// The `q` quantile of sorted `times`.
fn quantile(times: &[Duration], q: f64) -> Duration {
    times[((times.len() as f64 * q) as usize).min(times.len() - 1)]
}

/// One timed request: its route, its time, whether it failed.
type Timed = (&'static str, Duration, bool);

/// Serves `app` on loopback (with `telemetry`'s metrics, where given) and
/// sends `requests` requests from `clients` clients; then stops the server
/// and the upkeep.
pub(crate) async fn run(
    app: App,
    requests: usize,
    clients: usize,
    telemetry: Option<&Telemetry>,
) -> std::io::Result<Report> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let upkeep = app
        .upkeep(tablekit::upkeep::UpkeepConfig::default())
        .spawn();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let router = match telemetry {
        Some(telemetry) => telemetry.wrap(app.router()),
        None => app.router(),
    };
    let server = tokio::spawn(serve(
        listener,
        router,
        async {
            let _ = stopped.await;
        },
        ServeConfig::default(),
    ));
    let http = reqwest::Client::new();
    let per_client = (requests / clients).max(8);
    let (probe_stop, probe_stopped) = tokio::sync::watch::channel(false);
    let probe = tokio::spawn(probe(http.clone(), base.clone(), probe_stopped));
    let started = Instant::now();
    let runs = (0..clients).map(|c| {
        let (http, base) = (http.clone(), base.clone());
        tokio::spawn(async move { client(http, base, c, per_client).await })
    });
    let mut timed: Vec<Timed> = Vec::with_capacity(requests);
    let mut failures = Vec::new();
    let mut failed = 0;
    for run in futures::future::join_all(runs).await {
        let (times, failed_here) = run.map_err(std::io::Error::other)?;
        timed.extend(times);
        failed += failed_here.len();
        failures.extend(failed_here.into_iter().take(5));
    }
    let elapsed = started.elapsed();
    let _ = probe_stop.send(true);
    let probed = probe.await.map_err(std::io::Error::other)?;
    let _ = stop.send(());
    let _ = server.await;
    upkeep.shutdown().await;
    let mut by_route: BTreeMap<&'static str, (Vec<Duration>, usize)> = BTreeMap::new();
    for (route, time, failed) in timed.iter().chain(&probed) {
        let entry = by_route.entry(route).or_default();
        entry.0.push(*time);
        entry.1 += usize::from(*failed);
    }
    let mut latencies: Vec<Duration> = timed.iter().map(|(_, time, _)| *time).collect();
    let routes = by_route
        .into_iter()
        .map(|(route, (mut times, failed))| {
            times.sort();
            RouteFigures {
                route,
                requests: times.len(),
                failed,
                p50: quantile(&times, 0.50),
                p99: quantile(&times, 0.99),
            }
        })
        .collect();
    latencies.sort();
    failures.truncate(5);
    Ok(Report {
        requests: latencies.len(),
        failed,
        failures,
        elapsed,
        p50: quantile(&latencies, 0.50),
        p99: quantile(&latencies, 0.99),
        routes,
    })
}

/// Asks for `/healthz` every 10 ms until `stop`, timing each answer.
async fn probe(
    http: reqwest::Client,
    base: String,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<Timed> {
    let mut times = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    loop {
        // One request at least, however short the run.
        if !times.is_empty() {
            tokio::select! {
                _ = stop.changed() => return times,
                _ = tick.tick() => {}
            }
        }
        let sent = Instant::now();
        let answer = http.get(format!("{base}/healthz")).send().await;
        let ok = match answer {
            Ok(answer) => answer.status().is_success() && answer.bytes().await.is_ok(),
            Err(_) => false,
        };
        times.push((PROBE, sent.elapsed(), !ok));
    }
}

/// One client's share: its user made first, then `n` requests of the mix,
/// each timed; the failures, named.
async fn client(
    http: reqwest::Client,
    base: String,
    c: usize,
    n: usize,
) -> (Vec<Timed>, Vec<String>) {
    let tenant = format!("tenant{}", c % 4);
    let user = format!("u{c}");
    let mut times = Vec::with_capacity(n);
    let mut failed = Vec::new();
    let made = http
        .put(format!("{base}/tenants/{tenant}/users/{user}"))
        .json(&serde_json::json!({ "name": format!("Load {c}") }))
        .send()
        .await;
    if !made.is_ok_and(|r| r.status().is_success()) {
        failed.push(format!(
            "PUT /tenants/{tenant}/users/{user}: the user was not made"
        ));
    }
    let mut i = 0;
    while times.len() < n {
        let id = format!("c{c}-{i}");
        let step = times.len() % 8;
        let (route, request) = match step {
            0 => (
                "POST /customers",
                http.post(format!("{base}/tenants/{tenant}/customers"))
                    .json(&serde_json::json!({
                        "id": id, "name": "Load", "email": format!("{id}@example.com"), "city": "Oslo"
                    })),
            ),
            1..=3 => (
                "GET /customers/{id}",
                http.get(format!("{base}/tenants/{tenant}/customers/{id}")),
            ),
            4 => (
                "GET /customers",
                http.get(format!("{base}/tenants/{tenant}/customers?limit=20")),
            ),
            5 => (
                "GET /customers/by-email/{email}",
                http.get(format!(
                    "{base}/tenants/{tenant}/customers/by-email/{id}@example.com"
                )),
            ),
            6 => (
                "POST /users/{user}/activity",
                http.post(format!("{base}/tenants/{tenant}/users/{user}/activity"))
                    .json(&serde_json::json!({ "text": "load" })),
            ),
            _ => (
                "GET /users/{user}/activity",
                http.get(format!(
                    "{base}/tenants/{tenant}/users/{user}/activity?limit=10"
                )),
            ),
        };
        let request = request.build().expect("a request the client can send");
        let what = format!("{} {}", request.method(), request.url().path());
        let sent = Instant::now();
        let outcome = match http.execute(request).await {
            Ok(response) => {
                let status = response.status();
                match response.bytes().await {
                    Ok(_) if status.is_success() => None,
                    Ok(_) => Some(status.to_string()),
                    Err(e) => Some(format!("the body was cut: {e}")),
                }
            }
            Err(e) => Some(format!("no answer: {e}")),
        };
        times.push((route, sent.elapsed(), outcome.is_some()));
        if let Some(why) = outcome {
            failed.push(format!("{what}: {why}"));
        }
        if step == 7 {
            i += 1;
        }
    }
    (times, failed)
}
