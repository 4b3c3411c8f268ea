//! Observability: the spans, events and metrics tablekit emits, and how to
//! connect them to OpenTelemetry.
//!
//! tablekit reports through [`tracing`]: with no subscriber installed, a
//! span costs one relaxed load. With the `metrics` cargo feature it also
//! records OpenTelemetry metrics through the `opentelemetry` API crate;
//! without the feature, none of that code is compiled.
//!
//! # Spans
//!
//! Field names follow OpenTelemetry's semantic conventions for database
//! clients, so a [`tracing-opentelemetry`](https://docs.rs/tracing-opentelemetry) layer exports them as they are
//! (`otel.name`, `otel.kind` and `otel.status_code` set the exported span's
//! name, kind and status).
//!
//! | span | level | when |
//! | --- | --- | --- |
//! | `tablekit.operation` | INFO | one typed operation of a `Table`: `insert`, `read`, `query` (one per page), `transaction`, … |
//! | `tablekit.storage` | INFO | one call of a backend: `insert_entity`, `submit_transaction`, `put_blob`, …; a child of the operation that made it, or an operation of its own when called directly |
//! | `tablekit.attempt` | INFO | one HTTP attempt of the REST backend, a child of its storage call |
//!
//! An operation that writes several rows (an entity with its index rows, its
//! wide parts, its blobs, an outbox record) is one `tablekit.operation` span
//! with a `tablekit.storage` child per request.
//!
//! Attributes of operation and storage spans:
//!
//! | attribute | value |
//! | --- | --- |
//! | `db.system.name` | `azure.tables` (Azure Table Storage and Azurite), `azure.cosmosdb` (Cosmos DB for Table), `azure.blobs` and `azure.queues` (a storage account's blob and queue services), `tablekit.local` (the disk store), `tablekit.memory` (the in-memory stores), `tablekit.custom` (a backend that does not describe itself) |
//! | `db.namespace` | the account, the store's directory, or `memory` for the in-memory stores |
//! | `db.collection.name` | the table (or blob container, or queue) |
//! | `db.operation.name` | the operation, as in the table above |
//! | `db.operation.batch.size` | the number of operations of a transaction |
//! | `db.response.status_code` | the service's HTTP status; on an embedded store, the status the service gives for the same error |
//! | `db.response.returned_rows` | rows a query page returned |
//! | `error.type` | the [`Error`] variant, such as `PreconditionFailed` |
//! | `server.address`, `server.port` | the endpoint, for remote stores |
//! | `azure.resource_provider.namespace` | `Microsoft.Tables` for tables, `Microsoft.Storage` for blobs and queues |
//! | `tablekit.kind` | the entity's kind, for typed operations |
//! | `tablekit.outcome` | `ok`, `error`, or `unknown` (the write's answer was lost: it may have landed) |
//! | `tablekit.batch.failed_index` | the index of the operation that failed a transaction |
//! | `tablekit.partition_key`, `tablekit.row_key` | only after [`record_keys(true)`](record_keys): keys may carry personal data |
//!
//! A failed operation has the OpenTelemetry status *error*, with a
//! description that names the error's kind (and, for a transaction, the
//! failed operation's index), never its keys or values.
//!
//! Remote stores' spans have the kind CLIENT; embedded stores' INTERNAL.
//!
//! Attempt spans carry `http.request.method`, `http.request.resend_count`
//! (from the second attempt), `http.response.status_code`,
//! `az.client_request_id` (the `x-ms-client-request-id` sent with every
//! request) and `az.service_request_id` (the service's `x-ms-request-id`).
//!
//! # Events
//!
//! | event | level | fields |
//! | --- | --- | --- |
//! | `retry` | WARN (DEBUG for `not_sent`) | `reason`, `attempt`, `wait_ms`; the reasons: `throttled`, `transient` (a failure the request did not reach the store through), `outcome_unknown` (a lost answer to a request safe to send again), `not_sent` (a connection closed before the request was written), `token_refused` (a token refused, sent again with a new one), `not_replicated` (a read the secondary region had not seen yet), `etag_conflict` (a typed update that met another writer's change) |
//! | `throttled` | INFO | `wait_ms`, `retry_after_ms` when the store said |
//! | `paced` | DEBUG | `wait_ms`: a bulk writer, copy or migration held back to the store's rate |
//! | `outcome unknown` | WARN | a call ended without knowing whether its write landed (on each span that ended so) |
//! | `settled` | INFO | `landed`: a typed write read back whether its lost write had landed |
//!
//! # Metrics (feature `metrics`)
//!
//! Recorded on the meter `tablekit` of the global meter provider
//! (`opentelemetry::global`), or of the meter given to `set_meter`:
//!
//! | metric | kind | unit | what |
//! | --- | --- | --- | --- |
//! | `db.client.operation.duration` | histogram | `s` | each operation (a typed one, or a backend call made outside one); buckets 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10 s |
//! | `tablekit.client.retries` | counter | `{retry}` | attempts sent again, by `reason` |
//! | `tablekit.client.throttles` | counter | `{response}` | answers of 429 or 503 (throttled) |
//! | `tablekit.client.outcomes_unknown` | counter | `{operation}` | operations that ended with their outcome unknown (a lost answer nobody could settle) |
//! | `tablekit.client.outcomes_settled` | counter | `{request}` | lost answers a typed write settled by reading back |
//! | `tablekit.client.rows_returned` | counter | `{row}` | rows returned by queries |
//! | `tablekit.pacing.rate` | gauge | `{entity}/s` | the paced rate of an account (`tablekit.account`) |
//! | `tablekit.upkeep.pending` | gauge | `{record}` | pending records per table, after each upkeep round |
//! | `tablekit.upkeep.records_finished` | counter | `{record}` | records the upkeep finished |
//! | `tablekit.upkeep.records_poisoned` | counter | `{record}` | records set aside as poison |
//! | `tablekit.upkeep.orphan_blobs_removed` | counter | `{blob}` | offloaded blobs no row names, removed |
//! | `tablekit.upkeep.fence_rows_removed` | counter | `{row}` | fence rows of finished records, removed |
//!
//! Metric attributes are `db.system.name`, `db.namespace`,
//! `db.collection.name`, `db.operation.name`, `error.type`, `reason` and
//! `tablekit.account` as each metric has them: never keys.
//!
//! # Connecting an OTLP exporter
//!
//! With `tracing-subscriber`, `tracing-opentelemetry`, `opentelemetry_sdk`
//! and `opentelemetry-otlp` in your program:
//!
//! ```text
//! let exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?;
//! let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
//!     .with_batch_exporter(exporter)
//!     .build();
//! let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "my-service");
//! tracing_subscriber::registry()
//!     .with(tracing_subscriber::EnvFilter::new("info"))
//!     .with(tracing_opentelemetry::layer().with_tracer(tracer))
//!     .init();
//! // Metrics (tablekit's `metrics` feature):
//! let metrics = opentelemetry_otlp::MetricExporter::builder().with_tonic().build()?;
//! let meters = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
//!     .with_periodic_exporter(metrics)
//!     .build();
//! opentelemetry::global::set_meter_provider(meters);
//! ```
//!
//! A span current where a tablekit operation is called (a web request's,
//! for instance) is the parent of the operation's span, so one trace shows
//! the request, tablekit's operations and each request to the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tracing::Span;
use tracing::field::Empty;

