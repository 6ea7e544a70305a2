# Shared by run.sh and crash-demo.sh (sourced): prepares the Python venv and
# the agent binary (and PostgreSQL, when DATABASE_URL names it), and starts
# the agent on a SQLite file (or Postgres schema) of its own that is removed
# at exit. KEEP=1 (`make run KEEP=1`) keeps the file (or schema), the run's
# directory and the agent itself running on them, to look at afterwards:
# the script ends by printing where they are, the commands that inspect
# them, and how to stop the agent.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/dbos-example.XXXXXX")"
# No URL: a SQLite file of this run's own (nothing to install). A postgres://
# URL: that server, in a schema of this run's own.
DATABASE_URL="${DATABASE_URL:-sqlite:///$WORK/dbos.sqlite}"
SCHEMA="${SCHEMA:-example_$(date +%s)_$$}"
on_sqlite() { [[ $DATABASE_URL == sqlite:* ]]; }
# The flags that name the system database, for serve and the CLI.
DB_FLAGS=(--database-url "$DATABASE_URL")
on_sqlite || DB_FLAGS+=(--schema "$SCHEMA")
PY="$ROOT/.venv/bin/python"
APP="$ROOT/examples/python/order_pipeline.py"
export DBOS_AGENT_SOCKET="$WORK/agent.sock"
export SHOP_DB="$WORK/shop.db"
PIDS=()

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

keeping() { [ "${KEEP:-0}" = "1" ]; }
AGENT_PID=

cleanup() {
  local code=$?
  local pid stop=()
  # A kept agent outlives the script (its log is in $WORK, its stdin
  # /dev/null); the run's workers and clients do not.
  for pid in "${PIDS[@]}"; do
    if keeping && [ "$pid" = "$AGENT_PID" ] && kill -0 "$pid" 2>/dev/null; then continue; fi
    stop+=("$pid")
  done
  for pid in "${stop[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${stop[@]}"; do wait "$pid" 2>/dev/null || true; done
  if keeping; then
    print_kept
  else
    on_sqlite || psql "$DATABASE_URL" -qc "DROP SCHEMA IF EXISTS \"$SCHEMA\" CASCADE" >/dev/null 2>&1 || true
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
  if ! on_sqlite; then
    say "PostgreSQL (scripts/ensure-postgres.sh)"
    bash scripts/ensure-postgres.sh "$DATABASE_URL"
  fi
  say "Python venv .venv with the dbos-agent binding (bindings/python)"
  bash scripts/python-venv.sh
  say "building the agent (bin/dbos-agent)"
  go build -o bin/dbos-agent ./cmd/dbos-agent
}

start_agent() {
  if on_sqlite; then say "starting dbos-agent on $DBOS_AGENT_SOCKET (system database $DATABASE_URL)"
  else say "starting dbos-agent on $DBOS_AGENT_SOCKET (schema $SCHEMA)"; fi
  local admin=()
  # A kept agent serves the dashboard too, when this build has one
  # (--admin-addr), on a free loopback port.
  if keeping && bin/dbos-agent serve --help 2>/dev/null | grep -q -- '--admin-addr'; then
    ADMIN_ADDR="127.0.0.1:$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    admin=(--admin-addr "$ADMIN_ADDR")
  fi
  bin/dbos-agent serve "${DB_FLAGS[@]}" --socket "$DBOS_AGENT_SOCKET" \
    --poll-interval 200ms "${admin[@]}" </dev/null >"$WORK/agent.log" 2>&1 &
  AGENT_PID=$!
  PIDS+=("$AGENT_PID")
  wait_for_line "$WORK/agent.log" "dbos-agent listening" 120 "$AGENT_PID"
  echo "agent pid $AGENT_PID is listening"
}

# print_kept says what KEEP=1 left behind and how to look at it and stop it.
print_kept() {
  local db_flags
  db_flags="$(printf ' %q' "${DB_FLAGS[@]}")"
  say "kept for inspection (KEEP=1)"
  echo "  run directory:    $WORK (agent.log, shop.db)"
  if on_sqlite; then echo "  system database:  ${DATABASE_URL#sqlite:///}"
  else echo "  system database:  schema $SCHEMA in $(printf %q "$DATABASE_URL")"; fi
  echo "  list workflows:   bin/dbos-agent workflow list$db_flags"
  echo "  one's steps:      bin/dbos-agent workflow steps <id>$db_flags"
  if [ -n "$AGENT_PID" ] && kill -0 "$AGENT_PID" 2>/dev/null; then
    echo "  agent:            pid $AGENT_PID, still serving DBOS_AGENT_SOCKET=$DBOS_AGENT_SOCKET"
    if [ -n "${ADMIN_ADDR:-}" ]; then echo "  dashboard:        http://$ADMIN_ADDR/ui"; fi
    echo "  stop the agent:   kill $AGENT_PID"
  fi
  if on_sqlite; then echo "  remove it all:    rm -rf $WORK   (after stopping the agent)"
  else echo "  remove it all:    psql $(printf %q "$DATABASE_URL") -c 'DROP SCHEMA \"$SCHEMA\" CASCADE'; rm -rf $WORK   (after stopping the agent)"; fi
}

show_workflows() {
  say "the workflows, as the agent's CLI lists them"
  bin/dbos-agent workflow list "${DB_FLAGS[@]}"
}
