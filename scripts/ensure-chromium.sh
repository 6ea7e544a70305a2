#!/usr/bin/env bash
# Installs Debian's chromium when it is missing: the dashboard's e2e test
# (e2e/ui_test.go) drives it headless through chromedp. Prints its path.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  $sudo apt-get install -y -qq chromium >&2
fi
command -v chromium
