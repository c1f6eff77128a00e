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

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use std::hash::BuildHasher;

use super::{CapabilityOffer, Offered, Plan, PlanOutcome, PlanRequest};
use crate::agent::arguments;
use crate::agent::language::lexicon::{self, Concept, keys};
use crate::agent::language::{Focus, Language, Said, words};

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
            return Plan::Call {
                capability: capability.name.clone(),
                arguments: arguments::extract(
                    &capability.input_schema,
                    capability.patterns,
                    said.text(),
                ),
            };
        }
    }
    // "¿Y la Tienda Triana?", "and tomorrow?": a short follow-up that names
    // no capability asks the last one again.
    if let Some(i) = follow_up_of(request, &eligible)
        && !index.has_uncovered_topic(&said.whole().concepts)
    {
        let capability = &request.capabilities[i];
        return Plan::Call {
            capability: capability.name.clone(),
            arguments: arguments::extract(
                &capability.input_schema,
                capability.patterns,
                said.text(),
            ),
        };
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

/// Below this, the words a focus shares with a capability select nothing.
const MIN_WORD_SCORE: f64 = 0.5;

/// What the words of a focus say for capability `i`: each shared key
/// weighs by its rarity, double in the name, half when only a returned
/// field names it; the very word a little more.
fn word_score(index: &Index, i: usize, focus_words: &[(String, String)]) -> f64 {
    let entry = &index.entries[i];
    let mut score = 0.0;
    for (key, word) in focus_words {
        let weight = index.weight(key);
        if entry.name_keys.contains(key) {
            score += 2.0 * weight;
        } else if entry.keys.contains(key) {
            score += weight;
        } else if entry.returned.contains(key) {
            score += 0.5 * weight;
        }
        // The very word, not only its stem or concept: "my order" is
        // closer to `order_status` than to `customer_orders`.
        if entry.words.contains(word) {
            score += 0.25;
        }
    }
    score
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

/// What the offered capabilities speak of, how rare each key is, and which
/// capabilities share each key or word. It depends only on the offers, so
/// it is kept across turns, keyed by their fingerprints in order
/// ([`Index::of`]): a turn with 1,000 unchanged capabilities derives
/// nothing and scores only the few sharing a word with the message.
struct Index {
    /// The fingerprints of the offers it was derived from, in order.
    fingerprints: Vec<[u64; 2]>,
    entries: Vec<Arc<Entry>>,
    /// How many capabilities mention each key.
    mentions: HashMap<String, usize>,
    /// Capabilities (ascending) whose name, text or returned fields hold
    /// each key.
    by_key: HashMap<String, Vec<usize>>,
    /// Capabilities (ascending) whose text holds each folded word.
    by_word: HashMap<String, Vec<usize>>,
    /// Indexes of the preparation capabilities.
    preparations: Vec<usize>,
}

/// What one capability speaks of. It depends only on the capability's
/// words (name, description, `when_to_use`, examples, returned fields), so
/// it is kept across turns, keyed by the offer's fingerprint ([`entry`]).
struct Entry {
    /// Keys (concepts or stems) of the capability's name.
    name_keys: HashSet<String>,
    /// Keys of its name, description, `when_to_use` and examples.
    keys: HashSet<String>,
    /// Keys only its output schema's fields speak of.
    returned: HashSet<String>,
    /// Its folded words as written.
    words: HashSet<String>,
}

/// Entries kept at most (all accounts); cleared whole when full.
const MAX_ENTRIES: usize = 20_000;
/// Indexes kept at most (one per distinct offered set); cleared whole when full.
const MAX_INDEXES: usize = 256;

fn entry(capability: &CapabilityOffer) -> Arc<Entry> {
    static ENTRIES: OnceLock<Mutex<HashMap<[u64; 2], Arc<Entry>>>> = OnceLock::new();
    let memo = ENTRIES.get_or_init(Default::default);
    let key = capability.fingerprint();
    if let Some(found) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return found;
    }
    let name = capability.name.replace(['_', '-'], " ");
    let mut text = format!(
        "{name} {} {}",
        capability.description, capability.when_to_use
    );
    for example in capability.examples.iter() {
        collect_strings(example, &mut text);
    }
    // The fields it returns are what it can also answer (a preparation
    // returns the closed interaction, which says nothing).
    let mut fields = String::new();
    if !capability.preparation {
        collect_fields(&capability.output_schema, &mut fields);
    }
    let mut all = keys(&text);
    // "devolver" finds `prepare_return`; "refund" does not (lexicon::widen).
    lexicon::widen(&mut all);
    let returned: HashSet<String> = keys(&fields)
        .into_iter()
        .filter(|k| !all.contains(k))
        .collect();
    let made = Arc::new(Entry {
        name_keys: keys(&name),
        keys: all,
        returned,
        words: words(&text).into_iter().collect(),
    });
    if let Ok(mut m) = memo.lock() {
        if m.len() >= MAX_ENTRIES {
            m.clear();
        }
        m.insert(key, made.clone());
    }
    made
}

impl Index {
    /// The index of these offers, derived once per distinct offered set:
    /// found by a hash of the offers' fingerprints in order, and taken only
    /// when its own fingerprints are those (a 64-bit hash may collide; the
    /// comparison of 16-byte fingerprints cannot be fooled).
    fn of(capabilities: &[Offered<'_>]) -> Arc<Index> {
        static INDEXES: OnceLock<Mutex<HashMap<u64, Arc<Index>>>> = OnceLock::new();
        let memo = INDEXES.get_or_init(Default::default);
        let fingerprints: Vec<[u64; 2]> = capabilities.iter().map(|c| c.fingerprint()).collect();
        let key = super::fingerprint_keys()[0].hash_one(&fingerprints);
        if let Some(found) = memo
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
            .filter(|index| index.fingerprints == fingerprints)
        {
            return found;
        }
        let made = Arc::new(Index::new(capabilities, fingerprints));
        if let Ok(mut m) = memo.lock() {
            if m.len() >= MAX_INDEXES {
                m.clear();
            }
            m.insert(key, made.clone());
        }
        made
    }

    fn new(capabilities: &[Offered<'_>], fingerprints: Vec<[u64; 2]>) -> Index {
        let mut index = Index {
            fingerprints,
            entries: Vec::with_capacity(capabilities.len()),
            mentions: HashMap::new(),
            by_key: HashMap::new(),
            by_word: HashMap::new(),
            preparations: Vec::new(),
        };
        for (i, capability) in capabilities.iter().enumerate() {
            let entry = entry(capability);
            for key in entry.keys.iter().chain(&entry.returned) {
                *index.mentions.entry(key.clone()).or_default() += 1;
            }
            let mut shared: HashSet<&String> = entry.name_keys.iter().collect();
            shared.extend(entry.keys.iter().chain(&entry.returned));
            for key in shared {
                index.by_key.entry(key.clone()).or_default().push(i);
            }
            for word in &entry.words {
                index.by_word.entry(word.clone()).or_default().push(i);
            }
            if capability.preparation {
                index.preparations.push(i);
            }
            index.entries.push(entry);
        }
        index
    }

    /// Capabilities sharing a key or a word with `focus_words`, ascending.
    fn sharing(&self, focus_words: &[(String, String)]) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for (key, word) in focus_words {
            out.extend(self.by_key.get(key).into_iter().flatten());
            out.extend(self.by_word.get(word).into_iter().flatten());
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Rarer is weightier: a key every capability mentions says little.
    fn weight(&self, key: &str) -> f64 {
        let total = self.entries.len().max(1) as f64;
        let mentions = self.mentions.get(key).copied().unwrap_or(0).max(1) as f64;
        (1.0 + total / mentions).ln()
    }

    /// Words of these concepts ask for something specific no offered
    /// capability speaks of.
    fn has_uncovered_topic(&self, concepts: &[&'static Concept]) -> bool {
        concepts
            .iter()
            .any(|c| c.topic && !self.mentions.contains_key(c.key))
    }
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

/// The names (in words) and descriptions of a schema's properties, nested
/// ones included.
fn collect_fields(schema: &Value, out: &mut String) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            out.push(' ');
            out.push_str(&name.replace(['_', '-'], " "));
            if let Some(description) = property.get("description").and_then(Value::as_str) {
                out.push(' ');
                out.push_str(description);
            }
            collect_fields(property, out);
        }
    }
    if let Some(items) = schema.get("items") {
        collect_fields(items, out);
    }
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
        CapabilityOffer {
            name: name.into(),
            description: description.into(),
            when_to_use: String::new(),
            examples: Arc::from(Vec::new()),
            input_schema: Arc::new(json!({"type": "object", "properties": {
                "order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z]-[0-9]+$"}}})),
            output_schema: Arc::new(json!({})),
            preparation,
            fingerprint: Default::default(),
        }
    }

    /// What the guest would judge of `^[A-Z]-[0-9]+$` on these messages.
    fn judged() -> crate::agent::patterns::PatternMatches {
        crate::agent::patterns::PatternMatches::default().with("order", &["A-12", "A-1"])
    }

    fn request<'a>(
        policy: &'a EffectivePolicy,
        offered: &'a [Offered<'a>],
        said: &'a Said,
    ) -> PlanRequest<'a> {
        PlanRequest {
            policy,
            capabilities: offered,
            history: &[],
            said,
            image: None,
            previous_capability: None,
        }
    }

    fn plan(message: &str, caps: &[CapabilityOffer], topics: Vec<(String, String)>) -> Plan {
        let policy = EffectivePolicy {
            instructions: String::new(),
            topics,
            out_of_scope_response: String::new(),
        };
        let patterns = judged();
        let offered: Vec<Offered<'_>> = caps
            .iter()
            .map(|offer| Offered {
                offer,
                patterns: &patterns,
            })
            .collect();
        BuiltinPlanner
            .plan(&request(&policy, &offered, &Said::new(message)))
            .plan
    }

    #[test]
    fn only_capabilities_sharing_words_are_consulted() {
        let mut caps: Vec<CapabilityOffer> = (0..500)
            .map(|i| {
                offer(
                    &format!("catalogue_lookup_{i}"),
                    "Busca artículos del catálogo",
                    false,
                )
            })
            .collect();
        caps.insert(321, offer("order_status", "Estado de un pedido", false));
        let policy = EffectivePolicy {
            instructions: String::new(),
            topics: vec![],
            out_of_scope_response: String::new(),
        };
        let none = crate::agent::patterns::PatternMatches::default();
        let offered: Vec<Offered<'_>> = caps
            .iter()
            .map(|offer| Offered {
                offer,
                patterns: &none,
            })
            .collect();
        let message = Said::new("¿Dónde está mi pedido A-12?");
        let asked = request(&policy, &offered, &message);
        assert_eq!(
            consults(&asked),
            vec![321],
            "only the order capability speaks of orders"
        );
        // What it decides with the verdicts of the consulted one only is
        // what it decides with every verdict.
        let patterns = judged();
        let mut some = offered.clone();
        some[321].patterns = &patterns;
        let all: Vec<Offered<'_>> = caps
            .iter()
            .map(|offer| Offered {
                offer,
                patterns: &patterns,
            })
            .collect();
        assert_eq!(
            BuiltinPlanner.plan(&request(&policy, &some, &message)).plan,
            BuiltinPlanner.plan(&request(&policy, &all, &message)).plan,
        );
        let catalogue = Said::new("Busca en el catálogo");
        let catalogue = request(&policy, &offered, &catalogue);
        assert_eq!(
            consults(&catalogue).len(),
            500,
            "every catalogue look-up shares those words"
        );
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

    fn called(plan: &Plan) -> &str {
        match plan {
            Plan::Call { capability, .. } => capability,
            other => panic!("expected a call, got {other:?}"),
        }
    }

    fn shop() -> Vec<CapabilityOffer> {
        vec![
            offer("customer_orders", "Lista los pedidos de un cliente", false),
            offer("order_status", "Consulta el estado de un pedido", false),
            offer(
                "shipping_details",
                "Detalles del envío de un pedido: dirección de envío, número de seguimiento",
                false,
            ),
            offer("store_hours", "Horario de apertura de una tienda", false),
            offer("prepare_return", "Prepara la devolución de un pedido", true),
            offer(
                "prepare_address_change",
                "Prepares a change of the delivery address of an order",
                true,
            ),
        ]
    }

    #[test]
    fn a_rare_shared_word_outweighs_a_common_one() {
        let caps = shop();
        // "order" is in almost every capability; "tracking" in one.
        assert_eq!(
            called(&plan(
                "What is the tracking number of order A-12?",
                &caps,
                vec![]
            )),
            "shipping_details"
        );
        // The very word decides a tie of concepts: "my order" is one order.
        assert_eq!(
            called(&plan("Can you check my order?", &caps, vec![])),
            "order_status"
        );
    }

    #[test]
    fn the_first_question_is_answered_first() {
        let caps = shop();
        assert_eq!(
            crate::agent::language::sentences::focus(
                "¿Dónde está mi pedido A-12 y a qué hora abre la Tienda Centro?"
            ),
            [
                "Dónde está mi pedido A-12",
                "a qué hora abre la Tienda Centro",
                "¿Dónde está mi pedido A-12 y a qué hora abre la Tienda Centro?"
            ]
        );
        assert_eq!(
            called(&plan(
                "¿Dónde está mi pedido A-12 y a qué hora abre la Tienda Centro?",
                &caps,
                vec![]
            )),
            "order_status"
        );
        // A statement gives context; the question is what is asked.
        assert_eq!(
            called(&plan(
                "Mi pedido es el A-12. ¿Cuál es el número de seguimiento?",
                &caps,
                vec![]
            )),
            "shipping_details"
        );
        assert_eq!(
            crate::agent::language::sentences::focus("Quiero devolver el pedido A-12"),
            ["Quiero devolver el pedido A-12"]
        );
    }

    #[test]
    fn a_topic_no_capability_speaks_of_selects_nothing() {
        let caps = shop();
        assert_eq!(
            plan("¿Cuál es el precio del pedido A-12?", &caps, vec![]),
            Plan::NoCapability
        );
        assert_eq!(
            plan("Please delete my order A-12", &caps, vec![]),
            Plan::NoCapability
        );
        let without_hours: Vec<CapabilityOffer> = caps
            .into_iter()
            .filter(|c| c.name != "store_hours")
            .collect();
        assert_eq!(
            plan("¿A qué hora abre la Tienda Centro?", &without_hours, vec![]),
            Plan::NoCapability
        );
    }

    #[test]
    fn a_preparation_only_for_the_operation_asked_for() {
        let caps = shop();
        assert_eq!(
            called(&plan(
                "Quiero devolver un pantalón del pedido A-12",
                &caps,
                vec![]
            )),
            "prepare_return"
        );
        assert_eq!(
            called(&plan(
                "Quiero cambiar la dirección de envío del pedido A-12",
                &caps,
                vec![]
            )),
            "prepare_address_change"
        );
        // "Cancel" prepares nothing here: neither a return nor an address change.
        assert_eq!(
            plan("Quiero cancelar mi pedido A-12", &caps, vec![]),
            Plan::NoCapability
        );
        // A mention is not a request (rule 8).
        assert_ne!(
            called(&plan(
                "¿Ya está hecha la devolución del pedido A-12?",
                &caps,
                vec![]
            )),
            "prepare_return"
        );
    }

    #[test]
    fn a_question_about_a_returned_field_finds_its_capability() {
        let mut caps = shop();
        let mut points = offer("loyalty_points", "Loyalty points balance of a card", false);
        points.output_schema = Arc::new(json!({"type": "object", "properties": {
            "points": {"type": "integer"}, "tier": {"type": "string", "description": "Card tier"}}}));
        caps.push(points);
        assert_eq!(
            called(&plan("What tier is it?", &caps, vec![])),
            "loyalty_points"
        );
        // Half weight: a field does not outweigh what a capability is about.
        assert_eq!(
            called(&plan("¿Me dices cómo va mi pedido?", &caps, vec![])),
            "order_status"
        );
    }
}
