//! PostgreSQL's hot statements on connections of their own, through
//! tokio-postgres, which pipelines.
//!
//! Two costs of sqlx on the hot path (docs/benchmarks.md, "The release ping
//! removed" and "A turn's write in two round trips"):
//! - sqlx (0.8, and 0.9 alike) pings every pooled connection on its way
//!   back to the pool: one more network round trip, and a task spawned for
//!   it, per statement run outside a transaction and per transaction;
//! - sqlx cannot pipeline (launchbadge/sqlx#408): a turn's transaction was
//!   `BEGIN`, each statement and `COMMIT`, one round trip each. Here they
//!   are sent together and answered together ([`Lease::write`]).
//!
//! The reads and write transactions that `direct` runs on SQLite's own
//! connections (`Store::read_optional`, `read_all`, `write_steps`) run
//! here on PostgreSQL, on at most [`LANE_CONNECTIONS`] connections besides
//! sqlx's pool, which keeps every other statement and the migrations. Each
//! statement's text is still the one SQLite runs ([`Param`], [`Step`]) and
//! its rows are decoded once, against [`ReadRow`].
//!
//! A connection goes back only when its work finished without an error.
//! One whose work failed, or whose future was dropped mid-statement (a
//! deadline, a cancelled task), is closed instead: closing ends any open
//! transaction on the server, and neither a half-read answer nor a
//! transaction left open can reach the next user. A connection idle for
//! longer than the pool trusts is pinged before it is used, as the pool's
//! are ([`super::POSTGRES_TRUSTED_IDLE`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Mutex;
use std::task::Poll;
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, Statement};

use super::direct::{Param, ReadRow, Step, log_statement};
use super::error::{Constraint, DriverError, is_unavailable_code};
use super::{ACQUIRE_TIMEOUT, StoreError, StoreResult};

/// Connections the lane may hold open at once, beside the pool's.
pub(crate) const LANE_CONNECTIONS: usize = 10;

/// Prepared statements each connection keeps (the hot statements are a
/// fixed set of texts in the code, each record's in up to
/// `record_batches::MAX_ROWS` sizes; past this they are all dropped).
const STATEMENTS_PER_CONNECTION: usize = 128;

pub(crate) struct PgLane {
    config: tokio_postgres::Config,
    places: Semaphore,
    idle: Mutex<Vec<Idle>>,
}

/// One connection of the lane: the client, and the statements prepared on
/// it. The task that drives its socket ends when the client is dropped
/// (telling the server, which ends any open transaction).
struct LaneConnection {
    client: Client,
    driver: tokio::task::JoinHandle<()>,
    statements: HashMap<String, Statement>,
}

struct Idle {
    connection: LaneConnection,
    since: Instant,
}

