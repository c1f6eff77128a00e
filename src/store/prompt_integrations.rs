//! Prompt integrations (contract 2.13, 3.5, 4.4): the operator's
//! integrations, and the execute route's limits. Each limit is one atomic
//! statement (an upsert whose condition decides), so it holds across
//! replicas on PostgreSQL with no read-then-write race: the per-client
//! burst, single-use challenge tokens and the daily quota.

use super::{Store, StoreResult, on_pool};
use crate::domain::account::AccountId;
use crate::domain::closed_set::closed_set;

closed_set! {
    /// An integration's state (contract 3.5).
    pub enum IntegrationStatus {
        Active = "active",
        Disabled = "disabled",
    }
}

closed_set! {
    /// What became of one execution that reached the daily quota, as its
    /// usage record says.
    pub enum PromptOutcome {
        Succeeded = "succeeded",
        QuotaExceeded = "quota_exceeded",
        InferenceUnavailable = "inference_unavailable",
        ModelOutputInvalid = "model_output_invalid",
        Failed = "failed",
    }
}

/// Admitted requests per client per integration within [`BURST_WINDOW_MS`].
pub const BURST_LIMIT: usize = 3;
pub const BURST_WINDOW_MS: i64 = 60_000;
/// Successful executions per integration per UTC day.
pub const DAILY_QUOTA: i64 = 24;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PromptIntegrationRow {
    pub id: String,
    pub account_id: i64,
    pub name: String,
    pub origin: String,
    pub challenge_action: String,
    pub status: IntegrationStatus,
    pub revision: i64,
    /// The operator's manifest as JSON text (prompt, schemas): never served.
    pub manifest: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl PromptIntegrationRow {
    /// The owning account.
    pub fn account(&self) -> AccountId {
        AccountId::from_stored(self.account_id)
    }

    pub fn is_active(&self) -> bool {
        self.status == IntegrationStatus::Active
    }
}

const COLUMNS: &str = "id, account_id, name, origin, challenge_action, status, revision, \
                       manifest, created_at, updated_at";

/// What a new integration or a new revision stores.
pub struct NewPromptIntegration<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub origin: &'a str,
    pub challenge_action: &'a str,
    pub manifest: &'a str,
}

/// The burst limit's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Burst {
    Admitted,
    /// Refused; the oldest admitted request leaves the window after this
    /// many milliseconds.
    Limited {
        retry_after_ms: i64,
    },
}

