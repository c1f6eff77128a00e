//! Test guests, built from source (never checked in as binaries).
#![allow(dead_code)]

use serde_json::json;
use std::path::{Path, PathBuf};

/// Builds the guest workspace at `dir` (relative to `host/`) and returns `<artifact>.wasm`.
pub fn build_guest(dir: &str, artifact: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    warden_guest_build::build_guest(&source, artifact, Path::new(env!("CARGO_TARGET_TMPDIR")))
}

pub fn hostile(name: &str) -> PathBuf {
    build_guest(
        "tests/guests",
        &format!("hostile_{}", name.replace('-', "_")),
    )
}

/// A small read-only definition whose name the example guest's house rule
/// (names start with `acme_`) judges.
pub fn order_definition(name: &str) -> String {
    json!({
        "name": name, "description": "Looks up an order", "method": "POST",
        "url": "https://api.shop.example/v1/orders/status",
        "auth": {"type": "bearer", "credential_ref": "cred_orders"},
        "input_schema": {"type": "object", "additionalProperties": false,
            "properties": {"order": {"type": "string", "maxLength": 20}}},
        "output_schema": {"type": "object", "additionalProperties": false},
        "side_effect": "read"
    })
    .to_string()
}
