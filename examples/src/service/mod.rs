//! An example service: a multi-tenant HTTP API on tablekit, on axum.
//!
//! [`Stores::from_env`] picks the stores: in memory by default, or the
//! account `TABLEKIT_CONNECTION_STRING` names (`UseDevelopmentStorage=true`
//! for Azurite). [`App::open`] prepares the tables, the blob container and
//! the outbox's queues; [`App::router`] is the HTTP API; [`App::upkeep`] is
//! the library's background upkeep (the outbox worker that finishes index
//! changes in other partitions, and the sweep that finishes what a dropped
//! request left), run as a background task by the binary;
//! [`server::serve`] serves the router with a header-read timeout, a
//! connection cap and a shutdown deadline.
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

pub mod model;
pub mod server;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::{BytesRejection, JsonRejection, QueryRejection};
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value as JsonValue, json};
use tablekit::bucket::Buckets;
use tablekit::key::InvertedTime;
use tablekit::outbox::{Outbox, OutboxWorker};
use tablekit::{
    BlobStore, Cursor, DateTime, ETag, Error, Loaded, QueueStore, Table, TableBackend, TableEntity,
    TableQuery, UnknownKind,
};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use model::{Activity, Attachment, AuditEntry, Customer, Line, Order, OrderRows, User};

/// The stores the service runs on.
#[derive(Clone)]
pub struct Stores {
    /// The table store.
    pub tables: Arc<dyn TableBackend>,
    /// The blob store, for attachments.
    pub blobs: Arc<dyn BlobStore>,
    /// The queue store, for the outbox.
    pub queues: Arc<dyn QueueStore>,
}

impl Stores {
    /// In-memory stores.
    pub fn in_memory() -> Stores {
        Stores {
            tables: Arc::new(tablekit_mem::MemBackend::new()),
            blobs: Arc::new(tablekit_mem::MemBlobStore::new()),
            queues: Arc::new(tablekit_mem::MemQueueStore::new()),
        }
    }

    /// The account of a connection string (for Azurite:
    /// `UseDevelopmentStorage=true`).
    pub fn connect(connection: &str) -> Result<Stores, Error> {
        let tables = tablekit_azure::AzureTables::from_connection_string(connection)?;
        let account = tables.account().clone();
        Ok(Stores {
            blobs: Arc::new(tablekit_azure::AzureBlobs::new(account.clone())?),
            queues: Arc::new(tablekit_azure::AzureQueues::new(account)?),
            tables: Arc::new(tables),
        })
    }

    /// The account `TABLEKIT_CONNECTION_STRING` names, or in-memory stores.
    pub fn from_env() -> Result<Stores, Error> {
        match std::env::var("TABLEKIT_CONNECTION_STRING") {
            Ok(connection) => Stores::connect(&connection),
            Err(_) => Ok(Stores::in_memory()),
        }
    }
}

/// The names of what the service keeps in its stores.
#[derive(Debug, Clone)]
pub struct Names {
    /// The table of tenants' data.
    pub table: String,
    /// The prefix of the audit log's daily tables (letters and digits).
    pub audit: String,
    /// The blob container of attachments.
    pub container: String,
    /// The outbox's queue.
    pub queue: String,
}

impl Default for Names {
    fn default() -> Names {
        Names {
            table: "Shop".into(),
            audit: "Audit".into(),
            container: "attachments".into(),
            queue: "shop-outbox".into(),
        }
    }
}

impl Names {
    /// Names of their own, for a run that shares an account with others.
    pub fn unique(tag: &str) -> Names {
        let n = fastrand_suffix();
        Names {
            table: format!("Shop{tag}{n}"),
            audit: format!("Audit{tag}{n}x"),
            container: format!("attachments-{}-{n}", tag.to_ascii_lowercase()),
            queue: format!("shop-outbox-{}-{n}", tag.to_ascii_lowercase()),
        }
    }
}

fn fastrand_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}{nanos:09}", std::process::id())
}

