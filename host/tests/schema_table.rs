//! The schema language (contract 2.6) and definition rules (2.5) through the
//! guest: one table, each row a definition and the exact violations the
//! default guest must report, checked across the sandbox boundary.

use serde_json::{Value, json};
use warden_host::{DefinitionOptions, GuestSource, Sandbox};
use warden_policy_rules::fixtures;

/// The example manifest's `order_status`: every row changes one thing in it.
fn base() -> Value {
    fixtures::order_status()
}

/// An input property schema `p` under /input_schema/properties/p.
fn input_prop(schema: Value) -> Value {
    let mut d = base();
    d["input_schema"]["properties"]["p"] = schema;
    d
}

fn output_prop(schema: Value) -> Value {
    let mut d = base();
    d["output_schema"]["properties"]["p"] = schema;
    d
}

fn set(path: &[&str], value: Value) -> Value {
    let mut d = base();
    let mut cur = &mut d;
    for p in &path[..path.len() - 1] {
        cur = &mut cur[*p];
    }
    cur[path[path.len() - 1]] = value;
    d
}

fn remove(field: &str) -> Value {
    let mut d = base();
    d.as_object_mut().unwrap().remove(field);
    d
}

const IP: &str = "/input_schema/properties/p";
const OP: &str = "/output_schema/properties/p";

/// (row name, definition, expected (pointer, rule) list).
type Row = (&'static str, Value, Vec<(String, &'static str)>);

