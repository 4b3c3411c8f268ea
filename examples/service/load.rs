//! A bounded load run of the example service: it serves the service on
//! loopback with its real server (the limits and timeouts of `service`) and
//! the library's upkeep running, drives concurrent clients through a fixed
//! number of requests, stops by itself, and reports requests per second and
//! latency. It exits non-zero if any request failed, naming the first few.
//!
//! ```text
//! cargo run --release -p tablekit-examples --example service_load
//! ```
//!
//! runs on the in-memory stores; with `TABLEKIT_CONNECTION_STRING` set
//! (`UseDevelopmentStorage=true` for Azurite, `UseLocalStorage=./data` for a
//! directory) on those stores, in tables, a container and a queue of its own
//! that it deletes at the end. `LOAD_REQUESTS` (4,000) and `LOAD_CLIENTS`
//! (16) size the run.
//!
//! The mix, per client: its user is made first; then create a customer,
//! read it three times, list a page of the tenant's customers, look it up by
//! email, and post and list the user's activity. Each request is timed from
//! send to the end of the body.

mod load_run;

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
    let configured = std::env::var("TABLEKIT_CONNECTION_STRING").is_ok();
    // In memory unless told otherwise: a load run leaves nothing behind.
    let (stores, location) = Stores::from_env_or("UseMemoryStorage=true")?;
    eprintln!("data: {location}");
    let names = if configured {
        Names::unique("Load")
    } else {
        Names::default()
    };
    let app = App::open(stores, names).await?;
    let report = load_run::run(app.clone(), requests, clients).await?;
    println!(
        "{location}: {} requests by {clients} clients in {:.2} s: {:.0} requests/s, p50 {:.2} ms, p99 {:.2} ms, {} failed",
        report.requests,
        report.elapsed.as_secs_f64(),
        report.requests as f64 / report.elapsed.as_secs_f64(),
        report.p50.as_secs_f64() * 1e3,
        report.p99.as_secs_f64() * 1e3,
        report.failed,
    );
    if configured {
        app.destroy().await?;
    }
    if report.failed > 0 {
        for failure in &report.failures {
            eprintln!("failed: {failure}");
        }
        return Err(format!("{} requests failed", report.failed).into());
    }
    Ok(())
}
