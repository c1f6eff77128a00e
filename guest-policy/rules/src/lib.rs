//! Warden's policy rules as a plain Rust library.
//!
//! This crate is what the default guest component (`guest-policy/`) runs
//! inside the sandbox, and it also compiles natively so its rules can be unit
//! tested and used as the native baseline of the host's benchmark. It has no
//! knowledge of wasm, WIT or the host: every entry point takes JSON text and
//! returns either a value or a list of [`Violation`]s.
//!
//! Module map:
//! - [`schema`]: the schema language of contract 2.6 (and the 2.13 subset):
//!   checking a schema and compiling it into a [`schema::Schema`];
//! - [`validate`]: validating and pruning parsed JSON values with a compiled
//!   schema (the tree walker);
//! - `stream/` (private): validating and pruning JSON text in one streaming
//!   pass, the hot path ([`validate_text`](schema::Schema::validate_text),
//!   [`prune_text`](schema::Schema::prune_text)); it falls back to the tree
//!   walker of [`validate`] for the nodes it does not stream (`validate`
//!   does not depend on it); its files by role are listed in `stream/mod.rs`;
//!   `stream_reference.rs` (test builds only) is the previous pass, the
//!   oracle of its differential tests;
//! - [`definition`]: the capability-definition rules of 2.5;
//! - [`url`], [`secrets`], [`regex_guard`], [`pattern`], [`number`]: helpers of
//!   those rules;
//! - [`address`]: the one table of refused address classes, shared with the
//!   server's executor (which checks every resolved address with it);
//! - [`interaction`]: the closed host-interaction result (2.3, rules 9 and 10);
//! - [`cache`]: compiled schemas kept by key, as a guest instance does;
//! - [`candidates`]: which candidate values match a property's `pattern`;
//! - `fixtures` (tests, feature `fixtures`): test data other suites share.

pub mod address;
#[cfg(any(test, feature = "bench-cases"))]
pub mod bench_cases;
pub mod cache;
pub mod candidates;
pub mod definition;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod interaction;
pub mod number;
pub mod pattern;
pub mod regex_guard;
pub mod schema;
pub mod secrets;
mod stream;
#[cfg(test)]
mod stream_reference;
pub mod url;
pub mod validate;

mod violation;

pub use violation::{MAX_VIOLATIONS, Pointer, Violation, Violations};

/// Largest JSON text any entry point accepts (bytes). The host enforces its
/// own, smaller caps before a call; this bounds the guest on its own.
pub const MAX_JSON_BYTES: usize = 4 * 1024 * 1024;

/// Parses JSON text, mapping every failure to one `invalid-json` (or
/// `input-too-large`) violation at the root.
pub fn parse_json(text: &str) -> Result<serde_json::Value, Vec<Violation>> {
    if text.len() > MAX_JSON_BYTES {
        return Err(vec![Violation::new(
            "",
            "input-too-large",
            format!(
                "the JSON text is {} bytes; at most {MAX_JSON_BYTES} are accepted",
                text.len()
            ),
        )]);
    }
    // serde_json stops at 128 levels of nesting, which bounds the recursion
    // of every walker in this crate on parsed values.
    serde_json::from_str(text).map_err(|e| {
        vec![Violation::new(
            "",
            "invalid-json",
            format!("not valid JSON: {e}"),
        )]
    })
}
