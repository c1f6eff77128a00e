//! Per-account diagnostic settings.

use super::{Store, StoreError, StoreResult, on_pool};
use crate::clock::now_millis;
use crate::domain::account::AccountId;
use crate::domain::diagnostics::DiagnosticMode;

impl Store {
    /// The explicit setting, if the account ever stored one.
    pub async fn get_diagnostic_mode(
        &self,
        account: &AccountId,
    ) -> StoreResult<Option<DiagnosticMode>> {
        let mode: Option<String> = on_pool!(self, pool => {
            sqlx::query_scalar("SELECT mode FROM diagnostic_settings WHERE account_id = $1")
                .bind(account.number())
                .fetch_optional(pool)
                .await
        })?;
        mode.map(|m| {
            DiagnosticMode::parse(&m)
                .ok_or_else(|| StoreError::Corrupt(format!("diagnostic mode {m:?}")))
        })
        .transpose()
    }

    /// Stores the mode; returns true when this created the setting.
    pub async fn put_diagnostic_mode(
        &self,
        account: &AccountId,
        mode: DiagnosticMode,
    ) -> StoreResult<bool> {
        let _gate = self.write_turn().await;
        let writes: i64 = on_pool!(self, pool => {
            sqlx::query_scalar(
                "INSERT INTO diagnostic_settings (account_id, mode, writes, updated_at) VALUES ($1, $2, 1, $3) \
                 ON CONFLICT (account_id) DO UPDATE SET mode = excluded.mode, \
                 writes = diagnostic_settings.writes + 1, updated_at = excluded.updated_at \
                 RETURNING writes",
            )
            .bind(account.number())
            .bind(mode.as_str())
            .bind(now_millis())
            .fetch_one(pool)
            .await
        })?;
        Ok(writes == 1)
    }
}
