#!/usr/bin/env bash
# A runnable walk-through of one conversation with Warden's built-in planner.
#
#   examples/walkthrough.sh
#
# It builds Warden and the example host endpoint (examples/host-endpoint),
# starts both on this machine (Warden on a free port, with a throw-away
# SQLite database and WARDEN_DEV_ALLOW_LOOPBACK=1), creates an account and an
# API key, stores the endpoint's credential, imports
# examples/manifests/walkthrough.json and holds a three-turn conversation:
#
#   1. "¿Dónde está mi pedido?"   -> the assistant asks for the order number
#   2. "A-1001"                   -> the order's status, grounded in the host's answer
#   3. "Quiero cambiar la dirección de envío del pedido A-1001"
#                                 -> a confirm_operation interaction for the host's app
#
# and finally reports the host's terminal result for that interaction.
# Every reply is checked: the script exits non-zero as soon as one does not
# behave as described, so it doubles as a smoke test.
#
# Environment:
#   WALKTHROUGH_HOST_PORT   port of the example host endpoint (default 9090)
#   WALKTHROUGH_SKIP_BUILD  set to 1 to use the binaries already built
#   WALKTHROUGH_LOG_DIR     copy Warden's and the endpoint's logs there on exit
# Needs: cargo, curl, python3 (for JSON; no jq needed).

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

HOST_PORT="${WALKTHROUGH_HOST_PORT:-9090}"
MANIFEST="$ROOT/examples/manifests/walkthrough.json"
USER_ID="walkthrough-user"

# ---------------------------------------------------------------- output --

if [[ -t 1 ]]; then
    BOLD=$'\e[1m' DIM=$'\e[2m' GREEN=$'\e[32m' RED=$'\e[31m' CYAN=$'\e[36m' RESET=$'\e[0m'
else
    BOLD='' DIM='' GREEN='' RED='' CYAN='' RESET=''
fi

section() { printf '\n%s== %s ==%s\n' "$BOLD" "$*" "$RESET"; }
note() { printf '%s%s%s\n' "$DIM" "$*" "$RESET"; }
ok() { printf '%s  ok%s %s\n' "$GREEN" "$RESET" "$*"; }
FAILURE=''
die() {
    FAILURE="$*"
    printf '%sFAILED:%s %s\n' "$RED" "$RESET" "$*" >&2
    exit 1
}

for tool in cargo curl python3; do
    command -v "$tool" >/dev/null || die "$tool is required (python3 is used for JSON: no jq needed)"
done

# ------------------------------------------------------- temp dir, cleanup --

WORK="$(mktemp -d "${TMPDIR:-/tmp}/warden-walkthrough.XXXXXX")"
SERVER_PID=''
HOST_PID=''

