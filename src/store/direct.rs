//! SQLite's hot statements on the thread that asks for them.
//!
//! sqlx-sqlite runs every statement on a worker thread of its own and hands
//! the command over and the rows back through channels: two thread wake-ups
//! per statement, 15–25 µs of CPU against ~3 µs for the read itself
//! (docs/benchmarks.md, "Instructions per request"). The reads every request
//! makes (the API key, the turn's basis, the credential, the capability, a
//! continued conversation's row, messages, references and pending
//! operation) and the turn's write transaction run instead on a connection
//! kept by each runtime thread, through rusqlite, with its prepared
//! statements cached. Each statement's text and its row decoding are still
//! written once, in the module that owns the table: the text is shared
//! with the PostgreSQL path ([`Param`], [`Step`], [`bind_all`]), and the
//! decoding is written against [`ReadRow`], which both drivers' rows
//! implement.
//!
//! Why this is safe on a runtime thread: nothing here ever sleeps for a
//! lock (`busy_timeout` 0). In WAL mode a reader waits for no writer; were
//! it refused (busy: a recovery under way), the read goes through sqlx
//! instead. A write transaction runs under the process's write gate, so
//! only another process can hold the write lock: then `BEGIN IMMEDIATE` is
//! refused at once and the caller waits off the thread and asks again
//! ([`Written::Busy`], `Store::write_steps`). A transaction's statements
//! run with no await between them, so it cannot be cancelled half-way, and
//! every path ends it (commit or rollback) before the connection is used
//! again. Each read is its own transaction, ended when its statement is
//! reset, so it sees every commit made before it began, on any connection.
//! What is left on the thread is SQLite's own work; the WAL checkpoint,
//! which SQLite would run inside a commit, runs off it (`wal_checkpoint`).
//! An in-memory database is one connection's own, so it stays on sqlx
//! ([`Direct::open`] says `None`).

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};

use super::StoreResult;
use super::error::{DriverError, StoreError};

/// Connections kept per thread, one per database (a process opens one
/// store; tests open many, and the oldest connection is closed first).
const CONNECTIONS_PER_THREAD: usize = 4;

/// Prepared statements each connection keeps.
const STATEMENTS_PER_CONNECTION: usize = 32;

/// One thread's read-only connection to one database.
struct Reader {
    /// The pool's options, held so that their address, the key, cannot be
    /// reused by another pool while this connection lives.
    options: Arc<SqliteConnectOptions>,
    connection: rusqlite::Connection,
}

thread_local! {
    static READERS: RefCell<Vec<Reader>> = const { RefCell::new(Vec::new()) };
}

/// Statements on this thread's own connections (one per database).
pub(crate) struct Direct;

impl Direct {
    /// Runs `read` on this thread's connection to `pool`'s database, opening
    /// it first if needed; `None` when the database cannot be read directly
    /// (in memory, or the connection cannot be opened), so the caller reads
    /// through sqlx instead.
    pub(crate) fn open<T>(
        pool: &SqlitePool,
        read: impl FnOnce(&rusqlite::Connection) -> StoreResult<T>,
    ) -> Option<StoreResult<T>> {
        let options = pool.connect_options();
        let file = file_of(&options)?;
        READERS.with(|readers| {
            let mut readers = readers.borrow_mut();
            let index = match readers
                .iter()
                .position(|r| Arc::ptr_eq(&r.options, &options))
            {
                Some(index) => index,
                None => {
                    let connection = match connect(&file) {
                        Ok(connection) => connection,
                        Err(error) => {
                            // Reads still work, through sqlx; say so once.
                            static WARNED: AtomicBool = AtomicBool::new(false);
                            if !WARNED.swap(true, Ordering::Relaxed) {
                                tracing::warn!(%error, "direct SQLite reads unavailable; reading through the pool");
                            }
                            return None;
                        }
                    };
                    if readers.len() >= CONNECTIONS_PER_THREAD {
                        readers.remove(0);
                    }
                    readers.push(Reader {
                        options: options.clone(),
                        connection,
                    });
                    readers.len() - 1
                }
            };
            Some(read(&readers[index].connection))
        })
    }
}

/// The file behind `options`, unless the database lives in memory.
pub(crate) fn file_of(options: &SqliteConnectOptions) -> Option<PathBuf> {
    let file = options.get_filename();
    let name = file.to_string_lossy();
    if name.is_empty() || name == ":memory:" || name.contains("mode=memory") {
        return None;
    }
    Some(file.to_path_buf())
}