use crate::error::{Error, Result};

/// What a store is, for spans and metrics: each table backend describes
/// itself through [`TableBackend::store_info`](crate::TableBackend::store_info),
/// and each blob or queue store passes its own to [`Call::storage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    system: &'static str,
    namespace: Arc<str>,
    server: Option<(Arc<str>, u16)>,
    provider: Option<&'static str>,
}

impl StoreInfo {
    /// A store in this process (`db.system.name` = `system`), its spans of
    /// kind INTERNAL.
    pub fn embedded(system: &'static str, namespace: impl Into<Arc<str>>) -> StoreInfo {
        StoreInfo {
            system,
            namespace: namespace.into(),
            server: None,
            provider: None,
        }
    }

    /// A store reached over the network at `address:port`, its spans of
    /// kind CLIENT.
    pub fn remote(
        system: &'static str,
        namespace: impl Into<Arc<str>>,
        address: impl Into<Arc<str>>,
        port: u16,
    ) -> StoreInfo {
        StoreInfo {
            system,
            namespace: namespace.into(),
            server: Some((address.into(), port)),
            provider: None,
        }
    }

    /// With `azure.resource_provider.namespace` = `namespace`.
    pub fn with_provider(mut self, namespace: &'static str) -> StoreInfo {
        self.provider = Some(namespace);
        self
    }

