//! Builds test guests from source (never checked in as binaries).
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Builds the cargo workspace at `dir` (relative to `host/`) for
/// wasm32-wasip2, once per test process, and returns the path of
/// `<artifact>.wasm`.
pub fn build_guest(dir: &str, artifact: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(HashMap::new()));
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    let target_dir = match built.get(dir) {
        Some(t) => t.clone(),
        None => {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
            let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("guests")
                .join(dir.replace(['/', '.'], "_"));
            let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cmd.current_dir(&src)
                .args([
                    "build",
                    "--release",
                    "--locked",
                    "--target",
                    "wasm32-wasip2",
                    "--target-dir",
                ])
                .arg(&target);
            for (key, _) in std::env::vars_os() {
                let key = key.to_string_lossy().into_owned();
                if (key.starts_with("CARGO_") && key != "CARGO_HOME")
                    || matches!(
                        key.as_str(),
                        "RUSTFLAGS" | "RUSTC_WRAPPER" | "RUSTC_WORKSPACE_WRAPPER"
                    )
                {
                    cmd.env_remove(&key);
                }
            }
            let status = cmd.status().expect("run cargo");
            assert!(
                status.success(),
                "building {dir} for wasm32-wasip2 failed (rustup target add wasm32-wasip2?)"
            );
            built.insert(dir.to_string(), target.clone());
            target
        }
    };
    let path = target_dir
        .join("wasm32-wasip2/release")
        .join(format!("{artifact}.wasm"));
    assert!(path.exists(), "{} was not built", path.display());
    path
}

pub fn hostile(name: &str) -> PathBuf {
    build_guest(
        "tests/guests",
        &format!("hostile_{}", name.replace('-', "_")),
    )
}
