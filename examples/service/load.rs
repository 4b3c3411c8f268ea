//! A bounded load run of the example service: it starts the service on
//! loopback, drives concurrent clients through a fixed number of requests,
//! stops by itself, and reports requests per second and latency.
//!
//! ```text
//! cargo run --release -p tablekit-examples --example service_load
//! ```
//!
//! runs on the in-memory stores; with `TABLEKIT_CONNECTION_STRING` set
//! (`UseDevelopmentStorage=true` for Azurite) on that account, in tables,
//! a container and a queue of its own that it deletes at the end.
//! `LOAD_REQUESTS` (4,000) and `LOAD_CLIENTS` (16) size the run.
//!
//! The mix, per client: create a customer, then read it three times, list a
//! page of the tenant's customers, look it up by email, and post and list
//! activity; each request is timed from send to the end of the body.

use std::time::{Duration, Instant};

use tablekit_examples::service::{App, Names, Stores};

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let requests = env_number("LOAD_REQUESTS", 4000).max(8);
    let clients = env_number("LOAD_CLIENTS", 16).max(1);
    let remote = std::env::var("TABLEKIT_CONNECTION_STRING").is_ok();
    // In memory unless told otherwise: a load run leaves nothing behind.
    let (stores, location) = Stores::from_env_or("UseMemoryStorage=true")?;
    eprintln!("data: {location}");
    let names = if remote {
        Names::unique("Load")
    } else {
        Names::default()
    };
    let app = App::open(stores, names).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(axum::serve(listener, app.router()).into_future());

    let http = reqwest::Client::new();
    let per_client = requests / clients;
    let started = Instant::now();
    let runs = (0..clients).map(|c| {
        let (http, base) = (http.clone(), base.clone());
        tokio::spawn(async move { client(http, base, c, per_client).await })
    });
    let mut latencies = Vec::with_capacity(requests);
    let mut failed = 0;
    for run in futures::future::join_all(runs).await {
        let (times, failures) = run?;
        latencies.extend(times);
        failed += failures;
    }
    let elapsed = started.elapsed();
    server.abort();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{} on {}: {} requests by {clients} clients in {:.2} s: {:.0} requests/s, p50 {:.2} ms, p99 {:.2} ms, {failed} failed",
        if remote {
            "REST backend"
        } else {
            "in-memory stores"
        },
        base,
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
    );
    if remote {
        app.destroy().await?;
    }
    if failed > 0 {
        return Err(format!("{failed} requests failed").into());
    }
    Ok(())
}

/// One client's share: `n` requests, each timed; how many failed.
async fn client(http: reqwest::Client, base: String, c: usize, n: usize) -> (Vec<Duration>, usize) {
    let tenant = format!("tenant{}", c % 4);
    let mut times = Vec::with_capacity(n);
    let mut failed = 0;
    let mut i = 0;
    while times.len() < n {
        let id = format!("c{c}-{i}");
        let user = format!("u{c}");
        let step = times.len() % 8;
        let request = match step {
            0 => http
                .post(format!("{base}/tenants/{tenant}/customers"))
                .json(&serde_json::json!({
                    "id": id, "name": "Load", "email": format!("{id}@example.com"), "city": "Oslo"
                })),
            1..=3 => http.get(format!("{base}/tenants/{tenant}/customers/{id}")),
            4 => http.get(format!("{base}/tenants/{tenant}/customers?limit=20")),
            5 => http.get(format!(
                "{base}/tenants/{tenant}/customers/by-email/{id}@example.com"
            )),
            6 => http
                .post(format!("{base}/tenants/{tenant}/users/{user}/activity"))
                .json(&serde_json::json!({ "text": "load" })),
            _ => http.get(format!(
                "{base}/tenants/{tenant}/users/{user}/activity?limit=10"
            )),
        };
        let sent = Instant::now();
        let ok = match request.send().await {
            Ok(response) => {
                let status = response.status();
                response.bytes().await.is_ok() && status.is_success()
            }
            Err(_) => false,
        };
        times.push(sent.elapsed());
        if !ok {
            failed += 1;
        }
        if step == 7 {
            i += 1;
        }
    }
    (times, failed)
}
