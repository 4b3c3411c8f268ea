//! What the table, blob and queue clients share around one request: the
//! HTTP client, the request URL, sending it and reading the reply or the
//! service's error, and the retry loop with its `tracing` span.
//!
//! Requests go over rustls, HTTP/1.1, `TCP_NODELAY`, through hyper's
//! connection API and a pool of this crate ([`crate::pool`]): no
//! redirects, cookies or decompression, which this client does not use.
//! Connections are opened by [`crate::net`]: through the proxy the options
//! or the environment name, trusted as [`Trust`](crate::config::Trust)
//! says, and never written to once the server may have closed them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
pub(crate) use http::Method;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use tablekit_core::{Error, Result};
use tracing::Instrument as _;

use crate::config::{ClientOptions, ConfigError, Credentials};
use crate::errors::{self, Target};
use crate::net::{Connector, Learned, NotSent, ProxyRefused};
use crate::policy::{Idempotence, RetryPolicy};
use crate::pool::{ConnectError, Pool};
use crate::url;

/// How long an idle connection is kept to a server on this machine (the
/// emulator, like every Node.js server, closes them after 5 s).
const LOCAL_IDLE: Duration = Duration::from_secs(4);
/// How long an idle connection is kept to the cloud: below the 60 to 75 s
/// after which proxies, NAT gateways and load balancers commonly drop idle
/// connections without a word.
const CLOUD_IDLE: Duration = Duration::from_secs(50);

/// A pooled HTTP client for one account's endpoints, and its request
/// timeout. Clones share the pool.
#[derive(Clone, Debug)]
pub(crate) struct Http {
    pool: Arc<Pool>,
    /// The longest a request may take, answer read whole.
    timeout: Duration,
    /// What the connections learned about their servers.
    learned: Arc<Learned>,
    /// At most this many requests (so connections) at once.
    limit: Option<Arc<tokio::sync::Semaphore>>,
    /// The proxy, for the `Proxy-Authorization` of plain-HTTP requests.
    proxy: Option<Arc<DebugMatcher>>,
}

/// hyper-util's matcher, which prints its credentials in `Debug`.
struct DebugMatcher(Arc<Matcher>);

impl std::fmt::Debug for DebugMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Matcher(..)")
    }
}

impl Http {
    /// The client `options` describe, checked, for requests to `endpoint`
    /// (whose host chooses the idle timeout when the options do not).
    pub(crate) fn from_options(
        options: &ClientOptions,
        endpoint: &str,
    ) -> Result<Http, ConfigError> {
        options.check()?;
        let idle = options.idle_timeout.unwrap_or_else(|| {
            if is_local(url::host_of(endpoint)) {
                LOCAL_IDLE
            } else {
                CLOUD_IDLE
            }
        });
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(options.connect_timeout));
        let proxy = crate::net::matcher(&options.proxy)?;
        let learned = Arc::new(Learned::default());
        let connector = Connector::new(tcp, proxy.clone(), learned.clone());
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(crate::net::tls_config(&options.trust)?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let max_idle = options.max_connections_per_host.unwrap_or(usize::MAX);
        Ok(Http {
            pool: Arc::new(Pool::new(https, idle, max_idle)),
            timeout: options.request_timeout,
            learned,
            limit: options
                .max_connections_per_host
                .map(|cap| Arc::new(tokio::sync::Semaphore::new(cap))),
            proxy: proxy.map(|m| Arc::new(DebugMatcher(m))),
        })
    }

    /// A request to `url`, to be given headers and a body.
    pub(crate) fn request(&self, method: Method, url: &str) -> Request<'_> {
        let mut parts = http::Request::builder().method(method).uri(url);
        // A plain-HTTP request through a proxy carries the proxy's
        // credentials itself (a tunnel carries them in its CONNECT).
        if let Some(proxy) = &self.proxy
            && url.starts_with("http://")
            && let Some(auth) = url
                .parse::<http::Uri>()
                .ok()
                .and_then(|uri| proxy.0.intercept(&uri))
                .and_then(|i| i.basic_auth().cloned())
        {
            parts = parts.header(http::header::PROXY_AUTHORIZATION, auth);
        }
        Request {
            http: self,
            parts,
            body: Bytes::new(),
        }
    }
}

