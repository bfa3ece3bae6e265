#!/usr/bin/env bash
# Start the Alertmanager receiver: bash scripts/webhook.sh [--listen 127.0.0.1:9095] [--config FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m triage webhook "$@"
