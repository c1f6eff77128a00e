//! Secrets: API keys (random, stored as hashes) and the master key that
//! encrypts stored secrets at rest.

pub mod api_key;
pub mod master_key;
