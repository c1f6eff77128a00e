//! The capability-definition rules of contract 2.5, plus both schemas (2.6).
//!
//! Where the contract leaves bounds "not shown", the values chosen here are
//! documented in docs/sandbox.md ("Definition rules").

use serde_json::{Map, Value};

use crate::schema::{self, Dialect};
use crate::secrets;
use crate::url;
use crate::violation::{Pointer, Violation, Violations};

/// Switches the host passes (mirrors the WIT record).
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub allow_loopback_http: bool,
}

/// Bounds of the definition fields.
pub mod limits {
    pub const NAME_MAX: usize = 64;
    pub const TEXT_MAX: usize = 2_000;
    pub const BUSINESS_RULES_MAX: usize = 32;
    pub const BUSINESS_RULE_MAX: usize = 500;
    pub const EXAMPLES_MAX: usize = 16;
    pub const SAFE_HEADERS_MAX: usize = 16;
    pub const HEADER_VALUE_MAX: usize = 256;
    pub const TIMEOUT_MS_MIN: u64 = 100;
    pub const TIMEOUT_MS_MAX: u64 = 30_000;
    pub const RETRY_COUNT_MAX: u64 = 3;
    pub const CONTEXT_BINDINGS_MAX: usize = 16;
}

const REQUIRED: &[&str] = &[
    "name",
    "description",
    "method",
    "url",
    "auth",
    "input_schema",
    "output_schema",
    "side_effect",
];
const OPTIONAL: &[&str] = &[
    "when_to_use",
    "safe_headers",
    "business_rules",
    "examples",
    "requires_approval",
    "timeout_ms",
    "retry_count",
    "result_handling",
    "context_bindings",
];

/// Fields rejected by name (contract 1 rule 7, 2.5), with their rule.
const REJECTED: &[(&str, &str)] = &[
    ("mutation", "mutation-field"),
    ("mutates", "mutation-field"),
    ("is_mutation", "mutation-field"),
    ("mutation_capability", "mutation-field"),
    ("write", "mutation-field"),
    ("writes", "mutation-field"),
    ("idempotency_key", "mutation-field"),
    ("approval", "approval-field"),
    ("approvals", "approval-field"),
    ("approval_policy", "approval-field"),
    ("approval_metadata", "approval-field"),
    ("approval_required", "approval-field"),
    ("approvers", "approval-field"),
    ("requires_confirmation", "approval-field"),
    ("candidate_resolution", "candidate-resolution-field"),
    ("candidates", "candidate-resolution-field"),
    ("candidate_capability", "candidate-resolution-field"),
    ("resolution_candidates", "candidate-resolution-field"),
    ("action", "legacy-workflow-field"),
    ("actions", "legacy-workflow-field"),
    ("action_type", "legacy-workflow-field"),
    ("resolution", "legacy-workflow-field"),
    ("resolution_capabilities", "legacy-workflow-field"),
    ("requires_previous_capability", "legacy-workflow-field"),
    ("on_confirm", "legacy-workflow-field"),
];

/// Header names never allowed in `safe_headers`: credentials and headers the
/// executor owns.
const FORBIDDEN_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "x-api-token",
    "x-auth-token",
    "x-access-token",
    "x-amz-security-token",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "signature",
    "signature-input",
    "capability-context",
    "content-digest",
];

/// Checks one capability definition (JSON text).
pub fn check_text(text: &str, options: Options) -> Result<(), Vec<Violation>> {
    let value = crate::parse_json(text)?;
    check(&value, options)
}

