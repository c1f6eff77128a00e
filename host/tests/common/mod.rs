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

/// The example manifest's `order_status` definition under the name `name`,
/// which the example guest's house rule (names start with `acme_`) judges.
pub fn order_definition(name: &str) -> String {
    let mut definition = warden_policy_rules::fixtures::order_status();
    definition["name"] = json!(name);
    definition.to_string()
}
