#!/usr/bin/env bash
# Makes sure the repository's Python virtualenv (.venv) exists and has the
# binding installed (with its test extras when the first argument is "test").
# Safe to run any number of times. Prints nothing but errors unless the venv
# is created or the binding installed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${PYTHON:-python3}"
extras="${1:-}"

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "python-venv: $PYTHON not found (Python 3.9+ is needed)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  if ! "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
    # Debian splits venv out of the interpreter.
    echo "python-venv: installing python3-venv with apt-get" >&2
    as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  echo "python-venv: created $VENV" >&2
fi

spec="$ROOT/bindings/python"
if [ "$extras" = "test" ]; then
  spec="$spec[test]"
fi
# An editable install follows the working tree, so pip runs again only when
# the package's metadata (pyproject.toml) or the extras change.
stamp="$VENV/.dbos-agent-installed"
want="$extras $(cksum <"$ROOT/bindings/python/pyproject.toml")"
have="$(cat "$stamp" 2>/dev/null || true)"
# An install with the test extras also serves a plain one.
if { [ "$have" = "$want" ] || [ "$have" = "test $(cksum <"$ROOT/bindings/python/pyproject.toml")" ]; } &&
  "$VENV/bin/python" -c 'import dbos_agent' >/dev/null 2>&1; then
  exit 0
fi
echo "python-venv: installing $spec into $VENV" >&2
log="$(mktemp)"
if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec" >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
echo "$want" >"$stamp"
