//! What the example service costs while nothing happens: it makes one
//! customer in each of `IDLE_TENANTS` tenants (2,000), runs the name
//! search's projector and the library's upkeep as the service does, waits
//! `IDLE_SETTLE` seconds (330: the name search passes a tenant by once
//! five minutes have gone since its last write), then counts, over
//! `IDLE_SECONDS` seconds (60), the table store's operations and the CPU
//! this process used. It prints them, and exits non-zero if a write
//! failed.
//!
//! ```text
//! cargo run --release -p tablekit-examples --example service_idle
//! ```
//!
//! runs on the in-memory stores; with `TABLEKIT_CONNECTION_STRING` set
//! (`UseLocalStorage=./data`, say) on those stores, in tables of its own
//! that it deletes at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use tablekit::layer::{FaultHandle, FaultInjection, Operation};
use tablekit_examples::service::runs::{env_number, exit_code, process_cpu};
use tablekit_examples::service::{App, NameSearch, Names, Stores};
use tower::ServiceExt as _;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let tenants = env_number("IDLE_TENANTS", 2000).max(1);
    let settle = Duration::from_secs(env_number("IDLE_SETTLE", 330) as u64);
    let window = Duration::from_secs(env_number("IDLE_SECONDS", 60).max(1) as u64);
    let configured = std::env::var("TABLEKIT_CONNECTION_STRING").is_ok();
    let (stores, location) = Stores::from_env_or("UseMemoryStorage=true")?;
    let counted = FaultInjection::new(Arc::clone(&stores.tables));
    let calls = counted.handle();
    let stores = Stores {
        tables: Arc::new(counted),
        ..stores
    };
    let names = if configured {
        Names::unique("Idle")
    } else {
        Names::default()
    };
    let app = App::open(stores, names).await?;
    let upkeep = app.upkeep(App::upkeep_config()).spawn();
    let search = Arc::new(NameSearch::new(&app, "idle")?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let projector = {
        let search = Arc::clone(&search);
        tokio::spawn(async move {
            search
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        })
    };
    let router = app.router();
    let made = Instant::now();
    for n in 0..tenants {
        let body = serde_json::json!({
            "id": "c1", "name": format!("Customer {n}"),
            "email": format!("c{n}@example.com"), "city": "Oslo"
        });
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("/tenants/t{n:05}/customers"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))?;
        let answer = router.clone().oneshot(request).await?;
        if answer.status() != StatusCode::CREATED {
            return Err(format!(
                "tenant {n}: the customer was not made ({})",
                answer.status()
            )
            .into());
        }
    }
    eprintln!(
        "{location}: {tenants} tenants made in {:.1} s; settling for {} s",
        made.elapsed().as_secs_f64(),
        settle.as_secs()
    );
    tokio::time::sleep(settle).await;
    let (before, cpu_before) = (counts(&calls), process_cpu());
    tokio::time::sleep(window).await;
    let (after, cpu_after) = (counts(&calls), process_cpu());
    let seconds = window.as_secs_f64();
    let total: usize = after.iter().zip(&before).map(|(a, b)| a - b).sum();
    println!(
        "{location}: {tenants} idle tenants over {seconds:.0} s: {:.2} table operations/s",
        total as f64 / seconds
    );
    for ((operation, a), b) in Operation::ENTITY_OPERATIONS.iter().zip(&after).zip(&before) {
        println!("  {operation:?}: {}", a - b);
    }
    if let Some(cpu) = cpu_after.zip(cpu_before).map(|(a, b)| a - b) {
        println!(
            "  this process used {cpu:.2} s of CPU ({:.2}% of a core)",
            cpu / seconds * 100.0
        );
    }
    let _ = stop.send(());
    projector.await?;
    upkeep.shutdown().await;
    if configured {
        app.destroy().await?;
    }
    Ok(())
}

/// The calls of each counted operation so far.
fn counts(calls: &FaultHandle) -> Vec<usize> {
    Operation::ENTITY_OPERATIONS
        .iter()
        .map(|op| calls.calls(*op))
        .collect()
}