/// A host on this machine: the emulator's, or a test server's.
fn is_local(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
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

/// Why an attempt failed, and whether it is sent again at once.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) error: Error,
    pub(crate) resend: Option<Resend>,
}

/// Why a failed attempt is sent again at once, whatever its method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    /// No byte of it was written.
    NotSent,
    /// The service refused the token it carried; a new one was asked for.
    Unauthorized,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure {
            error,
            resend: None,
        }
    }
}

/// An error and its sources, each once: `client error (Connect): tcp
/// connect error: Connection refused (os error 111)`.
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        let part = source.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = source.source();
    }
    text
}

/// Where an attempt is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Route {
    /// To the secondary endpoint (a read of an account with read-access
    /// geo-redundant storage), not the primary.
    pub(crate) secondary: bool,
}

/// Sends one request and reads the whole response: `Ok` with its status,
/// headers and body when the status is a success; otherwise the error the service
/// reported, its code from `x-ms-error-code` (else from the body, through
/// `error_body`), honouring `Retry-After`. A request that cannot be sent or
/// a body that cannot be read is transient; one that was never written is
/// marked to be sent again at once.
/// The header that carries a request's id of our making, which the
/// service records in its logs and echoes back.
pub(crate) const CLIENT_REQUEST_ID: &str = "x-ms-client-request-id";

/// A new id for one HTTP request (a random UUID): every attempt carries its
/// own, so that the service's logs tell the attempts of one call apart.
pub(crate) fn new_client_request_id() -> String {
    tablekit_core::uuid::Builder::from_random_bytes(fastrand::u128(..).to_le_bytes())
        .into_uuid()
        .to_string()
}

pub(crate) async fn execute(
    request: Request<'_>,
    method: &Method,
    path: &str,
    target: Target<'_>,
    error_body: fn(&str) -> (String, String),
) -> Result<(u16, HeaderMap, Bytes), Failure> {
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
    let client_request_id = parts
        .headers_ref()
        .and_then(|h| h.get(CLIENT_REQUEST_ID))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let request = parts
        .body(Full::new(body))
        // A URL or header that HTTP cannot carry: nothing was sent.
        .map_err(|e| Error::Configuration {
            message: format!("{method} {path}: the request cannot be built: {e}"),
        })?;
    let exchange = async {
        let _slot = match &http.limit {
            Some(limit) => Some(limit.acquire().await.map_err(|_| Error::Transient {
                message: format!("{method} {path}: the client is shutting down"),
            })?),
            None => None,
        };
        let response = exchange(http, request, method, path, &lost).await?;
        Ok::<_, Failure>(response)
    };
    let (status, headers, body) = tokio::time::timeout(http.timeout, exchange)
        .await
        .map_err(|_| {
            lost(format!(
                "{method} {path}: no answer within {} s",
                http.timeout.as_secs_f64()
            ))
        })??;
    if let Some(keep_alive) = headers.get("keep-alive").and_then(|v| v.to_str().ok()) {
        http.learned.keep_alive_header(keep_alive);
    }
    // Both ids, ours and the service's, for a support case to find the
    // request in the service's logs: on the attempt's span.
    let attempt = tracing::Span::current();
    if !attempt.is_disabled() {
        attempt.record("http.response.status_code", i64::from(status.as_u16()));
        attempt.record("az.client_request_id", client_request_id.as_str());
        if let Some(id) = headers.get("x-ms-request-id").and_then(|v| v.to_str().ok()) {
            attempt.record("az.service_request_id", id);
        }
    }
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
        }
        .into());
    }
    Err(error.into())
}