/// The per-connection settings every SQLite connection of the process
/// takes, sqlx's (`Store::connect`) and these alike. WAL mode is the
/// file's own, set by the pool.
pub(crate) const CONNECTION_PRAGMAS: &[(&str, &str)] = &[
    // NORMAL in WAL mode survives a killed process; only an OS crash may
    // lose the last commits.
    ("synchronous", "NORMAL"),
    ("foreign_keys", "ON"),
    // Deleted rows are overwritten with zeros, not left in free pages:
    // erasure and retention leave no readable trace in the file
    // (SECURITY.md, "Data lifecycle").
    ("secure_delete", "ON"),
    // No commit checkpoints before the safety net: `wal_checkpoint` does,
    // off the gate, counting every write turn, sqlx's cold writes too
    // (with SQLite's default every commit past 1,000 pages did, under the
    // gate: a retention purge's batches each waited for two `fsync`s, and
    // every turn queued behind them). [`WAL_SAFETY_NET_PAGES`].
    ("wal_autocheckpoint", "10000"),
];

/// The WAL's safety net (`wal_autocheckpoint` of every connection, and
/// [`wal_hook`] on these): a commit checkpoints only a WAL grown this far
/// (~40 MiB), which the checkpoints of `wal_checkpoint` keep it from
/// reaching (they restart it at
/// [`super::wal_checkpoint::RESTART_WAL_PAGES`]). Such a commit's checkpoint
/// runs on the request's thread, under the write gate, with two `fsync`s:
/// every thread of the runtime but one stalls behind it.
pub(crate) const WAL_SAFETY_NET_PAGES: u32 = 10_000;

thread_local! {
    /// The WAL's length after this thread's last direct commit, as SQLite
    /// told [`wal_hook`]; read (and reset) by [`write`].
    static WAL_PAGES_AT_COMMIT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Called by SQLite after each commit on a direct connection, with the
/// WAL's length in pages: noted for [`write`], so that `wal_checkpoint`
/// learns of a WAL outgrowing its checkpoints at the commit that does,
/// not at the next checkpoint. It replaces `wal_autocheckpoint`'s own hook
/// (one hook per connection), so it keeps that hook's safety net: past
/// [`WAL_SAFETY_NET_PAGES`], a PASSIVE checkpoint inside the commit.
unsafe extern "C" fn wal_hook(
    _: *mut std::os::raw::c_void,
    handle: *mut rusqlite::ffi::sqlite3,
    database: *const std::os::raw::c_char,
    pages: std::os::raw::c_int,
) -> std::os::raw::c_int {
    let pages = u32::try_from(pages).unwrap_or(0);
    // `try_with`: never a panic across the C boundary, even while the
    // thread's locals are torn down.
    let _ = WAL_PAGES_AT_COMMIT.try_with(|noted| noted.set(pages));
    if pages >= WAL_SAFETY_NET_PAGES {
        // SAFETY: SQLite's own connection and database name, on the thread
        // committing; a checkpoint from inside this hook is what SQLite's
        // default hook does. Its outcome is the next commit's concern.
        unsafe { rusqlite::ffi::sqlite3_wal_checkpoint(handle, database) };
    }
    rusqlite::ffi::SQLITE_OK
}

/// How long a RESTART checkpoint waits for readers still inside the WAL to
/// finish (new ones read the database file once it is complete).
const RESTART_WAITS_FOR_READERS: Duration = Duration::from_millis(20);

/// Which checkpoint to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CheckpointMode {
    /// Copies what no reader still needs; waits for no one.
    Passive,
    /// Copies everything, then waits (briefly) until no reader uses the
    /// WAL, so that the next commit writes it from its start again. Run
    /// with the process's write gate held: no writer of this process
    /// appends meanwhile.
    Restart,
}

/// What a checkpoint did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Checkpointed {
    /// Every frame of the WAL is in the database file.
    Complete,
    /// Some frames were left: a reader still needs them, or a writer
    /// appended meanwhile.
    Partial,
    /// Another connection was checkpointing, or (RESTART) readers stayed
    /// in the WAL.
    Busy,
}

/// A checkpoint's outcome and the WAL's length when it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub(crate) outcome: Checkpointed,
    /// Frames (pages) in the WAL since it last started over.
    pub(crate) wal_pages: u32,
}

