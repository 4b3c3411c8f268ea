//! The connection pool: HTTP/1.1 connections kept open between requests,
//! one request on a connection at a time.
//!
//! Written here rather than taken from `hyper-util`'s pooled client:
//! `benches/request_path.rs` measured that client at 9 µs of client CPU per
//! request above hyper on one kept connection (44 against 35 µs per upsert
//! on Azurite), most of it a task it spawns per request to put the
//! connection back, and its checkout machinery. This pool is a list under a
//! lock: a request takes the connection last put back (the one least likely
//! to have been closed), and puts it back once its answer is read whole.
//! Connections idle past the timeout are closed when the pool is next used
//! (a client that sends nothing more leaves them to the server to close).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::Connection as _;
use tower_service::Service as _;

use crate::net::Connector;

type Sender = SendRequest<Full<Bytes>>;

/// A connection taken from the pool (or just opened) for one request.
pub(crate) struct Taken {
    pub(crate) sender: Sender,
    /// Where it goes: `scheme://authority`.
    key: String,
    /// It goes to a proxy that wants requests in absolute form.
    pub(crate) proxied: bool,
}

struct Idle {
    taken: Taken,
    since: Instant,
}

/// Connections to every host one client talks to.
pub(crate) struct Pool {
    connector: HttpsConnector<Connector>,
    idle: Mutex<Vec<Idle>>,
    /// How long a connection may wait in the pool.
    idle_timeout: Duration,
    /// How many connections wait in the pool at most.
    max_idle: usize,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("idle_timeout", &self.idle_timeout)
            .field("max_idle", &self.max_idle)
            .finish_non_exhaustive()
    }
}

/// Why no connection could be had.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// Opening it failed (connection refused, TLS, the proxy).
    Connect(Box<dyn std::error::Error + Send + Sync>),
    /// The HTTP handshake on it failed.
    Handshake(hyper::Error),
}

impl Pool {
    pub(crate) fn new(
        connector: HttpsConnector<Connector>,
        idle_timeout: Duration,
        max_idle: usize,
    ) -> Pool {
        Pool {
            connector,
            idle: Mutex::new(Vec::new()),
            idle_timeout,
            max_idle,
        }
    }

    /// A connection to `uri`'s host: the one last put back that is still
    /// open and not idle too long, or a new one.
    pub(crate) async fn take(&self, uri: &Uri) -> Result<Taken, ConnectError> {
        let key = key_of(uri);
        while let Some(mut taken) = self.pop(&key) {
            // Ready once its last answer has been read through; an error
            // means the server closed it meanwhile.
            if std::future::poll_fn(|cx| taken.sender.poll_ready(cx))
                .await
                .is_ok()
            {
                return Ok(taken);
            }
        }
        let io = self
            .connector
            .clone()
            .call(uri.clone())
            .await
            .map_err(ConnectError::Connect)?;
        let proxied = io.connected().is_proxied();
        let (sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(ConnectError::Handshake)?;
        // The connection runs until its sender is dropped or it fails.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Taken {
            sender,
            key,
            proxied,
        })
    }

    /// The last connection to `key` put back, dropping those too old.
    fn pop(&self, key: &str) -> Option<Taken> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        self.close_expired(&mut idle);
        let at = idle.iter().rposition(|i| i.taken.key == key)?;
        let found = idle.remove(at);
        Some(found.taken)
    }

    /// Closes the connections idle longer than the timeout (dropping a
    /// sender closes its connection). The oldest are first.
    fn close_expired(&self, idle: &mut Vec<Idle>) {
        let now = Instant::now();
        let expired = idle
            .iter()
            .take_while(|i| now.duration_since(i.since) > self.idle_timeout)
            .count();
        idle.drain(..expired);
    }

    /// Puts a connection back after its answer was read whole.
    pub(crate) fn put_back(&self, taken: Taken) {
        if taken.sender.is_closed() || self.max_idle == 0 {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        self.close_expired(&mut idle);
        if idle.len() >= self.max_idle {
            idle.remove(0);
        }
        idle.push(Idle {
            taken,
            since: Instant::now(),
        });
    }
}

/// `scheme://authority` of a URI: connections are kept per host.
fn key_of(uri: &Uri) -> String {
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_per_host() {
        let key = |u: &str| key_of(&u.parse().unwrap());
        assert_eq!(
            key("https://acme.table.core.windows.net/t?x=1"),
            "https://acme.table.core.windows.net"
        );
        assert_eq!(
            key("http://127.0.0.1:10002/devstoreaccount1/t"),
            "http://127.0.0.1:10002"
        );
    }
}