/// One connection of the lane, lent for one piece of work.
pub(crate) struct Lease<'a> {
    lane: &'a PgLane,
    connection: Option<LaneConnection>,
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
    /// The lane to the database sqlx's pool connects to: the same server,
    /// database, user and settings (`options`, which also read the `PG…`
    /// environment variables), and the same password.
    pub(crate) fn new(url: &str, options: &PgConnectOptions) -> Self {
        PgLane {
            config: lane_config(url, options),
            places: Semaphore::new(LANE_CONNECTIONS),
            idle: Mutex::new(Vec::with_capacity(LANE_CONNECTIONS)),
        }
    }

    /// Runs `steps` in one transaction on a connection of the lane (see
    /// [`Lease::write`]); the connection goes back only if it succeeded.
    pub(crate) async fn write<O: Copy>(&self, steps: &[Step<'_, O>]) -> StoreResult<Option<O>> {
        let mut lease = self.lease().await?;
        let outcome = lease.write(steps).await;
        lease.settle(outcome)
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
        while let Some(Idle { connection, since }) = self.take_idle() {
            if connection.is_live(since.elapsed()).await {
                return Ok(self.lent(connection, place));
            }
        }
        let (client, driver) = self.config.connect(NoTls).await.map_err(classify)?;
        let driver = tokio::spawn(async move {
            if let Err(error) = driver.await {
                tracing::debug!(%error, "a PostgreSQL lane connection ended");
            }
        });
        let connection = LaneConnection {
            client,
            driver,
            statements: HashMap::new(),
        };
        Ok(self.lent(connection, place))
    }

    fn lent<'a>(&'a self, connection: LaneConnection, place: SemaphorePermit<'a>) -> Lease<'a> {
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

    /// Closes the idle connections, telling the server (those lent out are
    /// closed when their work ends, as the lane is then gone).
    pub(crate) async fn close(&self) {
        let idle: Vec<Idle> = std::mem::take(&mut *self.lock_idle());
        for Idle { connection, .. } in idle {
            let LaneConnection { client, driver, .. } = connection;
            // Its last client gone, the driver says goodbye and ends.
            drop(client);
            let _ = tokio::time::timeout(ACQUIRE_TIMEOUT, driver).await;
        }
    }
}

/// tokio-postgres's settings for the server `options` name. Only the
/// password is not readable from sqlx's options: it is the URL's, or found
/// where sqlx finds it (`pgpass`).
fn lane_config(url: &str, options: &PgConnectOptions) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    // A socket's directory is a host starting with `/` to both drivers.
    match options.get_socket() {
        Some(directory) => config.host(directory.to_string_lossy()),
        None => config.host(options.get_host()),
    }
    .port(options.get_port())
    .user(options.get_username())
    // sqlx is built without TLS here (Cargo.toml): its connections are
    // plain, and so are these.
    .ssl_mode(tokio_postgres::config::SslMode::Disable)
    .connect_timeout(ACQUIRE_TIMEOUT);
    if let Some(database) = options.get_database() {
        config.dbname(database);
    }
    if let Some(name) = options.get_application_name() {
        config.application_name(name);
    }
    if let Some(settings) = options.get_options() {
        config.options(settings);
    }
    // tokio-postgres reads the URL's password (percent-decoded) as sqlx
    // does; the query is left out, as it may hold settings only sqlx knows.
    let without_query = url.split('?').next().unwrap_or(url);
    let from_url = tokio_postgres::Config::from_str(without_query)
        .ok()
        .and_then(|parsed| parsed.get_password().map(<[u8]>::to_vec));
    let elsewhere = || {
        super::pgpass::password(&super::pgpass::Login {
            host: options.get_host(),
            port: options.get_port(),
            database: options.get_database(),
            user: options.get_username(),
        })
        .map(String::into_bytes)
    };
    if let Some(password) = from_url.or_else(elsewhere) {
        config.password(password);
    }
    config
}

impl LaneConnection {
    /// Whether a connection taken from the idle list may be used: not if its
    /// socket closed; yes if it was put back moments ago; otherwise only if
    /// it answers a ping. One that does not is dropped (closed).
    async fn is_live(&self, idle_for: Duration) -> bool {
        if self.client.is_closed() {
            return false;
        }
        if idle_for <= super::POSTGRES_TRUSTED_IDLE {
            return true;
        }
        match self.client.batch_execute("SELECT 1").await {
            Ok(()) => true,
            Err(error) => {
                tracing::info!(%error, idle_ms = idle_for.as_millis() as u64,
                    "an idle PostgreSQL connection did not answer a ping; replacing it");
                false
            }
        }
    }

    /// `sql` prepared on this connection, with its parameters typed as
    /// `params` are (as sqlx types them: PostgreSQL checks every one, NULLs
    /// included). Prepared once per connection.
    async fn prepared(&mut self, sql: &str, params: &[Param<'_>]) -> StoreResult<Statement> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let types: Vec<Type> = params.iter().map(param_type).collect();
        let statement = self
            .client
            .prepare_typed(sql, &types)
            .await
            .map_err(classify)?;
        if self.statements.len() >= STATEMENTS_PER_CONNECTION {
            // Dropping a statement closes it on the server.
            self.statements.clear();
        }
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

fn param_type(param: &Param<'_>) -> Type {
    match param {
        Param::Int(_) | Param::MaybeInt(_) => Type::INT8,
        Param::Text(_) | Param::MaybeText(_) => Type::TEXT,
        Param::Bytes(_) => Type::BYTEA,
    }
}

fn arguments<'p>(params: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params
        .iter()
        .map(|param| -> &'p (dyn ToSql + Sync) {
            match param {
                Param::Int(value) => value,
                Param::Text(value) => value,
                Param::Bytes(value) => value,
                Param::MaybeText(value) => value,
                Param::MaybeInt(value) => value,
            }
        })
        .collect()
}

/// One request of a pipelined batch; what it answers is the rows it
/// touched (0 for `BEGIN`).
type Request<'c> = Pin<Box<dyn Future<Output = Result<u64, tokio_postgres::Error>> + Send + 'c>>;

impl Lease<'_> {
    fn connection(&mut self) -> &mut LaneConnection {
        self.connection
            .as_mut()
            .expect("a lease holds its connection until it settles")
    }

