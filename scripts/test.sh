#!/usr/bin/env bash
# Set up everything the tests need (Debian chromium, prometheus, victoria-metrics, pinned dev requirements), lint,
# run every test on both cores. `--fast` runs the unit and AppTest lane only (no browser, Prometheus or PostgreSQL):
#   bash scripts/test.sh --fast [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
# Both lanes run on two xdist workers; every server a test starts listens on its own free port. The simulated-fleet
# tests form one group, so one worker builds the fleet (tests/conftest.py, --dist loadgroup); each worker shares one
# Chromium among the browser tests it takes.
lane=(-n 2 --dist loadgroup)
if [ "${1:-}" = "--fast" ]; then
  shift
  lane+=(-m "not browser and not prometheus and not postgres")
fi

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
# CJK glyphs so 中文 renders in browser-test screenshots
[ -d /usr/share/fonts/opentype/noto ] || need+=(fonts-noto-cjk)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# VictoriaMetrics single-node, vmalert and vmctl: the second PromQL backend and the rule replay (issue 13)
for tool in victoria-metrics vmalert vmctl; do command -v $tool >/dev/null 2>&1 || need+=(victoria-metrics); done
command -v script >/dev/null 2>&1 || need+=(bsdutils)  # vmctl wants a terminal: tests run it under script -qec
command -v curl >/dev/null 2>&1 || need+=(curl)  # the OpenAI simulator is checked with a real curl stream
command -v gcc >/dev/null 2>&1 || need+=(gcc)  # builds the server-log line scanner (setup.py) at pip install -e
# a real Alertmanager in front of the webhook receiver's end-to-end and storm tests (issue 27)
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
# PostgreSQL 15 for the shared experiment log's tests (issue 29): tests run initdb/pg_ctl themselves, as postgres
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql-15)
command -v runuser >/dev/null 2>&1 || need+=(util-linux)  # initdb/pg_ctl run as postgres when CI is root
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The Debian prometheus package may start a system service on :9090. It is left alone: tests start their
# own Prometheus on free ports and stop only the processes they started, by PID (tests/prom_harness.py).

bash scripts/setup.sh requirements-dev.txt
# Bytecode is cached (in __pycache__, ignored by git and docker): with PYTHONDONTWRITEBYTECODE=1 every pytest
# worker rewrote and compiled the ~220 test modules and the project's modules again (8-12 s of CPU each, 3.5 s
# from the cache), and every `python -m triage` or Streamlit server a test starts compiled the project again.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/ruff check .
.venv/bin/mypy  # configured in pyproject.toml: triage/, components/, pages/, app.py at zero errors
.venv/bin/lint-imports --no-logo  # the import contracts of pyproject.toml: triage/ only downward, the UI via service
exec .venv/bin/python -m pytest "${lane[@]}" "$@"
