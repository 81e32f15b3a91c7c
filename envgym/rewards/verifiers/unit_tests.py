"""Sandboxed unit tests: test code run against the candidate code in an :mod:`envgym.sandbox`
sandbox (bubblewrap by default: no network, its own PID space, read-only system) or, as the
documented fallback, in a plain subprocess with resource limits; a fresh temporary directory and a
nonce-protected result line either way."""

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

from envgym.errors import ConfigError, MissingDependencyError, NotAvailableError, check_choice
from envgym.rewards.verifiers.base import Verifier, VerifierResult
from envgym.sandbox import Limits, Sandbox, sandbox_class

#: Where :class:`UnitTests` runs the code (``"auto"``: bwrap when installed, else subprocess).
SANDBOXES = ("auto", "bwrap", "docker", "subprocess")

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
    """Run test code against candidate code in a sandbox.

    The candidate is written to ``solution.py`` and the tests to ``test_solution.py`` in a fresh
    temporary directory; a driver imports the candidate as the module ``solution`` (its public
    names are also visible to the tests, HumanEval style), runs the tests' module-level code, then
    calls every ``test*`` function the tests define. Score: the fraction of test functions that
    passed (1 of 1 when there are none and the module-level code passed).

    Where the code runs (``sandbox``):

    * ``"bwrap"``: an :class:`envgym.sandbox.BwrapSandbox` (Debian's bubblewrap): an empty network
      namespace (no network, loopback included), its own PID namespace (every process dies with
      the run), a read-only system with none of the host's private folders, writes confined to
      its own workspace and ``/tmp``, and ``ulimit`` limits: CPU seconds (``ceil(timeout) + 1``),
      address space (``memory_mb``), processes (``max_processes``, enforced even when envgym runs
      as root: bwrap then runs as ``nobody``), file size (``max_output_bytes``, at least 1 MiB);
      output beyond ``max_output_bytes`` stops the run. The interpreter is the system's
      ``/usr/bin/python3`` (the ``python`` argument is ignored).
    * ``"docker"``: the same in an :class:`envgym.sandbox.DockerSandbox` container (the SWE base
      image; ``pip install 'envgym[swe]'`` and a running engine).
    * ``"subprocess"``, the documented fallback: ``python -I`` (isolated mode) in its own session
      with ``setrlimit`` in the child (CPU, address space, file size, no core files, processes),
      working directory and ``HOME``/``TMPDIR`` in the temp directory, a minimal environment and
      the whole process group killed at the timeout. It is **not a security boundary**:
      ``RLIMIT_NPROC`` counts every process of the user and is not enforced for root, a process
      that leaves the group with ``setsid`` survives until its CPU limit, files can be written
      anywhere the user may write, and the network is reachable.
    * ``"auto"`` (default): ``"bwrap"`` when bubblewrap is installed, else ``"subprocess"``.

    In every mode the per-run nonce that authenticates the result line can be found by candidate
    code that inspects the driver's memory: the sandbox contains the code, it does not hide the
    driver from it.

    Args:
        tests: the test code (or pass it as ``reference`` to :meth:`verify`).
        timeout: wall-clock limit in seconds.
        memory_mb: address-space limit in MiB (``None``: no limit).
        max_output_bytes: limit on the output and on every file written.
        max_processes: ``RLIMIT_NPROC`` (``None``: unchanged in subprocess mode, 4096 in a sandbox).
        python: interpreter to run in subprocess mode (default ``sys.executable``).
        excerpt_chars: length of the output excerpt kept in the result.
        sandbox: ``"auto"``, ``"bwrap"``, ``"docker"`` or ``"subprocess"`` (see above).
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
        sandbox: str = "auto",
    ) -> None:
        super().__init__(tests)
        check_choice("UnitTests sandbox", sandbox, SANDBOXES)
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
        if sandbox == "auto":
            sandbox = "bwrap" if sandbox_class("bwrap").unavailable_reason() is None else "subprocess"
        elif sandbox != "subprocess":
            reason = sandbox_class(sandbox).unavailable_reason()
            if reason is not None:
                if sandbox == "bwrap":
                    err = MissingDependencyError("bubblewrap", "swe", "UnitTests(sandbox='bwrap')")
                    err.args = (f"UnitTests(sandbox='bwrap') cannot run: {reason}",)
                    err.msg = err.args[0]
                    raise err
                raise NotAvailableError(f"UnitTests(sandbox={sandbox!r}) cannot run: {reason}")
        #: The mode in use: ``"bwrap"``, ``"docker"`` or ``"subprocess"`` (``"auto"`` resolved).
        self.sandbox = sandbox

    def _verify(self, candidate: str, reference: Any) -> VerifierResult:
        if not isinstance(reference, str):
            raise ConfigError(f"UnitTests: the tests must be Python source text, got {type(reference).__name__}.")
        if self.sandbox != "subprocess":
            return self._verify_sandboxed(candidate, reference)
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
        why = None
        if len(raw) >= self.max_output_bytes:
            why = f"the output exceeded the {self.max_output_bytes}-byte limit"
        return self._result(text, nonce, timed_out, proc.returncode, why, duration)

    def _verify_sandboxed(self, candidate: str, reference: str) -> VerifierResult:
        """Run the driver in a fresh :mod:`envgym.sandbox` sandbox (bwrap or docker)."""
        started = time.perf_counter()
        nonce = secrets.token_hex(16)
        # The nonce lives in the driver file, which deletes itself before any candidate code runs.
        driver = f"NONCE = {nonce!r}\n" + _DRIVER.replace(
            "nonce = sys.stdin.readline().strip()", "nonce = NONCE\nos.unlink(os.path.abspath(__file__))"
        )
        limits = Limits(
            timeout=self.timeout,
            cpu_seconds=math.ceil(self.timeout) + 1,
            memory_mb=self.memory_mb if self.memory_mb is not None else 1 << 20,
            processes=max(4, self.max_processes) if self.max_processes is not None else 4096,
            file_size_mb=max(1, math.ceil(self.max_output_bytes / (1 << 20))),
            max_output_bytes=self.max_output_bytes + 1024,
        )
        with tempfile.TemporaryDirectory(prefix="envgym-verify-", ignore_cleanup_errors=True) as tmp:
            work = Path(tmp)
            (work / "solution.py").write_text(candidate, encoding="utf-8", errors="replace")
            (work / "test_solution.py").write_text(reference, encoding="utf-8")
            (work / "_driver.py").write_text(driver, encoding="utf-8")
            box: Sandbox | None = None
            try:
                box = sandbox_class(self.sandbox)(work, limits=limits)
                # As in subprocess mode the output goes to a file whose size RLIMIT_FSIZE caps (the
                # writer gets SIGXFSZ): a pipe would wait for any background process holding it.
                blocks = math.ceil(self.max_output_bytes / 1024)
                result = box.run(
                    f"ulimit -f {blocks}; /usr/bin/python3 -I _driver.py > /tmp/.envgym-output 2>&1; "
                    f"head -c {self.max_output_bytes} /tmp/.envgym-output"
                )
            except (OSError, NotAvailableError) as err:
                return VerifierResult(
                    "error",
                    0.0,
                    f"could not start the {self.sandbox} sandbox: {err}",
                    infrastructure=True,
                    duration_s=time.perf_counter() - started,
                )
            finally:
                if box is not None:
                    box.close()
        why = None
        if result.output_bytes >= self.max_output_bytes:
            why = f"the output exceeded the {self.max_output_bytes}-byte limit"
        elif result.note and not result.timed_out:
            why = f"the run stopped: {result.note}"
        return self._result(
            result.output, nonce, result.timed_out, result.exit_code, why, time.perf_counter() - started
        )

    def _result(
        self, text: str, nonce: str, timed_out: bool, code: int | None, why: str | None, duration: float
    ) -> VerifierResult:
        """The verdict from the driver's output: only the nonce-prefixed line is trusted."""
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
            if why is None and code is not None and code < 0:
                why = f"the process was killed by signal {signal.Signals(-code).name}"
            elif why is None:
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
