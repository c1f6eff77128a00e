//! Capability fixtures shared by the capability tests.

use crate::helpers::*;
use serde_json::{Value, json};

pub const CREDENTIAL: &str = "cred_orders";

/// A definition every rule accepts (given `cred_orders` is configured).
pub fn valid_definition(name: &str) -> Value {
    json!({
        "name": name,
        "description": "Looks up the status of an order",
        "when_to_use": "When the user asks where an order is",
        "method": "POST",
        "url": "https://api.shop.example/v1/orders/status",
        "auth": {"type": "bearer", "credential_ref": CREDENTIAL},
        "safe_headers": {"accept": "application/json"},
        "input_schema": {
            "type": "object", "additionalProperties": false, "required": ["order"],
            "properties": {"order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z0-9-]+$",
                                     "description": "The order number"}}
        },
        "output_schema": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "status": {"type": "string", "maxLength": 40},
                "lines": {"type": "array", "maxItems": 10, "items": {
                    "type": "object", "additionalProperties": false,
                    "properties": {"sku": {"type": "string", "maxLength": 20}, "qty": {"type": "integer"}}
                }}
            }
        },
        "business_rules": ["Only the customer's own orders"],
        "examples": [],
        "side_effect": "read",
        "requires_approval": false,
        "timeout_ms": 5000,
        "retry_count": 1
    })
}

/// An account with a key and the fixtures' credential configured.
pub async fn account_ready(app: &TestApp, name: &str) -> String {
    let key = app.account_with_key(name).await;
    let secret = json!({"auth_type": "bearer", "secret": "endpoint-token-123"});
    let (status, _) = app.put_credential(&key, CREDENTIAL, &secret).await;
    assert_eq!(status, 201);
    key
}

pub fn new_key() -> String {
    format!("idem-{}", uuid::Uuid::new_v4().simple())
}

/// `(pointer, rule)` pairs of a 400 violations body.
pub fn violation_pairs(body: &Value) -> Vec<(String, String)> {
    body["violations"]
        .as_array()
        .unwrap_or_else(|| panic!("no violations in {body}"))
        .iter()
        .map(|v| {
            (
                v["pointer"].as_str().unwrap().to_owned(),
                v["rule"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}
