//! Rules 5 and 6 on what reaches the user: a reply is grounded in the pruned
//! result (no number the result or the user did not give), names no
//! internal identifier, and an empty result is recognised as such so that
//! nothing is invented about it.

use serde_json::Value;

use super::language::texts::Fact;
use super::language::{Language, Said, is_stopword, lexicon, words};

/// Prefixes of Warden's own identifiers (rule 5).
const INTERNAL_PREFIXES: [&str; 7] = ["cap_", "conv_", "int_", "msg_", "run_", "cred_", "key_"];

/// Null, `{}`, `[]`, or an object whose every value is empty.
pub fn is_empty_result(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(items) => items.iter().all(is_empty_result),
        Value::Object(map) => map.values().all(is_empty_result),
        _ => false,
    }
}

/// The result as plain `field: value` facts (fields in key order), each
/// array item kept together in parentheses so values stay with their item.
pub fn facts(value: &Value) -> String {
    render(value, true)
}

fn render(value: &Value, top: bool) -> String {
    match value {
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .filter(|(_, v)| !is_empty_result(v))
                .map(|(k, v)| format!("{}: {}", k.replace('_', " "), render(v, false)))
                .collect();
            if top {
                entries.join("; ")
            } else {
                format!("({})", entries.join(", "))
            }
        }
        Value::Array(items) => items
            .iter()
            .filter(|v| !is_empty_result(v))
            .map(|v| render(v, false))
            .collect::<Vec<_>>()
            .join(", "),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Descriptions longer than this are sentences, not labels.
const MAX_LABEL_CHARS: usize = 48;

/// The result's facts, labelled from `output_schema` in the conversation's
/// language; the field the question asks about (its label or name shares a
/// word with it) first, then the fields the capability is named after
/// (`order_status` leads with the status). A result that is one list of
/// records is that list: one fact per record, without a label.
pub fn labelled_facts(
    result: &Value,
    output_schema: &Value,
    language: Language,
    question: &Said,
    capability: &str,
) -> Vec<Fact> {
    let Value::Object(map) = result else {
        return vec![Fact {
            label: humanise("result"),
            value: say(result, output_schema, language),
        }];
    };
    let present: Vec<(&String, &Value)> = map.iter().filter(|(_, v)| !is_empty_result(v)).collect();
    if let [(name, Value::Array(items))] = present.as_slice()
        && items.iter().any(Value::is_object)
    {
        let item_schema = &output_schema["properties"][name.as_str()]["items"];
        return items
            .iter()
            .filter(|v| !is_empty_result(v))
            .map(|item| Fact {
                label: String::new(),
                value: say(item, item_schema, language),
            })
            .collect();
    }
    let named_after = lexicon::concepts(&capability.replace(['_', '-'], " "));
    let question = asked_stems(question.words());
    let mut facts: Vec<((usize, usize), Fact)> = present
        .into_iter()
        .map(|(name, value)| {
            let schema = &output_schema["properties"][name.as_str()];
            let label = label(name, schema, language).unwrap_or_else(|| humanise(name));
            let asked = asked_about(&question, &format!("{name} {label}"));
            let kin = lexicon::concepts(&name.replace(['_', '-'], " "))
                .iter()
                .filter(|c| named_after.iter().any(|n| n.key == c.key))
                .count();
            (
                (asked, kin),
                Fact {
                    label,
                    value: say(value, schema, language),
                },
            )
        })
        .collect();
    // The most asked-about fact first, then what the capability is named
    // after; the others keep their order.
    facts.sort_by_key(|(rank, _)| std::cmp::Reverse(*rank));
    facts.into_iter().map(|(_, f)| f).collect()
}

/// A field's label in `language`: its `description` when short and written
/// in it; in English the field's name in words (names are English by
/// convention); in Spanish the lexicon's words for it. `None` when nothing
/// reads as `language`.
fn label(name: &str, schema: &Value, language: Language) -> Option<String> {
    let capitalised = |d: &str| {
        let mut chars = d.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default()
    };
    match schema.get("description").and_then(Value::as_str) {
        Some(d)
            if !d.trim().is_empty()
                && d.chars().count() <= MAX_LABEL_CHARS
                && written_in(d, language) =>
        {
            Some(capitalised(d.trim().trim_end_matches('.')))
        }
        _ => match language {
            Language::English => Some(humanise(name)),
            Language::Spanish => lexicon::field_label(name, language)
                .map(|l| capitalised(&l))
                .or_else(|| {
                    let words = humanise(name);
                    (Language::of(&words) == Language::Spanish
                        && !written_in(&words, Language::English))
                    .then_some(words)
                }),
        },
    }
}

/// Whether a short text reads as `language` (a text with no sign of either
/// counts as both).
pub fn written_in(text: &str, language: Language) -> bool {
    let w = words(text);
    let neutral = w.iter().all(|x| is_stopword(x) || x.chars().count() < 3);
    neutral || Language::of(text) == language
}

/// `customer_name` → `Customer name`.
fn humanise(name: &str) -> String {
    let spaced = name.replace(['_', '-'], " ");
    let mut chars = spaced.trim().chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn stem(word: &String) -> String {
    word.chars().take(5).collect()
}

/// The stems of a question's content words.
fn asked_stems(question: &[String]) -> Vec<String> {
    question
        .iter()
        .filter(|w| !is_stopword(w))
        .map(stem)
        .collect()
}

/// How many of the question's content words (`asked_stems`) the label or
/// name shares.
fn asked_about(question: &[String], label: &str) -> usize {
    let label: Vec<String> = words(&label.replace('_', " ")).iter().map(stem).collect();
    question.iter().filter(|w| label.contains(w)).count()
}

/// A field that names its record ("name", "store_name", "title"): said
/// first and without a label, the value names itself.
fn names_its_record(name: &str) -> bool {
    let n = name.to_lowercase();
    matches!(n.as_str(), "name" | "nombre" | "title" | "titulo" | "label")
        || n.ends_with("_name")
        || n.starts_with("name_")
}

/// A value in words: lists joined naturally, a record as its values, each
/// labelled when a label reads as the conversation's language (a number
/// always is, a bare number says nothing).
fn say(value: &Value, schema: &Value, language: Language) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => match (language, b) {
            (Language::Spanish, true) => "sí".into(),
            (Language::Spanish, false) => "no".into(),
            (Language::English, true) => "yes".into(),
            (Language::English, false) => "no".into(),
        },
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .filter(|v| !is_empty_result(v))
                .map(|v| say(v, &schema["items"], language))
                .collect();
            join_naturally(&parts, language, items.iter().any(Value::is_object))
        }
        Value::Object(map) => {
            let mut fields: Vec<(&String, &Value)> =
                map.iter().filter(|(_, v)| !is_empty_result(v)).collect();
            fields.sort_by_key(|(k, _)| !names_its_record(k));
            fields
                .into_iter()
                .map(|(k, v)| {
                    let field = &schema["properties"][k.as_str()];
                    let said = say(v, field, language);
                    let label = if names_its_record(k) {
                        None
                    } else {
                        label(k, field, language).or_else(|| (!v.is_string()).then(|| humanise(k)))
                    };
                    match label {
                        Some(l) => format!("{} {said}", l.to_lowercase()),
                        None => said,
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
        other => other.to_string(),
    }
}

fn join_naturally(parts: &[String], language: Language, items_are_objects: bool) -> String {
    if items_are_objects {
        // Each item keeps its own commas: items are set apart by semicolons.
        return parts.join("; ");
    }
    let and = match language {
        Language::Spanish => "y",
        Language::English => "and",
    };
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {and} {last}", init.join(", ")),
    }
}

fn numbers(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .map(|t| t.trim_matches(['.', ',']).replace(',', "."))
        .filter(|t| t.chars().any(|c| c.is_ascii_digit()))
        .collect()
}

fn names_internal_identifier(text: &str, allowed: &str) -> bool {
    INTERNAL_PREFIXES
        .iter()
        .any(|p| text.contains(p) && !allowed.contains(p))
}

/// A model's reply after a call: every number it states is in the result
/// or the user's message, and it names no internal identifier the result
/// did not carry.
pub fn reply_is_grounded(reply: &str, result: &Value, message: &str) -> bool {
    let source = format!("{} {message}", result_text(result));
    let known = numbers(&source);
    !reply.trim().is_empty()
        && numbers(reply).iter().all(|n| known.contains(n))
        && !names_internal_identifier(reply, &source)
}

/// A reply without any call: it may state no number the user did not write
/// and no internal identifier (rules 5, 6).
pub fn answer_is_safe(answer: &str, message: &str) -> bool {
    let known = numbers(message);
    !answer.trim().is_empty()
        && numbers(answer).iter().all(|n| known.contains(n))
        && !names_internal_identifier(answer, message)
}

fn result_text(result: &Value) -> String {
    render(result, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_results() {
        for empty in [
            json!(null),
            json!({}),
            json!([]),
            json!({"orders": [], "note": ""}),
        ] {
            assert!(is_empty_result(&empty), "{empty}");
        }
        assert!(!is_empty_result(&json!({"status": "shipped"})));
        assert!(!is_empty_result(&json!({"count": 0})));
    }

    #[test]
    fn facts_follow_the_result() {
        assert_eq!(
            facts(
                &json!({"status": "shipped", "note": "", "lines": [{"sku": "X1", "qty": 2}, {"sku": "Y2", "qty": 1}]})
            ),
            "lines: (qty: 2, sku: X1), (qty: 1, sku: Y2); status: shipped"
        );
    }

    #[test]
    fn facts_are_labelled_readable_and_lead_with_what_was_asked() {
        let schema = json!({"type": "object", "properties": {
            "status": {"type": "string", "description": "Estado del pedido"},
            "carrier": {"type": "string", "description": "Transportista"},
            "shipping_address": {"type": "string", "description": "Dirección de envío"},
            "lines": {"type": "array", "items": {"type": "object", "properties": {
                "sku": {"type": "string", "description": "Artículo"},
                "qty": {"type": "integer", "description": "Cantidad"}}}}}});
        let result = json!({"status": "en camino", "carrier": "Correos",
            "shipping_address": "Calle Mayor 1", "lines": [{"sku": "X1", "qty": 2}]});
        let facts = labelled_facts(
            &result,
            &schema,
            Language::Spanish,
            &Said::new("¿Cuál es la dirección de envío?"),
            "order_status",
        );
        assert_eq!(
            facts[0],
            Fact {
                label: "Dirección de envío".into(),
                value: "Calle Mayor 1".into()
            }
        );
        let text = crate::agent::language::texts::result_summary(Language::Spanish, &facts);
        assert!(text.contains("- Transportista: Correos"), "{text}");
        assert!(text.contains("- Estado del pedido: en camino"), "{text}");
        assert!(text.contains("cantidad 2, artículo X1"), "{text}");
        assert!(
            !text.contains("shipping_address") && !text.contains("qty:"),
            "{text}"
        );
        // An English conversation does not borrow Spanish labels.
        let facts = labelled_facts(
            &result,
            &schema,
            Language::English,
            &Said::new("Where is it?"),
            "order_status",
        );
        assert!(
            facts
                .iter()
                .any(|f| f.label == "Carrier" || f.label == "Transportista")
        );
        assert!(
            facts.iter().any(|f| f.label == "Shipping address"),
            "{facts:?}"
        );
    }

    #[test]
    fn invented_numbers_and_identifiers_are_caught() {
        let result = json!({"status": "shipped", "eta_days": 3});
        assert!(reply_is_grounded(
            "Your order shipped; it arrives in 3 days.",
            &result,
            "order A-1"
        ));
        assert!(!reply_is_grounded(
            "It arrives in 5 days.",
            &result,
            "order A-1"
        ));
        assert!(!reply_is_grounded(
            "Shipped (cap_abc123 rev 1).",
            &result,
            ""
        ));
        assert!(answer_is_safe("¡Hola! ¿En qué puedo ayudarte?", "hola"));
        assert!(!answer_is_safe(
            "Tu pedido llega el 12 de mayo.",
            "¿dónde está mi pedido?"
        ));
    }

    #[test]
    fn labels_read_as_the_conversation_and_a_list_of_records_is_a_list() {
        let schema = json!({"type": "object", "properties": {
            "stores": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string", "description": "Store"},
                "address": {"type": "string", "description": "Address"}}}}}});
        let result = json!({"stores": [
            {"name": "Tienda Centro", "address": "Gran Vía 12"},
            {"name": "Tienda Triana", "address": "Calle Betis 5"}]});
        let spanish = crate::agent::language::texts::result_summary(
            Language::Spanish,
            &labelled_facts(
                &result,
                &schema,
                Language::Spanish,
                &Said::new("¿Qué tiendas hay?"),
                "find_store",
            ),
        );
        assert_eq!(
            spanish,
            "Esto es lo que encontré:\n- Tienda Centro, dirección Gran Vía 12\n- Tienda Triana, dirección Calle Betis 5"
        );
        let one = json!({"stores": [{"name": "Covent Garden Store", "address": "12 Long Acre"}]});
        let english = crate::agent::language::texts::result_summary(
            Language::English,
            &labelled_facts(
                &one,
                &schema,
                Language::English,
                &Said::new("Which store?"),
                "find_store",
            ),
        );
        assert_eq!(
            english,
            "Here is what I found: Covent Garden Store, address 12 Long Acre."
        );
        // English field names in a Spanish conversation: the lexicon's words,
        // the capability's own subject first.
        let points = json!({"tier": "Gold", "points": 1250});
        let facts = labelled_facts(
            &points,
            &json!({"type": "object", "properties": {"points": {"type": "integer"}, "tier": {"type": "string"}}}),
            Language::Spanish,
            &Said::new("¿Cuántos puntos tengo?"),
            "loyalty_points",
        );
        assert_eq!(
            facts[0],
            Fact {
                label: "Puntos".into(),
                value: "1250".into()
            }
        );
    }
}