fn table() -> Vec<Row> {
    let at = |p: &str, rule: &'static str| (p.to_string(), rule);
    let branches =
        |n: usize| Value::Array((0..n).map(|_| json!({"required": ["order"]})).collect());
    let mut rows = vec![
        ("valid definition", base(), vec![]),
        (
            "valid nested objects and arrays",
            input_prop(json!({"type": "array", "maxItems": 3, "items":
            {"type": "object", "additionalProperties": false, "properties": {"q": {"type": "string", "maxLength": 3}}}})),
            vec![],
        ),
        (
            "object without additionalProperties",
            input_prop(json!({"type": "object", "properties": {}})),
            vec![at(IP, "additional-properties-false-required")],
        ),
        (
            "additionalProperties true",
            input_prop(json!({"type": "object", "additionalProperties": true})),
            vec![at(
                &format!("{IP}/additionalProperties"),
                "additional-properties-false-required",
            )],
        ),
        (
            "nested open object in output",
            output_prop(
                json!({"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {}}}),
            ),
            vec![at(
                &format!("{OP}/items"),
                "additional-properties-false-required",
            )],
        ),
        (
            "string without maxLength (input)",
            input_prop(json!({"type": "string"})),
            vec![at(IP, "string-max-length-required")],
        ),
        (
            "string without maxLength (output)",
            output_prop(json!({"type": "string"})),
            vec![at(OP, "string-max-length-required")],
        ),
        (
            "array without maxItems",
            input_prop(json!({"type": "array", "items": {"type": "boolean"}})),
            vec![at(IP, "array-max-items-required")],
        ),
        (
            "nested array without maxItems",
            output_prop(json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "array", "items": {"type": "integer"}}}})),
            vec![at(
                &format!("{OP}/properties/a"),
                "array-max-items-required",
            )],
        ),
        (
            "pattern without maxLength",
            input_prop(json!({"type": "string", "pattern": "^a$"})),
            vec![
                at(IP, "string-max-length-required"),
                at(&format!("{IP}/pattern"), "pattern-requires-max-length"),
            ],
        ),
        (
            "pattern in output_schema",
            output_prop(json!({"type": "string", "maxLength": 4, "pattern": "^a$"})),
            vec![at(
                &format!("{OP}/pattern"),
                "pattern-not-allowed-in-output",
            )],
        ),
        (
            "invalid ECMAScript pattern",
            input_prop(json!({"type": "string", "maxLength": 4, "pattern": "[a-"})),
            vec![at(&format!("{IP}/pattern"), "pattern-invalid")],
        ),
        (
            "lookbehind is valid ECMAScript",
            input_prop(json!({"type": "string", "maxLength": 4, "pattern": "(?<=a)b"})),
            vec![],
        ),
        (
            "catastrophic pattern",
            input_prop(json!({"type": "string", "maxLength": 40, "pattern": "^(a|aa)+$"})),
            vec![at(&format!("{IP}/pattern"), "pattern-too-complex")],
        ),
        (
            "anyOf with 0 branches",
            set(&["input_schema", "anyOf"], json!([])),
            vec![at("/input_schema/anyOf", "combinator-branch-count")],
        ),
        (
            "anyOf with 9 branches",
            set(&["input_schema", "anyOf"], branches(9)),
            vec![at("/input_schema/anyOf", "combinator-branch-count")],
        ),
        (
            "oneOf with 9 branches",
            set(&["input_schema", "oneOf"], branches(9)),
            vec![at("/input_schema/oneOf", "combinator-branch-count")],
        ),
        (
            "anyOf with 8 branches",
            set(&["input_schema", "anyOf"], branches(8)),
            vec![],
        ),
        (
            "anyOf in output_schema",
            set(&["output_schema", "anyOf"], branches(1)),
            vec![at("/output_schema/anyOf", "keyword-not-allowed")],
        ),
        (
            "not in output_schema",
            set(&["output_schema", "not"], json!({"required": ["status"]})),
            vec![at("/output_schema/not", "keyword-not-allowed")],
        ),
        (
            "side_effect write",
            set(&["side_effect"], json!("write")),
            vec![at("/side_effect", "side-effect-not-read")],
        ),
        (
            "requires_approval true",
            set(&["requires_approval"], json!(true)),
            vec![at("/requires_approval", "requires-approval-not-false")],
        ),
        (
            "mutation field",
            set(&["mutation"], json!(true)),
            vec![at("/mutation", "mutation-field")],
        ),
        (
            "approval metadata",
            set(&["approval_policy"], json!({})),
            vec![at("/approval_policy", "approval-field")],
        ),
        (
            "candidate resolution",
            set(&["candidate_resolution"], json!({})),
            vec![at("/candidate_resolution", "candidate-resolution-field")],
        ),
        (
            "legacy action",
            set(&["action"], json!("cancel")),
            vec![at("/action", "legacy-workflow-field")],
        ),
        (
            "legacy resolution capabilities",
            set(&["resolution_capabilities"], json!([])),
            vec![at("/resolution_capabilities", "legacy-workflow-field")],
        ),
        (
            "auth none",
            set(&["auth", "type"], json!("none")),
            vec![at("/auth/type", "auth-none-rejected")],
        ),
        (
            "bad credential_ref",
            set(&["auth", "credential_ref"], json!("orders")),
            vec![at("/auth/credential_ref", "credential-ref-invalid")],
        ),
        (
            "http url",
            set(&["url"], json!("http://api.shop.example/x")),
            vec![at("/url", "url-not-https")],
        ),
        (
            "placeholder url",
            set(&["url"], json!("https://api.shop.example/orders/{order}")),
            vec![at("/url", "url-placeholder")],
        ),
        (
            "localhost url",
            set(&["url"], json!("https://localhost:8443/x")),
            vec![at("/url", "url-localhost")],
        ),
        (
            "private address url",
            set(&["url"], json!("https://192.168.1.20/x")),
            vec![at("/url", "url-private-address")],
        ),
        (
            "metadata address url",
            set(&["url"], json!("https://169.254.169.254/latest/meta-data")),
            vec![at("/url", "url-private-address")],
        ),
        (
            "uppercase safe header",
            set(&["safe_headers"], json!({"Accept": "application/json"})),
            vec![at("/safe_headers/Accept", "header-name-not-lowercase")],
        ),
        (
            "authorization safe header",
            set(&["safe_headers"], json!({"x-api-key": "abc"})),
            vec![at("/safe_headers/x-api-key", "header-forbidden")],
        ),
        (
            "secret in description",
            set(
                &["description"],
                json!("Call with Bearer eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl"),
            ),
            vec![at("/description", "secret-value")],
        ),
        (
            "timeout too large",
            set(&["timeout_ms"], json!(60_000)),
            vec![at("/timeout_ms", "timeout-out-of-bounds")],
        ),
        (
            "too many retries",
            set(&["retry_count"], json!(10)),
            vec![at("/retry_count", "retry-count-out-of-bounds")],
        ),
        (
            "missing side_effect",
            remove("side_effect"),
            vec![at("/side_effect", "field-required")],
        ),
        (
            "unknown field",
            set(&["colour"], json!("red")),
            vec![at("/colour", "field-unknown")],
        ),
        (
            "input root not an object",
            set(&["input_schema"], json!({"type": "string", "maxLength": 3})),
            vec![at("/input_schema", "root-type-object-required")],
        ),
        (
            "property without type",
            input_prop(json!({"description": "anything"})),
            vec![at(IP, "type-required")],
        ),
    ];
    for &kw in fixtures::FORBIDDEN_KEYWORDS {
        let mut d = base();
        d["input_schema"]["properties"]["order"][kw] = json!(1);
        let pointer = format!(
            "/input_schema/properties/order/{}",
            kw.replace('~', "~0").replace('/', "~1")
        );
        rows.push((
            "forbidden keyword",
            d,
            vec![(pointer, "keyword-not-allowed")],
        ));
    }
    rows
}

#[test]
fn the_schema_language_table_passes_through_the_guest() {
    let sandbox = Sandbox::load(GuestSource::Default).unwrap();
    let mut failures = Vec::new();
    let rows = table();
    for (name, def, expected) in &rows {
        let got = match sandbox
            .check_definition("table", &def.to_string(), DefinitionOptions::default())
            .unwrap()
        {
            Ok(()) => vec![],
            Err(v) => v
                .into_iter()
                .map(|v| (v.pointer, v.rule))
                .collect::<Vec<_>>(),
        };
        let want: Vec<(String, String)> = expected
            .iter()
            .map(|(p, r)| (p.clone(), r.to_string()))
            .collect();
        if got != want {
            failures.push(format!("{name}: expected {want:?}, got {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
    assert!(rows.len() >= 60);
}
