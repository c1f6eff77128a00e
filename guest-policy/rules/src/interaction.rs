//! Shaping a `result_handling: host_interaction` result into the closed
//! confirmation / selection / not-found object (contract 2.3; section 1
//! rules 9 and 10).
//!
//! The closed result schemas are written in the input schema language itself
//! (closed objects, bounded strings, patterns) and compiled once per
//! instance; the opaque references are then split off from what may reach a
//! model.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::schema::{Dialect, Schema, compile};
use crate::violation::{Pointer, Violation, Violations};

/// The deterministic not-found assistant text (contract 1, rule 9).
pub const NOT_FOUND_TEXT: &str = "No hay una operación disponible para esta consulta.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ConfirmOperation,
    Selection,
    NotFound,
}

/// The result split by audience.
#[derive(Debug, Clone, PartialEq)]
pub struct Shaped {
    pub kind: Kind,
    /// No opaque reference in here: safe for the model, history and clients.
    pub public: Value,
    /// Only the opaque references: for the response to the host application.
    pub refs: Value,
    pub assistant_text: Option<&'static str>,
}

const REF: &str =
    r#"{"type": "string", "minLength": 1, "maxLength": 512, "pattern": "^[\\x21-\\x7e]+$"}"#;
const OPERATION: &str =
    r#"{"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-z][a-z0-9_]*$"}"#;
const EXPIRES: &str = r#"{"type": "string", "maxLength": 40,
    "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})$"}"#;

fn with_parts(template: &str) -> String {
    template
        .replace("@REF@", REF)
        .replace("@OPERATION@", OPERATION)
        .replace("@EXPIRES@", EXPIRES)
}

const CONFIRM_SCHEMA: &str = r#"{"type": "object", "additionalProperties": false,
    "required": ["type", "operation", "operation_ref", "expires_at", "preview"],
    "properties": {
        "type": {"const": "confirm_operation"},
        "operation": @OPERATION@, "operation_ref": @REF@, "expires_at": @EXPIRES@,
        "preview": {"type": "object", "additionalProperties": false, "required": ["title", "fields"],
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 200},
                "fields": {"type": "array", "maxItems": 20, "items": {"type": "object",
                    "additionalProperties": false, "required": ["label", "value"],
                    "properties": {"label": {"type": "string", "minLength": 1, "maxLength": 80},
                                   "value": {"type": "string", "maxLength": 500}}}}}}}}"#;

const SELECTION_SCHEMA: &str = r#"{"type": "object", "additionalProperties": false,
    "required": ["type", "operation", "selection_ref", "expires_at", "title", "options"],
    "properties": {
        "type": {"const": "selection"},
        "operation": @OPERATION@, "selection_ref": @REF@, "expires_at": @EXPIRES@,
        "title": {"type": "string", "minLength": 1, "maxLength": 200},
        "options": {"type": "array", "maxItems": 20, "items": {"type": "object",
            "additionalProperties": false, "required": ["option_ref", "label"],
            "properties": {"option_ref": @REF@,
                           "label": {"type": "string", "minLength": 1, "maxLength": 200},
                           "description": {"type": "string", "maxLength": 500}}}}}}"#;

const NOT_FOUND_SCHEMA: &str = r#"{"type": "object", "additionalProperties": false, "required": ["type"],
    "properties": {"type": {"const": "not_found"}}}"#;

struct Schemas {
    confirm: Schema,
    selection: Schema,
    not_found: Schema,
}

fn schemas() -> &'static Schemas {
    static S: OnceLock<Schemas> = OnceLock::new();
    S.get_or_init(|| {
        let c = |text: &str| {
            let v: Value = serde_json::from_str(text).expect("built-in schema is JSON");
            compile(Dialect::Input, &v).expect("built-in schema is valid")
        };
        Schemas {
            confirm: c(&with_parts(CONFIRM_SCHEMA)),
            selection: c(&with_parts(SELECTION_SCHEMA)),
            not_found: c(NOT_FOUND_SCHEMA),
        }
    })
}

