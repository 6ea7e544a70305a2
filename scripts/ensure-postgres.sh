#!/usr/bin/env bash
# Makes sure a local PostgreSQL is installed, running and reachable with the
# credentials the tests and the example use. Safe to run any number of times.
#
# Honours DBOS_TEST_DATABASE_URL: when it is set and the server it names
# answers, nothing is installed or started.
set -euo pipefail

PG_PASSWORD="${DBOS_TEST_PG_PASSWORD:-dbos}"
URL="${DBOS_TEST_DATABASE_URL:-postgres://postgres:${PG_PASSWORD}@localhost:5432/postgres?sslmode=disable}"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi
}

reachable() {
  command -v psql >/dev/null 2>&1 && psql "$URL" -Atqc 'select 1' >/dev/null 2>&1
}

if reachable; then
  exit 0
fi

if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(ls /usr/lib/postgresql 2>/dev/null)" ]; then
  echo "ensure-postgres: installing postgresql with apt-get" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

# Start every cluster that is down (normally the one "main" cluster).
if command -v pg_lsclusters >/dev/null 2>&1; then
  if [ -z "$(pg_lsclusters -h 2>/dev/null)" ]; then
    version="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"
    echo "ensure-postgres: creating cluster $version/main" >&2
    as_root pg_createcluster "$version" main >/dev/null
  fi
  pg_lsclusters -h | while read -r version cluster port status _; do
    if [ "$status" != "online" ]; then
      echo "ensure-postgres: starting cluster $version/$cluster" >&2
      as_root pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start
    fi
  done
fi

# Wait for the server to accept connections over the local socket.
for _ in $(seq 1 60); do
  if as_postgres psql -Atqc 'select 1' >/dev/null 2>&1; then break; fi
  sleep 0.5
done

# The tests connect over TCP with a password; give the postgres role one and
# allow enough connections for parallel tests and several agents.
as_postgres psql -qc "ALTER ROLE postgres PASSWORD '${PG_PASSWORD}'" >/dev/null
current_max="$(as_postgres psql -Atqc 'show max_connections')"
if [ "$current_max" -lt 300 ]; then
  as_postgres psql -qc "ALTER SYSTEM SET max_connections = 300" >/dev/null
  pg_lsclusters -h | while read -r version cluster _; do
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" restart
  done
fi

for _ in $(seq 1 60); do
  if reachable; then exit 0; fi
  sleep 0.5
done
echo "ensure-postgres: PostgreSQL did not become reachable at the test URL" >&2
exit 1