    /// `db.system.name`.
    pub fn system(&self) -> &'static str {
        self.system
    }

    /// `db.namespace`: the account, or the store's place.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `server.address` and `server.port`, for a remote store.
    pub fn server(&self) -> Option<(&str, u16)> {
        self.server.as_ref().map(|(a, p)| (&**a, *p))
    }

    /// `azure.resource_provider.namespace`, where there is one.
    pub fn provider(&self) -> Option<&'static str> {
        self.provider
    }

    /// Whether the store is reached over the network.
    pub fn is_remote(&self) -> bool {
        self.server.is_some()
    }

    /// A store that does not describe itself.
    pub fn unknown() -> StoreInfo {
        StoreInfo::embedded("tablekit.custom", "")
    }
}

static RECORD_KEYS: AtomicBool = AtomicBool::new(false);

/// Whether spans record the PartitionKey and RowKey of the entity an
/// operation is about (`tablekit.partition_key`, `tablekit.row_key`). Off
/// by default: keys often hold personal data (an email, a customer's id).
pub fn record_keys(on: bool) {
    RECORD_KEYS.store(on, Ordering::Relaxed);
}

/// Whether [`record_keys`] is on.
pub fn records_keys() -> bool {
    RECORD_KEYS.load(Ordering::Relaxed)
}

macro_rules! db_span {
    ($name:literal, $op:expr) => {
        tracing::info_span!(
            target: "tablekit",
            $name,
            otel.name = Empty,
            otel.kind = Empty,
            otel.status_code = Empty,
            otel.status_description = Empty,
            db.system.name = Empty,
            db.namespace = Empty,
            db.collection.name = Empty,
            db.operation.name = $op,
            db.operation.batch.size = Empty,
            db.response.status_code = Empty,
            db.response.returned_rows = Empty,
            "error.type" = Empty,
            server.address = Empty,
            server.port = Empty,
            azure.resource_provider.namespace = Empty,
            tablekit.kind = Empty,
            tablekit.outcome = Empty,
            tablekit.batch.failed_index = Empty,
            tablekit.partition_key = Empty,
            tablekit.row_key = Empty,
        )
    };
}

/// One observed call: a typed operation, or a backend's call to its store.
/// It owns a span (disabled when nobody listens) and, with the `metrics`
/// feature, the start time and what the duration metric needs.
///
/// Backends make one per call with [`Call::storage`] and run the call
/// through [`Call::run`] (or [`Call::run_sync`]), which records the
/// outcome.
#[must_use = "a call records nothing until it is run or finished"]
#[derive(Debug)]
pub struct Call {
    span: Span,
    #[cfg(feature = "metrics")]
    measured: Option<metrics::Measured>,
}

impl Call {
    /// A typed operation `op` on `collection`.
    #[doc(hidden)]
    pub fn operation(info: impl FnOnce() -> StoreInfo, op: &'static str, collection: &str) -> Call {
        // An operation made inside another (the read that settles a lost
        // write) is a child, timed as part of it.
        let nested = scope::inside();
        Call::new(
            db_span!("tablekit.operation", op),
            info,
            op,
            collection,
            nested,
        )
    }

    /// A backend's call `op` to its store, about `collection` (a table,
    /// container or queue; empty for calls about the account). Inside an
    /// operation it is that operation's child; called directly, it is an
    /// operation of its own (and counted in the duration metric).
    pub fn storage(info: impl FnOnce() -> StoreInfo, op: &'static str, collection: &str) -> Call {
        let nested = scope::inside();
        Call::new(
            db_span!("tablekit.storage", op),
            info,
            op,
            collection,
            nested,
        )
    }

    fn new(
        span: Span,
        info: impl FnOnce() -> StoreInfo,
        op: &'static str,
        collection: &str,
        nested: bool,
    ) -> Call {
        // A call made inside an operation: its duration belongs to the
        // operation's.
        let wanted = !span.is_disabled() || (cfg!(feature = "metrics") && !nested);
        let info = wanted.then(info);
        if let Some(info) = info.as_ref().filter(|_| !span.is_disabled()) {
            describe(&span, info, op, collection);
        }
        Call {
            span,
            #[cfg(feature = "metrics")]
            measured: info
                .filter(|_| !nested)
                .map(|info| metrics::Measured::start(info, op, collection)),
        }
    }

    /// The call's span, to record more on or to enter.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Records the entity's kind.
    pub fn kind(self, kind: Option<&str>) -> Call {
        if let Some(kind) = kind {
            self.span.record("tablekit.kind", kind);
        }
        self
    }

