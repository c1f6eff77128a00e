//! One end user's data, on request: its erasure (everything stored about a
//! user of an account, while servers run) and its export.
//!
//! Erasure races turns in flight on any replica, and neither may write the
//! other's work back:
//! - a turn continuing a conversation updates the conversation's row
//!   first; once the row is gone it writes nothing
//!   ([`super::conversations::CommitOutcome::ConversationGone`]). On
//!   PostgreSQL that update locks the row, and erasure locks the rows it
//!   deletes before their children, so the two run one after the other;
//! - a turn starting a conversation is not written for a user erased after
//!   the turn began: erasure first leaves a mark (`erased_users`), and the
//!   insert checks it in the same statement. SQLite has one writer; on
//!   PostgreSQL the mark is written under an exclusive advisory lock on
//!   the user that such inserts take shared, so none can pass the check
//!   before the mark and commit after the rows were deleted.
//!
//! Deletion runs in batches of [`ERASE_BATCH`] conversations, one short
//! transaction each, so turns of other users keep writing in between.

use serde::Serialize;

use super::{Store, StoreResult, on_pool};
use crate::domain::account::AccountId;
use crate::domain::interaction::{InteractionStatus, InteractionType};
use crate::domain::message::MessageRole;

/// How far apart the clocks of replicas and of the operator's machine may
/// be: a turn that began up to this long after an erasure (by its own
/// clock) is still refused a new conversation for that user.
pub const CLOCK_SKEW_ALLOWANCE_MS: i64 = 5_000;

/// How long an erasure's mark is kept: far beyond any turn's deadline.
pub const ERASURE_MARK_MILLIS: i64 = 60 * 60 * 1000;

/// Conversations deleted per transaction (with their messages, which may
/// be hundreds each): a few milliseconds of SQLite's single write lock.
pub const ERASE_BATCH: i64 = 50;

/// PostgreSQL: the user's advisory lock taken shared, for the rest of the
/// transaction, by a turn about to start a conversation for them (`$1` the
/// user, `$2` the account's number); nothing on SQLite, which has one writer.
pub(crate) const HOLD_USER_SHARED: &str =
    "SELECT pg_advisory_xact_lock_shared(hashtextextended($1, $2))";

/// What an erasure or a retention purge removed, by kind (counts, never
/// content).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct RemovedCounts {
    pub conversations: u64,
    pub messages: u64,
    pub interactions: u64,
    pub pending_operations: u64,
    pub references: u64,
    pub gap_events: u64,
    pub platform_messages: u64,
}

