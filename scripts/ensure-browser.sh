#!/usr/bin/env bash
# Makes sure the browser test has what it needs: Debian's Chromium
# (/usr/bin/chromium) and the pinned playwright-core from npm, installed
# into examples/prompt-form/test/node_modules (gitignored) from the
# committed package-lock.json. Idempotent; quiet when all is well.
set -euo pipefail

cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
    echo "ensure-browser: installing chromium from Debian's packages" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! command -v node >/dev/null 2>&1; then
    echo "ensure-browser: installing nodejs and npm from Debian's packages" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
TEST=examples/prompt-form/test
STAMP="$TEST/node_modules/.installed"
if [ -f "$STAMP" ] && cmp -s "$STAMP" "$TEST/package-lock.json"; then
    exit 0
fi
echo "ensure-browser: installing playwright-core into $TEST/node_modules" >&2
(cd "$TEST" && npm ci --no-audit --no-fund --silent)
cp "$TEST/package-lock.json" "$STAMP"
