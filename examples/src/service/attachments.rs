//! Attachments: bytes in the blob store, served back safely.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tablekit::Loaded;

use super::App;
use super::error::{ApiError, ApiResult};
use super::http::{check, if_match, with_etag};
use super::model::Attachment;

/// The content types an attachment is served back as; any other is served
/// as `application/octet-stream`, to download (never rendered by a browser
/// as a page of this origin).
pub(super) const SAFE_TYPES: [&str; 7] = [
    "application/octet-stream",
    "application/pdf",
    "image/gif",
    "image/jpeg",
    "image/png",
    "image/webp",
    "text/plain",
];

/// The longest content type kept for an attachment.
pub(super) const MAX_CONTENT_TYPE: usize = 128;

pub(super) async fn put_attachment(
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
    // The attachment names the customer it is for: if that customer is
    // deleted while it is written (and one of the same id made again), it
    // is never served as the new one's.
    let owner = app
        .customers
        .get(tenant.as_str(), customer.as_str())
        .await?
        .ok_or(ApiError::NotFound)?;
    let attachment = Attachment {
        tenant,
        customer,
        name,
        content_type,
        content: content.to_vec(),
        incarnation: owner.incarnation.clone(),
    };
    // With If-Match, only over a version it names (and never created);
    // with If-None-Match: *, only created; without, created or replaced.
    let condition = if_match(&headers)?;
    let etag = if condition.is_absent() {
        app.attachments.upsert(&attachment).await?
    } else {
        let keys = (attachment.customer.as_str(), attachment.name.as_str());
        let current = app
            .attachments
            .get(attachment.tenant.as_str(), keys)
            .await?;
        match condition.guard(current.as_ref().map(Loaded::etag))? {
            // `If-None-Match: *`, and there is none: created.
            None if condition.creates_only() => app.attachments.insert(&attachment).await?,
            None => return Err(ApiError::NotFound),
            Some(etag) => {
                app.attachments
                    .replace(&mut Loaded::new(attachment.clone(), etag, None))
                    .await?
            }
        }
    };
    Ok(with_etag(
        &etag,
        json!({ "name": attachment.name, "bytes": attachment.content.len() }),
        StatusCode::OK,
    ))
}

pub(super) async fn get_attachment(
    State(app): State<App>,
    Path((tenant, customer, name)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let (found, owner) = futures::try_join!(
        app.attachments
            .get(tenant.as_str(), (customer.as_str(), name.as_str())),
        app.customers.get(tenant.as_str(), customer.as_str()),
    )?;
    let (found, owner) = (
        found.ok_or(ApiError::NotFound)?,
        owner.ok_or(ApiError::NotFound)?,
    );
    if found.incarnation != owner.incarnation {
        // Left by an earlier customer of this id, written while it was
        // deleted: never this one's. Removed on the way (the upkeep
        // removes its blob).
        let _ = app.attachments.delete(&found).await;
        return Err(ApiError::NotFound);
    }
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
