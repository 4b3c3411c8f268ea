//! What every route shares: the middleware (JSON errors, the deadline,
//! request ids, readiness), the JSON body and paging, ETags and `If-Match`.

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value as JsonValue, json};
use tablekit::{Cursor, ETag, Error, TableEntity, TableQuery};

use super::error::{ApiError, ApiResult, MissingTable, StorageFull, generic_error};
use super::{App, MAX_REQUEST_ID};

/// Gives every error answer a JSON body with a stable code (the router's
/// own 404 and 405, an extractor's 400 or 413 come without one), marks every
/// answer `X-Content-Type-Options: nosniff`, and makes the table again when
/// an answer found it missing (a store that came back empty).
pub(super) async fn json_errors(State(app): State<App>, request: Request, next: Next) -> Response {
    let writes = request.method() != axum::http::Method::GET;
    let mut response = next.run(request).await;
    // A write that met a full store makes the service unready; one that
    // succeeds makes it ready again.
    if response.extensions().get::<StorageFull>().is_some() {
        app.storage_full
            .store(true, std::sync::atomic::Ordering::Relaxed);
    } else if writes && response.status().is_success() {
        app.storage_full
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
    if response.extensions().get::<MissingTable>().is_some()
        && let Err(error) = app.recreate().await
    {
        tracing::warn!(%error, "the missing table could not be made again");
    }
    let status = response.status();
    response = plain_answer(response);
    // A body refused for its size is left unread: the connection cannot
    // carry another request, and the client is told so.
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Gives an error answer without a JSON body one (with a stable code,
/// keeping its `Allow` and `Retry-After`), and marks the answer
/// `X-Content-Type-Options: nosniff`: for every route, the service's own
/// and `/metrics`.
pub(super) fn plain_answer(mut response: Response) -> Response {
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if (status.is_client_error() || status.is_server_error()) && !json {
        let (code, message) = generic_error(status);
        let mut replaced =
            (status, Json(json!({ "error": code, "message": message }))).into_response();
        for name in [header::ALLOW, header::RETRY_AFTER] {
            if let Some(value) = response.headers().get(&name) {
                replaced.headers_mut().insert(name, value.clone());
            }
        }
        response = replaced;
    }
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// [`plain_answer`] as a layer.
pub(super) async fn plain_answers(request: Request, next: Next) -> Response {
    plain_answer(next.run(request).await)
}

/// The longest request target (path and query) the service reads.
pub(super) const MAX_URI: usize = 8 * 1024;
/// The most header fields of a request.
pub(super) const MAX_HEADERS: usize = 100;
/// The most bytes of a request's header fields, names and values.
pub(super) const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Refuses a request whose target or headers are too long with 414 or 431,
/// as JSON like every error (the HTTP server's own answers to these have no
/// body; its limits are set higher, so that this one answers first: see
/// [`server`](super::server)).
pub(super) async fn request_limits(request: Request, next: Next) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if target > MAX_URI {
        return ApiError::Status(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("the request's path and query are {target} bytes; the limit is {MAX_URI}"),
        )
        .into_response();
    }
    let headers = request.headers();
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if headers.len() > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return ApiError::Status(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            format!(
                "the request has {} header fields of {bytes} bytes; the limits are {MAX_HEADERS} fields and {MAX_HEADER_BYTES} bytes",
                headers.len()
            ),
        )
        .into_response();
    }
    next.run(request).await
}

/// Answers 504 when a request takes longer than the service allows. What
/// it started goes on: a write that committed is finished by the library
/// (its detached work, or the upkeep), so the answer says it may be applied.
pub(super) async fn deadline(State(app): State<App>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(app.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::Status(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "the store did not answer in time; a change may still be applied".into(),
        )
        .into_response(),
    }
}

/// Keeps a client's `x-request-id` only when it is a short token; else
/// drops it, and the service makes one.
pub(super) async fn client_request_id(mut request: Request, next: Next) -> Response {
    let valid = |id: &str| {
        (1..=MAX_REQUEST_ID).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    if let Some(id) = request.headers().get("x-request-id")
        && !id.to_str().is_ok_and(valid)
    {
        request.headers_mut().remove("x-request-id");
    }
    next.run(request).await
}

/// `/readyz`: 200 when the store answers (its table made again if it was
/// missing), 503 when it does not.
pub(super) async fn readyz(State(app): State<App>) -> Response {
    match app.ready().await {
        Ok(()) => Json(json!({ "status": "ready" })).into_response(),
        Err(error) => {
            tracing::warn!(%error, "not ready");
            ApiError::Status(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the store is not available".into(),
            )
            .into_response()
        }
    }
}

/// A JSON body whose rejection is a 400 with the parser's message.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<T>::from_request(req, state).await?;
        Ok(Body(value))
    }
}

/// `?limit=&cursor=` of a list.
#[derive(Debug, Deserialize)]
pub struct PageParams {
    limit: Option<usize>,
    cursor: Option<String>,
}

impl PageParams {
    pub(super) fn limit(&self) -> usize {
        self.limit.unwrap_or(20)
    }

    pub(super) fn cursor(&self) -> ApiResult<Option<Cursor>> {
        self.cursor
            .as_deref()
            .map(|text| text.parse::<Cursor>().map_err(|e| Error::from(e).into()))
            .transpose()
    }
}

pub(super) fn check(ok: bool, message: &str) -> ApiResult<()> {
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadRequest(message.into()))
    }
}