    /// Ends the lease with the work's outcome: the connection goes back
    /// only if the work succeeded; otherwise it is closed as it drops.
    pub(crate) fn settle<T>(mut self, outcome: StoreResult<T>) -> StoreResult<T> {
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

    /// The rows of `sql` with `params` (only the first when `first_only`),
    /// each decoded by `decode`.
    pub(crate) async fn read<T>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        decode: fn(&dyn ReadRow) -> StoreResult<T>,
        first_only: bool,
    ) -> StoreResult<Vec<T>> {
        let mut rows = self.rows(sql, params).await?;
        if first_only {
            rows.truncate(1);
        }
        rows.iter().map(|row| row.decoded(decode)).collect()
    }

    /// The rows of `sql` with `params`, as the server sent them.
    pub(crate) async fn rows(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
    ) -> StoreResult<Vec<SentRow>> {
        log_statement("lane read", sql);
        let connection = self.connection();
        let statement = connection.prepared(sql, params).await?;
        let rows = connection
            .client
            .query(&statement, &arguments(params))
            .await
            .map_err(classify)?;
        Ok(rows.into_iter().map(SentRow).collect())
    }

    /// Runs `steps` in one transaction (see [`super::direct::write`]):
    /// committed (`None`), or rolled back with the answer of the first step
    /// that did not touch exactly one row.
    ///
    /// `BEGIN`, every statement and `COMMIT` are sent at once and answered
    /// together: one round trip for the transaction, where sqlx took one
    /// per statement. A step with an answer is sent guarded ([`guarded`]):
    /// when it does not touch exactly one row the server fails the
    /// transaction, the statements after it are refused, and the `COMMIT`
    /// already on its way rolls everything back. Any other error returns at
    /// once; the caller then closes the connection. A lone statement with
    /// nothing to roll back for is atomic on its own and is sent without
    /// `BEGIN` and `COMMIT` (a contract test's record, a gap event).
    pub(crate) async fn write<O: Copy>(&mut self, steps: &[Step<'_, O>]) -> StoreResult<Option<O>> {
        let connection = self.connection();
        let mut statements = Vec::with_capacity(steps.len());
        for step in steps {
            log_statement("lane write", step.sql);
            let statement = match step.unless_one_row {
                Some(_) => {
                    connection
                        .prepared(&guarded(step.sql), &step.params)
                        .await?
                }
                None => connection.prepared(step.sql, &step.params).await?,
            };
            statements.push(statement);
        }
        let arguments: Vec<_> = steps.iter().map(|step| arguments(&step.params)).collect();
        let client = &connection.client;
        if let ([only], [statement]) = (steps, statements.as_slice())
            && only.unless_one_row.is_none()
        {
            client
                .execute(statement, &arguments[0])
                .await
                .map_err(classify)?;
            return Ok(None);
        }
        let mut requests: Vec<Request<'_>> = Vec::with_capacity(steps.len() + 2);
        requests.push(Box::pin(async {
            client.batch_execute("BEGIN").await.map(|()| 0)
        }));
        for (statement, arguments) in statements.iter().zip(&arguments) {
            requests.push(Box::pin(client.execute(statement, arguments)));
        }
        requests.push(Box::pin(async {
            client.batch_execute("COMMIT").await.map(|()| 0)
        }));
        let mut replies = pipelined(requests).await.into_iter();
        replies.next().expect("BEGIN was sent").map_err(classify)?;
        let mut answer = None;
        for step in steps {
            let reply = replies.next().expect("every step was sent");
            if answer.is_some() {
                // Refused: the transaction failed at the guard before it.
                continue;
            }
            match reply {
                Ok(_) => {}
                Err(err) if is_guard(&err) => answer = step.unless_one_row,
                Err(err) => return Err(classify(err)),
            }
        }
        // After a guard, the server answers this COMMIT by rolling back.
        replies.next().expect("COMMIT was sent").map_err(classify)?;
        Ok(answer)
    }
}

/// `sql` (an `INSERT`, `UPDATE` or `DELETE` without `RETURNING`) as one
/// statement that fails with SQLSTATE `WG001` unless it touched exactly
/// one row (`warden_expect_one_row`, migration 0019).
fn guarded(sql: &str) -> String {
    format!(
        "WITH touched AS ({sql} RETURNING 1) SELECT warden_expect_one_row(count(*)) FROM touched"
    )
}

/// Whether `err` is a guarded step's refusal ([`guarded`]).
fn is_guard(err: &tokio_postgres::Error) -> bool {
    err.as_db_error()
        .is_some_and(|db| db.code().code() == GUARD_SQLSTATE)
}

/// The SQLSTATE `warden_expect_one_row` raises.
const GUARD_SQLSTATE: &str = "WG001";

/// Every request's answer, in order. Each is sent before any answer is
/// awaited: tokio-postgres sends a request on its future's first poll, and
/// the first pass below polls them in order; the server answers them in
/// the order they came.
async fn pipelined(mut requests: Vec<Request<'_>>) -> Vec<Result<u64, tokio_postgres::Error>> {
    let mut replies: Vec<Option<Result<u64, tokio_postgres::Error>>> =
        requests.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (request, reply) in requests.iter_mut().zip(replies.iter_mut()) {
            if reply.is_none() {
                match request.as_mut().poll(cx) {
                    Poll::Ready(answer) => *reply = Some(answer),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    replies
        .into_iter()
        .map(|reply| reply.expect("every request was answered"))
        .collect()
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if self.connection.is_some() {
            tracing::debug!("a PostgreSQL connection's work failed or was cancelled; closing it");
        }
    }
}

/// A row of the lane, read as [`ReadRow`] reads every driver's.
struct LaneRow<'a>(&'a tokio_postgres::Row);

/// A row as the server sent it, for whoever asked for it to decode
/// (`read_batches` hands each caller of a gathered read its own).
pub(crate) struct SentRow(tokio_postgres::Row);

impl SentRow {
    pub(crate) fn decoded<T>(&self, decode: fn(&dyn ReadRow) -> StoreResult<T>) -> StoreResult<T> {
        decode(&LaneRow(&self.0))
    }

    /// Its last column, when it is a `bigint` (a gathered read's place).
    pub(crate) fn last_int(&self) -> Option<i64> {
        let last = self.0.len().checked_sub(1)?;
        self.0.try_get::<_, i64>(last).ok()
    }
}

impl ReadRow for LaneRow<'_> {
    fn int(&self, index: usize) -> StoreResult<Option<i64>> {
        self.get(index)
    }
    fn text(&self, index: usize) -> StoreResult<Option<String>> {
        self.get(index)
    }
    fn bytes(&self, index: usize) -> StoreResult<Option<Vec<u8>>> {
        self.get(index)
    }
}

impl LaneRow<'_> {
    fn get<T>(&self, index: usize) -> StoreResult<Option<T>>
    where
        for<'r> T: tokio_postgres::types::FromSql<'r>,
    {
        self.0
            .try_get(index)
            .map_err(|err| StoreError::Corrupt(err.to_string()).counted())
    }
}

