//! The accept loop: what `axum::serve` does, plus the bounds a public server
//! needs against slow, idle, greedy or numerous clients (`ClientLimits`):
//! - at most `max_connections` connections are served at once; the next
//!   client is accepted and waits (the ones after it in the listen backlog)
//!   until one closes. For each client that has to wait, one connection
//!   ends its keep-alive (`release`): the one idle longest is closed at
//!   once if it has been idle a moment (250 ms), or else the next to
//!   answer closes after its answer, so the wait is one answer or that
//!   moment long, not an idle limit long, and the other connections keep
//!   theirs;
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
//!
//! The listener ([`listen`]) asks the kernel for a backlog of
//! [`LISTEN_BACKLOG`] connections rather than the standard library's 128:
//! when a burst of clients connects at once (an overload's start, clients
//! re-opening pools after a restart), the kernel drops the connection
//! requests past the backlog and each such client retries only a second
//! later.

pub mod metrics_listener;
mod release;
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
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

use crate::client_address::ClientKey;
use crate::fair_share::{FairShare, Place};
use release::{Member, Release};
use write_deadline::WriteDeadline;

/// New connections the kernel may hold for the accept loop (capped by the
/// kernel's `net.core.somaxconn`, 4096 on current kernels).
pub const LISTEN_BACKLOG: u32 = 1024;

/// A listener on `address` with a backlog of [`LISTEN_BACKLOG`].
pub fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // As the standard library's listeners: a restarted server binds its
    // port again without waiting for the old connections' TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

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

/// What an open connection holds, given back when it ends.
struct Held {
    _slot: OwnedSemaphorePermit,
    _client: Place<ClientKey>,
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
    let release = Release::new();
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
            Err(_) => match wait_for_slot(&slots, &release, shutdown.as_mut()).await {
                Some(slot) => slot,
                None => break,
            },
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_connection(
            stream,
            peer,
            router.clone(),
            limits,
            // Subscribed now: only what happens from here on concerns it.
            closing_tx.subscribe(),
            Held {
                _slot: slot,
                _client: client,
            },
            release.join(),
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
/// when it ends, and `member` is its place among the connections that could
/// make room for a waiting client.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: ConnectionLimits,
    mut closing: watch::Receiver<bool>,
    held: Held,
    member: Member,
) {
    let _open = crate::metrics::connection_opened();
    let member = Arc::new(member);
    let served = Arc::new(AtomicU64::new(0));
    let service = router
        .map_request({
            let served = served.clone();
            let member = member.clone();
            move |mut request: hyper::Request<Incoming>| {
                served.fetch_add(1, Ordering::Relaxed);
                member.busy();
                request.extensions_mut().insert(ConnectInfo(peer));
                request.map(axum::body::Body::new)
            }
        })
        .map_response({
            let member = member.clone();
            move |mut response: axum::response::Response| {
                // HTTP/1.1 answers one request at a time: the count is this one's.
                let last = served.load(Ordering::Relaxed) >= limits.max_requests;
                if member.answered(last) {
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                response
            }
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
            _ = closing.changed(), if !ending => {
                ending = true;
                member.end();
                connection.as_mut().graceful_shutdown();
            }
            () = member.asked_to_close(), if !ending => {
                ending = true;
                connection.as_mut().graceful_shutdown();
            }
            () = &mut lifetime, if !ending => {
                ending = true;
                member.end();
                connection.as_mut().graceful_shutdown();
            }
        }
    }
    // Out of the idle set before its slot frees, so a client waiting for
    // that slot never asks this closed connection to make room.
    member.end();
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

/// A slot for a client that found none free. One connection is asked to
/// make room (`release`), and asked again when the one idle longest has
/// been idle long enough to close, in case no answer made room first.
/// `None` when shutdown comes first.
async fn wait_for_slot(
    slots: &Arc<Semaphore>,
    release: &Release,
    mut shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Option<OwnedSemaphorePermit> {
    loop {
        let ask_again = release.make_room();
        tokio::select! {
            slot = slots.clone().acquire_owned() => {
                release.room_made();
                return Some(slot.expect("the semaphore is never closed"));
            }
            () = sleep_until(ask_again) => {}
            () = &mut shutdown => return None,
        }
    }
}

/// Sleeps until `instant`, or forever when `None`.
async fn sleep_until(instant: Option<tokio::time::Instant>) {
    match instant {
        Some(instant) => tokio::time::sleep_until(instant).await,
        None => std::future::pending().await,
    }
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
