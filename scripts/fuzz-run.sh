#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for SECONDS each (default 300) and prints
# one line per target: its executions and whether it crashed. Exits non-zero
# if any target crashed (the input is kept in fuzz/artifacts/<target>/).
#
# New inputs libFuzzer finds go to a scratch corpus ($FUZZ_TARGET_DIR/corpus);
# the committed seeds in fuzz/corpus/<target> are only read. To keep finds,
# `cargo +nightly fuzz cmin <target>` and commit what is worth it.
#
#   scripts/fuzz-run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-fuzz.sh

seconds=${1:-300}
shift || true
# Its own target directory: instrumented builds never mix with the server's.
target_dir=${FUZZ_TARGET_DIR:-$PWD/fuzz/target}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi

started=$(date +%s)
(cd fuzz && cargo +nightly fuzz build --target-dir "$target_dir" 2>&1 | tail -1) \
    || { echo "fuzz: build failed" >&2; exit 1; }
built=$(date +%s)
echo "fuzz: built the targets in $((built - started)) s"

failed=0
log_dir=$target_dir/logs
mkdir -p "$log_dir"
for t in "${targets[@]}"; do
    scratch=$target_dir/corpus/$t
    mkdir -p "$scratch" "fuzz/corpus/$t"
    log=$log_dir/$t.log
    if (cd fuzz && cargo +nightly fuzz run --target-dir "$target_dir" "$t" "$scratch" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1) >"$log" 2>&1; then
        status=ok
    else
        status=CRASH
        failed=1
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    printf 'fuzz: %-20s %10s executions in %s s  %s\n' "$t" "${runs:-?}" "$seconds" "$status"
    if [ "$status" = CRASH ]; then
        grep -E 'panicked|ERROR: libFuzzer|SUMMARY|Test unit written|artifact_prefix' "$log" | head -8 >&2 || true
        echo "fuzz: full log: $log" >&2
    fi
done
echo "fuzz: total $(($(date +%s) - started)) s"
exit "$failed"