pub(super) fn with_etag(etag: &ETag, body: JsonValue, status: StatusCode) -> Response {
    let mut response = (status, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(etag.as_str()) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// `text` as one path segment.
pub(super) fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The condition of a request: its `If-Match` or `If-None-Match`.
pub(super) enum IfMatch {
    /// No `If-Match`: the write is not conditional.
    Absent,
    /// `If-Match: *`: the resource must exist.
    Any,
    /// `If-Match: "a", "b"`: its current ETag must be one of these.
    Tags(Vec<ETag>),
    /// `If-None-Match: *`: the resource must not exist (a write that can
    /// create it creates it, and never replaces one).
    NoneExists,
    /// `If-None-Match: "a", "b"`: its current ETag must be none of these.
    NoneOf(Vec<ETag>),
}

impl IfMatch {
    /// The ETag a write over the version `current` is guarded by (`None`
    /// when the resource does not exist): `current`'s when the condition
    /// holds, else a 412. No `If-Match` holds for any version, and for none.
    pub(super) fn guard(&self, current: Option<&ETag>) -> ApiResult<Option<ETag>> {
        let holds = match (self, current) {
            (IfMatch::Absent, _) => true,
            (IfMatch::Any, current) => current.is_some(),
            (IfMatch::Tags(tags), Some(current)) => tags.contains(current),
            (IfMatch::Tags(_), None) => false,
            (IfMatch::NoneExists, current) => current.is_none(),
            (IfMatch::NoneOf(tags), current) => current.is_none_or(|c| !tags.contains(c)),
        };
        if !holds {
            let message = match (self, current) {
                (IfMatch::NoneExists, _) => "If-None-Match: * and it exists",
                (IfMatch::NoneOf(_), _) => "its current version is named by If-None-Match",
                (_, Some(_)) => "it changed since the version named by If-Match",
                (_, None) => "If-Match names a version, and there is none",
            };
            return Err(ApiError::Status(
                StatusCode::PRECONDITION_FAILED,
                "etag_mismatch",
                message.into(),
            ));
        }
        Ok(current.cloned())
    }

    /// Whether the request asks that the resource not exist
    /// (`If-None-Match: *`): a write that can create it creates it.
    pub(super) fn creates_only(&self) -> bool {
        matches!(self, IfMatch::NoneExists)
    }

    /// Whether the request has no `If-Match`.
    pub(super) fn is_absent(&self) -> bool {
        matches!(self, IfMatch::Absent)
    }
}

/// The `If-Match` or `If-None-Match` of a request: `*`, or a list of
/// entity tags.
pub(super) fn if_match(headers: &HeaderMap) -> ApiResult<IfMatch> {
    let (matching, none) = (
        headers.get(header::IF_MATCH),
        headers.get(header::IF_NONE_MATCH),
    );
    let (value, name, none) = match (matching, none) {
        (None, None) => return Ok(IfMatch::Absent),
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "send If-Match or If-None-Match, not both".into(),
            ));
        }
        (Some(value), None) => (value, "If-Match", false),
        (None, Some(value)) => (value, "If-None-Match", true),
    };
    let text = value
        .to_str()
        .map_err(|_| ApiError::BadRequest(format!("{name} is not text")))?
        .trim();
    if text == "*" {
        return Ok(if none {
            IfMatch::NoneExists
        } else {
            IfMatch::Any
        });
    }
    // The service's entity tags hold no comma: a list splits on them.
    let tags: Vec<ETag> = text
        .split(',')
        .map(str::trim)
        .filter(|tag| !tag.is_empty())
        .map(ETag::new)
        .collect();
    if tags.is_empty() {
        return Err(ApiError::BadRequest(format!("{name} names no entity tag")));
    }
    Ok(if none {
        IfMatch::NoneOf(tags)
    } else {
        IfMatch::Tags(tags)
    })
}

/// The page of `query` that the request's cursor and limit name, each item
/// rendered by `render`.
pub(super) async fn page<T: TableEntity>(
    mut query: TableQuery<T>,
    params: &PageParams,
    render: impl Fn(&T) -> JsonValue,
) -> ApiResult<Json<Page>> {
    if let Some(cursor) = params.cursor()? {
        query = query.after(cursor);
    }
    let page = query.page_of(params.limit()).await?;
    Ok(Json(Page {
        items: page.items.iter().map(|item| render(item)).collect(),
        next: page.next.map(|c| c.to_string()),
    }))
}

/// A page of a list: its items and the cursor of the next page.
#[derive(Serialize)]
pub(super) struct Page {
    /// The items, rendered.
    pub(super) items: Vec<JsonValue>,
    /// The cursor of the next page, if there is one.
    pub(super) next: Option<String>,
}

/// How many times a write that lost a race to another request reads again
/// and tries again.
pub(super) const ATTEMPTS: usize = 8;
