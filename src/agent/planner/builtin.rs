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
    let family = request
        .previous_capability
        .map(|name| content_words(&name.replace(['_', '-'], " ")))
        .unwrap_or_default();
    let best = request
        .capabilities
        .iter()
        // Rule 8: a preparation capability only after an operation intent.
        .filter(|c| intent || !c.preparation)
        .map(|c| {
            let s = score(c, &message_words, request.message);
            // A follow-up stays with the family of the last call: a tie
            // goes to the capability that shares a name word with it.
            let kin = s > 0
                && content_words(&c.name.replace(['_', '-'], " "))
                    .iter()
                    .any(|w| family.contains(w));
            (s * 2 + usize::from(kin), c)
        })
        .filter(|(s, _)| *s > 0)
        // Highest score; on a tie the earlier published capability.
        .fold(
            None::<(usize, &CapabilityOffer)>,
            |best, (s, c)| match best {
                Some((b, _)) if b >= s => best,
                _ => Some((s, c)),
            },
        );
    // "¿Y la Tienda Triana?", "and tomorrow?": a short follow-up that names
    // no capability asks the last one again.
    let best = best.or_else(|| {
        let previous = request.previous_capability?;
        is_follow_up(request.message)
            .then(|| request.capabilities.iter().find(|c| c.name == previous))
            .flatten()
            .filter(|c| intent || !c.preparation)
            .map(|c| (1, c))
    });
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

/// Content words reduced to a short stem, so "pedidos" meets "pedido", or
/// to their concept in the bilingual lexicon, so "puntos de fidelidad"
/// meets "loyalty points".
fn content_words(text: &str) -> HashSet<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .map(|w| concept(&w).map_or_else(|| stem(&w), str::to_owned))
        .collect()
}

/// The service domain's words in Spanish and English, by concept. A word
/// belongs to a concept when it starts with one of the concept's stems.
const LEXICON: &[(&str, &[&str])] = &[
    ("#order", &["pedido", "order", "compra", "purchase"]),
    (
        "#shipping",
        &[
            "envio", "enviad", "ship", "entreg", "deliver", "paquet", "parcel",
        ],
    ),
    ("#tracking", &["seguim", "rastre", "track"]),
    ("#carrier", &["transport", "carrier", "mensajer", "courier"]),
    (
        "#store",
        &["tienda", "store", "shop", "local", "sucursal", "branch"],
    ),
    (
        "#hours",
        &[
            "horari", "hora", "hour", "abre", "abri", "abiert", "open", "cierra", "cerra",
            "cerrad", "close", "closing", "schedul",
        ],
    ),
    ("#points", &["punto", "point"]),
    (
        "#loyalty",
        &["fidelid", "lealtad", "loyal", "reward", "recompens"],
    ),
    ("#balance", &["saldo", "balanc"]),
    ("#customer", &["client", "custom"]),
    ("#address", &["direcc", "domicil", "address"]),
    (
        "#return",
        &[
            "devoluc", "devolv", "devuel", "return", "refund", "reembols",
        ],
    ),
    (
        "#invoice",
        &["factura", "invoice", "bill", "recibo", "receipt"],
    ),
    ("#payment", &["pago", "pagar", "pay"]),
    (
        "#price",
        &["precio", "price", "cost", "cuesta", "cuanto cuesta"],
    ),
    ("#product", &["product", "articul", "item", "prenda"]),
    (
        "#stock",
        &["stock", "disponib", "availab", "inventar", "existenc"],
    ),
    ("#status", &["estado", "status", "situac"]),
    ("#appointment", &["cita", "appoint"]),
    ("#booking", &["reserv", "book"]),
    ("#account", &["cuenta", "account"]),
    ("#change", &["cambi", "change", "modific", "modify"]),
    ("#cancel", &["cancel", "anula"]),
    ("#city", &["ciudad", "city", "town"]),
    ("#where", &["donde", "where", "ubicac", "locat"]),
    ("#when", &["cuando", "when"]),
    ("#time", &["tiempo", "time", "plazo"]),
];

fn concept(word: &str) -> Option<&'static str> {
    LEXICON
        .iter()
        .find(|(_, stems)| stems.iter().any(|s| word.starts_with(s)))
        .map(|(concept, _)| *concept)
}

/// "¿Y la Tienda Triana?", "and on Sunday?", "what about A-1002?".
fn is_follow_up(message: &str) -> bool {
    let w = words(message);
    w.len() <= 8
        && (matches!(
            w.first().map(String::as_str),
            Some("y" | "and" | "e" | "tambien" | "also")
        ) || w.starts_with(&["what".into(), "about".into()])
            || w.starts_with(&["how".into(), "about".into()]))
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
                previous_capability: None,
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
