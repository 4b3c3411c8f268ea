//! Users and their activity feeds.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value as JsonValue, json};
use tablekit::key::InvertedTime;
use tablekit::{DateTime, Loaded};

use super::App;
use super::audit::{WriteAudit, audited};
use super::customers::first_etag;
use super::error::{ApiError, ApiResult};
use super::http::{Body, Page, PageParams, check, if_match, page, with_etag};
use super::model::{Activity, User};

#[derive(Deserialize)]
#[serde(expecting = "a user: an object with `name`")]
pub(super) struct UserBody {
    name: String,
}

pub(super) fn user_json(user: &User) -> JsonValue {
    json!({ "user": user.user, "name": user.name })
}

pub(super) async fn put_user(
    State(app): State<App>,
    Path((tenant, user)): Path<(String, String)>,
    headers: HeaderMap,
    audit: WriteAudit,
    Body(body): Body<UserBody>,
) -> ApiResult<Response> {
    check(!body.name.trim().is_empty(), "name must not be empty")?;
    let user = User {
        tenant,
        user,
        name: body.name,
    };
    // With If-Match, only over a version it names (and never created);
    // with If-None-Match: *, only created; without, created or replaced.
    let condition = if_match(&headers)?;
    let mut transaction = app.users.transaction();
    if condition.is_absent() {
        transaction.upsert(&user)?;
    } else {
        let current = app
            .users
            .get((user.tenant.as_str(), user.user.as_str()), ())
            .await?;
        match condition.guard(current.as_ref().map(Loaded::etag))? {
            // `If-None-Match: *`, and there is none: created.
            None if condition.creates_only() => {
                transaction.insert(&user)?;
            }
            None => return Err(ApiError::NotFound),
            Some(etag) => {
                // What the stored row holds beyond the type's fields is kept.
                let mut loaded = current.ok_or(ApiError::NotFound)?;
                *loaded = user.clone();
                Loaded::set_etag(&mut loaded, etag);
                transaction.replace(&loaded)?;
            }
        }
    }
    audit.record(&app, &mut transaction, StatusCode::OK).await?;
    let etag = first_etag(transaction.submit().await?)?;
    Ok(audited(with_etag(&etag, user_json(&user), StatusCode::OK)))
}

pub(super) async fn get_user(
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
pub(super) async fn list_users(
    State(app): State<App>,
    Path(tenant): Path<String>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let query = app.users.query().partition_prefix(tenant.as_str());
    page(query, &params, user_json).await
}

#[derive(Deserialize)]
#[serde(expecting = "an activity: an object with `text`")]
pub(super) struct ActivityBody {
    text: String,
}

pub(super) fn activity_json(event: &Activity) -> JsonValue {
    json!({ "at": event.at.0.to_string(), "text": event.text })
}

pub(super) async fn post_activity(
    State(app): State<App>,
    Path((tenant, user)): Path<(String, String)>,
    audit: WriteAudit,
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
    let mut transaction = app.activity.transaction();
    transaction.insert(&event)?;
    audit
        .record(&app, &mut transaction, StatusCode::CREATED)
        .await?;
    let etag = first_etag(transaction.submit().await?)?;
    Ok(audited(with_etag(
        &etag,
        activity_json(&event),
        StatusCode::CREATED,
    )))
}

pub(super) fn nonce() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

pub(super) async fn list_activity(
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
