# Shared by run.sh and crash-demo.sh (sourced): prepares PostgreSQL, the
# Python venv and the agent binary, and starts the agent on a schema of its
# own that is dropped at exit (KEEP=1 keeps it, to look at it afterwards).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
DATABASE_URL="${DATABASE_URL:-postgres://postgres:dbos@localhost:5432/dbos_agent_example?sslmode=disable}"
SCHEMA="${SCHEMA:-example_$(date +%s)_$$}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/dbos-example.XXXXXX")"
PY="$ROOT/.venv/bin/python"
APP="$ROOT/examples/python/order_pipeline.py"
export DBOS_AGENT_SOCKET="$WORK/agent.sock"
export SHOP_DB="$WORK/shop.db"
PIDS=()

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

cleanup() {
  local code=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = "1" ]; then
    echo "kept schema $SCHEMA in $DATABASE_URL and $WORK"
  else
    psql "$DATABASE_URL" -qc "DROP SCHEMA IF EXISTS \"$SCHEMA\" CASCADE" >/dev/null 2>&1 || true
    rm -rf "$WORK"
  fi
  exit $code
}
trap cleanup EXIT

# wait_for_line FILE TEXT [SECONDS] [PID]: wait until FILE has a line with
# TEXT; fail early when PID (the process writing it) exits.
wait_for_line() {
  local file=$1 text=$2 timeout=${3:-60} pid=${4:-} i
  for ((i = 0; i < timeout * 10; i++)); do
    if grep -qF -- "$text" "$file" 2>/dev/null; then return 0; fi
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "no \"$text\" in $file:" >&2
  cat "$file" >&2 || true
  return 1
}

setup() {
  say "PostgreSQL (scripts/ensure-postgres.sh)"
  bash scripts/ensure-postgres.sh "$DATABASE_URL"
  say "Python venv .venv with the dbos-agent binding (bindings/python)"
  bash scripts/python-venv.sh
  say "building the agent (bin/dbos-agent)"
  go build -o bin/dbos-agent ./cmd/dbos-agent
}

start_agent() {
  say "starting dbos-agent on $DBOS_AGENT_SOCKET (schema $SCHEMA)"
  bin/dbos-agent serve --database-url "$DATABASE_URL" --schema "$SCHEMA" --socket "$DBOS_AGENT_SOCKET" \
    --poll-interval 200ms >"$WORK/agent.log" 2>&1 &
  AGENT_PID=$!
  PIDS+=("$AGENT_PID")
  wait_for_line "$WORK/agent.log" "dbos-agent listening" 120 "$AGENT_PID"
  echo "agent pid $AGENT_PID is listening"
}

show_workflows() {
  say "the workflows, as the agent's CLI lists them"
  bin/dbos-agent workflow list --database-url "$DATABASE_URL" --schema "$SCHEMA"
}
