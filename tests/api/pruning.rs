//! Output pruning through the policy guest (contract 2.6 rule 9): fields
//! the output schema does not declare are removed at every depth, declared
//! ones come back unchanged, and what remains is validated.

use crate::helpers::*;
use serde_json::{Value, json};

fn s(n: u64) -> Value {
    json!({"type": "string", "maxLength": n})
}

fn object(properties: Value) -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": properties})
}

fn array(items: Value) -> Value {
    json!({"type": "array", "maxItems": 10, "items": items})
}

/// (case, output schema, endpoint answer, expected pruned answer)
fn table() -> Vec<(&'static str, Value, Value, Value)> {
    let order = object(json!({"id": s(10), "status": s(20)}));
    let with_lines = object(
        json!({"status": s(20), "lines": array(object(json!({"sku": s(10), "qty": {"type": "integer"}})))}),
    );
    let nested = object(
        json!({"customer": object(json!({"name": s(40), "address": object(json!({"city": s(40)}))}))}),
    );
    vec![
        (
            "nothing to prune",
            order.clone(),
            json!({"id": "A1", "status": "ok"}),
            json!({"id": "A1", "status": "ok"}),
        ),
        (
            "one extra top-level field",
            order.clone(),
            json!({"id": "A1", "status": "ok", "margin": 0.3}),
            json!({"id": "A1", "status": "ok"}),
        ),
        (
            "many extra fields",
            order.clone(),
            json!({"id": "A1", "a": 1, "b": "x", "c": null, "d": [1], "status": "ok"}),
            json!({"id": "A1", "status": "ok"}),
        ),
        (
            "extra object field",
            order.clone(),
            json!({"id": "A1", "status": "ok", "internal": {"cost": 3}}),
            json!({"id": "A1", "status": "ok"}),
        ),
        (
            "extra array field",
            order.clone(),
            json!({"id": "A1", "status": "ok", "audit": [{"by": "x"}]}),
            json!({"id": "A1", "status": "ok"}),
        ),
        (
            "declared field absent",
            order.clone(),
            json!({"id": "A1"}),
            json!({"id": "A1"}),
        ),
        ("empty object", order.clone(), json!({}), json!({})),
        (
            "only undeclared fields",
            order.clone(),
            json!({"x": 1, "y": 2}),
            json!({}),
        ),
        (
            "inside array items",
            with_lines.clone(),
            json!({"status": "ok", "lines": [{"sku": "S1", "qty": 1, "cost": 2.5}]}),
            json!({"status": "ok", "lines": [{"sku": "S1", "qty": 1}]}),
        ),
        (
            "every array item",
            with_lines.clone(),
            json!({"lines": [{"sku": "S1", "qty": 1, "x": 1}, {"sku": "S2", "qty": 2, "y": 2}, {"sku": "S3", "qty": 3}]}),
            json!({"lines": [{"sku": "S1", "qty": 1}, {"sku": "S2", "qty": 2}, {"sku": "S3", "qty": 3}]}),
        ),
        (
            "empty array kept",
            with_lines.clone(),
            json!({"status": "ok", "lines": []}),
            json!({"status": "ok", "lines": []}),
        ),
        (
            "array order kept",
            with_lines.clone(),
            json!({"lines": [{"sku": "B"}, {"sku": "A"}]}),
            json!({"lines": [{"sku": "B"}, {"sku": "A"}]}),
        ),
        (
            "two levels deep",
            nested.clone(),
            json!({"customer": {"name": "Ana", "email": "a@x", "address": {"city": "Lima", "street": "Av 1"}}}),
            json!({"customer": {"name": "Ana", "address": {"city": "Lima"}}}),
        ),
        (
            "extra at every depth",
            nested.clone(),
            json!({"top": 1, "customer": {"x": 2, "address": {"y": 3, "city": "Quito"}}}),
            json!({"customer": {"address": {"city": "Quito"}}}),
        ),
        (
            "declared values unchanged",
            object(
                json!({"n": {"type": "number"}, "b": {"type": "boolean"}, "i": {"type": "integer"}, "t": s(5)}),
            ),
            json!({"n": 1.5, "b": false, "i": -7, "t": "ñandú", "z": 0}),
            json!({"n": 1.5, "b": false, "i": -7, "t": "ñandú"}),
        ),
        (
            "unicode kept exactly",
            order.clone(),
            json!({"id": "Ω-1", "status": "envío 📦"}),
            json!({"id": "Ω-1", "status": "envío 📦"}),
        ),
        (
            "enum value kept",
            object(
                json!({"state": {"type": "string", "maxLength": 10, "enum": ["open", "closed"]}}),
            ),
            json!({"state": "open", "note": "x"}),
            json!({"state": "open"}),
        ),
        (
            "const value kept",
            object(json!({"v": {"const": 1}})),
            json!({"v": 1, "w": 2}),
            json!({"v": 1}),
        ),
        (
            "array of strings untouched",
            object(json!({"tags": array(s(10))})),
            json!({"tags": ["a", "b"], "more": ["c"]}),
            json!({"tags": ["a", "b"]}),
        ),
        (
            "array of arrays",
            object(json!({"grid": array(array(object(json!({"v": {"type": "integer"}}))))})),
            json!({"grid": [[{"v": 1, "x": 0}], [{"v": 2}]]}),
            json!({"grid": [[{"v": 1}], [{"v": 2}]]}),
        ),
        (
            "key named like a keyword",
            object(json!({"type": s(10), "properties": s(10)})),
            json!({"type": "t", "properties": "p", "items": "i"}),
            json!({"type": "t", "properties": "p"}),
        ),
        (
            "null extra removed, declared kept",
            order.clone(),
            json!({"id": "A1", "status": "ok", "deleted_at": null}),
            json!({"id": "A1", "status": "ok"}),
        ),
    ]
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_removes_undeclared_fields_at_every_depth(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.account_with_key("acme").await;
    let account = app.store.find_account("acme").await.unwrap().unwrap();
    let cases = table();
    assert!(cases.len() >= 20);
    for (i, (name, schema, answer, expected)) in cases.into_iter().enumerate() {
        let pruned = app
            .context
            .sandbox
            .prune_output(
                &account,
                format!("cap_pruning@{i}/output"),
                schema.to_string(),
                answer.to_string(),
            )
            .await
            .unwrap();
        assert_eq!(pruned, Ok(expected), "{name}");
    }
    // What remains is validated: a declared field that breaks its schema fails the call.
    let too_long = app
        .context
        .sandbox
        .prune_output(
            &account,
            "cap_pruning@99/output".into(),
            object(json!({"id": s(3)})).to_string(),
            json!({"id": "ABCDE", "x": 1}).to_string(),
        )
        .await
        .unwrap();
    assert!(too_long.is_err());
}
