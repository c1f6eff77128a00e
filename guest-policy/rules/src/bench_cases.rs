//! The benchmark documents: small, medium and large schemas with arguments
//! and an endpoint result for each. One definition for the host's benchmark
//! (`host/benches/sandbox.rs`), the differential tests of the streaming pass
//! and the profiling example (`examples/prune_loop.rs`). Built only for tests
//! and with the `bench-cases` feature: never part of the guest.

use serde_json::{Value, json};

/// One benchmark case, every document as JSON text.
pub struct Case {
    pub name: &'static str,
    pub input_schema: String,
    pub arguments: String,
    pub output_schema: String,
    pub result: String,
}

pub fn string(max: u64) -> Value {
    json!({"type": "string", "maxLength": max})
}

pub fn closed(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": required, "properties": props})
}

/// The three cases, smallest first.
pub fn cases() -> Vec<Case> {
    // Small: two arguments.
    let small_in = closed(
        json!({"order": {"type": "string", "maxLength": 20, "pattern": "^[A-Z0-9-]+$"},
        "verbose": {"type": "boolean"}}),
        &["order"],
    );
    let small_args = json!({"order": "A-1234", "verbose": false});
    let small_out = closed(json!({"status": string(40), "eta": string(40)}), &[]);
    let small_res =
        json!({"status": "shipped", "eta": "tomorrow", "internal_id": 99812, "warehouse": "B2"});

    // Medium: the prototype's shape: 8 properties, a pattern, an enum, a bounded array.
    let medium_in = closed(
        json!({
            "customer_ref": {"type": "string", "maxLength": 32, "pattern": "^[a-z0-9_-]{3,32}$"},
            "kind": {"type": "string", "maxLength": 12, "enum": ["order", "invoice", "refund", "quote"]},
            "from": string(25), "to": string(25),
            "limit": {"type": "integer"},
            "include_lines": {"type": "boolean"},
            "tags": {"type": "array", "maxItems": 8, "items": string(16)},
            "note": {"type": ["string", "null"], "maxLength": 200}
        }),
        &["customer_ref", "kind"],
    );
    let medium_args = json!({"customer_ref": "cust_00417", "kind": "invoice", "from": "2026-01-01", "to": "2026-11-01",
        "limit": 20, "include_lines": true, "tags": ["late", "eu", "b2b"], "note": null});
    let line = closed(
        json!({"sku": string(20), "qty": {"type": "integer"}, "price": {"type": "number"}}),
        &["sku"],
    );
    let medium_out = closed(
        json!({
            "invoices": {"type": "array", "maxItems": 20, "items": closed(json!({
                "number": string(20), "status": string(20), "total": {"type": "number"}, "currency": string(3),
                "lines": {"type": "array", "maxItems": 10, "items": line}}), &["number"])},
            "count": {"type": "integer"}
        }),
        &[],
    );
    let inv = |i: u32| {
        json!({"number": format!("INV-{i:05}"), "status": "open", "total": 120.5, "currency": "EUR",
        "customer_tax_id": "ES-B12345678", "internal_ledger": i * 7,
        "lines": [{"sku": "SKU-1", "qty": 2, "price": 10.0, "cost": 4.1}, {"sku": "SKU-2", "qty": 1, "price": 100.5, "cost": 61.0}]})
    };
    let medium_res = json!({"invoices": (0..5).map(inv).collect::<Vec<_>>(), "count": 5, "debug": {"query_ms": 12}});

    // Large: 40 arguments over nested objects and arrays, with anyOf / oneOf.
    let mut props = serde_json::Map::new();
    let mut args = serde_json::Map::new();
    for i in 0..24 {
        props.insert(
            format!("field_{i:02}"),
            json!({"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9 ,.-]*$"}),
        );
        args.insert(
            format!("field_{i:02}"),
            json!(format!("value number {i}, ok")),
        );
    }
    for i in 0..8 {
        props.insert(format!("count_{i}"), json!({"type": "integer"}));
        args.insert(format!("count_{i}"), json!(i * 3));
    }
    props.insert("address".into(), closed(json!({"street": string(80), "city": string(40), "zip": {"type": "string", "maxLength": 10, "pattern": "^[0-9]{5}$"},
        "country": {"type": "string", "maxLength": 2, "enum": ["ES", "FR", "DE", "IT", "PT"]}}), &["city"]));
    args.insert(
        "address".into(),
        json!({"street": "Calle Mayor 1", "city": "Madrid", "zip": "28013", "country": "ES"}),
    );
    props.insert(
        "items".into(),
        json!({"type": "array", "maxItems": 20, "items": closed(json!({"sku": string(20),
        "qty": {"type": "integer"}, "gift": {"type": "boolean"}}), &["sku", "qty"])}),
    );
    args.insert(
        "items".into(),
        json!(
            (0..10)
                .map(|i| json!({"sku": format!("SKU-{i}"), "qty": i + 1, "gift": i % 2 == 0}))
                .collect::<Vec<_>>()
        ),
    );
    props.insert("by_email".into(), string(120));
    props.insert("by_phone".into(), string(20));
    args.insert("by_email".into(), json!("someone@shop.example"));
    let mut large_in = closed(Value::Object(props), &["field_00", "address"]);
    large_in["oneOf"] = json!([{"required": ["by_email"]}, {"required": ["by_phone"]}]);
    large_in["anyOf"] = json!([{"required": ["items"]}, {"required": ["count_0"]}]);
    let large_args = Value::Object(args);
    let large_out = closed(
        json!({
            "orders": {"type": "array", "maxItems": 50, "items": closed(json!({
                "id": string(20), "status": string(20), "placed_at": string(30), "total": {"type": "number"},
                "shipping": closed(json!({"carrier": string(20), "tracking": string(40), "eta": string(30)}), &[]),
                "lines": {"type": "array", "maxItems": 20, "items": line.clone()}}), &["id"])},
            "page": {"type": "integer"}, "pages": {"type": "integer"}
        }),
        &[],
    );
    let order = |i: u32| {
        json!({"id": format!("ORD-{i:06}"), "status": "delivered", "placed_at": "2026-10-01T10:00:00Z",
        "total": 99.9, "margin": 12.5, "customer_email": "someone@shop.example",
        "shipping": {"carrier": "UPS", "tracking": "1Z999AA10123456784", "eta": "2026-10-03", "cost": 4.2},
        "lines": (0..4).map(|j| json!({"sku": format!("SKU-{j}"), "qty": 1, "price": 24.9, "cost": 10.0})).collect::<Vec<_>>()})
    };
    let large_res = json!({"orders": (0..20).map(order).collect::<Vec<_>>(), "page": 1, "pages": 3, "trace": "x".repeat(200)});

    let mk = |name, i: Value, a: Value, o: Value, r: Value| Case {
        name,
        input_schema: i.to_string(),
        arguments: a.to_string(),
        output_schema: o.to_string(),
        result: r.to_string(),
    };
    vec![
        mk("small", small_in, small_args, small_out, small_res),
        mk("medium", medium_in, medium_args, medium_out, medium_res),
        mk("large", large_in, large_args, large_out, large_res),
    ]
}

/// The case called `name`.
pub fn case(name: &str) -> Case {
    cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no bench case {name}"))
}
