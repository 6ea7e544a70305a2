#!/usr/bin/env bash
# The Node example: build the agent and the dbos-agent npm package
# (bindings/node), start the agent on a local PostgreSQL as the Python
# example does (examples/python/common.sh), and run the order pipeline
# (examples/node/src/order_pipeline.ts, DBOS TypeScript code importing
# dbos-agent) through it; the orders' workflows complete and the program
# checks each side effect happened exactly once. The agent's schema and the
# shop's (the application database's tables) are dropped at exit (KEEP=1
# keeps them).
set -euo pipefail
source "$(dirname "$0")/../python/common.sh"
EXAMPLE="$ROOT/examples/node"
export SHOP_DATABASE_URL="$DATABASE_URL"
export SHOP_SCHEMA="${SCHEMA}_shop"

drop_shop() {
  if [ "${KEEP:-0}" = "1" ]; then
    echo "kept schema $SHOP_SCHEMA in $DATABASE_URL"
  else
    psql "$DATABASE_URL" -qc "DROP SCHEMA IF EXISTS \"$SHOP_SCHEMA\" CASCADE" >/dev/null 2>&1 || true
  fi
}
# The shop's schema first, then common.sh's cleanup, with the exit status
# the script had.
trap 'code=$?; drop_shop; (exit $code); cleanup' EXIT

say "PostgreSQL (scripts/ensure-postgres.sh)"
bash scripts/ensure-postgres.sh "$DATABASE_URL"
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
