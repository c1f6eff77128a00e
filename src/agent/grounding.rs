//! Rules 5 and 6 on what reaches the user: a reply is grounded in the pruned
//! result (no number the result or the user did not give), names no
//! internal identifier, and an empty result is recognised as such so that
//! nothing is invented about it.

use serde_json::Value;

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
}
