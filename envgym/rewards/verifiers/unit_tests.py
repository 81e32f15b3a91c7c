"""Sandboxed unit tests: test code run against the candidate code in a subprocess with resource
limits, a fresh temporary directory and a nonce-protected result line."""

from __future__ import annotations

import json
import math
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envgym.errors import ConfigError
from envgym.rewards.verifiers.base import Verifier, VerifierResult

# Runs inside the sandboxed interpreter. Reads a per-run nonce from stdin before any candidate
# code runs and prefixes its one result line with it, so printing a fake result needs the nonce.
_DRIVER = r"""
import importlib.util, json, os, sys, traceback
nonce = sys.stdin.readline().strip()
sys.stdin = open(os.devnull)
out = os.fdopen(os.dup(1), "w")
work = os.getcwd()
sys.path.insert(0, work)
result = {"passed": 0, "total": 0, "failures": []}
def emit(status, **extra):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    result.update(extra)
    result["status"] = status
    out.write(nonce + " " + json.dumps(result) + "\n")
    out.flush()
    os._exit(0)
def tb():
    return "".join(traceback.format_exc(limit=-4))[-1500:]
try:
    spec = importlib.util.spec_from_file_location("solution", os.path.join(work, "solution.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["solution"] = module
    spec.loader.exec_module(module)
except BaseException:
    emit("error", detail="the candidate code raised while loading:\n" + tb())
namespace = {"__name__": "__envgym_tests__", "solution": module}
namespace.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
try:
    with open(os.path.join(work, "test_solution.py"), encoding="utf-8") as handle:
        code = compile(handle.read(), "test_solution.py", "exec")
    exec(code, namespace)
except AssertionError:
    emit("failed", detail="a module-level assertion of the tests failed:\n" + tb(), total=1)
except BaseException:
    emit("error", detail="the test code raised while loading:\n" + tb())
tests = [
    (name, fn) for name, fn in list(namespace.items())
    if name.startswith("test") and callable(fn) and getattr(fn, "__module__", None) == "__envgym_tests__"
]
passed = 0
for name, fn in tests:
    try:
        fn()
    except BaseException as err:
        result["failures"].append({"test": name, "error": "".join(traceback.format_exception_only(type(err), err))[-500:]})
    else:
        passed += 1
total = len(tests) or 1
if not tests:
    passed = 1
emit("passed" if passed == total else "failed", passed=passed, total=total)
"""


