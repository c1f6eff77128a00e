//! Prompt integrations (contract 2.13, 3.5, 4.4, 5.4): browser-callable
//! JSON forms. An operator registers a manifest (`warden admin
//! prompt-integration …`); a page on the manifest's exact origin posts
//! `{input, challenge_token}` to the public execute route, which answers
//! the model's JSON output validated against the output schema.
//!
//! - `manifest`: the manifest, its checks (schemas in the guest) and the
//!   public bundle;
//! - `challenge`: the siteverify client;
//! - the route and its processing order: `crate::api::prompt_integrations`;
//! - the limits, each one atomic statement: `crate::store::prompt_integrations`.

pub mod challenge;
pub mod manifest;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::crypto::master_key::MasterKey;

/// What the execute route needs besides the store and the sandbox; `None`
/// in `AppContext` when no verifier is configured (every execute is then
/// 503: no token can be checked).
#[derive(Clone, Debug)]
pub struct PromptChannel {
    pub verifier: challenge::Verifier,
    /// Trusted header holding the client's IP (`WARDEN_CLIENT_IP_HEADER`
    /// and `WARDEN_CLIENT_IP_HOPS`, behind a proxy); `None`: the socket's
    /// peer address.
    pub client_ip_header: Option<crate::client_address::TrustedHeader>,
    /// Keys the client hash of the burst limit: the same on every replica
    /// (derived from the master key), never the address itself.
    pub client_key: [u8; 32],
}

impl PromptChannel {
    /// The burst limit's key for `ip` at `integration`.
    pub fn client_hash(&self, integration: &str, ip: &str) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.client_key).expect("HMAC takes any key length");
        mac.update(integration.as_bytes());
        mac.update(b"\x00");
        mac.update(ip.as_bytes());
        crate::crypto::hex::encode(&mac.finalize().into_bytes())
    }
}

/// The key of client hashes, from the master key (so every replica agrees).
pub fn client_key(master: &MasterKey) -> [u8; 32] {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(master.bytes()).expect("HMAC takes any key length");
    mac.update(b"warden prompt-integration client hash v1");
    mac.finalize().into_bytes().into()
}

/// A challenge token as stored: its SHA-256, never the token.
pub fn token_hash(token: &str) -> String {
    crate::crypto::hex::encode(&Sha256::digest(token.as_bytes()))
}

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The UTC day of `now` (Unix milliseconds), `YYYY-MM-DD`.
pub fn utc_day(now: i64) -> String {
    crate::clock::to_rfc3339(now - now.rem_euclid(DAY_MS))[..10].to_owned()
}

/// Whole seconds until the next UTC midnight (at least 1).
pub fn seconds_until_midnight(now: i64) -> u64 {
    let left = DAY_MS - now.rem_euclid(DAY_MS);
    (left as u64).div_ceil(1000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_midnights_are_utc() {
        // 2026-11-23T23:59:59.500Z
        let now = 1_795_478_399_500;
        assert_eq!(utc_day(now), "2026-11-23");
        assert_eq!(seconds_until_midnight(now), 1);
        assert_eq!(utc_day(now + 500), "2026-11-24");
        assert_eq!(seconds_until_midnight(now + 500), 86_400);
    }
}
