//! What is kept and for how long, and the purge that enforces it (run
//! hourly by every replica, see `startup::housekeeping`). Each kind of
//! data is removed in batches of the configured size, one short
//! transaction each, with a yield between them: on SQLite the write gate
//! is first come, first served, so a turn waiting for it writes before the
//! next batch and never behind the whole purge.
//!
//! | data | kept | setting |
//! |---|---|---|
//! | conversations, messages, interactions, pending operations, references | from the last activity | `WARDEN_CONVERSATION_RETENTION_DAYS` (90) |
//! | gap-event message texts | from the event, never past its conversation | `WARDEN_GAP_TEXT_RETENTION_DAYS` (30) |
//! | MCP call audit, contract-test records, prompt-integration usage and quota | from the record | `WARDEN_AUDIT_RETENTION_DAYS` (180) |
//! | the platform queue's finished messages (ids only; text erased when finished) | 7 days after arrival | fixed: the dedup window |
//! | erasure marks | 1 hour | fixed: longer than any turn |

use serde::Serialize;

use crate::cli::{RetentionArgs, RetentionDays};
use crate::clock::Clock;
use crate::store::data_requests::{ERASURE_MARK_MILLIS, RemovedCounts};
use crate::store::retention::AgedRecords;
use crate::store::{Store, StoreResult};

const DAY_MILLIS: i64 = 24 * 60 * 60 * 1000;

/// Finished platform messages deduplicate redeliveries this long.
pub const FINISHED_PLATFORM_MESSAGE_DAYS: u32 = 7;

/// The configured retentions (`None`: no age limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub conversation_days: Option<u32>,
    pub gap_text_days: Option<u32>,
    pub audit_days: Option<u32>,
    /// Rows per transaction.
    pub batch: i64,
}

impl From<&RetentionArgs> for RetentionPolicy {
    fn from(args: &RetentionArgs) -> Self {
        let RetentionDays(conversation_days) = args.conversation_retention_days;
        let RetentionDays(gap_text_days) = args.gap_text_retention_days;
        let RetentionDays(audit_days) = args.audit_retention_days;
        RetentionPolicy {
            conversation_days,
            gap_text_days,
            audit_days,
            batch: args.retention_batch.max(1),
        }
    }
}

/// What one purge removed, by kind (counts, never content).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct PurgeReport {
    pub conversations: RemovedCounts,
    /// Transactions the conversations took.
    pub conversation_batches: u32,
    pub gap_texts: u64,
    pub mcp_calls: u64,
    pub contract_tests: u64,
    pub prompt_usage: u64,
    pub prompt_quota_days: u64,
    pub finished_platform_messages: u64,
    pub erasure_marks: u64,
    /// Idempotency records, client event ids, expired pending operations
    /// and prompt-integration limit rows.
    pub housekeeping: u64,
}

impl PurgeReport {
    /// Whether anything was removed (the batch count aside).
    pub fn removed_anything(&self) -> bool {
        let counts_only = PurgeReport {
            conversation_batches: 0,
            ..self.clone()
        };
        counts_only != PurgeReport::default()
    }
}

/// The purge: a policy and the clock it judges ages by.
#[derive(Debug, Clone)]
pub struct Retention {
    pub policy: RetentionPolicy,
    pub clock: Clock,
}

impl Retention {
    pub fn new(policy: RetentionPolicy, clock: Clock) -> Self {
        Retention { policy, clock }
    }

    /// Removes everything that has expired by the clock's now.
    pub async fn purge(&self, store: &Store) -> StoreResult<PurgeReport> {
        let now = self.clock.now_millis();
        let before = |days: u32| now - i64::from(days) * DAY_MILLIS;
        let batch = self.policy.batch;
        let mut report = PurgeReport::default();
        if let Some(days) = self.policy.conversation_days {
            loop {
                let removed = store.purge_conversations_batch(before(days), batch).await?;
                report.conversation_batches += 1;
                let full = removed.conversations as i64 == batch;
                add(&mut report.conversations, &removed);
                if !full {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        if let Some(days) = self.policy.gap_text_days {
            report.gap_texts = batches(batch, move || {
                store.clear_gap_texts_batch(before(days), batch)
            })
            .await?;
        }
        if let Some(days) = self.policy.audit_days {
            let cutoff = before(days);
            for (kind, count) in [
                (AgedRecords::McpCalls, &mut report.mcp_calls),
                (AgedRecords::ContractTests, &mut report.contract_tests),
                (AgedRecords::PromptUsage, &mut report.prompt_usage),
            ] {
                *count =
                    batches(batch, move || store.purge_aged_batch(kind, cutoff, batch)).await?;
            }
            report.prompt_quota_days = store
                .purge_prompt_quota_days(&crate::prompt::utc_day(cutoff))
                .await?;
        }
        let finished = before(FINISHED_PLATFORM_MESSAGE_DAYS);
        report.finished_platform_messages = batches(batch, move || {
            store.purge_aged_batch(AgedRecords::FinishedPlatformMessages, finished, batch)
        })
        .await?;
        report.erasure_marks = store.purge_erasure_marks(now - ERASURE_MARK_MILLIS).await?;
        // Housekeeping rows with fixed lifetimes: records past their replay
        // window or expiry, client event ids and prompt-integration limit
        // rows a day old (a spent token expires long before: the verifier
        // refuses it anyway; a burst row idle a day counts nothing).
        let day_ago = now - DAY_MILLIS;
        for (kind, cutoff) in [
            (AgedRecords::IdempotencyRecords, now),
            (AgedRecords::ExpiredPendingOperations, now),
            (AgedRecords::ClientEventIds, day_ago),
            (AgedRecords::PromptTokens, day_ago),
            (AgedRecords::PromptBursts, day_ago),
        ] {
            report.housekeeping +=
                batches(batch, move || store.purge_aged_batch(kind, cutoff, batch)).await?;
        }
        Ok(report)
    }
}

/// Runs `one` until a batch comes back short; the total removed.
async fn batches<F, Fut>(batch: i64, mut one: F) -> StoreResult<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StoreResult<u64>>,
{
    let mut total = 0;
    loop {
        let n = one().await?;
        total += n;
        if (n as i64) < batch {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}

fn add(total: &mut RemovedCounts, batch: &RemovedCounts) {
    total.conversations += batch.conversations;
    total.messages += batch.messages;
    total.interactions += batch.interactions;
    total.pending_operations += batch.pending_operations;
    total.references += batch.references;
    total.gap_events += batch.gap_events;
    total.platform_messages += batch.platform_messages;
}