/// The members each result kind needs, as paths of property names through
/// `properties` (and `items` for arrays, written `[]`): what the output
/// schema must declare so that pruning keeps the closed result whole.
const MEMBERS: &[(&str, &[&str])] = &[
    (
        "confirm_operation",
        &[
            "operation",
            "operation_ref",
            "expires_at",
            "preview/title",
            "preview/fields/[]/label",
            "preview/fields/[]/value",
        ],
    ),
    (
        "selection",
        &[
            "operation",
            "selection_ref",
            "expires_at",
            "title",
            "options/[]/option_ref",
            "options/[]/label",
        ],
    ),
    ("not_found", &[]),
];

/// Contract 2.3 at import: a `host_interaction` capability's output schema
/// keeps every member of each result kind its `type` admits — `not_found`
/// always, and at least one of `confirm_operation` and `selection` — so no
/// result the host may send is pruned into an invalid one at run time.
pub fn check_output_schema(schema: &Value, at: &Pointer, out: &mut Violations) {
    let type_at = at.key("properties").key("type");
    let Some(type_schema) = schema.pointer("/properties/type") else {
        out.push(
            &type_at,
            "interaction-output-incomplete",
            "a host_interaction output schema declares `type` (confirm_operation, selection, not_found)",
        );
        return;
    };
    // The kinds `type` admits: its enum or const, every kind otherwise.
    let admitted: Vec<&str> = match (type_schema.get("enum"), type_schema.get("const")) {
        (Some(Value::Array(words)), _) => words.iter().filter_map(Value::as_str).collect(),
        (_, Some(Value::String(word))) => vec![word.as_str()],
        _ => MEMBERS.iter().map(|(kind, _)| *kind).collect(),
    };
    if let Some(unknown) = admitted
        .iter()
        .find(|k| !MEMBERS.iter().any(|(kind, _)| kind == *k))
    {
        out.push(
            &type_at,
            "interaction-output-incomplete",
            format!("`type` admits {unknown:?}, which is not a host-interaction result kind"),
        );
    }
    if !admitted.contains(&"not_found") {
        out.push(
            &type_at,
            "interaction-output-incomplete",
            "`type` must admit not_found (contract rule 9)",
        );
    }
    if !admitted.contains(&"confirm_operation") && !admitted.contains(&"selection") {
        out.push(
            &type_at,
            "interaction-output-incomplete",
            "`type` must admit confirm_operation or selection",
        );
    }
    for (kind, members) in MEMBERS.iter().filter(|(k, _)| admitted.contains(k)) {
        for member in *members {
            let mut node = schema;
            let mut pointer = at.clone();
            let mut declared = true;
            for step in member.split('/') {
                let next = if step == "[]" {
                    pointer = pointer.key("items");
                    node.get("items")
                } else {
                    pointer = pointer.key("properties").key(step);
                    node.get("properties").and_then(|p| p.get(step))
                };
                match next {
                    Some(n) => node = n,
                    None => {
                        declared = false;
                        break;
                    }
                }
            }
            if !declared && !out.is_full() {
                out.push(
                    &pointer,
                    "interaction-output-incomplete",
                    format!(
                        "`type` admits {kind}, whose result carries `{}`: declare it, or pruning removes it and every {kind} result fails",
                        member.replace("/[]", "[]").replace('/', ".")
                    ),
                );
            }
        }
    }
}

/// Parses and shapes a host-interaction result.
pub fn shape_text(text: &str) -> Result<Shaped, Vec<Violation>> {
    let value = crate::parse_json(text)?;
    shape(value)
}