/// Sends `request` on a pooled connection and reads the answer whole; the
/// connection goes back to the pool after. A request the connection gave
/// back unsent is sent on another one (a few times).
async fn exchange(
    http: &Http,
    mut request: http::Request<Full<Bytes>>,
    method: &Method,
    path: &str,
    lost: &impl Fn(String) -> Error,
) -> Result<(http::StatusCode, HeaderMap, Bytes), Failure> {
    let uri = request.uri().clone();
    if !request.headers().contains_key(http::header::HOST)
        && let Some(authority) = uri.authority()
    {
        let host = match (uri.scheme_str(), authority.port_u16()) {
            (Some("http"), Some(80)) | (Some("https"), Some(443)) => authority.host(),
            _ => authority.as_str(),
        };
        if let Ok(value) = HeaderValue::from_str(host) {
            request.headers_mut().insert(http::header::HOST, value);
        }
    }
    // The path alone, for a server (shares the URL's bytes).
    let origin_form = uri.path_and_query().cloned().and_then(|path| {
        let mut parts = http::uri::Parts::default();
        parts.path_and_query = Some(path);
        http::Uri::from_parts(parts).ok()
    });
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut taken = http
            .pool
            .take(&uri)
            .await
            .map_err(|e| connect_failed(e, method, path, &uri))?;
        // A proxy for plain HTTP takes the whole URL; a server, the path.
        *request.uri_mut() = match (&origin_form, taken.proxied) {
            (Some(origin), false) => origin.clone(),
            _ => uri.clone(),
        };
        let response = match taken.sender.try_send_request(request).await {
            Ok(response) => response,
            Err(mut failed) => match failed.take_message() {
                // Never written: another connection takes it.
                Some(unsent) if attempts <= MAX_RESENDS => {
                    request = unsent;
                    continue;
                }
                Some(_) => {
                    return Err(Failure {
                        error: Error::Transient {
                            message: format!("{method} {path}: {}", describe(failed.error())),
                        },
                        resend: Some(Resend::NotSent),
                    });
                }
                None => return Err(sending_failed(failed.error(), method, path, lost)),
            },
        };
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| lost(format!("{method} {path}: reading the response: {e}")))?
            .to_bytes();
        http.pool.put_back(taken);
        return Ok((parts.status, parts.headers, body));
    }
}

