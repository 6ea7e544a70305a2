#!/usr/bin/env bash
# Makes sure the PostgreSQL server each URL names is up and that each URL's
# database exists. Safe to run any number of times.
#
#   scripts/ensure-postgres.sh [URL ...]
#
# Without arguments it prepares DBOS_TEST_DATABASE_URL and DATABASE_URL (or
# their defaults). A server that already answers is only asked to create the
# missing databases. A local server that does not answer is installed with
# apt-get when PostgreSQL is missing, and the one cluster listening on the
# URL's port is started (created when there is none); no other cluster on
# the host is touched. When it cannot succeed it says in one line which URL
# it tried and why, and exits non-zero.
set -euo pipefail

DEFAULT_TEST_URL="postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable"
DEFAULT_EXAMPLE_URL="postgres://postgres:dbos@localhost:5432/dbos_agent_example?sslmode=disable"

if [ "$#" -eq 0 ]; then
  set -- "${DBOS_TEST_DATABASE_URL:-$DEFAULT_TEST_URL}" "${DATABASE_URL:-$DEFAULT_EXAMPLE_URL}"
fi

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi
}

# redact URL: the URL with its password replaced, for messages.
redact() {
  printf '%s' "$1" | sed -E 's#^([a-z]+://[^:/@]*):[^@]*@#\1:***@#'
}

fail() {
  echo "ensure-postgres: $(redact "$1"): $2" >&2
  exit 1
}

# parse URL: sets U_USER U_PASSWORD U_HOST U_PORT U_DB U_QUERY.
parse() {
  local re='^postgres(ql)?://(([^:@/]*)(:([^@/]*))?@)?([^:/?]*)(:([0-9]+))?(/([^?]*))?(\?(.*))?$'
  if ! [[ "$1" =~ $re ]]; then
    fail "$1" "not a postgres:// URL"
  fi
  U_USER="${BASH_REMATCH[3]:-postgres}"
  U_PASSWORD="${BASH_REMATCH[5]:-}"
  U_HOST="${BASH_REMATCH[6]:-localhost}"
  U_PORT="${BASH_REMATCH[8]:-5432}"
  U_DB="${BASH_REMATCH[10]:-$U_USER}"
  U_QUERY="${BASH_REMATCH[12]:-}"
}

# server_url: the URL of the server's maintenance database (postgres), which
# exists before any of ours does.
server_url() {
  local auth="$U_USER"
  if [ -n "$U_PASSWORD" ]; then auth="$auth:$U_PASSWORD"; fi
  printf 'postgres://%s@%s:%s/postgres%s' "$auth" "$U_HOST" "$U_PORT" "${U_QUERY:+?$U_QUERY}"
}

# probe URL: succeeds when the server answers; the error is left in PROBE_ERR.
probe() {
  if ! command -v psql >/dev/null 2>&1; then
    PROBE_ERR="psql is not installed"
    return 1
  fi
  PROBE_ERR="$(psql "$1" -Atqc 'select 1' 2>&1 >/dev/null)" && return 0
  PROBE_ERR="$(printf '%s' "$PROBE_ERR" | tr '\n' ' ' | sed -E 's/ +$//')"
  return 1
}

