//! Errors and their HTTP answers: a status, a stable code and a message
//! that names no internals.

use std::time::Duration;

use axum::Json;
use axum::extract::rejection::{BytesRejection, JsonRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tablekit::Error;

use super::MAX_BODY;

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

pub(super) fn too_large() -> ApiError {
    ApiError::Status(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("a request body holds at most {MAX_BODY} bytes"),
    )
}

/// The status, stable code, message and `Retry-After` of a store error.
pub(super) fn error_status(
    error: &Error,
) -> (StatusCode, &'static str, &'static str, Option<Duration>) {
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
        Error::NewerVersion { .. } => (
            StatusCode::CONFLICT,
            "newer_version",
            "a newer version of the service wrote it: this one would drop what it does not know",
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
        Error::Storage {
            failure: tablekit::StorageFailure::DiskFull,
            ..
        } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_full",
            "the store has no room for writes; try again later",
            Some(Duration::from_secs(30)),
        ),
        Error::Storage {
            failure: tablekit::StorageFailure::ReadOnly,
            ..
        } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "read_only",
            "the store is read-only: it serves reads, and takes no writes",
            None,
        ),
        Error::PeriodDropped { .. } => (
            StatusCode::GONE,
            "gone",
            "the period it belongs to was removed",
            None,
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
pub(super) fn invalid_input(error: &Error) -> Option<&tablekit::InvalidInput> {
    match error {
        Error::Invalid(invalid) => Some(invalid),
        Error::BatchFailed { source, .. } => invalid_input(source),
        _ => None,
    }
}

/// What is wrong with the input, in the client's terms: the field, never
/// the stored keys or another record.
pub(super) fn invalid_message(invalid: &tablekit::InvalidInput) -> String {
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
        I::Cursor { .. } | I::ContinuationToken { .. } => {
            "the cursor is not one this list gave out".into()
        }
        I::TopOutOfRange { max, .. } => format!("limit is 1 to {max}"),
        I::DateTime { value, reason } => format!("the date {value:?} cannot be stored: {reason}"),
        _ => "a value cannot be stored".into(),
    }
}

/// Marks an answer given because the service's table was missing: the
/// error layer makes it again.
#[derive(Clone, Copy)]
pub(super) struct MissingTable;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (mut missing, mut full) = (false, false);
        let (status, code, retry, message) = match self {
            ApiError::Store(error) => {
                let (status, code, message, retry) = error_status(&error);
                if status.is_server_error() {
                    tracing::warn!(%error, "request failed");
                }
                missing = matches!(error, Error::TableNotFound { .. });
                full = is_storage_full(&error);
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
        if full {
            response.extensions_mut().insert(StorageFull);
        }
        response
    }
}

/// Marks an answer that met a store with no room for writes: the service
/// is not ready until a write succeeds again (see `App::ready`).
#[derive(Clone, Copy, Debug)]
pub(super) struct StorageFull;

/// Whether `error` is a store's lack of room, alone or as a transaction's.
fn is_storage_full(error: &Error) -> bool {
    match error {
        Error::Storage {
            failure: tablekit::StorageFailure::DiskFull,
            ..
        } => true,
        Error::BatchFailed { source, .. } => is_storage_full(source),
        _ => false,
    }
}

/// The code and message of an error answer that came without a JSON body
/// (from the router or an extractor).
pub(super) fn generic_error(status: StatusCode) -> (&'static str, String) {
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

/// A handler's result.
pub(super) type ApiResult<T> = Result<T, ApiError>;
