//! A custom policy guest: the default rules, plus "capability names must
//! start with the house prefix" (rule `name-prefix-required`).
//!
//! The prefix is fixed when the guest is built (`WARDEN_NAME_PREFIX`, default
//! `acme_`): a guest cannot read configuration at run time, because the
//! sandbox gives it no environment, file or clock.

use warden_guest_sdk::{Policy, Value, Violation};

/// The house prefix, baked in at build time.
const PREFIX: &str = match option_env!("WARDEN_NAME_PREFIX") {
    Some(p) => p,
    None => "acme_",
};

struct PrefixedNames;

impl Policy for PrefixedNames {
    /// The house rule: a string `name` must start with the prefix (a missing
    /// or non-string name is already reported by the default rules).
    fn extra_definition_rules(definition: &Value) -> Vec<Violation> {
        match definition.get("name").and_then(Value::as_str) {
            Some(name) if !name.starts_with(PREFIX) => vec![Violation::new(
                "/name",
                "name-prefix-required",
                format!("capability names must start with \"{PREFIX}\""),
            )],
            _ => Vec::new(),
        }
    }
}

warden_guest_sdk::export_policy!(PrefixedNames);
