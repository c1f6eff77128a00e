#!/usr/bin/env bash
# Makes sure the project-local Python environment `.venv-schemathesis/`
# (gitignored) holds the pinned Schemathesis and openapi-spec-validator from
# PyPI, for scripts/schemathesis-run.sh. Idempotent; quiet when all is well.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=.venv-schemathesis
# Pinned: a new release must not change what `make test` checks.
PACKAGES=(schemathesis==4.32.5 openapi-spec-validator==0.9.0)
STAMP="$VENV/.installed"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PACKAGES[*]}" ]; then
    exit 0
fi
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
    echo "ensure-schemathesis: needs Python 3.9 or later as $PYTHON" >&2
    exit 1
fi
if ! "$PYTHON" -m venv --help >/dev/null 2>&1; then
    echo "ensure-schemathesis: installing python3-venv from Debian's packages" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi
echo "ensure-schemathesis: creating $VENV with ${PACKAGES[*]}" >&2
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "${PACKAGES[@]}"
echo "${PACKAGES[*]}" > "$STAMP"
