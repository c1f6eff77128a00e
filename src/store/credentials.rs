//! Endpoint credentials as stored: metadata in clear, the secret sealed.

use super::direct::{Param, ReadRow, from_read_row, required, word};
use super::{Store, StoreError, StoreResult, on_pool};
use crate::clock::now_millis;
use crate::crypto::sealed::Sealed;
use crate::domain::account::AccountId;
use crate::domain::credential::{AuthType, CredentialStatus};
use crate::store::signing_keys::SigningKeyRow;

#[derive(Debug, Clone)]
pub struct CredentialRow {
    pub account_id: i64,
    pub credential_ref: String,
    pub auth_type: AuthType,
    pub header_name: Option<String>,
    pub status: CredentialStatus,
    pub master_key_id: Option<String>,
    pub nonce: Option<Vec<u8>>,
    pub ciphertext: Option<Vec<u8>>,
}

from_read_row!(CredentialRow);

impl CredentialRow {
    /// The row of [`COLUMNS`], in their order: its one decoding, for both
    /// drivers.
    pub(super) fn read(row: &dyn ReadRow) -> StoreResult<Self> {
        Ok(CredentialRow {
            account_id: required(row.int(0)?, 0)?,
            credential_ref: required(row.text(1)?, 1)?,
            auth_type: word(row, 2, AuthType::parse)?,
            header_name: row.text(3)?,
            status: word(row, 4, CredentialStatus::parse)?,
            master_key_id: row.text(5)?,
            nonce: row.bytes(6)?,
            ciphertext: row.bytes(7)?,
        })
    }

    pub fn sealed(&self) -> Option<Sealed> {
        Some(Sealed {
            key_id: self.master_key_id.clone()?,
            nonce: self.nonce.clone()?,
            ciphertext: self.ciphertext.clone()?,
        })
    }
}

/// What a caller already read of the credential a capability names: its
/// reference and the account's row of it (`None`: none is stored). The
/// executor opens it instead of reading it again.
#[derive(Debug, Clone, Copy)]
pub struct KnownCredential<'a> {
    pub credential_ref: &'a str,
    pub row: Option<&'a CredentialRow>,
}

/// Counts reported by a re-seal of every stored secret.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ResealCounts {
    pub resealed: u64,
    pub already_current: u64,
}

/// The columns [`CredentialRow::read`] decodes, in its order.
macro_rules! columns {
    () => {
        "account_id, credential_ref, auth_type, header_name, status, master_key_id, nonce, ciphertext"
    };
}
const COLUMNS: &str = columns!();

const SELECT_ONE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM capability_credentials WHERE account_id = $1 AND credential_ref = $2"
);

const SELECT_ALL: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM capability_credentials WHERE account_id = $1"
);

impl Store {
    /// Stores or rotates a credential (a revoked one is configured again).
    pub async fn put_credential(
        &self,
        account: &AccountId,
        credential_ref: &str,
        auth_type: AuthType,
        header_name: Option<&str>,
        sealed: &Sealed,
    ) -> StoreResult<()> {
        let _gate = self.write_turn().await;
        let now = now_millis();
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO capability_credentials \
                 (account_id, credential_ref, auth_type, header_name, status, master_key_id, nonce, ciphertext, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) \
                 ON CONFLICT (account_id, credential_ref) DO UPDATE SET auth_type = excluded.auth_type, \
                 header_name = excluded.header_name, status = excluded.status, master_key_id = excluded.master_key_id, \
                 nonce = excluded.nonce, ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
            )
            .bind(account.number())
            .bind(credential_ref)
            .bind(auth_type)
            .bind(header_name)
            .bind(CredentialStatus::Configured)
            .bind(&sealed.key_id)
            .bind(&sealed.nonce)
            .bind(&sealed.ciphertext)
            .bind(now)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    /// Revokes a credential and erases its sealed secret. Returns false when
    /// the account has no credential of that reference.
    pub async fn revoke_credential(
        &self,
        account: &AccountId,
        credential_ref: &str,
    ) -> StoreResult<bool> {
        let _gate = self.write_turn().await;
        let affected = on_pool!(self, pool => {
            sqlx::query(
                "UPDATE capability_credentials SET status = $3, master_key_id = NULL, nonce = NULL, ciphertext = NULL, \
                 updated_at = $4 WHERE account_id = $1 AND credential_ref = $2",
            )
            .bind(account.number())
            .bind(credential_ref)
            .bind(CredentialStatus::Revoked)
            .bind(now_millis())
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(affected > 0)
    }

    pub async fn get_credential(
        &self,
        account: &AccountId,
        credential_ref: &str,
    ) -> StoreResult<Option<CredentialRow>> {
        self.read_optional(
            SELECT_ONE,
            &[Param::Int(account.number()), Param::Text(credential_ref)],
            CredentialRow::read,
        )
        .await
    }

    /// Every credential row of the account (configured or revoked), in no
    /// particular order.
    pub async fn account_credentials(
        &self,
        account: &AccountId,
    ) -> StoreResult<Vec<CredentialRow>> {
        self.read_all(
            SELECT_ALL,
            &[Param::Int(account.number())],
            CredentialRow::read,
        )
        .await
    }

    /// Re-seals every stored secret — credentials and signing keys — in one
    /// transaction: each closure returns the new sealed value, `None` when it
    /// is already current, or an error that aborts everything.
    pub async fn reseal_secrets<F, G>(
        &self,
        mut credential: F,
        mut signing_key: G,
    ) -> StoreResult<ResealCounts>
    where
        F: FnMut(&CredentialRow) -> Result<Option<Sealed>, String>,
        G: FnMut(&SigningKeyRow) -> Result<Option<Sealed>, String>,
    {
        let credentials =
            format!("SELECT {COLUMNS} FROM capability_credentials WHERE ciphertext IS NOT NULL");
        let keys = "SELECT kid, public_key, master_key_id, nonce, ciphertext, activated_at, retired_at, published_until \
                    FROM signing_keys";
        let begin = self.write_transaction_statement();
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let mut counts = ResealCounts::default();
            let rows: Vec<CredentialRow> = sqlx::query_as(&credentials).fetch_all(&mut *tx).await?;
            for row in &rows {
                let Some(sealed) = credential(row).map_err(StoreError::Corrupt)? else {
                    counts.already_current += 1;
                    continue;
                };
                sqlx::query(
                    "UPDATE capability_credentials SET master_key_id = $3, nonce = $4, ciphertext = $5 \
                     WHERE account_id = $1 AND credential_ref = $2",
                )
                .bind(row.account_id)
                .bind(&row.credential_ref)
                .bind(&sealed.key_id)
                .bind(&sealed.nonce)
                .bind(&sealed.ciphertext)
                .execute(&mut *tx)
                .await?;
                counts.resealed += 1;
            }
            let rows: Vec<SigningKeyRow> = sqlx::query_as(keys).fetch_all(&mut *tx).await?;
            for row in &rows {
                let Some(sealed) = signing_key(row).map_err(StoreError::Corrupt)? else {
                    counts.already_current += 1;
                    continue;
                };
                sqlx::query("UPDATE signing_keys SET master_key_id = $2, nonce = $3, ciphertext = $4 WHERE kid = $1")
                    .bind(&row.kid)
                    .bind(&sealed.key_id)
                    .bind(&sealed.nonce)
                    .bind(&sealed.ciphertext)
                    .execute(&mut *tx)
                    .await?;
                counts.resealed += 1;
            }
            tx.commit().await?;
            Ok(counts)
        })
    }
}
