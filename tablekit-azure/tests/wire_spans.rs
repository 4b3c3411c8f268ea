//! Each request of the HTTP layer runs in a span, and retries are warnings.
//!
//! A binary of its own: tracing caches whether anybody listens to a span,
//! and a test on another thread of the same binary, with no subscriber, can
//! record "nobody" while this one looks.

mod mock;

use std::sync::Arc;

use mock::{Mock, json_error, respond};
use tablekit::{Entity, TableBackend, UpdateMode};

#[path = "../../tests/support/recorder.rs"]
mod recorder;

#[tokio::test]
async fn each_request_runs_in_a_span_and_retries_are_warnings() {
    let recorder = recorder::Recorder::default();
    let lines = Arc::clone(&recorder.lines);
    let _guard = tracing::subscriber::set_default(recorder);
    // Other tests of this binary may have met the request span first, with
    // no subscriber, and tracing caches that "nobody listens": ask again.
    tracing::callsite::rebuild_interest_cache();
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
    let all: Vec<String> = lines.lock().unwrap().clone();
    // Each answer names both ids: ours, sent with the request, and the
    // service's.
    let answered: Vec<&String> = all
        .iter()
        .filter(|l| l.contains("message=answered"))
        .collect();
    assert_eq!(answered.len(), 2, "{all:#?}");
    assert!(answered[1].contains("status=204"), "{}", answered[1]);
    assert!(
        answered[1].contains("request_id=\"svc-77\""),
        "{}",
        answered[1]
    );
    assert!(
        answered[1].contains("client_request_id="),
        "{}",
        answered[1]
    );
    let lines: Vec<String> = all
        .iter()
        .filter(|l| l.starts_with("span DEBUG tablekit_azure") || l.contains("attempt="))
        .cloned()
        .collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(
        lines[0],
        "span DEBUG tablekit_azure::request method=PUT path=\"/tbl(PartitionKey='p',RowKey='r')\""
    );
    assert!(
        lines[1].starts_with("event WARN message=retrying attempt=1 "),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains("error="), "{}", lines[1]);
    assert!(
        lines[2].starts_with("event DEBUG message=succeeded attempt=2 "),
        "{}",
        lines[2]
    );
}
