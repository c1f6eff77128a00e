//! Secrets at rest: AES-256-GCM under the master keyring, with a fresh
//! random nonce per write and associated data that binds a ciphertext to
//! the record it belongs to (a sealed secret copied into another account's
//! row does not open). Each sealed value names the master key that sealed
//! it, so keys can be rotated (see `warden admin master-key rotate`).

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use rand::RngCore;
use zeroize::Zeroizing;

use super::master_key::Keyring;

pub const NONCE_LEN: usize = 12;

/// A sealed secret as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sealed {
    pub key_id: String,
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the secret was sealed with master key {0}, which is not configured")]
    UnknownKey(String),
    #[error("the sealed secret does not open: wrong key, wrong record or tampered data")]
    Corrupt,
}

impl Keyring {
    /// Seals with the current key.
    pub fn seal(&self, plaintext: &[u8], associated_data: &[u8]) -> Sealed {
        let key = self.current();
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let cipher = Aes256Gcm::new(key.bytes().into());
        let ciphertext = cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: associated_data,
                },
            )
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        Sealed {
            key_id: key.id(),
            nonce: nonce.to_vec(),
            ciphertext,
        }
    }

    /// Opens with whichever configured key sealed it.
    pub fn open(
        &self,
        sealed: &Sealed,
        associated_data: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, SealError> {
        let key = self
            .find(&sealed.key_id)
            .ok_or_else(|| SealError::UnknownKey(sealed.key_id.clone()))?;
        if sealed.nonce.len() != NONCE_LEN {
            return Err(SealError::Corrupt);
        }
        let cipher = Aes256Gcm::new(key.bytes().into());
        cipher
            .decrypt(
                Nonce::from_slice(&sealed.nonce),
                Payload {
                    msg: &sealed.ciphertext,
                    aad: associated_data,
                },
            )
            .map(Zeroizing::new)
            .map_err(|_| SealError::Corrupt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::master_key::MasterKey;

    #[test]
    fn round_trips_and_binds_associated_data() {
        let ring = Keyring::new(MasterKey::generate(), vec![]);
        let a = ring.seal(b"s3cret", b"acct:1:cred_x");
        let b = ring.seal(b"s3cret", b"acct:1:cred_x");
        assert_ne!(a.nonce, b.nonce, "fresh nonce per write");
        assert!(!a.ciphertext.windows(6).any(|w| w == b"s3cret"));
        assert_eq!(&ring.open(&a, b"acct:1:cred_x").unwrap()[..], b"s3cret");
        assert!(matches!(
            ring.open(&a, b"acct:2:cred_x"),
            Err(SealError::Corrupt)
        ));
        let mut tampered = a.clone();
        tampered.ciphertext[0] ^= 1;
        assert!(matches!(
            ring.open(&tampered, b"acct:1:cred_x"),
            Err(SealError::Corrupt)
        ));
    }

    #[test]
    fn previous_keys_open_old_secrets() {
        let old = MasterKey::generate();
        let sealed = Keyring::new(old.clone(), vec![]).seal(b"x", b"ad");
        let rotated = Keyring::new(MasterKey::generate(), vec![old]);
        assert_eq!(&rotated.open(&sealed, b"ad").unwrap()[..], b"x");
        let forgotten = Keyring::new(MasterKey::generate(), vec![]);
        assert!(matches!(
            forgotten.open(&sealed, b"ad"),
            Err(SealError::UnknownKey(_))
        ));
    }
}
