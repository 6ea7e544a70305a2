#!/usr/bin/env bash
# The Node benchmark (`make bench-node`; not part of `make test`): the
# 10-step workload through the Node binding over the socket and over
# libdbos.so in connect mode, beside the official DBOS TypeScript
# (@dbos-inc/dbos-sdk, a dev dependency of bindings/node), in one run of
# interleaved rounds (bindings/node/bench/driver.mjs says how, and which
# DBOS_BENCH_NODE_* variables size it). Each variant's system database is
# DBOS_BENCH_DATABASE_URL's name plus _<variant>, created fresh and dropped
# at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

export DBOS_BENCH_DATABASE_URL="${DBOS_BENCH_DATABASE_URL:-postgres://postgres:dbos@localhost:5432/bench_node?sslmode=disable}"
bash scripts/ensure-postgres.sh "$DBOS_BENCH_DATABASE_URL"
bash scripts/node-deps.sh
go build -o bin/dbos-agent ./cmd/dbos-agent
if [ -z "${DBOS_BENCH_LIBRARY:-}" ] && [ ! -f cgo/libdbos.so ]; then
  echo "node-bench: no cgo/libdbos.so (make lib): the library variant will not be measured" >&2
fi
cd bindings/node
node scripts/build.mjs
exec node bench/driver.mjs
