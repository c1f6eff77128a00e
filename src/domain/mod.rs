//! Validated domain values: a handler cannot hold one that broke a rule.

pub mod account;
pub mod capability;
pub(crate) mod closed_set;
pub mod credential;
pub mod diagnostics;
pub mod id;
pub mod idempotency;
pub mod interaction;
pub mod language;
pub mod message;
pub mod policy;
pub mod text;