/// One checkpoint on `connection`. PASSIVE waits for no reader and no
/// writer (the connection's busy timeout is 0); RESTART waits at most
/// [`RESTART_WAITS_FOR_READERS`].
pub(crate) fn checkpoint(
    connection: &rusqlite::Connection,
    mode: CheckpointMode,
) -> StoreResult<Checkpoint> {
    let (sql, wait) = match mode {
        CheckpointMode::Passive => ("PRAGMA wal_checkpoint(PASSIVE)", Duration::ZERO),
        CheckpointMode::Restart => ("PRAGMA wal_checkpoint(RESTART)", RESTART_WAITS_FOR_READERS),
    };
    connection.busy_timeout(wait).map_err(classify)?;
    let answer = connection.query_row(sql, [], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
        ))
    });
    if wait != Duration::ZERO {
        connection.busy_timeout(Duration::ZERO).map_err(classify)?;
    }
    let (busy, log, copied) = match answer {
        Ok(answer) => answer,
        Err(err) if is_busy(&err) => (1, -1, -1),
        Err(err) => return Err(classify(err)),
    };
    let outcome = match busy {
        1 => Checkpointed::Busy,
        _ if copied >= log => Checkpointed::Complete,
        _ => Checkpointed::Partial,
    };
    Ok(Checkpoint {
        outcome,
        wal_pages: u32::try_from(log).unwrap_or(0),
    })
}

/// Writes the database file's pages that checkpoints copied into it to
/// disk, as SQLite's own sync of that file does (`fsync`), through the
/// connection's own descriptor.
///
/// A checkpoint syncs the database file only when it copied the whole WAL;
/// under steady writes a PASSIVE one never does (a commit lands while it
/// copies), so every page copied since the last complete one stays dirty
/// in the OS's cache, and the complete one (the RESTART, under the write
/// gate) had to write them all: 4 ms on a fresh file, 30 ms after a
/// minute of turns on a 2-core virtual machine, every writer waiting
/// (docs/benchmarks.md, "The RESTART's sync, ahead of the gate").
/// Synced here, off the gate, the RESTART writes only what it copies.
///
/// SQLite's descriptor, not a second one: closing another descriptor of
/// the file would drop every POSIX lock this process holds on it, the
/// locks SQLite's connections rely on.
pub(crate) fn sync_database_file(connection: &rusqlite::Connection) -> StoreResult<()> {
    use rusqlite::ffi;
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: `handle` is this open connection's, used on this thread
    // alone (`SQLITE_OPEN_NO_MUTEX`, thread-local); FILE_POINTER writes
    // one pointer to the main database's `sqlite3_file`, which lives as
    // long as the connection, into `file`.
    let code = unsafe {
        ffi::sqlite3_file_control(
            connection.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            (&raw mut file).cast(),
        )
    };
    // SAFETY: `file`, when not null, is the live `sqlite3_file` above;
    // its methods are null while it is not open.
    let sync = (code == ffi::SQLITE_OK && !file.is_null())
        .then(|| unsafe { (*file).pMethods.as_ref() })
        .flatten()
        .and_then(|methods| methods.xSync);
    let outcome = match sync {
        None => Err(Unsynced::NoFile),
        // SAFETY: the VFS's own sync of its own open file, called as SQLite
        // calls it, with no other call on this connection under way.
        Some(sync) => match unsafe { sync(file, ffi::SQLITE_SYNC_NORMAL) } {
            ffi::SQLITE_OK => Ok(()),
            code => Err(Unsynced::Failed(code)),
        },
    };
    outcome.map_err(|unsynced| StoreError::Other(DriverError::new(unsynced)))
}

/// Why the database file could not be synced.
#[derive(Debug, thiserror::Error)]
enum Unsynced {
    /// The connection has no open file (an in-memory database).
    #[error("the database has no open file to sync")]
    NoFile,
    #[error("the database file could not be synced (SQLite result code {0})")]
    Failed(std::os::raw::c_int),
}

