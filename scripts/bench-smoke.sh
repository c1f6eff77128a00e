#!/usr/bin/env bash
# A short run of the load benchmark, of the soak and of the growth run, as part of `make test`,
# so none of them rots between `make bench` runs: the debug build (shared with
# the tests), a few seconds per scenario, and a failure on any error under
# closed-loop load. The figures it prints mean nothing (a debug build, a
# busy machine); `make bench` and `make soak` are the measurements. The
# counted judge (callgrind, `WARDEN_BENCH_COUNT`) is `make bench`'s alone:
# under valgrind the debug build compiles the guest for minutes, and CI's
# 40 minutes have no room for it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/ensure-bench-tools.sh
# `--workspace`: the dependencies' features are then unified as in `make
# test`'s `cargo test --workspace`, so its build is reused; with the warden
# package alone they differ, and wasmtime, sqlx, tokio and the rest were
# built a second time (3 min 14 s of CI's 2 cores; 7 s with it).
export WARDEN_BENCH_QUICK=1 WARDEN_BENCH_SMOKE=1
echo "bench-smoke: the load benchmark (quick: relay, contract test, MCP call, turn, observed turn, past capacity; SQLite and PostgreSQL)"
WARDEN_BENCH_ONLY=relay,capability_test,mcp_call,turn_1,turn_1_observed,past_capacity cargo test --quiet --workspace --bench load
echo "bench-smoke: the soak (two 5 s slices, SQLite)"
WARDEN_BENCH_SOAK=10 WARDEN_BENCH_BACKENDS=sqlite cargo test --quiet --workspace --bench load
echo "bench-smoke: the growth run (tiny sizes, SQLite)"
WARDEN_BENCH_GROWTH=1 WARDEN_BENCH_GROWTH_SCALE=0.002 WARDEN_BENCH_GROWTH_REQUESTS=20 WARDEN_BENCH_BACKENDS=sqlite \
    cargo test --quiet --workspace --bench load
