//! Capabilities as MCP tools, and an executor report as a tool result.
//!
//! Only read capabilities are tools: a preparation (`result_handling:
//! host_interaction`) prepares an operation the host's own application
//! confirms through opaque references, which an MCP client has no way to
//! report back, so it is never listed and never called from here.

use serde_json::{Map, Value, json};

use super::protocol::Revision;
use crate::agent::catalog::Cataloged;
use crate::executor::{CallFailure, CallResult, FailureSummary};

/// Whether a capability is offered as a tool.
pub fn is_tool(capability: &Cataloged) -> bool {
    !capability.at.definition.is_host_interaction()
}

/// The `Tool` object of one capability (2025-06-18 and later).
pub fn tool(capability: &Cataloged, revision: Revision) -> Value {
    let definition = &capability.at.definition;
    let mut description = definition.description.trim().to_owned();
    let when = definition.when_to_use.trim();
    if !when.is_empty() {
        if !description.is_empty() {
            description.push_str("\n\n");
        }
        description.push_str("When to use: ");
        description.push_str(when);
    }
    let mut tool = Map::new();
    tool.insert("name".into(), json!(definition.name));
    tool.insert("title".into(), json!(title(&definition.name)));
    tool.insert("description".into(), json!(description));
    tool.insert("inputSchema".into(), definition.input_schema.clone());
    // Before 2026-07-28 an output schema's root must be an object.
    if revision.is_modern() || is_object_schema(&definition.output_schema) {
        tool.insert("outputSchema".into(), definition.output_schema.clone());
    }
    tool.insert(
        "annotations".into(),
        json!({"readOnlyHint": true, "openWorldHint": true}),
    );
    Value::Object(tool)
}

/// `order_status` → `Order status`.
fn title(name: &str) -> String {
    let spaced: String = name
        .chars()
        .map(|c| if c == '_' || c == '-' { ' ' } else { c })
        .collect();
    let mut chars = spaced.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => spaced,
    }
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// A successful call: the pruned result as `structuredContent` and as text.
pub fn success(data: &Value, revision: Revision) -> Value {
    let mut result = json!({
        "content": [{"type": "text", "text": data.to_string()}],
        "isError": false,
    });
    // Before 2026-07-28 `structuredContent` is an object.
    if revision.is_modern() || data.is_object() {
        result["structuredContent"] = data.clone();
    }
    result
}

/// A failed call, as a tool result the model can read: the contract's reason
/// and its safe message (no endpoint body, header, address or secret), and
/// for refused arguments each located violation, so it can correct itself.
pub fn failure(failure: &CallFailure) -> Value {
    let summary = FailureSummary::from(failure);
    let mut text = format!("{}: {}", summary.reason, summary.message);
    if let CallFailure::ArgumentsInvalid(violations) = failure {
        text.push_str("; nothing was called.");
        for v in violations {
            let pointer = if v.pointer.is_empty() {
                "(the arguments)"
            } else {
                v.pointer.as_str()
            };
            text.push_str(&format!("\n{pointer}: {} [{}]", v.message, v.rule));
        }
    }
    json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
    })
}

/// What an executor outcome is as a tool result.
pub fn result(outcome: &Result<CallResult, CallFailure>, revision: Revision) -> Value {
    match outcome {
        Ok(CallResult::Data(data)) => success(data, revision),
        // Preparations are never called from here (`is_tool`); should one
        // ever be, its references must not leave: say only that it failed.
        Ok(CallResult::Interaction(_)) => json!({
            "content": [{"type": "text", "text": "interaction_invalid: this capability is not a tool"}],
            "isError": true,
        }),
        Err(f) => failure(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_read_as_words() {
        assert_eq!(title("order_status"), "Order status");
        assert_eq!(title("track-parcel"), "Track parcel");
        assert_eq!(title(""), "");
    }

    #[test]
    fn failures_carry_the_reason_and_never_more() {
        let value = failure(&CallFailure::Timeout { timeout_ms: 5000 });
        assert_eq!(value["isError"], true);
        assert_eq!(
            value["content"][0]["text"],
            "timeout: the endpoint did not answer within 5000 ms"
        );
        assert!(value.get("structuredContent").is_none());
    }

    #[test]
    fn structured_content_before_2026_is_an_object_only() {
        assert!(
            success(&json!([1]), Revision::V2025_06_18)
                .get("structuredContent")
                .is_none()
        );
        assert_eq!(
            success(&json!([1]), Revision::V2026_07_28)["structuredContent"],
            json!([1])
        );
        assert_eq!(
            success(&json!({"a": 1}), Revision::V2025_11_25)["content"][0]["text"],
            "{\"a\":1}"
        );
    }
}
