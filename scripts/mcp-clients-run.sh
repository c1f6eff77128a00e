#!/usr/bin/env bash
# The official MCP client SDKs against a live `warden serve`, once on SQLite
# and once on PostgreSQL (`make test`): an account, a key, the example host
# endpoint's credential and its read capability `order_status` (and a
# preparation, which must not be listed); then the Python SDK (`mcp`,
# negotiating 2026-07-28 through `server/discover`) and the TypeScript SDK
# (`@modelcontextprotocol/sdk`, negotiating 2025-11-25 through `initialize`)
# each list the tools, call one through the example host endpoint (which
# verifies the signature) and get `isError` for bad arguments
# (examples/mcp-clients/).
#
# MCP_CLIENTS_BACKENDS="sqlite postgres" picks the databases. Uses the debug
# builds `cargo test` made of `warden` and of the example endpoint
# (`examples/host_endpoint.rs`), built here if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/start-warden.sh
. scripts/lib/start-warden.sh

BACKENDS=${MCP_CLIENTS_BACKENDS:-sqlite postgres}
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/debug/warden
ENDPOINT_BIN=$TARGET/debug/examples/host_endpoint
VENV=.venv-mcp-clients
TOKEN=mcp-clients-endpoint-token

scripts/ensure-mcp-clients.sh
[ -x "$BIN" ] || ${CARGO:-cargo} build --quiet --bin warden
[ -x "$ENDPOINT_BIN" ] || ${CARGO:-cargo} build --quiet --example host_endpoint

work=$(mktemp -d)
server_pid=
endpoint_pid=
pg_database=
stop() {
    for pid in "$endpoint_pid" "$server_pid"; do
        if [ -n "$pid" ]; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    server_pid=
    endpoint_pid=
}
cleanup() {
    stop
    if [ -n "$pg_database" ]; then
        psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $pg_database" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

run_backend() {
    local backend=$1
    case "$backend" in
    sqlite) export WARDEN_DATABASE_URL="sqlite://$work/warden.db" ;;
    postgres)
        scripts/ensure-postgres.sh
        pg_database="warden_mcp_clients_$$"
        psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $pg_database" >/dev/null
        export WARDEN_DATABASE_URL="postgres://postgres@127.0.0.1:5432/$pg_database"
        ;;
    *) echo "mcp-clients-run: unknown backend $backend" >&2; return 1 ;;
    esac
    export WARDEN_MASTER_KEY
    WARDEN_MASTER_KEY=$(head -c 32 /dev/urandom | base64)
    export WARDEN_ENVIRONMENT=mcp-clients WARDEN_LOG_FORMAT=json WARDEN_LOG=warn,warden=info
    export WARDEN_GUEST_CACHE_DIR="$work/guest-cache"
    # The example endpoint listens on loopback (development only).
    export WARDEN_DEV_ALLOW_LOOPBACK=1

    "$BIN" admin account create mcp-clients >/dev/null
    local key
    key=$("$BIN" admin key issue mcp-clients | "$VENV/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["api_key"])')

    local log="$work/$backend.log"
    start_warden "$log" "$VENV/bin/python" || return 1

    local port
    port=$(free_port)
    HOST_ENDPOINT_TOKEN=$TOKEN HOST_ENDPOINT_LISTEN="127.0.0.1:$port" \
        WARDEN_JWKS_URL="http://$address/.well-known/service/capability-context/v1/jwks.json" \
        "$ENDPOINT_BIN" >"$work/endpoint-$backend.log" 2>&1 &
    endpoint_pid=$!

    curl -fsS -X PUT "http://$address/v1/capability-credentials/cred_orders" \
        -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
        -d "{\"auth_type\":\"bearer\",\"secret\":\"$TOKEN\"}" >/dev/null
    # The walk-through's manifest: order_status (read) and a preparation,
    # pointed at this run's endpoint.
    "$VENV/bin/python" - "$port" >"$work/manifest.json" <<'PY'
import json, sys
manifest = json.load(open("examples/manifests/walkthrough.json", encoding="utf-8"))
for capability in manifest["capabilities"]:
    capability["url"] = capability["url"].replace("127.0.0.1:9090", f"127.0.0.1:{sys.argv[1]}")
print(json.dumps(manifest))
PY
    curl -fsS -X POST "http://$address/v1/capabilities/import" \
        -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
        -H "Idempotency-Key: mcp-clients-$backend" --data-binary "@$work/manifest.json" >/dev/null

    local url="http://$address/v1/mcp" status=0
    echo "mcp-clients-run: $backend" >&2
    "$VENV/bin/python" examples/mcp-clients/client.py "$url" "$key" 2026-07-28 || status=1
    node examples/mcp-clients/client.mjs "$url" "$key" 2025-11-25 || status=1
    stop
    if grep -q '"level":"ERROR"' "$log"; then
        echo "mcp-clients-run: the server logged errors on $backend:" >&2
        grep '"level":"ERROR"' "$log" | head -20 >&2
        status=1
    fi
    if [ "$status" != 0 ]; then
        echo "mcp-clients-run: the example endpoint's log:" >&2
        cat "$work/endpoint-$backend.log" >&2
    fi
    if [ -n "$pg_database" ]; then
        psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $pg_database" >/dev/null
        pg_database=
    fi
    return "$status"
}

failed=0
for backend in $BACKENDS; do
    run_backend "$backend" || failed=1
done
exit "$failed"
