//! The example service: a multi-tenant HTTP API on tablekit (see
//! `tablekit_examples::service`).
//!
//! ```text
//! cargo run -p tablekit-examples --example service
//! ```
//!
//! runs it on `127.0.0.1:8080`, with its data in the directory
//! `./tablekit-data/service` (printed at start), kept across restarts. The
//! environment configures it:
//! - `TABLEKIT_CONNECTION_STRING`: the stores to use instead:
//!   `UseLocalStorage=<dir>`, `UseMemoryStorage=true`,
//!   `UseDevelopmentStorage=true` for Azurite, or an Azure Storage or Cosmos
//!   DB for Table connection string;
//! - `TABLEKIT_SERVICE_ADDR`: where to listen (`127.0.0.1:8080`);
//! - `TABLEKIT_AUDIT_DAYS`: how many days of audit log to keep (30);
//! - `RUST_LOG`: what to log (`info,tower_http=debug` by default);
//! - `OTEL_EXPORTER_OTLP_ENDPOINT`: an OpenTelemetry collector's OTLP/HTTP
//!   address (`http://localhost:4318`), to send traces and metrics to.
//!
//! `GET /metrics` answers with the service's and the library's metrics in
//! the Prometheus text format (see `tablekit_examples::service::telemetry`).
//!
//! It stops on ctrl-c or SIGTERM: it stops taking connections, finishes the
//! requests under way (for 10 s at most), and stops the library's upkeep
//! (the outbox worker and its sweeps) after the work in hand. `/readyz`
//! answers 503 while the store does not answer. If it cannot start (the
//! address is taken, the store is in use by another process, a connection
//! string is wrong) it says why on standard error and exits with status 1.

use std::io::IsTerminal;
use std::process::ExitCode;

use tablekit_examples::service::telemetry::Telemetry;
use tablekit_examples::service::{App, NameSearch, Names, Stores};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // Logs as `RUST_LOG` says (colored only on a terminal); traces (INFO
    // and above: requests, tablekit's operations and storage calls) to the
    // collector, where there is one.
    let telemetry = Telemetry::from_env().map_err(|e| format!("telemetry: {e}"))?;
    telemetry.install();
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stdout().is_terminal())
        .with_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("info,tower_http=debug")),
        );
    let traces = telemetry.tracer().map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO)
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
    let addr = std::env::var("TABLEKIT_SERVICE_ADDR").unwrap_or_else(|_| "127.0.0.1:8080".into());
    // The address first: a taken one stops the service before it touches
    // the store.
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let (stores, location) = Stores::from_env().map_err(|e| format!("the store: {e}"))?;
    println!("data: {location}");
    let app = App::open(stores, Names::default())
        .await
        .map_err(|e| format!("the store ({location}): {e}"))?;

    let (stop, stopped) = tokio::sync::watch::channel(false);
    // The library's upkeep: the outbox worker, and the sweep that finishes
    // what a request dropped halfway left (within 20 s: `App::upkeep_config`).
    let upkeep = app.upkeep(App::upkeep_config()).spawn();

    // The name search's projector, fed by the customers' change feed; its
    // instance name is this process's, so that several share the tenants.
    let search = {
        let instance = format!("{}-{:016x}", std::process::id(), fastrand::u64(..));
        let projector = NameSearch::new(&app, &instance)?;
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            projector
                .run(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })
                .await;
        })
    };

    // The audit log keeps `TABLEKIT_AUDIT_DAYS` days (30): older days'
    // tables are dropped whole, checked every hour.
    let keep_days: u64 = std::env::var("TABLEKIT_AUDIT_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(30);
    let expiry = {
        let app = app.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let mut hourly = tokio::time::interval(std::time::Duration::from_secs(3600));
            loop {
                tokio::select! {
                    _ = hourly.tick() => {}
                    _ = stopped.wait_for(|stop| *stop) => return,
                }
                let keep = std::time::Duration::from_secs(keep_days * 24 * 3600);
                match app.expire_audit(keep).await {
                    Ok(dropped) if !dropped.is_empty() => {
                        tracing::info!(?dropped, "dropped old audit tables");
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "audit tables not dropped"),
                }
            }
        })
    };

    tracing::info!("listening on http://{}", listener.local_addr()?);
    // Headers within 10 s (idle keep-alive connections close after 10 s
    // too), at most 4,096 connections, and 10 s for the requests under way
    // to finish once shutdown starts.
    let config = tablekit_examples::service::server::ServeConfig::default();
    let router = telemetry.wrap(app.router());
    // Open change streams end as soon as shutdown starts: the requests
    // under way are not held up by them.
    let shutdown = {
        let app = app.clone();
        async move {
            shutdown_signal().await;
            app.close_streams();
        }
    };
    tablekit_examples::service::server::serve(listener, router, shutdown, config).await;
    tracing::info!("stopping the upkeep");
    let _ = stop.send(true);
    let stats = upkeep.shutdown().await;
    tracing::info!(?stats, "upkeep stopped");
    expiry.await?;
    search.await?;
    telemetry.shutdown();
    Ok(())
}

/// Ctrl-c, or SIGTERM on Unix.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
