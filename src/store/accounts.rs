//! Accounts and their API keys.

use super::direct::{Param, ReadRow, required};
use super::policy::{TurnBasis, TurnBasisRow};
use super::{Store, StoreError, StoreResult, on_pool};
use crate::clock::now_millis;
use crate::crypto::hex;

pub use crate::domain::account::AccountId;

#[derive(Debug)]
pub(super) struct KeyRow {
    account_id: i64,
    environment: String,
    revoked_at: Option<i64>,
}

impl KeyRow {
    const SELECT: &str =
        "SELECT account_id, environment, revoked_at FROM api_keys WHERE key_hash = $1";

    /// Its three columns, first in a row.
    pub(super) fn read(row: &dyn ReadRow) -> StoreResult<Self> {
        Ok(KeyRow {
            account_id: required(row.int(0)?, 0)?,
            environment: required(row.text(1)?, 1)?,
            revoked_at: row.int(2)?,
        })
    }

    /// Whether this key admits a caller of `environment`, and whose.
    pub(super) fn judge(&self, environment: &str) -> Result<AccountId, KeyRefusal> {
        if self.revoked_at.is_some() {
            Err(KeyRefusal::Revoked)
        } else if self.environment != environment {
            Err(KeyRefusal::OtherEnvironment)
        } else {
            Ok(AccountId::from_stored(self.account_id))
        }
    }
}

/// A key's row and, from the same statement, what a route needs of the
/// key's account before anything else: on PostgreSQL each statement is a
/// round trip, so each route joins its needs to the key's lookup.
pub(super) struct KeyAnd<T> {
    pub(super) key: KeyRow,
    pub(super) joined: T,
}

/// The key alone.
fn read_key_alone(row: &dyn ReadRow) -> StoreResult<KeyAnd<()>> {
    Ok(KeyAnd {
        key: KeyRow::read(row)?,
        joined: (),
    })
}

/// The key and its account's [`TurnBasis`] columns: a message's turn.
const KEY_AND_BASIS: &str = "SELECT k.account_id, k.environment, k.revoked_at, \
                             a.capability_version, p.policy, p.revision, p.updated_at FROM api_keys k \
                             JOIN accounts a ON a.id = k.account_id \
                             LEFT JOIN agent_policies p ON p.account_id = k.account_id WHERE k.key_hash = $1";

fn read_key_and_basis(row: &dyn ReadRow) -> StoreResult<KeyAnd<TurnBasisRow>> {
    Ok(KeyAnd {
        key: KeyRow::read(row)?,
        joined: TurnBasisRow::read_from(row, 3)?,
    })
}

/// The key and its account's capability version: an MCP request (the
/// version keys the catalog's tool set).
const KEY_AND_VERSION: &str = "SELECT k.account_id, k.environment, k.revoked_at, a.capability_version \
                               FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = $1";

fn read_key_and_version(row: &dyn ReadRow) -> StoreResult<KeyAnd<i64>> {
    Ok(KeyAnd {
        key: KeyRow::read(row)?,
        joined: required(row.int(3)?, 3)?,
    })
}

/// Why a presented key was refused; all of these are a 401 on the wire.
#[derive(Debug, PartialEq, Eq)]
pub enum KeyRefusal {
    Unknown,
    Revoked,
    OtherEnvironment,
}

impl Store {
    pub async fn create_account(&self, name: &str) -> StoreResult<AccountId> {
        let _gate = self.write_turn().await;
        let subject = format!("sub_{}", random_hex(16));
        let id: i64 = on_pool!(self, pool => {
            sqlx::query_scalar(
                "INSERT INTO accounts (name, created_at, subject, pseudonym_salt) VALUES ($1, $2, $3, $4) RETURNING id",
            )
                .bind(name)
                .bind(now_millis())
                .bind(&subject)
                .bind(random_hex(32))
                .fetch_one(pool)
                .await
        })?;
        Ok(AccountId::from_stored(id))
    }

