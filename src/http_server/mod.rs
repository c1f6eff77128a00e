//! The accept loop: what `axum::serve` does, plus the bounds a public server
//! needs against slow, idle, greedy or numerous clients (`ClientLimits`):
//! - at most `max_connections` connections are served at once; the next
//!   client is accepted and waits (the ones after it in the listen backlog)
//!   until one closes. When a client has to wait, keep-alive ends for every
//!   connection: idle ones are closed at once and busy ones after their
//!   answer, so the wait is one answer long, not an idle limit long;
//! - one client (`client_address::ClientKey`: an IPv4 address, an IPv6 /64)
//!   holds at most `max_connections_per_client` (a `fair_share`); a
//!   connection beyond it is closed before anything is read from it. Behind
//!   a proxy every connection is the proxy's: the limit is then set to 0
//!   (off), since headers are not read yet when a connection is accepted;
//! - a client must send a request's headers within `header_read_timeout`
//!   of connecting or of its previous answer, so a silent or idle keep-alive
//!   connection is closed too; a request head larger than `max_header_bytes`
//!   is answered 431, and no connection buffers more than that;
//! - a write the client does not read for `write_timeout` closes the
//!   connection (`write_deadline`);
//! - a connection carries at most `max_requests` requests and lives at most
//!   `lifetime`: then its last answer says `connection: close`;
//! - on shutdown, in-flight requests get `shutdown_grace` to finish; the
//!   connections still open then are closed.
//!
//! HTTP/1.1 only: Warden sits behind a TLS-terminating proxy or is called by
//! servers, and hyper's version sniffing (for cleartext HTTP/2) would wait for
//! a first byte with no deadline at all.
//!
//! Each request carries its peer address as `ConnectInfo<SocketAddr>`.

pub mod metrics_listener;
mod write_deadline;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, header};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

use crate::client_address::ClientKey;
use crate::fair_share::{FairShare, Place};
use write_deadline::WriteDeadline;

/// The connection-level bounds, from `ClientLimits`.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    /// 0: no per-client limit.
    pub max_connections_per_client: usize,
    pub max_header_bytes: usize,
    pub header_read_timeout: Duration,
    pub write_timeout: Duration,
    pub max_requests: u64,
    pub lifetime: Duration,
    pub shutdown_grace: Duration,
}

impl From<&crate::cli::ClientLimits> for ConnectionLimits {
    fn from(limits: &crate::cli::ClientLimits) -> Self {
        ConnectionLimits {
            max_connections: limits.max_connections.max(1),
            max_connections_per_client: limits.max_connections_per_client,
            // hyper's own floor: it cannot parse with less.
            max_header_bytes: limits.max_header_bytes.max(8192),
            header_read_timeout: Duration::from_millis(limits.header_read_timeout_ms),
            write_timeout: Duration::from_millis(limits.write_timeout_ms.max(1)),
            max_requests: limits.max_requests_per_connection.max(1),
            lifetime: Duration::from_millis(limits.connection_lifetime_ms.max(1)),
            shutdown_grace: Duration::from_millis(limits.shutdown_grace_ms),
        }
    }
}

/// What every connection task watches: shutdown, and "a client is waiting
/// for a slot" (a change of `pressure` after the connection started ends
/// its keep-alive).
struct Signals {
    closing: watch::Receiver<bool>,
    pressure: watch::Receiver<u64>,
}

/// Serves `router` on `listener` until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let per_client = FairShare::new(limits.max_connections_per_client);
    let (closing_tx, _) = watch::channel(false);
    let (pressure_tx, _) = watch::channel(0u64);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
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
        let Some(client) = per_client.take(ClientKey::of(peer.ip())) else {
            // Dropping the stream closes it; nothing was read or spent.
            tracing::debug!(%peer, "connection refused: this client holds its share of connections");
            continue;
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                // A client is waiting: every connection's keep-alive ends.
                pressure_tx.send_modify(|generation| *generation += 1);
                tokio::select! {
                    slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
                    () = &mut shutdown => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_connection(
            stream,
            peer,
            router.clone(),
            limits,
            // Subscribed now: only what happens from here on concerns it.
            Signals {
                closing: closing_tx.subscribe(),
                pressure: pressure_tx.subscribe(),
            },
            (slot, client),
        ));
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

/// One connection, from its first byte to its close; `held` is given back
/// when it ends.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: ConnectionLimits,
    mut signals: Signals,
    held: (OwnedSemaphorePermit, Place<ClientKey>),
) {
    let _open = crate::metrics::connection_opened();
    let served = Arc::new(AtomicU64::new(0));
    let service = router
        .map_request({
            let served = served.clone();
            move |mut request: hyper::Request<Incoming>| {
                served.fetch_add(1, Ordering::Relaxed);
                request.extensions_mut().insert(ConnectInfo(peer));
                request.map(axum::body::Body::new)
            }
        })
        .map_response(move |mut response: axum::response::Response| {
            // HTTP/1.1 answers one request at a time: the count is this one's.
            if served.load(Ordering::Relaxed) >= limits.max_requests {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
        });
    let io = TokioIo::new(WriteDeadline::new(stream, limits.write_timeout));
    let builder = connection_builder(limits);
    let connection = builder.serve_connection(io, TowerToHyperService::new(service));
    let mut connection = std::pin::pin!(connection);
    let lifetime = tokio::time::sleep(limits.lifetime);
    let mut lifetime = std::pin::pin!(lifetime);
    let mut ending = false;
    loop {
        tokio::select! {
            // The connection first: a request whose bytes have arrived is
            // read before a signal below can end keep-alive, so that it is
            // answered (then closed) rather than cut off unread, which the
            // client sees as a reset. Once read it is no longer idle.
            biased;
            result = connection.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(%peer, error = %err, "connection ended with an error");
                }
                break;
            }
            // Each of these ends keep-alive: an idle connection closes now,
            // a busy one after its answer.
            _ = signals.closing.changed(), if !ending => {
                ending = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = signals.pressure.changed(), if !ending => {
                ending = true;
                connection.as_mut().graceful_shutdown();
            }
            () = &mut lifetime, if !ending => {
                ending = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
    drop(held);
}

fn connection_builder(limits: ConnectionLimits) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        // The read buffer never outgrows one request head: an unfinished
        // head larger than this is a 431, not memory held until it ends.
        .max_buf_size(limits.max_header_bytes)
        .max_header_size(limits.max_header_bytes);
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