/// No connection could be had to `uri`'s host and port, named in the
/// error. The proxy's refusal and a server certificate that is not trusted
/// are configuration errors (sending again cannot help); anything else
/// (refused, unreachable, a handshake cut short) is transient.
fn connect_failed(error: ConnectError, method: &Method, path: &str, uri: &http::Uri) -> Failure {
    let error: Box<dyn std::error::Error + Send + Sync> = match error {
        ConnectError::Connect(error) => error,
        ConnectError::Handshake(error) => Box::new(error),
    };
    let error: &(dyn std::error::Error + 'static) = error.as_ref();
    let at = uri.authority().map_or("", http::uri::Authority::as_str);
    if let Some(refused) = crate::net::find_in_chain::<ProxyRefused>(error) {
        return Error::Configuration {
            message: format!("{method} {path}: {refused}"),
        }
        .into();
    }
    if let Some(rustls::Error::InvalidCertificate(certificate)) =
        crate::net::find_in_chain::<rustls::Error>(error)
    {
        return Error::Configuration {
            message: format!(
                "{method} {path}: the certificate of {at} is not trusted ({certificate:?}); \
                 trust the authority that signed it with `CaCertificate=<PEM file>` in the \
                 connection string or `Trust::with_pem` in the options (the authority's own \
                 certificate, not the server's), or the machine's authorities with \
                 `TrustPlatformRoots=true` (`Trust::with_platform_roots`)"
            ),
        }
        .into();
    }
    Error::Transient {
        message: format!(
            "{method} {path}: cannot connect to {at}: {}",
            describe(error)
        ),
    }
    .into()
}

/// A request that failed once written (or as it was being written): not
/// sent at all when the connection refused its first byte (sent again at
/// once), else lost on the way (unknown for a write).
fn sending_failed(
    error: &hyper::Error,
    method: &Method,
    path: &str,
    lost: impl Fn(String) -> Error,
) -> Failure {
    let message = format!("{method} {path}: {}", describe(error));
    if error.is_canceled() || crate::net::find_in_chain::<NotSent>(error).is_some() {
        return Failure {
            error: Error::Transient { message },
            resend: Some(Resend::NotSent),
        };
    }
    lost(message).into()
}

/// How many times in a row an attempt that was not sent is sent again
/// before it counts as a failed attempt.
const MAX_RESENDS: u32 = 3;

/// Runs `attempt` until it succeeds, fails for good, or `retry` gives up.
///
/// An attempt that was never written, or whose token was refused, is sent
/// again at once (a few times) without counting against the policy. With
/// `secondary` (reads of an account with read-access geo-redundant
/// storage), an attempt after a transient failure goes to the secondary
/// endpoint, and back to the primary after a failure there; a "not found"
/// from the secondary (a write not yet replicated) sends the rest to the
/// primary alone.
///
/// Each attempt runs in a `tablekit.attempt` span (see
/// [`tablekit::telemetry`]), a child of the caller's storage span; each
/// retry, and each throttled answer, is an event there, and counted in the
/// metrics of `system` (`db.system.name`).
pub(crate) async fn with_retries<T, F, Fut>(
    system: &'static str,
    retry: &RetryPolicy,
    idempotence: Idempotence,
    method: &Method,
    secondary: bool,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut(Route) -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut number = 1;
    let mut resends = 0;
    // Requests sent before this one: `http.request.resend_count`.
    let mut sent = 0;
    let mut refused_once = false;
    let mut route = Route::default();
    let mut secondary = secondary;
    // The primary's last failure: the answer when the secondary has not
    // seen the row yet.
    let mut primary_failure: Option<Error> = None;
    loop {
        let span = attempt_span(method, sent, route);
        let outcome = if span.is_disabled() {
            attempt(route).await
        } else {
            attempt(route).instrument(span.clone()).await
        };
        sent += 1;
        let failure = match outcome {
            Ok(value) => return Ok(value),
            Err(failure) => failure,
        };
        if !span.is_disabled() {
            span.record("otel.status_code", "error");
            span.record("error.type", failure.error.error_type());
        }
        match failure.resend {
            Some(Resend::NotSent) if resends < MAX_RESENDS => {
                resends += 1;
                tablekit_core::telemetry::retry(system, "not_sent", number, Duration::ZERO);
                continue;
            }
            Some(Resend::Unauthorized) if !refused_once => {
                refused_once = true;
                tablekit_core::telemetry::retry(system, "token_refused", number, Duration::ZERO);
                continue;
            }
            _ => {}
        }
        let error = failure.error;
        // Not replicated yet: the primary has the last word, never the
        // secondary's "not found".
        if route.secondary && is_not_found(&error) {
            secondary = false;
            route = Route::default();
            if number < retry.max_attempts {
                tablekit_core::telemetry::retry(system, "not_replicated", number, Duration::ZERO);
                number += 1;
                continue;
            }
            return Err(primary_failure.unwrap_or(error));
        }
        if retry.should_retry(number, idempotence, &error) {
            let was_secondary = route.secondary;
            let (next, wait, retry_after) = next_attempt(retry, number, &error, secondary, route);
            route = next;
            if matches!(error, Error::Throttled { .. }) {
                tablekit_core::telemetry::throttled(system, wait, retry_after);
            }
            tablekit_core::telemetry::retry(system, retry_reason(&error), number, wait);
            if !was_secondary {
                primary_failure = Some(error);
            }
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            number += 1;
            resends = 0;
            continue;
        }
        if matches!(error, Error::Throttled { .. }) {
            tablekit_core::telemetry::throttled(system, Duration::ZERO, None);
        }
        return Err(error);
    }
}

/// Where and after how long the next attempt goes after `error`, and the
/// `Retry-After` the answer gave: the endpoints alternate while the primary
/// fails, and the other region, which has not seen this failure, is tried
/// at once.
fn next_attempt(
    retry: &RetryPolicy,
    number: u32,
    error: &Error,
    secondary: bool,
    route: Route,
) -> (Route, Duration, Option<Duration>) {
    let retry_after = match error {
        Error::Throttled { retry_after } => *retry_after,
        _ => None,
    };
    let next = Route {
        secondary: secondary && !route.secondary,
    };
    let wait = if next.secondary {
        Duration::ZERO
    } else {
        retry.delay(number, fastrand::f64(), retry_after)
    };
    (next, wait, retry_after)
}

/// The span of one HTTP attempt: `tablekit.attempt`, a CLIENT span named
/// after the method. The request's answer records its status and ids.
fn attempt_span(method: &Method, sent: u32, route: Route) -> tracing::Span {
    let span = tracing::info_span!(
        target: "tablekit",
        "tablekit.attempt",
        otel.name = method.as_str(),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        http.request.method = method.as_str(),
        http.request.resend_count = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        az.client_request_id = tracing::field::Empty,
        az.service_request_id = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        tablekit.secondary = route.secondary,
    );
    if sent > 0 {
        span.record("http.request.resend_count", i64::from(sent));
    }
    span
}

/// Why an attempt is sent again, as the `retry` event and metric name it.
fn retry_reason(error: &Error) -> &'static str {
    match error {
        Error::Throttled { .. } => "throttled",
        Error::OutcomeUnknown { .. } => "outcome_unknown",
        _ => "transient",
    }
}

