//! The HTTP/1.1 accept loop of `postmortem serve`, in place of `axum::serve`, which
//! exposes none of hyper's connection settings:
//!
//! - request headers must arrive within `header_timeout` (hyper's header read timeout; it
//!   also closes a keep-alive connection idle that long between requests);
//! - hyper's bounds on a request head (its read buffer and field count) are set above the
//!   limits that `api::limits` checks, so that an oversized head is answered by that layer
//!   as a problem+json 431 (the memory this costs is stated there); only a head past
//!   hyper's bounds gets hyper's empty 431;
//! - at most `max_connections` connections are served at once; past that the loop stops
//!   accepting, so further clients wait in the listen backlog instead of exhausting file
//!   descriptors, and are taken as soon as a connection ends (idle ones end by the header
//!   timeout, so a flood of idle connections delays `/healthz` by seconds, not forever);
//! - on shutdown the loop stops accepting and the connections in flight finish their
//!   requests, for at most [`GRACE`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Longest wait for the requests in flight at shutdown.
pub const GRACE: Duration = Duration::from_secs(30);

/// The connection settings.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets the connections in
/// flight finish (at most [`GRACE`]).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(crate::api::limits::WIRE_MAX_HEAD_BYTES)
        .max_headers(crate::api::limits::WIRE_MAX_HEADERS)
        .keep_alive(true);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was taken:
                    // try again shortly rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let conn =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "requests still in flight after {} s of shutdown were cut",
            GRACE.as_secs()
        );
    }
}
