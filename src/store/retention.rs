//! Retention purges: each call removes at most one batch of what is older
//! than a cutoff, in one short statement or transaction, walking an index
//! by age (migration 0015). The caller ([`crate::retention`]) repeats
//! until a batch comes back short.
//!
//! Any number of replicas may purge at once: on PostgreSQL each batch
//! locks the rows it takes with `SKIP LOCKED`, so replicas take disjoint
//! batches and never wait on a turn that holds a conversation; on SQLite
//! the single writer orders them. A batch is idempotent: what another
//! replica removed first is simply not counted again.

use super::data_requests::{RemovedCounts, delete_conversations};
use super::platform::InboundState;
use super::{Store, StoreResult, on_pool};
use crate::domain::closed_set::closed_set;

closed_set! {
    /// Records kept for a stated time and then deleted whole (none holds
    /// what a user said).
    pub enum AgedRecords {
        /// The MCP tool calls' audit trail (`mcp_calls`).
        McpCalls = "mcp_calls",
        /// Contract-test records (`capability_tests`).
        ContractTests = "capability_tests",
        /// Prompt-integration usage records (`prompt_integration_usage`).
        PromptUsage = "prompt_integration_usage",
        /// The platform queue's finished (replied or dead) messages.
        FinishedPlatformMessages = "platform_inbound",
        /// Idempotency records past their replay window.
        IdempotencyRecords = "idempotency_records",
        /// Client event ids of the HTTP channel, kept a day for deduplication.
        ClientEventIds = "channel_events",
        /// Pending operations past their expiry.
        ExpiredPendingOperations = "pending_operations",
        /// Spent prompt-integration challenge tokens.
        PromptTokens = "prompt_integration_tokens",
        /// Prompt-integration burst counters idle for a day.
        PromptBursts = "prompt_integration_bursts",
    }
}

impl AgedRecords {
    /// `(key columns, age column, extra predicate)`: the key is the
    /// table's primary key (a row value when it has several columns); the
    /// predicate repeats the partial index's literally, so both planners
    /// use it. Each age column has an index (migrations 0012, 0015, 0016).
    fn columns(self) -> (&'static str, &'static str, String) {
        match self {
            AgedRecords::McpCalls | AgedRecords::PromptUsage => ("id", "created_at", String::new()),
            AgedRecords::ContractTests => {
                ("capability_id, created_at, id", "created_at", String::new())
            }
            AgedRecords::IdempotencyRecords => {
                ("account_id, idempotency_key", "expires_at", String::new())
            }
            AgedRecords::ClientEventIds => ("account_id, event_id", "received_at", String::new()),
            AgedRecords::ExpiredPendingOperations => {
                ("conversation_id", "expires_at", String::new())
            }
            AgedRecords::PromptTokens => ("token_hash", "used_at", String::new()),
            AgedRecords::PromptBursts => ("integration_id, client", "t3", String::new()),
            AgedRecords::FinishedPlatformMessages => (
                "seq",
                "received_at",
                format!(
                    " AND state IN ('{}', '{}')",
                    InboundState::Replied.as_str(),
                    InboundState::Dead.as_str()
                ),
            ),
        }
    }
}

impl Store {
    fn skip_locked(&self) -> &'static str {
        match self {
            Store::Postgres(_) => "FOR UPDATE SKIP LOCKED",
            Store::Sqlite(_) => "",
        }
    }

    /// Deletes up to `batch` conversations whose last activity is before
    /// `cutoff`, with their messages, interactions, pending operation and
    /// references; their gap events keep their metadata but lose any text.
    pub async fn purge_conversations_batch(
        &self,
        cutoff: i64,
        batch: i64,
    ) -> StoreResult<RemovedCounts> {
        let select = format!(
            "SELECT id FROM conversations WHERE updated_at < $1 ORDER BY updated_at, id LIMIT $2 {}",
            self.skip_locked()
        );
        let mut counts = RemovedCounts::default();
        let begin = self.write_transaction_statement();
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let ids: Vec<String> = sqlx::query_scalar(&select)
                .bind(cutoff)
                .bind(batch)
                .fetch_all(&mut *tx)
                .await?;
            if !ids.is_empty() {
                delete_conversations!(tx, ids, counts, false);
            }
            tx.commit().await?;
        });
        Ok(counts)
    }

    /// Clears the message text of up to `batch` gap events that occurred
    /// before `cutoff` (the event stays, as metadata).
    pub async fn clear_gap_texts_batch(&self, cutoff: i64, batch: i64) -> StoreResult<u64> {
        let sql = format!(
            "UPDATE gap_events SET message_text = NULL WHERE id IN (SELECT id FROM gap_events \
             WHERE message_text IS NOT NULL AND occurred_at < $1 ORDER BY occurred_at LIMIT $2 {})",
            self.skip_locked()
        );
        let _gate = self.write_turn().await;
        Ok(on_pool!(self, pool => {
            sqlx::query(&sql).bind(cutoff).bind(batch).execute(pool).await.map(|r| r.rows_affected())
        })?)
    }

    /// Deletes up to `batch` records of `kind` older than `cutoff`.
    pub async fn purge_aged_batch(
        &self,
        kind: AgedRecords,
        cutoff: i64,
        batch: i64,
    ) -> StoreResult<u64> {
        let (key, age, predicate) = kind.columns();
        let table = kind.as_str();
        let sql = format!(
            "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} \
             WHERE {age} < $1{predicate} ORDER BY {age} LIMIT $2 {})",
            self.skip_locked()
        );
        let _gate = self.write_turn().await;
        Ok(on_pool!(self, pool => {
            sqlx::query(&sql).bind(cutoff).bind(batch).execute(pool).await.map(|r| r.rows_affected())
        })?)
    }

    /// Deletes prompt-integration quota tallies of UTC days before `day`
    /// (`YYYY-MM-DD`): one row per integration and day, so a handful.
    pub async fn purge_prompt_quota_days(&self, day: &str) -> StoreResult<u64> {
        let _gate = self.write_turn().await;
        Ok(on_pool!(self, pool => {
            sqlx::query("DELETE FROM prompt_integration_quota WHERE day < $1")
                .bind(day)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?)
    }
}