def _limits(cpu_s: int, memory_bytes: int | None, file_bytes: int, processes: int | None) -> Callable[[], None]:
    """The ``preexec_fn`` that applies resource limits in the child (before exec)."""
    import resource

    wanted: list[tuple[int, int]] = [
        (resource.RLIMIT_CPU, cpu_s),
        (resource.RLIMIT_FSIZE, file_bytes),
        (resource.RLIMIT_CORE, 0),
    ]
    if memory_bytes is not None and sys.platform.startswith("linux"):
        wanted.append((resource.RLIMIT_AS, memory_bytes))
    if processes is not None and hasattr(resource, "RLIMIT_NPROC"):
        wanted.append((resource.RLIMIT_NPROC, processes))
    plan: list[tuple[int, int, int]] = []
    for which, value in wanted:
        _, hard = resource.getrlimit(which)
        limit = value if hard == resource.RLIM_INFINITY else min(value, hard)
        # CPU: the hard limit one second later turns SIGXCPU into SIGKILL if the soft one is ignored.
        plan.append(
            (which, limit, limit + 1 if which == resource.RLIMIT_CPU and hard == resource.RLIM_INFINITY else limit)
        )

    def apply() -> None:
        for which, soft, hard in plan:
            resource.setrlimit(which, (soft, hard))

    return apply


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class UnitTests(Verifier):
    """Run test code against candidate code in a subprocess sandbox.

    The candidate is written to ``solution.py`` and the tests to ``test_solution.py`` in a fresh
    temporary directory; a driver imports the candidate as the module ``solution`` (its public
    names are also visible to the tests, HumanEval style), runs the tests' module-level code, then
    calls every ``test*`` function the tests define. Score: the fraction of test functions that
    passed (1 of 1 when there are none and the module-level code passed).

    Sandbox (POSIX): ``sys.executable -I`` (isolated mode: no ``PYTHON*`` variables, no user site,
    script directory not on ``sys.path``), working directory and ``HOME``/``TMPDIR`` in the temp
    directory, a minimal environment, its own session (the whole process group is killed with
    SIGKILL at the wall-clock ``timeout`` and after every run), and ``setrlimit`` in the child:
    CPU seconds (``ceil(timeout) + 1``), address space (``memory_mb``, Linux), file size (output
    and any file written: ``max_output_bytes``), no core dumps, and processes (``max_processes``).

    What it does **not** do, honestly: it is not a security boundary. ``RLIMIT_NPROC`` counts
    every process of the user and is not enforced for root, so when running as root a fork storm
    is stopped only by the process-group kill at the timeout (and a process that leaves the group
    with ``setsid`` survives until its CPU limit); files can be written anywhere the user may
    write, and the network is reachable. The per-run nonce that authenticates the result line can
    be found by candidate code that inspects the driver's memory. For untrusted code use the SWE
    sandbox (own network namespace) or a container.

    Args:
        tests: the test code (or pass it as ``reference`` to :meth:`verify`).
        timeout: wall-clock limit in seconds.
        memory_mb: address-space limit in MiB (``None``: no limit).
        max_output_bytes: limit on the output and on every file written.
        max_processes: ``RLIMIT_NPROC`` (``None``: unchanged).
        python: interpreter to run (default ``sys.executable``).
        excerpt_chars: length of the output excerpt kept in the result.
    """

    def __init__(
        self,
        tests: str | None = None,
        *,
        timeout: float = 10.0,
        memory_mb: int | None = 512,
        max_output_bytes: int = 1_000_000,
        max_processes: int | None = 64,
        python: str | None = None,
        excerpt_chars: int = 2000,
    ) -> None:
        super().__init__(tests)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
            raise ConfigError(f"UnitTests timeout must be a number of seconds in (0, 3600], got {timeout!r}.")
        if memory_mb is not None and (not isinstance(memory_mb, int) or memory_mb < 32):
            raise ConfigError(f"UnitTests memory_mb must be an integer >= 32 or None, got {memory_mb!r}.")
        if not isinstance(max_output_bytes, int) or max_output_bytes < 1024:
            raise ConfigError(f"UnitTests max_output_bytes must be an integer >= 1024, got {max_output_bytes!r}.")
        if max_processes is not None and (not isinstance(max_processes, int) or max_processes < 1):
            raise ConfigError(f"UnitTests max_processes must be a positive integer or None, got {max_processes!r}.")
        if os.name != "posix":
            raise ConfigError("UnitTests needs a POSIX system (process groups and resource limits).")
        self.timeout = float(timeout)
        self.memory_mb = memory_mb
        self.max_output_bytes = max_output_bytes
        self.max_processes = max_processes
        self.python = python or sys.executable
        self.excerpt_chars = int(excerpt_chars)

    def _verify(self, candidate: str, reference: Any) -> VerifierResult:
        if not isinstance(reference, str):
            raise ConfigError(f"UnitTests: the tests must be Python source text, got {type(reference).__name__}.")
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="envgym-verify-", ignore_cleanup_errors=True) as tmp:
            work = Path(tmp)
            (work / "solution.py").write_text(candidate, encoding="utf-8", errors="replace")
            (work / "test_solution.py").write_text(reference, encoding="utf-8")
            log = work / "output.log"
            nonce = secrets.token_hex(16)
            env = {"PATH": os.defpath, "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
            preexec = _limits(
                math.ceil(self.timeout) + 1,
                None if self.memory_mb is None else self.memory_mb * 1024 * 1024,
                self.max_output_bytes,
                self.max_processes,
            )
            timed_out = False
            with open(log, "wb") as out:
                try:
                    proc = subprocess.Popen(
                        [self.python, "-I", "-c", _DRIVER],
                        cwd=tmp,
                        stdin=subprocess.PIPE,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                        preexec_fn=preexec,  # noqa: PLW1509 - resource limits must be set in the child
                        close_fds=True,
                    )
                except (OSError, subprocess.SubprocessError) as err:
                    return VerifierResult(
                        "error",
                        0.0,
                        f"could not start the sandbox: {err}",
                        infrastructure=True,
                        duration_s=time.perf_counter() - started,
                    )
                try:
                    assert proc.stdin is not None
                    proc.stdin.write(nonce.encode() + b"\n")
                    proc.stdin.close()
                except (BrokenPipeError, OSError):
                    pass
                try:
                    proc.wait(timeout=self.timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:
                    _kill_group(proc.pid)
                    proc.wait()
            duration = time.perf_counter() - started
            raw = log.read_bytes()
        text = raw.decode("utf-8", errors="replace")
        report: dict[str, Any] | None = None
        shown: list[str] = []
        for line in text.splitlines():
            if line.startswith(nonce + " "):
                try:
                    report = json.loads(line[len(nonce) + 1 :])
                except json.JSONDecodeError:
                    report = None
            else:
                shown.append(line)
        excerpt = "\n".join(shown)[-self.excerpt_chars :]
        if timed_out:
            return VerifierResult(
                "timeout", 0.0, f"the tests did not finish within {self.timeout:g} s.", excerpt, duration_s=duration
            )
        if report is None:
            code = proc.returncode
            if len(raw) >= self.max_output_bytes:
                why = f"the output exceeded the {self.max_output_bytes}-byte limit"
            elif code is not None and code < 0:
                why = f"the process was killed by signal {signal.Signals(-code).name}"
            else:
                why = f"the process exited with code {code} without reporting results"
            return VerifierResult("error", 0.0, why + ".", excerpt, duration_s=duration)
        passed, total = int(report.get("passed", 0)), int(report.get("total", 0))
        status = report.get("status", "error")
        detail = str(report.get("detail", ""))
        failures = report.get("failures") or []
        if not detail and failures:
            detail = "; ".join(f"{f['test']}: {f['error'].strip()}" for f in failures[:3])
        if not detail:
            detail = f"{passed} of {total} tests passed."
        score = passed / total if total else 0.0
        return VerifierResult(
            status if status in ("passed", "failed", "error") else "error",
            score if status != "error" else 0.0,
            detail,
            excerpt,
            tests_passed=passed,
            tests_total=total,
            duration_s=duration,
        )
