#!/usr/bin/env bash
# Installs the Rust target the sandbox guests are built for, if missing.
set -euo pipefail
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    echo "ensure-toolchain: adding the wasm32-wasip2 target" >&2
    rustup target add wasm32-wasip2
fi
