//! Watching the service: traces and metrics, end to end.
//!
//! - **Traces.** Each request is a SERVER span named after its route
//!   (`POST /tenants/{tenant}/customers`), the parent of tablekit's
//!   operation spans, which are the parents of each request to the store. A
//!   W3C `traceparent` header from the client makes the request a part of
//!   the client's trace. With `OTEL_EXPORTER_OTLP_ENDPOINT` set (an
//!   OTLP/HTTP collector, `http://localhost:4318`), the spans go there.
//! - **Metrics.** `GET /metrics` answers in the Prometheus text format:
//!   `http_server_request_duration_seconds` per route, method and status,
//!   and tablekit's own (`db_client_operation_duration_seconds`, retries,
//!   throttles, the upkeep's figures). With the OTLP endpoint set, the
//!   same metrics are also pushed there every 10 s.
//!
//! The span names and attributes of tablekit are listed in
//! `tablekit::telemetry`. Only routes are recorded, never the ids in a path
//! (a customer's id or email may be personal data).

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The name the service reports under.
pub const SERVICE_NAME: &str = "tablekit-example-service";

/// The boundaries OpenTelemetry advises for `http.server.request.duration`.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// The service's exporters: a Prometheus registry for `/metrics`, and an
/// OTLP/HTTP exporter of traces and metrics where one is configured.
#[derive(Clone)]
pub struct Telemetry {
    registry: prometheus::Registry,
    meters: SdkMeterProvider,
    tracer: Option<SdkTracerProvider>,
    requests: Histogram<f64>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("otlp", &self.tracer.is_some())
            .finish_non_exhaustive()
    }
}

/// What could not be set up.
pub type SetupError = Box<dyn std::error::Error + Send + Sync>;

impl Telemetry {
    /// Metrics for `/metrics`; with `otlp` (a collector's OTLP/HTTP base
    /// address, `http://localhost:4318`), traces and metrics sent there too.
    pub fn new(otlp: Option<&str>) -> Result<Telemetry, SetupError> {
        let registry = prometheus::Registry::new();
        let prometheus = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .build()?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(SERVICE_NAME)
            .build();
        let mut meters = SdkMeterProvider::builder()
            .with_resource(resource.clone())
            .with_reader(prometheus);
        let mut tracer = None;
        if let Some(base) = otlp {
            let base = base.trim_end_matches('/');
            let metrics = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_endpoint(format!("{base}/v1/metrics"))
                .build()?;
            meters = meters.with_reader(
                opentelemetry_sdk::metrics::PeriodicReader::builder(metrics)
                    .with_interval(Duration::from_secs(10))
                    .build(),
            );
            let spans = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(format!("{base}/v1/traces"))
                .build()?;
            tracer = Some(
                SdkTracerProvider::builder()
                    .with_resource(resource)
                    .with_batch_exporter(spans)
                    .build(),
            );
        }
        let meters = meters.build();
        let requests = meters
            .meter(SERVICE_NAME)
            .f64_histogram("http.server.request.duration")
            .with_unit("s")
            .with_description("Duration of HTTP server requests.")
            .with_boundaries(BUCKETS.to_vec())
            .build();
        Ok(Telemetry {
            registry,
            meters,
            tracer,
            requests,
        })
    }

    /// [`new`](Telemetry::new) with the collector `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// names, if it names one.
    pub fn from_env() -> Result<Telemetry, SetupError> {
        let otlp = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
            .ok()
            .filter(|e| !e.is_empty());
        Telemetry::new(otlp.as_deref())
    }

    /// Makes tablekit record its metrics here, and `traceparent` headers
    /// read as W3C trace context.
    pub fn install(&self) {
        tablekit::telemetry::set_meter(&self.meters.meter("tablekit"));
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    }

    /// The tracer spans go to, where an OTLP collector is configured: give
    /// it to a `tracing_opentelemetry` layer.
    pub fn tracer(&self) -> Option<SdkTracer> {
        self.tracer.as_ref().map(|t| t.tracer(SERVICE_NAME))
    }

    /// `router` with `GET /metrics`, and each request's duration recorded.
    pub fn wrap(&self, router: Router) -> Router {
        // Its answers, errors too, like the service's own: JSON errors,
        // `nosniff`.
        let metrics = Router::new()
            .route("/metrics", get(metrics))
            .with_state(self.registry.clone())
            .layer(axum::middleware::from_fn(super::http::plain_answers));
        router
            .merge(metrics)
            .layer(axum::middleware::from_fn_with_state(
                self.requests.clone(),
                record_request,
            ))
    }

