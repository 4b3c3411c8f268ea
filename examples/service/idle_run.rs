//! The idle run of the example service (`service_idle`): tenants made, the
//! name search and the upkeep running as the service runs them, then the
//! table store's operations and this process's CPU counted over a window
//! in which nothing happens.

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use tablekit::layer::{FaultHandle, FaultInjection, Operation};
use tablekit_examples::service::runs::process_cpu;
use tablekit_examples::service::{App, NameSearch, Names, Stores};
use tower::ServiceExt as _;

/// What an idle run counted.
pub(crate) struct IdleReport {
    /// How long it took to make the tenants.
    pub(crate) made_in: Duration,
    /// The window counted.
    pub(crate) window: Duration,
    /// The table store's operations in the window, by kind.
    pub(crate) operations: Vec<(Operation, usize)>,
    /// The CPU this process used in the window, in seconds, where the
    /// system says.
    pub(crate) cpu: Option<f64>,
}

impl IdleReport {
    /// Every table operation of the window.
    pub(crate) fn total(&self) -> usize {
        self.operations.iter().map(|(_, n)| n).sum()
    }
}

/// Makes one customer in each of `tenants` tenants of a service on
/// `stores` named `names`, waits `settle`, then counts `window`; the app is
/// given back with the report (to destroy its tables, say).
pub(crate) async fn run(
    stores: Stores,
    names: Names,
    tenants: usize,
    settle: Duration,
    window: Duration,
) -> Result<(App, IdleReport), Box<dyn Error>> {
    let counted = FaultInjection::new(Arc::clone(&stores.tables));
    let calls = counted.handle();
    let stores = Stores {
        tables: Arc::new(counted),
        ..stores
    };
    let app = App::open(stores, names).await?;
    let upkeep = app.upkeep(App::upkeep_config()).spawn();
    let search = Arc::new(NameSearch::new(&app, "idle")?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let projector = {
        let search = Arc::clone(&search);
        tokio::spawn(async move { search.run(async { drop(stopped.await) }).await })
    };
    let made = Instant::now();
    make_tenants(&app, tenants).await?;
    let made_in = made.elapsed();
    tokio::time::sleep(settle).await;
    let (before, cpu_before) = (counts(&calls), process_cpu());
    tokio::time::sleep(window).await;
    let (after, cpu_after) = (counts(&calls), process_cpu());
    let _ = stop.send(());
    projector.await?;
    upkeep.shutdown().await;
    let operations = Operation::ENTITY_OPERATIONS
        .into_iter()
        .zip(after.iter().zip(&before).map(|(a, b)| a - b))
        .collect();
    let report = IdleReport {
        made_in,
        window,
        operations,
        cpu: cpu_after.zip(cpu_before).map(|(a, b)| a - b),
    };
    Ok((app, report))
}

/// One customer in each of `tenants` tenants, through the service's routes.
async fn make_tenants(app: &App, tenants: usize) -> Result<(), Box<dyn Error>> {
    let router = app.router();
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
            let status = answer.status();
            return Err(format!("tenant {n}: the customer was not made ({status})").into());
        }
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
