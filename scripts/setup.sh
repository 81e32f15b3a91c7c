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
# Some machines configure extra local package indexes; pip warns about each missing folder there.
quiet_pip() { .venv/bin/python -m pip "$@" 2>&1 | { grep -v "^WARNING: Location '.*' is ignored" || true; }; }
quiet_pip install --quiet --upgrade pip
quiet_pip install --quiet -e ".[${EXTRAS}]"
