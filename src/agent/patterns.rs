//! Which of the user's words match each patterned input property, as the
//! policy guest judges them (contract 2.6 `pattern`, ECMAScript semantics).
//!
//! A tenant's `pattern` is untrusted input: on a backtracking engine it can
//! take exponential time. So the server never runs one. It gathers the
//! candidate tokens natively (tokenising only, `arguments`), and asks the
//! guest once per capability and patterned property per turn which of them
//! match (`match-pattern`); the guest runs under the sandbox's deadline on
//! the blocking pool. A guest fault or refusal counts as "none match": the
//! agent then asks for the value instead of guessing, and the turn goes on.
//!
//! All of a turn's questions go in one batch ([`judge_all`]): one trip to
//! the blocking pool, and the sandbox remembers verdicts per schema text and
//! token, so 1,000 capabilities do not mean 1,000 guest calls per turn.

use std::collections::HashSet;
use std::sync::Arc;

use super::arguments;
pub use super::verdicts::PatternMatches;
use crate::domain::account::AccountId;
use crate::executor::{CapabilityAtRevision, Executor};
use crate::sandbox::PatternQuestion;

/// Candidate tokens judged per property per turn, at most (the host's own
/// bound is larger); the message's come first, then the most recent history.
pub const MAX_CANDIDATES: usize = 256;
/// Their total size, at most.
pub const MAX_CANDIDATE_BYTES: usize = 64 * 1024;

/// Asks the guest about every patterned property of each of `capabilities`
/// (with its input schema as text), with the candidate tokens of `texts`
/// (most relevant first), in one batch. One [`PatternMatches`] per capability.
pub async fn judge_all(
    executor: &Executor,
    account: &AccountId,
    capabilities: &[(&CapabilityAtRevision, Arc<str>)],
    texts: &[&str],
) -> Vec<PatternMatches> {
    // (capability index, property) of each question, in order.
    let mut asked: Vec<(usize, String)> = Vec::new();
    let mut questions = Vec::new();
    for (i, (capability, schema_text)) in capabilities.iter().enumerate() {
        for property in arguments::properties(&capability.definition.input_schema) {
            if !property.is_patterned() {
                continue;
            }
            let candidates = gather(&property, texts);
            if candidates.is_empty() {
                continue;
            }
            asked.push((i, property.name.to_owned()));
            questions.push(PatternQuestion {
                schema_key: executor.input_schema_key(capability),
                input_schema: schema_text.clone(),
                property: property.name.to_owned(),
                candidates,
            });
        }
    }
    let mut out = vec![PatternMatches::default(); capabilities.len()];
    if questions.is_empty() {
        return out;
    }
    let candidates: Vec<Vec<String>> = questions.iter().map(|q| q.candidates.clone()).collect();
    let verdicts = executor.match_patterns(account, questions).await;
    for (((i, property), candidates), verdict) in asked.into_iter().zip(candidates).zip(verdicts) {
        let capability = capabilities[i].0;
        match verdict {
            Ok(Ok(indexes)) => {
                let tokens = indexes
                    .into_iter()
                    .filter_map(|i| candidates.get(i).cloned())
                    .collect();
                out[i].record(property, tokens);
            }
            Ok(Err(violations)) => tracing::warn!(
                capability = %capability.id,
                property = %property,
                rule = violations.first().map_or("", |v| v.rule.as_str()),
                "pattern not judged: the guest refused the schema; no candidate taken"
            ),
            Err(err) => tracing::warn!(
                capability = %capability.id,
                property = %property,
                code = err.code(),
                error = %err,
                "pattern not judged: sandbox fault; no candidate taken"
            ),
        }
    }
    out
}

/// Distinct candidate tokens of `texts` for `property`, within the bounds.
fn gather(property: &arguments::Property<'_>, texts: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut bytes = 0;
    for text in texts {
        for token in property.pattern_tokens(text) {
            if out.len() == MAX_CANDIDATES || bytes + token.len() > MAX_CANDIDATE_BYTES {
                return out;
            }
            if seen.insert(token.clone()) {
                bytes += token.len();
                out.push(token);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gathering_is_distinct_ordered_and_bounded() {
        let schema = json!({"type": "object", "properties": {
            "order": {"type": "string", "maxLength": 8, "pattern": "^[A-Z]-[0-9]+$"}}});
        let properties = arguments::properties(&schema);
        let order = &properties[0];
        assert_eq!(
            gather(order, &["pedido A-1 y A-1, B-2", "el A-3 (viejo)"]),
            ["pedido", "A-1", "B-2", "A-3", "viejo"],
            "stopwords and too-long tokens are left out; the message comes first"
        );
        let many: String = (0..1000).map(|i| format!("X{i} ")).collect();
        assert_eq!(gather(order, &[&many]).len(), MAX_CANDIDATES);
        let long = "abcdefgh ".repeat(10_000);
        assert!(gather(order, &[&long]).len() <= 1, "distinct only");
    }
}
