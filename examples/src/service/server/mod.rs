//! Serving the router over TCP with the limits a public listener needs:
//! a header-read timeout (which also closes keep-alive connections left
//! idle), a cap on open connections, and a shutdown with a deadline.
//!
//! `axum::serve` has none of these knobs, so each connection is served by
//! hyper's HTTP/1 server directly, with tokio's timer. The answers hyper
//! gives by itself, to a request it cannot read, are made JSON like the
//! service's own (`answers`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

mod answers;

/// The limits of [`serve`].
#[derive(Debug, Clone, Copy)]
pub struct ServeConfig {
    /// How long a client may take to send a request's headers, and how long
    /// a keep-alive connection may stay idle before it is closed (10 s).
    pub header_read_timeout: Duration,
    /// The most connections open at once; one more is closed as soon as it
    /// is accepted (4,096).
    pub max_connections: usize,
    /// How long requests under way may take to finish once shutdown starts;
    /// connections still open after it are closed (10 s).
    pub shutdown_deadline: Duration,
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 4096,
            shutdown_deadline: Duration::from_secs(10),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes; then stops
/// accepting, lets the requests under way finish until the deadline, and
/// closes what is left. Accept errors (too many open files) are logged and
/// retried after a pause.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
    config: ServeConfig,
) {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let permits = Arc::new(tokio::sync::Semaphore::new(config.max_connections));
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        while connections.try_join_next().is_some() {}
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::warn!(
                max = config.max_connections,
                "too many open connections: one closed"
            );
            continue;
        };
        let (stream, service) = answers::watch(stream, router.clone());
        let mut stopped = stopped.clone();
        connections.spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            // Above the service's own limits (`http::request_limits`),
            // which say more; past these, the server answers by itself, and
            // `answers` makes that answer JSON too.
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(config.header_read_timeout)
                .max_headers(4 * super::http::MAX_HEADERS)
                .max_header_size(4 * (super::http::MAX_URI + super::http::MAX_HEADER_BYTES));
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = async { let _ = stopped.wait_for(|stop| *stop).await; } => {
                    // Finish the request under way, then close.
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    let _ = stop.send(true);
    let drained = tokio::time::timeout(config.shutdown_deadline, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "shutdown deadline passed: closing the connections left"
        );
        connections.shutdown().await;
    }
}
