//! The built-in deterministic planner: no network, the same answer for the
//! same input. It selects at most one capability by the words the message
//! shares with each capability's name, description, `when_to_use` and
//! examples, and fills arguments only from the user's words
//! (`crate::agent::arguments`). The engine does the rest: history,
//! references, clarifications, every runtime rule.
//!
//! Selection, in order (docs/conversation.md tells the whole story):
//! - the message's *focus*: with several clauses, its questions first, in
//!   the order asked ("¿Dónde está mi pedido A-1001 y qué pedidos tiene
//!   Luis?" asks about the order first); the whole message last;
//! - words become concepts of the bilingual lexicon (`lexicon`) or short
//!   stems; a word shared with a capability weighs more the fewer offered
//!   capabilities mention it ("tracking" decides, "order" hardly), double
//!   in the capability's name, half when only a field it returns names it
//!   ("what tier is it?"), a little more when the very word is there;
//! - a topic no offered capability mentions (a price, an invoice, opening
//!   hours of a disabled capability) means none fits;
//! - a preparation capability competes only after an operation intent
//!   (rule 8) and only for the operation asked for ("devolver" prepares a
//!   return, never an address change);
//! - each required argument the focus provides adds one; a tie goes to the
//!   conversation's last capability, then to one of its family.

mod index;

use std::collections::HashSet;

use super::{Offered, Plan, PlanOutcome, PlanRequest};
use crate::agent::arguments;
use crate::agent::language::lexicon::keys;
use crate::agent::language::{Focus, Language, Said};
use index::{Index, MIN_WORD_SCORE, word_score};

pub const MODEL_NAME: &str = "warden-builtin";

#[derive(Clone, Default)]
pub struct BuiltinPlanner;

impl BuiltinPlanner {
    pub fn plan(&self, request: &PlanRequest<'_>) -> PlanOutcome {
        PlanOutcome {
            plan: decide(request),
            attempts: 0,
            retry_delay: Default::default(),
        }
    }
}

fn decide(request: &PlanRequest<'_>) -> Plan {
    let said = request.said;
    if said.is_only_greeting() {
        return Plan::Answer {
            text: greeting(said).to_owned(),
        };
    }
    let index = Index::of(request.capabilities);
    let eligible = Eligible::of(request, &index);
    for focus in said.focus() {
        if let Some(capability) = select(request, &index, &eligible, focus) {
            return call(capability, said);
        }
    }
    // "¿Y la Tienda Triana?", "and tomorrow?": a short follow-up that names
    // no capability asks the last one again.
    if let Some(i) = follow_up_of(request, &eligible)
        && !index.has_uncovered_topic(&said.whole().concepts)
    {
        return call(&request.capabilities[i], said);
    }
    if said.is_greeting() {
        return Plan::Answer {
            text: greeting(said).to_owned(),
        };
    }
    let topics = &request.policy.topics;
    let message_keys: HashSet<String> = said
        .whole()
        .content
        .iter()
        .map(|(k, _)| k.clone())
        .collect();
    if !topics.is_empty() && !topics.iter().any(|(n, d)| overlaps(&message_keys, n, d)) {
        return Plan::OutOfScope;
    }
    Plan::NoCapability
}

/// A call of `capability` with the arguments the whole message provides.
fn call(capability: &Offered<'_>, said: &Said) -> Plan {
    Plan::Call {
        capability: capability.name.clone(),
        arguments: arguments::extract(&capability.input_schema, capability.patterns, said.text()),
    }
}

/// Every capability [`decide`] may read pattern verdicts of, ascending: an
/// eligible one sharing enough words with some focus of the message to be
/// scored with its arguments, and the conversation's last one (a
/// follow-up). A superset is harmless; a capability left out would be
/// scored without its patterned values, so this follows `select`'s own
/// threshold ([`word_score`]).
pub fn consults(request: &PlanRequest<'_>) -> Vec<usize> {
    if request.said.is_only_greeting() {
        return Vec::new();
    }
    let index = Index::of(request.capabilities);
    let eligible = Eligible::of(request, &index);
    let mut out: Vec<usize> = Vec::new();
    for focus in request.said.focus() {
        let focus_words = &focus.content;
        for i in index.sharing(focus_words) {
            if eligible.contains(i) && word_score(&index, i, focus_words) >= MIN_WORD_SCORE {
                out.push(i);
            }
        }
    }
    out.extend(follow_up_of(request, &eligible));
    out.sort_unstable();
    out.dedup();
    out
}