/// The service's state: a typed table per kind, over shared stores.
#[derive(Clone)]
pub struct App {
    stores: Stores,
    names: Names,
    customers: Table<Customer>,
    orders: Table<Order>,
    users: Table<User>,
    activity: Table<Activity>,
    attachments: Table<Attachment>,
    audit: Buckets<AuditEntry>,
    /// How long a request may take before it is answered 504.
    request_timeout: Duration,
}

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
        match stores.blobs.create_container(&names.container).await {
            Ok(()) | Err(Error::ContainerAlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
        let app = App {
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
        };
        app.worker().create_queues().await?;
        Ok(app)
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
        let container = match self
            .stores
            .blobs
            .create_container(&self.names.container)
            .await
        {
            Ok(()) | Err(Error::ContainerAlreadyExists { .. }) => Ok(()),
            Err(e) => Err(e),
        };
        let queues = self.worker().create_queues().await;
        table.and(container).and(queues)
    }

    /// Whether the service can serve: its table answers. A missing table
    /// is made again first.
    pub async fn ready(&self) -> Result<(), Error> {
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

    /// The library's upkeep of the service's tables, with `config`: the
    /// outbox worker that finishes index changes kept in other partitions,
    /// the sweep of outbox records a dropped request left (a client that
    /// hung up, a timeout), old fence rows, and orphan attachment blobs.
    /// The binary spawns it with [`Upkeep::spawn`](tablekit::upkeep::Upkeep::spawn).
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
            .route("/users", get(list_users))
            .route("/users/{user}", get(get_user).put(put_user))
            .route(
                "/users/{user}/activity",
                get(list_activity).post(post_activity),
            )
            .route("/customers", get(list_customers).post(post_customer))
            .route(
                "/customers/{id}",
                get(get_customer).put(put_customer).delete(delete_customer),
            )
            .route("/customers/by-email/{email}", get(customer_by_email))
            .route("/customers/by-city/{city}", get(customers_by_city))
            .route("/customers/{id}/orders", get(list_orders).post(post_order))
            .route("/customers/{id}/orders/{number}", get(get_order))
            .route(
                "/customers/{id}/attachments/{name}",
                get(get_attachment).put(put_attachment),
            )
            .route("/audit", get(list_audit));
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(readyz))
            .nest("/tenants/{tenant}", tenant)
            .layer(axum::middleware::from_fn_with_state(self.clone(), audit))
            .layer(axum::middleware::from_fn_with_state(self.clone(), deadline))
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                json_errors,
            ))
            .layer(PropagateRequestIdLayer::x_request_id())
            .layer(TraceLayer::new_for_http())
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(axum::middleware::from_fn(client_request_id))
            .with_state(self.clone())
    }
}

/// An error answer: a status and a JSON body `{"error": code, "message": …}`.
/// The code is stable; the message is for people, and never carries the
/// store's internals (addresses, table names, keys, other customers).
#[derive(Debug)]
pub enum ApiError {
    /// The store's error, mapped by meaning.
    Store(Error),
    /// Input the service refuses (400).
    BadRequest(String),
    /// No such resource (404).
    NotFound,
    /// Any other status, with its code and message.
    Status(StatusCode, &'static str, String),
}

impl From<Error> for ApiError {
    fn from(error: Error) -> ApiError {
        ApiError::Store(error)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => too_large(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::Status(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as application/json".into(),
            ),
            _ => ApiError::BadRequest(rejection.body_text()),
        }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> ApiError {
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => too_large(),
            _ => ApiError::BadRequest("the body could not be read".into()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::BadRequest(rejection.body_text())
    }
}

fn too_large() -> ApiError {
    ApiError::Status(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("a request body holds at most {MAX_BODY} bytes"),
    )
}

/// The status, stable code, message and `Retry-After` of a store error.
fn error_status(error: &Error) -> (StatusCode, &'static str, &'static str, Option<Duration>) {
    let unavailable = (
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "the store is not available; try again",
        Some(Duration::from_secs(1)),
    );
    match error {
        Error::BatchFailed { source, .. } => error_status(source),
        Error::Invalid(_) => (
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "a value cannot be stored (too long, or a character keys cannot hold)",
            None,
        ),
        Error::EntityNotFound { .. } => {
            (StatusCode::NOT_FOUND, "not_found", "no such resource", None)
        }
        Error::EntityAlreadyExists { .. } => (
            StatusCode::CONFLICT,
            "already_exists",
            "it exists already",
            None,
        ),
        Error::UniqueViolation { .. } => (
            StatusCode::CONFLICT,
            "unique_violation",
            "a value that must be unique is taken",
            None,
        ),
        Error::PreconditionFailed { .. } => (
            StatusCode::PRECONDITION_FAILED,
            "etag_mismatch",
            "it changed since the version named by If-Match",
            None,
        ),
        Error::Throttled { retry_after } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "throttled",
            "the store is busy; try again",
            Some(retry_after.unwrap_or(Duration::from_secs(1))),
        ),
        Error::Transient { .. }
        | Error::OutcomeUnknown { .. }
        | Error::TableNotFound { .. }
        | Error::TableBeingDeleted { .. } => unavailable,
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the request failed",
            None,
        ),
    }
}

/// The input error inside `error`, if it is one.
fn invalid_input(error: &Error) -> Option<&tablekit::InvalidInput> {
    match error {
        Error::Invalid(invalid) => Some(invalid),
        Error::BatchFailed { source, .. } => invalid_input(source),
        _ => None,
    }
}

/// What is wrong with the input, in the client's terms: the field, never
/// the stored keys or another record.
fn invalid_message(invalid: &tablekit::InvalidInput) -> String {
    use tablekit::InvalidInput as I;
    match invalid {
        I::EncodedKeyTooLong { fields, .. } => format!("`{fields}` is too long"),
        I::KeyTooLong { .. } => "an id is too long".into(),
        I::KeyForbiddenCharacter { character, .. } => {
            format!("an id holds the character {character:?}, which ids cannot hold")
        }
        I::StringTooLong { property, max, .. } => {
            format!("`{property}` is too long: at most {max} UTF-16 code units")
        }
        I::BinaryTooLong { property, max, .. } => {
            format!("`{property}` is too long: at most {max} bytes")
        }
        I::EntityTooLarge { .. } => "the record is too large to store".into(),
        _ => "a value cannot be stored".into(),
    }
}

/// Marks an answer given because the service's table was missing: the
/// error layer makes it again.
#[derive(Clone, Copy)]
struct MissingTable;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut missing = false;
        let (status, code, retry, message) = match self {
            ApiError::Store(error) => {
                let (status, code, message, retry) = error_status(&error);
                if status.is_server_error() {
                    tracing::warn!(%error, "request failed");
                }
                missing = matches!(error, Error::TableNotFound { .. });
                let message = match invalid_input(&error) {
                    Some(invalid) => invalid_message(invalid),
                    None => message.to_owned(),
                };
                (status, code, retry, message)
            }
            ApiError::BadRequest(message) => {
                (StatusCode::BAD_REQUEST, "invalid_input", None, message)
            }
            ApiError::NotFound => (
                StatusCode::NOT_FOUND,
                "not_found",
                None,
                "no such resource".into(),
            ),
            ApiError::Status(status, code, message) => (status, code, None, message),
        };
        let mut response =
            (status, Json(json!({ "error": code, "message": message }))).into_response();
        if let Some(wait) = retry {
            let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if missing {
            response.extensions_mut().insert(MissingTable);
        }
        response
    }
}

