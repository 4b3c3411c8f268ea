//! Connections: through a proxy or not, whom TLS trusts, and connections
//! that are never written to once the server may have closed them.
//!
//! hyper's pooled client opens connections through [`Connector`], which
//! goes through an HTTP proxy where [`Proxy`](crate::config::Proxy) says so
//! (a CONNECT tunnel for `https://`, the proxy's absolute-form for
//! `http://`), and hands hyper each connection wrapped in [`Watched`].
//!
//! [`Watched`] is written here because no crate does it: before the first
//! byte of a request goes onto a connection that has been idle, it checks
//! that the server has not closed it meanwhile (a zero-length peek: the
//! server's FIN or TLS alert is already there) and that it has not been idle
//! longer than the server said it keeps connections (`Keep-Alive:
//! timeout=`). Either way it fails the write before a byte is sent, with
//! [`NotSent`], and the request is sent again on another connection,
//! whatever its method: it provably never reached the server.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use http::Uri;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower_service::Service;

use crate::config::{ConfigError, Proxy, Trust};

/// A connection idle this long is checked before a request is written to
/// it; a busy connection (reused within this time) is not.
const PEEK_AFTER: Duration = Duration::from_millis(50);

/// A request was not written: the connection it was given had been closed
/// by the server, or had been idle past the server's keep-alive. Sending it
/// again is safe for every method.
#[derive(Debug)]
pub(crate) struct NotSent(pub(crate) &'static str);

impl fmt::Display for NotSent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not sent: {}", self.0)
    }
}

impl std::error::Error for NotSent {}

/// The proxy refused to open a tunnel (or could not be reached): a clear
/// error that is not retried as a flaky network would be.
#[derive(Debug)]
pub(crate) struct ProxyRefused(pub(crate) String);

impl fmt::Display for ProxyRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProxyRefused {}

/// Walks an error's sources for one of type `E`, looking inside
/// `io::Error`s (whose `source` skips the error they carry).
pub(crate) fn find_in_chain<'a, E: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a E> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<E>() {
            return Some(found);
        }
        if let Some(inner) = error
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            && let Some(found) = find_in_chain::<E>(inner)
        {
            return Some(found);
        }
        next = error.source();
    }
    None
}

/// What the connections of one client learn about their servers.
#[derive(Debug)]
pub(crate) struct Learned {
    /// The shortest idle time after which a server closes a connection, in
    /// milliseconds: announced (`Keep-Alive: timeout=`) or seen (a
    /// connection reused after this long was closed under its request).
    /// `u64::MAX` while unknown.
    server_idle_ms: AtomicU64,
}

impl Default for Learned {
    fn default() -> Learned {
        Learned {
            server_idle_ms: AtomicU64::new(u64::MAX),
        }
    }
}

impl Learned {
    /// A server keeps idle connections for `idle`.
    pub(crate) fn server_keeps(&self, idle: Duration) {
        let ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX).max(1);
        self.server_idle_ms.fetch_min(ms, Ordering::Relaxed);
    }

    /// A server closed a connection that had been idle for `idle`: it
    /// keeps them no longer than that. A close after less than a second
    /// teaches nothing (a restart, a one-off), so that connections are never
    /// given up after a few milliseconds for good.
    fn closed_after(&self, idle: Duration) {
        if idle >= Duration::from_secs(1) {
            self.server_keeps(idle);
        }
    }

    /// Reads a `Keep-Alive` header (`timeout=5, max=1000`).
    pub(crate) fn keep_alive_header(&self, value: &str) {
        if let Some(seconds) = keep_alive_timeout(value).filter(|s| *s > 0) {
            self.server_keeps(Duration::from_secs(seconds));
        }
    }

    /// How long a connection may stay idle and still be written to: a
    /// quarter below what the server keeps (a second below, past four
    /// seconds), so a request never meets the server's close on the way.
    pub(crate) fn usable_idle(&self) -> Option<Duration> {
        let ms = self.server_idle_ms.load(Ordering::Relaxed);
        if ms == u64::MAX {
            return None;
        }
        let keeps = Duration::from_millis(ms);
        let margin = (keeps / 4).min(Duration::from_secs(1));
        Some(keeps - margin)
    }
}

