#!/usr/bin/env bash
# Install everything into .venv and run the main job on embedded defaults: the oracle and random
# agents over every registered single-agent environment, printing a results table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/envgym run-all "$@"
