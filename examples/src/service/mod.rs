//! An example service: a multi-tenant HTTP API on tablekit, on axum.
//!
//! [`Stores::from_env`] picks the stores: a local directory by default
//! (`./tablekit-data/service`, kept across restarts), or those
//! `TABLEKIT_CONNECTION_STRING` names (`UseMemoryStorage=true`,
//! `UseDevelopmentStorage=true` for Azurite, an account's). [`App::open`] prepares the tables, the blob container and
//! the outbox's queues; [`App::router`] is the HTTP API; [`App::upkeep`] is
//! the library's background upkeep (the outbox worker that finishes index
//! changes in other partitions, and the sweep that finishes what a dropped
//! request left), run as a background task by the binary;
//! [`server::serve`] serves the router with a header-read timeout, a
//! connection cap and a shutdown deadline.
//! [`telemetry::Telemetry`] adds `GET /metrics` (Prometheus) and sends
//! traces and metrics to an OTLP collector; each request's span is named
//! after its route and is the parent of tablekit's spans.
//!
//! How the store's answers map to HTTP (each error is a JSON body with a
//! stable code and a message that names no internals):
//!
//! | tablekit | HTTP |
//! |---|---|
//! | the entity's ETag | `ETag`; `If-Match` guards every `PUT` and `DELETE` |
//! | [`Error::PreconditionFailed`] | 412 `etag_mismatch` |
//! | [`Error::UniqueViolation`], [`Error::EntityAlreadyExists`] | 409 |
//! | [`Error::EntityNotFound`], a missing row | 404 `not_found` |
//! | [`Error::Invalid`], a bad body, cursor or field | 400 `invalid_input`, naming the field |
//! | [`Error::Throttled`] | 503 `throttled` with `Retry-After` |
//! | a transient failure, a lost answer, a missing table | 503 `unavailable` with `Retry-After` (a missing table is made again) |
//! | no answer within the request timeout | 504 `timeout` |
//!
//! Lists take `?limit=` (1 to 1,000, 20 by default) and an opaque
//! `?cursor=` from the `next` of the page before.
//!
//! `GET /tenants/{tenant}/changes` streams the tenant's customer changes as
//! Server-Sent Events from the customers' change feed, resumed after the
//! `Last-Event-ID` a client sends back. `GET
//! /tenants/{tenant}/customers/by-name/{prefix}` finds customers by the
//! start of their name, from a projection that [`NameSearch`] (run as a
//! background task by the binary) keeps from the same feed.

mod attachments;
mod audit;
mod changes;
mod customers;
mod error;
mod http;
pub mod model;
mod orders;
pub mod runs;
mod search;
pub mod server;
mod stores;
pub mod telemetry;
mod users;

pub use changes::StreamLimits;
pub use error::ApiError;
pub use http::{Body, PageParams};
pub use search::NameSearch;
pub use stores::{DEFAULT_STORAGE, Names, Stores};

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use tablekit::TableBackendExt;
use tablekit::bucket::Buckets;
use tablekit::outbox::{Outbox, OutboxWorker};
use tablekit::{BlobStoreExt, DateTime, Error, QueueStore, Table, TableBackend};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use model::{Activity, Attachment, AuditEntry, Customer, CustomerGuard, Order, User};

/// The service's state: a typed table per kind, over shared stores.
#[derive(Clone)]
pub struct App {
    stores: Stores,
    names: Names,
    customers: Table<Customer>,
    guards: Table<CustomerGuard>,
    orders: Table<Order>,
    users: Table<User>,
    activity: Table<Activity>,
    attachments: Table<Attachment>,
    audit: Buckets<AuditEntry>,
    /// How long a request may take before it is answered 504.
    request_timeout: Duration,
    /// A write met a store with no room, and none has succeeded since:
    /// [`ready`](App::ready) then asks the store for a write.
    storage_full: Arc<std::sync::atomic::AtomicBool>,
    /// The open change streams, under their caps.
    streams: Arc<changes::Streams>,
}

/// The time between two rounds of the service's upkeep.
const EVENTUALLY_ROUND: Duration = Duration::from_secs(5);

/// The age at which the upkeep finishes an outbox record its writer left:
/// longer than a request may take (its timeout is 10 s), so that a writer
/// still at work is left to finish its own.
const EVENTUALLY_AGE: Duration = Duration::from_secs(15);

