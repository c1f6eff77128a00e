//! Rule 12: an operation waiting for a clarification. The arguments gathered
//! so far are sealed (AES-256-GCM under the master keyring, bound to the
//! account and conversation) and expire; the image they may have come from
//! is never kept. `cancelar` discards it without calling the host.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::clock::now_millis;
use crate::crypto::master_key::Keyring;
use crate::domain::account::AccountId;
use crate::store::conversations::StoredPending;

/// How long a pending operation waits for its clarification.
pub const PENDING_TTL_MILLIS: i64 = 15 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingOperation {
    pub capability_id: String,
    pub revision: i64,
    pub arguments: Map<String, Value>,
    /// The input property the last question asked for.
    pub missing: String,
    /// The value proposed for confirmation (rule 3), if the question was one.
    pub proposed: Option<Value>,
    /// The other values history held when one was proposed: "no, el otro"
    /// picks the single one left.
    #[serde(default)]
    pub alternatives: Vec<Value>,
}

fn associated_data(account: &AccountId, conversation_id: &str) -> Vec<u8> {
    format!("pending-operation\0{}\0{conversation_id}", account.number()).into_bytes()
}

pub fn seal(
    keyring: &Keyring,
    account: &AccountId,
    conversation_id: &str,
    pending: &PendingOperation,
) -> StoredPending {
    let plain = zeroize::Zeroizing::new(serde_json::to_vec(pending).expect("serializable"));
    StoredPending {
        capability_id: pending.capability_id.clone(),
        revision: pending.revision,
        sealed: keyring.seal(&plain, &associated_data(account, conversation_id)),
        expires_at: now_millis() + PENDING_TTL_MILLIS,
    }
}

/// The pending operation, or `None` when it does not open (treated as
/// absent: a fresh turn, never a guess).
pub fn open(
    keyring: &Keyring,
    account: &AccountId,
    conversation_id: &str,
    stored: &StoredPending,
) -> Option<PendingOperation> {
    let plain = keyring
        .open(&stored.sealed, &associated_data(account, conversation_id))
        .map_err(|err| tracing::warn!(error = %err, "a pending operation does not open; ignored"))
        .ok()?;
    serde_json::from_slice(&plain).ok()
}
