//! Builds policy guest components from source: one nested
//! `cargo build --release --locked --target wasm32-wasip2`, with the outer
//! build's settings kept out of it. Used by `host/build.rs` (the default
//! guest it embeds) and by the tests (`host/tests`: hostile guests and the
//! example guest; `tests/api`: swapping a guest into a running server), so
//! guests are never checked in as binaries. No dependencies: a build script
//! can use it.

use std::collections::HashMap;
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Builds the cargo workspace at `source` for `wasm32-wasip2` into
/// `target_dir` and returns the path of `<artifact>.wasm`. Panics, saying
/// why, when the build fails or leaves no such file.
pub fn build_component(source: &Path, target_dir: &Path, artifact: &str) -> PathBuf {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(source)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(target_dir);
    // The outer build's settings are for the host target; none of them may
    // leak into the guest build (profile, target, flags, jobserver, wrappers).
    // Kept: where cargo lives (CARGO_HOME) and whether it may use the network.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if (key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE")
            || matches!(
                key.as_str(),
                "RUSTFLAGS"
                    | "RUSTDOCFLAGS"
                    | "RUSTC_WRAPPER"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "MAKEFLAGS"
                    | "MFLAGS"
            )
        {
            cmd.env_remove(&key);
        }
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo for {}: {e}", source.display()));
    if !status.success() {
        panic!(
            "building the guest component in {} failed ({status}). Is the target installed? \
             Run `rustup target add wasm32-wasip2`.",
            source.display()
        );
    }
    artifact_path(source, target_dir, artifact)
}

/// `<target_dir>/wasm32-wasip2/release/<artifact>.wasm`, which must exist.
fn artifact_path(source: &Path, target_dir: &Path, artifact: &str) -> PathBuf {
    let path = target_dir
        .join("wasm32-wasip2")
        .join("release")
        .join(format!("{artifact}.wasm"));
    assert!(
        path.exists(),
        "building {} left no {}",
        source.display(),
        path.display()
    );
    path
}

/// For tests: [`build_component`] once per workspace and test process (a
/// workspace may hold several guests), into a target directory of its own
/// under `target_root`; returns `<artifact>.wasm`. Concurrent tests wait for
/// the one build.
pub fn build_guest(source: &Path, artifact: &str, target_root: &Path) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<PathBuf, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(HashMap::new()));
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    let target = match built.get(source) {
        Some(target) => target.clone(),
        None => {
            let name: String = source
                .to_string_lossy()
                .chars()
                .map(|c| if c.is_alphanumeric() { c } else { '_' })
                .collect();
            let target = target_root.join("guests").join(name);
            build_component(source, &target, artifact);
            built.insert(source.to_path_buf(), target.clone());
            target
        }
    };
    artifact_path(source, &target, artifact)
}