fn connect(file: &PathBuf) -> StoreResult<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    // Never creating the file: the pool made it and ran the migrations
    // before any request could ask.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection = rusqlite::Connection::open_with_flags(file, flags).map_err(classify)?;
    for (name, value) in CONNECTION_PRAGMAS {
        connection
            .pragma_update(None, name, value)
            .map_err(classify)?;
    }
    // Never sleep on this thread for a lock: a busy read goes to sqlx
    // (`Store::read_rows`), whose worker may wait; a busy write waits off
    // the thread and asks again (`Store::write_steps`).
    connection.busy_timeout(Duration::ZERO).map_err(classify)?;
    // Commits here do not checkpoint (but past the safety net); they tell
    // `wal_checkpoint` the WAL's length. After the pragmas: setting
    // `wal_autocheckpoint` would replace this hook.
    // SAFETY: this open connection's handle; the hook keeps no pointer
    // (its argument is null) and lives as long as the program.
    unsafe {
        rusqlite::ffi::sqlite3_wal_hook(connection.handle(), Some(wal_hook), std::ptr::null_mut());
    }
    connection.set_prepared_statement_cache_capacity(STATEMENTS_PER_CONNECTION);
    Ok(connection)
}

/// The rows of `sql` with `params` (only the first when `first_only`),
/// each decoded by `decode`.
pub(crate) fn fetch<T>(
    connection: &rusqlite::Connection,
    sql: &str,
    params: &[Param<'_>],
    decode: impl Fn(&dyn ReadRow) -> StoreResult<T>,
    first_only: bool,
) -> StoreResult<Vec<T>> {
    log_statement("direct read", sql);
    let mut statement = connection.prepare_cached(sql).map_err(classify)?;
    bind(&mut statement, params)?;
    // Dropping the rows resets the statement, which ends its read
    // transaction: the next read sees every commit made before it.
    let mut rows = statement.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(classify)? {
        out.push(decode(&DirectRow(row))?);
        if first_only {
            break;
        }
    }
    Ok(out)
}

/// Logs a statement run outside sqlx (here and on PostgreSQL's lane) under
/// sqlx's target, so that the one switch that shows the statements sqlx
/// runs (`sqlx::query=debug`) shows these too, and
/// `tests/api/query_plans.rs` plans them as it plans sqlx's.
pub(crate) fn log_statement(summary: &'static str, sql: &str) {
    tracing::debug!(target: "sqlx::query", summary, db.statement = sql);
}

/// A driver's error as the store's: SQLite busy or locked is worth a
/// retry, a unique rule's refusal names the rule (as sqlx's and the
/// PostgreSQL lane's do), a value of the wrong type is corrupt data, the
/// rest a bug.
fn classify(err: rusqlite::Error) -> StoreError {
    let classified = match &err {
        _ if is_busy(&err) => StoreError::Unavailable(DriverError::new(err)),
        rusqlite::Error::SqliteFailure(failure, Some(message))
            if matches!(
                failure.extended_code,
                rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            ) =>
        {
            StoreError::Conflict(super::error::Constraint::of_report(message))
        }
        rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => StoreError::Corrupt(err.to_string()),
        _ => StoreError::Other(DriverError::new(err)),
    };
    classified.counted()
}

/// A row of either driver, read by column index: the one shape each hot
/// read's decoding is written against.
pub(crate) trait ReadRow {
    fn int(&self, index: usize) -> StoreResult<Option<i64>>;
    fn text(&self, index: usize) -> StoreResult<Option<String>>;
    fn bytes(&self, index: usize) -> StoreResult<Option<Vec<u8>>>;
}

/// The columns of a row from `first` on, read as a row of their own: a
/// table's one decoding also reads its columns where a join put them after
/// another table's.
pub(crate) struct ColumnsFrom<'a> {
    pub row: &'a dyn ReadRow,
    pub first: usize,
}

impl ReadRow for ColumnsFrom<'_> {
    fn int(&self, index: usize) -> StoreResult<Option<i64>> {
        self.row.int(self.first + index)
    }
    fn text(&self, index: usize) -> StoreResult<Option<String>> {
        self.row.text(self.first + index)
    }
    fn bytes(&self, index: usize) -> StoreResult<Option<Vec<u8>>> {
        self.row.bytes(self.first + index)
    }
}

/// Reading a column that must not be NULL.
pub(crate) fn required<T>(value: Option<T>, index: usize) -> StoreResult<T> {
    value.ok_or_else(|| StoreError::Corrupt(format!("column {index} is NULL")))
}

/// A rusqlite row.
struct DirectRow<'a>(&'a rusqlite::Row<'a>);

impl ReadRow for DirectRow<'_> {
    fn int(&self, index: usize) -> StoreResult<Option<i64>> {
        self.0.get(index).map_err(classify)
    }
    fn text(&self, index: usize) -> StoreResult<Option<String>> {
        self.0.get(index).map_err(classify)
    }
    fn bytes(&self, index: usize) -> StoreResult<Option<Vec<u8>>> {
        self.0.get(index).map_err(classify)
    }
}

