//! What an OpenTelemetry exporter receives from tablekit: a
//! `tracing-opentelemetry` layer over an SDK tracer with an in-memory span
//! exporter. Shared by the test crates with `#[path]`; `otel_metrics.rs`
//! holds the metrics' side.
#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard};

use opentelemetry::trace::{SpanId, SpanKind, Status, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt as _;

/// One test at a time: the meter tablekit records on is the process's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The exporters of one test; spans and metrics are recorded while it lives.
pub(crate) struct Otel {
    spans: InMemorySpanExporter,
    tracer: SdkTracerProvider,
    _subscriber: tracing::subscriber::DefaultGuard,
    _lock: MutexGuard<'static, ()>,
}

impl Otel {
    /// Records this thread's spans (run the test on a current-thread
    /// runtime, so that every task it spawns is seen).
    pub(crate) fn start() -> Otel {
        let lock = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let spans = InMemorySpanExporter::default();
        let tracer = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(tracer.tracer("tests"));
        let subscriber = tracing_subscriber::registry().with(layer);
        let guard = tracing::subscriber::set_default(subscriber);
        // Another test of the binary may have met tablekit's spans with no
        // subscriber, and tracing caches "nobody listens": ask again.
        tracing::callsite::rebuild_interest_cache();
        Otel {
            spans,
            tracer,
            _subscriber: guard,
            _lock: lock,
        }
    }

    /// The spans ended so far.
    pub(crate) fn spans(&self) -> Vec<SpanData> {
        let _ = self.tracer.force_flush();
        self.spans.get_finished_spans().unwrap()
    }

    /// Forgets the spans ended so far.
    pub(crate) fn reset(&self) {
        self.spans.reset();
    }
}

/// A span's attribute, as text.
pub(crate) fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| value_text(&kv.value))
}

/// A span's attribute as recorded, with its type.
pub(crate) fn attr_value(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.to_string(),
        other => other.to_string(),
    }
}

/// The spans named `name`.
pub(crate) fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// The children of `parent`.
pub(crate) fn children<'a>(spans: &'a [SpanData], parent: &SpanData) -> Vec<&'a SpanData> {
    let id: SpanId = parent.span_context.span_id();
    spans
        .iter()
        .filter(|s| {
            s.parent_span_id == id && s.span_context.trace_id() == parent.span_context.trace_id()
        })
        .collect()
}

/// The span's events named `name`.
pub(crate) fn events<'a>(span: &'a SpanData, name: &str) -> Vec<&'a opentelemetry::trace::Event> {
    span.events.iter().filter(|e| e.name == name).collect()
}

/// An event's attribute, as text.
pub(crate) fn event_attr(event: &opentelemetry::trace::Event, key: &str) -> Option<String> {
    event
        .attributes
        .iter()
        .find(|kv: &&KeyValue| kv.key.as_str() == key)
        .map(|kv| value_text(&kv.value))
}

/// Whether the span failed.
pub(crate) fn failed(span: &SpanData) -> bool {
    matches!(span.status, Status::Error { .. })
}

/// The span's status description, when it failed.
pub(crate) fn status_description(span: &SpanData) -> String {
    match &span.status {
        Status::Error { description } => description.to_string(),
        _ => String::new(),
    }
}

/// The span's kind.
pub(crate) fn kind(span: &SpanData) -> SpanKind {
    span.span_kind.clone()
}
