#!/usr/bin/env bash
# Install everything (every extra: textworld, the bundled LLM, Ray, ... so each is tested for real) into .venv
# and run the whole test suite on parallel workers (pytest-xdist): ENVGYM_TEST_WORKERS of them, default one
# per CPU this process may use (`nproc`; xdist's own `auto` counts physical cores, one on a 2-vCPU
# machine); 0 runs every test in one process. Tests that share a module-scoped fixture or
# the Ray session run in one worker (tests/conftest.py marks them; --dist loadgroup honours the marks).
# Extra arguments go to pytest, after ours (`-n 0` there works too).
set -euo pipefail
cd "$(dirname "$0")/.."
ENVGYM_EXTRAS="${ENVGYM_EXTRAS:-test,all}" bash scripts/setup.sh
# Byte code is cached (under __pycache__/, ignored by git) even where the environment says not to:
# otherwise every worker, and every Python subprocess a test starts, compiles envgym again and pytest
# rewrites the asserts of every test module again at each collection.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/python -m pytest -n "${ENVGYM_TEST_WORKERS:-$(nproc)}" --dist loadgroup "$@"