fn is_not_found(error: &Error) -> bool {
    matches!(
        error,
        Error::EntityNotFound { .. } | Error::TableNotFound { .. } | Error::BlobNotFound { .. }
    )
}

/// How a client signs its requests: with the account key (each service
/// builds its own string to sign), with a SAS in the URL, or with a token.
#[derive(Debug)]
pub(crate) enum Signing {
    Key(crate::auth::Signer),
    Sas,
    Token(crate::credential::TokenCache),
}

impl Signing {
    /// The signing of `credentials` for the service at `endpoint`.
    pub(crate) fn new(
        credentials: &Credentials,
        endpoint: &str,
        options: &ClientOptions,
    ) -> Result<Signing, ConfigError> {
        Ok(match credentials {
            Credentials::SharedKey { key } => Signing::Key(crate::auth::Signer::new(key)),
            Credentials::Sas(_) => Signing::Sas,
            Credentials::Token(credential) => {
                // A token sent in the clear could be replayed by anyone on
                // the way; the services refuse it over HTTP too.
                if !endpoint.starts_with("https://") {
                    return Err(ConfigError::BadValue {
                        key: "endpoint".into(),
                        value: format!(
                            "{endpoint} (a token credential needs an https:// endpoint)"
                        ),
                    });
                }
                let scope = options
                    .token_scope
                    .clone()
                    .unwrap_or_else(|| crate::credential::scope_for(endpoint).to_owned());
                Signing::Token(crate::credential::TokenCache::new(
                    credential.clone(),
                    scope,
                ))
            }
        })
    }

    /// The account key's signer, for Shared Key.
    pub(crate) fn signer(&self) -> Option<&crate::auth::Signer> {
        match self {
            Signing::Key(signer) => Some(signer),
            _ => None,
        }
    }

    /// The `Authorization: Bearer` value to send now, for a token.
    pub(crate) async fn bearer(&self) -> Result<Option<HeaderValue>, Failure> {
        match self {
            Signing::Token(cache) => Ok(Some(cache.header().await?)),
            _ => Ok(None),
        }
    }

    /// `failure` of a request that carried `sent`: a refusal of the token
    /// (401, or the emulator's 403 `AuthenticationFailed`) drops it and is
    /// sent again once with a new one.
    pub(crate) fn after_failure(&self, failure: Failure, sent: Option<&HeaderValue>) -> Failure {
        let (Signing::Token(cache), Some(sent)) = (self, sent) else {
            return failure;
        };
        let refused = match &failure.error {
            Error::Service { status: 401, .. } => true,
            Error::Service {
                status: 403, code, ..
            } => code == "AuthenticationFailed" || code == "InvalidAuthenticationInfo",
            _ => false,
        };
        if !refused {
            return failure;
        }
        cache.refused(sent);
        Failure {
            error: Error::Credential {
                message: format!("the service refused the token: {}", failure.error),
            },
            resend: Some(Resend::Unauthorized),
        }
    }
}

/// What a client's store is, for tablekit's spans and metrics: `system`
/// (`db.system.name`) of `account`, at the endpoint's host and port.
pub(crate) fn store_info(
    system: &'static str,
    account: &str,
    endpoint: &str,
    provider: &'static str,
) -> tablekit_core::telemetry::StoreInfo {
    let uri = endpoint.parse::<http::Uri>().ok();
    let host = uri.as_ref().and_then(http::Uri::host).unwrap_or_default();
    let port = uri
        .as_ref()
        .and_then(|u| {
            u.port_u16().or_else(|| {
                Some(if u.scheme_str() == Some("http") {
                    80
                } else {
                    443
                })
            })
        })
        .unwrap_or(443);
    tablekit_core::telemetry::StoreInfo::remote(system, account, host, port).with_provider(provider)
}
