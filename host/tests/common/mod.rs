//! Test guests, built from source (never checked in as binaries).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Builds the guest workspace at `dir` (relative to `host/`) and returns `<artifact>.wasm`.
pub fn build_guest(dir: &str, artifact: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    warden_test_guests::build_guest(&source, artifact, Path::new(env!("CARGO_TARGET_TMPDIR")))
}

pub fn hostile(name: &str) -> PathBuf {
    build_guest(
        "tests/guests",
        &format!("hostile_{}", name.replace('-', "_")),
    )
}
