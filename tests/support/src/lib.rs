//! Builds policy guest components from source for tests: guests are never
//! checked in as binaries. Used by `host/tests` (hostile guests, the example
//! guest) and `tests/api` (swapping a guest into a running server).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Builds the cargo workspace at `source` for wasm32-wasip2 into
/// `target_root` (once per test process) and returns `<artifact>.wasm`.
pub fn build_guest(source: &Path, artifact: &str, target_root: &Path) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<PathBuf, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(HashMap::new()));
    // One build per workspace at a time; concurrent tests wait for it.
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
            let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cmd.current_dir(source)
                .args([
                    "build",
                    "--release",
                    "--locked",
                    "--target",
                    "wasm32-wasip2",
                    "--target-dir",
                ])
                .arg(&target);
            // The outer cargo's settings (profile, target, flags) are not the guest's.
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
                "building {} for wasm32-wasip2 failed (rustup target add wasm32-wasip2?)",
                source.display()
            );
            built.insert(source.to_path_buf(), target.clone());
            target
        }
    };
    let path = target
        .join("wasm32-wasip2/release")
        .join(format!("{artifact}.wasm"));
    assert!(path.exists(), "{} was not built", path.display());
    path
}