/// tokio-postgres's error as the store's, as `StoreError::from` classifies
/// sqlx's: a unique rule's refusal, the server or the socket going away
/// (worth a retry), or a bug.
fn classify(err: tokio_postgres::Error) -> StoreError {
    let classified = if let Some(db) = err.as_db_error() {
        let code = db.code().code();
        if code == "23505" {
            StoreError::Conflict(Constraint::of_report(
                db.constraint().unwrap_or_else(|| db.message()),
            ))
        } else if is_unavailable_code(Some(code)) {
            StoreError::Unavailable(DriverError::new(err))
        } else {
            StoreError::Other(DriverError::new(err))
        }
    } else if err.is_closed()
        || std::error::Error::source(&err).is_some_and(|s| s.is::<std::io::Error>())
    {
        StoreError::Unavailable(DriverError::new(err))
    } else {
        StoreError::Other(DriverError::new(err))
    };
    classified.counted()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lane_connects_where_the_pool_does() {
        let url = "postgres://warden:p%40ss@db.example:6543/warden_prod?application_name=warden";
        let options = PgConnectOptions::from_str(url).unwrap();
        let config = lane_config(url, &options);
        assert_eq!(
            config.get_hosts(),
            &[tokio_postgres::config::Host::Tcp("db.example".into())]
        );
        assert_eq!(config.get_ports(), &[6543]);
        assert_eq!(config.get_user(), Some("warden"));
        assert_eq!(config.get_password(), Some(&b"p@ss"[..]));
        assert_eq!(config.get_dbname(), Some("warden_prod"));
        assert_eq!(config.get_application_name(), Some("warden"));
    }
}
