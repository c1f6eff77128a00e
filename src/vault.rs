//! The credential vault: seals endpoint credentials for an account under the
//! master keyring and opens them for the executor. The associated data binds
//! each ciphertext to its account, reference, auth type and header, so a
//! sealed value moved to another row does not open.

use zeroize::Zeroizing;

use crate::crypto::master_key::Keyring;
use crate::crypto::sealed::Sealed;
use crate::domain::account::AccountId;
use crate::domain::credential::{AuthType, CredentialRef, CredentialSpec, CredentialStatus};
use crate::store::credentials::{CredentialRow, ResealCounts};
use crate::store::{Store, StoreError};

/// A configured credential, opened for one outbound call.
pub struct OpenCredential {
    pub auth_type: AuthType,
    pub header_name: Option<String>,
    pub secret: Zeroizing<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("credential {0} cannot be opened: {1}")]
    Unreadable(String, String),
}

fn associated_data(
    account: i64,
    credential_ref: &str,
    auth_type: AuthType,
    header_name: Option<&str>,
) -> Vec<u8> {
    format!(
        "warden/credential/v1\0{account}\0{credential_ref}\0{auth_type}\0{}",
        header_name.unwrap_or("")
    )
    .into_bytes()
}

pub async fn store_credential(
    store: &Store,
    keyring: &Keyring,
    account: &AccountId,
    credential_ref: &CredentialRef,
    spec: &CredentialSpec,
) -> Result<(), StoreError> {
    let header = spec.header_name.as_deref();
    let sealed = keyring.seal(
        spec.secret.as_bytes(),
        &associated_data(
            account.number(),
            credential_ref.as_str(),
            spec.auth_type,
            header,
        ),
    );
    store
        .put_credential(
            account,
            credential_ref.as_str(),
            spec.auth_type,
            header,
            &sealed,
        )
        .await
}

/// The credential if it is configured (not revoked, not missing).
pub async fn open_credential(
    store: &Store,
    keyring: &Keyring,
    account: &AccountId,
    credential_ref: &str,
) -> Result<Option<OpenCredential>, VaultError> {
    let row = store.get_credential(account, credential_ref).await?;
    open_stored(keyring, row.as_ref())
}

/// [`open_credential`] of a row already read (`None`: none is stored).
pub fn open_stored(
    keyring: &Keyring,
    row: Option<&CredentialRow>,
) -> Result<Option<OpenCredential>, VaultError> {
    let Some(row) = row else {
        return Ok(None);
    };
    if row.status != CredentialStatus::Configured {
        return Ok(None);
    }
    let unreadable = |why: String| VaultError::Unreadable(row.credential_ref.clone(), why);
    let sealed = row
        .sealed()
        .ok_or_else(|| unreadable("no sealed secret".into()))?;
    let plain = keyring
        .open(&sealed, &row_associated_data(row))
        .map_err(|e| unreadable(e.to_string()))?;
    let secret = Zeroizing::new(
        String::from_utf8(plain.to_vec()).map_err(|_| unreadable("not UTF-8".into()))?,
    );
    Ok(Some(OpenCredential {
        auth_type: row.auth_type,
        header_name: row.header_name.clone(),
        secret,
    }))
}

/// Whether the account has a configured credential of this reference.
pub async fn is_configured(
    store: &Store,
    account: &AccountId,
    credential_ref: &str,
) -> Result<bool, StoreError> {
    Ok(store
        .get_credential(account, credential_ref)
        .await?
        .is_some_and(|row| row.status == CredentialStatus::Configured))
}

fn row_associated_data(row: &CredentialRow) -> Vec<u8> {
    associated_data(
        row.account_id,
        &row.credential_ref,
        row.auth_type,
        row.header_name.as_deref(),
    )
}

/// Re-seals every stored secret (credentials and signing keys) under the
/// current master key, all or nothing.
pub async fn rotate_master_key(
    store: &Store,
    keyring: &Keyring,
) -> Result<ResealCounts, StoreError> {
    let current = keyring.current().id();
    store
        .reseal_secrets(
            |row| {
                let sealed: Sealed = row
                    .sealed()
                    .ok_or("a configured credential has no sealed secret")?;
                if sealed.key_id == current {
                    return Ok(None);
                }
                let ad = row_associated_data(row);
                let plain = keyring.open(&sealed, &ad).map_err(|e| {
                    format!(
                        "credential {} of account {}: {e}",
                        row.credential_ref, row.account_id
                    )
                })?;
                Ok(Some(keyring.seal(&plain, &ad)))
            },
            |key| crate::signing::keys::reseal_private(keyring, key),
        )
        .await
}
