//! The account's agent policy: at most one per account, fully replaced on write.

use super::direct::{Param, ReadRow, required};
use super::{Store, StoreError, StoreResult, on_pool};
use crate::clock::now_millis;
use crate::domain::account::AccountId;
use crate::domain::policy::AgentPolicy;

#[derive(Debug, Clone)]
pub struct StoredPolicy {
    pub policy: AgentPolicy,
    /// Informational: 1 on creation, +1 on every replacement.
    pub revision: i64,
    pub updated_at: i64,
}

/// What a turn reads of its account first, in one statement: the agent
/// policy, and the capability version, a number that changes whenever any
/// of the account's capabilities is created, revised, enabled, disabled or
/// removed (database triggers, migration 0011). Read before the
/// capabilities: what is read after it is at least as new as it says.
#[derive(Debug, Clone)]
pub struct TurnBasis {
    pub policy: Option<StoredPolicy>,
    pub capability_version: i64,
}

/// The row behind [`TurnBasis`]: the policy's columns are null when the
/// account has none.
pub(super) struct TurnBasisRow {
    capability_version: i64,
    policy: Option<String>,
    revision: Option<i64>,
    updated_at: Option<i64>,
}

impl TurnBasisRow {
    const SELECT: &str = "SELECT a.capability_version, p.policy, p.revision, p.updated_at FROM accounts a \
                          LEFT JOIN agent_policies p ON p.account_id = a.id WHERE a.id = $1";

    fn read(row: &dyn ReadRow) -> StoreResult<Self> {
        Self::read_from(row, 0)
    }

    /// The same columns from `first` on (after a key's three in
    /// `Store::authenticate_for_turn`).
    pub(super) fn read_from(row: &dyn ReadRow, first: usize) -> StoreResult<Self> {
        Ok(TurnBasisRow {
            capability_version: required(row.int(first)?, first)?,
            policy: row.text(first + 1)?,
            revision: row.int(first + 2)?,
            updated_at: row.int(first + 3)?,
        })
    }

    /// The basis these columns say (the policy parsed when there is one).
    pub(super) fn basis(self) -> StoreResult<TurnBasis> {
        let policy = match (self.policy, self.revision, self.updated_at) {
            (Some(json), Some(revision), Some(updated_at)) => {
                Some(stored_policy(&json, revision, updated_at)?)
            }
            _ => None,
        };
        Ok(TurnBasis {
            policy,
            capability_version: self.capability_version,
        })
    }
}

impl Store {
    pub async fn turn_basis(&self, account: &AccountId) -> StoreResult<TurnBasis> {
        let row = self
            .read_optional(
                TurnBasisRow::SELECT,
                &[Param::Int(account.number())],
                TurnBasisRow::read,
            )
            .await?;
        match row {
            Some(row) => row.basis(),
            None => Ok(TurnBasis {
                policy: None,
                capability_version: 0,
            }),
        }
    }

    pub async fn get_policy(&self, account: &AccountId) -> StoreResult<Option<StoredPolicy>> {
        let row: Option<(String, i64, i64)> = on_pool!(self, pool => {
            sqlx::query_as("SELECT policy, revision, updated_at FROM agent_policies WHERE account_id = $1")
                .bind(account.number())
                .fetch_optional(pool)
                .await
        })?;
        row.map(|(json, revision, updated_at)| stored_policy(&json, revision, updated_at))
            .transpose()
    }

    /// Creates or fully replaces the policy in one atomic statement.
    pub async fn put_policy(
        &self,
        account: &AccountId,
        policy: &AgentPolicy,
    ) -> StoreResult<StoredPolicy> {
        let _gate = self.write_turn().await;
        let json = serde_json::to_string(policy).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let now = now_millis();
        let revision: i64 = on_pool!(self, pool => {
            sqlx::query_scalar(
                "INSERT INTO agent_policies (account_id, policy, revision, updated_at) VALUES ($1, $2, 1, $3) \
                 ON CONFLICT (account_id) DO UPDATE SET policy = excluded.policy, \
                 revision = agent_policies.revision + 1, updated_at = excluded.updated_at \
                 RETURNING revision",
            )
            .bind(account.number())
            .bind(&json)
            .bind(now)
            .fetch_one(pool)
            .await
        })?;
        Ok(StoredPolicy {
            policy: policy.clone(),
            revision,
            updated_at: now,
        })
    }

    /// Returns whether a policy existed.
    pub async fn delete_policy(&self, account: &AccountId) -> StoreResult<bool> {
        let _gate = self.write_turn().await;
        let deleted = on_pool!(self, pool => {
            sqlx::query("DELETE FROM agent_policies WHERE account_id = $1")
                .bind(account.number())
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(deleted > 0)
    }
}

fn stored_policy(json: &str, revision: i64, updated_at: i64) -> StoreResult<StoredPolicy> {
    let policy = serde_json::from_str(json)
        .map_err(|e| StoreError::Corrupt(format!("agent policy: {e}")))?;
    Ok(StoredPolicy {
        policy,
        revision,
        updated_at,
    })
}
