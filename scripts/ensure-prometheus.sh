#!/usr/bin/env bash
# Makes sure the observability tests have a real Prometheus: Debian's
# `prometheus` package, which installs both the server (`prometheus`, started
# by tests/api/metrics.rs (helpers/prometheus.rs) on loopback to scrape Warden) and
# `promtool` (`check metrics` on a scrape, `check rules` on
# examples/observability/alerts.yml). The package's own service is not used:
# the tests start their own server with a temporary data directory.
#
# Idempotent; quiet when all is well.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-prometheus: prometheus/promtool are missing and there is no apt-get; install Prometheus" >&2
    exit 1
fi
sudo_if_needed=()
[ "$(id -u)" -eq 0 ] || sudo_if_needed=(sudo)
echo "ensure-prometheus: installing prometheus (server and promtool) from Debian's packages" >&2
"${sudo_if_needed[@]}" apt-get update -qq
# RUNLEVEL=1 keeps invoke-rc.d from starting the package's own service where
# an init system runs (the tests start theirs); no recommended exporters.
DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 "${sudo_if_needed[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null
