//! The capability request bodies (2.5 and its wrappers) as the document
//! describes them. The handlers read raw JSON and the policy guest judges
//! each definition (its rules are the authority, each refusal located:
//! docs/contract-decisions.md); these types describe what it accepts.

use serde_json::{Value, json};

/// The document's example definition: `examples/manifests/orders.json`.
macro_rules! example_definition {
    () => {
        json!({"name": "order_status", "description": "Looks up the status of an order", "when_to_use": "When the user asks where an order is", "method": "POST", "url": "https://api.shop.example/v1/orders/status", "auth": {"type": "bearer", "credential_ref": "cred_orders"}, "safe_headers": {"accept": "application/json"}, "input_schema": {"type": "object", "additionalProperties": false, "required": ["order"], "properties": {"order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z0-9-]+$", "description": "The order number"}}}, "output_schema": {"type": "object", "additionalProperties": false, "properties": {"status": {"type": "string", "maxLength": 40}, "lines": {"type": "array", "maxItems": 10, "items": {"type": "object", "additionalProperties": false, "properties": {"sku": {"type": "string", "maxLength": 20}, "qty": {"type": "integer"}}}}}}, "business_rules": ["Only the customer's own orders"], "examples": [], "side_effect": "read", "requires_approval": false, "timeout_ms": 5000, "retry_count": 1})
    };
}

/// A single create or a revision (CapabilityPatchRequest): `{domain, capability}`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"domain": "orders", "capability": example_definition!()}))]
pub struct CapabilityRequest {
    #[schema(min_length = 1, max_length = 100)]
    domain: String,
    capability: CapabilityDefinitionDoc,
}

/// A manifest: `{domain, capabilities}`, 1 to 50 definitions.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"domain": "orders", "capabilities": [example_definition!()]}))]
pub struct ManifestRequest {
    #[schema(min_length = 1, max_length = 100)]
    domain: String,
    #[schema(min_items = 1, max_items = 50)]
    capabilities: Vec<CapabilityDefinitionDoc>,
}

/// A capability definition (2.5): a read-only HTTPS endpoint, its schemas
/// (the closed language of 2.6) and how to call it. No secret.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
#[serde(deny_unknown_fields)]
#[schema(as = CapabilityDefinition)]
pub struct CapabilityDefinitionDoc {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)]
    name: String,
    #[schema(min_length = 1, max_length = 2000)]
    description: String,
    #[schema(min_length = 1, max_length = 2000)]
    when_to_use: Option<String>,
    #[schema(value_type = crate::domain::capability::HttpMethod)]
    method: String,
    /// The exact HTTPS URL of the host endpoint.
    #[schema(format = "uri", max_length = 2048)]
    url: String,
    auth: AuthDoc,
    /// Lowercase header name to value; never secrets.
    #[schema(value_type = Option<HashMap<String, String>>)]
    safe_headers: Option<Value>,
    /// Schema of the arguments (2.6).
    #[schema(value_type = Object)]
    input_schema: Value,
    /// Schema of the endpoint result (2.6).
    #[schema(value_type = Object)]
    output_schema: Value,
    #[schema(max_items = 32)]
    business_rules: Option<Vec<String>>,
    #[schema(value_type = Option<Vec<Object>>, max_items = 16)]
    examples: Option<Vec<Value>>,
    #[schema(value_type = crate::domain::capability::SideEffect)]
    side_effect: String,
    /// Always `false`.
    requires_approval: Option<bool>,
    #[schema(minimum = 100, maximum = 30000)]
    timeout_ms: Option<u64>,
    #[schema(minimum = 0, maximum = 3)]
    retry_count: Option<u32>,
    #[schema(value_type = Option<crate::domain::capability::ResultHandling>)]
    result_handling: Option<String>,
    /// `{"<input property>": {"from_capability": "<name>", "field": "<result field>"}}`.
    #[schema(value_type = Option<Object>)]
    context_bindings: Option<Value>,
}

/// `auth` of a definition.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
#[serde(deny_unknown_fields)]
#[schema(as = CapabilityAuth)]
pub struct AuthDoc {
    #[serde(rename = "type")]
    #[schema(value_type = crate::domain::credential::AuthType)]
    auth_type: String,
    #[schema(
        pattern = "^cred_[A-Za-z0-9_-]{3,120}$",
        min_length = 7,
        max_length = 128
    )]
    credential_ref: String,
}
