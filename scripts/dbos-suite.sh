#!/usr/bin/env bash
# The drop-in measure: DBOS Python 3.4's own test suite, with only its imports of DBOS's
# public names pointed at dbos_agent, run against the real agent built from this tree.
# Prints (and writes to build/dbos-suite/report/) passed / failed / errored / skipped per
# file and in total, and the failures grouped by cause. A measure, not part of `make test`.
#
#   scripts/dbos-suite.sh                      every file, one pytest run per file
#   DBOS_SUITE_FILES='test_queue.py test_async.py' scripts/dbos-suite.sh
#   DBOS_SUITE_ARGS='-k queue' scripts/dbos-suite.sh   (extra pytest arguments, every file;
#   arguments of the script itself are added after them)
#
# DBOS's tests are fetched from PyPI (the dbos 3.4.0 sdist ships them) into a cache under
# build/, never into the repository. Environment: PGPASSWORD (default dbos; DBOS's conftest
# uses the databases dbostestpy and dbostestpy_dbos_sys on localhost:5432; DBOS_SUITE_DATABASE=name
# renames them in the copy, for a second run on one host),
# DBOS_SUITE_TIMEOUT (per test, default 60 s), DBOS_SUITE_FILE_TIMEOUT (per file, default 1800 s),
# DBOS_SUITE_LABEL (names the run in the report), DBOS_SUITE_AGENT_FLAGS (extra `serve` flags).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
DBOS_VERSION=3.4.0
OUT="$ROOT/build/dbos-suite"
VENV="$OUT/venv"
CACHE="$OUT/cache"
WORK="$OUT/work"
RESULTS="$OUT/results"
REPORT="$OUT/report"
HARNESS="$ROOT/scripts/dbos-suite"
export PGPASSWORD="${PGPASSWORD:-dbos}"

# What DBOS's tests import (its dev dependency group, less the linters, type stubs, build
# tools and the Kafka client: the Kafka tests need a broker and are counted apart).
REQUIREMENTS=(
  "dbos[otel]==$DBOS_VERSION" "pytest>=8.3.3" "pytest-timeout>=2.3.1" "pytest-asyncio>=0.25.0"
  "pytest-mock>=3.14.0" "inline-snapshot>=0.28.0" "requests>=2.32.3" "pydantic>=2.0"
  "aiosqlite>=0.20.0" "psycopg2-binary>=2.9.11" "fastapi>=0.121.0" "pyyaml>=6.0.2"
)

python="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$python" -m venv "$VENV"
fi
stamp="$VENV/.dbos-suite-installed"
want="${REQUIREMENTS[*]} $(cksum <bindings/python/pyproject.toml)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "dbos-suite: installing DBOS $DBOS_VERSION, its tests' dependencies and the binding into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}" -e bindings/python
  echo "$want" >"$stamp"
fi

sdist="$CACHE/dbos-$DBOS_VERSION.tar.gz"
if [ ! -f "$sdist" ]; then
  echo "dbos-suite: fetching the dbos $DBOS_VERSION sdist (its tests) from PyPI" >&2
  "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    "dbos==$DBOS_VERSION" -d "$CACHE"
fi

# A fresh copy of the tests each run, rewritten: only their imports change.
rm -rf "$WORK"
mkdir -p "$WORK"
tar -xzf "$sdist" -C "$WORK" --strip-components=1 "dbos-$DBOS_VERSION/tests"
# The harness's own pytest settings (DBOS's live in its pyproject.toml, which is not copied:
# they only turn on live logging and output capture off).
printf '[pytest]\nasyncio_default_fixture_loop_scope = function\njunit_family = xunit1\n' >"$WORK/pytest.ini"
"$VENV/bin/python" "$HARNESS/rewrite_imports.py" "$WORK/tests"
# DBOS's tests name their databases (dbostestpy, dbostestpy_dbos_sys) in their source; a second
# measure on the same host renames them in the copy, so two runs never drop each other's.
database="${DBOS_SUITE_DATABASE:-dbostestpy}"
if [ "$database" != dbostestpy ]; then
  grep -rlZ dbostestpy "$WORK/tests" | xargs -0 sed -i "s/dbostestpy/$database/g"
