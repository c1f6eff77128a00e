//! API keys. A key is 32 random bytes shown once; the database keeps only
//! its SHA-256 digest. A plain (fast) digest is enough: the key has 256 bits
//! of entropy, so there is nothing to brute-force.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Prefix that makes a leaked key recognisable by secret scanners.
const KEY_PREFIX: &str = "wdn_";
/// Longest Authorization token we bother hashing; real keys are 47 characters.
pub const MAX_KEY_LEN: usize = 128;

pub struct IssuedKey {
    pub key_id: String,
    /// The bearer secret, to be shown once and never stored.
    pub secret: String,
    pub hash: String,
}

pub fn issue() -> IssuedKey {
    let mut secret_bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut secret_bytes);
    let secret = format!("{KEY_PREFIX}{}", URL_SAFE_NO_PAD.encode(secret_bytes));
    let mut id_bytes = [0u8; 10];
    rand::rngs::OsRng.fill_bytes(&mut id_bytes);
    let key_id = format!("key_{}", super::hex::encode(&id_bytes));
    let hash = hash(&secret);
    IssuedKey {
        key_id,
        secret,
        hash,
    }
}

/// The stored form of a presented key.
pub fn hash(secret: &str) -> String {
    super::hex::encode(&Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_keys_are_unique_and_hash_matches() {
        let a = issue();
        let b = issue();
        assert_ne!(a.secret, b.secret);
        assert_ne!(a.key_id, b.key_id);
        assert!(a.secret.starts_with(KEY_PREFIX));
        assert!(a.secret.len() <= MAX_KEY_LEN);
        assert_eq!(a.hash, hash(&a.secret));
        assert!(!a.hash.contains(&a.secret));
    }
}
