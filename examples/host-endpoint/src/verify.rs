//! Verifying a call from Warden: RFC 9421 signature (Ed25519) over
//! `@method`, `@target-uri`, `content-digest` and `capability-context`,
//! the RFC 9530 digest of the body, the signature's lifetime, and the
//! capability-context claims (audience = this service's origin).
//!
//! Copy this module: it depends on nothing of Warden's.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use tokio::sync::RwLock;

/// Components Warden signs; a signature covering fewer is refused.
const REQUIRED: [&str; 4] = [
    "@method",
    "@target-uri",
    "content-digest",
    "capability-context",
];
/// Tolerated clock difference, seconds.
const SKEW: i64 = 30;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    #[error("malformed Signature-Input or Signature: {0}")]
    Malformed(String),
    #[error("the signature does not cover {0}")]
    NotCovered(&'static str),
    #[error("the signature is expired or not yet valid")]
    Expired,
    #[error("unknown key {0}")]
    UnknownKey(String),
    #[error("the body does not match its content-digest")]
    DigestMismatch,
    #[error("the signature does not verify")]
    BadSignature,
    #[error("the capability context is not for this service")]
    WrongAudience,
}

/// The request as this service received it.
pub struct ReceivedRequest<'a> {
    pub method: &'a str,
    /// Scheme, host and path-and-query as the caller addressed this service.
    pub target_uri: &'a str,
    pub header: &'a (dyn Fn(&str) -> Option<String> + Sync),
    pub body: &'a [u8],
}

/// Verified claims of the capability context.
#[derive(Debug, Clone)]
pub struct VerifiedContext {
    pub kid: String,
    pub claims: Value,
}

/// The JWK set, cached, refetched when a signature names an unknown kid
/// (a rotation on Warden's side).
pub struct KeySet {
    url: String,
    client: reqwest::Client,
    keys: RwLock<HashMap<String, VerifyingKey>>,
    fetches: std::sync::atomic::AtomicUsize,
}

impl KeySet {
    pub fn new(jwks_url: impl Into<String>) -> Self {
        KeySet {
            url: jwks_url.into(),
            client: reqwest::Client::new(),
            keys: RwLock::default(),
            fetches: Default::default(),
        }
    }

