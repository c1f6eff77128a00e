//! Storage: one repository over SQLite (the embedded default) or PostgreSQL
//! (several replicas). The backend is chosen once, at connect time; every
//! query is written once, in SQL both dialects accept (`$n` parameters,
//! `ON CONFLICT`, `RETURNING`), and [`on_pool!`] runs it on the concrete pool
//! so each backend gets its own statically typed code.
//!
//! Rules that keep both backends honest:
//! - every read-then-write decision is a single atomic statement or a
//!   transaction begun with [`Store`]'s helpers (SQLite: `BEGIN IMMEDIATE`);
//! - timestamps are Unix milliseconds (`BIGINT`), booleans are avoided.

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub mod accounts;
pub mod capabilities;
pub mod capability_tests;
mod columns;
pub mod conversations;
pub mod credentials;
pub mod data_requests;
pub mod diagnostics;
mod direct;
mod error;
pub mod gap_events;
mod gathering;
pub mod idempotency;
pub mod mcp_calls;
mod pg_lane;
mod pgpass;
mod placeholders;
pub mod platform;
pub mod policy;
pub mod prompt_integrations;
mod read_batches;
mod record_batches;
pub mod retention;
pub mod signing_keys;
mod wal_checkpoint;
mod write_groups;

pub use error::{Constraint, StoreError};

/// Runs `$body` with `$pool` bound to the concrete pool of `$store`.
macro_rules! on_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match $store {
            $crate::store::Store::Sqlite($pool) => $body,
            $crate::store::Store::Postgres(postgres) => {
                let $pool = &postgres.pool;
                $body
            }
        }
    };
}
pub(crate) use on_pool;

#[derive(Clone, Debug)]
pub enum Store {
    Sqlite(SqlitePool),
    Postgres(PgStore),
}

/// A PostgreSQL database: sqlx's pool, the lane of connections its hot
/// statements take (`pg_lane`), the point reads asked at once read
/// together (`read_batches`), and the lone records and the turns that
/// start a conversation written together (`record_batches`,
/// `write_groups`).
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    lane: std::sync::Arc<pg_lane::PgLane>,
    records: std::sync::Arc<record_batches::RecordBatches>,
    reads: std::sync::Arc<read_batches::ReadBatches>,
    turns: std::sync::Arc<write_groups::WriteGroups<conversations::CommitOutcome>>,
}

impl PgStore {
    fn new(pool: PgPool, url: &str) -> Self {
        let lane = std::sync::Arc::new(pg_lane::PgLane::new(url, &pool.connect_options()));
        PgStore {
            pool,
            records: std::sync::Arc::new(record_batches::RecordBatches::new(lane.clone())),
            reads: std::sync::Arc::new(read_batches::ReadBatches::new(lane.clone())),
            turns: std::sync::Arc::new(write_groups::WriteGroups::new(lane.clone())),
            lane,
        }
    }

    /// sqlx's pool, for statements outside the hot paths (and tests).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// How many point reads were answered from a statement that carried
    /// other requests' reads too (`read_batches`), since the store opened.
    pub fn reads_gathered(&self) -> u64 {
        self.reads.gathered()
    }
}

/// What a database URL points at; decides defaults such as the key file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseKind {
    SqliteFile(PathBuf),
    SqliteMemory,
    Postgres,
}

pub type StoreResult<T> = Result<T, StoreError>;

const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

impl DatabaseKind {
    pub fn of_url(url: &str) -> Result<Self, StoreError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(DatabaseKind::Postgres);
        }
        if !url.starts_with("sqlite:") {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        }
        if url.contains(":memory:") || url.contains("mode=memory") {
            return Ok(DatabaseKind::SqliteMemory);
        }
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|_| StoreError::UnsupportedUrl(url.to_owned()))?;
        Ok(DatabaseKind::SqliteFile(
            options.get_filename().to_path_buf(),
        ))
    }
}

