//! Direct reads and writes of a test's database, either backend: what is
//! stored, and rows put the way an older build or an operator would.

use crate::helpers::TestApp;
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
    match &app.store {
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
