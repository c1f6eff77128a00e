//! Capability fixtures shared by the capability tests.

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
    configure_credential(&app.api(&key)).await;
    key
}

/// An account ready as [`account_ready`] whose `order_status` capability
/// calls a [`HeldEndpoint`](crate::helpers::endpoint::HeldEndpoint): its
/// turns wait at the endpoint until the test releases them.
pub async fn account_with_held_order_status(
    app: &TestApp,
    name: &str,
) -> (String, crate::helpers::endpoint::HeldEndpoint) {
    let key = account_ready(app, name).await;
    let held = crate::helpers::endpoint::HeldEndpoint::start().await;
    let definition = crate::helpers::shop::order_status(&held.endpoint.base);
    let (status, body) = app.create_capability(&key, definition).await;
    assert_eq!(status, 201, "{body}");
    (key, held)
}

/// Configures the fixtures' credential (`cred_orders`, a bearer token) for
/// the account of `api`.
pub async fn configure_credential(api: &ApiClient) {
    let secret = json!({"auth_type": "bearer", "secret": "endpoint-token-123"});
    let (status, body) = api.put_credential(CREDENTIAL, &secret).await;
    assert_eq!(status, 201, "{body}");
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