cleanup() {
    local status=$?
    for pid in "$HOST_PID" "$SERVER_PID"; do
        if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    if [[ -n "${WALKTHROUGH_LOG_DIR:-}" ]]; then
        mkdir -p "$WALKTHROUGH_LOG_DIR"
        cp "$WORK"/*.log "$WALKTHROUGH_LOG_DIR"/ 2>/dev/null || true
    fi
    if [[ $status -ne 0 ]]; then
        for log in server.log host-endpoint.log; do
            if [[ -s "$WORK/$log" ]]; then
                printf '\n%s--- last lines of %s ---%s\n' "$DIM" "$log" "$RESET" >&2
                tail -n 25 "$WORK/$log" >&2
            fi
        done
        [[ -n "$FAILURE" ]] && printf '\n%sThe walk-through FAILED:%s %s\n' "$RED" "$RESET" "$FAILURE" >&2
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------ JSON helpers --

# json FILE PATH: the value at PATH (dotted, numbers index arrays: `a.0.b`)
# in the JSON document FILE; strings raw, other values as JSON, nothing
# when absent.
json() {
    python3 - "$1" "$2" <<'PY'
import json, sys
value = json.load(open(sys.argv[1], encoding="utf-8"))
for part in filter(None, sys.argv[2].split(".")):
    if isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
        value = value[int(part)]
    elif isinstance(value, dict) and part in value:
        value = value[part]
    else:
        sys.exit(0)
print(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
PY
}

# Builds a JSON object from KEY=VALUE pairs (all strings).
object() {
    python3 - "$@" <<'PY'
import json, sys
print(json.dumps(dict(a.split("=", 1) for a in sys.argv[1:]), ensure_ascii=False))
PY
}

pretty() {
    python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), ensure_ascii=False, indent=2))' <"$1" 2>/dev/null || cat "$1"
}

indent() { sed 's/^/    /'; }

new_key() { python3 -c 'import uuid; print(uuid.uuid4())'; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_in_use() {
    python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)
PY
}

# --------------------------------------------------------------- requests --

KEY=''
STATUS=''
REPLY="$WORK/reply.json"

# request METHOD PATH [BODY] [HEADER…]: prints the request and the reply,
# leaves the status in $STATUS and the reply body in $REPLY.
request() {
    local method=$1 path=$2 body=${3:-}
    shift $(($# < 3 ? $# : 3))
    local args=(-sS -o "$REPLY" -w '%{http_code}' -X "$method" "$BASE$path")
    [[ -n "$KEY" ]] && args+=(-H "Authorization: Bearer $KEY")
    local header
    for header in "$@"; do
        args+=(-H "$header")
    done
    printf '\n%s> %s %s%s\n' "$CYAN" "$method" "$path" "$RESET"
    for header in "$@"; do
        printf '%s> %s%s\n' "$DIM" "$header" "$RESET"
    done
    if [[ -n "$body" ]]; then
        args+=(-H 'Content-Type: application/json' --data-binary "$body")
        printf '%s\n' "$body" >"$WORK/request.json"
        pretty "$WORK/request.json" | indent
    fi
    STATUS="$(curl "${args[@]}")" || die "$method $path: no answer from Warden"
    printf '%s< %s%s\n' "$CYAN" "$STATUS" "$RESET"
    [[ -s "$REPLY" ]] && pretty "$REPLY" | indent
    return 0
}

expect_status() {
    [[ "$STATUS" == "$1" ]] || die "expected HTTP $1, got $STATUS"
}

# expect_eq PATH VALUE WHAT
expect_eq() {
    local got
    got="$(json "$REPLY" "$1")"
    [[ "$got" == "$2" ]] || die "$3: expected $1 = '$2', got '$got'"
    ok "$3"
}

# expect_contains PATH TEXT WHAT
expect_contains() {
    local got
    got="$(json "$REPLY" "$1")"
    [[ "$got" == *"$2"* ]] || die "$3: expected $1 to contain '$2', got '$got'"
    ok "$3"
}

# expect_absent TEXT WHAT: TEXT is nowhere in the reply.
expect_absent() {
    ! grep -qF -- "$1" "$REPLY" || die "$2: '$1' appears in the reply"
    ok "$2"
}

# The trace's reason codes, one line each: `stage status capability reason_code`.
trace() {
    python3 - "$REPLY" <<'PY'
import json, sys
for e in json.load(open(sys.argv[1], encoding="utf-8"))["capability_trace"]["events"]:
    print(e["stage"], e["status"], e.get("capability") or "-", e["reason_code"])
PY
}

# say TEXT: one user turn in the conversation (started by the first).
CONVERSATION=''
TURN=0
say() {
    TURN=$((TURN + 1))
    section "Turn $TURN"
    printf '%suser      >%s %s\n' "$BOLD" "$RESET" "$1"
    local body
    if [[ -z "$CONVERSATION" ]]; then
        body="$(python3 -c 'import json,sys; print(json.dumps({"user_id": sys.argv[1], "message": {"type": "text", "body": sys.argv[2]}}, ensure_ascii=False))' "$USER_ID" "$1")"
    else
        body="$(python3 -c 'import json,sys; print(json.dumps({"user_id": sys.argv[1], "conversation_id": sys.argv[3], "message": {"type": "text", "body": sys.argv[2]}}, ensure_ascii=False))' "$USER_ID" "$1" "$CONVERSATION")"
    fi
    request POST /v1/channels/http/messages "$body"
    expect_status 200
    printf '%sassistant >%s %s\n' "$BOLD" "$RESET" "$(json "$REPLY" message.body)"
    note "trace:"
    trace | indent
    if [[ -z "$CONVERSATION" ]]; then
        CONVERSATION="$(json "$REPLY" conversation_id)"
        [[ "$CONVERSATION" == conv_* ]] || die "no conversation_id in the reply"
    else
        expect_eq conversation_id "$CONVERSATION" "same conversation"
    fi
}

# ------------------------------------------------------------------ build --

# Where cargo puts each build (honours CARGO_TARGET_DIR and cargo's config).
target_dir() {
    cargo metadata --format-version 1 --no-deps "$@" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}
WARDEN="$(target_dir)/debug/warden"
HOST_ENDPOINT="$(target_dir --manifest-path examples/host-endpoint/Cargo.toml)/debug/warden-example-host-endpoint"

if [[ "${WALKTHROUGH_SKIP_BUILD:-0}" != 1 ]]; then
    section "Building (the first build of Warden takes several minutes: wasmtime)"
    cargo build --bin warden
    cargo build --manifest-path examples/host-endpoint/Cargo.toml
fi
[[ -x "$WARDEN" ]] || die "$WARDEN is missing: build it with cargo build --bin warden"
[[ -x "$HOST_ENDPOINT" ]] || die "$HOST_ENDPOINT is missing: build it with cargo build --manifest-path examples/host-endpoint/Cargo.toml"

# ----------------------------------------------------------------- Warden --

section "Starting Warden"
PORT="$(free_port)"
BASE="http://127.0.0.1:$PORT"
export WARDEN_DATABASE_URL="sqlite://$WORK/warden.db"
export WARDEN_MASTER_KEY
WARDEN_MASTER_KEY="$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')"
export WARDEN_LOG="${WARDEN_LOG:-info}"
# The built-in planner: no inference backend, whatever the caller's shell says.
unset WARDEN_INFERENCE_URL WARDEN_INFERENCE_MODEL WARDEN_INFERENCE_API_KEY
note "database $WARDEN_DATABASE_URL, listening on $BASE, WARDEN_DEV_ALLOW_LOOPBACK=1 (development only)"
WARDEN_LISTEN="127.0.0.1:$PORT" WARDEN_DEV_ALLOW_LOOPBACK=1 \
    "$WARDEN" serve >"$WORK/server.log" 2>&1 &
SERVER_PID=$!

for _ in $(seq 1 240); do
    kill -0 "$SERVER_PID" 2>/dev/null || die "warden serve exited during start-up"
    curl -fsS "$BASE/health" >/dev/null 2>&1 && break
    sleep 0.5
done
curl -fsS "$BASE/health" >"$REPLY" || die "Warden did not answer /health within two minutes"
ok "Warden answers /health: $(cat "$REPLY")"

section "An account and an API key (warden admin, same database)"
printf '%s$ warden admin account create walkthrough%s\n' "$DIM" "$RESET"
WARDEN_LOG=warn "$WARDEN" admin account create walkthrough | tee "$WORK/account.json" | indent
printf '%s$ warden admin key issue walkthrough%s\n' "$DIM" "$RESET"
WARDEN_LOG=warn "$WARDEN" admin key issue walkthrough >"$WORK/key.json"
KEY="$(json "$WORK/key.json" api_key)"
[[ "$KEY" == wdn_* ]] || die "no api_key in: $(cat "$WORK/key.json")"
# Shown once by Warden; abridged here.
python3 - "$WORK/key.json" <<'PY' | indent
import json, sys
k = json.load(open(sys.argv[1]))
k["api_key"] = k["api_key"][:12] + "…"
print(json.dumps(k, ensure_ascii=False))
PY

# ---------------------------------------------------------- host endpoint --

section "The host endpoint's credential"
TOKEN="walkthrough-$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')"
note "the endpoint expects this bearer token; Warden stores it sealed and sends it with every call"
request PUT /v1/capability-credentials/cred_orders "$(object auth_type=bearer "secret=$TOKEN")"
expect_status 201
expect_eq status configured "credential stored"
expect_absent "$TOKEN" "the secret is not echoed"

section "Starting the example host endpoint"
if port_in_use "$HOST_PORT"; then
    die "127.0.0.1:$HOST_PORT is in use: free it or set WALKTHROUGH_HOST_PORT to another port"
fi
HOST_ORIGIN="http://127.0.0.1:$HOST_PORT"
note "$HOST_ORIGIN, verifying every call against $BASE/.well-known/service/capability-context/v1/jwks.json"
HOST_ENDPOINT_TOKEN="$TOKEN" HOST_ENDPOINT_LISTEN="127.0.0.1:$HOST_PORT" \
    WARDEN_JWKS_URL="$BASE/.well-known/service/capability-context/v1/jwks.json" \
    "$HOST_ENDPOINT" >"$WORK/host-endpoint.log" 2>&1 &
HOST_PID=$!
for _ in $(seq 1 60); do
    kill -0 "$HOST_PID" 2>/dev/null || die "the host endpoint exited during start-up"
    port_in_use "$HOST_PORT" && break
    sleep 0.25
done
port_in_use "$HOST_PORT" || die "the host endpoint is not listening on $HOST_PORT"
ok "listening"

# An unsigned call is refused before anything is read.
curl -sS -o "$WORK/unsigned.json" -w '%{http_code}' -X POST "$HOST_ORIGIN/orders/status" \
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    --data '{"order":"A-1001"}' >"$WORK/unsigned.status"
[[ "$(cat "$WORK/unsigned.status")" == 401 ]] || die "an unsigned call to the host endpoint was not refused"
ok "a call with the right token but without Warden's signature gets 401 ($(cat "$WORK/unsigned.json"))"

section "Importing the capabilities ($(basename "$MANIFEST"))"
MANIFEST_BODY="$(python3 - "$MANIFEST" "$HOST_ORIGIN" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read().replace("http://127.0.0.1:9090", sys.argv[2])
print(json.dumps(json.loads(text), ensure_ascii=False))
PY
)"
note "order_status (read) and prepare_address_change (result_handling: host_interaction); full bodies in the manifest"
# The manifest is long: print the request abridged.
printf '\n%s> POST /v1/capabilities/import%s\n' "$CYAN" "$RESET"
python3 - "$MANIFEST_BODY" <<'PY' | indent
import json, sys
m = json.loads(sys.argv[1])
print(json.dumps({"domain": m["domain"], "capabilities": [
    {k: c[k] for k in ("name", "description", "when_to_use", "url") if k in c} | (
        {"result_handling": c["result_handling"]} if "result_handling" in c else {})
    for c in m["capabilities"]]}, ensure_ascii=False, indent=2))
PY
IMPORT_KEY="$(new_key)"
printf '%s> Idempotency-Key: %s%s\n' "$DIM" "$IMPORT_KEY" "$RESET"
curl -sS -o "$REPLY" -w '%{http_code}' -X POST "$BASE/v1/capabilities/import" \
    -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
    -H "Idempotency-Key: $IMPORT_KEY" --data-binary "$MANIFEST_BODY" >"$WORK/status"
STATUS="$(cat "$WORK/status")"
printf '%s< %s%s\n' "$CYAN" "$STATUS" "$RESET"
pretty "$REPLY" | indent
expect_status 201
expect_eq capabilities.0.lifecycle_status active "order_status is active"
expect_eq capabilities.1.lifecycle_status active "prepare_address_change is active"

# ----------------------------------------------------------- conversation --

say "¿Dónde está mi pedido?"
expect_contains message.body "el número de pedido" "the assistant asks for the order number (clarification)"
[[ "$(trace | tail -n 1)" == "response_generation "*" clarification" ]] || die "the turn does not end in a clarification"
ok "the trace ends in a clarification"
[[ "$(trace)" != *execution* ]] || die "something was called with an invented order number"
ok "nothing was called: no order number was invented"

say "A-1001"
[[ "$(trace | head -n 1)" == "selection selected order_status pending_operation" ]] ||
    die "the answer did not complete the pending order_status call"
ok "the answer completes the pending call"
[[ "$(trace | sed -n 2p)" == "execution result_received order_status ok" ]] || die "order_status was not called"
ok "order_status was called once"
expect_contains message.body "shipped" "the reply states the host's status"
expect_contains message.body "Correos" "and its carrier"
expect_absent "internal" "the undeclared 'warehouse' field was pruned"
[[ "$(trace | tail -n 1)" == *" grounded" ]] || die "the reply is not grounded"
ok "the reply is grounded in the result"

say "Quiero cambiar la dirección de envío del pedido A-1001"
[[ "$(trace | head -n 1)" == "selection selected prepare_address_change matched" ]] ||
    die "prepare_address_change was not selected"
ok "an operation intent selects the preparation capability"
expect_eq interaction.type confirm_operation "a confirm_operation interaction"
expect_eq interaction.owner host "owned by the host's application"
expect_eq interaction.operation change_address "for change_address"
INTERACTION_ID="$(json "$REPLY" interaction.interaction_id)"
OPERATION_REF="$(json "$REPLY" interaction.operation_ref)"
[[ "$INTERACTION_ID" == int_* ]] || die "no interaction_id"
[[ "$OPERATION_REF" == addrchg_* ]] || die "the host's operation_ref did not reach the response"
ok "the host's opaque operation_ref comes back in the interaction only"
[[ "$(json "$REPLY" message.body)" != *"$OPERATION_REF"* ]] || die "the operation_ref leaked into the text"
ok "and not in the assistant's text"
expect_contains message.body "Revisa y confirma" "the assistant asks the user to review and confirm"

section "The interaction the host's app shows"
python3 - "$REPLY" <<'PY' | indent
import json, sys
i = json.load(open(sys.argv[1], encoding="utf-8"))["interaction"]
print(f"{i['preview']['title']}  (expires {i['expires_at']})")
for f in i["preview"]["fields"]:
    print(f"  {f['label']}: {f['value']}")
print(f"[ Confirmar ]  -> the host runs {i['operation']} with its own reference {i['operation_ref']}")
PY

# ------------------------------------------------------- host's result ----

section "The host reports the operation's terminal result"
note "the user confirmed in the host's app and the host changed the address; Warden is told only the outcome"
REPORT="$(object "interaction_id=$INTERACTION_ID" operation=change_address status=succeeded)"
REPORT_KEY="$(new_key)"
request POST "/v1/conversations/$CONVERSATION/operation-results" "$REPORT" "Idempotency-Key: $REPORT_KEY"
expect_status 200
expect_eq status succeeded "the result is recorded"
expect_eq message.body "La operación se completó correctamente." "with the deterministic text appended to the conversation"
FIRST_REPORT="$(cat "$REPLY")"

note "a retried delivery with the same Idempotency-Key replays the same answer"
request POST "/v1/conversations/$CONVERSATION/operation-results" "$REPORT" "Idempotency-Key: $REPORT_KEY"
expect_status 200
[[ "$(cat "$REPLY")" == "$FIRST_REPORT" ]] || die "the replay differs from the first answer"
ok "replayed"

note "a second report under a new key: the interaction is already closed"
request POST "/v1/conversations/$CONVERSATION/operation-results" "$REPORT" "Idempotency-Key: $(new_key)"
expect_status 409
ok "409: reported once"

# --------------------------------------------------------- host's view ----

section "What the host endpoint saw"
indent <"$WORK/host-endpoint.log"
CALLS="$(grep -E '^POST ' "$WORK/host-endpoint.log" || true)"
EXPECTED="POST /orders/status -> 401
POST /orders/status -> 200
POST /orders/prepare-address-change -> 200"
[[ "$CALLS" == "$EXPECTED" ]] || die "the host endpoint's calls were not as expected:
$CALLS"
ok "two signed calls from Warden, both verified (the 401 was our unsigned probe)"

section "Done"
printf '%sThe walk-through passed.%s\n' "$GREEN" "$RESET"
