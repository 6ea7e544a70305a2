#!/usr/bin/env bash
# The main job: build the agent, start it on a local PostgreSQL, and run the
# order-pipeline example (examples/python/order_pipeline.py) through the
# Python binding; the orders' workflows complete and the script checks each
# side effect happened exactly once.
set -euo pipefail
source "$(dirname "$0")/common.sh"

setup
start_agent
say "running the order pipeline (python $APP demo)"
"$PY" "$APP" demo
show_workflows
