#!/usr/bin/env bash
# Set up and run the app on its bundled sample data: http://localhost:8501
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh requirements.txt
exec .venv/bin/python -m streamlit run app.py --server.address "${ADDRESS:-127.0.0.1}" --server.port "${PORT:-8501}" "$@"
