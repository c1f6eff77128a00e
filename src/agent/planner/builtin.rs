//! The built-in deterministic planner: no network, the same answer for the
//! same input. It selects at most one capability by the words the message
//! shares with each capability's name, description, `when_to_use` and
//! examples, and fills arguments only from the user's words
//! (`crate::agent::arguments`). The engine does the rest: history,
//! references, clarifications, every runtime rule.

use std::collections::HashSet;

use serde_json::Value;

use super::{CapabilityOffer, Plan, PlanOutcome, PlanRequest};
use crate::agent::arguments;
use crate::agent::language::{has_operation_intent, is_greeting, is_stopword, words};

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
    let message_words = content_words(request.message);
    let intent = has_operation_intent(request.message);
    let best = request
        .capabilities
        .iter()
        // Rule 8: a preparation capability only after an operation intent.
        .filter(|c| intent || !c.preparation)
        .map(|c| (score(c, &message_words, request.message), c))
        .filter(|(s, _)| *s > 0)
        // Highest score; on a tie the earlier published capability.
        .fold(
            None::<(usize, &CapabilityOffer)>,
            |best, (s, c)| match best {
                Some((b, _)) if b >= s => best,
                _ => Some((s, c)),
            },
        );
    if let Some((_, capability)) = best {
        return Plan::Call {
            capability: capability.name.clone(),
            arguments: arguments::extract(
                &capability.input_schema,
                &capability.patterns,
                request.message,
            ),
        };
    }
    if is_greeting(request.message) {
        return Plan::Answer {
            text: greeting(request.message).to_owned(),
        };
    }
    let topics = &request.policy.topics;
    if !topics.is_empty() && !topics.iter().any(|(n, d)| overlaps(&message_words, n, d)) {
        return Plan::OutOfScope;
    }
    Plan::NoCapability
}

fn greeting(message: &str) -> &'static str {
    match crate::agent::language::Language::of(message) {
        crate::agent::language::Language::English => "Hello! How can I help you?",
        crate::agent::language::Language::Spanish => "¡Hola! ¿En qué puedo ayudarte?",
    }
}

/// Content words reduced to a short stem, so "pedidos" meets "pedido".
fn content_words(text: &str) -> HashSet<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .map(|w| stem(&w))
        .collect()
}

fn stem(word: &str) -> String {
    word.chars().take(5).collect()
}

fn overlaps(message: &HashSet<String>, name: &str, description: &str) -> bool {
    let topic = content_words(&format!("{name} {description}"));
    message.iter().any(|w| topic.contains(w))
}

/// Shared content words (a word of the capability's name counts double),
/// plus one for each required argument the message itself provides.
fn score(capability: &CapabilityOffer, message: &HashSet<String>, message_text: &str) -> usize {
    let name = content_words(&capability.name.replace(['_', '-'], " "));
    let mut text = format!("{} {}", capability.description, capability.when_to_use);
    for example in &capability.examples {
        collect_strings(example, &mut text);
    }
    let body = content_words(&text);
    let words: usize = message
        .iter()
        .map(|w| usize::from(name.contains(w)) * 2 + usize::from(body.contains(w)))
        .sum();
    if words == 0 {
        return 0;
    }
    let provided = arguments::extract(&capability.input_schema, &capability.patterns, message_text);
    let required = arguments::required(&capability.input_schema);
    words
        + required
            .iter()
            .filter(|r| provided.contains_key(**r))
            .count()
}

fn collect_strings(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push(' ');
            out.push_str(s);
        }
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::planner::EffectivePolicy;
    use serde_json::json;

    fn offer(name: &str, description: &str, preparation: bool) -> CapabilityOffer {
        // What the guest would judge of `^[A-Z]-[0-9]+$` on these messages.
        let patterns =
            crate::agent::patterns::PatternMatches::default().with("order", &["A-12", "A-1"]);
        CapabilityOffer {
            name: name.into(),
            description: description.into(),
            when_to_use: String::new(),
            examples: vec![],
            input_schema: json!({"type": "object", "properties": {
                "order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z]-[0-9]+$"}}}),
            preparation,
            patterns,
        }
    }

    fn plan(message: &str, caps: &[CapabilityOffer], topics: Vec<(String, String)>) -> Plan {
        let policy = EffectivePolicy {
            instructions: String::new(),
            topics,
            out_of_scope_response: String::new(),
        };
        BuiltinPlanner
            .plan(&PlanRequest {
                policy: &policy,
                capabilities: caps,
                history: &[],
                message,
                image: None,
            })
            .plan
    }

    #[test]
    fn selects_by_shared_words_and_fills_from_the_message() {
        let caps = [
            offer("order_status", "Estado de un pedido", false),
            offer("store_hours", "Horario de las tiendas", false),
        ];
        assert_eq!(
            plan("¿Cuál es el estado de mi pedido A-12?", &caps, vec![]),
            Plan::Call {
                capability: "order_status".into(),
                arguments: serde_json::from_value(json!({"order": "A-12"})).unwrap()
            }
        );
        assert!(
            matches!(plan("¿Qué horario tienen las tiendas?", &caps, vec![]),
            Plan::Call { capability, .. } if capability == "store_hours")
        );
    }

    #[test]
    fn preparation_needs_intent_and_topics_bound_scope() {
        let caps = [offer(
            "prepare_address_change",
            "Prepara el cambio de dirección de un pedido",
            true,
        )];
        assert_eq!(
            plan("dirección del pedido", &caps, vec![]),
            Plan::NoCapability
        );
        assert!(matches!(
            plan("Quiero cambiar la dirección del pedido A-1", &caps, vec![]),
            Plan::Call { .. }
        ));
        let topics = vec![("pedidos".to_owned(), "Estado de pedidos".to_owned())];
        assert_eq!(
            plan("¿Quién ganó el partido?", &caps, topics.clone()),
            Plan::OutOfScope
        );
        assert_eq!(
            plan("Tengo una duda sobre pedidos", &[], topics),
            Plan::NoCapability
        );
    }
}
