#!/usr/bin/env bash
# Installs what `make fuzz` and scripts/fuzz-smoke.sh need, if missing: a
# nightly toolchain (libFuzzer's sanitizer flags are nightly-only) and
# cargo-fuzz from crates.io. Idempotent: does nothing when both are there.
set -euo pipefail
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "ensure-fuzz: installing the nightly toolchain" >&2
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "ensure-fuzz: installing cargo-fuzz from crates.io" >&2
    cargo install cargo-fuzz --locked
fi
