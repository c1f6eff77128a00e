# Sourced by the scripts that test a live server (schemathesis-run.sh,
# mcp-clients-run.sh): starts `$BIN serve` on a free loopback port with its
# JSON log in $1, waits until it says it listens (60 s at most), and sets
# `server_pid` and `address` (host:port). $2 is the python that reads the log.
start_warden() {
    local log=$1 python=$2
    WARDEN_LISTEN=127.0.0.1:0 "$BIN" serve 2>"$log" &
    server_pid=$!
    address=
    for _ in $(seq 1 600); do
        address=$("$python" - "$log" <<'PY'
import json, sys
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        event = json.loads(line)
    except ValueError:
        continue
    if event.get("message") == "warden is listening":
        print(event["address"])
        break
PY
)
        [ -n "$address" ] && return 0
        kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; return 1; }
        sleep 0.1
    done
    echo "$(basename "$0"): warden did not start" >&2
    cat "$log" >&2
    return 1
}
