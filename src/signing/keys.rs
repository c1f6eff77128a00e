//! Signing keys: Ed25519, named by their RFC 7638 JWK thumbprint, the
//! private half sealed under the master keyring, published as RFC 8037 OKP
//! JWKs. Rotation publishes the new key in the same step that makes it the
//! signer (or ahead of it, with a lead time) and keeps the previous key
//! published for a grace period.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::SigningKey;
use sha2::{Digest, Sha256};
use std::time::Duration;
use zeroize::Zeroizing;

use crate::clock::now_millis;
use crate::crypto::master_key::Keyring;
use crate::store::signing_keys::{NewSigningKey, SigningKeyRow};
use crate::store::{Store, StoreError};

/// How long a replaced key stays in the JWK set (documented: 7 days).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(7 * 24 * 3600);

/// RFC 7638 thumbprint of the OKP JWK: SHA-256 over the required members in
/// lexicographic order, base64url.
pub fn kid_of(public_key: &[u8; 32]) -> String {
    let canonical = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        URL_SAFE_NO_PAD.encode(public_key)
    );
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// A public JWK (RFC 8037 OKP, Ed25519): never a private member. Fields in
/// the order they were always written (alphabetical).
#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub struct PublicJwk {
    /// `EdDSA`.
    alg: &'static str,
    /// `Ed25519`.
    crv: &'static str,
    /// The RFC 7638 thumbprint.
    kid: String,
    /// `OKP`.
    kty: &'static str,
    /// `sig`.
    #[serde(rename = "use")]
    key_use: &'static str,
    /// The public key, base64url.
    x: String,
}

/// The public JWK (RFC 8037) of a key: never a private member.
pub fn public_jwk(row: &SigningKeyRow) -> PublicJwk {
    PublicJwk {
        alg: "EdDSA",
        crv: "Ed25519",
        kid: row.kid.clone(),
        kty: "OKP",
        key_use: "sig",
        x: URL_SAFE_NO_PAD.encode(&row.public_key),
    }
}

fn associated_data(kid: &str) -> Vec<u8> {
    format!("warden/signing-key/v1\0{kid}").into_bytes()
}

/// Opens the private half of a stored key.
pub fn open_private(keyring: &Keyring, row: &SigningKeyRow) -> Result<SigningKey, String> {
    let secret = keyring
        .open(&row.sealed(), &associated_data(&row.kid))
        .map_err(|e| e.to_string())?;
    let bytes: Zeroizing<[u8; 32]> = Zeroizing::new(
        secret
            .as_slice()
            .try_into()
            .map_err(|_| "a signing key is not 32 bytes".to_string())?,
    );
    Ok(SigningKey::from_bytes(&bytes))
}

/// Re-seals a key's private half under the keyring's current key.
pub fn reseal_private(
    keyring: &Keyring,
    row: &SigningKeyRow,
) -> Result<Option<crate::crypto::sealed::Sealed>, String> {
    if row.master_key_id == keyring.current().id() {
        return Ok(None);
    }
    let secret = keyring
        .open(&row.sealed(), &associated_data(&row.kid))
        .map_err(|e| format!("signing key {}: {e}", row.kid))?;
    Ok(Some(keyring.seal(&secret, &associated_data(&row.kid))))
}

/// What a rotation did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rotation {
    pub kid: String,
    pub activates_at: String,
    pub previous_kid: Option<String>,
    pub previous_published_until: Option<String>,
}

/// Creates a key that signs from `now + activate_in`; the current one retires
/// then and stays published for `grace` more.
pub async fn rotate(
    store: &Store,
    keyring: &Keyring,
    activate_in: Duration,
    grace: Duration,
) -> Result<Rotation, StoreError> {
    let now = now_millis();
    let previous = store.active_signing_key(now).await?;
    let signing = SigningKey::generate(&mut rand::rngs::OsRng);
    let public = signing.verifying_key().to_bytes();
    let kid = kid_of(&public);
    let sealed = keyring.seal(signing.as_bytes(), &associated_data(&kid));
    let activated_at = now + activate_in.as_millis() as i64;
    let grace_millis = grace.as_millis() as i64;
    store
        .add_signing_key(
            &NewSigningKey {
                kid: &kid,
                public_key: &public,
                sealed: &sealed,
                created_at: now,
                activated_at,
            },
            grace_millis,
        )
        .await?;
    Ok(Rotation {
        kid,
        activates_at: crate::clock::to_rfc3339(activated_at),
        previous_published_until: previous
            .as_ref()
            .map(|_| crate::clock::to_rfc3339(activated_at + grace_millis)),
        previous_kid: previous.map(|p| p.kid),
    })
}

/// Makes sure a key signs now (first start of a deployment).
pub async fn ensure_active(store: &Store, keyring: &Keyring) -> Result<(), StoreError> {
    if store.active_signing_key(now_millis()).await?.is_none() {
        let rotation = rotate(store, keyring, Duration::ZERO, DEFAULT_GRACE).await?;
        tracing::info!(kid = %rotation.kid, "created the first capability-context signing key");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kid_is_the_rfc_7638_thumbprint() {
        // RFC 8037 appendix A.3: the thumbprint of the example Ed25519 key.
        let x = URL_SAFE_NO_PAD
            .decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
            .unwrap();
        let public: [u8; 32] = x.try_into().unwrap();
        assert_eq!(
            kid_of(&public),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }
}
