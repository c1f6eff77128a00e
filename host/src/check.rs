//! `warden admin guest check PATH`: does a component satisfy the world, and
//! does it pass the built-in self-test suite?

use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};

use crate::config::SandboxConfig;
use crate::guest::{GuestInfo, GuestSource};
use crate::sandbox::Sandbox;
use crate::types::{DefinitionOptions, IntegrationSchemaKind, InteractionKind, SchemaRef, Verdict};

/// The JSON report printed by `warden admin guest check`.
#[derive(Debug, Clone, Serialize)]
pub struct GuestCheckReport {
    /// The component checked.
    pub path: String,
    /// True when the component loads and exports the world with the right types.
    pub satisfies_world: bool,
    /// Load failure, naming what is missing when the world does not match.
    pub load_error: Option<String>,
    pub guest: Option<GuestInfo>,
    pub self_test: Vec<SelfTestCase>,
    pub passed: usize,
    pub failed: usize,
    /// Failed cases that are required.
    pub failed_required: usize,
    /// `satisfies_world` and no required case failed.
    pub ok: bool,
}

/// One case of the self-test suite.
#[derive(Debug, Clone, Serialize)]
pub struct SelfTestCase {
    pub name: &'static str,
    /// Required cases check what the contract mandates (rejections, pruning,
    /// the not-found text, references kept apart, the error contract). The
    /// others check that canonical valid input is accepted: a stricter
    /// custom guest may fail them on purpose, so they are informational.
    pub required: bool,
    pub passed: bool,
    /// What went wrong, when it did.
    pub detail: Option<String>,
}

/// Loads the component at `path` with the default limits and runs the suite.
pub fn check_guest(path: &Path) -> GuestCheckReport {
    check_guest_with(
        GuestSource::Path(path.to_path_buf()),
        SandboxConfig::default(),
    )
}

/// Same, for any source and limits.
pub fn check_guest_with(source: GuestSource, config: SandboxConfig) -> GuestCheckReport {
    let path = match &source {
        GuestSource::Path(p) => p.display().to_string(),
        other => other.name(),
    };
    let sandbox = match Sandbox::load_with(source, config) {
        Ok(s) => s,
        Err(e) => {
            let satisfies_world = false;
            return GuestCheckReport {
                path,
                satisfies_world,
                load_error: Some(e.to_string()),
                guest: None,
                self_test: vec![],
                passed: 0,
                failed: 0,
                failed_required: 0,
                ok: false,
            };
        }
    };
    let self_test = run_suite(&sandbox);
    let passed = self_test.iter().filter(|c| c.passed).count();
    let failed = self_test.len() - passed;
    let failed_required = self_test.iter().filter(|c| c.required && !c.passed).count();
    GuestCheckReport {
        path,
        satisfies_world: true,
        load_error: None,
        guest: Some(sandbox.info().clone()),
        self_test,
        passed,
        failed,
        failed_required,
        ok: failed_required == 0,
    }
}

const ACCOUNT: &str = "warden:self-test";

/// The example manifest's `order_status` (`examples/manifests/orders.json`,
/// the one copy every test suite also reads): a definition every rule of the
/// contract accepts.
fn definition() -> Value {
    let manifest: Value =
        serde_json::from_str(include_str!("../../examples/manifests/orders.json"))
            .expect("examples/manifests/orders.json is JSON");
    manifest["capabilities"][0].clone()
}

fn input_schema() -> Value {
    definition()["input_schema"].clone()
}

fn output_schema() -> Value {
    definition()["output_schema"].clone()
}

/// Ok, or a violation with `rule` among the reported ones.
fn expect<T: std::fmt::Debug>(
    r: Result<Verdict<T>, crate::SandboxError>,
    rule: Option<&str>,
) -> Result<Option<T>, String> {
    match (r, rule) {
        (Err(e), _) => Err(format!("sandbox fault: {e}")),
        (Ok(Ok(v)), None) => Ok(Some(v)),
        (Ok(Err(list)), None) => Err(format!(
            "expected ok, got violations {:?}",
            list.iter().map(|v| &v.rule).collect::<Vec<_>>()
        )),
        (Ok(Ok(v)), Some(r)) => Err(format!("expected a `{r}` violation, got ok {v:?}")),
        (Ok(Err(list)), Some(r)) => {
            if list.iter().any(|v| v.rule == r) {
                Ok(None)
            } else {
                Err(format!(
                    "expected a `{r}` violation, got {:?}",
                    list.iter().map(|v| &v.rule).collect::<Vec<_>>()
                ))
            }
        }
    }
}

