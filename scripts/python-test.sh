#!/usr/bin/env bash
# Runs the Python binding's tests against the real agent and PostgreSQL:
# creates or reuses .venv, installs bindings/python[test] (pytest, the
# official dbos package for the interop tests), builds the agent, runs pytest.
# Extra arguments go to pytest. DBOS_AGENT_TEST_TRANSPORT=library runs the
# suite over cgo/libdbos.so (`make lib`) instead of the socket;
# DBOS_AGENT_TEST_SYSTEM_DB=sqlite runs the interop modules on SQLite.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

export DBOS_TEST_DATABASE_URL="${DBOS_TEST_DATABASE_URL:-postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable}"
bash scripts/ensure-postgres.sh "$DBOS_TEST_DATABASE_URL"
bash scripts/python-venv.sh test
go build -o bin/dbos-agent ./cmd/dbos-agent

# DBOS_AGENT_TEST_SYSTEM_DB=sqlite puts each module's agent on a SQLite file
# and runs the modules where the official dbos package shares the agent's
# database (the others read Postgres tables directly to check what was
# stored, which the Go conformance suite checks for SQLite).
tests=(bindings/python/tests)
if [ "${DBOS_AGENT_TEST_SYSTEM_DB:-postgres}" = "sqlite" ]; then
  tests=(bindings/python/tests/test_interop.py bindings/python/tests/test_queue_interop.py bindings/python/tests/test_comm_interop.py)
fi
exec .venv/bin/python -m pytest "${tests[@]}" -p no:cacheprovider "$@"
