//! The accept loop: what `axum::serve` does, plus the bounds a public server
//! needs against slow, idle or numerous clients (`ClientLimits`):
//! - at most `max_connections` connections are served at once; the next
//!   client waits in the listen backlog until one closes;
//! - a client must send a request's headers within `header_read_timeout`
//!   of connecting or of its previous answer, so a silent or idle keep-alive
//!   connection is closed too;
//! - on shutdown, in-flight requests get `shutdown_grace` to finish; the
//!   connections still open then are closed.
//!
//! HTTP/1.1 only: Warden sits behind a TLS-terminating proxy or is called by
//! servers, and hyper's version sniffing (for cleartext HTTP/2) would wait for
//! a first byte with no deadline at all.
//!
//! Each request carries its peer address as `ConnectInfo<SocketAddr>`.

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

/// The connection-level bounds, from `ClientLimits`.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub shutdown_grace: Duration,
}

impl From<&crate::cli::ClientLimits> for ConnectionLimits {
    fn from(limits: &crate::cli::ClientLimits) -> Self {
        ConnectionLimits {
            max_connections: limits.max_connections.max(1),
            header_read_timeout: Duration::from_millis(limits.header_read_timeout_ms),
            shutdown_grace: Duration::from_millis(limits.shutdown_grace_ms),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (closing_tx, closing_rx) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    pause_after_accept_error(&err).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = router
            .clone()
            .map_request(move |mut request: hyper::Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request.map(axum::body::Body::new)
            });
        let mut closing = closing_rx.clone();
        tokio::spawn(async move {
            let builder = connection_builder(limits);
            let connection =
                builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
            let mut connection = std::pin::pin!(connection);
            loop {
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(err) = result {
                            tracing::debug!(%peer, error = %err, "connection ended with an error");
                        }
                        break;
                    }
                    _ = closing.changed() => connection.as_mut().graceful_shutdown(),
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    let open = limits.max_connections - slots.available_permits();
    if open > 0 {
        tracing::info!(open, "waiting for open connections to finish");
    }
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.shutdown_grace, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            grace_ms = limits.shutdown_grace.as_millis() as u64,
            "shutdown grace elapsed; closing the connections still open"
        );
    }
    Ok(())
}

fn connection_builder(limits: ConnectionLimits) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
}

/// Accept errors on one connection (reset before accept) are skipped; errors
/// of the listener itself (out of file descriptors) pause a little, as
/// `axum::serve` does, instead of spinning.
async fn pause_after_accept_error(err: &std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(
        err.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %err, "accept failed; retrying in one second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
