//! Secrets: API keys (random, stored as hashes) and the master key that
//! encrypts stored secrets at rest (`sealed`).

pub mod api_key;
pub mod hex;
pub mod master_key;
pub mod sealed;