impl Store {
    pub async fn create_prompt_integration(
        &self,
        account: &AccountId,
        new: &NewPromptIntegration<'_>,
        now: i64,
    ) -> StoreResult<()> {
        let _gate = self.write_turn().await;
        let sql = "INSERT INTO prompt_integrations (id, account_id, name, origin, challenge_action, \
                   status, revision, manifest, created_at, updated_at) \
                   VALUES ($1, $2, $3, $4, $5, $8, 1, $6, $7, $7)";
        on_pool!(self, pool => {
            sqlx::query(sql)
                .bind(new.id)
                .bind(account.number())
                .bind(new.name)
                .bind(new.origin)
                .bind(new.challenge_action)
                .bind(new.manifest)
                .bind(now)
                .bind(IntegrationStatus::Active)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    pub async fn get_prompt_integration(
        &self,
        id: &str,
    ) -> StoreResult<Option<PromptIntegrationRow>> {
        let sql = format!("SELECT {COLUMNS} FROM prompt_integrations WHERE id = $1");
        Ok(on_pool!(self, pool => {
            sqlx::query_as(&sql).bind(id).fetch_optional(pool).await
        })?)
    }

    pub async fn list_prompt_integrations(
        &self,
        account: &AccountId,
    ) -> StoreResult<Vec<PromptIntegrationRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM prompt_integrations WHERE account_id = $1 ORDER BY created_at, id"
        );
        Ok(on_pool!(self, pool => {
            sqlx::query_as(&sql).bind(account.number()).fetch_all(pool).await
        })?)
    }

    /// `active` or `disabled`; false when there is no such integration.
    pub async fn set_prompt_integration_status(
        &self,
        id: &str,
        status: IntegrationStatus,
        now: i64,
    ) -> StoreResult<bool> {
        let _gate = self.write_turn().await;
        let sql = "UPDATE prompt_integrations SET status = $2, updated_at = $3 WHERE id = $1";
        let done = on_pool!(self, pool => {
            sqlx::query(sql).bind(id).bind(status).bind(now).execute(pool).await.map(|r| r.rows_affected())
        })?;
        Ok(done == 1)
    }

    /// A new revision of the manifest (same id, revision + 1); the origin
    /// and name follow the manifest, the challenge action stays. The new
    /// revision, or `None` when there is no such integration.
    pub async fn update_prompt_integration(
        &self,
        id: &str,
        name: &str,
        origin: &str,
        manifest: &str,
        now: i64,
    ) -> StoreResult<Option<i64>> {
        let _gate = self.write_turn().await;
        let sql = "UPDATE prompt_integrations SET name = $2, origin = $3, manifest = $4, \
                   revision = revision + 1, updated_at = $5 WHERE id = $1 RETURNING revision";
        Ok(on_pool!(self, pool => {
            sqlx::query_scalar(sql)
                .bind(id)
                .bind(name)
                .bind(origin)
                .bind(manifest)
                .bind(now)
                .fetch_optional(pool)
                .await
        })?)
    }

    /// Admits the request of `client` to `integration` when fewer than
    /// [`BURST_LIMIT`] of its requests were admitted in the last
    /// [`BURST_WINDOW_MS`]: one upsert that shifts the three remembered
    /// times only when the oldest has left the window.
    pub async fn admit_prompt_burst(
        &self,
        integration: &str,
        client: &str,
        now: i64,
    ) -> StoreResult<Burst> {
        let _gate = self.write_turn().await;
        let sql = "INSERT INTO prompt_integration_bursts (integration_id, client, t1, t2, t3) \
                   VALUES ($1, $2, NULL, NULL, $3) \
                   ON CONFLICT (integration_id, client) DO UPDATE \
                   SET t1 = prompt_integration_bursts.t2, t2 = prompt_integration_bursts.t3, t3 = $3 \
                   WHERE prompt_integration_bursts.t1 IS NULL OR prompt_integration_bursts.t1 <= $4 \
                   RETURNING t3";
        let admitted: Option<i64> = on_pool!(self, pool => {
            sqlx::query_scalar(sql)
                .bind(integration)
                .bind(client)
                .bind(now)
                .bind(now - BURST_WINDOW_MS)
                .fetch_optional(pool)
                .await
        })?;
        if admitted.is_some() {
            return Ok(Burst::Admitted);
        }
        // Only for the Retry-After header: a stale read is harmless.
        let oldest: Option<Option<i64>> = on_pool!(self, pool => {
            sqlx::query_scalar(
                "SELECT t1 FROM prompt_integration_bursts WHERE integration_id = $1 AND client = $2",
            )
            .bind(integration)
            .bind(client)
            .fetch_optional(pool)
            .await
        })?;
        let oldest = oldest.flatten().unwrap_or(now);
        Ok(Burst::Limited {
            retry_after_ms: (oldest + BURST_WINDOW_MS - now).max(0),
        })
    }

    /// Marks a challenge token (its hash) used; false when it already was.
    pub async fn spend_challenge_token(
        &self,
        integration: &str,
        token_hash: &str,
        now: i64,
    ) -> StoreResult<bool> {
        let _gate = self.write_turn().await;
        let sql = "INSERT INTO prompt_integration_tokens (token_hash, integration_id, used_at) \
                   VALUES ($1, $2, $3) ON CONFLICT (token_hash) DO NOTHING";
        let inserted = on_pool!(self, pool => {
            sqlx::query(sql).bind(token_hash).bind(integration).bind(now).execute(pool).await.map(|r| r.rows_affected())
        })?;
        Ok(inserted == 1)
    }

    /// Reserves one of the day's [`DAILY_QUOTA`] executions; false when
    /// they are all taken.
    pub async fn reserve_prompt_quota(&self, integration: &str, day: &str) -> StoreResult<bool> {
        let _gate = self.write_turn().await;
        let sql = "INSERT INTO prompt_integration_quota (integration_id, day, reserved) \
                   VALUES ($1, $2, 1) \
                   ON CONFLICT (integration_id, day) DO UPDATE \
                   SET reserved = prompt_integration_quota.reserved + 1 \
                   WHERE prompt_integration_quota.reserved < $3 \
                   RETURNING reserved";
        let reserved: Option<i64> = on_pool!(self, pool => {
            sqlx::query_scalar(sql)
                .bind(integration)
                .bind(day)
                .bind(DAILY_QUOTA)
                .fetch_optional(pool)
                .await
        })?;
        Ok(reserved.is_some())
    }

    /// Gives a reservation back (the execution failed).
    pub async fn release_prompt_quota(&self, integration: &str, day: &str) -> StoreResult<()> {
        let _gate = self.write_turn().await;
        let sql = "UPDATE prompt_integration_quota SET reserved = reserved - 1 \
                   WHERE integration_id = $1 AND day = $2 AND reserved > 0";
        on_pool!(self, pool => {
            sqlx::query(sql).bind(integration).bind(day).execute(pool).await.map(|_| ())
        })?;
        Ok(())
    }

    /// One usage record: no input or output text.
    pub async fn record_prompt_usage(
        &self,
        integration: &str,
        account_id: i64,
        day: &str,
        outcome: PromptOutcome,
        now: i64,
    ) -> StoreResult<()> {
        let _gate = self.write_turn().await;
        let sql = "INSERT INTO prompt_integration_usage (integration_id, account_id, day, outcome, created_at) \
                   VALUES ($1, $2, $3, $4, $5)";
        on_pool!(self, pool => {
            sqlx::query(sql)
                .bind(integration)
                .bind(account_id)
                .bind(day)
                .bind(outcome)
                .bind(now)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Usage per outcome of an integration on a day, for operators and
    /// tests, as `(outcome word, count)` ordered by the word.
    pub async fn prompt_usage(
        &self,
        integration: &str,
        day: &str,
    ) -> StoreResult<Vec<(String, i64)>> {
        let sql = "SELECT outcome, COUNT(*) FROM prompt_integration_usage \
                   WHERE integration_id = $1 AND day = $2 GROUP BY outcome ORDER BY outcome";
        let rows: Vec<(PromptOutcome, i64)> = on_pool!(self, pool => {
            sqlx::query_as(sql).bind(integration).bind(day).fetch_all(pool).await
        })?;
        Ok(rows
            .into_iter()
            .map(|(outcome, n)| (outcome.as_str().to_owned(), n))
            .collect())
    }
}
