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

mod idle_run;

use std::time::Duration;

use tablekit_examples::service::runs::{env_number, exit_code};
use tablekit_examples::service::{Names, Stores};

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
    let names = if configured {
        Names::unique("Idle")
    } else {
        Names::default()
    };
    eprintln!(
        "{location}: making {tenants} tenants, then settling for {} s",
        settle.as_secs()
    );
    let (app, report) = idle_run::run(stores, names, tenants, settle, window).await?;
    let seconds = report.window.as_secs_f64();
    println!(
        "{location}: {tenants} tenants (made in {:.1} s), idle over {seconds:.0} s: {:.2} table operations/s",
        report.made_in.as_secs_f64(),
        report.total() as f64 / seconds
    );
    for (operation, count) in &report.operations {
        println!("  {operation:?}: {count}");
    }
    if let Some(cpu) = report.cpu {
        println!(
            "  this process used {cpu:.2} s of CPU ({:.2}% of a core)",
            cpu / seconds * 100.0
        );
    }
    if configured {
        app.destroy().await?;
    }
    Ok(())
}
