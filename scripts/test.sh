#!/usr/bin/env bash
# Set up everything the tests need (Debian chromium and prometheus, pinned dev requirements), lint, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
# CJK glyphs so 中文 renders in browser-test screenshots
[ -d /usr/share/fonts/opentype/noto ] || need+=(fonts-noto-cjk)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The Debian prometheus package may start a system service on :9090. It is left alone: tests start their
# own Prometheus on free ports and stop only the processes they started, by PID (tests/prom_harness.py).

bash scripts/setup.sh requirements-dev.txt
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
