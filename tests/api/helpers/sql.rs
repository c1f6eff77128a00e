//! Direct reads and writes of a test's database, either backend: what is
//! stored, and rows put the way an older build or an operator would.

use crate::helpers::{Backend, TestApp, TestDb};
use warden::store::Store;

/// One text column of every row a query returns.
pub async fn strings(app: &TestApp, sql: &str) -> Vec<Option<String>> {
    column(app, sql).await
}

/// One integer column of every row a query returns.
pub async fn integers(app: &TestApp, sql: &str) -> Vec<i64> {
    column(app, sql).await
}

/// One column of every row a query returns, as `T` on either backend.
async fn column<T>(app: &TestApp, sql: &str) -> Vec<T>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
    T: Send + Unpin,
{
    match &app.store {
        Store::Sqlite(pool) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
        Store::Postgres(pool) => sqlx::query_scalar(sql)
            .fetch_all(pool.pool())
            .await
            .unwrap(),
    }
}

/// Runs one statement; the rows it touched.
pub async fn execute(app: &TestApp, sql: &str) -> u64 {
    execute_on(&app.store, sql).await
}

/// [`execute`] on a store of its own.
pub async fn execute_on(store: &Store, sql: &str) -> u64 {
    match store {
        Store::Sqlite(pool) => sqlx::query(sql)
            .execute(pool)
            .await
            .unwrap()
            .rows_affected(),
        Store::Postgres(pool) => sqlx::query(sql)
            .execute(pool.pool())
            .await
            .unwrap()
            .rows_affected(),
    }
}

/// A database as a build before migration `version` left it: the earlier
/// migrations applied, then `statements` run.
pub async fn database_before_migration(
    db: &TestDb,
    backend: Backend,
    version: i64,
    statements: &[&str],
) {
    use sqlx::migrate::Migrator;
    fn before(mut migrator: Migrator, version: i64) -> Migrator {
        let earlier: Vec<_> = migrator
            .iter()
            .filter(|m| m.version < version)
            .cloned()
            .collect();
        migrator.migrations = earlier.into();
        migrator
    }
    // The same steps on either pool type (bounds generic over sqlx's two
    // would be longer than the steps).
    macro_rules! migrate_then_write {
        ($pool:expr, $migrations:literal) => {{
            let pool = $pool;
            before(sqlx::migrate!($migrations), version)
                .run(&pool)
                .await
                .unwrap();
            for sql in statements {
                sqlx::query(sql).execute(&pool).await.unwrap();
            }
            pool.close().await;
        }};
    }
    match backend {
        Backend::Sqlite => {
            let options: sqlx::sqlite::SqliteConnectOptions = db.url.parse().unwrap();
            let options = options.create_if_missing(true).foreign_keys(true);
            migrate_then_write!(
                sqlx::SqlitePool::connect_with(options).await.unwrap(),
                "migrations/sqlite"
            )
        }
        Backend::Postgres => migrate_then_write!(
            sqlx::PgPool::connect(&db.url).await.unwrap(),
            "migrations/postgres"
        ),
    }
}
