#!/usr/bin/env bash
# Install everything (the textworld extra included, so its bridge is tested for real) into .venv
# and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ENVGYM_EXTRAS="${ENVGYM_EXTRAS:-test,textworld}" bash scripts/setup.sh
.venv/bin/python -m pytest "$@"
