//! Each HTTP attempt is a span under its storage call, with the request
//! ids, and a retry is an event: as an OpenTelemetry exporter receives
//! them.
//!
//! A binary of its own: tracing caches whether anybody listens to a span,
//! and a test on another thread of the same binary, with no subscriber, can
//! record "nobody" while this one looks.

mod mock;

use mock::{Mock, json_error, respond};
use opentelemetry::trace::SpanKind;
use tablekit::TableBackendExt;
use tablekit::{Entity, UpdateMode};

#[path = "../../tests/support/otel.rs"]
mod otel;

use otel::{attr, children, event_attr, events, failed, named};

#[tokio::test(flavor = "current_thread")]
async fn each_attempt_is_a_span_with_both_ids_and_a_retry_is_an_event() {
    let otel = otel::Otel::start();
    let mock = Mock::start(vec![
        json_error("500 Internal Server Error", "InternalError"),
        respond(
            "204 No Content",
            &[("ETag", "W/\"e1\""), ("x-ms-request-id", "svc-77")],
            "",
        ),
    ])
    .await;
    mock.client
        .upsert_entity("tbl", &Entity::new("p", "r"), UpdateMode::Replace)
        .await
        .unwrap();
    let spans = otel.spans();
    let upsert = named(&spans, "upsert_entity tbl");
    assert_eq!(upsert.len(), 1, "{spans:#?}");
    let upsert = upsert[0];
    assert_eq!(upsert.span_kind, SpanKind::Client);
    assert_eq!(
        attr(upsert, "db.system.name").as_deref(),
        Some("azure.tables")
    );
    assert_eq!(attr(upsert, "tablekit.outcome").as_deref(), Some("ok"));
    // The keys are in the request's path: nothing records the path.
    for span in &spans {
        assert!(
            span.attributes
                .iter()
                .all(|kv| !kv.value.as_str().contains("PartitionKey")),
            "{span:#?}"
        );
    }
    let retries = events(upsert, "retry");
    assert_eq!(retries.len(), 1, "{upsert:#?}");
    // A 500 to a write: it may have landed, and an upsert may be sent again.
    assert_eq!(
        event_attr(retries[0], "reason").as_deref(),
        Some("outcome_unknown")
    );
    assert_eq!(event_attr(retries[0], "attempt").as_deref(), Some("1"));
    let attempts = children(&spans, upsert);
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    let (first, second) = (attempts[0], attempts[1]);
    for attempt in [first, second] {
        assert_eq!(attempt.name, "PUT");
        assert_eq!(attempt.span_kind, SpanKind::Client);
        assert_eq!(attr(attempt, "http.request.method").as_deref(), Some("PUT"));
        assert!(attr(attempt, "az.client_request_id").is_some_and(|id| id.len() == 36));
    }
    assert!(failed(first));
    assert_eq!(
        attr(first, "http.response.status_code").as_deref(),
        Some("500")
    );
    assert_eq!(attr(first, "http.request.resend_count"), None);
    assert!(!failed(second));
    assert_eq!(
        attr(second, "http.response.status_code").as_deref(),
        Some("204")
    );
    assert_eq!(
        attr(second, "http.request.resend_count").as_deref(),
        Some("1")
    );
    assert_eq!(
        attr(second, "az.service_request_id").as_deref(),
        Some("svc-77")
    );
    // Each attempt sent an id of its own.
    assert_ne!(
        attr(first, "az.client_request_id"),
        attr(second, "az.client_request_id")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_throttled_answer_is_an_event_and_the_request_goes_again() {
    let otel = otel::Otel::start();
    let mock = Mock::start(vec![
        json_error("503 Server Busy", "ServerBusy"),
        respond("204 No Content", &[("ETag", "W/\"e1\"")], ""),
    ])
    .await;
    mock.client
        .upsert_entity("tbl", &Entity::new("p", "r"), UpdateMode::Replace)
        .await
        .unwrap();
    let spans = otel.spans();
    let upsert = named(&spans, "upsert_entity tbl");
    assert_eq!(upsert.len(), 1, "{spans:#?}");
    let throttled = events(upsert[0], "throttled");
    assert_eq!(throttled.len(), 1, "{:#?}", upsert[0]);
    let retries = events(upsert[0], "retry");
    assert_eq!(retries.len(), 1);
    assert_eq!(
        event_attr(retries[0], "reason").as_deref(),
        Some("throttled")
    );
    assert_eq!(
        event_attr(throttled[0], "wait_ms"),
        event_attr(retries[0], "wait_ms")
    );
    let attempts = children(&spans, upsert[0]);
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    assert_eq!(
        attr(attempts[0], "http.response.status_code").as_deref(),
        Some("503")
    );
    assert_eq!(
        attr(attempts[0], "error.type").as_deref(),
        Some("Throttled")
    );
    assert_eq!(
        attr(attempts[1], "http.response.status_code").as_deref(),
        Some("204")
    );
}