/// Whether a SQLite connection going back to the pool may be reused.
///
/// sqlx-sqlite 0.8 begins a custom transaction (`BEGIN IMMEDIATE`) in two
/// awaits (the statement, then a check); a future dropped between them leaves
/// the connection inside a transaction that no guard will roll back, holding
/// the database's write lock for every account. Such a connection is closed
/// (closing rolls back) instead of reused. The common case is one atomic
/// read; the worker is asked only when the depth says "in a transaction",
/// since a dropped guard's rollback may still be queued then.
async fn sqlite_connection_is_clean(conn: &mut sqlx::SqliteConnection) -> sqlx::Result<bool> {
    use sqlx::Connection;
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    // A round trip to the connection's worker: any rollback queued by a
    // dropped guard has run after it, so the depth is settled.
    drop(conn.lock_handle().await?);
    let in_transaction = conn.is_in_transaction();
    if in_transaction {
        tracing::warn!("a database connection was left inside a transaction; closing it");
    }
    Ok(!in_transaction)
}

/// How long a PostgreSQL connection may sit in the pool and still be
/// handed out without a ping. sqlx pings every connection as it goes back,
/// so under load (connections idle for microseconds) nothing is asked twice.
const POSTGRES_TRUSTED_IDLE: Duration = Duration::from_secs(1);

/// Whether a PostgreSQL connection leaving the pool may be used: yes if it
/// was released moments ago, otherwise only if it answers a ping. One that
/// does not is closed; the pool then opens or takes another.
async fn postgres_connection_is_live(
    conn: &mut sqlx::PgConnection,
    idle_for: Duration,
) -> sqlx::Result<bool> {
    use sqlx::Connection;
    if idle_for <= POSTGRES_TRUSTED_IDLE {
        return Ok(true);
    }
    match conn.ping().await {
        Ok(()) => Ok(true),
        Err(error) => {
            tracing::info!(%error, idle_ms = idle_for.as_millis() as u64,
                "an idle PostgreSQL connection did not answer a ping; replacing it");
            Ok(false)
        }
    }
}

/// What this process keeps per SQLite database file (every pool of the
/// process on the same file shares it): the write gate
/// ([`Store::write_turn`]) and the count of commits towards the next WAL
/// checkpoint (`wal_checkpoint`).
struct SqliteFile {
    gate: std::sync::Arc<tokio::sync::Mutex<()>>,
    checkpoints: std::sync::Arc<wal_checkpoint::WalCheckpoints>,
    /// A file, not a database in memory: it has a WAL to checkpoint.
    on_file: bool,
}

fn sqlite_file(pool: &SqlitePool) -> std::sync::Arc<SqliteFile> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static FILES: OnceLock<Mutex<HashMap<PathBuf, Arc<SqliteFile>>>> = OnceLock::new();
    let options = pool.connect_options();
    let mut files = FILES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    files
        .entry(options.get_filename().to_path_buf())
        .or_insert_with(|| {
            Arc::new(SqliteFile {
                gate: Default::default(),
                checkpoints: Default::default(),
                on_file: direct::file_of(&options).is_some(),
            })
        })
        .clone()
}

/// This process's turn to write to a SQLite file ([`Store::write_turn`]).
/// Let go when dropped, however the write ended, and counted then as one
/// commit toward the file's next WAL checkpoint: sqlx's writes too, whose
/// connections no longer checkpoint on commit (a turn that wrote nothing
/// only brings a checkpoint a hundredth sooner).
pub(crate) struct WriteTurn {
    gate: Option<tokio::sync::OwnedMutexGuard<()>>,
    pool: SqlitePool,
    file: std::sync::Arc<SqliteFile>,
    /// The WAL's length after the commit, when the direct path saw it.
    wal_pages: u32,
}

impl WriteTurn {
    async fn take(pool: &SqlitePool) -> WriteTurn {
        // The file's state, looked up once: its gate, then its checkpoints.
        let file = sqlite_file(pool);
        let gate = file.gate.clone().lock_owned().await;
        WriteTurn {
            gate: Some(gate),
            pool: pool.clone(),
            file,
            wal_pages: 0,
        }
    }
}

impl Drop for WriteTurn {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take()
            && self.file.on_file
        {
            self.file
                .checkpoints
                .committed(&self.pool, gate, self.wal_pages);
        }
    }
}

