#!/usr/bin/env bash
# The Node example: build the agent and the dbos-agent npm package
# (bindings/node), start the agent as the Python example does
# (examples/python/common.sh: a SQLite file, or DATABASE_URL's Postgres), and
# run the order pipeline
# (examples/node/src/order_pipeline.ts, DBOS TypeScript code importing
# dbos-agent) through it; the orders' workflows complete and the program
# checks each side effect happened exactly once. The agent's schema and the
# shop's (the application database's tables) are dropped at exit (KEEP=1
# keeps them).
set -euo pipefail
source "$(dirname "$0")/../python/common.sh"
EXAMPLE="$ROOT/examples/node"
# The shop's tables live in Postgres (the example shows DBOS TypeScript's
# pg data source): the system database's server, or the local one when the
# system database is a SQLite file.
if on_sqlite; then
  export SHOP_DATABASE_URL="${SHOP_DATABASE_URL:-postgres://postgres:dbos@localhost:5432/dbos_agent_example?sslmode=disable}"
else
  export SHOP_DATABASE_URL="$DATABASE_URL"
fi
export SHOP_SCHEMA="${SCHEMA}_shop"

drop_shop() {
  if [ "${KEEP:-0}" = "1" ]; then
    echo "kept schema $SHOP_SCHEMA in $SHOP_DATABASE_URL"
  else
    psql "$SHOP_DATABASE_URL" -qc "DROP SCHEMA IF EXISTS \"$SHOP_SCHEMA\" CASCADE" >/dev/null 2>&1 || true
  fi
}
# The shop's schema first, then common.sh's cleanup, with the exit status
# the script had.
trap 'code=$?; drop_shop; (exit $code); cleanup' EXIT

say "PostgreSQL (scripts/ensure-postgres.sh)"
bash scripts/ensure-postgres.sh "$SHOP_DATABASE_URL"
say "the dbos-agent npm package (bindings/node: npm ci, build)"
bash scripts/node-deps.sh
(cd bindings/node && node scripts/build.mjs)
say "the example (examples/node: npm ci, tsc)"
bash scripts/node-deps.sh "$EXAMPLE"
(cd "$EXAMPLE" && node node_modules/typescript/bin/tsc -p tsconfig.json)
say "building the agent (bin/dbos-agent)"
go build -o bin/dbos-agent ./cmd/dbos-agent
start_agent
say "running the order pipeline (node examples/node/build/order_pipeline.js demo)"
node "$EXAMPLE/build/order_pipeline.js" demo
show_workflows
