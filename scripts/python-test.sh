#!/usr/bin/env bash
# Runs the Python binding's tests against the real agent and PostgreSQL:
# creates or reuses .venv, installs bindings/python[test] (pytest, the
# official dbos package for the interop tests), builds the agent, runs pytest.
# Extra arguments go to pytest. DBOS_AGENT_TEST_TRANSPORT=library runs the
# suite over cgo/libdbos.so (`make lib`) instead of the socket.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

export DBOS_TEST_DATABASE_URL="${DBOS_TEST_DATABASE_URL:-postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable}"
bash scripts/ensure-postgres.sh "$DBOS_TEST_DATABASE_URL"
bash scripts/python-venv.sh test
go build -o bin/dbos-agent ./cmd/dbos-agent

exec .venv/bin/python -m pytest bindings/python/tests -p no:cacheprovider "$@"
