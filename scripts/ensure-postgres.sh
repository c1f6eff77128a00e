#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers on 127.0.0.1:5432 for the test
# suite: starts the machine's cluster if it is down, installs Debian's
# server package first if there is none. Idempotent; quiet when all is well.
set -euo pipefail

ready() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
ready && exit 0

if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
    echo "ensure-postgres: installing PostgreSQL from Debian's packages" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    # Tests connect as `postgres` over loopback without a password.
    hba=/etc/postgresql/$version/main/pg_hba.conf
    sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)\S+/\1trust/' "$hba"
fi

version=$(ls /etc/postgresql | sort -V | tail -n 1)
echo "ensure-postgres: starting PostgreSQL $version" >&2
pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
for _ in $(seq 1 60); do
    ready && exit 0
    sleep 0.5
done
echo "ensure-postgres: PostgreSQL is still not answering on 127.0.0.1:5432" >&2
exit 1
