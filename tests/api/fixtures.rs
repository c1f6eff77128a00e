//! Capability fixtures and request helpers shared by the capability tests.

use crate::helpers::*;
use serde_json::{Value, json};

pub const CREDENTIAL: &str = "cred_orders";

/// A definition every rule accepts (given `cred_orders` is configured): the
/// example manifest's `order_status`, named `name`.
pub fn valid_definition(name: &str) -> Value {
    let mut definition = warden_policy_rules::fixtures::order_status();
    definition["name"] = json!(name);
    definition["auth"]["credential_ref"] = json!(CREDENTIAL);
    definition
}

/// An account with a key and the fixtures' credential configured.
pub async fn account_ready(app: &TestApp, name: &str) -> String {
    let key = app.account_with_key(name).await;
    let response = app
        .client
        .put(app.url(&format!("/v1/capability-credentials/{CREDENTIAL}")))
        .bearer_auth(&key)
        .json(&json!({"auth_type": "bearer", "secret": "endpoint-token-123"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    key
}

pub fn new_key() -> String {
    format!("idem-{}", uuid::Uuid::new_v4().simple())
}

pub async fn import(
    app: &TestApp,
    key: &str,
    idempotency_key: &str,
    definitions: Vec<Value>,
) -> reqwest::Response {
    app.client
        .post(app.url("/v1/capabilities/import"))
        .bearer_auth(key)
        .header("idempotency-key", idempotency_key)
        .json(&json!({"domain": "orders", "capabilities": definitions}))
        .send()
        .await
        .unwrap()
}

pub async fn create(app: &TestApp, key: &str, definition: Value) -> (u16, Value) {
    let response = app
        .client
        .post(app.url("/v1/capabilities"))
        .bearer_auth(key)
        .header("idempotency-key", new_key())
        .json(&json!({"domain": "orders", "capability": definition}))
        .send()
        .await
        .unwrap();
    status_and_json(response).await
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
