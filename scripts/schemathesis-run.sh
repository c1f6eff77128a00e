#!/usr/bin/env bash
# Schemathesis against a live `warden serve` with a real API key, once on
# SQLite and once on PostgreSQL: checks that /openapi.json is a valid
# OpenAPI 3.1 document (openapi-spec-validator), then runs every phase
# (examples, coverage, fuzzing, stateful through the document's links) with
# the checks not_a_server_error, status_code_conformance,
# response_schema_conformance and content_type_conformance.
#
# Usage: scripts/schemathesis-run.sh [MAX_EXAMPLES]  (default 20: `make test`;
# `make fuzz` runs 500). SCHEMATHESIS_BACKENDS="sqlite postgres" picks the
# databases, SCHEMATHESIS_SEED replays a run. Uses the debug build of `warden`
# that `cargo test` made (built here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/start-warden.sh
. scripts/lib/start-warden.sh

MAX_EXAMPLES=${1:-20}
BACKENDS=${SCHEMATHESIS_BACKENDS:-sqlite postgres}
SEED=${SCHEMATHESIS_SEED:-$RANDOM$RANDOM}
CHECKS=not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance
VENV=.venv-schemathesis
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/debug/warden

scripts/ensure-schemathesis.sh
if [ ! -x "$BIN" ]; then
    ${CARGO:-cargo} build --bin warden
fi

work=$(mktemp -d)
server_pid=
pg_database=
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if [ -n "$pg_database" ]; then
        psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $pg_database" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

run_backend() {
    local backend=$1
    case "$backend" in
    sqlite) export WARDEN_DATABASE_URL="sqlite://$work/warden.db" ;;
    postgres)
        scripts/ensure-postgres.sh
        pg_database="warden_schemathesis_$$"
        psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $pg_database" >/dev/null
        export WARDEN_DATABASE_URL="postgres://postgres@127.0.0.1:5432/$pg_database"
        ;;
    *) echo "schemathesis-run: unknown backend $backend" >&2; return 1 ;;
    esac
    export WARDEN_MASTER_KEY
    WARDEN_MASTER_KEY=$(head -c 32 /dev/urandom | base64)
    export WARDEN_ENVIRONMENT=schemathesis WARDEN_LOG_FORMAT=json WARDEN_LOG=warn,warden=info
    export WARDEN_GUEST_CACHE_DIR="$work/guest-cache"

    "$BIN" admin account create schemathesis >/dev/null
    local key
    key=$("$BIN" admin key issue schemathesis | "$VENV/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["api_key"])')

    local log="$work/$backend.log"
    start_warden "$log" "$VENV/bin/python" || return 1

    # The credential the document's examples name, so the example create
    # publishes and the stateful phase can follow its links.
    curl -fsS -X PUT "http://$address/v1/capability-credentials/cred_orders" \
        -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
        -d '{"auth_type":"bearer","secret":"schemathesis-endpoint-token"}' >/dev/null
    curl -fsS "http://$address/openapi.json" -o "$work/openapi.json"
    "$VENV/bin/openapi-spec-validator" "$work/openapi.json"

    echo "schemathesis-run: $backend, $MAX_EXAMPLES examples per operation, seed $SEED" >&2
    local status=0
    "$VENV/bin/schemathesis" --no-color run "http://$address/openapi.json" \
        --header "Authorization: Bearer $key" \
        --checks "$CHECKS" \
        --phases examples,coverage,fuzzing,stateful \
        --max-examples "$MAX_EXAMPLES" \
        --seed "$SEED" \
        --workers 1 \
        --request-timeout 30 || status=$?
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
    if grep -q '"level":"ERROR"' "$log"; then
        echo "schemathesis-run: the server logged errors on $backend:" >&2
        grep '"level":"ERROR"' "$log" | head -20 >&2
        status=1
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