impl Store {
    /// Connects (creating a SQLite file if missing) and applies migrations.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let store = match DatabaseKind::of_url(url)? {
            DatabaseKind::Postgres => Store::Postgres(PgStore::new(
                PgPoolOptions::new()
                    .max_connections(10)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    // sqlx's default pings before every acquire: a network
                    // round trip per statement (19 % of a turn's CPU under
                    // load, docs/benchmarks.md). Only a connection that sat
                    // idle may have been dropped by the server or a proxy;
                    // one just released was pinged on its way back.
                    .test_before_acquire(false)
                    .before_acquire(|conn, meta| {
                        Box::pin(postgres_connection_is_live(conn, meta.idle_for))
                    })
                    .connect(url)
                    .await?,
                url,
            )),
            kind => {
                let options = direct::CONNECTION_PRAGMAS.iter().fold(
                    SqliteConnectOptions::from_str(url)?
                        .create_if_missing(true)
                        .journal_mode(SqliteJournalMode::Wal)
                        .busy_timeout(SQLITE_BUSY_TIMEOUT),
                    |options, (name, value)| options.pragma(*name, *value),
                );
                // Each in-memory connection would be its own database.
                let max = if kind == DatabaseKind::SqliteMemory {
                    1
                } else {
                    8
                };
                Store::Sqlite(
                    SqlitePoolOptions::new()
                        .max_connections(max)
                        .acquire_timeout(ACQUIRE_TIMEOUT)
                        // A SQLite connection is a file handle in this process: it
                        // cannot go stale as a socket can. sqlx's default ping before
                        // each acquire cost a round trip to the connection's worker
                        // thread per statement (6 % of a turn's CPU, docs/benchmarks.md).
                        .test_before_acquire(false)
                        .after_release(|conn, _| Box::pin(sqlite_connection_is_clean(conn)))
                        .connect_with(options)
                        .await?,
                )
            }
        };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> StoreResult<()> {
        match self {
            Store::Sqlite(pool) => sqlx::migrate!("migrations/sqlite").run(pool).await?,
            Store::Postgres(postgres) => {
                sqlx::migrate!("migrations/postgres")
                    .run(&postgres.pool)
                    .await?
            }
        }
        Ok(())
    }

    /// At most one row of `sql` (a hot read written for both backends),
    /// decoded by `decode`. On a SQLite file it runs on this thread's own
    /// connection (`direct`): no hand-off to sqlx-sqlite's worker thread.
    /// On PostgreSQL on a connection of the lane (`pg_lane`): no release
    /// ping; the reads of `sql` asked while one is on its way go together
    /// as one statement (`read_batches`).
    pub(crate) async fn read_optional<T>(
        &self,
        sql: &'static str,
        params: &[direct::Param<'_>],
        decode: fn(&dyn direct::ReadRow) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        Ok(self.read_rows(sql, params, decode, true).await?.pop())
    }

    /// Every row of `sql`, as [`Store::read_optional`] reads one.
    pub(crate) async fn read_all<T>(
        &self,
        sql: &'static str,
        params: &[direct::Param<'_>],
        decode: fn(&dyn direct::ReadRow) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        self.read_rows(sql, params, decode, false).await
    }

    async fn read_rows<T>(
        &self,
        sql: &'static str,
        params: &[direct::Param<'_>],
        decode: fn(&dyn direct::ReadRow) -> StoreResult<T>,
        first_only: bool,
    ) -> StoreResult<Vec<T>> {
        use direct::{Direct, Sqlx};
        match self {
            Store::Sqlite(pool) => {
                let read = Direct::open(pool, |connection| {
                    direct::fetch(connection, sql, params, decode, first_only)
                });
                match read {
                    // Busy (a recovery under way): sqlx's worker may wait for
                    // it. In memory: sqlx's one connection is the database.
                    Some(Err(StoreError::Unavailable(_))) | None => {}
                    Some(read) => return read,
                }
                let query = direct::bind_all(sqlx::query(sql), params);
                let rows = if first_only {
                    query.fetch_optional(pool).await?.into_iter().collect()
                } else {
                    query.fetch_all(pool).await?
                };
                rows.iter().map(|row| decode(&Sqlx(row))).collect()
            }
            Store::Postgres(postgres) if first_only => Ok(postgres
                .reads
                .read_optional(sql, params, decode)
                .await?
                .into_iter()
                .collect()),
            Store::Postgres(postgres) => {
                let mut lease = postgres.lane.lease().await?;
                let rows = lease.read(sql, params, decode, first_only).await;
                lease.settle(rows)
            }
        }
    }

    /// `steps` in one write transaction, or nothing: committed (`None`), or
    /// rolled back with the answer of the first step that did not touch
    /// exactly one row. Holds the write gate. On a SQLite file the whole
    /// transaction runs on this thread's own connection (`direct`), with
    /// no hand-off per statement and no await inside it, so a client's
    /// hang-up cannot stop it half-way; while another process holds the
    /// write lock it waits here, off the thread, and asks again, up to the
    /// busy timeout. On PostgreSQL on a connection of the lane (`pg_lane`),
    /// closed rather than reused if the transaction did not end. Otherwise
    /// (an in-memory SQLite database) through sqlx.
    pub(crate) async fn write_steps<O: Copy>(
        &self,
        steps: &[direct::Step<'_, O>],
    ) -> StoreResult<Option<O>> {
        let pool = match self {
            Store::Postgres(postgres) => return postgres.lane.write(steps).await,
            Store::Sqlite(pool) => pool,
        };
        let mut turn = WriteTurn::take(pool).await;
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match direct::Direct::open(pool, |connection| direct::write(connection, steps)) {
                None => break,
                Some(Ok(direct::Written::Committed { wal_pages })) => {
                    turn.wal_pages = wal_pages;
                    return Ok(None);
                }
                Some(Ok(direct::Written::Answered(answer))) => return Ok(Some(answer)),
                Some(Ok(direct::Written::Busy)) if started.elapsed() < SQLITE_BUSY_TIMEOUT => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Some(Ok(direct::Written::Busy)) => return Err(StoreError::Timeout),
                Some(Err(err)) => return Err(err),
            }
        }
        // An in-memory database, or a file direct could not open.
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        direct::run_steps!(tx, steps)
    }

    /// Inserts one record, a lone row of `sql` (an `INSERT … VALUES (…)`
    /// with nothing to roll back for), and returns once it is committed. On
    /// PostgreSQL with the records of the same statement that arrive
    /// meanwhile (`record_batches`); on SQLite as [`Store::write_steps`].
    pub(crate) async fn insert_record(
        &self,
        sql: &'static str,
        row: Vec<direct::Param<'_>>,
    ) -> StoreResult<()> {
        match self {
            Store::Postgres(postgres) => postgres.records.insert(sql, &row).await,
            Store::Sqlite(_) => self
                .write_steps(&[direct::Step::<()>::new(sql, row)])
                .await
                .map(drop),
        }
    }

    /// A cheap round trip, for the health check.
    pub async fn ping(&self) -> StoreResult<()> {
        on_pool!(self, pool => sqlx::query("SELECT 1").execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    /// Waits for this process's turn to write to a SQLite database; held
    /// for the whole of a write transaction. SQLite allows one writer at a
    /// time; without this, concurrent transactions of this process meet at
    /// `BEGIN IMMEDIATE` and wait in SQLite's busy handler, which sleeps
    /// (1, 2, 5, 10 … 100 ms) instead of waking when the lock frees: under
    /// load that was most of a turn's p99. Queued here they are woken in
    /// order as soon as the previous one commits. Other processes (`warden
    /// admin`) still meet the busy timeout. PostgreSQL: no gate.
    pub(crate) async fn write_turn(&self) -> Option<WriteTurn> {
        match self {
            Store::Sqlite(pool) => Some(WriteTurn::take(pool).await),
            Store::Postgres(_) => None,
        }
    }

    /// How a read-then-write transaction begins. SQLite must take the write
    /// lock up front: a deferred transaction that upgrades later can fail
    /// with SQLITE_BUSY without waiting.
    pub(crate) fn write_transaction_statement(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "BEGIN IMMEDIATE",
            Store::Postgres(_) => "BEGIN",
        }
    }

    pub fn backend_name(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "sqlite",
            Store::Postgres(_) => "postgres",
        }
    }

    /// The pool's connections: (idle, in use), for the pool gauge.
    pub fn pool_connections(&self) -> (usize, usize) {
        let (size, idle) = on_pool!(self, pool => (pool.size() as usize, pool.num_idle()));
        let (lane_idle, lane_in_use) = match self {
            Store::Postgres(postgres) => postgres.lane.connections(),
            Store::Sqlite(_) => (0, 0),
        };
        (idle + lane_idle, size.saturating_sub(idle) + lane_in_use)
    }

    pub async fn close(&self) {
        if let Store::Postgres(postgres) = self {
            postgres.lane.close().await;
        }
        on_pool!(self, pool => pool.close().await)
    }
}
