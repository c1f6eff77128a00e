//! The audit trail of MCP tool calls: who called which capability at which
//! revision, how it ended, how long it took and how many attempts it made.
//! Never the arguments or the result.

use super::direct::{Param, Step};
use super::{Store, StoreResult, on_pool};
use crate::domain::account::AccountId;
use crate::domain::closed_set::closed_set;

closed_set! {
    /// How an MCP tool call ended.
    pub enum McpCallStatus {
        Succeeded = "succeeded",
        Failed = "failed",
    }
}

#[derive(Debug, Clone, serde::Serialize, sqlx::FromRow)]
pub struct McpCallRecord {
    pub id: String,
    /// The API key that made the call (`key_…`); none once the key is gone.
    pub key_id: Option<String>,
    pub capability_id: String,
    pub revision: i64,
    pub status: McpCallStatus,
    /// Why it failed: the executor's reason word (`timeout`,
    /// `arguments_invalid`, …), kept as text like a contract test's.
    pub reason: Option<String>,
    pub attempts: i64,
    pub duration_ms: i64,
    /// Unix milliseconds.
    pub created_at: i64,
}

/// Records one `warden admin mcp calls` shows at most.
pub const MAX_LISTED_CALLS: i64 = 1000;

impl Store {
    /// Records a call made with the key whose hash is `key_hash` (its id is
    /// looked up in the same statement; `record.key_id` is not read).
    pub async fn insert_mcp_call(
        &self,
        account: &AccountId,
        key_hash: &str,
        record: &McpCallRecord,
    ) -> StoreResult<()> {
        // `seq` is read and written in this one statement: SQLite's writes
        // are serial; two concurrent PostgreSQL calls may share one, and
        // then their ids order them, as any two calls at once.
        // On the direct path, as a contract test's record: the sqlx pool's
        // hand-off (SQLite) and release ping (PostgreSQL) made a call cost
        // a third more CPU than a contract test.
        let step = Step::<()>::new(
            "INSERT INTO mcp_calls (id, account_id, key_id, capability_id, revision, status, reason, \
             attempts, duration_ms, created_at, seq) \
             VALUES ($1, $2, (SELECT key_id FROM api_keys WHERE key_hash = $3 AND account_id = $2), \
             $4, $5, $6, $7, $8, $9, $10, \
             (SELECT COALESCE(MAX(seq), 0) + 1 FROM mcp_calls WHERE account_id = $2))",
            vec![
                Param::Text(&record.id),
                Param::Int(account.number()),
                Param::Text(key_hash),
                Param::Text(&record.capability_id),
                Param::Int(record.revision),
                Param::Text(record.status.as_str()),
                Param::MaybeText(record.reason.as_deref()),
                Param::Int(record.attempts),
                Param::Int(record.duration_ms),
                Param::Int(record.created_at),
            ],
        );
        self.write_steps(&[step]).await?;
        Ok(())
    }

    /// The account's latest `limit` calls, newest first: in the order they
    /// were written (`seq`, one more than the account's last), not by their
    /// millisecond, which two quick calls share.
    pub async fn list_mcp_calls(
        &self,
        account: &AccountId,
        limit: i64,
    ) -> StoreResult<Vec<McpCallRecord>> {
        Ok(on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, key_id, capability_id, revision, status, reason, attempts, duration_ms, created_at \
                 FROM mcp_calls WHERE account_id = $1 ORDER BY seq DESC, id DESC LIMIT $2",
            )
            .bind(account.number())
            .bind(limit.clamp(1, MAX_LISTED_CALLS))
            .fetch_all(pool)
            .await
        })?)
    }
}
