//! The OpenAI-compatible planner's unit tests: requests built, answers read.

use super::*;

#[test]
fn optional_properties_become_nullable_and_required() {
    let schema = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["city"],
        "properties": {
            "city": { "type": "string", "maxLength": 40 },
            "day": { "type": "string", "maxLength": 10, "description": "ISO date" },
            "unit": { "type": "string", "enum": ["c", "f"] },
            "mode": { "enum": ["fast", "slow"] },
            "kind": { "const": "daily" },
            "where": {
                "type": "object",
                "additionalProperties": false,
                "properties": { "zip": { "type": "string", "maxLength": 5 } },
            },
        },
    });
    let strict = strict_schema(&schema);
    let mut required: Vec<&str> = strict["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    required.sort_unstable();
    assert_eq!(required, ["city", "day", "kind", "mode", "unit", "where"]);
    assert_eq!(strict["properties"]["city"]["type"], json!("string"));
    assert_eq!(
        strict["properties"]["day"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(strict["properties"]["day"]["maxLength"], json!(10));
    assert_eq!(
        strict["properties"]["day"]["description"],
        json!("ISO date")
    );
    assert_eq!(
        strict["properties"]["unit"]["enum"],
        json!(["c", "f", null])
    );
    assert_eq!(
        strict["properties"]["mode"]["enum"],
        json!(["fast", "slow", null])
    );
    assert_eq!(
        strict["properties"]["kind"],
        json!({ "anyOf": [{ "const": "daily" }, { "type": "null" }] })
    );
    let nested = &strict["properties"]["where"];
    assert_eq!(nested["type"], json!(["object", "null"]));
    assert_eq!(nested["required"], json!(["zip"]));
    assert_eq!(
        nested["properties"]["zip"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(nested["additionalProperties"], json!(false));
}

#[test]
fn optional_nulls_are_removed_required_ones_kept() {
    let schema = json!({
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": { "type": ["string", "null"] },
            "b": { "type": "string" },
            "c": {
                "type": "object",
                "properties": { "d": { "type": "string" } },
            },
        },
    });
    let mut arguments = json!({ "a": null, "b": null, "c": { "d": null } })
        .as_object()
        .cloned()
        .unwrap_or_default();
    strip_optional_nulls(&mut arguments, &schema);
    assert_eq!(Value::Object(arguments), json!({ "a": null, "c": {} }));
}

#[test]
fn arguments_must_be_an_object() {
    assert_eq!(
        parse_arguments(json!("{\"x\":1}")),
        json!({ "x": 1 }).as_object().cloned()
    );
    assert_eq!(parse_arguments(json!("")), Some(Map::new()));
    assert_eq!(
        parse_arguments(json!({ "x": 1 })),
        json!({ "x": 1 }).as_object().cloned()
    );
    assert_eq!(parse_arguments(json!("{\"x\":")), None);
    assert_eq!(parse_arguments(json!("[1]")), None);
    assert_eq!(parse_arguments(json!("42")), None);
}

#[test]
fn the_key_is_not_in_debug_output() {
    let config = OpenAiConfig {
        url: "http://127.0.0.1:1/v1".into(),
        model: "m".into(),
        api_key: Some("sk-secret".into()),
        timeout: Duration::from_secs(1),
    };
    assert!(!format!("{config:?}").contains("sk-secret"));
}
