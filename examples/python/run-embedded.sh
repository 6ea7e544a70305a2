#!/usr/bin/env bash
# The example with the agent inside the application's process: the Python
# binding loads libdbos.so in embedded mode (DBOS_AGENT_LIBRARY) and the
# engine runs on the system database DBOS_SYSTEM_DATABASE_URL names. No
# dbos-agent process runs; the CLI lists the workflows afterwards from the
# same database. Each run gets a database of its own, dropped at exit
# (KEEP=1 keeps it).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
SERVER_URL="${DATABASE_URL:-postgres://postgres:dbos@localhost:5432/dbos_agent_example?sslmode=disable}"
DB="dbos_agent_embedded_$(date +%s)_$$"
# The same server and options, another database name.
base="${SERVER_URL%%\?*}"
query="${SERVER_URL#"$base"}"
URL="${base%/*}/$DB$query"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/dbos-example.XXXXXX")"
PY="$ROOT/.venv/bin/python"

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
cleanup() {
  local code=$?
  if [ "${KEEP:-0}" = "1" ]; then
    echo "kept database $DB and $WORK"
  else
    psql "$SERVER_URL" -qc "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$WORK"
  fi
  exit $code
}
trap cleanup EXIT

say "PostgreSQL (scripts/ensure-postgres.sh)"
bash scripts/ensure-postgres.sh "$URL"
say "Python venv .venv with the dbos-agent binding (bindings/python)"
bash scripts/python-venv.sh
say "building libdbos.so and the CLI (make build)"
make --no-print-directory build >/dev/null
say "running the order pipeline with the agent embedded (no dbos-agent process)"
SHOP_DB="$WORK/shop.db" DBOS_AGENT_LIBRARY="$ROOT/cgo/libdbos.so" DBOS_AGENT_MODE=embedded \
  DBOS_SYSTEM_DATABASE_URL="$URL" "$PY" examples/python/order_pipeline.py demo
say "the workflows, as the agent's CLI lists them"
bin/dbos-agent workflow list --database-url "$URL"
