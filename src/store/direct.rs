//! SQLite's hot reads on the thread that asks for them.
//!
//! sqlx-sqlite runs every statement on a worker thread of its own and hands
//! the command over and the rows back through channels: two thread wake-ups
//! per statement, 15–25 µs of CPU against ~3 µs for the read itself
//! (docs/benchmarks.md, "Instructions per request"). The reads every request
//! makes (the API key, the turn's basis, the credential, the capability, a
//! continued conversation's row, messages, references and pending
//! operation) run instead on a connection that refuses writes, kept by each
//! runtime thread, through rusqlite, with its prepared statements cached.
//! Each statement's text and
//! its row decoding are still written once, in the module that owns the
//! table: the text is shared with the PostgreSQL path, and the decoding is
//! written against [`ReadRow`], which both drivers' rows implement.
//!
//! Why this is safe here: in WAL mode a reader takes no lock a writer waits
//! for, and waits for none itself (only a recovery could make it wait: then
//! it is refused at once, busy, and the read goes through sqlx instead); a
//! read by an index is microseconds, shorter than the hand-off it
//! replaces (a conversation's recent messages are bounded by a `LIMIT`). Each read is its own transaction, ended when its statement is
//! reset, so it sees every commit made before it began, on any connection.
//! Writes stay on sqlx, behind the write gate. An in-memory database is one
//! connection's own, so its reads stay on sqlx too ([`DirectReads::open`]
//! says `None`).

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

/// Reads on this thread's own connections (one per database).
pub(crate) struct DirectReads;

impl DirectReads {
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
fn file_of(options: &SqliteConnectOptions) -> Option<PathBuf> {
    let file = options.get_filename();
    let name = file.to_string_lossy();
    if name.is_empty() || name == ":memory:" || name.contains("mode=memory") {
        return None;
    }
    Some(file.to_path_buf())
}

fn connect(file: &PathBuf) -> StoreResult<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    // Never creating the file: the pool made it and ran the migrations
    // before any request could ask. Opened for writing but refusing writes
    // (`query_only`), not read-only: a read-only connection cannot make the
    // WAL's shared-memory file, which the last sqlx connection to close may
    // have removed.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection = rusqlite::Connection::open_with_flags(file, flags).map_err(classify)?;
    connection
        .pragma_update(None, "query_only", true)
        .map_err(classify)?;
    // A WAL reader waits for nothing but a recovery or the WAL index being
    // rebuilt; rather than sleep on this thread then, the read goes to sqlx
    // (`Store::read_optional`), whose worker may wait.
    connection.busy_timeout(Duration::ZERO).map_err(classify)?;
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
    // Logged under sqlx's target, so that the one switch that shows the
    // statements sqlx runs (`sqlx::query=debug`) shows these too (and
    // `tests/api/query_plans.rs` plans them on SQLite as on PostgreSQL).
    tracing::debug!(target: "sqlx::query", summary = "direct read", db.statement = sql);
    let mut statement = connection.prepare_cached(sql).map_err(classify)?;
    bind(&mut statement, params)?;
    // Dropping the rows resets the statement, which ends its read
    // transaction: the next read sees every commit made before it.
    let mut rows = statement.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(classify)? {
        out.push(decode(&Direct(row))?);
        if first_only {
            break;
        }
    }
    Ok(out)
}

/// A driver's error as the store's: SQLite busy or locked is worth a
/// retry, a value of the wrong type is corrupt data, the rest a bug.
fn classify(err: rusqlite::Error) -> StoreError {
    let classified = match &err {
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            StoreError::Unavailable(DriverError::new(err))
        }
        rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => StoreError::Corrupt(err.to_string()),
        _ => StoreError::Other(DriverError::new(err)),
    };
    crate::metrics::db_statement_error(classified.class());
    classified
}

/// A row of either driver, read by column index: the one shape each hot
/// read's decoding is written against.
pub(crate) trait ReadRow {
    fn int(&self, index: usize) -> StoreResult<Option<i64>>;
    fn text(&self, index: usize) -> StoreResult<Option<String>>;
    fn bytes(&self, index: usize) -> StoreResult<Option<Vec<u8>>>;
}

/// Reading a column that must not be NULL.
pub(crate) fn required<T>(value: Option<T>, index: usize) -> StoreResult<T> {
    value.ok_or_else(|| StoreError::Corrupt(format!("column {index} is NULL")))
}

/// A rusqlite row.
struct Direct<'a>(&'a rusqlite::Row<'a>);

impl ReadRow for Direct<'_> {
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
#[derive(Clone, Copy, Debug)]
pub(crate) enum Param<'a> {
    Int(i64),
    Text(&'a str),
}

/// Binds `params` to the statement's `$1` … `$n` by name: SQLite numbers
/// named parameters by first appearance, not by the digits in their names.
fn bind(statement: &mut rusqlite::CachedStatement<'_>, params: &[Param<'_>]) -> StoreResult<()> {
    const NAMES: [&str; 9] = ["$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8", "$9"];
    if params.len() > NAMES.len() || statement.parameter_count() > params.len() {
        return Err(StoreError::Corrupt(format!(
            "a direct read binds {} parameters for {} placeholders",
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
        }
        .map_err(classify)?;
    }
    Ok(())
}
