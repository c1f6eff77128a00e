//! The schema language (contract 2.6) and the definition rules (2.5), as a
//! host meets them: each case is an import over HTTP, judged by the policy
//! guest plus the server's own checks, with the exact violations expected.
//! The server runs as deployed (no loopback development switch).

use crate::helpers::fixtures::*;
use crate::helpers::*;
use serde_json::{Value, json};

type Mutation = Box<dyn Fn(&mut Value)>;

struct Case {
    name: &'static str,
    mutate: Mutation,
    /// Expected `(pointer inside the definition, rule)`; empty = accepted.
    expected: Vec<(&'static str, &'static str)>,
}

fn case(
    name: &'static str,
    mutate: impl Fn(&mut Value) + 'static,
    expected: &[(&'static str, &'static str)],
) -> Case {
    Case {
        name,
        mutate: Box::new(mutate),
        expected: expected.to_vec(),
    }
}

fn input_prop(d: &mut Value, name: &str, schema: Value) {
    d["input_schema"]["properties"][name] = schema;
}

fn output_prop(d: &mut Value, name: &str, schema: Value) {
    d["output_schema"]["properties"][name] = schema;
}

fn branches(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"type": "string", "maxLength": 5 + i}))
            .collect(),
    )
}

/// A string property whose alternatives live in `keyword` (anyOf / oneOf).
fn combinator(keyword: &str, n: usize) -> Value {
    json!({"type": "string", "maxLength": 20, keyword: branches(n)})
}