/// The code and message of an error answer that came without a JSON body
/// (from the router or an extractor).
fn generic_error(status: StatusCode) -> (&'static str, String) {
    match status {
        StatusCode::BAD_REQUEST => ("invalid_input", "the request is not valid".into()),
        StatusCode::NOT_FOUND => ("not_found", "no such resource".into()),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method_not_allowed",
            "the resource does not take this method".into(),
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            "too_large",
            format!("a request body holds at most {MAX_BODY} bytes"),
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported_media_type",
            "send the body as application/json".into(),
        ),
        s if s.is_server_error() => ("internal", "the request failed".into()),
        _ => ("error", "the request was refused".into()),
    }
}

/// Gives every error answer a JSON body with a stable code (the router's
/// own 404 and 405, an extractor's 400 or 413 come without one), marks every
/// answer `X-Content-Type-Options: nosniff`, and makes the table again when
/// an answer found it missing (a store that came back empty).
async fn json_errors(State(app): State<App>, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if response.extensions().get::<MissingTable>().is_some()
        && let Err(error) = app.recreate().await
    {
        tracing::warn!(%error, "the missing table could not be made again");
    }
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

/// Answers 504 when a request takes longer than the service allows. What
/// it started goes on: a write that committed is finished by the library
/// (its detached work, or the upkeep), so the answer says it may be applied.
async fn deadline(State(app): State<App>, request: Request, next: Next) -> Response {
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
async fn client_request_id(mut request: Request, next: Next) -> Response {
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
async fn readyz(State(app): State<App>) -> Response {
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

type ApiResult<T> = Result<T, ApiError>;

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
    fn limit(&self) -> usize {
        self.limit.unwrap_or(20)
    }

    fn cursor(&self) -> ApiResult<Option<Cursor>> {
        self.cursor
            .as_deref()
            .map(|text| text.parse::<Cursor>().map_err(|e| Error::from(e).into()))
            .transpose()
    }
}

fn check(ok: bool, message: &str) -> ApiResult<()> {
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadRequest(message.into()))
    }
}

fn with_etag(etag: &ETag, body: JsonValue, status: StatusCode) -> Response {
    let mut response = (status, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(etag.as_str()) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// `text` as one path segment.
fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The `If-Match` of a request: `None` without one, or for `*`.
fn if_match(headers: &HeaderMap) -> ApiResult<Option<ETag>> {
    match headers.get(header::IF_MATCH) {
        None => Ok(None),
        Some(value) => {
            let text = value
                .to_str()
                .map_err(|_| ApiError::BadRequest("If-Match is not text".into()))?;
            Ok((text.trim() != "*").then(|| ETag::new(text.trim())))
        }
    }
}

// ---- users and their activity ----

#[derive(Deserialize)]
struct UserBody {
    name: String,
}

fn user_json(user: &User) -> JsonValue {
    json!({ "user": user.user, "name": user.name })
}

async fn put_user(
    State(app): State<App>,
    Path((tenant, user)): Path<(String, String)>,
    headers: HeaderMap,
    Body(body): Body<UserBody>,
) -> ApiResult<Response> {
    check(!body.name.trim().is_empty(), "name must not be empty")?;
    let user = User {
        tenant,
        user,
        name: body.name,
    };
    // With If-Match, only over that version; without, created or replaced.
    let etag = match if_match(&headers)? {
        Some(etag) => {
            app.users
                .replace(&mut Loaded::new(user.clone(), etag, None))
                .await?
        }
        None => app.users.upsert(&user).await?,
    };
    Ok(with_etag(&etag, user_json(&user), StatusCode::OK))
}

async fn get_user(
    State(app): State<App>,
    Path((tenant, user)): Path<(String, String)>,
) -> ApiResult<Response> {
    let found = app
        .users
        .get((tenant.as_str(), user.as_str()), ())
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(with_etag(
        Loaded::etag(&found),
        user_json(&found),
        StatusCode::OK,
    ))
}

/// The tenant's users: every partition under the tenant, one range of
/// PartitionKeys (`acme|…`), users only (their activity rows are skipped by
/// kind).
async fn list_users(
    State(app): State<App>,
    Path(tenant): Path<String>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let query = app.users.query().partition_prefix(tenant.as_str());
    page(query, &params, user_json).await
}

#[derive(Deserialize)]
struct ActivityBody {
    text: String,
}

fn activity_json(event: &Activity) -> JsonValue {
    json!({ "at": event.at.0.to_string(), "text": event.text })
}

async fn post_activity(
    State(app): State<App>,
    Path((tenant, user)): Path<(String, String)>,
    Body(body): Body<ActivityBody>,
) -> ApiResult<Response> {
    check(!body.text.is_empty(), "text must not be empty")?;
    if !app
        .users
        .exists((tenant.as_str(), user.as_str()), ())
        .await?
    {
        return Err(ApiError::NotFound);
    }
    let event = Activity {
        tenant,
        user,
        at: InvertedTime(DateTime::now()),
        nonce: nonce(),
        text: body.text,
    };
    let etag = app.activity.insert(&event).await?;
    Ok(with_etag(&etag, activity_json(&event), StatusCode::CREATED))
}

fn nonce() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The page of `query` that the request's cursor and limit name, each item
/// rendered by `render`.
async fn page<T: TableEntity>(
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
struct Page {
    items: Vec<JsonValue>,
    next: Option<String>,
}

async fn list_activity(
    State(app): State<App>,
    Path((tenant, user)): Path<(String, String)>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let query = app
        .activity
        .query()
        .partition((tenant.as_str(), user.as_str()));
    page(query, &params, activity_json).await
}

// ---- customers ----

#[derive(Deserialize)]
struct CustomerBody {
    id: Option<String>,
    name: String,
    email: String,
    city: String,
}

impl CustomerBody {
    fn check(&self) -> ApiResult<()> {
        check(!self.name.trim().is_empty(), "name must not be empty")?;
        check(
            self.email.contains('@') && !self.email.contains('/'),
            "email must be an address",
        )?;
        check(!self.city.trim().is_empty(), "city must not be empty")
    }
}

fn customer_json(c: &Customer) -> JsonValue {
    json!({ "id": c.id, "name": c.name, "email": c.email.as_str(), "city": c.city })
}

async fn post_customer(
    State(app): State<App>,
    Path(tenant): Path<String>,
    Body(body): Body<CustomerBody>,
) -> ApiResult<Response> {
    body.check()?;
    let id = body
        .id
        .clone()
        .ok_or_else(|| ApiError::BadRequest("id is required".into()))?;
    check(!id.is_empty(), "id must not be empty")?;
    let customer = Customer {
        tenant,
        id,
        name: body.name,
        email: body.email.into(),
        city: body.city,
    };
    let etag = app.customers.insert(&customer).await?;
    let mut response = with_etag(&etag, customer_json(&customer), StatusCode::CREATED);
    let location = format!(
        "/tenants/{}/customers/{}",
        segment(&customer.tenant),
        segment(&customer.id)
    );
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

async fn get_customer(
    State(app): State<App>,
    Path((tenant, id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let found = app
        .customers
        .get(tenant.as_str(), id.as_str())
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(with_etag(
        Loaded::etag(&found),
        customer_json(&found),
        StatusCode::OK,
    ))
}

async fn put_customer(
    State(app): State<App>,
    Path((tenant, id)): Path<(String, String)>,
    headers: HeaderMap,
    Body(body): Body<CustomerBody>,
) -> ApiResult<Response> {
    body.check()?;
    if body.id.as_ref().is_some_and(|given| *given != id) {
        return Err(ApiError::BadRequest(
            "the body's id is not the path's".into(),
        ));
    }
    let customer = Customer {
        tenant,
        id,
        name: body.name,
        email: body.email.into(),
        city: body.city,
    };
    // With If-Match, the write is guarded by the client's ETag; without,
    // by the ETag of the version read here.
    let etag = match if_match(&headers)? {
        Some(etag) => etag,
        None => {
            let current = app
                .customers
                .get(customer.tenant.as_str(), customer.id.as_str())
                .await?
                .ok_or(ApiError::NotFound)?;
            Loaded::etag(&current).clone()
        }
    };
    let mut loaded = Loaded::new(customer, etag, None);
    let etag = app.customers.replace(&mut loaded).await?;
    Ok(with_etag(&etag, customer_json(&loaded), StatusCode::OK))
}

/// How many times a write that lost a race to another request reads again
/// and tries again.
const ATTEMPTS: usize = 8;

/// Deletes a customer with everything under it: its attachments (each with
/// its blob), then its orders and their lines, the last of them in one
/// transaction with the customer itself, guarded by the customer's ETag.
/// Every order is placed in a transaction that also touches the customer's
/// row (see [`post_order`]), so an order placed while the delete runs
/// changes that ETag: the delete then reads again and takes it too, and no
/// order outlives its customer.
async fn delete_customer(
    State(app): State<App>,
    Path((tenant, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let given = if_match(&headers)?;
    for _ in 0..ATTEMPTS {
        let current = app
            .customers
            .get(tenant.as_str(), id.as_str())
            .await?
            .ok_or(ApiError::NotFound)?;
        if given
            .as_ref()
            .is_some_and(|etag| etag != Loaded::etag(&current))
        {
            return Err(ApiError::Status(
                StatusCode::PRECONDITION_FAILED,
                "etag_mismatch",
                "it changed since the version named by If-Match".into(),
            ));
        }
        let attachments: Vec<Loaded<Attachment>> = app
            .attachments
            .query()
            .partition(tenant.as_str())
            .row_prefix((id.as_str(),))
            .collect()
            .await?;
        for attachment in &attachments {
            match app.attachments.delete(attachment).await {
                Ok(()) | Err(Error::EntityNotFound { .. } | Error::PreconditionFailed { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // The orders and their lines, as keys.
        let orders: Vec<Loaded<Order>> = app
            .orders
            .query()
            .partition(tenant.as_str())
            .row_prefix((id.as_str(),))
            .collect()
            .await?;
        let mut rows: Vec<(u32, Option<u32>)> = Vec::new();
        for order in &orders {
            rows.push((order.number, None));
            let lines: Vec<Loaded<OrderRows>> = app
                .orders
                .of::<OrderRows>()
                .read_collection::<Order>(
                    tenant.as_str(),
                    (id.as_str(), order.number),
                    UnknownKind::Skip,
                )
                .try_collect()
                .await?;
            rows.extend(lines.iter().filter_map(|row| match &**row {
                OrderRows::Line(line) => Some((line.number, Some(line.line))),
                OrderRows::Order(_) => None,
            }));
        }
        // A transaction holds 100 rows: the customer and its index rows
        // take a few.
        let (rest, last) = rows.split_at(rows.len().saturating_sub(90));
        for chunk in rest.chunks(90) {
            let mut transaction = app.orders.transaction();
            for row in chunk {
                delete_order_row(&mut transaction, &tenant, &id, *row)?;
            }
            transaction.submit().await?;
        }
        let mut transaction = app.orders.transaction();
        for row in last {
            delete_order_row(&mut transaction, &tenant, &id, *row)?;
        }
        transaction.delete(&current)?;
        match transaction.submit().await {
            Ok(_) => return Ok(StatusCode::NO_CONTENT),
            // An order placed meanwhile changed the customer: again.
            Err(Error::BatchFailed { source, .. })
                if given.is_none() && matches!(*source, Error::PreconditionFailed { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Status(
        StatusCode::CONFLICT,
        "busy",
        "the customer kept changing while it was being deleted; try again".into(),
    ))
}

/// Adds the delete of an order (`line` is `None`) or one of its lines.
fn delete_order_row(
    transaction: &mut tablekit::Transaction,
    tenant: &str,
    customer: &str,
    (number, line): (u32, Option<u32>),
) -> ApiResult<()> {
    match line {
        None => transaction.delete_unconditionally::<Order>(tenant, (customer, number))?,
        Some(line) => {
            transaction.delete_unconditionally::<Line>(tenant, (customer, number, line))?
        }
    };
    Ok(())
}

async fn list_customers(
    State(app): State<App>,
    Path(tenant): Path<String>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let query = app.customers.query().partition(tenant.as_str());
    page(query, &params, customer_json).await
}

async fn customer_by_email(
    State(app): State<App>,
    Path((tenant, email)): Path<(String, String)>,
) -> ApiResult<Json<JsonValue>> {
    let found = app
        .customers
        .index(Customer::indexes().email)
        .get(tenant.as_str(), email.as_str())
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(customer_json(&found)))
}

async fn customers_by_city(
    State(app): State<App>,
    Path((tenant, city)): Path<(String, String)>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let found = app
        .customers
        .remote_index(Customer::indexes().city)
        .find_page(
            tenant.as_str(),
            city.as_str(),
            params.limit(),
            params.cursor()?.as_ref(),
        )
        .await?;
    Ok(Json(Page {
        items: found.items.iter().map(customer_json).collect(),
        next: found.next.map(|c| c.to_string()),
    }))
}

// ---- orders and their lines ----

#[derive(Deserialize)]
struct OrderBody {
    number: u32,
    lines: Vec<LineBody>,
}

#[derive(Deserialize)]
struct LineBody {
    sku: String,
    quantity: i32,
    price_cents: i64,
}

fn order_json(order: &Order, lines: &[Line]) -> JsonValue {
    json!({
        "number": order.number,
        "placed": order.placed.to_string(),
        "total_cents": order.total_cents,
        "lines": lines.iter().map(|l| json!({
            "line": l.line, "sku": l.sku, "quantity": l.quantity, "price_cents": l.price_cents,
        })).collect::<Vec<_>>(),
    })
}

async fn post_order(
    State(app): State<App>,
    Path((tenant, customer)): Path<(String, String)>,
    Body(body): Body<OrderBody>,
) -> ApiResult<Response> {
    check(
        (1..=99).contains(&body.lines.len()),
        "an order has 1 to 99 lines",
    )?;
    for line in &body.lines {
        check(
            line.quantity > 0 && line.price_cents >= 0,
            "quantities are positive and prices not negative",
        )?;
        check(!line.sku.is_empty(), "sku must not be empty")?;
    }
    let total = body.lines.iter().try_fold(0i64, |sum, l| {
        l.price_cents
            .checked_mul(i64::from(l.quantity))
            .and_then(|n| sum.checked_add(n))
    });
    let total = total.ok_or_else(|| ApiError::BadRequest("the total overflows".into()))?;
    let order = Order {
        tenant: tenant.clone(),
        customer: customer.clone(),
        number: body.number,
        placed: DateTime::now(),
        total_cents: total,
    };
    let lines: Vec<Line> = body
        .lines
        .into_iter()
        .zip(1u32..)
        .map(|(l, line)| Line {
            tenant: tenant.clone(),
            customer: customer.clone(),
            number: body.number,
            line,
            sku: l.sku,
            quantity: l.quantity,
            price_cents: l.price_cents,
        })
        .collect();
    // The order and its lines: one transaction, all or nothing, which also
    // touches the customer's row under the ETag read: if the customer is
    // deleted (or changed) meanwhile, the order is not placed (or is tried
    // again), and a delete of the customer sees the order.
    let mut placed = None;
    for _ in 0..ATTEMPTS {
        let owner = app
            .customers
            .get(tenant.as_str(), customer.as_str())
            .await?
            .ok_or(ApiError::NotFound)?;
        let mut transaction = app.orders.transaction();
        transaction.push_raw(tablekit::BatchOperation::Update {
            entity: tablekit::Entity::new(tenant.as_str(), tablekit::schema::row_key_of(&*owner)?),
            mode: tablekit::UpdateMode::Merge,
            if_match: tablekit::IfMatch::ETag(Loaded::etag(&owner).clone()),
        });
        transaction.insert(&order)?;
        for line in &lines {
            transaction.insert(line)?;
        }
        match transaction.submit().await {
            Ok(etags) => {
                placed = Some(etags);
                break;
            }
            Err(Error::BatchFailed { index: 0, source })
                if matches!(*source, Error::PreconditionFailed { .. }) => {}
            Err(Error::BatchFailed { index: 0, source })
                if matches!(*source, Error::EntityNotFound { .. }) =>
            {
                return Err(ApiError::NotFound);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut etags = placed.ok_or_else(|| {
        ApiError::Status(
            StatusCode::CONFLICT,
            "busy",
            "the customer kept changing; try again".into(),
        )
    })?;
    etags.remove(0);
    let mut response = (StatusCode::CREATED, Json(order_json(&order, &lines))).into_response();
    if let Some(Some(etag)) = etags.first()
        && let Ok(value) = HeaderValue::from_str(etag.as_str())
    {
        response.headers_mut().insert(header::ETAG, value);
    }
    Ok(response)
}

async fn get_order(
    State(app): State<App>,
    Path((tenant, customer, number)): Path<(String, String, u32)>,
) -> ApiResult<Json<JsonValue>> {
    // The order and its lines are one range: one query.
    let rows: Vec<Loaded<OrderRows>> = app
        .orders
        .of::<OrderRows>()
        .read_collection::<Order>(
            tenant.as_str(),
            (customer.as_str(), number),
            UnknownKind::Skip,
        )
        .try_collect()
        .await?;
    let mut order = None;
    let mut lines = Vec::new();
    for row in rows {
        match Loaded::into_inner(row) {
            OrderRows::Order(o) => order = Some(o),
            OrderRows::Line(l) => lines.push(l),
        }
    }
    let order = order.ok_or(ApiError::NotFound)?;
    Ok(Json(order_json(&order, &lines)))
}

async fn list_orders(
    State(app): State<App>,
    Path((tenant, customer)): Path<(String, String)>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let query = app
        .orders
        .query()
        .partition(tenant.as_str())
        .row_prefix((customer.as_str(),));
    page(query, &params, |o| order_json(o, &[])).await
}

// ---- attachments ----

/// The content types an attachment is served back as; any other is served
/// as `application/octet-stream`, to download (never rendered by a browser
/// as a page of this origin).
const SAFE_TYPES: [&str; 7] = [
    "application/octet-stream",
    "application/pdf",
    "image/gif",
    "image/jpeg",
    "image/png",
    "image/webp",
    "text/plain",
];

/// The longest content type kept for an attachment.
const MAX_CONTENT_TYPE: usize = 128;

async fn put_attachment(
    State(app): State<App>,
    Path((tenant, customer, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    content: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let content = content?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream")
        .to_owned();
    check(
        content_type.len() <= MAX_CONTENT_TYPE,
        "the content type is too long",
    )?;
    if !app
        .customers
        .exists(tenant.as_str(), customer.as_str())
        .await?
    {
        return Err(ApiError::NotFound);
    }
    let attachment = Attachment {
        tenant,
        customer,
        name,
        content_type,
        content: content.to_vec(),
    };
    // With If-Match, only over that version; without, created or replaced.
    let etag = match if_match(&headers)? {
        Some(etag) => {
            app.attachments
                .replace(&mut Loaded::new(attachment.clone(), etag, None))
                .await?
        }
        None => app.attachments.upsert(&attachment).await?,
    };
    Ok(with_etag(
        &etag,
        json!({ "name": attachment.name, "bytes": attachment.content.len() }),
        StatusCode::OK,
    ))
}

async fn get_attachment(
    State(app): State<App>,
    Path((tenant, customer, name)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let found = app
        .attachments
        .get(tenant.as_str(), (customer.as_str(), name.as_str()))
        .await?
        .ok_or(ApiError::NotFound)?;
    let etag = Loaded::etag(&found).clone();
    let attachment = Loaded::into_inner(found);
    let mut response = attachment.content.into_response();
    let headers = response.headers_mut();
    // The type as given, when it is one a browser shows safely; any other
    // is a download.
    let given = attachment
        .content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if SAFE_TYPES.contains(&given.as_str()) {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(&given)
                .unwrap_or(HeaderValue::from_static("application/octet-stream")),
        );
    } else {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        headers.insert(
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment"),
        );
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(value) = HeaderValue::from_str(etag.as_str()) {
        headers.insert(header::ETAG, value);
    }
    Ok(response)
}

// ---- the audit log ----

#[derive(Deserialize)]
struct AuditParams {
    from: Option<String>,
    to: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

/// The tenant's audit entries from `from` (a day ago by default) to `to`,
/// oldest first, a page at a time: `?limit=` (1 to 1,000, 100 by default)
/// and the `next` cursor of the page before.
async fn list_audit(
    State(app): State<App>,
    Path(tenant): Path<String>,
    params: Result<Query<AuditParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let time = |text: Option<&str>, default: DateTime| -> ApiResult<DateTime> {
        text.map_or(Ok(default), |t| {
            DateTime::parse(t).map_err(|e| Error::from(e).into())
        })
    };
    let limit = params.limit.unwrap_or(100);
    check((1..=1000).contains(&limit), "limit is 1 to 1,000")?;
    let to = time(params.to.as_deref(), DateTime::MAX)?;
    let from = time(
        params.from.as_deref(),
        DateTime::now()
            .checked_sub(Duration::from_secs(24 * 3600))
            .unwrap_or(DateTime::MIN),
    )?;
    // The cursor is the time and request id of the last entry shown.
    let after: Option<(DateTime, String)> = match params.cursor.as_deref() {
        None => None,
        Some(cursor) => {
            let (at, request) = cursor
                .split_once(' ')
                .ok_or_else(|| ApiError::BadRequest("not a cursor of this list".into()))?;
            Some((time(Some(at), DateTime::MIN)?, request.to_owned()))
        }
    };
    let from = after.as_ref().map_or(from, |(at, _)| from.max(*at));
    let mut entries = app
        .audit
        .query(from..to)
        .each(move |q| q.partition(tenant.as_str()))
        .stream();
    let mut items = Vec::new();
    let mut next = None;
    let mut more = false;
    while let Some(entry) = entries.try_next().await? {
        let key = (entry.at, entry.request.clone());
        if after.as_ref().is_some_and(|after| key <= *after) {
            continue;
        }
        if items.len() == limit {
            more = true;
            break;
        }
        next = Some(format!("{} {}", entry.at, entry.request));
        items.push(json!({
            "at": entry.at.to_string(), "request": entry.request,
            "action": entry.action, "status": entry.status,
        }));
    }
    // A next page only if an entry is left.
    Ok(Json(Page {
        items,
        next: next.filter(|_| more),
    }))
}

/// The tenant a request's path names, decoded (`/tenants/vict%64/…` is
/// tenant `victd`): `Some(Err(()))` for a name the service refuses (empty,
/// too long, not UTF-8, or holding a control character), `None` outside
/// `/tenants/`.
fn tenant_of(path: &str) -> Option<Result<String, ()>> {
    let segment = path.strip_prefix("/tenants/")?.split('/').next()?;
    let decoded = percent_encoding::percent_decode_str(segment).decode_utf8();
    Some(match decoded {
        Ok(name)
            if !name.is_empty()
                && name.chars().count() <= MAX_TENANT
                && !name.chars().any(char::is_control) =>
        {
            Ok(name.into_owned())
        }
        _ => Err(()),
    })
}

/// Refuses a request for a tenant name the service does not take, and
/// writes every change a tenant's request made (or tried) to the audit log,
/// under the decoded tenant, in the table of its day. Writing the entry is
/// tried a few times; a failure is logged, and does not change the answer.
async fn audit(State(app): State<App>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let tenant = match tenant_of(&path) {
        None => return next.run(request).await,
        Some(Ok(tenant)) => tenant,
        Some(Err(())) => {
            return ApiError::BadRequest(format!(
                "a tenant is 1 to {MAX_TENANT} characters, none of them control characters"
            ))
            .into_response();
        }
    };
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let response = next.run(request).await;
    if method != Method::GET && method != Method::HEAD {
        let entry = AuditEntry {
            tenant,
            at: DateTime::now(),
            request: id,
            action: format!("{method} {path}"),
            status: i32::from(response.status().as_u16()),
        };
        let mut written = Err(None);
        for attempt in 0..3u64 {
            match app.audit.upsert(&entry).await {
                Ok(_) => {
                    written = Ok(());
                    break;
                }
                Err(error) => written = Err(Some(error)),
            }
            tokio::time::sleep(Duration::from_millis(50 * (attempt + 1))).await;
        }
        if let Err(Some(error)) = written {
            tracing::error!(%error, action = %entry.action, "audit entry not written");
        }
    }
    response
}