/// A sqlx row, of either backend.
pub(crate) struct Sqlx<'a, R>(pub &'a R);

impl<R> ReadRow for Sqlx<'_, R>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database>,
    for<'r> Option<Vec<u8>>: sqlx::Decode<'r, R::Database>,
    i64: sqlx::Type<R::Database>,
    String: sqlx::Type<R::Database>,
    Vec<u8>: sqlx::Type<R::Database>,
{
    fn int(&self, index: usize) -> StoreResult<Option<i64>> {
        Ok(self.0.try_get(index)?)
    }
    fn text(&self, index: usize) -> StoreResult<Option<String>> {
        Ok(self.0.try_get(index)?)
    }
    fn bytes(&self, index: usize) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.0.try_get(index)?)
    }
}

/// A closed set's word read back: outside its set it is corrupt data.
pub(crate) fn word<T>(
    row: &dyn ReadRow,
    index: usize,
    parse: impl FnOnce(&str) -> Option<T>,
) -> StoreResult<T> {
    let text = required(row.text(index)?, index)?;
    parse(&text).ok_or_else(|| StoreError::Corrupt(format!("{text:?} is not a known word")))
}

/// `sqlx::FromRow` for a row type through its one decoding,
/// `fn read(&dyn ReadRow) -> StoreResult<Self>`, so that `query_as` reads
/// it as the direct path does.
macro_rules! from_read_row {
    ($($row:ty),+ $(,)?) => {$(
        impl<'r, R> sqlx::FromRow<'r, R> for $row
        where
            R: sqlx::Row,
            for<'a> $crate::store::direct::Sqlx<'a, R>: $crate::store::direct::ReadRow,
        {
            fn from_row(row: &'r R) -> sqlx::Result<Self> {
                <$row>::read(&$crate::store::direct::Sqlx(row))
                    .map_err(|err| sqlx::Error::Decode(err.to_string().into()))
            }
        }
    )+};
}
pub(crate) use from_read_row;

/// Positional parameters of a statement both drivers run (`$1`, `$2` …).
/// A NULL is typed (`MaybeText`, `MaybeInt`): PostgreSQL checks the type of
/// every parameter, even a NULL one.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Param<'a> {
    Int(i64),
    Text(&'a str),
    Bytes(&'a [u8]),
    MaybeText(Option<&'a str>),
    MaybeInt(Option<i64>),
}

/// A [`Param`] that outlives its caller's borrow, to wait in a queue
/// (`gathering`).
pub(crate) enum OwnedParam {
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
    MaybeText(Option<String>),
    MaybeInt(Option<i64>),
}

impl OwnedParam {
    pub(crate) fn of(param: &Param<'_>) -> Self {
        match *param {
            Param::Int(value) => OwnedParam::Int(value),
            Param::Text(value) => OwnedParam::Text(value.to_owned()),
            Param::Bytes(value) => OwnedParam::Bytes(value.to_vec()),
            Param::MaybeText(value) => OwnedParam::MaybeText(value.map(str::to_owned)),
            Param::MaybeInt(value) => OwnedParam::MaybeInt(value),
        }
    }

    pub(crate) fn param(&self) -> Param<'_> {
        match self {
            OwnedParam::Int(value) => Param::Int(*value),
            OwnedParam::Text(value) => Param::Text(value),
            OwnedParam::Bytes(value) => Param::Bytes(value),
            OwnedParam::MaybeText(value) => Param::MaybeText(value.as_deref()),
            OwnedParam::MaybeInt(value) => Param::MaybeInt(*value),
        }
    }
}

/// Binds `params` to the statement's `$1` … `$n` by name: SQLite numbers
/// named parameters by first appearance, not by the digits in their names.
fn bind(statement: &mut rusqlite::CachedStatement<'_>, params: &[Param<'_>]) -> StoreResult<()> {
    const NAMES: [&str; 16] = [
        "$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8", "$9", "$10", "$11", "$12", "$13", "$14",
        "$15", "$16",
    ];
    if params.len() > NAMES.len() || statement.parameter_count() > params.len() {
        return Err(StoreError::Corrupt(format!(
            "a statement binds {} parameters for {} placeholders",
            params.len(),
            statement.parameter_count()
        )));
    }
    for (param, name) in params.iter().zip(NAMES) {
        let Some(index) = statement.parameter_index(name).map_err(classify)? else {
            continue;
        };
        match *param {
            Param::Int(value) => statement.raw_bind_parameter(index, value),
            Param::Text(value) => statement.raw_bind_parameter(index, value),
            Param::Bytes(value) => statement.raw_bind_parameter(index, value),
            Param::MaybeText(value) => statement.raw_bind_parameter(index, value),
            Param::MaybeInt(value) => statement.raw_bind_parameter(index, value),
        }
        .map_err(classify)?;
    }
    Ok(())
}

