#!/usr/bin/env bash
# Makes sure the official MCP client SDKs are installed project-locally for
# scripts/mcp-clients-run.sh, both pinned:
# - the Python SDK `mcp` from PyPI into `.venv-mcp-clients/` (gitignored);
# - the TypeScript SDK `@modelcontextprotocol/sdk` from npm into
#   examples/mcp-clients/node_modules (gitignored), from the committed
#   package-lock.json.
# Idempotent; quiet when all is well.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=.venv-mcp-clients
# Pinned: a new release must not change what `make test` checks.
PACKAGES=(mcp==2.3.0)
STAMP="$VENV/.installed"

if ! { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PACKAGES[*]}" ]; }; then
    PYTHON=${PYTHON:-python3}
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        echo "ensure-mcp-clients: needs Python 3.10 or later as $PYTHON" >&2
        exit 1
    fi
    if ! "$PYTHON" -m venv --help >/dev/null 2>&1; then
        echo "ensure-mcp-clients: installing python3-venv from Debian's packages" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    fi
    echo "ensure-mcp-clients: creating $VENV with ${PACKAGES[*]}" >&2
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PACKAGES[@]}"
    echo "${PACKAGES[*]}" > "$STAMP"
fi

if ! command -v node >/dev/null 2>&1; then
    echo "ensure-mcp-clients: installing nodejs and npm from Debian's packages" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
CLIENTS=examples/mcp-clients
NODE_STAMP="$CLIENTS/node_modules/.installed"
if [ -f "$NODE_STAMP" ] && cmp -s "$NODE_STAMP" "$CLIENTS/package-lock.json"; then
    exit 0
fi
echo "ensure-mcp-clients: installing @modelcontextprotocol/sdk into $CLIENTS/node_modules" >&2
(cd "$CLIENTS" && npm ci --no-audit --no-fund --silent)
cp "$CLIENTS/package-lock.json" "$NODE_STAMP"