fi

bash scripts/ensure-postgres.sh "postgres://postgres:$PGPASSWORD@localhost:5432/$database?sslmode=disable" >/dev/null
go build -o bin/dbos-agent ./cmd/dbos-agent

if [ -n "${DBOS_SUITE_FILES:-}" ]; then
  read -r -a files <<<"$DBOS_SUITE_FILES"
else
  files=()
  for f in "$WORK"/tests/test_*.py; do files+=("$(basename "$f")"); done
fi
# DBOS_SUITE_ARGS is split as the shell would split it (so -k 'a or b' stays one argument),
# then the script's own arguments follow.
eval "extra=(${DBOS_SUITE_ARGS:-})"
extra+=("$@")

rm -rf "$RESULTS"
mkdir -p "$RESULTS/logs"
export DBOS_SUITE_AGENT="$ROOT/bin/dbos-agent"
# The agent a config naming no system database gets serves the suite's (DBOS's conftest's).
export DBOS_SUITE_DEFAULT_SYSTEM_DATABASE_URL="postgresql://postgres:${PGPASSWORD:-dbos}@localhost:5432/${database}_dbos_sys"
export PYTHONPATH="$HARNESS:$WORK${PYTHONPATH:+:$PYTHONPATH}"
start=$SECONDS
for f in "${files[@]}"; do
  name="${f%.py}"
  t0=$SECONDS
  rc=0
  (cd "$WORK" && DBOS_SUITE_LOG_DIR="$RESULTS/logs/$name" exec timeout -k 30 "${DBOS_SUITE_FILE_TIMEOUT:-1800}" \
    "$VENV/bin/python" -m pytest "tests/$f" -p dbos_suite_plugin -p no:cacheprovider \
    --rootdir="$WORK" -c "$WORK/pytest.ini" --timeout="${DBOS_SUITE_TIMEOUT:-60}" \
    --junitxml="$RESULTS/$name.xml" -q -rN --no-header -p no:warnings ${extra[@]+"${extra[@]}"} \
    >"$RESULTS/logs/$name.out" 2>&1) || rc=$?
  # Agents a killed pytest left running (the plugin lists every agent it started).
  if [ -f "$RESULTS/logs/$name/agent.pids" ]; then
    while read -r pid; do
      if [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" = dbos-agent ]; then kill -9 "$pid" 2>/dev/null || true; fi
    done <"$RESULTS/logs/$name/agent.pids"
  fi
  if [ ! -s "$RESULTS/$name.xml" ]; then
    # No report (killed by the file timeout, or pytest crashed): one error stands for the file.
    printf '<testsuites><testsuite><testcase file="tests/%s" classname="tests.%s" name="(file)"><error message="the run of %s ended without a report (exit %s)"/></testcase></testsuite></testsuites>\n' \
      "$f" "$name" "$f" "$rc" >"$RESULTS/$name.xml"
  fi
  summary="$(grep -E '^(=+ )?[0-9]+ (passed|failed|errors?|skipped|deselected)|no tests ran' "$RESULTS/logs/$name.out" | tail -n 1 || true)"
  echo "dbos-suite: $f: ${summary:-exit $rc} ($((SECONDS - t0)) s)" >&2
done
echo "dbos-suite: ${#files[@]} files in $((SECONDS - start)) s" >&2

label="${DBOS_SUITE_LABEL:-$(git rev-parse --abbrev-ref HEAD) $(git rev-parse --short HEAD)}"
"$VENV/bin/python" "$HARNESS/summarize.py" "$REPORT" "$label, ${#files[@]} files, $((SECONDS - start)) s${DBOS_SUITE_ARGS:+, args: $DBOS_SUITE_ARGS}" "$RESULTS"/*.xml
