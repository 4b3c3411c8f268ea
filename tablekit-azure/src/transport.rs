//! What the table and the blob client share around one request: the HTTP
//! client, the request URL, sending it and reading the reply or the
//! service's error, and the retry loop with its `tracing` span.
//!
//! Requests go through hyper's pooled client (`hyper-util`) over rustls
//! with the Mozilla roots, HTTP/1.1, `TCP_NODELAY`: the stack reqwest
//! builds on, without the layers this client does not use (redirects,
//! proxies, cookies, decompression). Those layers were most of what this
//! client cost above a raw hyper client: `benches/request_path.rs` measured
//! 30–36 µs of client CPU per upsert through reqwest, 23–25 µs through
//! hyper directly, beside 23 µs for a raw hyper client.

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
pub(crate) use http::Method;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tablekit::{Error, Result};
use tracing::Instrument as _;

use crate::config::{ClientOptions, ConfigError, Credentials};
use crate::errors::{self, Target};
use crate::policy::{Idempotence, RetryPolicy};
use crate::url;

/// A pooled HTTP client for one account's endpoints, and its request
/// timeout. Clones share the pool.
#[derive(Clone, Debug)]
pub(crate) struct Http {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The longest a request may take, answer read whole.
    timeout: Duration,
}

impl Http {
    /// The client `options` describe, checked.
    pub(crate) fn from_options(options: &ClientOptions) -> Result<Http, ConfigError> {
        options.check()?;
        Ok(Http::new(options.request_timeout, options.connect_timeout))
    }

    /// A client that connects within `connect_timeout` and gives a request
    /// `timeout` to be answered and read.
    fn new(timeout: Duration, connect_timeout: Duration) -> Http {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        Http {
            client: Client::builder(TokioExecutor::new()).build(https),
            timeout,
        }
    }

    /// A request to `url`, to be given headers and a body.
    pub(crate) fn request(&self, method: Method, url: &str) -> Request<'_> {
        Request {
            http: self,
            parts: http::Request::builder().method(method).uri(url),
            body: Bytes::new(),
        }
    }
}

/// A request being built: [`Http::request`], then headers and a body.
pub(crate) struct Request<'a> {
    http: &'a Http,
    parts: http::request::Builder,
    body: Bytes,
}

impl Request<'_> {
    /// Adds a header. A name or value that is not valid in HTTP makes the
    /// request fail when sent, naming it.
    pub(crate) fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.parts = self.parts.header(name, value);
        self
    }

    /// Sets the body.
    pub(crate) fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }
}

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
    request: Request<'_>,
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
    let Request { http, parts, body } = request;
    let request = parts
        .body(Full::new(body))
        // A URL or header that HTTP cannot carry: nothing was sent.
        .map_err(|e| Error::Configuration {
            message: format!("{method} {path}: the request cannot be built: {e}"),
        })?;
    let exchange = async {
        let response = http.client.request(request).await.map_err(|e| {
            let message = format!("{method} {path}: {e}");
            if e.is_connect() {
                Error::Transient { message }
            } else {
                lost(message)
            }
        })?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| lost(format!("{method} {path}: reading the response: {e}")))?
            .to_bytes();
        Ok::<_, Error>((parts.status, parts.headers, body))
    };
    let (status, headers, body) = tokio::time::timeout(http.timeout, exchange)
        .await
        .map_err(|_| {
            lost(format!(
                "{method} {path}: no answer within {} s",
                http.timeout.as_secs_f64()
            ))
        })??;
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
