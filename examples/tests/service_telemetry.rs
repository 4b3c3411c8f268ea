//! Watching the example service: a trace of one request shows its route,
//! tablekit's operations and each storage request, in the client's trace
//! when it sends `traceparent`; `/metrics` answers in the Prometheus text
//! format; an OTLP collector receives both traces and metrics.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use opentelemetry::trace::{SpanId, SpanKind, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tablekit_examples::service::telemetry::Telemetry;
use tablekit_examples::service::{App, Names, Stores};
use tower::ServiceExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// One test at a time: tablekit records its metrics on the meter last
/// installed, and tracing decides once per callsite whether anybody
/// listens.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT: &str = "b7ad6b7169203331";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Sends a request to `router`; the status and the body as text.
async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    body: Option<serde_json::Value>,
    headers: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    }
    .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn customer(id: &str) -> serde_json::Value {
    json!({ "id": id, "name": "Ann", "email": format!("{id}@example.com"), "city": "Oslo" })
}

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

fn children<'a>(spans: &'a [SpanData], parent: &SpanData) -> Vec<&'a SpanData> {
    spans
        .iter()
        .filter(|s| {
            s.parent_span_id == parent.span_context.span_id()
                && s.span_context.trace_id() == parent.span_context.trace_id()
        })
        .collect()
}

#[test]
fn a_trace_shows_the_route_the_operations_and_each_storage_request() {
    let _serial = one_at_a_time();
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    runtime().block_on(async {
        let app = App::open(Stores::in_memory(), Names::default())
            .await
            .unwrap();
        let router = app.router();
        let traceparent = format!("00-{TRACE}-{PARENT}-01");
        let (status, body) = send(
            &router,
            Method::POST,
            "/tenants/acme/customers",
            Some(customer("c1")),
            &[("traceparent", &traceparent)],
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    });
    let _ = provider.force_flush();
    let spans = exporter.get_finished_spans().unwrap();
    let request: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "POST /tenants/{tenant}/customers")
        .collect();
    assert_eq!(request.len(), 1, "{spans:#?}");
    let request = request[0];
    assert_eq!(request.span_kind, SpanKind::Server);
    assert_eq!(
        attr(request, "http.route").as_deref(),
        Some("/tenants/{tenant}/customers")
    );
    assert_eq!(
        attr(request, "http.response.status_code").as_deref(),
        Some("201")
    );
    // In the client's trace, under the client's span.
    assert_eq!(
        request.span_context.trace_id(),
        TraceId::from_hex(TRACE).unwrap()
    );
    assert_eq!(request.parent_span_id, SpanId::from_hex(PARENT).unwrap());
    // The path's ids are never recorded.
    assert!(spans.iter().all(|s| {
        s.attributes
            .iter()
            .all(|kv| !kv.value.to_string().contains("acme"))
    }));
    // tablekit's operations under the request, each store request under
    // an operation.
    let operations = children(&spans, request);
    assert!(!operations.is_empty(), "{spans:#?}");
    for operation in &operations {
        assert_eq!(
            attr(operation, "db.system.name").as_deref(),
            Some("tablekit.memory")
        );
        assert_eq!(attr(operation, "tablekit.outcome").as_deref(), Some("ok"));
    }
    let storage: Vec<&SpanData> = operations
        .iter()
        .flat_map(|op| children(&spans, op))
        .collect();
    assert!(
        storage
            .iter()
            .any(|s| attr(s, "db.operation.name").as_deref() == Some("submit_transaction")),
        "{storage:#?}"
    );
}