/// Binds `params` to a sqlx query of either backend, in order.
pub(crate) fn bind_all<'q, DB>(
    mut query: sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>>,
    params: &[Param<'q>],
) -> sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>>
where
    DB: sqlx::Database,
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q [u8]: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    for param in params {
        query = match *param {
            Param::Int(value) => query.bind(value),
            Param::Text(value) => query.bind(value),
            Param::Bytes(value) => query.bind(value),
            Param::MaybeText(value) => query.bind(value),
            Param::MaybeInt(value) => query.bind(value),
        };
    }
    query
}

/// Runs a write's `steps` in the open sqlx transaction `tx` (either
/// backend) and ends it: committed (`Ok(None)`), or rolled back with the
/// answer of the first step that did not touch exactly one row. A macro,
/// not a function: sqlx's executor bounds over both backends' transaction
/// types would be longer than the loop.
macro_rules! run_steps {
    ($tx:ident, $steps:expr) => {{
        let mut answer = None;
        for step in $steps {
            let touched = $crate::store::direct::bind_all(sqlx::query(step.sql), &step.params)
                .execute(&mut *$tx)
                .await?
                .rows_affected();
            if touched != 1 && step.unless_one_row.is_some() {
                answer = step.unless_one_row;
                break;
            }
        }
        match answer {
            Some(answer) => $tx.rollback().await.map(|()| Some(answer)),
            None => $tx.commit().await.map(|()| None),
        }
        .map_err($crate::store::StoreError::from)
    }};
}
pub(crate) use run_steps;

/// One statement of a write transaction, for either driver: its text, its
/// parameters, and what the transaction answers (rolled back) when the
/// statement does not touch exactly one row.
pub(crate) struct Step<'a, O> {
    pub sql: &'a str,
    pub params: Vec<Param<'a>>,
    pub unless_one_row: Option<O>,
}

impl<'a, O> Step<'a, O> {
    pub(crate) fn new(sql: &'a str, params: Vec<Param<'a>>) -> Self {
        Step {
            sql,
            params,
            unless_one_row: None,
        }
    }
}

/// A [`Step`] that outlives its caller's borrows, to wait in a queue
/// (`write_groups`).
pub(crate) struct OwnedStep<O> {
    sql: Box<str>,
    params: Vec<OwnedParam>,
    unless_one_row: Option<O>,
}

impl<O: Copy> OwnedStep<O> {
    pub(crate) fn of(step: &Step<'_, O>) -> Self {
        OwnedStep {
            sql: step.sql.into(),
            params: step.params.iter().map(OwnedParam::of).collect(),
            unless_one_row: step.unless_one_row,
        }
    }

    pub(crate) fn step(&self) -> Step<'_, O> {
        Step {
            sql: &self.sql,
            params: self.params.iter().map(OwnedParam::param).collect(),
            unless_one_row: self.unless_one_row,
        }
    }

    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }
}

/// How a direct write transaction went.
pub(crate) enum Written<O> {
    /// Committed, leaving the WAL `wal_pages` long (0 when the commit
    /// wrote nothing).
    Committed { wal_pages: u32 },
    /// Rolled back with a step's answer.
    Answered(O),
    /// Another connection (another process) holds the write lock: nothing
    /// was done; the caller waits off this thread and asks again.
    Busy,
}

