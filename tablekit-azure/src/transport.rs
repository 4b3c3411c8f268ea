//! What the table and the blob client share around one request: the request
//! URL, and the retry loop with its `tracing` span.

use std::future::Future;
use std::time::Instant;

use reqwest::Method;
use tablekit::{Error, Result};
use tracing::Instrument as _;

use crate::config::Credentials;
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
