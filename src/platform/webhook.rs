//! The webhook's two checks, kept free of HTTP types: the subscription
//! handshake (`hub.mode`, `hub.verify_token`, `hub.challenge`) and the
//! `X-Hub-Signature-256` HMAC over the raw body. Both compare in constant time.

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use zeroize::Zeroizing;

type HmacSha256 = Hmac<Sha256>;

pub const MAX_VERIFY_TOKEN_CHARS: usize = 256;
pub const MAX_CHALLENGE_CHARS: usize = 2048;
const MAX_MODE_CHARS: usize = 32;
const SIGNATURE_PREFIX: &str = "sha256=";

/// The configured secrets. `Debug` shows neither.
pub struct WebhookSecrets {
    /// HMAC of the verify token under a per-process random key: comparing
    /// two such MACs takes the same time whatever the tokens' lengths.
    token_key: Zeroizing<[u8; 32]>,
    token_mac: Zeroizing<Vec<u8>>,
    app_secret: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for WebhookSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecrets(redacted)")
    }
}

/// Why a handshake is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// A parameter is missing, repeated or over its bound (400).
    Invalid(String),
    /// Wrong mode or wrong token (403).
    Refused,
}

/// Why a signature is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// Missing, or not `sha256=` and 64 lowercase hex digits (400).
    Malformed,
    /// Well formed but not the HMAC of these bytes (401).
    Mismatch,
}

/// A well-formed `X-Hub-Signature-256` value: the 32 bytes it claims.
pub struct Signature([u8; 32]);

impl WebhookSecrets {
    pub fn new(verify_token: &str, app_secret: &str) -> Self {
        let mut token_key = Zeroizing::new([0u8; 32]);
        rand::rngs::OsRng.fill_bytes(token_key.as_mut());
        let token_mac = Zeroizing::new(mac(token_key.as_ref(), verify_token.as_bytes()));
        WebhookSecrets {
            token_key,
            token_mac,
            app_secret: Zeroizing::new(app_secret.as_bytes().to_vec()),
        }
    }

    /// The handshake of a raw query string: the challenge to echo, or why not.
    pub fn handshake(&self, query: &str) -> Result<String, HandshakeError> {
        let mut mode = None;
        let mut token = None;
        let mut challenge = None;
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let (slot, bound) = match name.as_ref() {
                "hub.mode" => (&mut mode, MAX_MODE_CHARS),
                "hub.verify_token" => (&mut token, MAX_VERIFY_TOKEN_CHARS),
                "hub.challenge" => (&mut challenge, MAX_CHALLENGE_CHARS),
                _ => continue,
            };
            if slot.is_some() {
                return Err(HandshakeError::Invalid(format!("{name} is repeated")));
            }
            if value.chars().count() > bound {
                return Err(HandshakeError::Invalid(format!(
                    "{name} is longer than {bound} characters"
                )));
            }
            *slot = Some(value.into_owned());
        }
        let missing = |name: &str| HandshakeError::Invalid(format!("{name} is required"));
        let mode = mode.ok_or_else(|| missing("hub.mode"))?;
        let token = Zeroizing::new(token.ok_or_else(|| missing("hub.verify_token"))?);
        let challenge = challenge.ok_or_else(|| missing("hub.challenge"))?;
        let mut check =
            HmacSha256::new_from_slice(self.token_key.as_ref()).expect("HMAC takes any key length");
        check.update(token.as_bytes());
        let token_ok = check.verify_slice(&self.token_mac).is_ok();
        if mode != "subscribe" || !token_ok {
            return Err(HandshakeError::Refused);
        }
        Ok(challenge)
    }

    /// Checks a well-formed signature against the raw body bytes.
    pub fn verify(&self, signature: &Signature, body: &[u8]) -> Result<(), SignatureError> {
        let mut check =
            HmacSha256::new_from_slice(&self.app_secret).expect("HMAC takes any key length");
        check.update(body);
        check
            .verify_slice(&signature.0)
            .map_err(|_| SignatureError::Mismatch)
    }
}

impl Signature {
    /// `^sha256=[0-9a-f]{64}$` (contract 4.3), or `Malformed`.
    pub fn parse(header: Option<&[u8]>) -> Result<Self, SignatureError> {
        let text = header.ok_or(SignatureError::Malformed)?;
        let hex = text
            .strip_prefix(SIGNATURE_PREFIX.as_bytes())
            .ok_or(SignatureError::Malformed)?;
        if hex.len() != 64 {
            return Err(SignatureError::Malformed);
        }
        let mut bytes = [0u8; 32];
        for (i, pair) in hex.chunks(2).enumerate() {
            bytes[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Ok(Signature(bytes))
    }
}

fn nibble(c: u8) -> Result<u8, SignatureError> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(SignatureError::Malformed),
    }
}

fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// `sha256=<hex>` of a body under a secret: what the platform sends (tests, the benchmark).
pub fn sign(app_secret: &str, body: &[u8]) -> String {
    format!(
        "{SIGNATURE_PREFIX}{}",
        crate::crypto::hex::encode(&mac(app_secret.as_bytes(), body))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> WebhookSecrets {
        WebhookSecrets::new("verify-me", "app-secret")
    }

    #[test]
    fn handshake_echoes_the_challenge_only_for_subscribe_and_the_token() {
        let s = secrets();
        assert_eq!(
            s.handshake("hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge=12%2034"),
            Ok("12 34".into())
        );
        assert_eq!(
            s.handshake("hub.mode=subscribe&hub.verify_token=verify-mf&hub.challenge=1"),
            Err(HandshakeError::Refused)
        );
        assert_eq!(
            s.handshake("hub.mode=unsubscribe&hub.verify_token=verify-me&hub.challenge=1"),
            Err(HandshakeError::Refused)
        );
        assert!(matches!(
            s.handshake("hub.mode=subscribe&hub.verify_token=verify-me"),
            Err(HandshakeError::Invalid(_))
        ));
        let long = "x".repeat(MAX_CHALLENGE_CHARS + 1);
        assert!(matches!(
            s.handshake(&format!(
                "hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge={long}"
            )),
            Err(HandshakeError::Invalid(_))
        ));
    }

    #[test]
    fn signatures_are_checked_over_the_raw_bytes() {
        let s = secrets();
        let body = br#"{"object":"whatsapp_business_account"}"#;
        let header = sign("app-secret", body);
        let sig = Signature::parse(Some(header.as_bytes())).unwrap();
        assert_eq!(s.verify(&sig, body), Ok(()));
        assert_eq!(
            s.verify(&sig, br#"{"object": "whatsapp_business_account"}"#),
            Err(SignatureError::Mismatch)
        );
        for bad in [
            "sha256=",
            "sha1=00",
            &header.to_uppercase(),
            &format!("{header}0"),
        ] {
            assert!(Signature::parse(Some(bad.as_bytes())).is_err(), "{bad}");
        }
        assert!(Signature::parse(None).is_err());
    }
}
