//! The signed capability context: every outbound call carries RFC 9421
//! HTTP Message Signatures (Ed25519) over its method, target URI, RFC 9530
//! content digest and a `capability-context` header of claims, verifiable
//! with the public keys at the well-known JWK set.
//!
//! [`Signer`] keeps the opened private key in memory and asks the database
//! which key is active at most every [`KEY_RECHECK`], so a rotation done by
//! `warden admin signing-key rotate` — another process, maybe another
//! replica — takes effect within a second. Account subjects never change and
//! are cached.

pub mod context;
pub mod http_signature;
pub mod keys;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::SigningKey;
use rand::RngCore;
use reqwest::header::{HeaderName, HeaderValue};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::RwLock;

use crate::clock::now_millis;
use crate::crypto::master_key::Keyring;
use crate::domain::account::AccountId;
use crate::store::{Store, StoreError};
use context::ContextHeader;

/// How often the active key is looked up again.
pub const KEY_RECHECK: Duration = Duration::from_secs(1);
/// Account identities kept in memory before the cache starts over.
const MAX_CACHED_ACCOUNTS: usize = 10_000;

/// Lifetime of a signature (`expires` − `created`).
pub const SIGNATURE_LIFETIME_SECS: i64 = 60;

pub struct ContextClaims<'a> {
    pub account: &'a AccountId,
    pub user_id: Option<&'a str>,
    pub capability_id: &'a str,
    pub revision: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no signing key is active")]
    NoActiveKey,
    #[error("the signing key cannot be opened: {0}")]
    Unreadable(String),
    #[error("the URL has no origin to sign for")]
    NoOrigin,
}

struct ActiveKey {
    kid: String,
    key: SigningKey,
    checked: Instant,
}

#[derive(Clone)]
pub struct Signer {
    store: Store,
    keyring: Keyring,
    active: Arc<RwLock<Option<Arc<ActiveKey>>>>,
    /// Account id → (subject, pseudonym salt): immutable once created.
    identities: Arc<RwLock<HashMap<i64, (String, String)>>>,
}

impl Signer {
    /// Makes sure a key is active (creating the first one) and loads it.
    pub async fn start(store: Store, keyring: Keyring) -> Result<Self, SigningError> {
        keys::ensure_active(&store, &keyring).await?;
        let signer = Signer {
            store,
            keyring,
            active: Arc::default(),
            identities: Arc::default(),
        };
        signer.active_key().await?;
        Ok(signer)
    }

    /// The kid signatures are made with now.
    pub async fn current_kid(&self) -> Result<String, SigningError> {
        Ok(self.active_key().await?.kid.clone())
    }

    async fn active_key(&self) -> Result<Arc<ActiveKey>, SigningError> {
        let cached = self.active.read().await.clone();
        if let Some(key) = &cached
            && key.checked.elapsed() < KEY_RECHECK
        {
            return Ok(key.clone());
        }
        let row = self
            .store
            .active_signing_key(now_millis())
            .await?
            .ok_or(SigningError::NoActiveKey)?;
        let key = match cached {
            Some(key) if key.kid == row.kid => key.key.clone(),
            _ => keys::open_private(&self.keyring, &row).map_err(SigningError::Unreadable)?,
        };
        let current = Arc::new(ActiveKey {
            kid: row.kid,
            key,
            checked: Instant::now(),
        });
        *self.active.write().await = Some(current.clone());
        Ok(current)
    }

    async fn identity(&self, account: &AccountId) -> Result<(String, String), SigningError> {
        if let Some(found) = self.identities.read().await.get(&account.number()) {
            return Ok(found.clone());
        }
        let identity = self.store.account_identity(account).await?;
        let mut cache = self.identities.write().await;
        if cache.len() >= MAX_CACHED_ACCOUNTS {
            cache.clear();
        }
        cache.insert(account.number(), identity.clone());
        Ok(identity)
    }

    /// The headers that sign one request: `content-digest`,
    /// `capability-context`, `signature-input` and `signature`.
    pub async fn sign(
        &self,
        method: &str,
        url: &url::Url,
        body: &[u8],
        claims: &ContextClaims<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, SigningError> {
        let key = self.active_key().await?;
        let (subject, salt) = self.identity(claims.account).await?;
        let origin = url.origin();
        if !origin.is_tuple() {
            return Err(SigningError::NoOrigin);
        }
        let created = now_millis() / 1000;
        let expires = created + SIGNATURE_LIFETIME_SECS;
        let context = serde_json::to_string(&ContextHeader {
            v: 1,
            iss: "warden",
            sub: &subject,
            usr: claims.user_id.map(|u| context::user_subject(&salt, u)),
            cap: claims.capability_id,
            rev: claims.revision,
            aud: &origin.ascii_serialization(),
            iat: created,
            exp: expires,
        })
        .expect("claims serialize");
        let mut nonce = [0u8; 16];
        // The thread's CSPRNG (seeded from the OS), not a getrandom system
        // call per signature.
        rand::thread_rng().fill_bytes(&mut nonce);
        let digest = http_signature::content_digest(body);
        let params = http_signature::signature_params(
            created,
            expires,
            &URL_SAFE_NO_PAD.encode(nonce),
            &key.kid,
        );
        let base = http_signature::signature_base(
            &method.to_ascii_uppercase(),
            url.as_str(),
            &digest,
            &context,
            &params,
        );
        let (input, signature) = http_signature::sign(&key.key, &base, &params);
        let header = |v: String| HeaderValue::from_str(&v).map_err(|_| SigningError::NoOrigin);
        Ok(vec![
            (HeaderName::from_static("content-digest"), header(digest)?),
            (
                HeaderName::from_static("capability-context"),
                header(context)?,
            ),
            (HeaderName::from_static("signature-input"), header(input)?),
            (HeaderName::from_static("signature"), header(signature)?),
        ])
    }
}
