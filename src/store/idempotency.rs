//! Idempotency records: one per (account, key). A request first claims its
//! key (an `in_flight` record); the publishing transaction marks it `done`
//! with the response to replay; a failed request releases it. Claims are
//! single atomic inserts, so two concurrent requests with one new key can
//! never both execute.

use super::{Store, StoreResult, on_pool};
use crate::clock::now_millis;
use crate::domain::account::AccountId;
use crate::domain::closed_set::closed_set;
use crate::domain::idempotency::{ABANDONED_AFTER_MILLIS, RETENTION_MILLIS};

#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key is new (or expired): this request executes.
    Fresh,
    /// The same request finished before: answer this again.
    Replay { status: u16, body: String },
    /// The key was used with a different request.
    KeyReused,
    /// The same key is being executed right now by another request.
    InFlight,
}

/// What the publishing transaction records for replay.
pub struct Completion<'a> {
    pub key: &'a str,
    pub status: u16,
    pub body: &'a str,
}

closed_set! {
    /// A record's state: claimed by a running request, or done with its answer kept.
    pub enum IdempotencyState {
        InFlight = "in_flight",
        Done = "done",
    }
}

impl Store {
    pub async fn claim_idempotency_key(
        &self,
        account: &AccountId,
        key: &str,
        request_hash: &str,
    ) -> StoreResult<Claim> {
        let _gate = self.write_turn().await;
        let now = now_millis();
        let inserted = on_pool!(self, pool => {
            // Expired records and claims abandoned by a crashed server give way.
            sqlx::query(
                "DELETE FROM idempotency_records WHERE account_id = $1 AND idempotency_key = $2 \
                 AND (expires_at < $3 OR (state = $4 AND created_at < $5))",
            )
            .bind(account.number())
            .bind(key)
            .bind(now)
            .bind(IdempotencyState::InFlight)
            .bind(now - ABANDONED_AFTER_MILLIS)
            .execute(pool)
            .await?;
            sqlx::query(
                "INSERT INTO idempotency_records (account_id, idempotency_key, request_hash, state, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (account_id, idempotency_key) DO NOTHING",
            )
            .bind(account.number())
            .bind(key)
            .bind(request_hash)
            .bind(IdempotencyState::InFlight)
            .bind(now)
            .bind(now + RETENTION_MILLIS)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        if inserted == 1 {
            return Ok(Claim::Fresh);
        }
        let row: Option<(String, IdempotencyState, Option<i64>, Option<String>)> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT request_hash, state, response_status, response_body FROM idempotency_records \
                 WHERE account_id = $1 AND idempotency_key = $2",
            )
            .bind(account.number())
            .bind(key)
            .fetch_optional(pool)
            .await
        })?;
        Ok(match row {
            Some((hash, _, _, _)) if hash != request_hash => Claim::KeyReused,
            Some((_, IdempotencyState::Done, Some(status), Some(body))) => Claim::Replay {
                status: u16::try_from(status).unwrap_or(500),
                body,
            },
            // In flight, or released between our insert and select: either way busy.
            _ => Claim::InFlight,
        })
    }

    /// Gives the key back after a request that changed nothing.
    pub async fn release_idempotency_key(&self, account: &AccountId, key: &str) -> StoreResult<()> {
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM idempotency_records WHERE account_id = $1 AND idempotency_key = $2 AND state = $3")
                .bind(account.number())
                .bind(key)
                .bind(IdempotencyState::InFlight)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Counts the account's records (for tests and diagnostics).
    pub async fn count_idempotency_records(&self, account: &AccountId) -> StoreResult<i64> {
        Ok(on_pool!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM idempotency_records WHERE account_id = $1")
                .bind(account.number())
                .fetch_one(pool)
                .await
        })?)
    }
}

/// Marks a claimed key done inside the caller's transaction. Returns false
/// when the claim is gone (taken over as abandoned): the caller must roll back.
macro_rules! complete_in_tx {
    ($tx:expr, $account:expr, $completion:expr) => {
        sqlx::query(
            "UPDATE idempotency_records SET state = $3, response_status = $4, response_body = $5 \
             WHERE account_id = $1 AND idempotency_key = $2 AND state = $6",
        )
        .bind($account.number())
        .bind($completion.key)
        .bind($crate::store::idempotency::IdempotencyState::Done)
        .bind(i64::from($completion.status))
        .bind($completion.body)
        .bind($crate::store::idempotency::IdempotencyState::InFlight)
        .execute(&mut *$tx)
        .await
        .map(|r| r.rows_affected() == 1)
    };
}
pub(crate) use complete_in_tx;