/// The conversation's last capability, when it is still offered and eligible.
fn follow_up_of(request: &PlanRequest<'_>, eligible: &Eligible) -> Option<usize> {
    let previous = request.previous_capability?;
    if !is_follow_up(request.said.words()) {
        return None;
    }
    (0..request.capabilities.len())
        .find(|&i| eligible.contains(i) && request.capabilities[i].name == previous)
}

/// Which capabilities may be chosen for this message. Rule 8: a
/// preparation capability only after an operation intent, and only one
/// that prepares the operation asked for.
struct Eligible {
    /// Indexes of the preparations that may not be chosen.
    refused: HashSet<usize>,
}

impl Eligible {
    fn of(request: &PlanRequest<'_>, index: &Index) -> Eligible {
        let intent = request.said.has_operation_intent();
        let asked_operations: HashSet<&str> =
            request.said.asked_operations().iter().copied().collect();
        let refused = index
            .preparations
            .iter()
            .copied()
            .filter(|&i| {
                !(intent
                    && index.entries[i]
                        .keys
                        .iter()
                        .any(|k| asked_operations.contains(k.as_str())))
            })
            .collect();
        Eligible { refused }
    }

    fn contains(&self, i: usize) -> bool {
        !self.refused.contains(&i)
    }
}

/// The best eligible capability for one focus of the message, if any
/// shares a word with it and it asks for nothing no capability offers.
fn select<'r, 'c>(
    request: &'r PlanRequest<'c>,
    index: &Index,
    eligible: &Eligible,
    focus: &Focus,
) -> Option<&'r Offered<'c>> {
    if index.has_uncovered_topic(&focus.concepts) {
        return None;
    }
    let focus_words = &focus.content;
    let family = request
        .previous_capability
        .map(|name| keys(&name.replace(['_', '-'], " ")))
        .unwrap_or_default();
    let mut best: Option<(f64, usize)> = None;
    // Only capabilities sharing a key or a word can reach the threshold;
    // ascending, so a tie still goes to the earlier offered one.
    for i in index.sharing(focus_words) {
        if !eligible.contains(i) {
            continue;
        }
        let capability = &request.capabilities[i];
        let mut score = word_score(index, i, focus_words);
        if score < MIN_WORD_SCORE {
            continue;
        }
        let provided =
            arguments::extract(&capability.input_schema, capability.patterns, &focus.text);
        score += arguments::required(&capability.input_schema)
            .iter()
            .filter(|r| provided.contains_key(**r))
            .count() as f64;
        // A follow-up stays with the last call, then with its family.
        if request.previous_capability == Some(capability.name.as_str()) {
            score += 0.5;
        } else if index.entries[i]
            .name_keys
            .iter()
            .any(|k| family.contains(k))
        {
            score += 0.25;
        }
        // Highest score; on a tie the earlier offered capability.
        if best.is_none_or(|(b, _)| score > b + 1e-9) {
            best = Some((score, i));
        }
    }
    best.map(|(_, i)| &request.capabilities[i])
}

fn greeting(said: &Said) -> &'static str {
    match said.language() {
        Language::English => "Hello! How can I help you?",
        Language::Spanish => "¡Hola! ¿En qué puedo ayudarte?",
    }
}

/// "¿Y la Tienda Triana?", "and on Sunday?", "what about A-1002?".
fn is_follow_up(w: &[String]) -> bool {
    w.len() <= 8
        && (matches!(
            w.first().map(String::as_str),
            Some("y" | "and" | "e" | "tambien" | "also")
        ) || w.starts_with(&["what".into(), "about".into()])
            || w.starts_with(&["how".into(), "about".into()]))
}

fn overlaps(message: &HashSet<String>, name: &str, description: &str) -> bool {
    let topic = keys(&format!("{name} {description}"));
    message.iter().any(|w| topic.contains(w))
}

#[cfg(test)]
mod tests;
