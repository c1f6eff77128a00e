//! Validated domain values: a handler cannot hold one that broke a rule.

pub mod capability;
pub mod credential;
pub mod diagnostics;
pub mod id;
pub mod idempotency;
pub mod policy;
pub mod text;