    /// The account's opaque subject (shown to host endpoints in the signed
    /// capability context) and the salt that turns user ids into pseudonyms.
    pub async fn account_identity(&self, account: &AccountId) -> StoreResult<(String, String)> {
        let row: Option<(Option<String>, Option<String>)> = on_pool!(self, pool => {
            sqlx::query_as("SELECT subject, pseudonym_salt FROM accounts WHERE id = $1").bind(account.number()).fetch_optional(pool).await
        })?;
        match row {
            Some((Some(subject), Some(salt))) => Ok((subject, salt)),
            Some(_) => Err(StoreError::Corrupt("the account has no subject".into())),
            None => Err(StoreError::NotFound),
        }
    }

    pub async fn find_account(&self, name: &str) -> StoreResult<Option<AccountId>> {
        let id: Option<i64> = on_pool!(self, pool => {
            sqlx::query_scalar("SELECT id FROM accounts WHERE name = $1").bind(name).fetch_optional(pool).await
        })?;
        Ok(id.map(AccountId::from_stored))
    }

    pub async fn insert_api_key(
        &self,
        account: &AccountId,
        key_id: &str,
        key_hash: &str,
        environment: &str,
    ) -> StoreResult<()> {
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO api_keys (key_id, account_id, key_hash, environment, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(key_id)
            .bind(account.number())
            .bind(key_hash)
            .bind(environment)
            .bind(now_millis())
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    /// Marks a key revoked (idempotent: the first revocation time is kept).
    pub async fn revoke_api_key(&self, key_id: &str) -> StoreResult<()> {
        let _gate = self.write_turn().await;
        let result = on_pool!(self, pool => {
            sqlx::query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE key_id = $1")
                .bind(key_id)
                .bind(now_millis())
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        if result == 0 {
            Err(StoreError::NotFound)
        } else {
            Ok(())
        }
    }

    /// Resolves the account of a presented key's hash, for this environment.
    pub async fn authenticate(
        &self,
        key_hash: &str,
        environment: &str,
    ) -> StoreResult<Result<AccountId, KeyRefusal>> {
        let judged = self
            .authenticate_joined(
                KeyRow::SELECT,
                &[Param::Text(key_hash)],
                read_key_alone,
                environment,
            )
            .await?;
        Ok(judged.map(|(account, ())| account))
    }

    /// [`Self::authenticate`] and, for the key's account, the turn's basis
    /// ([`Self::turn_basis`]) as of the same moment, in one statement.
    pub async fn authenticate_for_turn(
        &self,
        key_hash: &str,
        environment: &str,
    ) -> StoreResult<Result<(AccountId, TurnBasis), KeyRefusal>> {
        let judged = self
            .authenticate_joined(
                KEY_AND_BASIS,
                &[Param::Text(key_hash)],
                read_key_and_basis,
                environment,
            )
            .await?;
        Ok(match judged {
            Ok((account, basis)) => Ok((account, basis.basis()?)),
            Err(refusal) => Err(refusal),
        })
    }

    /// [`Self::authenticate`] and the key's account's capability version
    /// (`TurnBasis::capability_version`) as of the same moment, in one
    /// statement.
    pub async fn authenticate_with_capability_version(
        &self,
        key_hash: &str,
        environment: &str,
    ) -> StoreResult<Result<(AccountId, i64), KeyRefusal>> {
        self.authenticate_joined(
            KEY_AND_VERSION,
            &[Param::Text(key_hash)],
            read_key_and_version,
            environment,
        )
        .await
    }

    /// The one shape of every `authenticate*`: `sql` reads the key (`$1`,
    /// its hash) and what the route joins to it; no row is an unknown key;
    /// the joined part is handed on only when the key admits `environment`.
    pub(super) async fn authenticate_joined<T>(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
        decode: fn(&dyn ReadRow) -> StoreResult<KeyAnd<T>>,
        environment: &str,
    ) -> StoreResult<Result<(AccountId, T), KeyRefusal>> {
        let Some(row) = self.read_optional(sql, params, decode).await? else {
            return Ok(Err(KeyRefusal::Unknown));
        };
        Ok(row
            .key
            .judge(environment)
            .map(|account| (account, row.joined)))
    }
}

fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buffer = vec![0u8; bytes];
    rand::rngs::OsRng.fill_bytes(&mut buffer);
    hex::encode(&buffer)
}
