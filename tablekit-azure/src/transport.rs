//! What the table and the blob client share around one request: the request
//! URL, sending it and reading the reply or the service's error, and the
//! retry loop with its `tracing` span.

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::Method;
use reqwest::header::HeaderMap;
use tablekit::{Error, Result};
use tracing::Instrument as _;

use crate::config::Credentials;
use crate::errors::{self, Target};
use crate::policy::{Idempotence, RetryPolicy};
use crate::url;

/// The path an endpoint puts before every resource: `/devstoreaccount1` for
/// the emulator's path-style URLs, empty for the cloud's.
pub(crate) fn path_prefix(endpoint: &str) -> String {
    endpoint
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|at| rest[at..].to_owned()))
        .unwrap_or_default()
}

/// The URL of a request: endpoint, encoded path, encoded query parameters,
/// and the SAS token when the client signs with one.
pub(crate) fn address(
    endpoint: &str,
    path: &str,
    query: &[(&str, String)],
    credentials: &Credentials,
) -> String {
    let mut query = url::query_string(
        &query
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect::<Vec<_>>(),
    );
    if let Credentials::Sas(token) = credentials {
        if !query.is_empty() {
            query.push('&');
        }
        query.push_str(token);
    }
    let mut address = format!("{endpoint}{path}");
    if !query.is_empty() {
        address.push('?');
        address.push_str(&query);
    }
    address
}

/// Sends one request and reads the whole response: `Ok` with its status,
/// headers and body when the status is a success; otherwise the error the service
/// reported, its code from `x-ms-error-code` (else from the body, through
/// `error_body`), honouring `Retry-After`. A request that cannot be sent or
/// a body that cannot be read is transient.
pub(crate) async fn execute(
    request: reqwest::RequestBuilder,
    method: &Method,
    path: &str,
    target: Target<'_>,
    error_body: fn(&str) -> (String, String),
) -> Result<(u16, HeaderMap, Bytes)> {
    // A write that fails once it may have reached the service (a timeout, a
    // dropped connection, an unreadable answer, a server error that may
    // have acted) has an unknown outcome; a read, or a request that never
    // got connected, was not applied.
    let write = *method != Method::GET && *method != Method::HEAD;
    let lost = |message: String| {
        if write {
            Error::OutcomeUnknown { message }
        } else {
            Error::Transient { message }
        }
    };
    let response = request.send().await.map_err(|e| {
        let message = format!("{method} {path}: {e}");
        if e.is_connect() {
            Error::Transient { message }
        } else {
            lost(message)
        }
    })?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|e| lost(format!("{method} {path}: reading the response: {e}")))?;
    if status.is_success() {
        return Ok((status.as_u16(), headers, body));
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (body_code, message) = error_body(&String::from_utf8_lossy(&body));
    let code = header("x-ms-error-code").map_or(body_code, str::to_owned);
    // Cosmos DB for Table says how long to wait in milliseconds; the
    // service's `Retry-After` is in seconds.
    let retry_after = header("x-ms-retry-after-ms")
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .or_else(|| {
            header("retry-after")
                .and_then(|v| v.parse().ok())
                .map(Duration::from_secs)
        });
    let error = errors::map(status.as_u16(), &code, &message, target, retry_after);
    // 408, 500 and 504 say the service may or may not have acted; 503 (busy)
    // says it did not.
    if write && matches!(status.as_u16(), 408 | 500 | 504) {
        return Err(Error::OutcomeUnknown {
            message: error.to_string(),
        });
    }
    Err(error)
}

/// Runs `attempt` until it succeeds, fails for good, or `retry` gives up.
///
/// Everything happens inside a `tablekit_azure::request` span at DEBUG level
/// (fields `method`, `path`); each attempt's outcome is an event in it, and
/// a retry is a WARN event with the error and the wait. The path holds the
/// keys of the entity, so it is logged at DEBUG only.
pub(crate) async fn with_retries<T, F, Fut>(
    retry: &RetryPolicy,
    idempotence: Idempotence,
    method: &Method,
    path: &str,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let span = tracing::debug_span!("tablekit_azure::request", %method, path);
    async move {
        let mut number = 1;
        loop {
            let started = Instant::now();
            let outcome = attempt().await;
            let elapsed_ms = started.elapsed().as_millis() as u64;
            match outcome {
                Ok(value) => {
                    tracing::debug!(attempt = number, elapsed_ms, "succeeded");
                    return Ok(value);
                }
                Err(error) if retry.should_retry(number, idempotence, &error) => {
                    let retry_after = match &error {
                        Error::Throttled { retry_after } => *retry_after,
                        _ => None,
                    };
                    let wait = retry.delay(number, fastrand::f64(), retry_after);
                    tracing::warn!(
                        attempt = number,
                        elapsed_ms,
                        %error,
                        wait_ms = wait.as_millis() as u64,
                        "retrying"
                    );
                    tokio::time::sleep(wait).await;
                    number += 1;
                }
                Err(error) => {
                    tracing::debug!(attempt = number, elapsed_ms, %error, "failed");
                    return Err(error);
                }
            }
        }
    }
    .instrument(span)
    .await
}