/// The largest request body: an attachment, or a JSON body (2 MiB).
pub const MAX_BODY: usize = 2 * 1024 * 1024;

/// The longest request id a client may give (`x-request-id`); a longer one,
/// or one with other characters than letters, digits, `-`, `_` and `.`, is
/// replaced by one the service makes.
pub const MAX_REQUEST_ID: usize = 64;

/// The longest tenant name (a path segment, decoded).
pub const MAX_TENANT: usize = 64;

impl App {
    /// Prepares the table, the container and the outbox's queues (each only
    /// if missing).
    pub async fn open(stores: Stores, names: Names) -> Result<App, Error> {
        let customers: Table<Customer> = Table::from_arc(Arc::clone(&stores.tables), &names.table)
            .with_outbox(Outbox::new(Arc::clone(&stores.queues), names.queue.clone()));
        customers.create_if_missing().await?;
        stores
            .blobs
            .create_container_if_not_exists(&names.container)
            .await?;
        let app = App {
            guards: customers.of(),
            orders: customers.of(),
            users: customers.of(),
            activity: customers.of(),
            attachments: customers
                .of()
                .with_blob_store(Arc::clone(&stores.blobs), &names.container),
            audit: Buckets::new(Table::from_arc(Arc::clone(&stores.tables), &names.audit))?,
            customers,
            stores,
            names,
            request_timeout: Duration::from_secs(10),
            storage_full: Arc::default(),
            streams: changes::Streams::new(StreamLimits::default()),
        };
        app.worker().create_queues().await?;
        Ok(app)
    }

    /// The stores the service keeps its data in.
    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// The names of its table, blob container and queue.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The same service, with these caps on open change streams
    /// (`GET /tenants/{tenant}/changes`).
    pub fn with_stream_limits(mut self, limits: StreamLimits) -> App {
        self.streams = changes::Streams::new(limits);
        self
    }

    /// Ends every open change stream at once, and refuses new ones: call it
    /// when the service starts to stop, so shutdown does not wait on the
    /// streams (their clients resume with `Last-Event-ID`).
    pub fn close_streams(&self) {
        self.streams.close();
    }

    /// Answers a request that takes longer than `timeout` with 504 (10 s
    /// by default). Whatever it started is finished by the upkeep.
    pub fn with_request_timeout(mut self, timeout: Duration) -> App {
        self.request_timeout = timeout;
        self
    }

    /// Makes again what [`open`](App::open) made, where it is missing: for a
    /// store that came back empty.
    /// Each part is tried, whatever the others give; the first error is
    /// returned.
    pub async fn recreate(&self) -> Result<(), Error> {
        let table = self.customers.create_if_missing().await.map(drop);
        let container = self
            .stores
            .blobs
            .create_container_if_not_exists(&self.names.container)
            .await
            .map(drop);
        let queues = self.worker().create_queues().await;
        table.and(container).and(queues)
    }

    /// Whether the service can serve: its table answers. A missing table
    /// is made again first. After a write met a store with no room (a full
    /// disk), the store must also take a write (a row of its own, `~ready`)
    /// until one does.
    pub async fn ready(&self) -> Result<(), Error> {
        use std::sync::atomic::Ordering;
        if self.storage_full.load(Ordering::Relaxed) {
            let probe = tablekit::Entity::new("~ready", "~ready");
            self.stores
                .tables
                .upsert_entity(&self.names.table, &probe, tablekit::UpdateMode::Replace)
                .await?;
            self.storage_full.store(false, Ordering::Relaxed);
            return Ok(());
        }
        let probe = self
            .stores
            .tables
            .get_entity(&self.names.table, "~ready", "~ready", &Default::default())
            .await;
        match probe {
            Ok(_) | Err(Error::EntityNotFound { .. }) => Ok(()),
            Err(Error::TableNotFound { .. }) => self.recreate().await,
            Err(e) => Err(e),
        }
    }

