#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install envgym into it with
# the extras named in $ENVGYM_EXTRAS (default: test). Idempotent: a second run only re-syncs.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
EXTRAS="${ENVGYM_EXTRAS:-test}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
.venv/bin/python -m pip install --quiet -e ".[${EXTRAS}]"