#[test]
fn metrics_are_served_in_the_prometheus_text_format() {
    let _serial = one_at_a_time();
    let telemetry = Telemetry::new(None).unwrap();
    telemetry.install();
    let (status, text, content_type) = runtime().block_on(async {
        let app = App::open(Stores::in_memory(), Names::default())
            .await
            .unwrap();
        let router = telemetry.wrap(app.router());
        let (status, _) = send(
            &router,
            Method::POST,
            "/tenants/acme/customers",
            Some(customer("c1")),
            &[],
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
        let (status, _) = send(
            &router,
            Method::GET,
            "/tenants/acme/customers/c1",
            None,
            &[],
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        // Made-up methods: one label value for them all, never theirs.
        for n in 0..30 {
            let method = Method::from_bytes(format!("MADEUP{n}").as_bytes()).unwrap();
            let _ = send(&router, method, "/tenants/acme/customers/c1", None, &[]).await;
        }
        let response = router
            .clone()
            .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
            .await
            .unwrap();
        let content_type = response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
        // Another method: a 405 that says so in JSON, like every error.
        let refused = router
            .clone()
            .oneshot(Request::post("/metrics").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(refused.headers()["x-content-type-options"], "nosniff");
        assert!(refused.headers().contains_key(header::ALLOW));
        let body = axum::body::to_bytes(refused.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
        assert_eq!(body["error"], "method_not_allowed");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            String::from_utf8(bytes.to_vec()).unwrap(),
            content_type,
        )
    });
    assert_eq!(status, StatusCode::OK);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let count = |metric: &str, labels: &[&str]| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{metric}{{")))
            .filter(|l| labels.iter().all(|label| l.contains(label)))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    let route = |r: &str| format!("http_route=\"{r}\"");
    assert!(!text.contains("MADEUP"), "{text}");
    assert_eq!(
        count(
            "http_server_request_duration_seconds_count",
            &["http_request_method=\"_OTHER\""]
        ),
        30.0,
        "{text}"
    );
    assert_eq!(
        count(
            "http_server_request_duration_seconds_count",
            &[
                &route("/tenants/{tenant}/customers"),
                "http_request_method=\"POST\"",
                "http_response_status_code=\"201\""
            ]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        count(
            "http_server_request_duration_seconds_count",
            &[
                &route("/tenants/{tenant}/customers/{id}"),
                "http_request_method=\"GET\""
            ]
        ),
        1.0,
        "{text}"
    );
    // The library's operations, by store and table.
    assert!(
        count(
            "db_client_operation_duration_seconds_count",
            &["db_system_name=\"tablekit.memory\""]
        ) >= 2.0,
        "{text}"
    );
    assert!(!text.contains("acme"), "a path's id in the metrics: {text}");
}

/// What a collector on loopback received: each request's path and body.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A minimal OTLP/HTTP collector: answers 200 to every request and keeps it.
fn collector() -> (String, Received) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let received: Received = Arc::default();
    let kept = Arc::clone(&received);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || serve(stream, &kept));
        }
    });
    (address, received)
}

fn serve(stream: std::net::TcpStream, kept: &Received) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        kept.lock().unwrap().push((path, body));
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[test]
fn an_otlp_collector_receives_the_traces_and_the_metrics() {
    let _serial = one_at_a_time();
    let (address, received) = collector();
    let telemetry = Telemetry::new(Some(&address)).unwrap();
    let subscriber = tracing_subscriber::registry().with(
        tracing_opentelemetry::layer().with_tracer(telemetry.tracer().expect("an OTLP tracer")),
    );
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    runtime().block_on(async {
        let app = App::open(Stores::in_memory(), Names::default())
            .await
            .unwrap();
        let router = telemetry.wrap(app.router());
        let (status, _) = send(
            &router,
            Method::POST,
            "/tenants/acme/customers",
            Some(customer("c1")),
            &[],
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    });
    drop(guard);
    // Stopping sends what is buffered.
    telemetry.shutdown();
    let received = received.lock().unwrap().clone();
    let traces: Vec<&Vec<u8>> = received
        .iter()
        .filter(|(path, _)| path == "/v1/traces")
        .map(|(_, body)| body)
        .collect();
    assert!(
        !traces.is_empty(),
        "no traces: {:?}",
        received.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    assert!(
        traces
            .iter()
            .any(|body| contains(body, "POST /tenants/{tenant}/customers"))
    );
    assert!(traces.iter().any(|body| contains(body, "tablekit.memory")));
    assert!(
        traces
            .iter()
            .any(|body| contains(body, "tablekit-example-service"))
    );
    assert!(
        received
            .iter()
            .any(|(path, body)| path == "/v1/metrics"
                && contains(body, "http.server.request.duration")),
        "no metrics"
    );
}