/// `$1, $2, …` for `n` parameters starting at `$first`.
pub(super) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Deletes the rows that hang off the conversations `$ids` (bound from
/// `$1`), then the conversations, on `$tx`; adds to `$counts`. Gap events
/// go whole (`$gap_events` true) or lose only their text.
macro_rules! delete_conversations {
    ($tx:expr, $ids:expr, $counts:expr, $gap_events:expr) => {{
        let list = $crate::store::data_requests::placeholders(1, $ids.len());
        let gap_sql = if $gap_events {
            format!("DELETE FROM gap_events WHERE conversation_id IN ({list})")
        } else {
            format!(
                "UPDATE gap_events SET message_text = NULL \
                 WHERE conversation_id IN ({list}) AND message_text IS NOT NULL"
            )
        };
        let children = [
            (gap_sql, &mut $counts.gap_events),
            (
                format!("DELETE FROM pending_operations WHERE conversation_id IN ({list})"),
                &mut $counts.pending_operations,
            ),
            (
                format!("DELETE FROM conversation_references WHERE conversation_id IN ({list})"),
                &mut $counts.references,
            ),
            (
                format!("DELETE FROM interactions WHERE conversation_id IN ({list})"),
                &mut $counts.interactions,
            ),
            (
                format!("DELETE FROM conversation_messages WHERE conversation_id IN ({list})"),
                &mut $counts.messages,
            ),
        ];
        for (sql, count) in children {
            let mut query = sqlx::query(&sql);
            for id in $ids.iter() {
                query = query.bind(id);
            }
            *count += query.execute(&mut *$tx).await?.rows_affected();
        }
        for sql in [
            format!("DELETE FROM platform_conversations WHERE conversation_id IN ({list})"),
            format!("DELETE FROM conversations WHERE id IN ({list})"),
        ] {
            let mut query = sqlx::query(&sql);
            for id in $ids.iter() {
                query = query.bind(id);
            }
            let deleted = query.execute(&mut *$tx).await?.rows_affected();
            if sql.starts_with("DELETE FROM conversations") {
                $counts.conversations += deleted;
            }
        }
    }};
}
pub(crate) use delete_conversations;

/// Whether SQLite's write-ahead log was emptied into the database file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WalCheckpoint {
    /// The log was copied back and truncated to zero bytes.
    Truncated,
    /// A reader or writer held it: old pages may remain in the log until
    /// the next checkpoint (run the command again, or checkpoint later).
    Busy,
    /// PostgreSQL: no file of this process to checkpoint.
    NotApplicable,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExportedMessage {
    pub role: MessageRole,
    pub at: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExportedInteraction {
    pub interaction_id: String,
    #[serde(rename = "type")]
    pub kind: InteractionType,
    pub operation: String,
    pub status: InteractionStatus,
    pub created_at: String,
    pub closed_at: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExportedGapText {
    pub at: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExportedConversation {
    pub conversation_id: String,
    pub created_at: String,
    pub last_activity_at: String,
    pub messages: Vec<ExportedMessage>,
    pub interactions: Vec<ExportedInteraction>,
    /// Message texts a capability-gap report kept (`text` diagnostic mode).
    pub gap_texts: Vec<ExportedGapText>,
}

/// A platform message of this sender not yet answered (its text is kept
/// only until the turn ran).
#[derive(Debug, Clone, Serialize)]
pub struct ExportedQueuedMessage {
    pub received_at: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct UserExport {
    pub conversations: Vec<ExportedConversation>,
    pub queued_platform_messages: Vec<ExportedQueuedMessage>,
}

impl Store {
    /// Removes everything stored about `user` in `account` (see the module
    /// doc); a second run finds nothing and reports zeros.
    pub async fn erase_user(
        &self,
        account: &AccountId,
        user: &str,
        now: i64,
    ) -> StoreResult<RemovedCounts> {
        self.mark_erased(account, user, now).await?;
        let mut counts = RemovedCounts::default();
        let lock = match self {
            Store::Postgres(_) => "FOR UPDATE",
            Store::Sqlite(_) => "",
        };
        let select = format!(
            "SELECT id FROM conversations WHERE account_id = $1 AND user_id = $2 ORDER BY id LIMIT $3 {lock}"
        );
        loop {
            let begin = self.write_transaction_statement();
            let _gate = self.write_turn().await;
            let more = on_pool!(self, pool => {
                let mut tx = pool.begin_with(begin).await?;
                let ids: Vec<String> = sqlx::query_scalar(&select)
                    .bind(account.number())
                    .bind(user)
                    .bind(ERASE_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
                if !ids.is_empty() {
                    delete_conversations!(tx, ids, counts, true);
                }
                tx.commit().await?;
                ids.len() as i64 == ERASE_BATCH
            });
            if !more {
                break;
            }
        }
        // The platform queue's rows of this sender, whatever their state.
        loop {
            let _gate = self.write_turn().await;
            let deleted = on_pool!(self, pool => {
                sqlx::query(
                    "DELETE FROM platform_inbound WHERE seq IN (SELECT seq FROM platform_inbound \
                     WHERE account_id = $1 AND user_pseudonym = $2 LIMIT $3)",
                )
                .bind(account.number())
                .bind(user)
                .bind(ERASE_BATCH)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
            })?;
            counts.platform_messages += deleted;
            if deleted < ERASE_BATCH as u64 {
                break;
            }
        }
        Ok(counts)
    }

    /// Leaves the erasure's mark, under the user's exclusive lock
    /// (PostgreSQL), so every turn that may still start a conversation for
    /// them either committed before or will see it.
    async fn mark_erased(&self, account: &AccountId, user: &str, now: i64) -> StoreResult<()> {
        let begin = self.write_transaction_statement();
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            if matches!(self, Store::Postgres(_)) {
                sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, $2))")
                    .bind(user)
                    .bind(account.number())
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(
                "INSERT INTO erased_users (account_id, user_id, erased_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (account_id, user_id) DO UPDATE SET erased_at = excluded.erased_at",
            )
            .bind(account.number())
            .bind(user)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })?;
        Ok(())
    }

    /// Deletes erasure marks older than `before`; returns how many.
    pub async fn purge_erasure_marks(&self, before: i64) -> StoreResult<u64> {
        let _gate = self.write_turn().await;
        Ok(on_pool!(self, pool => {
            sqlx::query("DELETE FROM erased_users WHERE erased_at < $1")
                .bind(before)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?)
    }

    /// SQLite: copies the write-ahead log into the database file and
    /// truncates it, so pages that held erased rows are not left in it.
    pub async fn checkpoint_wal(&self) -> StoreResult<WalCheckpoint> {
        match self {
            Store::Postgres(_) => Ok(WalCheckpoint::NotApplicable),
            Store::Sqlite(pool) => {
                let (busy, _, _): (i64, i64, i64) =
                    sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
                        .fetch_one(pool)
                        .await?;
                Ok(if busy == 0 {
                    WalCheckpoint::Truncated
                } else {
                    WalCheckpoint::Busy
                })
            }
        }
    }

    /// Everything stored about `user` in `account` that holds what they
    /// said: conversations oldest first, each message in order.
    pub async fn export_user(&self, account: &AccountId, user: &str) -> StoreResult<UserExport> {
        use crate::clock::to_rfc3339;
        type ConversationRow = (String, i64, i64);
        type InteractionRow = (
            String,
            InteractionType,
            String,
            InteractionStatus,
            i64,
            Option<i64>,
        );
        let mut export = UserExport {
            conversations: Vec::new(),
            queued_platform_messages: Vec::new(),
        };
        let conversations: Vec<ConversationRow> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, created_at, updated_at FROM conversations WHERE account_id = $1 AND user_id = $2 \
                 ORDER BY created_at, id",
            )
            .bind(account.number())
            .bind(user)
            .fetch_all(pool)
            .await
        })?;
        for (id, created_at, updated_at) in conversations {
            let messages: Vec<(MessageRole, i64, String)> = on_pool!(self, pool => {
                sqlx::query_as(
                    "SELECT role, created_at, body FROM conversation_messages WHERE conversation_id = $1 ORDER BY seq",
                )
                .bind(&id)
                .fetch_all(pool)
                .await
            })?;
            let interactions: Vec<InteractionRow> = on_pool!(self, pool => {
                sqlx::query_as(
                    "SELECT id, kind, operation, status, created_at, closed_at FROM interactions \
                     WHERE conversation_id = $1 ORDER BY created_at, id",
                )
                .bind(&id)
                .fetch_all(pool)
                .await
            })?;
            let gap_texts: Vec<(i64, String)> = on_pool!(self, pool => {
                sqlx::query_as(
                    "SELECT occurred_at, message_text FROM gap_events WHERE account_id = $1 AND conversation_id = $2 \
                     AND message_text IS NOT NULL ORDER BY occurred_at, id",
                )
                .bind(account.number())
                .bind(&id)
                .fetch_all(pool)
                .await
            })?;
            export.conversations.push(ExportedConversation {
                conversation_id: id,
                created_at: to_rfc3339(created_at),
                last_activity_at: to_rfc3339(updated_at),
                messages: messages
                    .into_iter()
                    .map(|(role, at, text)| ExportedMessage {
                        role,
                        at: to_rfc3339(at),
                        text,
                    })
                    .collect(),
                interactions: interactions
                    .into_iter()
                    .map(
                        |(interaction_id, kind, operation, status, created, closed)| {
                            ExportedInteraction {
                                interaction_id,
                                kind,
                                operation,
                                status,
                                created_at: to_rfc3339(created),
                                closed_at: closed.map(to_rfc3339),
                            }
                        },
                    )
                    .collect(),
                gap_texts: gap_texts
                    .into_iter()
                    .map(|(at, text)| ExportedGapText {
                        at: to_rfc3339(at),
                        text,
                    })
                    .collect(),
            });
        }
        let queued: Vec<(i64, String)> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT received_at, body FROM platform_inbound WHERE account_id = $1 AND user_pseudonym = $2 \
                 AND body IS NOT NULL ORDER BY seq",
            )
            .bind(account.number())
            .bind(user)
            .fetch_all(pool)
            .await
        })?;
        export.queued_platform_messages = queued
            .into_iter()
            .map(|(at, text)| ExportedQueuedMessage {
                received_at: to_rfc3339(at),
                text,
            })
            .collect();
        Ok(export)
    }
}
