//! Rule 4: after a successful call returns exactly one bounded name-like
//! value in a field some capability's `context_bindings` names, that value
//! may fill the bound input in a later turn of the same conversation.
//! IDs, credentials, amounts, dates and raw results are never kept: a
//! name-like value has letters and no digit, no `@`, `/` or `:`.
//!
//! `context_bindings` (recorded in docs/contract-decisions.md):
//! `{"<input property>": {"from_capability": "<name>", "field": "<result field>"}}`.

use serde_json::Value;

use crate::domain::capability::CapabilityDefinition;
use crate::store::conversations::StoredReference;

pub const MAX_REFERENCE_CHARS: usize = 64;
const MAX_REFERENCE_WORDS: usize = 6;

/// `(from_capability, field)` bound to `input` in `definition`.
pub fn binding(definition: &CapabilityDefinition, input: &str) -> Option<(String, String)> {
    let b = definition.context_bindings.as_ref()?.get(input)?;
    Some((
        b.get("from_capability")?.as_str()?.to_owned(),
        b.get("field")?.as_str()?.to_owned(),
    ))
}

pub fn is_name_like(value: &str) -> bool {
    let v = value.trim();
    let n = v.chars().count();
    (1..=MAX_REFERENCE_CHARS).contains(&n)
        && v.split_whitespace().count() <= MAX_REFERENCE_WORDS
        && v.chars().any(char::is_alphabetic)
        && v.chars()
            .all(|c| c.is_alphabetic() || matches!(c, ' ' | '-' | '.' | '\'' | '&'))
}

/// What a successful call of `producer` changes: references to set (one
/// unique name-like value) and `(capability, field)` pairs to forget
/// (none, several, or not name-like: fail closed).
pub fn harvest<'a>(
    producer: &str,
    result: &Value,
    consumers: impl Iterator<Item = &'a CapabilityDefinition>,
) -> (Vec<StoredReference>, Vec<(String, String)>) {
    let mut fields: Vec<String> = Vec::new();
    for definition in consumers {
        let Some(bindings) = definition
            .context_bindings
            .as_ref()
            .and_then(Value::as_object)
        else {
            continue;
        };
        for b in bindings.values() {
            if b.get("from_capability").and_then(Value::as_str) == Some(producer)
                && let Some(field) = b.get("field").and_then(Value::as_str)
                && !fields.iter().any(|f| f == field)
            {
                fields.push(field.to_owned());
            }
        }
    }
    let (mut set, mut clear) = (Vec::new(), Vec::new());
    for field in fields {
        let mut values: Vec<&str> = Vec::new();
        find_values(result, &field, &mut values);
        values.dedup();
        match values.as_slice() {
            [one] if is_name_like(one) => set.push(StoredReference {
                capability: producer.to_owned(),
                field,
                value: one.trim().to_owned(),
            }),
            _ => clear.push((producer.to_owned(), field)),
        }
    }
    (set, clear)
}

/// Every value under key `field` anywhere in `value`; a non-string value
/// poisons the set (it is not name-like).
fn find_values<'v>(value: &'v Value, field: &str, out: &mut Vec<&'v str>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == field {
                    match v {
                        Value::String(s) => {
                            if !out.contains(&s.as_str()) {
                                out.push(s)
                            }
                        }
                        _ => out.push("\u{0}"),
                    }
                } else {
                    find_values(v, field, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| find_values(v, field, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn consumer() -> CapabilityDefinition {
        serde_json::from_value(json!({"name": "orders_of_customer", "method": "POST", "url": "https://x.example/",
            "auth": {"type": "bearer", "credential_ref": "cred_x"}, "input_schema": {}, "output_schema": {},
            "context_bindings": {"customer": {"from_capability": "find_customer", "field": "name"}}}))
        .unwrap()
    }

    #[test]
    fn one_name_like_value_is_kept_anything_else_is_forgotten() {
        let c = consumer();
        let (set, clear) = harvest(
            "find_customer",
            &json!({"name": "Ana Pérez", "id": "C-1"}),
            [&c].into_iter(),
        );
        assert_eq!(set[0].value, "Ana Pérez");
        assert!(clear.is_empty());
        for bad in [
            json!({"matches": [{"name": "Ana"}, {"name": "Luis"}]}),
            json!({"name": "C-10023"}),
            json!({"name": "ana@example.com"}),
            json!({"name": "2024-05-01"}),
            json!({}),
        ] {
            let (set, clear) = harvest("find_customer", &bad, [&c].into_iter());
            assert!(set.is_empty(), "{bad}");
            assert_eq!(clear.len(), 1);
        }
        let (set, clear) = harvest("other", &json!({"name": "Ana"}), [&c].into_iter());
        assert!(set.is_empty() && clear.is_empty());
    }
}