    /// How many times the set was fetched.
    pub fn fetches(&self) -> usize {
        self.fetches.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub async fn key(&self, kid: &str) -> Option<VerifyingKey> {
        if let Some(key) = self.keys.read().await.get(kid) {
            return Some(*key);
        }
        self.refresh().await;
        self.keys.read().await.get(kid).copied()
    }

    async fn refresh(&self) {
        self.fetches
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let Ok(response) = self.client.get(&self.url).send().await else {
            return;
        };
        let Ok(set) = response.json::<Value>().await else {
            return;
        };
        let mut keys = HashMap::new();
        for jwk in set["keys"].as_array().into_iter().flatten() {
            if jwk["kty"] != "OKP" || jwk["crv"] != "Ed25519" {
                continue;
            }
            let (Some(kid), Some(x)) = (jwk["kid"].as_str(), jwk["x"].as_str()) else {
                continue;
            };
            let Ok(bytes) = URL_SAFE_NO_PAD.decode(x) else {
                continue;
            };
            let Ok(bytes) = <[u8; 32]>::try_from(bytes.as_slice()) else {
                continue;
            };
            if let Ok(key) = VerifyingKey::from_bytes(&bytes) {
                keys.insert(kid.to_owned(), key);
            }
        }
        *self.keys.write().await = keys;
    }
}

/// Parsed `sig1=(...);param=value;...` (the format Warden sends).
struct SignatureInput {
    label: String,
    components: Vec<String>,
    /// The exact member value: it is the `@signature-params` line.
    params_text: String,
    params: HashMap<String, String>,
}

fn parse_input(header: &str) -> Result<SignatureInput, VerifyError> {
    let malformed = |m: &str| VerifyError::Malformed(m.to_owned());
    let (label, rest) = header
        .split_once('=')
        .ok_or_else(|| malformed("no label"))?;
    let rest = rest.trim();
    let close = rest
        .find(')')
        .ok_or_else(|| malformed("no component list"))?;
    let list = rest
        .strip_prefix('(')
        .ok_or_else(|| malformed("no component list"))?;
    let components = list[..close - 1]
        .split_whitespace()
        .map(|c| c.trim_matches('"').to_owned())
        .collect();
    let mut params = HashMap::new();
    for param in rest[close + 1..].split(';').filter(|p| !p.is_empty()) {
        let (name, value) = param
            .split_once('=')
            .ok_or_else(|| malformed("bad parameter"))?;
        params.insert(name.to_owned(), value.trim_matches('"').to_owned());
    }
    Ok(SignatureInput {
        label: label.trim().to_owned(),
        components,
        params_text: rest.to_owned(),
        params,
    })
}

/// Verifies one request. `now` is Unix seconds; `own_origin` is e.g.
/// `https://api.shop.example`.
pub async fn verify(
    request: &ReceivedRequest<'_>,
    keys: &KeySet,
    now: i64,
    own_origin: &str,
) -> Result<VerifiedContext, VerifyError> {
    let header =
        |name: &'static str| (request.header)(name).ok_or(VerifyError::MissingHeader(name));
    let input = parse_input(&header("signature-input")?)?;
    for required in REQUIRED {
        if !input.components.iter().any(|c| c == required) {
            return Err(VerifyError::NotCovered(required));
        }
    }
    let number = |name: &str| input.params.get(name).and_then(|v| v.parse::<i64>().ok());
    let (created, expires) = (
        number("created").ok_or(VerifyError::Expired)?,
        number("expires").ok_or(VerifyError::Expired)?,
    );
    if created > now + SKEW || expires < now {
        return Err(VerifyError::Expired);
    }
    if input.params.get("alg").map(String::as_str) != Some("ed25519") {
        return Err(VerifyError::Malformed("alg must be ed25519".into()));
    }
    let kid = input
        .params
        .get("keyid")
        .ok_or_else(|| VerifyError::Malformed("no keyid".into()))?
        .clone();
    let key = keys
        .key(&kid)
        .await
        .ok_or_else(|| VerifyError::UnknownKey(kid.clone()))?;

    let digest = header("content-digest")?;
    if digest
        != format!(
            "sha-256=:{}:",
            STANDARD.encode(Sha256::digest(request.body))
        )
    {
        return Err(VerifyError::DigestMismatch);
    }
    let context = header("capability-context")?;
    let mut base = String::new();
    for component in &input.components {
        let value = match component.as_str() {
            "@method" => request.method.to_ascii_uppercase(),
            "@target-uri" => request.target_uri.to_owned(),
            name => (request.header)(name).ok_or_else(|| {
                VerifyError::Malformed(format!("covered header {name} is missing"))
            })?,
        };
        base.push_str(&format!("\"{component}\": {value}\n"));
    }
    base.push_str(&format!("\"@signature-params\": {}", input.params_text));

    let signature_header = header("signature")?;
    let encoded = signature_header
        .strip_prefix(&format!("{}=:", input.label))
        .and_then(|s| s.strip_suffix(':'))
        .ok_or_else(|| VerifyError::Malformed("signature label".into()))?;
    let bytes = STANDARD
        .decode(encoded)
        .map_err(|_| VerifyError::Malformed("signature encoding".into()))?;
    let signature = Signature::from_slice(&bytes).map_err(|_| VerifyError::BadSignature)?;
    key.verify(base.as_bytes(), &signature)
        .map_err(|_| VerifyError::BadSignature)?;

    let claims: Value = serde_json::from_str(&context)
        .map_err(|_| VerifyError::Malformed("capability-context".into()))?;
    if claims["aud"] != own_origin {
        return Err(VerifyError::WrongAudience);
    }
    if claims["exp"].as_i64().is_none_or(|exp| exp < now) {
        return Err(VerifyError::Expired);
    }
    Ok(VerifiedContext { kid, claims })
}