    /// Records the keys of the entity, if [`record_keys`] is on.
    pub fn keys(self, partition_key: &str, row_key: &str) -> Call {
        if records_keys() && !self.span.is_disabled() {
            self.span.record("tablekit.partition_key", partition_key);
            self.span.record("tablekit.row_key", row_key);
        }
        self
    }

    /// Records the number of operations of a transaction.
    pub fn batch_size(self, size: usize) -> Call {
        self.span.record("db.operation.batch.size", int(size));
        self
    }

    /// Runs `call` inside the span and records its outcome.
    pub fn run<T, F>(self, call: F) -> Observed<F, impl FnOnce(Call, &Result<T>)>
    where
        F: Future<Output = Result<T>>,
    {
        self.observe(call, |call, result| call.finish(result))
    }

    /// Runs `call` inside the span and records its outcome, and the rows
    /// `rows` counts in what it returned (for queries).
    pub fn run_counted<T, F>(
        self,
        call: F,
        rows: impl FnOnce(&T) -> Option<usize>,
    ) -> Observed<F, impl FnOnce(Call, &Result<T>)>
    where
        F: Future<Output = Result<T>>,
    {
        self.observe(call, |call, result| call.finish_counted(result, rows))
    }

    /// Runs `call` inside the span (polled as inside an operation), then
    /// hands its output to `done` with the call, to record the outcome.
    #[doc(hidden)]
    pub fn observe<F, D>(self, call: F, done: D) -> Observed<F, D>
    where
        F: Future,
        D: FnOnce(Call, &F::Output),
    {
        Observed {
            inner: call,
            call: Some((self, done)),
        }
    }

    /// Runs `call` inside the span and records its outcome.
    pub fn run_sync<T>(self, call: impl FnOnce() -> Result<T>) -> Result<T> {
        self.run_sync_counted(call, |_| None)
    }

    /// Runs `call` inside the span and records its outcome, and the rows
    /// `rows` counts in what it returned (for queries).
    pub fn run_sync_counted<T>(
        self,
        call: impl FnOnce() -> Result<T>,
        rows: impl FnOnce(&T) -> Option<usize>,
    ) -> Result<T> {
        let result = {
            let _entered = (!self.span.is_disabled()).then(|| self.span.enter());
            let _inside = scope::enter();
            call()
        };
        self.finish_counted(&result, rows);
        result
    }

    fn finish_counted<T>(self, result: &Result<T>, rows: impl FnOnce(&T) -> Option<usize>) {
        if let Some(rows) = result.as_ref().ok().and_then(rows) {
            self.rows(rows);
        }
        self.finish(result);
    }

    /// Records a query page's rows.
    pub fn rows(&self, rows: usize) {
        self.span.record("db.response.returned_rows", int(rows));
        #[cfg(feature = "metrics")]
        if let Some(measured) = &self.measured {
            measured.rows(rows);
        }
    }

    /// Records the outcome of the call, and its duration.
    pub fn finish<T>(self, result: &Result<T>) {
        self.finish_outcome(result.is_err(), result.as_ref().err());
    }

    /// Runs `call`, whose error is the caller's type `E`, inside the span;
    /// `classify` finds tablekit's error in it, where there is one.
    #[doc(hidden)]
    pub fn run_classified<T, E, F>(
        self,
        call: F,
        classify: fn(&E) -> Option<&Error>,
    ) -> Observed<F, impl FnOnce(Call, &std::result::Result<T, E>)>
    where
        F: Future<Output = std::result::Result<T, E>>,
    {
        self.observe(call, move |call, result| {
            let error = result.as_ref().err();
            call.finish_outcome(error.is_some(), error.and_then(classify));
        })
    }

    /// Records the outcome: `failed`, with tablekit's `error` where there is
    /// one (`error.type` is `_OTHER` for a failure of another type).
    #[doc(hidden)]
    pub fn finish_outcome(self, failed: bool, error: Option<&Error>) {
        if !self.span.is_disabled() {
            record_outcome(&self.span, failed, error);
        }
        if error.is_some_and(Error::is_outcome_unknown) {
            self.span.in_scope(|| {
                tracing::warn!(target: "tablekit", "outcome unknown");
            });
        }
        #[cfg(feature = "metrics")]
        if let Some(measured) = self.measured {
            if error.is_some_and(Error::is_outcome_unknown) {
                metrics::outcome_unknown();
            }
            measured.finish(failed, error);
        }
    }
}