fn run_suite(s: &Sandbox) -> Vec<SelfTestCase> {
    let dev = DefinitionOptions {
        allow_loopback_http: true,
    };
    let prod = DefinitionOptions::default();
    let with = |field: &str, value: Value| {
        let mut d = definition();
        d[field] = value;
        d.to_string()
    };
    let input = input_schema().to_string();
    let output = output_schema().to_string();
    let in_ref = SchemaRef {
        key: "self-test/input",
        text: &input,
    };
    let out_ref = SchemaRef {
        key: "self-test/output",
        text: &output,
    };
    let integration = json!({"type": "object", "additionalProperties": false, "required": ["q"],
        "properties": {"q": {"type": "string", "maxLength": 5}}})
    .to_string();
    let int_ref = SchemaRef {
        key: "self-test/integration",
        text: &integration,
    };

    type Case<'a> = (&'static str, Box<dyn Fn() -> Result<(), String> + 'a>);
    let cases: Vec<Case> = vec![
        (
            "definition: a valid definition is accepted",
            Box::new(|| {
                expect(
                    s.check_definition(ACCOUNT, &definition().to_string(), prod),
                    None,
                )
                .map(|_| ())
            }),
        ),
        (
            "definition: a string without maxLength is rejected",
            Box::new(|| {
                let mut d = definition();
                d["input_schema"]["properties"]["order"] = json!({"type": "string"});
                expect(
                    s.check_definition(ACCOUNT, &d.to_string(), prod),
                    Some("string-max-length-required"),
                )
                .map(|_| ())
            }),
        ),
        (
            "definition: an open object is rejected",
            Box::new(|| {
                let mut d = definition();
                d["output_schema"]
                    .as_object_mut()
                    .map(|o| o.remove("additionalProperties"));
                expect(
                    s.check_definition(ACCOUNT, &d.to_string(), prod),
                    Some("additional-properties-false-required"),
                )
                .map(|_| ())
            }),
        ),
        (
            "definition: a forbidden keyword is rejected",
            Box::new(|| {
                let mut d = definition();
                d["input_schema"]["allOf"] = json!([]);
                expect(
                    s.check_definition(ACCOUNT, &d.to_string(), prod),
                    Some("keyword-not-allowed"),
                )
                .map(|_| ())
            }),
        ),
        (
            "definition: an invalid ECMAScript pattern is rejected",
            Box::new(|| {
                let mut d = definition();
                d["input_schema"]["properties"]["order"]["pattern"] = json!("(unclosed");
                expect(
                    s.check_definition(ACCOUNT, &d.to_string(), prod),
                    Some("pattern-invalid"),
                )
                .map(|_| ())
            }),
        ),
        (
            "definition: a mutation is rejected",
            Box::new(|| {
                expect(
                    s.check_definition(ACCOUNT, &with("side_effect", json!("write")), prod),
                    Some("side-effect-not-read"),
                )
                .map(|_| ())
            }),
        ),
        (
            "definition: auth none is rejected",
            Box::new(|| {
                let v = json!({"type": "none", "credential_ref": "cred_orders"});
                expect(
                    s.check_definition(ACCOUNT, &with("auth", v), prod),
                    Some("auth-none-rejected"),
                )
                .map(|_| ())
            }),
        ),
        (
            "definition: localhost is rejected in production",
            Box::new(|| {
                expect(
                    s.check_definition(ACCOUNT, &with("url", json!("https://localhost/x")), prod),
                    Some("url-localhost"),
                )
                .map(|_| ())
            }),
        ),
        (
            "definition: http on loopback is accepted with the development switch",
            Box::new(|| {
                expect(
                    s.check_definition(
                        ACCOUNT,
                        &with("url", json!("http://127.0.0.1:8080/x")),
                        dev,
                    ),
                    None,
                )
                .map(|_| ())
            }),
        ),
        (
            "definition: a secret in the manifest is rejected",
            Box::new(|| {
                expect(
                    s.check_definition(
                        ACCOUNT,
                        &with(
                            "business_rules",
                            json!(["Bearer sk_live_abcdef0123456789xyz"]),
                        ),
                        prod,
                    ),
                    Some("secret-value"),
                )
                .map(|_| ())
            }),
        ),
        (
            "arguments: valid arguments pass",
            Box::new(|| {
                expect(
                    s.validate_arguments(ACCOUNT, in_ref, r#"{"order":"A-12"}"#),
                    None,
                )
                .map(|_| ())
            }),
        ),
        (
            "arguments: a missing required argument is reported",
            Box::new(|| {
                expect(
                    s.validate_arguments(ACCOUNT, in_ref, "{}"),
                    Some("required-missing"),
                )
                .map(|_| ())
            }),
        ),
        (
            "arguments: the pattern is enforced",
            Box::new(|| {
                expect(
                    s.validate_arguments(ACCOUNT, in_ref, r#"{"order":"a b"}"#),
                    Some("pattern-mismatch"),
                )
                .map(|_| ())
            }),
        ),
        (
            "arguments: an undeclared argument is rejected",
            Box::new(|| {
                expect(
                    s.validate_arguments(ACCOUNT, in_ref, r#"{"order":"A","x":1}"#),
                    Some("property-not-allowed"),
                )
                .map(|_| ())
            }),
        ),
        (
            "output: undeclared fields are pruned",
            Box::new(|| {
                let out = expect(
                    s.prune_output(ACCOUNT, out_ref, r#"{"status":"shipped","internal_id":7}"#),
                    None,
                )?;
                let v: Value = match out {
                    Some(text) => text.parse("the pruned result").map_err(|e| e.to_string())?,
                    None => Value::Null,
                };
                if v == json!({"status": "shipped"}) {
                    Ok(())
                } else {
                    Err(format!("pruned to {v}"))
                }
            }),
        ),
        (
            "output: a declared field out of bounds is reported",
            Box::new(|| {
                let long = "x".repeat(41);
                expect(
                    s.prune_output(ACCOUNT, out_ref, &json!({"status": long}).to_string()),
                    Some("string-too-long"),
                )
                .map(|_| ())
            }),
        ),
        (
            "interaction: not-found carries the exact text and no refs",
            Box::new(|| {
                let r = expect(
                    s.shape_interaction(ACCOUNT, r#"{"type":"not_found"}"#),
                    None,
                )?
                .unwrap_or_else(|| unreachable!());
                if r.kind != InteractionKind::NotFound {
                    return Err(format!("kind {:?}", r.kind));
                }
                if r.assistant_text.as_deref()
                    != Some("No hay una operación disponible para esta consulta.")
                {
                    return Err(format!("text {:?}", r.assistant_text));
                }
                Ok(())
            }),
        ),
        (
            "interaction: a confirmation keeps its operation_ref out of the public part",
            Box::new(|| {
                let result = json!({"type": "confirm_operation", "operation": "cancel_order", "operation_ref": "opref_5d1e",
                "expires_at": "2026-11-22T15:00:00Z", "preview": {"title": "Cancel A-1", "fields": [{"label": "Order", "value": "A-1"}]}});
                let r = expect(s.shape_interaction(ACCOUNT, &result.to_string()), None)?
                    .unwrap_or_else(|| unreachable!());
                let (public, refs) = (Value::from(r.public), Value::from(r.refs));
                if public.to_string().contains("opref_5d1e")
                    || !refs.to_string().contains("opref_5d1e")
                {
                    return Err(format!("public {public} refs {refs}"));
                }
                Ok(())
            }),
        ),
        (
            "interaction: an unknown interaction type is rejected",
            Box::new(|| {
                expect(
                    s.shape_interaction(ACCOUNT, r#"{"type":"execute_now"}"#),
                    Some("interaction-type-invalid"),
                )
                .map(|_| ())
            }),
        ),
        (
            "integration: oneOf is rejected",
            Box::new(|| {
                let schema = json!({"type": "object", "additionalProperties": false, "oneOf": [{"required": []}]});
                expect(
                    s.check_integration_schema(
                        ACCOUNT,
                        IntegrationSchemaKind::Input,
                        &schema.to_string(),
                    ),
                    Some("keyword-not-allowed"),
                )
                .map(|_| ())
            }),
        ),
        (
            "integration: values are validated",
            Box::new(|| {
                expect(
                    s.validate_integration(ACCOUNT, int_ref, r#"{"q":"toolong"}"#),
                    Some("string-too-long"),
                )?;
                expect(
                    s.validate_integration(ACCOUNT, int_ref, r#"{"q":"ok"}"#),
                    None,
                )
                .map(|_| ())
            }),
        ),
        (
            "pattern: the candidates matching a property's pattern are named",
            Box::new(|| {
                let candidates = ["A-1001", "a b", "pedido", "B-2"];
                match s.match_pattern(ACCOUNT, in_ref, "order", &candidates) {
                    Ok(Ok(indexes)) if indexes == [0, 3] => Ok(()),
                    other => Err(format!("expected the indexes [0, 3], got {other:?}")),
                }
            }),
        ),
        (
            "any function: text that is not JSON is one invalid-json violation",
            Box::new(|| {
                expect(
                    s.validate_arguments(ACCOUNT, in_ref, "{not json"),
                    Some("invalid-json"),
                )
                .map(|_| ())
            }),
        ),
    ];
    cases
        .into_iter()
        .map(|(name, f)| match f() {
            Ok(()) => SelfTestCase {
                name,
                required: !informational(name),
                passed: true,
                detail: None,
            },
            Err(d) => SelfTestCase {
                name,
                required: !informational(name),
                passed: false,
                detail: Some(d),
            },
        })
        .collect()
}

/// Cases that check acceptance of valid input (see `SelfTestCase::required`).
fn informational(name: &str) -> bool {
    name.ends_with("is accepted")
        || name.ends_with("is accepted with the development switch")
        || name.ends_with("valid arguments pass")
}
