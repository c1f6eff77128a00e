//! Builds the default guest component (`guest-policy/`) from source for
//! `wasm32-wasip2` and leaves it at `$OUT_DIR/warden_guest_policy.wasm`, where
//! `src/guest.rs` embeds it with `include_bytes!`.
//!
//! The guest is its own cargo workspace; it is built by a nested cargo
//! (`warden_guest_build::build_component`, shared with the tests) with
//! its own target directory (`$OUT_DIR/guest-target`, or
//! `$WARDEN_GUEST_TARGET_DIR` when set) so it never contends for the outer
//! build's lock. A plain `cargo build` works on a clean clone as long as the
//! `wasm32-wasip2` target is installed (`rustup target add wasm32-wasip2`).
//!
//! Set `WARDEN_GUEST_WASM=/path/to/guest.wasm` to embed a prebuilt component
//! instead (for packagers); nothing is compiled then.

use std::env;
use std::path::PathBuf;

use warden_guest_build::build_component;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir
        .parent()
        .expect("host/ lives in the repository root")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let dest = out_dir.join("warden_guest_policy.wasm");

    println!("cargo:rerun-if-env-changed=WARDEN_GUEST_WASM");
    println!("cargo:rerun-if-env-changed=WARDEN_GUEST_TARGET_DIR");
    if let Ok(prebuilt) = env::var("WARDEN_GUEST_WASM") {
        println!("cargo:rerun-if-changed={prebuilt}");
        std::fs::copy(&prebuilt, &dest)
            .unwrap_or_else(|e| panic!("cannot copy WARDEN_GUEST_WASM={prebuilt}: {e}"));
        return;
    }

    let guest_dir = root.join("guest-policy");
    for p in [
        "src",
        "rules/src",
        "rules/Cargo.toml",
        "sdk/src",
        "sdk/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", guest_dir.join(p).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("wit").display());

    let target_dir = env::var_os("WARDEN_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| out_dir.join("guest-target"));
    let built = build_component(&guest_dir, &target_dir, "warden_guest_policy");
    std::fs::copy(&built, &dest).unwrap_or_else(|e| panic!("cannot copy {}: {e}", built.display()));
}