pin_project_lite::pin_project! {
    /// A future run as an observed [`Call`]: each poll enters the call's
    /// span (when anybody listens) and counts as inside an operation; the
    /// output is recorded once it comes. A combinator rather than an
    /// `async fn`, so that the future it wraps is not moved again into
    /// another state machine (a copy of its whole state per request).
    #[must_use = "futures do nothing unless polled"]
    pub struct Observed<F, D> {
        #[pin]
        inner: F,
        call: Option<(Call, D)>,
    }
}

impl<F, D> std::fmt::Debug for Observed<F, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observed").finish_non_exhaustive()
    }
}

impl<F, D> Future for Observed<F, D>
where
    F: Future,
    D: FnOnce(Call, &F::Output),
{
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.project();
        let output = {
            let Some((call, _)) = this.call.as_ref() else {
                panic!("an observed call polled after it completed");
            };
            let _entered = (!call.span.is_disabled()).then(|| call.span.enter());
            let _inside = scope::enter();
            std::task::ready!(this.inner.poll(cx))
        };
        if let Some((call, done)) = this.call.take() {
            done(call, &output);
        }
        std::task::Poll::Ready(output)
    }
}

/// A count as a span attribute: a signed integer, as OpenTelemetry's
/// conventions type them (tracing-opentelemetry records a `u64` as text).
fn int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn describe(span: &Span, info: &StoreInfo, op: &'static str, collection: &str) {
    if collection.is_empty() {
        span.record("otel.name", op);
    } else {
        span.record("otel.name", format!("{op} {collection}"));
        span.record("db.collection.name", collection);
    }
    span.record(
        "otel.kind",
        if info.is_remote() {
            "client"
        } else {
            "internal"
        },
    );
    span.record("db.system.name", info.system);
    if !info.namespace.is_empty() {
        span.record("db.namespace", &*info.namespace);
    }
    if let Some((address, port)) = info.server() {
        span.record("server.address", address);
        span.record("server.port", i64::from(port));
    }
    if let Some(provider) = info.provider {
        span.record("azure.resource_provider.namespace", provider);
    }
}

/// Records the keys of the entity a typed operation is about on the
/// current span (the operation's), if [`record_keys`] is on.
#[doc(hidden)]
pub fn current_keys(partition_key: &str, row_key: &str) {
    if records_keys() {
        let span = Span::current();
        span.record("tablekit.partition_key", partition_key);
        span.record("tablekit.row_key", row_key);
    }
}

/// Records the outcome on a span made by this module.
fn record_outcome(span: &Span, failed: bool, error: Option<&Error>) {
    if !failed {
        span.record("tablekit.outcome", "ok");
        return;
    }
    span.record("otel.status_code", "error");
    let Some(error) = error else {
        span.record("tablekit.outcome", "error");
        span.record("error.type", "_OTHER");
        return;
    };
    span.record(
        "tablekit.outcome",
        if error.is_outcome_unknown() {
            "unknown"
        } else {
            "error"
        },
    );
    span.record("error.type", error.error_type());
    if let Some(status) = error.status_code() {
        span.record("db.response.status_code", status);
    }
    match error {
        Error::BatchFailed { index, source } => {
            span.record("tablekit.batch.failed_index", int(*index));
            span.record(
                "otel.status_description",
                format!(
                    "operation {index} of the transaction failed: {}",
                    source.error_type()
                ),
            );
        }
        _ => {
            span.record("otel.status_description", error.error_type());
        }
    }
}

/// `work`, carried into a task of its own by the operation polling now:
/// in the operation's span (when anybody listens), and as inside it, so
/// that the task's calls to the store are the operation's children, timed
/// as part of it. Work started outside an operation stays as it is.
#[doc(hidden)]
pub fn carried<F: Future>(work: F) -> tracing::instrument::Instrumented<scope::Inside<F>> {
    use tracing::Instrument as _;
    let inside = scope::inside();
    let span = if inside {
        Span::current()
    } else {
        Span::none()
    };
    scope::Inside {
        inner: work,
        active: inside,
    }
    .instrument(span)
}

