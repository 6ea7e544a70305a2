#!/usr/bin/env bash
# Prints the path of systemd-analyze, which checks the systemd unit
# (packaging/systemd) offline, installing Debian's systemd package with
# apt-get when it is missing (a container image often has no systemd). No
# systemd needs to be running: `systemd-analyze verify` only loads the unit.
set -euo pipefail
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd-analyze.sh: installing systemd with apt-get (for systemd-analyze verify)" >&2
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >&2
fi
command -v systemd-analyze