/// Checks one parsed capability definition.
pub fn check(def: &Value, options: Options) -> Result<(), Vec<Violation>> {
    let mut out = Violations::new();
    let root = Pointer::root();
    let Some(obj) = def.as_object() else {
        out.push(
            &root,
            "definition-not-object",
            "a capability definition must be a JSON object",
        );
        return out.finish(());
    };

    for (key, _) in obj {
        let p = root.key(key);
        if let Some((_, rule)) = REJECTED.iter().find(|(name, _)| name == key) {
            out.push(&p, rule, format!(
                "\"{key}\" is not accepted: public capabilities are read-only, with no approval, candidate-resolution or action workflow"
            ));
        } else if !REQUIRED.contains(&key.as_str()) && !OPTIONAL.contains(&key.as_str()) {
            out.push(
                &p,
                "field-unknown",
                format!("\"{key}\" is not a capability definition field"),
            );
        }
    }
    for key in REQUIRED {
        if !obj.contains_key(*key) {
            out.push(
                &root.key(key),
                "field-required",
                format!("\"{key}\" is required"),
            );
        }
    }

    if let Some(v) = obj.get("name") {
        let ok = v.as_str().is_some_and(|s| {
            !s.is_empty()
                && s.len() <= limits::NAME_MAX
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
        if !ok {
            out.push(
                &root.key("name"),
                "name-invalid",
                "name must be 1 to 64 characters of letters, digits, '_' and '-'",
            );
        }
    }
    for key in ["description", "when_to_use"] {
        if let Some(v) = obj.get(key) {
            text_field(v, &root.key(key), limits::TEXT_MAX, &mut out);
        }
    }
    if let Some(v) = obj.get("method")
        && v.as_str() != Some("POST")
    {
        out.push(
            &root.key("method"),
            "method-not-allowed",
            "method must be \"POST\"",
        );
    }
    if let Some(v) = obj.get("url") {
        match v.as_str() {
            Some(u) => {
                if let Err((rule, msg)) = url::check(u, options.allow_loopback_http) {
                    out.push(&root.key("url"), rule, msg);
                }
            }
            None => out.push(&root.key("url"), "url-invalid", "url must be a string"),
        }
    }
    if let Some(v) = obj.get("auth") {
        check_auth(v, &root.key("auth"), &mut out);
    }
    if let Some(v) = obj.get("safe_headers") {
        check_headers(v, &root.key("safe_headers"), &mut out);
    }
    if let Some(v) = obj.get("side_effect")
        && v.as_str() != Some("read")
    {
        out.push(
            &root.key("side_effect"),
            "side-effect-not-read",
            "side_effect must be \"read\": mutation capabilities are rejected",
        );
    }
    if let Some(v) = obj.get("requires_approval")
        && v != &Value::Bool(false)
    {
        out.push(
            &root.key("requires_approval"),
            "requires-approval-not-false",
            "requires_approval must be false: approval metadata is rejected",
        );
    }
    if let Some(v) = obj.get("timeout_ms")
        && !v
            .as_u64()
            .is_some_and(|n| (limits::TIMEOUT_MS_MIN..=limits::TIMEOUT_MS_MAX).contains(&n))
    {
        out.push(
            &root.key("timeout_ms"),
            "timeout-out-of-bounds",
            format!(
                "timeout_ms must be an integer from {} to {}",
                limits::TIMEOUT_MS_MIN,
                limits::TIMEOUT_MS_MAX
            ),
        );
    }
    if let Some(v) = obj.get("retry_count")
        && v.as_u64().is_none_or(|n| n > limits::RETRY_COUNT_MAX)
    {
        out.push(
            &root.key("retry_count"),
            "retry-count-out-of-bounds",
            format!(
                "retry_count must be an integer from 0 to {}",
                limits::RETRY_COUNT_MAX
            ),
        );
    }
    if let Some(v) = obj.get("result_handling")
        && v.as_str() != Some("host_interaction")
    {
        out.push(
            &root.key("result_handling"),
            "result-handling-invalid",
            "result_handling, when present, must be \"host_interaction\"",
        );
    }
    if let Some(v) = obj.get("business_rules") {
        let p = root.key("business_rules");
        match v.as_array() {
            Some(list) if list.len() <= limits::BUSINESS_RULES_MAX => {
                for (i, r) in list.iter().enumerate() {
                    text_field(r, &p.index(i), limits::BUSINESS_RULE_MAX, &mut out);
                }
            }
            _ => out.push(
                &p,
                "field-invalid",
                format!(
                    "business_rules must be an array of at most {} strings",
                    limits::BUSINESS_RULES_MAX
                ),
            ),
        }
    }
    if let Some(v) = obj.get("examples")
        && v.as_array().is_none_or(|l| l.len() > limits::EXAMPLES_MAX)
    {
        out.push(
            &root.key("examples"),
            "field-invalid",
            format!(
                "examples must be an array of at most {} entries",
                limits::EXAMPLES_MAX
            ),
        );
    }

    let input = obj
        .get("input_schema")
        .map(|s| schema::check(Dialect::Input, s, &root.key("input_schema"), &mut out));
    if let Some(s) = obj.get("output_schema") {
        schema::check(Dialect::Output, s, &root.key("output_schema"), &mut out);
        if obj.get("result_handling").and_then(Value::as_str) == Some("host_interaction") {
            crate::interaction::check_output_schema(s, &root.key("output_schema"), &mut out);
        }
    }
    if let Some(v) = obj.get("context_bindings") {
        check_bindings(v, input.as_ref(), &root.key("context_bindings"), &mut out);
    }

    // No secret-looking value anywhere in the definition.
    scan_secrets(def, &root, false, &mut out);
    out.finish(())
}

fn text_field(v: &Value, at: &Pointer, max: usize, out: &mut Violations) {
    match v.as_str() {
        Some(s) if !s.trim().is_empty() && s.chars().count() <= max => {}
        _ => out.push(
            at,
            "field-invalid",
            format!("must be a non-empty string of at most {max} characters"),
        ),
    }
}

fn check_auth(v: &Value, at: &Pointer, out: &mut Violations) {
    let Some(auth) = v.as_object() else {
        out.push(
            at,
            "auth-invalid",
            "auth must be an object with type and credential_ref",
        );
        return;
    };
    for key in auth.keys() {
        if key != "type" && key != "credential_ref" {
            out.push(&at.key(key), "field-unknown", format!(
                "\"{key}\" is not an auth field; secrets are stored as credentials, never in a manifest"
            ));
        }
    }
    match auth.get("type").and_then(Value::as_str) {
        Some("bearer" | "api_key" | "basic") => {}
        Some("none") => out.push(
            &at.key("type"),
            "auth-none-rejected",
            "auth.type \"none\" is rejected: host endpoints must be protected by a credential",
        ),
        _ => out.push(
            &at.key("type"),
            "auth-type-invalid",
            "auth.type must be bearer, api_key or basic",
        ),
    }
    let ok = auth
        .get("credential_ref")
        .and_then(Value::as_str)
        .is_some_and(|r| {
            r.len() >= 7
                && r.len() <= 128
                && r.strip_prefix("cred_").is_some_and(|rest| {
                    (3..=120).contains(&rest.len())
                        && rest
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                })
        });
    if !ok {
        out.push(
            &at.key("credential_ref"),
            "credential-ref-invalid",
            "auth.credential_ref must match ^cred_[A-Za-z0-9_-]{3,120}$",
        );
    }
}

fn check_headers(v: &Value, at: &Pointer, out: &mut Violations) {
    let Some(map) = v.as_object() else {
        out.push(
            at,
            "field-invalid",
            "safe_headers must be an object of header name to string",
        );
        return;
    };
    if map.len() > limits::SAFE_HEADERS_MAX {
        out.push(
            at,
            "field-invalid",
            format!("at most {} safe headers", limits::SAFE_HEADERS_MAX),
        );
    }
    for (name, value) in map {
        let p = at.key(name);
        let lower = name.to_ascii_lowercase();
        if name.is_empty()
            || name.len() > 64
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            out.push(
                &p,
                "header-name-invalid",
                "header names are 1 to 64 letters, digits and '-'",
            );
        } else if *name != lower {
            out.push(
                &p,
                "header-name-not-lowercase",
                "safe header names must be lowercase",
            );
        }
        if FORBIDDEN_HEADERS.contains(&lower.as_str())
            || [
                "auth",
                "token",
                "secret",
                "password",
                "credential",
                "api-key",
                "apikey",
                "session",
            ]
            .iter()
            .any(|w| lower.contains(w))
        {
            out.push(&p, "header-forbidden", format!(
                "\"{name}\" may not be a safe header: credentials travel only through auth.credential_ref"
            ));
        }
        match value.as_str() {
            Some(s)
                if s.len() <= limits::HEADER_VALUE_MAX && !s.chars().any(|c| c.is_control()) => {}
            _ => out.push(
                &p,
                "header-value-invalid",
                format!(
                    "header values are strings of at most {} bytes without control characters",
                    limits::HEADER_VALUE_MAX
                ),
            ),
        }
    }
}

fn check_bindings(v: &Value, input: Option<&schema::Node>, at: &Pointer, out: &mut Violations) {
    let Some(map) = v.as_object() else {
        out.push(
            at,
            "field-invalid",
            "context_bindings must be an object keyed by input property",
        );
        return;
    };
    if map.len() > limits::CONTEXT_BINDINGS_MAX {
        out.push(
            at,
            "field-invalid",
            format!("at most {} context bindings", limits::CONTEXT_BINDINGS_MAX),
        );
    }
    for (name, binding) in map {
        let p = at.key(name);
        if let Some(node) = input
            && node.property(name).is_none()
        {
            out.push(
                &p,
                "context-binding-unknown-input",
                format!("\"{name}\" is not a property of input_schema"),
            );
        }
        if !binding.is_object() {
            out.push(&p, "field-invalid", "a context binding must be an object");
        }
    }
}

/// Walks every value; `in_properties` is true directly inside a schema's
/// `properties` map, whose keys are field names, not secrets.
fn scan_secrets(v: &Value, at: &Pointer, in_properties: bool, out: &mut Violations) {
    match v {
        Value::String(s) => {
            if let Some(why) = secrets::looks_secret(s) {
                out.push(at, "secret-value", format!(
                    "this value looks like a secret ({why}); store secrets as credentials, never in a manifest"
                ));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                scan_secrets(item, &at.index(i), false, out);
            }
        }
        Value::Object(map) => scan_object(map, at, in_properties, out),
        _ => {}
    }
}

fn scan_object(map: &Map<String, Value>, at: &Pointer, in_properties: bool, out: &mut Violations) {
    for (k, item) in map {
        if out.is_full() {
            return;
        }
        let p = at.key(k);
        if !in_properties
            && secrets::secret_key_name(k)
            && item.as_str().is_some_and(|s| !s.is_empty())
        {
            out.push(
                &p,
                "secret-value",
                format!(
                    "\"{k}\" holds a secret; store secrets as credentials, never in a manifest"
                ),
            );
            continue;
        }
        scan_secrets(item, &p, !in_properties && k == "properties", out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The example manifest's `order_status` (one definition for every suite).
    pub fn valid() -> Value {
        crate::fixtures::order_status()
    }

    fn rules_of(def: Value, opts: Options) -> Vec<(String, String)> {
        match check(&def, opts) {
            Ok(()) => vec![],
            Err(v) => v.into_iter().map(|v| (v.pointer, v.rule)).collect(),
        }
    }

    fn with(field: &str, value: Value) -> Vec<(String, String)> {
        let mut d = valid();
        d[field] = value;
        rules_of(d, Options::default())
    }

    fn e(p: &str, r: &str) -> Vec<(String, String)> {
        vec![(p.to_string(), r.to_string())]
    }

    #[test]
    fn a_valid_definition_passes() {
        assert_eq!(rules_of(valid(), Options::default()), vec![]);
        let mut d = valid();
        d["result_handling"] = json!("host_interaction");
        d["output_schema"] = crate::interaction::complete_output_schema();
        d["context_bindings"] =
            json!({"order": {"from_capability": "recent_orders", "field": "order"}});
        assert_eq!(rules_of(d, Options::default()), vec![]);
    }

    #[test]
    fn read_only_and_no_approval() {
        assert_eq!(
            with("side_effect", json!("write")),
            e("/side_effect", "side-effect-not-read")
        );
        assert_eq!(
            with("requires_approval", json!(true)),
            e("/requires_approval", "requires-approval-not-false")
        );
        for (field, rule) in REJECTED {
            assert_eq!(
                with(field, json!({})),
                e(&format!("/{field}"), rule),
                "{field}"
            );
        }
        assert_eq!(with("colour", json!(1)), e("/colour", "field-unknown"));
        let mut d = valid();
        d.as_object_mut().unwrap().remove("side_effect");
        assert_eq!(
            rules_of(d, Options::default()),
            e("/side_effect", "field-required")
        );
    }

    #[test]
    fn auth_rules() {
        assert_eq!(
            with(
                "auth",
                json!({"type": "none", "credential_ref": "cred_abc"})
            ),
            e("/auth/type", "auth-none-rejected")
        );
        assert_eq!(
            with(
                "auth",
                json!({"type": "oauth", "credential_ref": "cred_abc"})
            ),
            e("/auth/type", "auth-type-invalid")
        );
        assert_eq!(
            with("auth", json!({"type": "basic", "credential_ref": "cred_a"})),
            e("/auth/credential_ref", "credential-ref-invalid")
        );
        assert_eq!(
            with(
                "auth",
                json!({"type": "basic", "credential_ref": "cred_abc", "secret": "x"})
            ),
            vec![
                ("/auth/secret".into(), "field-unknown".into()),
                ("/auth/secret".into(), "secret-value".into())
            ]
        );
    }

    #[test]
    fn url_rules_and_the_development_switch() {
        assert_eq!(
            with("url", json!("http://api.shop.example/x")),
            e("/url", "url-not-https")
        );
        assert_eq!(
            with("url", json!("https://localhost/x")),
            e("/url", "url-localhost")
        );
        assert_eq!(
            with("url", json!("https://api.shop.example/o/{id}")),
            e("/url", "url-placeholder")
        );
        assert_eq!(
            with("url", json!("https://10.0.0.8/x")),
            e("/url", "url-private-address")
        );
        let mut d = valid();
        d["url"] = json!("http://127.0.0.1:9000/x");
        assert_eq!(
            rules_of(
                d.clone(),
                Options {
                    allow_loopback_http: true
                }
            ),
            vec![]
        );
        assert_eq!(rules_of(d, Options::default()), e("/url", "url-localhost"));
    }

    #[test]
    fn header_rules() {
        assert_eq!(
            with("safe_headers", json!({"Accept": "x"})),
            e("/safe_headers/Accept", "header-name-not-lowercase")
        );
        assert_eq!(
            with("safe_headers", json!({"authorization": "x"})),
            vec![
                (
                    "/safe_headers/authorization".to_string(),
                    "header-forbidden".to_string()
                ),
                (
                    "/safe_headers/authorization".to_string(),
                    "secret-value".to_string()
                ),
            ]
        );
        assert_eq!(
            with("safe_headers", json!({"x-client-secret": "x"})),
            e("/safe_headers/x-client-secret", "header-forbidden")
        );
        assert_eq!(
            with("safe_headers", json!({"accept": 1})),
            e("/safe_headers/accept", "header-value-invalid")
        );
    }

    #[test]
    fn bounds() {
        assert_eq!(
            with("timeout_ms", json!(0)),
            e("/timeout_ms", "timeout-out-of-bounds")
        );
        assert_eq!(
            with("timeout_ms", json!(30_001)),
            e("/timeout_ms", "timeout-out-of-bounds")
        );
        assert_eq!(
            with("retry_count", json!(4)),
            e("/retry_count", "retry-count-out-of-bounds")
        );
        assert_eq!(
            with("retry_count", json!(-1)),
            e("/retry_count", "retry-count-out-of-bounds")
        );
        assert_eq!(
            with("method", json!("DELETE")),
            e("/method", "method-not-allowed")
        );
        assert_eq!(with("name", json!("has space")), e("/name", "name-invalid"));
    }

    #[test]
    fn no_secret_anywhere() {
        assert_eq!(
            with("business_rules", json!(["send Bearer abc123def456ghi"])),
            e("/business_rules/0", "secret-value")
        );
        assert_eq!(
            with(
                "examples",
                json!([{"arguments": {"order": "A-1"}, "api_key": "k-123"}])
            ),
            e("/examples/0/api_key", "secret-value")
        );
        let mut d = valid();
        d["input_schema"]["properties"]["token"] =
            json!({"type": "string", "maxLength": 10, "description": "the public order token"});
        assert_eq!(rules_of(d, Options::default()), vec![]);
    }

    #[test]
    fn schema_violations_are_prefixed() {
        let mut d = valid();
        d["input_schema"]["properties"]["order"] = json!({"type": "string"});
        d["output_schema"]["minimum"] = json!(1);
        assert_eq!(
            rules_of(d, Options::default()),
            vec![
                (
                    "/input_schema/properties/order".into(),
                    "string-max-length-required".into()
                ),
                (
                    "/output_schema/minimum".into(),
                    "keyword-not-allowed".into()
                ),
            ]
        );
    }

    #[test]
    fn context_bindings_name_input_properties() {
        assert_eq!(
            with("context_bindings", json!({"nope": {}})),
            e("/context_bindings/nope", "context-binding-unknown-input")
        );
    }
}
