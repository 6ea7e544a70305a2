#!/usr/bin/env bash
# Runs the Node binding's tests (bindings/node) against the real agent and
# PostgreSQL: installs the package's dependencies when they are missing or
# the lock file changed (scripts/node-deps.sh), builds the agent, compiles
# the package and its tests, and runs them one file at a time. Arguments
# name test files (build/test/foo.test.js, relative to bindings/node) to run
# instead of all; a run of all of them over the socket also checks the
# package as users install it (bindings/node/scripts/package-check.mjs:
# npm pack, installed into an empty project, required, imported, type-checked
# and run). DBOS_AGENT_TEST_TRANSPORT=library runs the suite over
# cgo/libdbos.so (`make lib`) in connect mode instead of the socket. The
# repository's Python virtualenv (scripts/python-venv.sh) is made too: a test
# runs a Python-binding worker beside the Node one (test/interop_comm.test.ts).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

export DBOS_TEST_DATABASE_URL="${DBOS_TEST_DATABASE_URL:-postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable}"
bash scripts/ensure-postgres.sh "$DBOS_TEST_DATABASE_URL"
bash scripts/node-deps.sh
bash scripts/python-venv.sh
go build -o bin/dbos-agent ./cmd/dbos-agent
if [ "${DBOS_AGENT_TEST_TRANSPORT:-}" = "library" ] && [ ! -f cgo/libdbos.so ]; then
  echo "node-test: DBOS_AGENT_TEST_TRANSPORT=library needs cgo/libdbos.so (make lib)" >&2
  exit 1
fi

# The test databases are the URL's name plus _node_<file> (test/harness.ts);
# they are dropped when the run ends, whatever its outcome.
base="${DBOS_TEST_DATABASE_URL%%\?*}"
prefix="${base##*/}_node_"
admin="${base%/*}/postgres"
drop_test_databases() {
  local code=$? db
  for db in $(psql "$admin" -Atc "SELECT datname FROM pg_database WHERE starts_with(datname, '$prefix')" 2>/dev/null); do
    psql "$admin" -qc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
  done
  exit $code
}
trap drop_test_databases EXIT

cd bindings/node
node scripts/build.mjs --tests
all=0
if [ $# -eq 0 ]; then set -- build/test/*.test.js; all=1; fi
echo "node-test: node --test over the ${DBOS_AGENT_TEST_TRANSPORT:-socket} transport" >&2
node --test --test-concurrency=1 "$@"
if [ "$all" = 1 ] && [ "${DBOS_AGENT_TEST_TRANSPORT:-socket}" != "library" ]; then
  node scripts/package-check.mjs
fi