    /// The count and the sum of the histogram named `name` in the
    /// Prometheus form (`db_client_operation_duration_seconds`), per value
    /// of its label `label` (`db_operation_name`), in the label's order:
    /// for a report of where the time went.
    pub fn histogram_by(&self, name: &str, label: &str) -> Vec<(String, u64, f64)> {
        let mut by: std::collections::BTreeMap<String, (u64, f64)> = Default::default();
        for family in self.registry.gather() {
            if family.name() != name {
                continue;
            }
            for metric in family.get_metric() {
                let value = metric
                    .get_label()
                    .iter()
                    .find(|pair| pair.name() == label)
                    .map(|pair| pair.value().to_owned())
                    .unwrap_or_default();
                let histogram = metric.get_histogram();
                let entry = by.entry(value).or_default();
                entry.0 += histogram.get_sample_count();
                entry.1 += histogram.get_sample_sum();
            }
        }
        by.into_iter()
            .map(|(value, (count, sum))| (value, count, sum))
            .collect()
    }

    /// Sends what is buffered and stops the exporters.
    pub fn shutdown(&self) {
        if let Some(tracer) = &self.tracer
            && let Err(error) = tracer.shutdown()
        {
            tracing::warn!(%error, "the trace exporter did not stop cleanly");
        }
        if let Err(error) = self.meters.shutdown() {
            tracing::warn!(%error, "the metric exporters did not stop cleanly");
        }
    }
}

/// `GET /metrics`: every metric, in the Prometheus text format.
async fn metrics(State(registry): State<prometheus::Registry>) -> Response {
    let mut text = String::new();
    match prometheus::TextEncoder::new().encode_utf8(&registry.gather(), &mut text) {
        Ok(()) => ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text).into_response(),
        Err(error) => {
            tracing::warn!(%error, "metrics could not be written");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// Records `http.server.request.duration` for the request, by route.
async fn record_request(
    State(requests): State<Histogram<f64>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = known_method(request.method());
    let route = route_of(&request);
    let response = next.run(request).await;
    let mut attributes = vec![
        KeyValue::new("http.request.method", method),
        KeyValue::new(
            "http.response.status_code",
            i64::from(response.status().as_u16()),
        ),
    ];
    if let Some(route) = route {
        attributes.push(KeyValue::new("http.route", route));
    }
    requests.record(started.elapsed().as_secs_f64(), &attributes);
    response
}

/// The request's method as a label: one of HTTP's own, or `_OTHER` (as
/// OpenTelemetry's conventions say), so that made-up methods cannot grow
/// the metrics without bound.
fn known_method(method: &axum::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "CONNECT" => "CONNECT",
        "OPTIONS" => "OPTIONS",
        "TRACE" => "TRACE",
        "PATCH" => "PATCH",
        _ => "_OTHER",
    }
}

/// The route the request matched (`/tenants/{tenant}/customers`), never
/// the path itself.
fn route_of<B>(request: &axum::http::Request<B>) -> Option<String> {
    request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned())
}

/// The span of one request: SERVER, named after its method and route, a
/// child of the client's span when a `traceparent` header names one. For
/// `tower_http::trace::TraceLayer::make_span_with`.
pub fn request_span<B>(request: &axum::http::Request<B>) -> Span {
    let method = known_method(request.method());
    let route = route_of(request);
    // A made-up method names the span `HTTP`, as the conventions say.
    let shown = if method == "_OTHER" { "HTTP" } else { method };
    let name = match &route {
        Some(route) => format!("{shown} {route}"),
        None => shown.to_owned(),
    };
    let span = tracing::info_span!(
        "request",
        otel.name = name,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = method,
        http.route = route,
        http.response.status_code = tracing::field::Empty,
    );
    let parent = TraceContextPropagator::new().extract(&Headers(request.headers()));
    let _ = span.set_parent(parent);
    span
}

/// Records the answer's status on the request's span (for
/// `TraceLayer::on_response`).
pub fn record_response<B>(response: &axum::http::Response<B>, latency: Duration, span: &Span) {
    let status = response.status();
    tracing::debug!(
        status = status.as_u16(),
        latency_ms = latency.as_millis() as u64,
        "finished processing request"
    );
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
}

/// The request's headers, as OpenTelemetry's propagator reads them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}
