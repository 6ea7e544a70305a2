#!/usr/bin/env bash
# Makes sure a Node package's dependencies are installed exactly as its
# package-lock.json pins them (npm ci), for bindings/node unless the first
# argument names another package directory. Safe to run any number of times:
# npm runs again only when node_modules is missing or the lock file changed
# since the last install (a stamp in node_modules, as scripts/python-venv.sh
# keeps one in the venv). Prints nothing but errors unless it installs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PKG="${1:-$ROOT/bindings/node}"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node-deps: node and npm are needed (Node.js 20 or later)" >&2
  exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "node-deps: Node.js $(node --version) is too old (20 or later is needed)" >&2
  exit 1
fi

stamp="$PKG/node_modules/.dbos-agent-installed"
want="$(cksum <"$PKG/package-lock.json") node $major"
if [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ]; then
  exit 0
fi
echo "node-deps: npm ci in $PKG" >&2
log="$(mktemp)"
# npm 11 skips dependencies' install scripts unless allowed; none is needed
# (koffi ships prebuilt binaries, which bindings/node loads as they are).
if ! (cd "$PKG" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
if [ -d "$PKG/node_modules/koffi" ] && ! (cd "$PKG" && node -e 'require("koffi")') >/dev/null 2>&1; then
  echo "node-deps: koffi, installed without its install script, does not load its prebuilt binary here:" >&2
  (cd "$PKG" && node -e 'require("koffi")') >&2 || true
  exit 1
fi
echo "$want" >"$stamp"
