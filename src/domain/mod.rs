//! Validated domain values: a handler cannot hold one that broke a rule.

pub mod credential;
pub mod diagnostics;
pub mod policy;
pub mod text;
