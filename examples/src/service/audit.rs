//! The audit log: every write a tenant's request made, one table per day.

use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use serde::Deserialize;
use serde_json::json;
use tablekit::{DateTime, Error};

use super::error::{ApiError, ApiResult};
use super::http::{Page, check};
use super::model::AuditEntry;
use super::{App, MAX_TENANT};

#[derive(Deserialize)]
pub(super) struct AuditParams {
    from: Option<String>,
    to: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

/// The tenant's audit entries from `from` (a day ago by default) to `to`,
/// oldest first, a page at a time: `?limit=` (1 to 1,000, 100 by default)
/// and the `next` cursor of the page before.
pub(super) async fn list_audit(
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
pub(super) fn tenant_of(path: &str) -> Option<Result<String, ()>> {
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

/// What a write's audit entry says of its request. A handler that writes
/// through a transaction adds the entry to it ([`record`](WriteAudit::record)):
/// the entry is then committed with the write, or not at all, so no write
/// that lands (even after its client hung up, or after it was answered 504)
/// goes unaudited. Its response carries [`Audited`], so that the middleware
/// does not write the entry again.
#[derive(Debug, Clone)]
pub(super) struct WriteAudit {
    tenant: String,
    /// When the request came: one entry per request, whichever of its
    /// transactions puts it (a delete of many rows takes several).
    at: DateTime,
    request: String,
    action: String,
}

impl FromRequestParts<App> for WriteAudit {
    type Rejection = ApiError;

    /// What the [`audit`] middleware, which sees the request's whole path,
    /// left in its extensions.
    async fn from_request_parts(parts: &mut Parts, _: &App) -> Result<WriteAudit, ApiError> {
        parts
            .extensions
            .get::<WriteAudit>()
            .cloned()
            .ok_or_else(|| ApiError::BadRequest("not a tenant's path".into()))
    }
}

impl WriteAudit {
    /// Adds this request's entry, as answered `status`, to `transaction`.
    pub(super) async fn record(
        &self,
        app: &App,
        transaction: &mut tablekit::Transaction,
        status: StatusCode,
    ) -> ApiResult<()> {
        let entry = AuditEntry {
            tenant: self.tenant.clone(),
            at: self.at,
            request: self.request.clone(),
            action: self.action.clone(),
            status: i32::from(status.as_u16()),
        };
        let table = app.audit.prepare(&entry).await?;
        transaction.then_put_value(&table, &entry)?;
        Ok(())
    }
}

/// Marks a response whose write committed its own audit entry.
#[derive(Debug, Clone, Copy)]
pub(super) struct Audited;

/// `response`, marked [`Audited`].
pub(super) fn audited(mut response: Response) -> Response {
    response.extensions_mut().insert(Audited);
    response
}

/// The request's id, as the request-id layer set it.
fn request_id(headers: &axum::http::HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Refuses a request for a tenant name the service does not take, and
/// writes to the audit log, under the decoded tenant, in the table of its
/// day, every write request a handler did not audit in the write's own
/// transaction ([`WriteAudit`]): requests refused or failed, and the
/// writes that cannot join a transaction (an attachment's blob). Writing
/// such an entry is tried a few times; a failure is logged, and does not
/// change the answer.
pub(super) async fn audit(State(app): State<App>, request: Request, next: Next) -> Response {
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
    let id = request_id(request.headers());
    let mut request = request;
    request.extensions_mut().insert(WriteAudit {
        tenant: tenant.clone(),
        at: DateTime::now(),
        request: id.clone(),
        action: format!("{method} {path}"),
    });
    let response = next.run(request).await;
    if method != Method::GET
        && method != Method::HEAD
        && response.extensions().get::<Audited>().is_none()
    {
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