fn cases() -> Vec<Case> {
    let mut cases = vec![
        // Accepted shapes.
        case("the baseline is valid", |_| {}, &[]),
        case(
            "anyOf with 8 branches",
            |d| input_prop(d, "q", combinator("anyOf", 8)),
            &[],
        ),
        case(
            "oneOf of two required alternatives",
            |d| {
                d["input_schema"] = json!({"type": "object", "additionalProperties": false,
                "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "string", "maxLength": 5}},
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
            },
            &[],
        ),
        case(
            "anyOf with not of both-required",
            |d| {
                d["input_schema"] = json!({"type": "object", "additionalProperties": false,
                "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "string", "maxLength": 5}},
                "anyOf": [{"required": ["a"]}, {"required": ["b"]}], "not": {"required": ["a", "b"]}});
            },
            &[],
        ),
        case(
            "enum and const",
            |d| {
                input_prop(
                    d,
                    "kind",
                    json!({"type": "string", "maxLength": 10, "enum": ["a", "b"]}),
                );
                input_prop(d, "v", json!({"const": 1}));
            },
            &[],
        ),
        case(
            "nested objects and arrays",
            |d| {
                input_prop(
                    d,
                    "filter",
                    json!({
            "type": "object", "additionalProperties": false,
            "properties": {"tags": {"type": "array", "maxItems": 3, "items": {
                "type": "object", "additionalProperties": false,
                "properties": {"k": {"type": "string", "maxLength": 8}}}}}}),
                )
            },
            &[],
        ),
        case(
            "host_interaction result handling",
            |d| {
                d["result_handling"] = json!("host_interaction");
                d["output_schema"] = crate::executor::host_interaction_output_schema();
            },
            &[],
        ),
        case(
            "minLength with maxLength",
            |d| {
                input_prop(
                    d,
                    "s",
                    json!({"type": "string", "minLength": 2, "maxLength": 9}),
                )
            },
            &[],
        ),
        // Closed objects (2.6 rule 1).
        case(
            "input root without additionalProperties",
            |d| {
                d["input_schema"]
                    .as_object_mut()
                    .unwrap()
                    .remove("additionalProperties");
            },
            &[("/input_schema", "additional-properties-false-required")],
        ),
        case(
            "input root with additionalProperties true",
            |d| d["input_schema"]["additionalProperties"] = json!(true),
            &[(
                "/input_schema/additionalProperties",
                "additional-properties-false-required",
            )],
        ),
        case(
            "nested input object not closed",
            |d| {
                input_prop(
                    d,
                    "addr",
                    json!({"type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}}}),
                )
            },
            &[(
                "/input_schema/properties/addr",
                "additional-properties-false-required",
            )],
        ),
        case(
            "output root not closed",
            |d| {
                d["output_schema"]
                    .as_object_mut()
                    .unwrap()
                    .remove("additionalProperties");
            },
            &[("/output_schema", "additional-properties-false-required")],
        ),
        case(
            "object inside output array items not closed",
            |d| {
                d["output_schema"]["properties"]["lines"]["items"]
                    .as_object_mut()
                    .unwrap()
                    .remove("additionalProperties");
            },
            &[(
                "/output_schema/properties/lines/items",
                "additional-properties-false-required",
            )],
        ),
        // Bounded strings and arrays (rules 2 and 3).
        case(
            "input string without maxLength",
            |d| input_prop(d, "note", json!({"type": "string"})),
            &[(
                "/input_schema/properties/note",
                "string-max-length-required",
            )],
        ),
        case(
            "output string without maxLength",
            |d| output_prop(d, "note", json!({"type": "string"})),
            &[(
                "/output_schema/properties/note",
                "string-max-length-required",
            )],
        ),
        case(
            "input array without maxItems",
            |d| {
                input_prop(
                    d,
                    "tags",
                    json!({"type": "array",
            "items": {"type": "string", "maxLength": 5}}),
                )
            },
            &[("/input_schema/properties/tags", "array-max-items-required")],
        ),
        case(
            "output array without maxItems",
            |d| {
                d["output_schema"]["properties"]["lines"]
                    .as_object_mut()
                    .unwrap()
                    .remove("maxItems");
            },
            &[(
                "/output_schema/properties/lines",
                "array-max-items-required",
            )],
        ),
        case(
            "string items without maxLength",
            |d| {
                input_prop(
                    d,
                    "tags",
                    json!({"type": "array", "maxItems": 3,
            "items": {"type": "string"}}),
                )
            },
            &[(
                "/input_schema/properties/tags/items",
                "string-max-length-required",
            )],
        ),
        // Patterns (rule 7).
        case(
            "pattern without maxLength",
            |d| input_prop(d, "code", json!({"type": "string", "pattern": "^[a-z]+$"})),
            &[
                (
                    "/input_schema/properties/code",
                    "string-max-length-required",
                ),
                (
                    "/input_schema/properties/code/pattern",
                    "pattern-requires-max-length",
                ),
            ],
        ),
        case(
            "pattern in output_schema",
            |d| {
                output_prop(
                    d,
                    "code",
                    json!({"type": "string", "maxLength": 5, "pattern": "^a$"}),
                )
            },
            &[(
                "/output_schema/properties/code/pattern",
                "pattern-not-allowed-in-output",
            )],
        ),
        case(
            "unbalanced regex",
            |d| {
                input_prop(
                    d,
                    "code",
                    json!({"type": "string", "maxLength": 5, "pattern": "(ab"}),
                )
            },
            &[("/input_schema/properties/code/pattern", "pattern-invalid")],
        ),
        case(
            "Python named group is not ECMAScript",
            |d| {
                input_prop(
                    d,
                    "code",
                    json!({"type": "string", "maxLength": 5,
            "pattern": "(?P<n>a)"}),
                )
            },
            &[("/input_schema/properties/code/pattern", "pattern-invalid")],
        ),
        case(
            "possessive quantifier is not ECMAScript",
            |d| {
                input_prop(
                    d,
                    "code",
                    json!({"type": "string", "maxLength": 5,
            "pattern": "a++"}),
                )
            },
            &[("/input_schema/properties/code/pattern", "pattern-invalid")],
        ),
        // Patterns a backtracking engine takes exponential (or high-degree
        // polynomial) time on: refused at import by the guest's guard.
        case(
            "nested quantifier over an optional repeat",
            |d| {
                input_prop(
                    d,
                    "code",
                    json!({"type": "string", "maxLength": 64, "pattern": "^(?:aa?)+$"}),
                )
            },
            &[(
                "/input_schema/properties/code/pattern",
                "pattern-too-complex",
            )],
        ),
        case(
            "nested quantifier over a bounded repeat",
            |d| {
                input_prop(
                    d,
                    "code",
                    json!({"type": "string", "maxLength": 64, "pattern": "^(\\w{1,16})+$"}),
                )
            },
            &[(
                "/input_schema/properties/code/pattern",
                "pattern-too-complex",
            )],
        ),
        case(
            "overlapping alternatives under a quantifier",
            |d| {
                input_prop(
                    d,
                    "code",
                    json!({"type": "string", "maxLength": 64, "pattern": "^((a|a))*$"}),
                )
            },
            &[(
                "/input_schema/properties/code/pattern",
                "pattern-too-complex",
            )],
        ),
        case(
            "a long run of adjacent stars",
            |d| {
                input_prop(
                    d,
                    "code",
                    json!({"type": "string", "maxLength": 64, "pattern": "a*a*a*a*a*a*a*a*a*a*a*a*b"}),
                )
            },
            &[(
                "/input_schema/properties/code/pattern",
                "pattern-too-complex",
            )],
        ),
        case(
            "ordinary patterns are accepted",
            |d| {
                input_prop(
                    d,
                    "code",
                    json!({"type": "string", "maxLength": 64, "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"}),
                );
                input_prop(
                    d,
                    "email",
                    json!({"type": "string", "maxLength": 64, "pattern": "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$"}),
                );
                input_prop(
                    d,
                    "ip",
                    json!({"type": "string", "maxLength": 15, "pattern": "^(?:\\d{1,3}\\.){3}\\d{1,3}$"}),
                );
            },
            &[],
        ),
        // Combinator sizes (rule 8).
        case(
            "anyOf with 0 branches",
            |d| input_prop(d, "q", combinator("anyOf", 0)),
            &[(
                "/input_schema/properties/q/anyOf",
                "combinator-branch-count",
            )],
        ),
        case(
            "anyOf with 9 branches",
            |d| input_prop(d, "q", combinator("anyOf", 9)),
            &[(
                "/input_schema/properties/q/anyOf",
                "combinator-branch-count",
            )],
        ),
        case(
            "oneOf with 0 branches",
            |d| input_prop(d, "q", combinator("oneOf", 0)),
            &[(
                "/input_schema/properties/q/oneOf",
                "combinator-branch-count",
            )],
        ),
        case(
            "oneOf with 9 branches",
            |d| input_prop(d, "q", combinator("oneOf", 9)),
            &[(
                "/input_schema/properties/q/oneOf",
                "combinator-branch-count",
            )],
        ),
        case(
            "anyOf in output_schema",
            |d| output_prop(d, "q", combinator("anyOf", 2)),
            &[("/output_schema/properties/q/anyOf", "keyword-not-allowed")],
        ),
        case(
            "oneOf in output_schema",
            |d| output_prop(d, "q", combinator("oneOf", 2)),
            &[("/output_schema/properties/q/oneOf", "keyword-not-allowed")],
        ),
        case(
            "not in output_schema",
            |d| {
                output_prop(
                    d,
                    "q",
                    json!({"type": "string", "maxLength": 3,
            "not": {"const": "x"}}),
                )
            },
            &[("/output_schema/properties/q/not", "keyword-not-allowed")],
        ),
        // Definition rules (2.5, rule 7 of section 1).
        case(
            "side_effect write",
            |d| d["side_effect"] = json!("write"),
            &[("/side_effect", "side-effect-not-read")],
        ),
        case(
            "requires_approval true",
            |d| d["requires_approval"] = json!(true),
            &[("/requires_approval", "requires-approval-not-false")],
        ),
        case(
            "mutation field",
            |d| d["mutation"] = json!(true),
            &[("/mutation", "mutation-field")],
        ),
        case(
            "approval metadata",
            |d| d["approval_policy"] = json!({"approvers": 2}),
            &[("/approval_policy", "approval-field")],
        ),
        case(
            "candidate resolution",
            |d| d["candidate_resolution"] = json!({}),
            &[("/candidate_resolution", "candidate-resolution-field")],
        ),
        case(
            "legacy action",
            |d| d["action"] = json!("cancel"),
            &[("/action", "legacy-workflow-field")],
        ),
        case(
            "legacy resolution capabilities",
            |d| d["resolution_capabilities"] = json!([]),
            &[("/resolution_capabilities", "legacy-workflow-field")],
        ),
        case(
            "auth type none",
            |d| d["auth"]["type"] = json!("none"),
            &[("/auth/type", "auth-none-rejected")],
        ),
        case(
            "auth type unknown",
            |d| d["auth"]["type"] = json!("oauth2"),
            &[("/auth/type", "auth-type-invalid")],
        ),
        case(
            "credential_ref malformed",
            |d| d["auth"]["credential_ref"] = json!("orders"),
            &[
                ("/auth/credential_ref", "credential-ref-invalid"),
                ("/auth/credential_ref", "credential-not-configured"),
            ],
        ),
        case(
            "credential not configured",
            |d| d["auth"]["credential_ref"] = json!("cred_missing"),
            &[("/auth/credential_ref", "credential-not-configured")],
        ),
        case(
            "plain http URL",
            |d| d["url"] = json!("http://api.shop.example/v1/orders"),
            &[("/url", "url-not-https")],
        ),
        case(
            "localhost URL",
            |d| d["url"] = json!("https://localhost/v1/orders"),
            &[("/url", "url-localhost")],
        ),
        case(
            "loopback literal",
            |d| d["url"] = json!("https://127.0.0.1/v1/orders"),
            &[("/url", "url-localhost")],
        ),
        case(
            "placeholder in path",
            |d| d["url"] = json!("https://api.shop.example/orders/{id}"),
            &[("/url", "url-placeholder")],
        ),
        case(
            "private address",
            |d| d["url"] = json!("https://10.1.2.3/orders"),
            &[("/url", "url-private-address")],
        ),
        case(
            "cloud metadata address",
            |d| d["url"] = json!("https://169.254.169.254/latest"),
            &[("/url", "url-private-address")],
        ),
        case(
            "credentials in URL",
            |d| d["url"] = json!("https://user:pw@api.shop.example/x"),
            &[("/url", "url-credentials"), ("/url", "secret-value")],
        ),
        case(
            "uppercase safe header",
            |d| d["safe_headers"] = json!({"Accept": "application/json"}),
            &[("/safe_headers/Accept", "header-name-not-lowercase")],
        ),
        case(
            "credential header in safe_headers",
            |d| d["safe_headers"] = json!({"x-api-key": "abc"}),
            &[("/safe_headers/x-api-key", "header-forbidden")],
        ),
        case(
            "secret-looking business rule",
            |d| d["business_rules"] = json!(["send Bearer abc123def456ghi"]),
            &[("/business_rules/0", "secret-value")],
        ),
        case(
            "timeout 0",
            |d| d["timeout_ms"] = json!(0),
            &[("/timeout_ms", "timeout-out-of-bounds")],
        ),
        case(
            "timeout over 30 s",
            |d| d["timeout_ms"] = json!(30_001),
            &[("/timeout_ms", "timeout-out-of-bounds")],
        ),
        case(
            "retry_count 4",
            |d| d["retry_count"] = json!(4),
            &[("/retry_count", "retry-count-out-of-bounds")],
        ),
        case(
            "method DELETE",
            |d| d["method"] = json!("DELETE"),
            &[("/method", "method-not-allowed")],
        ),
        case(
            "unknown field",
            |d| d["colour"] = json!("red"),
            &[("/colour", "field-unknown")],
        ),
        case(
            "missing name",
            |d| {
                d.as_object_mut().unwrap().remove("name");
            },
            &[("/name", "field-required")],
        ),
        case(
            "unknown result_handling",
            |d| d["result_handling"] = json!("stream"),
            &[("/result_handling", "result-handling-invalid")],
        ),
        case(
            "a preparation whose output schema would prune operation_ref away",
            |d| {
                d["result_handling"] = json!("host_interaction");
                d["output_schema"] = crate::executor::host_interaction_output_schema();
                d["output_schema"]["properties"]
                    .as_object_mut()
                    .unwrap()
                    .remove("operation_ref");
            },
            &[(
                "/output_schema/properties/operation_ref",
                "interaction-output-incomplete",
            )],
        ),
        case(
            "a preparation with an ordinary output schema",
            |d| d["result_handling"] = json!("host_interaction"),
            &[(
                "/output_schema/properties/type",
                "interaction-output-incomplete",
            )],
        ),
    ];
    // Every keyword outside the allowed lists is rejected (rule 6).
    for &keyword in warden_policy_rules::fixtures::FORBIDDEN_KEYWORDS {
        let value = match keyword {
            "allOf" => json!([{"type": "string", "maxLength": 3}]),
            "$ref" | "$schema" => json!("#/definitions/x"),
            "format" => json!("email"),
            "default" => json!("x"),
            "uniqueItems" => json!(true),
            "patternProperties" => json!({}),
            _ => json!(1),
        };
        let pointer: &'static str =
            Box::leak(format!("/input_schema/properties/order/{keyword}").into_boxed_str());
        cases.push(case(
            Box::leak(format!("input keyword {keyword}").into_boxed_str()),
            move |d| {
                d["input_schema"]["properties"]["order"][keyword] = value.clone();
            },
            &[(pointer, "keyword-not-allowed")],
        ));
    }
    cases
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rule_of_the_schema_language_and_the_definition(backend: Backend) {
    let app = TestApp::spawn_strict(backend).await;
    let key = account_ready(&app, "acme").await;
    let cases = cases();
    assert!(
        cases.len() >= 60,
        "the table covers at least 60 manifests ({})",
        cases.len()
    );
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let mut definition = valid_definition(&format!("cap_rule_{i}"));
        (case.mutate)(&mut definition);
        let (status, body) = status_and_json(
            app.import_capabilities(&key, &new_key(), vec![definition])
                .await,
        )
        .await;
        let expected: Vec<(String, String)> = case
            .expected
            .iter()
            .map(|(p, r)| (format!("/capabilities/0{p}"), r.to_string()))
            .collect();
        let outcome = match status {
            201 => vec![],
            400 => violation_pairs(&body),
            other => vec![("status".into(), other.to_string())],
        };
        if outcome != expected {
            failures.push(format!(
                "{}: expected {expected:?}, got {outcome:?} ({body})",
                case.name
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