    /// The upkeep's settings the service runs with: a round every 5 s, and
    /// an outbox record left by a request that stopped halfway (its client
    /// hung up, the process was killed) finished once 15 s old. So what
    /// such a write owes elsewhere (its audit entry, its city index row) is
    /// there within 20 s of the write, a little more under load: that is
    /// how long "eventually" is.
    pub fn upkeep_config() -> tablekit::upkeep::UpkeepConfig {
        tablekit::upkeep::UpkeepConfig::default()
            .interval(EVENTUALLY_ROUND)
            .record_age(EVENTUALLY_AGE)
    }

    /// The library's upkeep of the service's tables, with `config`: the
    /// outbox worker that finishes index changes kept in other partitions,
    /// the sweep of outbox records a dropped request left (a client that
    /// hung up, a timeout), old fence rows, and orphan attachment blobs.
    /// The binary spawns it with [`Upkeep::spawn`](tablekit::upkeep::Upkeep::spawn).
    /// The binary runs it with [`upkeep_config`](App::upkeep_config).
    pub fn upkeep(&self, config: tablekit::upkeep::UpkeepConfig) -> tablekit::upkeep::Upkeep {
        tablekit::upkeep::Upkeep::new()
            .config(config)
            .watch(&self.customers)
            .watch(&self.attachments)
    }

    /// The outbox worker alone (the [upkeep](App::upkeep) runs one); run it
    /// with [`OutboxWorker::run`].
    pub fn worker(&self) -> OutboxWorker {
        OutboxWorker::new(
            Arc::clone(&self.stores.tables),
            Arc::clone(&self.stores.queues),
            self.names.queue.clone(),
        )
    }

    /// The audit log: one table per day.
    pub fn audit_log(&self) -> &Buckets<AuditEntry> {
        &self.audit
    }

    /// Drops the audit log's tables of the days that ended more than `keep`
    /// ago, one request each; their names. The binary runs it every hour.
    pub async fn expire_audit(&self, keep: Duration) -> Result<Vec<String>, Error> {
        let cutoff = DateTime::now().checked_sub(keep).unwrap_or(DateTime::MIN);
        self.audit.drop_before(cutoff).await
    }

    /// Deletes what [`open`](App::open) made, and the audit tables.
    pub async fn destroy(&self) -> Result<(), Error> {
        self.customers.delete_table().await?;
        self.audit.drop_before(DateTime::MAX).await?;
        self.stores
            .blobs
            .delete_container(&self.names.container)
            .await?;
        self.stores.queues.delete_queue(&self.names.queue).await?;
        self.stores
            .queues
            .delete_queue(&tablekit::outbox::poison_queue_name(&self.names.queue))
            .await?;
        Ok(())
    }

    /// The HTTP API, with request ids, tracing, a timeout and the audit log.
    pub fn router(&self) -> Router {
        let tenant = Router::new()
            .route("/users", get(users::list_users))
            .route("/users/{user}", get(users::get_user).put(users::put_user))
            .route(
                "/users/{user}/activity",
                get(users::list_activity).post(users::post_activity),
            )
            .route(
                "/customers",
                get(customers::list_customers).post(customers::post_customer),
            )
            .route(
                "/customers/{id}",
                get(customers::get_customer)
                    .put(customers::put_customer)
                    .delete(customers::delete_customer),
            )
            .route(
                "/customers/by-email/{email}",
                get(customers::customer_by_email),
            )
            .route(
                "/customers/by-city/{city}",
                get(customers::customers_by_city),
            )
            .route(
                "/customers/by-name/{prefix}",
                get(search::customers_by_name),
            )
            .route(
                "/customers/{id}/orders",
                get(orders::list_orders).post(orders::post_order),
            )
            .route("/customers/{id}/orders/{number}", get(orders::get_order))
            .route(
                "/customers/{id}/attachments/{name}",
                get(attachments::get_attachment).put(attachments::put_attachment),
            )
            .route("/changes", get(changes::stream_changes))
            .route("/audit", get(audit::list_audit));
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(http::readyz))
            .nest("/tenants/{tenant}", tenant)
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                audit::audit,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                http::deadline,
            ))
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .layer(axum::middleware::from_fn(http::request_limits))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                http::json_errors,
            ))
            .layer(PropagateRequestIdLayer::x_request_id())
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(telemetry::request_span::<axum::body::Body>)
                    .on_response(telemetry::record_response::<axum::body::Body>),
            )
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(axum::middleware::from_fn(http::client_request_id))
            .with_state(self.clone())
    }
}
