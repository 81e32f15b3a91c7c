"""Sandboxes for untrusted code: a fresh workspace per episode, commands with no network, their own
PID space and resource limits, and SWE-bench grading decided from pytest's JUnit XML.

Two backends, one interface (:class:`Sandbox`)::

    from envgym.sandbox import Limits, sandbox_class

    with sandbox_class("bwrap")(tree, overlay={"pkg/mod.py": mutated}, limits=Limits(timeout=10)) as box:
        result = box.run("python3 -m pytest -x -q")            # CommandResult: output, exit_code, note...
        run = box.run_pytest(["tests/test_mod.py::test_a"], restore=original_tests)
        resolved = run.report_ok and all(run.outcomes.get(t) == "passed" for t in ...)

* :class:`BwrapSandbox` (``"bwrap"``, the default): Debian's bubblewrap; a host temp folder per
  episode (a tmpfs with a size and inode quota as root); each command is its own bwrap under a
  seccomp filter, in the sandbox's cgroup, over a minimal Debian root file system, so nothing
  outlives a command.
* :class:`DockerSandbox` (``"docker"``): one container per episode (``--network none``, memory and
  PID limits, ``--init``, a non-root user, removed at close and reaped after a crash) from the
  images that :mod:`envgym.environments.swe.images` builds locally; needs
  ``pip install 'envgym[swe]'`` and a running engine (``scripts/setup.sh`` starts ``dockerd``).

Grading (:meth:`Sandbox.run_pytest`): with every agent process killed, the workspace is copied
without following links and without the files Python or pytest would run implicitly
(:func:`envgym.sandbox._prepare.grading_copy`), the original test files are written over the
copy, and pytest runs over it in a fresh ``python3 -I`` process that imports pytest before the
workspace joins ``sys.path``, with plugin autoload off; outcomes come from its JUnit XML, written
to a folder no agent command could see. Limit: the code under test runs inside that pytest
process (as in SWE-bench); a canary test that must fail and a check that none of pytest's own
functions was replaced catch the generic in-memory patches (:attr:`PytestRun.untrusted`), not
one written against this grader in particular.
"""

from __future__ import annotations

from envgym.errors import InvalidKwargsError, suggest
from envgym.sandbox.base import CommandResult, Limits, PytestRun, Sandbox
from envgym.sandbox.bwrap import DEFAULT_ROOTFS, ROOTFS_ENV, BwrapSandbox, sandbox_rootfs
from envgym.sandbox.dockerbox import DockerSandbox

__all__ = [
    "DEFAULT_ROOTFS",
    "KINDS",
    "ROOTFS_ENV",
    "BwrapSandbox",
    "CommandResult",
    "DockerSandbox",
    "Limits",
    "PytestRun",
    "Sandbox",
    "default_kind",
    "sandbox_class",
    "sandbox_rootfs",
]

#: Backends by name.
KINDS: dict[str, type[Sandbox]] = {"bwrap": BwrapSandbox, "docker": DockerSandbox}


def sandbox_class(kind: str) -> type[Sandbox]:
    """The backend named ``kind`` (``"bwrap"`` or ``"docker"``)."""
    if not isinstance(kind, str) or kind not in KINDS:
        raise InvalidKwargsError(
            f"sandbox kind must be one of {', '.join(map(repr, KINDS))}, got {kind!r}.{suggest(str(kind), KINDS)}"
        )
    return KINDS[kind]


def default_kind() -> str:
    """The embedded default backend: ``"bwrap"``."""
    return "bwrap"
