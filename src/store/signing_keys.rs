//! Capability-context signing keys. At most one key signs at a time (the
//! newest activated, unretired one); retired keys stay published until their
//! grace period ends.

use super::{Store, StoreResult, on_pool};
use crate::crypto::sealed::Sealed;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SigningKeyRow {
    pub kid: String,
    pub public_key: Vec<u8>,
    pub master_key_id: String,
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
    pub activated_at: i64,
    pub retired_at: Option<i64>,
    pub published_until: Option<i64>,
}

impl SigningKeyRow {
    pub fn sealed(&self) -> Sealed {
        Sealed {
            key_id: self.master_key_id.clone(),
            nonce: self.nonce.clone(),
            ciphertext: self.ciphertext.clone(),
        }
    }
}

/// A new key and when it starts signing.
pub struct NewSigningKey<'a> {
    pub kid: &'a str,
    pub public_key: &'a [u8],
    pub sealed: &'a Sealed,
    pub created_at: i64,
    pub activated_at: i64,
}

const COLUMNS: &str =
    "kid, public_key, master_key_id, nonce, ciphertext, activated_at, retired_at, published_until";

impl Store {
    /// Adds a key; every other unretired key retires when it activates and
    /// stays published for `grace_millis` after that. One transaction.
    pub async fn add_signing_key(
        &self,
        key: &NewSigningKey<'_>,
        grace_millis: i64,
    ) -> StoreResult<()> {
        let begin = self.write_transaction_statement();
        let _gate = self.write_turn().await;
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            sqlx::query(
                "UPDATE signing_keys SET retired_at = $1, published_until = $2 WHERE retired_at IS NULL",
            )
            .bind(key.activated_at)
            .bind(key.activated_at + grace_millis)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO signing_keys (kid, public_key, master_key_id, nonce, ciphertext, created_at, activated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(key.kid)
            .bind(key.public_key)
            .bind(&key.sealed.key_id)
            .bind(&key.sealed.nonce)
            .bind(&key.sealed.ciphertext)
            .bind(key.created_at)
            .bind(key.activated_at)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    /// The key that signs at `now`, if any.
    pub async fn active_signing_key(&self, now: i64) -> StoreResult<Option<SigningKeyRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM signing_keys WHERE activated_at <= $1 AND (retired_at IS NULL OR retired_at > $1) \
             ORDER BY activated_at DESC, kid LIMIT 1"
        );
        Ok(on_pool!(self, pool => sqlx::query_as(&sql).bind(now).fetch_optional(pool).await)?)
    }

    /// Keys a host may meet at `now`: signing, about to sign, or in grace.
    pub async fn published_signing_keys(&self, now: i64) -> StoreResult<Vec<SigningKeyRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM signing_keys WHERE published_until IS NULL OR published_until > $1 \
             ORDER BY activated_at DESC, kid"
        );
        Ok(on_pool!(self, pool => sqlx::query_as(&sql).bind(now).fetch_all(pool).await)?)
    }
}
