//! The policy guest's verdicts on a turn's tokens: which matched each
//! patterned property. Gathered by `patterns` (which asks the guest), read
//! by `arguments` (which takes a token as a value only if it matched); a
//! plain value, so neither of the two depends on the other through it.

use std::collections::{HashMap, HashSet};

/// The tokens the guest found matching, by property name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatternMatches {
    matched: HashMap<String, HashSet<String>>,
}

impl PatternMatches {
    /// Whether the guest judged `token` to match `property`'s pattern.
    pub fn matches(&self, property: &str, token: &str) -> bool {
        self.matched
            .get(property)
            .is_some_and(|tokens| tokens.contains(token))
    }

    /// Records that `property`'s pattern matched exactly `tokens`.
    pub fn record(&mut self, property: String, tokens: HashSet<String>) {
        self.matched.insert(property, tokens);
    }

    /// For tests: `property`'s pattern matched exactly `tokens`.
    pub fn with(mut self, property: &str, tokens: &[&str]) -> Self {
        self.matched.insert(
            property.to_owned(),
            tokens.iter().map(|t| (*t).to_owned()).collect(),
        );
        self
    }
}