/// The `timeout` of a `Keep-Alive` header (`timeout=5, max=1000`), read
/// byte by byte: every answer of a Node.js server carries one, so it is
/// read on every request.
fn keep_alive_timeout(value: &str) -> Option<u64> {
    value.as_bytes().split(|&b| b == b',').find_map(|part| {
        let eq = part.iter().position(|&b| b == b'=')?;
        if !part[..eq].trim_ascii().eq_ignore_ascii_case(b"timeout") {
            return None;
        }
        let digits = part[eq + 1..].trim_ascii();
        // At most 19 digits: no overflow.
        if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(digits.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
    })
}

/// Opens connections: directly, or through the proxy the matcher names.
#[derive(Clone)]
pub(crate) struct Connector {
    tcp: HttpConnector,
    proxy: Option<Arc<Matcher>>,
    learned: Arc<Learned>,
}

impl Connector {
    pub(crate) fn new(
        tcp: HttpConnector,
        proxy: Option<Arc<Matcher>>,
        learned: Arc<Learned>,
    ) -> Connector {
        Connector {
            tcp,
            proxy,
            learned,
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Service<Uri> for Connector {
    type Response = Conn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let intercept = self.proxy.as_ref().and_then(|m| m.intercept(&dst));
        let mut tcp = self.tcp.clone();
        let learned = self.learned.clone();
        Box::pin(async move {
            let Some(proxy) = intercept else {
                let io = tcp.call(dst).await?;
                return Ok(Conn::new(io.into_inner(), false, learned));
            };
            let proxy_uri = proxy.uri().clone();
            if dst.scheme() == Some(&http::uri::Scheme::HTTPS) {
                let mut tunnel = Tunnel::new(proxy_uri.clone(), tcp);
                if let Some(auth) = proxy.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                std::future::poll_fn(|cx| tunnel.poll_ready(cx))
                    .await
                    .map_err(|e| tunnel_failed(&proxy_uri, &dst, &e))?;
                let io = tunnel
                    .call(dst.clone())
                    .await
                    .map_err(|e| tunnel_failed(&proxy_uri, &dst, &e))?;
                return Ok(Conn::new(io.into_inner(), false, learned));
            }
            let io = tcp
                .call(proxy_uri.clone())
                .await
                .map_err(|e| unreachable_proxy(&proxy_uri, &e))?;
            Ok(Conn::new(io.into_inner(), true, learned))
        })
    }
}

/// A tunnel that could not be opened: the proxy said no (its answer is an
/// error without a source: no tunnel, or credentials wanted), or it could
/// not be reached (an I/O error below).
fn tunnel_failed(proxy: &Uri, dst: &Uri, error: &(dyn std::error::Error + 'static)) -> BoxError {
    if error.source().is_some() {
        return unreachable_proxy(proxy, error);
    }
    let host = dst.host().unwrap_or_default();
    let port = dst.port_u16().unwrap_or(443);
    Box::new(ProxyRefused(format!(
        "the proxy {} refused to open a tunnel to {host}:{port} ({error})",
        shown(proxy)
    )))
}

fn unreachable_proxy(proxy: &Uri, error: &(dyn std::error::Error + 'static)) -> BoxError {
    Box::new(io::Error::other(format!(
        "the proxy {} could not be reached: {error}",
        shown(proxy)
    )))
}

/// A proxy's address without its credentials.
fn shown(proxy: &Uri) -> String {
    let host = proxy.host().unwrap_or_default();
    match proxy.port_u16() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// The proxy settings as hyper-util's matcher, or `None` for none.
pub(crate) fn matcher(proxy: &Proxy) -> Result<Option<Arc<Matcher>>, ConfigError> {
    let matcher = match proxy {
        Proxy::Disabled => return Ok(None),
        Proxy::Environment => {
            let set = [
                "HTTPS_PROXY",
                "https_proxy",
                "HTTP_PROXY",
                "http_proxy",
                "ALL_PROXY",
                "all_proxy",
            ]
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
            if !set {
                return Ok(None);
            }
            Matcher::from_env()
        }
        Proxy::Url { url, no_proxy } => {
            let parsed: Uri = url.parse().map_err(|_| ConfigError::BadValue {
                key: "Proxy".into(),
                value: url.clone(),
            })?;
            if parsed.scheme_str() != Some("http") || parsed.host().is_none() {
                return Err(ConfigError::BadValue {
                    key: "Proxy".into(),
                    value: format!("{url} (an http:// proxy URL is needed)"),
                });
            }
            Matcher::builder()
                .all(url.clone())
                .no(no_proxy.clone())
                .build()
        }
    };
    Ok(Some(Arc::new(matcher)))
}

/// The TLS configuration `trust` describes.
pub(crate) fn tls_config(trust: &Trust) -> Result<rustls::ClientConfig, ConfigError> {
    let mut roots = rustls::RootCertStore::empty();
    if trust.mozilla_roots {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    if trust.platform_roots {
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            return Err(ConfigError::BadValue {
                key: "TrustPlatformRoots".into(),
                value: format!(
                    "true (no certificate found in this system's trust store: {:?})",
                    found.errors
                ),
            });
        }
        // Certificates the platform lists but rustls cannot use are left
        // out, as browsers do.
        roots.add_parsable_certificates(found.certs);
    }
    for certificate in &trust.extra {
        roots
            .add(certificate.clone())
            .map_err(|e| ConfigError::BadValue {
                key: "CaCertificate".into(),
                value: format!("a certificate that cannot be a trust anchor: {e}"),
            })?;
    }
    if roots.is_empty() {
        return Err(ConfigError::BadValue {
            key: "trust".into(),
            value: "nothing (no root certificate is trusted)".into(),
        });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::BadValue {
            key: "tls".into(),
            value: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// A connection as hyper sees it: [`Watched`], and whether it goes to a
/// proxy that wants requests in absolute form.
pub(crate) struct Conn {
    io: TokioIo<Watched>,
    proxied: bool,
}

impl Conn {
    fn new(tcp: TcpStream, proxied: bool, learned: Arc<Learned>) -> Conn {
        Conn {
            io: TokioIo::new(Watched {
                tcp,
                learned,
                last_activity: Instant::now(),
                in_request: false,
                idle_before_request: Duration::ZERO,
            }),
            proxied,
        }
    }
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        Connected::new().proxy(self.proxied)
    }
}

impl hyper::rt::Read for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// A TCP connection that knows when it was last active and refuses to
/// start a request on a connection the server has let go.
pub(crate) struct Watched {
    tcp: TcpStream,
    learned: Arc<Learned>,
    /// When a byte last came in (or the connection opened).
    last_activity: Instant,
    /// A request is being written or answered: bytes went out since the
    /// last ones came in.
    in_request: bool,
    /// How long the connection was idle before the current request.
    idle_before_request: Duration,
}

impl Watched {
    /// Called before the first byte of a request: `Err` when it must not
    /// be written here.
    fn check_before_request(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let idle = self.last_activity.elapsed();
        self.idle_before_request = idle;
        if self
            .learned
            .usable_idle()
            .is_some_and(|usable| idle > usable)
        {
            return Err(io::Error::other(NotSent(
                "the connection was idle past the server's keep-alive",
            )));
        }
        if idle < PEEK_AFTER {
            return Ok(());
        }
        let mut byte = [0u8; 1];
        let mut peek = ReadBuf::new(&mut byte);
        let why = match self.tcp.poll_peek(cx, &mut peek) {
            Poll::Pending => return Ok(()),
            Poll::Ready(Ok(0)) => "the server had closed the idle connection",
            // An idle HTTP/1.1 connection gets data only as its server
            // closes it (a TLS alert, a 408).
            Poll::Ready(Ok(_)) => "the server was closing the idle connection",
            Poll::Ready(Err(_)) => "the idle connection had been reset",
        };
        self.learned.closed_after(idle);
        Err(io::Error::other(NotSent(why)))
    }

    fn before_write(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if !self.in_request {
            self.check_before_request(cx)?;
            self.in_request = true;
        }
        Ok(())
    }

    /// A read ended: `Some(n)` bytes (0 at the end), or `None` for an error.
    fn after_read(&mut self, read: Option<usize>) {
        match read {
            Some(n) if n > 0 => {
                self.last_activity = Instant::now();
                self.in_request = false;
            }
            // Closed under a request after an idle time: the server closes
            // connections idle that long; use them for less from now on.
            _ if self.in_request => self.learned.closed_after(self.idle_before_request),
            _ => {}
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let outcome = ready!(Pin::new(&mut self.tcp).poll_read(cx, buf));
        let read = outcome.as_ref().ok().map(|()| buf.filled().len() - before);
        self.after_read(read);
        Poll::Ready(outcome)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.before_write(cx)?;
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.before_write(cx)?;
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_alive_timeouts_are_read_as_the_header_says() {
        for (value, timeout) in [
            ("timeout=5", Some(5)),
            ("timeout=5, max=1000", Some(5)),
            ("max=3, Timeout = 1", Some(1)),
            (" TIMEOUT=7 ", Some(7)),
            ("timeout=x, timeout=9", Some(9)),
            ("timeout=", None),
            ("timeout=-1", None),
            ("timeout=1.5", None),
            ("timeout=99999999999999999999", None),
            (
                "timeout=9999999999999999999",
                Some(9_999_999_999_999_999_999),
            ),
            ("timeouts=5", None),
            ("max=5", None),
            ("", None),
            ("=", None),
            ("timeout=٣", None),
        ] {
            assert_eq!(keep_alive_timeout(value), timeout, "{value:?}");
        }
    }

    #[test]
    fn keep_alive_is_read_and_kept_short() {
        let learned = Learned::default();
        assert_eq!(learned.usable_idle(), None);
        learned.keep_alive_header("timeout=5, max=100");
        assert_eq!(learned.usable_idle(), Some(Duration::from_secs(4)));
        learned.keep_alive_header("max=3, Timeout = 1");
        assert_eq!(learned.usable_idle(), Some(Duration::from_millis(750)));
        // A longer timeout, or nonsense, does not lengthen it.
        for ignored in ["timeout=60", "timeout=0", "timeout=x", "max=1", ""] {
            learned.keep_alive_header(ignored);
        }
        assert_eq!(learned.usable_idle(), Some(Duration::from_millis(750)));
    }

    #[test]
    fn errors_are_found_inside_io_errors() {
        let io = io::Error::other(NotSent("x"));
        let wrapped: Box<dyn std::error::Error + 'static> = Box::new(io);
        assert_eq!(
            find_in_chain::<NotSent>(wrapped.as_ref()).map(|n| n.0),
            Some("x")
        );
        let other = io::Error::other("plain");
        assert!(find_in_chain::<NotSent>(&other).is_none());
    }
}