/// Shapes a parsed host-interaction result.
pub fn shape(value: Value) -> Result<Shaped, Vec<Violation>> {
    let Some(obj) = value.as_object() else {
        return Err(vec![Violation::new(
            "",
            "type-mismatch",
            "a host_interaction result must be a JSON object",
        )]);
    };
    let s = schemas();
    let kind = match obj.get("type").and_then(Value::as_str) {
        Some("confirm_operation") => Kind::ConfirmOperation,
        Some("selection") => Kind::Selection,
        Some("not_found") => Kind::NotFound,
        _ => {
            return Err(vec![Violation::new(
                "/type",
                "interaction-type-invalid",
                "type must be \"confirm_operation\", \"selection\" or \"not_found\"",
            )]);
        }
    };
    let schema = match kind {
        Kind::ConfirmOperation => &s.confirm,
        Kind::Selection => &s.selection,
        Kind::NotFound => &s.not_found,
    };
    schema.validate(&value)?;
    if let Some(e) = obj.get("expires_at").and_then(Value::as_str)
        && !timestamp_in_range(e)
    {
        return Err(vec![Violation::new(
            "/expires_at",
            "timestamp-invalid",
            "expires_at is not a valid RFC 3339 time",
        )]);
    }
    let get = |k: &str| obj.get(k).cloned().unwrap_or(Value::Null);
    Ok(match kind {
        Kind::ConfirmOperation => Shaped {
            kind,
            public: json!({"type": "confirm_operation", "operation": get("operation"),
                "expires_at": get("expires_at"), "preview": get("preview")}),
            refs: json!({"operation_ref": get("operation_ref")}),
            assistant_text: None,
        },
        Kind::Selection => {
            let options = obj
                .get("options")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if options.is_empty() {
                return Err(vec![Violation::new(
                    "/options",
                    "array-too-short",
                    "a selection needs at least one option; zero eligible operations is not_found",
                )]);
            }
            let mut public_options = Vec::with_capacity(options.len());
            let mut option_refs = Vec::with_capacity(options.len());
            for o in options {
                let Value::Object(mut m) = o else { continue };
                option_refs.push(m.remove("option_ref").unwrap_or(Value::Null));
                public_options.push(Value::Object(m));
            }
            Shaped {
                kind,
                public: json!({"type": "selection", "operation": get("operation"), "expires_at": get("expires_at"),
                    "title": get("title"), "options": public_options}),
                refs: json!({"selection_ref": get("selection_ref"), "option_refs": option_refs}),
                assistant_text: None,
            }
        }
        Kind::NotFound => Shaped {
            kind,
            public: json!({"type": "not_found"}),
            refs: Value::Object(Map::new()),
            assistant_text: Some(NOT_FOUND_TEXT),
        },
    })
}

