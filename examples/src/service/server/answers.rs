//! The HTTP server's own answers, in JSON like every other.
//!
//! hyper answers a request it cannot read (a malformed request line or
//! header, a target or header block past its limits) by itself, before any
//! service code runs: an empty 400, 414 or 431 without `nosniff`. It has no
//! hook for that answer, so the connection's outgoing bytes are watched
//! here, and that answer is replaced. No crate does this; it is written by
//! hand, and reads no byte of the service's own answers.
//!
//! **How an answer of hyper's own is told apart.** hyper writes one only
//! when no other answer is being written (its writer is idle), which means
//! every earlier answer has been handed to the socket and flushed, and only
//! for a request the service was never called with. So each connection
//! counts the requests passed to the service and the exchanges that ended
//! (hyper drops an answer's body as soon as the body's end is in its write
//! buffer; a dropped request ends one too). A flush when the two counts are
//! equal is a boundary between answers. The first write after a boundary,
//! when no request was passed to the service since, is hyper's own answer: it is replaced by a JSON
//! answer with the same status that closes the connection (hyper closes it
//! after such an answer anyway), and whatever hyper writes after it is
//! dropped.

use std::convert::Infallible;
use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::super::http::{MAX_HEADER_BYTES, MAX_HEADERS, MAX_URI};

/// The requests one connection passed to the service, and the exchanges
/// that ended.
#[derive(Debug, Default)]
struct Exchanges {
    called: AtomicU64,
    ended: AtomicU64,
}

impl Exchanges {
    /// The requests passed to the service, if every exchange has ended.
    fn idle(&self) -> Option<u64> {
        let called = self.called.load(Ordering::Acquire);
        (called == self.ended.load(Ordering::Acquire)).then_some(called)
    }
}

/// One request passed to the service; ends when dropped (with its future,
/// or with its answer's body).
struct Exchange(Arc<Exchanges>);

impl Drop for Exchange {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Ordering::AcqRel);
    }
}

/// Wraps `io` and `router` for one connection: the stream that replaces
/// hyper's own answers, and the service to give hyper.
pub(super) fn watch<S>(io: S, router: Router) -> (Watched<S>, Counted) {
    let exchanges = Arc::new(Exchanges::default());
    let service = Counted {
        inner: TowerToHyperService::new(router),
        exchanges: Arc::clone(&exchanges),
    };
    let watched = Watched {
        io,
        exchanges,
        state: State::Boundary,
        seen: 0,
        replacement: Vec::new(),
        sent: 0,
    };
    (watched, service)
}

/// The router as hyper calls it, counting each request passed to it and
/// each exchange that ends.
pub(super) struct Counted {
    inner: TowerToHyperService<Router>,
    exchanges: Arc<Exchanges>,
}

impl hyper::service::Service<Request<Incoming>> for Counted {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.exchanges.called.fetch_add(1, Ordering::AcqRel);
        let exchange = Exchange(Arc::clone(&self.exchanges));
        let answer = hyper::service::Service::call(&self.inner, request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| {
                // The exchange ends when hyper drops the body.
                Body::new(body.map_frame(move |frame| {
                    let _ = &exchange;
                    frame
                }))
            }))
        })
    }
}

/// Where the outgoing bytes stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between answers: every byte written so far is flushed, and no
    /// exchange is under way.
    Boundary,
    /// Inside the service's answers.
    Answering,
    /// hyper's own answer was replaced; the connection is closing.
    Replaced,
}

/// A connection's stream that replaces the server's own answers (see the
/// module's docs).
#[derive(Debug)]
pub(super) struct Watched<S> {
    io: S,
    exchanges: Arc<Exchanges>,
    state: State,
    /// The requests passed to the service at the last boundary.
    seen: u64,
    replacement: Vec<u8>,
    sent: usize,
}

impl<S: AsyncWrite + Unpin> Watched<S> {
    /// Takes `bufs` (all of them, as written) and sends them on, or
    /// replaces them if they are hyper's own answer.
    fn write_slices(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if self.state == State::Boundary && total > 0 {
            // A request passed to the service since the boundary is the
            // one being answered (its body may have ended already).
            if self.exchanges.called.load(Ordering::Acquire) == self.seen {
                let head: Vec<u8> = bufs
                    .iter()
                    .flat_map(|b| b.iter().copied())
                    .take(12)
                    .collect();
                self.replacement = replacement(status_of(&head));
                self.state = State::Replaced;
            } else {
                self.state = State::Answering;
            }
        }
        if self.state == State::Replaced {
            // hyper's bytes are dropped; the replacement goes out now, or
            // what is left of it on the next flush.
            if let Poll::Ready(Err(error)) = self.poll_replacement(cx) {
                return Poll::Ready(Err(error));
            }
            return Poll::Ready(Ok(total));
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    /// Writes what is left of the replacement.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.replacement.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.replacement[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.state == State::Replaced {
            // The replacement said `connection: close`: nothing more is read.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write_slices(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.write_slices(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_replacement(cx))?;
        ready!(Pin::new(&mut self.io).poll_flush(cx))?;
        // hyper flushes only once its write buffer is empty: if every
        // exchange has ended too, the next answer starts afresh.
        if self.state == State::Answering
            && let Some(called) = self.exchanges.idle()
        {
            self.state = State::Boundary;
            self.seen = called;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_replacement(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The status of an answer's first bytes (`HTTP/1.1 400 …`); 400 if they
/// are not one.
fn status_of(head: &[u8]) -> StatusCode {
    head.get(9..12)
        .and_then(|code| StatusCode::from_bytes(code).ok())
        .unwrap_or(StatusCode::BAD_REQUEST)
}

/// The JSON answer that replaces the server's own answer with `status`.
fn replacement(status: StatusCode) -> Vec<u8> {
    let (code, message) = match status {
        StatusCode::URI_TOO_LONG => (
            "uri_too_long",
            format!("the request's path and query are too long; the limit is {MAX_URI} bytes"),
        ),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            "headers_too_large",
            format!(
                "the request's headers are too large; the limits are {MAX_HEADERS} fields and {MAX_HEADER_BYTES} bytes"
            ),
        ),
        StatusCode::BAD_REQUEST => (
            "invalid_input",
            "the request is not HTTP/1.1 this server can read: its request line or a header is malformed".to_owned(),
        ),
        other => super::super::error::generic_error(other),
    };
    let body = serde_json::json!({ "error": code, "message": message }).to_string();
    let reason = status.canonical_reason().unwrap_or("Error");
    format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\nx-content-type-options: nosniff\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        status.as_u16(),
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_read_from_the_status_line() {
        assert_eq!(
            status_of(b"HTTP/1.1 431 Req"),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
        assert_eq!(status_of(b"HTTP/1.1 414 URI"), StatusCode::URI_TOO_LONG);
        assert_eq!(status_of(b"HTTP/1.1"), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(b"garbage and more"), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn a_replacement_is_json_marked_nosniff_and_closes() {
        let answer = String::from_utf8(replacement(StatusCode::BAD_REQUEST)).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains("x-content-type-options: nosniff"), "{head}");
        assert!(head.contains("connection: close"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"], "invalid_input");
    }
}
