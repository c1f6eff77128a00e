//! Contract-test records: the sanitized outcome of each test run.

use super::direct::Param;
use super::{Store, StoreResult, on_pool};
use crate::domain::account::AccountId;
use crate::domain::closed_set::closed_set;

closed_set! {
    /// The outcome of a contract test (contract 2.7).
    pub enum TestStatus {
        Passed = "passed",
        Failed = "failed",
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TestRecord {
    pub id: String,
    pub capability_id: String,
    pub revision: i64,
    pub status: TestStatus,
    pub reason: Option<String>,
    pub http_status: Option<i64>,
    pub attempts: i64,
    pub duration_ms: i64,
    pub created_at: i64,
}

/// The statement that records one contract test.
pub(crate) const INSERT_TEST_RECORD: &str = "INSERT INTO capability_tests (id, account_id, capability_id, revision, \
     status, reason, http_status, attempts, duration_ms, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

impl Store {
    pub async fn insert_test_record(
        &self,
        account: &AccountId,
        record: &TestRecord,
    ) -> StoreResult<()> {
        self.insert_record(
            INSERT_TEST_RECORD,
            vec![
                Param::Text(&record.id),
                Param::Int(account.number()),
                Param::Text(&record.capability_id),
                Param::Int(record.revision),
                Param::Text(record.status.as_str()),
                Param::MaybeText(record.reason.as_deref()),
                Param::MaybeInt(record.http_status),
                Param::Int(record.attempts),
                Param::Int(record.duration_ms),
                Param::Int(record.created_at),
            ],
        )
        .await
    }

    /// The account's latest `limit` test records of one capability, newest first.
    pub async fn list_test_records(
        &self,
        account: &AccountId,
        capability_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<TestRecord>> {
        Ok(on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, capability_id, revision, status, reason, http_status, attempts, duration_ms, created_at \
                 FROM capability_tests WHERE account_id = $1 AND capability_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3",
            )
            .bind(account.number())
            .bind(capability_id)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }
}