fn timestamp_in_range(s: &str) -> bool {
    let n = |a: usize, b: usize| {
        s.get(a..b)
            .and_then(|x| x.parse::<u32>().ok())
            .unwrap_or(99)
    };
    let (month, day, hour, minute, second) = (n(5, 7), n(8, 10), n(11, 13), n(14, 16), n(17, 19));
    let offset_ok = match s.rfind(['+', '-']) {
        Some(i) if i > 19 => n(i + 1, i + 3) <= 23 && n(i + 4, i + 6) <= 59,
        _ => true,
    };
    (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && hour <= 23
        && minute <= 59
        && second <= 60
        && offset_ok
}

/// An output schema that keeps every member of every kind (tests).
#[cfg(test)]
pub(crate) fn complete_output_schema() -> Value {
    let s = |n: u64| json!({"type": "string", "maxLength": n});
    json!({"type": "object", "additionalProperties": false, "properties": {
        "type": {"type": "string", "maxLength": 32, "enum": ["confirm_operation", "selection", "not_found"]},
        "operation": s(64), "operation_ref": s(256), "selection_ref": s(256), "expires_at": s(40),
        "title": s(200),
        "preview": {"type": "object", "additionalProperties": false, "properties": {
            "title": s(200),
            "fields": {"type": "array", "maxItems": 20, "items": {"type": "object",
                "additionalProperties": false, "properties": {"label": s(100), "value": s(500)}}}}},
        "options": {"type": "array", "maxItems": 20, "items": {"type": "object",
            "additionalProperties": false,
            "properties": {"option_ref": s(256), "label": s(200), "description": s(500)}}}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confirm() -> Value {
        json!({"type": "confirm_operation", "operation": "cancel_order", "operation_ref": "op_7f3a",
            "expires_at": "2026-11-22T15:00:00Z",
            "preview": {"title": "Cancel order A-1", "fields": [{"label": "Order", "value": "A-1"}]}})
    }

    #[test]
    fn confirmation_keeps_the_ref_apart() {
        let s = shape(confirm()).unwrap();
        assert_eq!(s.kind, Kind::ConfirmOperation);
        assert_eq!(s.refs, json!({"operation_ref": "op_7f3a"}));
        assert!(!s.public.to_string().contains("op_7f3a"));
        assert_eq!(s.public["preview"]["title"], "Cancel order A-1");
    }

    #[test]
    fn selection_splits_option_refs_in_order() {
        let s = shape(json!({"type": "selection", "operation": "cancel_order", "selection_ref": "sel_1",
            "expires_at": "2026-11-22T15:00:00+01:00", "title": "Which order?",
            "options": [{"option_ref": "o1", "label": "A-1"}, {"option_ref": "o2", "label": "A-2", "description": "yesterday"}]}))
            .unwrap();
        assert_eq!(
            s.refs,
            json!({"selection_ref": "sel_1", "option_refs": ["o1", "o2"]})
        );
        assert_eq!(
            s.public["options"],
            json!([{"label": "A-1"}, {"label": "A-2", "description": "yesterday"}])
        );
        assert!(!s.public.to_string().contains("sel_1"));
    }

    #[test]
    fn not_found_has_the_exact_text() {
        let s = shape(json!({"type": "not_found"})).unwrap();
        assert_eq!(
            s.assistant_text,
            Some("No hay una operación disponible para esta consulta.")
        );
        assert_eq!(s.refs, json!({}));
    }

    #[test]
    fn anything_else_is_rejected() {
        let mut extra = confirm();
        extra["amount"] = json!(3);
        assert_eq!(shape(extra).unwrap_err()[0].rule, "property-not-allowed");
        assert_eq!(
            shape(json!({"type": "execute"})).unwrap_err()[0].rule,
            "interaction-type-invalid"
        );
        assert_eq!(
            shape(json!({"type": "not_found", "reason": "x"})).unwrap_err()[0].rule,
            "property-not-allowed"
        );
        let mut bad_time = confirm();
        bad_time["expires_at"] = json!("2026-13-22T15:00:00Z");
        assert_eq!(shape(bad_time).unwrap_err()[0].rule, "timestamp-invalid");
        let mut bad_ref = confirm();
        bad_ref["operation_ref"] = json!("has space");
        assert_eq!(shape(bad_ref).unwrap_err()[0].rule, "pattern-mismatch");
        assert_eq!(shape(json!({"type": "selection", "operation": "x", "selection_ref": "s", "expires_at": "2026-11-22T15:00:00Z",
            "title": "t", "options": []})).unwrap_err()[0].rule, "array-too-short");
    }

    fn output_rules(schema: &Value) -> Vec<(String, String)> {
        let mut out = Violations::new();
        check_output_schema(schema, &Pointer::root().key("output_schema"), &mut out);
        out.into_vec()
            .into_iter()
            .map(|v| (v.pointer, v.rule))
            .collect()
    }

    #[test]
    fn an_output_schema_must_keep_every_member_of_the_kinds_it_admits() {
        assert_eq!(output_rules(&complete_output_schema()), vec![]);
        // Without operation_ref a confirmation is pruned into an invalid result.
        let mut no_ref = complete_output_schema();
        no_ref["properties"]
            .as_object_mut()
            .unwrap()
            .remove("operation_ref");
        assert_eq!(
            output_rules(&no_ref),
            vec![(
                "/output_schema/properties/operation_ref".into(),
                "interaction-output-incomplete".into()
            )]
        );
        // A type that omits selection needs no selection members...
        let mut confirm_only = complete_output_schema();
        confirm_only["properties"]["type"]["enum"] = json!(["confirm_operation", "not_found"]);
        for member in ["selection_ref", "title", "options"] {
            confirm_only["properties"]
                .as_object_mut()
                .unwrap()
                .remove(member);
        }
        assert_eq!(output_rules(&confirm_only), vec![]);
        // ...but one that admits it needs them all, down to the options' items.
        let mut no_option_ref = complete_output_schema();
        no_option_ref["properties"]["options"]["items"]["properties"]
            .as_object_mut()
            .unwrap()
            .remove("option_ref");
        assert_eq!(
            output_rules(&no_option_ref),
            vec![(
                "/output_schema/properties/options/items/properties/option_ref".into(),
                "interaction-output-incomplete".into()
            )]
        );
        // not_found is always admitted; an unknown kind is refused.
        let mut no_not_found = complete_output_schema();
        no_not_found["properties"]["type"]["enum"] =
            json!(["confirm_operation", "selection", "done"]);
        let got = output_rules(&no_not_found);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got.iter()
                .all(|(p, _)| p == "/output_schema/properties/type")
        );
    }
}
