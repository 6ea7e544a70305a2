#!/usr/bin/env bash
# The main job: build the agent, start it on a SQLite file (or DATABASE_URL's
# Postgres), and run the order-pipeline example
# (examples/python/order_pipeline.py) through the Python binding; the orders'
# workflows complete and the script checks each side effect happened exactly
# once. On SQLite, the official dbos package then reads the same file.
set -euo pipefail
source "$(dirname "$0")/common.sh"

setup
start_agent
say "running the order pipeline (python $APP demo)"
"$PY" "$APP" demo
show_workflows
if on_sqlite; then
  say "the same file through the official dbos package (PyPI), as a DBOS Python app beside the agent sees it"
  "$(bash scripts/dbos-python.sh)" examples/python/official_list.py "$DATABASE_URL"
fi
