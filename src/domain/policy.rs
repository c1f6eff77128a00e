//! The account-wide agent policy (contract 2.9) and its validation.
//!
//! Validation walks the raw JSON rather than relying on serde so that every
//! failure is classified as the contract asks: `POLICY_EMPTY` when neither
//! `instructions` nor `allowed_topics` is given, `POLICY_INVALID` otherwise.
//! Bounds are recorded in docs/contract-decisions.md.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::text::check_bounded;

pub const MAX_INSTRUCTIONS_CHARS: usize = 8_000;
pub const MAX_TOPICS: usize = 50;
pub const MAX_TOPIC_NAME_CHARS: usize = 100;
pub const MAX_TOPIC_DESCRIPTION_CHARS: usize = 1_000;
pub const MAX_OUT_OF_SCOPE_CHARS: usize = 1_000;
/// Request body limit of PUT /v1/agent-policy (contract section 8).
pub const MAX_POLICY_BYTES: usize = 16 * 1024;

const FIELDS: [&str; 4] = [
    "version",
    "instructions",
    "allowed_topics",
    "out_of_scope_response",
];

/// The policy (2.9): also the request body of PUT, hence closed
/// ("no other properties are allowed"). The bounds are the document's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"version": 1, "instructions": "Answer in the customer's language; only about orders.", "allowed_topics": [{"name": "orders", "description": "Order status and delivery"}], "out_of_scope_response": "I can only help with orders."}))]
pub struct AgentPolicy {
    /// Always 1.
    #[schema(minimum = 1, maximum = 1)]
    pub version: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 8000)]
    pub instructions: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 50)]
    pub allowed_topics: Option<Vec<Topic>>,
    /// Valid only together with `allowed_topics`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 1000)]
    pub out_of_scope_response: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Topic {
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
    #[schema(min_length = 1, max_length = 1000)]
    pub description: String,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("{0}")]
    Invalid(String),
    #[error("the policy must set instructions or allowed_topics")]
    Empty,
}

impl AgentPolicy {
    pub fn from_json(value: &Value) -> Result<Self, PolicyError> {
        let invalid = |msg: String| PolicyError::Invalid(msg);
        let object = value
            .as_object()
            .ok_or_else(|| invalid("the policy must be a JSON object".into()))?;
        if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(invalid(format!("unknown property {unknown:?}")));
        }
        match object.get("version") {
            None => return Err(invalid("version is required".into())),
            Some(v) if v.as_u64() == Some(1) => {}
            Some(_) => return Err(invalid("version must be the integer 1".into())),
        }
        if !object.contains_key("instructions") && !object.contains_key("allowed_topics") {
            return Err(PolicyError::Empty);
        }
        let instructions = optional_string(object, "instructions", MAX_INSTRUCTIONS_CHARS)?;
        if instructions.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Err(invalid("instructions must not be blank".into()));
        }
        let allowed_topics = object.get("allowed_topics").map(parse_topics).transpose()?;
        let out_of_scope_response =
            optional_string(object, "out_of_scope_response", MAX_OUT_OF_SCOPE_CHARS)?;
        if out_of_scope_response.is_some() && allowed_topics.is_none() {
            return Err(invalid(
                "out_of_scope_response is valid only together with allowed_topics".into(),
            ));
        }
        Ok(AgentPolicy {
            version: 1,
            instructions,
            allowed_topics,
            out_of_scope_response,
        })
    }
}

fn optional_string(
    object: &Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<Option<String>, PolicyError> {
    match object.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => {
            check_bounded(field, s, 1, max).map_err(PolicyError::Invalid)?;
            Ok(Some(s.clone()))
        }
        Some(_) => Err(PolicyError::Invalid(format!("{field} must be a string"))),
    }
}

fn parse_topics(value: &Value) -> Result<Vec<Topic>, PolicyError> {
    let invalid = |msg: String| PolicyError::Invalid(msg);
    let items = value
        .as_array()
        .ok_or_else(|| invalid("allowed_topics must be an array".into()))?;
    if items.is_empty() || items.len() > MAX_TOPICS {
        return Err(invalid(format!(
            "allowed_topics must hold 1 to {MAX_TOPICS} topics"
        )));
    }
    let mut topics: Vec<Topic> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("allowed_topics[{i}]");
        let object = item
            .as_object()
            .ok_or_else(|| invalid(format!("{at} must be an object")))?;
        if let Some(unknown) = object
            .keys()
            .find(|k| !["name", "description"].contains(&k.as_str()))
        {
            return Err(invalid(format!("{at} has unknown property {unknown:?}")));
        }
        let field = |name: &str, max: usize| -> Result<String, PolicyError> {
            optional_string(object, name, max)?
                .ok_or_else(|| invalid(format!("{at}.{name} is required")))
        };
        let name = field("name", MAX_TOPIC_NAME_CHARS)?;
        let description = field("description", MAX_TOPIC_DESCRIPTION_CHARS)?;
        if topics.iter().any(|t| t.name.eq_ignore_ascii_case(&name)) {
            return Err(invalid(format!("{at}.name {name:?} is listed twice")));
        }
        topics.push(Topic { name, description });
    }
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> Result<AgentPolicy, PolicyError> {
        AgentPolicy::from_json(&v)
    }

    #[test]
    fn accepts_minimal_policies() {
        assert!(check(json!({"version": 1, "instructions": "Answer in Spanish."})).is_ok());
        let p = check(json!({"version": 1, "allowed_topics": [{"name": "orders", "description": "Order status"}],
                             "out_of_scope_response": "Solo pedidos."}))
        .unwrap();
        assert_eq!(p.allowed_topics.unwrap().len(), 1);
    }

    #[test]
    fn classifies_empty_and_invalid() {
        assert_eq!(check(json!({"version": 1})), Err(PolicyError::Empty));
        assert_eq!(
            check(json!({"version": 1, "out_of_scope_response": "x"})),
            Err(PolicyError::Empty)
        );
        for bad in [
            json!([]),
            json!({"instructions": "x"}),
            json!({"version": 2, "instructions": "x"}),
            json!({"version": "1", "instructions": "x"}),
            json!({"version": 1.5, "instructions": "x"}),
            json!({"version": 1, "instructions": "x", "extra": true}),
            json!({"version": 1, "instructions": "   "}),
            json!({"version": 1, "instructions": 7}),
            json!({"version": 1, "instructions": "x", "out_of_scope_response": "no"}),
            json!({"version": 1, "allowed_topics": []}),
            json!({"version": 1, "allowed_topics": [{"name": "a"}]}),
            json!({"version": 1, "allowed_topics": [{"name": "a", "description": "b", "c": 1}]}),
            json!({"version": 1, "allowed_topics": [{"name": "a", "description": "b"}, {"name": "A", "description": "c"}]}),
            json!({"version": 1, "instructions": "x".repeat(MAX_INSTRUCTIONS_CHARS + 1)}),
        ] {
            assert!(
                matches!(check(bad.clone()), Err(PolicyError::Invalid(_))),
                "{bad}"
            );
        }
    }
}
