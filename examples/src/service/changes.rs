//! A tenant's customer changes as Server-Sent Events
//! (`GET /tenants/{tenant}/changes`), read from the customers' change feed.
//!
//! Each event's `id` is the change's number in the tenant's partition, so a
//! client that loses the stream sends it back as `Last-Event-ID` (browsers
//! do on their own) and resumes after it, missing nothing. The event's type
//! is the operation (`insert`, `replace`, `merge`, `upsert`, `delete`, …);
//! its data is JSON: the change's id, the operation, when it committed, the
//! customer's stored RowKey and, for a change that wrote a whole customer,
//! the customer. The stream waits for new changes, polling the feed, and
//! sends a comment every 15 s to keep the connection open.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tablekit::changes::{Change, ChangeOp, Changes};

use super::App;
use super::customers::customer_json;
use super::error::{ApiError, ApiResult};
use super::model::Customer;

/// How often a stream with nothing new reads the feed again.
const POLL: Duration = Duration::from_millis(200);

/// What one stream has read and not yet sent.
struct Reader {
    feed: Changes<Customer>,
    partition: String,
    after: u64,
    queue: VecDeque<Change<Customer>>,
    failed: bool,
}

pub(super) async fn stream_changes(
    State(app): State<App>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError::BadRequest("Last-Event-ID must be the number of a change".into())
            })?,
    };
    let partition = tablekit::schema::encode_partition_key::<Customer>(&tenant)?;
    let reader = Reader {
        feed: app.customers.changes(),
        partition,
        after,
        queue: VecDeque::new(),
        failed: false,
    };
    let events = futures::stream::unfold(reader, |mut reader| async move {
        if reader.failed {
            return None;
        }
        loop {
            if let Some(change) = reader.queue.pop_front() {
                reader.after = change.id.seq;
                return Some((Ok::<_, Infallible>(event_of(&change)), reader));
            }
            match reader.feed.read(&reader.partition, reader.after, 100).await {
                Ok(changes) if changes.is_empty() => tokio::time::sleep(POLL).await,
                Ok(changes) => reader.queue.extend(changes),
                Err(error) => {
                    // Said once, then the stream ends: the client resumes
                    // from the last id it saw.
                    reader.failed = true;
                    let event = Event::default().event("error").data(error.to_string());
                    return Some((Ok(event), reader));
                }
            }
        }
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// The event of one change.
fn event_of(change: &Change<Customer>) -> Event {
    let op = match change.op {
        ChangeOp::Insert => "insert",
        ChangeOp::Replace => "replace",
        ChangeOp::Merge => "merge",
        ChangeOp::Upsert => "upsert",
        ChangeOp::UpsertMerge => "upsert_merge",
        ChangeOp::Delete => "delete",
        _ => "change",
    };
    let data = json!({
        "id": change.id.to_string(),
        "op": op,
        "committed_at": change.committed_at.map(|at| at.to_string()),
        "row_key": change.row_key,
        "customer": change.value.as_ref().map(customer_json),
    });
    Event::default()
        .id(change.id.seq.to_string())
        .event(op)
        .data(data.to_string())
}
