//! Test data shared by the rules' tests, the host's tests and the server's
//! tests, written once (feature `fixtures`; the guest never enables it).

use serde_json::Value;

/// The example manifest `examples/manifests/orders.json`: one capability,
/// `order_status`. The host's `guest check` self-test reads the same file.
pub const ORDERS_MANIFEST: &str = include_str!("../../../examples/manifests/orders.json");

/// The manifest's `order_status` definition: every default rule accepts it
/// (given its credential `cred_orders` exists). Tests that need a variant
/// mutate a copy.
pub fn order_status() -> Value {
    let manifest: Value =
        serde_json::from_str(ORDERS_MANIFEST).expect("examples/manifests/orders.json is JSON");
    manifest["capabilities"][0].clone()
}

/// Keywords outside the schema language (contract 2.6, rule 6): each is
/// refused by name, `keyword-not-allowed`, wherever a schema holds it.
pub const FORBIDDEN_KEYWORDS: &[&str] = &[
    "allOf",
    "$ref",
    "$defs",
    "$schema",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "multipleOf",
    "minItems",
    "uniqueItems",
    "format",
    "if",
    "then",
    "else",
    "dependentRequired",
    "patternProperties",
    "propertyNames",
    "default",
    "examples",
    "title",
];
