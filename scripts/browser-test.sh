#!/usr/bin/env bash
# The prompt-form example (examples/prompt-form/) in headless Chromium
# against the real `warden serve` (the debug build `cargo test` made), with
# a fake challenge widget, verifier and model on loopback: a successful
# run, a wrong origin, a reused token, the fourth request within a minute
# and a disabled integration. Screenshots go to
# $CARGO_TARGET_DIR/browser-test/ (default target/browser-test/).
set -euo pipefail

cd "$(dirname "$0")/.."
scripts/ensure-browser.sh
TARGET=${CARGO_TARGET_DIR:-target}
WARDEN_BIN=${WARDEN_BIN:-$TARGET/debug/warden}
if [ ! -x "$WARDEN_BIN" ]; then
    cargo build --quiet --bin warden
fi
export WARDEN_BIN="$(cd "$(dirname "$WARDEN_BIN")" && pwd)/$(basename "$WARDEN_BIN")"
export BROWSER_TEST_OUT="$(mkdir -p "$TARGET/browser-test" && cd "$TARGET/browser-test" && pwd)"
exec node examples/prompt-form/test/browser-test.mjs