/// `steps` in one `BEGIN IMMEDIATE` transaction on this thread, never
/// waiting for the write lock here.
pub(crate) fn write<O: Copy>(
    connection: &rusqlite::Connection,
    steps: &[Step<'_, O>],
) -> StoreResult<Written<O>> {
    if !connection.is_autocommit() {
        // Never expected (every path below ends its transaction); if it
        // were, nothing half-done may be committed with this one.
        connection.execute_batch("ROLLBACK").map_err(classify)?;
    }
    match connection.execute_batch("BEGIN IMMEDIATE") {
        Ok(()) => {}
        Err(err) if is_busy(&err) => return Ok(Written::Busy),
        Err(err) => return Err(classify(err)),
    }
    let run = || -> StoreResult<Option<O>> {
        for step in steps {
            log_statement("direct write", step.sql);
            let mut statement = connection.prepare_cached(step.sql).map_err(classify)?;
            bind(&mut statement, &step.params)?;
            let touched = statement.raw_execute().map_err(classify)?;
            if touched != 1
                && let Some(answer) = step.unless_one_row
            {
                return Ok(Some(answer));
            }
        }
        Ok(None)
    };
    let outcome = run().and_then(|answer| match answer {
        None => {
            WAL_PAGES_AT_COMMIT.set(0);
            connection
                .execute_batch("COMMIT")
                .map(|()| Written::Committed {
                    wal_pages: WAL_PAGES_AT_COMMIT.get(),
                })
                .map_err(classify)
        }
        Some(answer) => Ok(Written::Answered(answer)),
    });
    if !connection.is_autocommit() {
        // A step's answer or an error: nothing of it stays.
        let _ = connection.execute_batch("ROLLBACK");
    }
    outcome
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err,
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_file_is_synced_through_sqlites_own_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let connection = rusqlite::Connection::open(dir.path().join("synced.db")).unwrap();
        connection
            .execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        connection
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .unwrap();
        sync_database_file(&connection).unwrap();
        // The connection is still whole: its locks were not touched.
        connection.execute("INSERT INTO t VALUES (2)", []).unwrap();
        let rows: i64 = connection
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 2);
    }

    /// A direct connection on a new WAL-mode file, with one table.
    fn wal_file(dir: &tempfile::TempDir) -> rusqlite::Connection {
        let file = dir.path().join("wal.db");
        rusqlite::Connection::open(&file)
            .unwrap()
            .execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x BLOB);")
            .unwrap();
        connect(&file).unwrap()
    }

    fn insert_pages<'a>(pages: i64) -> Step<'a, ()> {
        Step::new(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) \
             INSERT INTO t SELECT zeroblob(3000) FROM n",
            vec![Param::Int(pages)],
        )
    }

    fn committed_wal_pages(written: Written<()>) -> u32 {
        match written {
            Written::Committed { wal_pages } => wal_pages,
            _ => panic!("not committed"),
        }
    }

    /// sqlx's connections take their safety net from the pragmas.
    #[test]
    fn every_connection_has_the_same_safety_net() {
        let pragma = CONNECTION_PRAGMAS
            .iter()
            .find(|(name, _)| *name == "wal_autocheckpoint")
            .map(|(_, value)| value.parse::<u32>().unwrap());
        assert_eq!(pragma, Some(WAL_SAFETY_NET_PAGES));
    }

    /// `wal_checkpoint` decides from the WAL's length the commit reports.
    #[test]
    fn a_commit_reports_the_wals_length() {
        let dir = tempfile::tempdir().unwrap();
        let connection = wal_file(&dir);
        let first = committed_wal_pages(write(&connection, &[insert_pages(10)]).unwrap());
        assert!((10..20).contains(&first), "{first}");
        let second = committed_wal_pages(write(&connection, &[insert_pages(10)]).unwrap());
        assert!(second >= first + 10, "{first} then {second}");
    }

    /// The hook replaced `wal_autocheckpoint`'s, and keeps its safety net: a
    /// commit past it checkpoints, and the next commit starts the WAL over.
    #[test]
    fn a_commit_past_the_safety_net_still_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let connection = wal_file(&dir);
        let net = i64::from(WAL_SAFETY_NET_PAGES);
        let past = committed_wal_pages(write(&connection, &[insert_pages(net)]).unwrap());
        assert!(past >= WAL_SAFETY_NET_PAGES, "{past}");
        let after = committed_wal_pages(write(&connection, &[insert_pages(1)]).unwrap());
        assert!(after < 10, "the WAL started over: {after} pages");
    }

    /// No file to sync: an error, not a call through a null method.
    #[test]
    fn an_in_memory_database_has_no_file_to_sync() {
        let connection = rusqlite::Connection::open_in_memory().unwrap();
        let error = sync_database_file(&connection).unwrap_err();
        assert!(format!("{error:?}").contains("NoFile"), "{error:?}");
    }
}