is_local() {
  case "$1" in localhost | 127.0.0.1 | ::1 | /*) return 0 ;; *) return 1 ;; esac
}

# cluster_on_port PORT: prints "version name status" of the cluster
# configured on PORT, if there is one.
cluster_on_port() {
  command -v pg_lsclusters >/dev/null 2>&1 || return 0
  pg_lsclusters -h 2>/dev/null | awk -v port="$1" '$3 == port { print $1, $2, $4; exit }'
}

# start_local_server URL: installs, creates or starts the one cluster on the
# URL's port, and gives the URL's role the URL's password.
start_local_server() {
  local url=$1
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(ls /usr/lib/postgresql 2>/dev/null)" ]; then
    echo "ensure-postgres: installing postgresql with apt-get" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
      fail "$url" "apt-get update failed, so PostgreSQL cannot be installed"
    # The package's own post-install creates and starts a "main" cluster.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null ||
      fail "$url" "apt-get install postgresql failed"
  fi
  local found version cluster status
  found="$(cluster_on_port "$U_PORT")"
  if [ -z "$found" ]; then
    version="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"
    cluster="dbos_agent_$U_PORT"
    echo "ensure-postgres: creating cluster $version/$cluster on port $U_PORT" >&2
    as_root pg_createcluster --port "$U_PORT" "$version" "$cluster" >/dev/null ||
      fail "$url" "no cluster listens on port $U_PORT and pg_createcluster failed"
    status=down
  else
    read -r version cluster status <<<"$found"
  fi
  if [ "$status" != "online" ]; then
    echo "ensure-postgres: starting cluster $version/$cluster (port $U_PORT)" >&2
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start ||
      fail "$url" "pg_ctlcluster could not start cluster $version/$cluster (see /var/log/postgresql)"
  fi
  local i
  for i in $(seq 1 60); do
    if as_postgres psql -p "$U_PORT" -Atqc 'select 1' >/dev/null 2>&1; then break; fi
    sleep 0.5
  done
  as_postgres psql -p "$U_PORT" -Atqc 'select 1' >/dev/null 2>&1 ||
    fail "$url" "cluster $version/$cluster started but does not accept local connections"

  # The tests connect over TCP with a password. A role that has none (a new
  # install's postgres, or a role created here) gets the URL's; a password
  # someone set is never changed.
  local role_lit role_ident has_password
  role_lit="'${U_USER//\'/\'\'}'"
  role_ident="\"${U_USER//\"/\"\"}\""
  as_postgres psql -p "$U_PORT" -qc "DO \$\$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $role_lit) THEN CREATE ROLE $role_ident LOGIN CREATEDB; END IF; END \$\$" >/dev/null
  has_password="$(as_postgres psql -p "$U_PORT" -Atqc "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = $role_lit")"
  if [ "$has_password" != "t" ] && [ -n "$U_PASSWORD" ]; then
    as_postgres psql -p "$U_PORT" -qc "ALTER ROLE $role_ident PASSWORD '${U_PASSWORD//\'/\'\'}'" >/dev/null
  fi
  # Enough connections for parallel tests and several agents.
  local current_max
  current_max="$(as_postgres psql -p "$U_PORT" -Atqc 'show max_connections')"
  if [ "$current_max" -lt 300 ]; then
    as_postgres psql -p "$U_PORT" -qc "ALTER SYSTEM SET max_connections = 300" >/dev/null
    echo "ensure-postgres: restarting cluster $version/$cluster for max_connections = 300" >&2
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" restart ||
      fail "$url" "pg_ctlcluster could not restart cluster $version/$cluster"
  fi
}

# ensure_database URL: creates the URL's database when it is missing.
ensure_database() {
  local admin=$1 db=$2 exists
  exists="$(psql "$admin" -Atqc "SELECT 1 FROM pg_database WHERE datname = '${db//\'/\'\'}'" 2>&1)" ||
    fail "$admin" "could not look up database $db: $exists"
  if [ "$exists" != "1" ]; then
    local out
    if ! out="$(psql "$admin" -qc "CREATE DATABASE \"${db//\"/\"\"}\"" 2>&1)"; then
      # Another run may have created it between the check and the create.
      case "$out" in *"already exists"*) ;; *) fail "$admin" "CREATE DATABASE $db failed: $out" ;; esac
    fi
    echo "ensure-postgres: created database $db" >&2
  fi
}

for url in "$@"; do
  parse "$url"
  admin="$(server_url)"
  if ! probe "$admin"; then
    if ! is_local "$U_HOST"; then
      fail "$url" "the server does not answer and is not local, so it is not started here: $PROBE_ERR"
    fi
    start_local_server "$url"
    reached=""
    for _ in $(seq 1 60); do
      if probe "$admin"; then reached=1; break; fi
      case "$PROBE_ERR" in *"password authentication failed"*) break ;; esac
      sleep 0.5
    done
    if [ -z "$reached" ]; then
      case "$PROBE_ERR" in
      *"password authentication failed"*)
        fail "$url" "the server is up but refuses this password (the role already has another one; put it in the URL)" ;;
      *) fail "$url" "the server does not answer: $PROBE_ERR" ;;
      esac
    fi
  fi
  ensure_database "$admin" "$U_DB"
done
