#!/usr/bin/env bash
# A short fuzzing run for CI: every target for FUZZ_SMOKE_SECONDS (default
# 25) from the committed seeds. Non-zero on a crash. `make fuzz` is the long run.
set -euo pipefail
exec "$(dirname "$0")/fuzz-run.sh" "${FUZZ_SMOKE_SECONDS:-25}" "$@"
