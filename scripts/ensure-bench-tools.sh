#!/usr/bin/env bash
# Makes sure the load benchmark's tools are installed (`make bench`).
#
# - `wrk`, from Debian's packages, is the load generator. Chosen over `oha`
#   (crates.io) because it is a small C program costing far less CPU per
#   request than the servers it loads — on a 2-core machine the generator
#   shares the cores with what it measures — and installs in seconds instead
#   of a long cargo build. Its closed loop is used as is; the open loop
#   (fixed arrival rates, which wrk lacks) is the benchmark's own
#   (benches/load/load.rs).
# - With --profile: `perf` (Debian's linux-perf) and inferno's flamegraph
#   tools (crates.io, into .tools/, gitignored), for WARDEN_BENCH_PROFILE.
#
# Idempotent; quiet when all is well.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sudo_if_needed=()
[ "$(id -u)" -eq 0 ] || sudo_if_needed=(sudo)
updated=0
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "ensure-bench-tools: $1 is missing and there is no apt-get; install it" >&2
        exit 1
    fi
    echo "ensure-bench-tools: installing $1 from Debian's packages" >&2
    if [ "$updated" = 0 ]; then
        "${sudo_if_needed[@]}" apt-get update -qq
        updated=1
    fi
    DEBIAN_FRONTEND=noninteractive "${sudo_if_needed[@]}" apt-get install -y -qq "$1" >/dev/null
}

command -v wrk >/dev/null 2>&1 || apt_install wrk

if [ "${1:-}" = "--profile" ]; then
    command -v perf >/dev/null 2>&1 || apt_install linux-perf
    if [ ! -x "$ROOT/.tools/bin/inferno-flamegraph" ]; then
        echo "ensure-bench-tools: installing inferno into .tools/" >&2
        cargo install --quiet --locked inferno --version '^0.12' --no-default-features --features cli \
            --root "$ROOT/.tools"
    fi
fi