/// Reports that an attempt is sent again after `wait`, for `reason`
/// (`throttled`, `transient`, `outcome_unknown`, `not_sent`, `token_refused`,
/// `etag_conflict`, …): an event `retry` in the current span, and the retry
/// counter. The event is a WARN, but for `not_sent` (a pooled connection
/// the server had closed, which happens in the normal run of things): a
/// DEBUG.
pub fn retry(system: &'static str, reason: &'static str, attempt: u32, wait: Duration) {
    let wait_ms = wait.as_millis() as u64;
    if reason == "not_sent" {
        tracing::debug!(target: "tablekit", reason, attempt, wait_ms, "retry");
    } else {
        tracing::warn!(target: "tablekit", reason, attempt, wait_ms, "retry");
    }
    #[cfg(feature = "metrics")]
    metrics::retry(system, reason);
    #[cfg(not(feature = "metrics"))]
    let _ = system;
}

/// Reports an answer that the store is busy (429 or 503), and the wait
/// before the next try: an INFO event `throttled` in the current span, and
/// the throttle counter.
pub fn throttled(system: &'static str, wait: Duration, retry_after: Option<Duration>) {
    match retry_after {
        Some(after) => tracing::info!(
            target: "tablekit",
            wait_ms = wait.as_millis() as u64,
            retry_after_ms = after.as_millis() as u64,
            "throttled"
        ),
        None => tracing::info!(target: "tablekit", wait_ms = wait.as_millis() as u64, "throttled"),
    }
    #[cfg(feature = "metrics")]
    metrics::throttle(system);
    #[cfg(not(feature = "metrics"))]
    let _ = system;
}

/// Reports a throttled answer that a typed writer (bulk writer, copy,
/// migration) met and handles, where no client reported it on arrival: a
/// remote store's client reports each throttled answer it receives, so
/// only an embedded store's (which come from a wrapper that stands for a
/// busy store, such as [`FaultInjection`](crate::layer::FaultInjection))
/// are reported here. Each throttled answer is counted once.
#[doc(hidden)]
pub fn throttled_here(store: &StoreInfo, wait: Duration, retry_after: Option<Duration>) {
    if !store.is_remote() {
        throttled(store.system, wait, retry_after);
    }
}

/// Reports a writer held back to the store's rate: a DEBUG event `paced`.
#[doc(hidden)]
pub fn paced(wait: Duration) {
    tracing::debug!(target: "tablekit", wait_ms = wait.as_millis() as u64, "paced");
}

/// Reports that a typed write settled a lost answer by reading the store:
/// whether the write had `landed`.
#[doc(hidden)]
pub fn settled(landed: bool) {
    tracing::info!(target: "tablekit", landed, "settled");
    #[cfg(feature = "metrics")]
    metrics::settled();
}

/// Reports the paced rate of an account.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[doc(hidden)]
pub fn pacing_rate(account: &str, rate: f64) {
    #[cfg(feature = "metrics")]
    metrics::pacing_rate(account, rate);
}

/// Reports what an upkeep round did: records finished, fence rows and
/// orphan blobs removed, and the records still pending per table.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[doc(hidden)]
pub fn upkeep_round<'a>(
    finished: usize,
    fences: usize,
    blobs: usize,
    pending: impl IntoIterator<Item = (&'a str, usize)>,
) {
    #[cfg(feature = "metrics")]
    metrics::upkeep_round(finished, fences, blobs, pending);
}

/// Reports an outbox record set aside as poison.
#[doc(hidden)]
pub fn poisoned() {
    #[cfg(feature = "metrics")]
    metrics::poisoned();
}

#[cfg(feature = "metrics")]
pub use metrics::set_meter;

/// Whether a storage call is made inside an operation: a depth kept per
/// thread while an operation's future is polled (the calls it awaits are
/// polled inside it, on the same thread).
mod scope {
    use std::cell::Cell;

    thread_local! {
        static DEPTH: Cell<u32> = const { Cell::new(0) };
    }

    pub(super) fn inside() -> bool {
        DEPTH.with(Cell::get) > 0
    }

    pin_project_lite::pin_project! {
        /// A future polled as inside an operation, when `active`.
        #[doc(hidden)]
        pub struct Inside<F> {
            #[pin]
            pub(super) inner: F,
            pub(super) active: bool,
        }
    }

    impl<F: Future> Future for Inside<F> {
        type Output = F::Output;

        fn poll(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<F::Output> {
            let this = self.project();
            let _entered = this.active.then(enter);
            this.inner.poll(cx)
        }
    }

    pub(super) struct Entered;

    pub(super) fn enter() -> Entered {
        DEPTH.with(|d| d.set(d.get() + 1));
        Entered
    }

    impl Drop for Entered {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        }
    }
}

#[cfg(feature = "metrics")]
mod metrics;
