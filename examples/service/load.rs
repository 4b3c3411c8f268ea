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
//! It prints, besides the totals, each route's p50 and p99, the mean time
//! of each of tablekit's operations (from its `db.client.operation.duration`
//! metric), and the CPU this process used: a store that takes long while
//! this process idles is where the time goes.
//!
//! The mix, per client: its user is made first; then create a customer,
//! read it three times, list a page of the tenant's customers, look it up by
//! email, and post and list the user's activity. Each request is timed from
//! send to the end of the body.

mod load_run;

use tablekit_examples::service::runs::{env_number, exit_code, process_cpu};
use tablekit_examples::service::telemetry::Telemetry;
use tablekit_examples::service::{App, Names, Stores};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
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
    // Where the time goes: the service's and the library's metrics.
    let telemetry = Telemetry::new(None).map_err(|e| e as Box<dyn std::error::Error>)?;
    telemetry.install();
    let app = App::open(stores, names).await?;
    let cpu_before = process_cpu();
    let report = load_run::run(app.clone(), requests, clients, Some(&telemetry)).await?;
    let cpu = process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    println!(
        "{location}: {} requests by {clients} clients in {:.2} s: {:.0} requests/s, p50 {:.2} ms, p99 {:.2} ms, {} failed",
        report.requests,
        report.elapsed.as_secs_f64(),
        report.requests as f64 / report.elapsed.as_secs_f64(),
        report.p50.as_secs_f64() * 1e3,
        report.p99.as_secs_f64() * 1e3,
        report.failed,
    );
    for route in &report.routes {
        println!(
            "  {:<34} {:>6} requests, p50 {:>8.2} ms, p99 {:>8.2} ms, {} failed",
            route.route,
            route.requests,
            route.p50.as_secs_f64() * 1e3,
            route.p99.as_secs_f64() * 1e3,
            route.failed,
        );
    }
    // Where the time went: the library's operations by name (the
    // requests', and the work that finishes writes after their commit),
    // their mean time, and the CPU this process (service, library and the
    // load's own clients) used. A store that takes long while this process
    // idles is where the time goes.
    let operations =
        telemetry.histogram_by("db_client_operation_duration_seconds", "db_operation_name");
    for (operation, count, seconds) in operations {
        println!(
            "  tablekit {operation:<24} {count:>6} operations, mean {:>8.2} ms",
            seconds * 1e3 / count.max(1) as f64,
        );
    }
    if let Some(cpu) = cpu {
        println!(
            "  this process used {cpu:.1} s of CPU in {:.1} s ({:.2} cores busy on average)",
            report.elapsed.as_secs_f64(),
            cpu / report.elapsed.as_secs_f64(),
        );
    }
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
