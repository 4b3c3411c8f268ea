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
//!
//! Streams stay open, so they are capped apart from ordinary requests:
//! [`StreamLimits`] (by default 8 per tenant and 256 in all, well under the
//! server's 4,096 connections) keeps room for everything else. One over a
//! cap is answered 503 `too_many_streams` with `Retry-After`. When the
//! service stops, [`App::close_streams`](super::App::close_streams) ends
//! every stream at once (a client resumes with `Last-Event-ID`), so
//! shutdown does not wait on them.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
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

/// The caps on open change streams.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    /// The most streams open at once (256).
    pub total: usize,
    /// The most streams of one tenant open at once (8).
    pub per_tenant: usize,
}

impl Default for StreamLimits {
    fn default() -> StreamLimits {
        StreamLimits {
            total: 256,
            per_tenant: 8,
        }
    }
}

/// The open streams, by tenant, and the signal that ends them all.
pub(super) struct Streams {
    limits: StreamLimits,
    open: std::sync::Mutex<(usize, HashMap<String, usize>)>,
    closing: tokio::sync::watch::Sender<bool>,
}

impl Streams {
    pub(super) fn new(limits: StreamLimits) -> Arc<Streams> {
        Arc::new(Streams {
            limits,
            open: std::sync::Mutex::new((0, HashMap::new())),
            closing: tokio::sync::watch::channel(false).0,
        })
    }

    /// Ends every stream, and refuses new ones.
    pub(super) fn close(&self) {
        self.closing.send_replace(true);
    }

    /// A place for one more stream of `tenant`, if the caps leave one.
    fn enter(self: &Arc<Streams>, tenant: &str) -> Option<Place> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (total, tenants) = &mut *open;
        let of_tenant = tenants.get(tenant).copied().unwrap_or(0);
        if *total >= self.limits.total || of_tenant >= self.limits.per_tenant {
            return None;
        }
        *total += 1;
        tenants.insert(tenant.to_owned(), of_tenant + 1);
        Some(Place {
            streams: Arc::clone(self),
            tenant: tenant.to_owned(),
        })
    }
}

/// One open stream's place under the caps, given back when it ends.
struct Place {
    streams: Arc<Streams>,
    tenant: String,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap_or_else(|e| e.into_inner());
        let (total, tenants) = &mut *open;
        *total -= 1;
        if let Some(n) = tenants.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                tenants.remove(&self.tenant);
            }
        }
    }
}

/// What one stream has read and not yet sent.
struct Reader {
    feed: Changes<Customer>,
    partition: String,
    after: u64,
    queue: VecDeque<Change<Customer>>,
    failed: bool,
    closing: tokio::sync::watch::Receiver<bool>,
    _place: Place,
}

/// The answer to a stream over a cap, or one asked for while the service
/// stops.
fn refused(message: &str) -> Response {
    let body = Json(json!({ "error": "too_many_streams", "message": message }));
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(5u64));
    response
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
    let closing = app.streams.closing.subscribe();
    if *closing.borrow() {
        return Ok(refused("the service is stopping"));
    }
    let Some(place) = app.streams.enter(&tenant) else {
        return Ok(refused("too many change streams are open; try again later"));
    };
    let reader = Reader {
        feed: app.customers.changes(),
        partition,
        after,
        queue: VecDeque::new(),
        failed: false,
        closing,
        _place: place,
    };
    let events = futures::stream::unfold(reader, |mut reader| async move {
        if reader.failed || *reader.closing.borrow() {
            return None;
        }
        loop {
            if let Some(change) = reader.queue.pop_front() {
                reader.after = change.id.seq;
                return Some((Ok::<_, Infallible>(event_of(&change)), reader));
            }
            match reader.feed.read(&reader.partition, reader.after, 100).await {
                Ok(changes) if changes.is_empty() => {
                    let closing = reader.closing.wait_for(|closing| *closing);
                    tokio::select! {
                        () = tokio::time::sleep(POLL) => {}
                        // The service stops: the stream ends.
                        _ = closing => return None,
                    }
                }
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
