#!/usr/bin/env bash
# Create .venv and install the pinned requirements (dev adds test tools). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
REQS="${1:-requirements.txt}"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$REQS"
# the project itself, editable: `import triage` and the `triage` command work from any folder, no sys.path edits
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
