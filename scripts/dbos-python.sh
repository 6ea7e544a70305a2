#!/usr/bin/env bash
# Prints the path of a Python interpreter that has DBOS Python (from PyPI)
# installed, creating or reusing a virtualenv under build/dbos-python: 3.4.0 by
# default, the release the agent shares a database with (the SQLite schema parity
# test runs DBOS's own migrations with it), or the version given as the first
# argument (the admin server comparison runs 2.31.1, DBOS Python's last release
# with an admin server). Progress goes to stderr; stdout is the path alone.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DBOS_VERSION="${1:-3.4.0}"
VENV="$ROOT/build/dbos-python/venv"
if [ "$DBOS_VERSION" != 3.4.0 ]; then
  VENV="$ROOT/build/dbos-python/venv-$DBOS_VERSION"
fi

# A venv whose interpreter is gone (a Python upgraded or removed) is made anew.
if ! "$VENV/bin/python" -c '' >/dev/null 2>&1; then
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "${PYTHON:-python3}" -m venv "$VENV" >&2
  echo "dbos-python: created $VENV" >&2
fi
stamp="$VENV/.dbos-installed"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$DBOS_VERSION" ] ||
  ! "$VENV/bin/python" -c 'import dbos' >/dev/null 2>&1; then
  echo "dbos-python: installing dbos==$DBOS_VERSION into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "dbos==$DBOS_VERSION" >&2
  echo "$DBOS_VERSION" >"$stamp"
fi
echo "$VENV/bin/python"
