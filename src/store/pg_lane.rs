//! PostgreSQL's hot statements on connections of their own, handed back
//! without sqlx's release ping.
//!
//! sqlx (0.8, and 0.9 alike) pings every pooled connection on its way back
//! to the pool: one more network round trip, and a task spawned for it, per
//! statement run outside a transaction and per transaction. On a turn that
//! was 8 % of PostgreSQL's CPU (docs/benchmarks.md, "The release ping removed").
//! The reads and write transactions that `direct` runs on SQLite's own
//! connections (`Store::read_optional`, `read_all`, `write_steps`) run
//! here on PostgreSQL, on at most [`LANE_CONNECTIONS`] connections besides
//! the pool's.
//!
//! A connection goes back only when its work finished without an error.
//! One whose work failed, or whose future was dropped mid-statement (a
//! deadline, a cancelled task), is closed instead: closing ends any open
//! transaction on the server, and neither a half-read answer nor a
//! transaction left open can reach the next user. A connection idle for
//! longer than the pool trusts is pinged before it is used, as the pool's
//! are ([`super::postgres_connection_is_live`]).

use std::sync::Mutex;
use std::time::Instant;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::{ACQUIRE_TIMEOUT, StoreError, StoreResult};

/// Connections the lane may hold open at once, beside the pool's.
pub(crate) const LANE_CONNECTIONS: usize = 10;

pub(crate) struct PgLane {
    options: PgConnectOptions,
    places: Semaphore,
    idle: Mutex<Vec<Idle>>,
}

struct Idle {
    connection: PgConnection,
    since: Instant,
}

/// One connection of the lane, lent for one piece of work.
pub(crate) struct Lease<'a> {
    lane: &'a PgLane,
    connection: Option<PgConnection>,
    _place: SemaphorePermit<'a>,
}

impl std::fmt::Debug for PgLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (idle, in_use) = self.connections();
        f.debug_struct("PgLane")
            .field("idle", &idle)
            .field("in_use", &in_use)
            .finish()
    }
}

impl PgLane {
    pub(crate) fn new(options: PgConnectOptions) -> Self {
        PgLane {
            options,
            places: Semaphore::new(LANE_CONNECTIONS),
            idle: Mutex::new(Vec::with_capacity(LANE_CONNECTIONS)),
        }
    }

    /// A connection for one piece of work: an idle one, or a new one. The
    /// wait for a place (in arrival order), the ping of a long-idle
    /// connection and the connect together take at most the pool's acquire
    /// time-out.
    pub(crate) async fn lease(&self) -> StoreResult<Lease<'_>> {
        tokio::time::timeout(ACQUIRE_TIMEOUT, self.lease_unbounded())
            .await
            .map_err(|_| StoreError::Timeout)?
    }

    async fn lease_unbounded(&self) -> StoreResult<Lease<'_>> {
        let place = self
            .places
            .acquire()
            .await
            .map_err(|_| StoreError::Timeout)?;
        while let Some(Idle {
            mut connection,
            since,
        }) = self.take_idle()
        {
            if super::postgres_connection_is_live(&mut connection, since.elapsed()).await? {
                return Ok(self.lent(connection, place));
            }
        }
        let connection = self.options.connect().await?;
        Ok(self.lent(connection, place))
    }

    fn lent<'a>(&'a self, connection: PgConnection, place: SemaphorePermit<'a>) -> Lease<'a> {
        Lease {
            lane: self,
            connection: Some(connection),
            _place: place,
        }
    }

    fn take_idle(&self) -> Option<Idle> {
        self.lock_idle().pop()
    }

    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// (idle, in use), for the pool gauge.
    pub(crate) fn connections(&self) -> (usize, usize) {
        let idle = self.lock_idle().len();
        (idle, LANE_CONNECTIONS - self.places.available_permits())
    }

    /// Closes the idle connections (the server is told; those lent out are
    /// closed when their work ends, as the lane is then gone).
    pub(crate) async fn close(&self) {
        let idle: Vec<Idle> = std::mem::take(&mut *self.lock_idle());
        for Idle { connection, .. } in idle {
            let _ = connection.close().await;
        }
    }
}

impl Lease<'_> {
    pub(crate) fn connection(&mut self) -> &mut PgConnection {
        self.connection
            .as_mut()
            .expect("a lease holds its connection until it settles")
    }

    /// Ends the lease with the work's outcome: the connection goes back
    /// only if the work succeeded; otherwise it is closed as it drops.
    pub(crate) fn settle<T, E>(mut self, outcome: Result<T, E>) -> Result<T, E> {
        if outcome.is_ok()
            && let Some(connection) = self.connection.take()
        {
            self.lane.lock_idle().push(Idle {
                connection,
                since: Instant::now(),
            });
        }
        outcome
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if self.connection.is_some() {
            tracing::debug!("a PostgreSQL connection's work failed or was cancelled; closing it");
        }
    }
}

/// Runs `steps` in one transaction on `connection` (see
/// [`super::direct::run_steps`]). An error returns at once; the caller then
/// closes the connection, which rolls the transaction back on the server.
/// A lone statement with nothing to roll back for is atomic on its own and
/// is sent without `BEGIN` and `COMMIT`: one round trip instead of three
/// (a contract test's record, a gap event).
pub(crate) async fn write<O: Copy>(
    connection: &mut PgConnection,
    steps: &[super::direct::Step<'_, O>],
) -> StoreResult<Option<O>> {
    if let [only] = steps
        && only.unless_one_row.is_none()
    {
        super::direct::bind_all(sqlx::query(only.sql), &only.params)
            .execute(&mut *connection)
            .await?;
        return Ok(None);
    }
    let mut tx = connection.begin().await?;
    super::direct::run_steps!(tx, steps)
}
