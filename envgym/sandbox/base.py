"""What every sandbox shares: the records (:class:`Limits`, :class:`CommandResult`,
:class:`PytestRun`), the :class:`Sandbox` interface, bounded output capture, and the JUnit XML
reading that grading decides from."""

from __future__ import annotations

import collections
import os
import re
import secrets
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import ClassVar, Self
from xml.etree import ElementTree

from envgym.errors import ConfigError

__all__ = [
    "CommandResult",
    "Limits",
    "PytestRun",
    "Sandbox",
    "check_relpath",
    "parse_junit",
]

#: Commands longer than this are refused (the kernel caps one argument at 128 KiB).
MAX_COMMAND_BYTES = 100_000
#: Read size from a command's output pipe.
READ_CHUNK = 1 << 20
#: The environment every command starts from (plus the ``env`` a sandbox was made with).
BASE_ENV: Mapping[str, str] = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "USER": "agent",
    "LOGNAME": "agent",
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
}
#: Outcomes a test can have in :attr:`PytestRun.outcomes`, worst last.
OUTCOMES = ("passed", "skipped", "failed", "error")


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to every command a sandbox runs."""

    timeout: float = 30.0
    """Wall-clock seconds per command; the whole process tree is killed at this time."""
    cpu_seconds: int = 60
    """CPU seconds per process (``RLIMIT_CPU``: SIGXCPU, then SIGKILL one second later)."""
    memory_mb: int = 1024
    """Memory in MiB for the whole sandbox: every process together, ``/dev/shm`` included (bwrap:
    the sandbox's cgroup, plus ``RLIMIT_AS`` per process; docker: the container's ``--memory``).
    The bwrap workspace lives in RAM (a tmpfs of ``disk_mb``), so its cgroup holds
    ``memory_mb + disk_mb``: files never take the processes' share."""
    processes: int = 256
    """Processes (bwrap: ``RLIMIT_NPROC`` in the command's own user namespace; docker: ``--pids-limit``)."""
    file_size_mb: int = 64
    """Largest file a command may write, MiB (``RLIMIT_FSIZE``)."""
    disk_mb: int = 1024
    """Bytes the workspace and ``/tmp`` may hold together, MiB (bwrap as root: the size of the
    sandbox's tmpfs; a write past it fails with "No space left on device")."""
    inodes: int = 100_000
    """Files and folders the workspace and ``/tmp`` may hold together (bwrap as root)."""
    max_output_bytes: int = 1 << 20
    """Bytes of output kept (head and tail); the rest is read, counted and dropped, never buffered."""

    def __post_init__(self) -> None:
        checks = (
            ("timeout", self.timeout, 0.01, 86_400.0),
            ("cpu_seconds", self.cpu_seconds, 1, 86_400),
            ("memory_mb", self.memory_mb, 16, 1 << 20),
            ("processes", self.processes, 4, 1 << 20),
            ("file_size_mb", self.file_size_mb, 1, 1 << 20),
            ("disk_mb", self.disk_mb, 1, 1 << 20),
            ("inodes", self.inodes, 64, 1 << 30),
            ("max_output_bytes", self.max_output_bytes, 256, 1 << 34),
        )
        for name, value, low, high in checks:
            integral = name != "timeout"
            ok = not isinstance(value, bool) and isinstance(value, int if integral else (int, float))
            if not ok or not low <= value <= high:
                kind = "an integer" if integral else "a number"
                raise ConfigError(f"Limits.{name} must be {kind} in [{low}, {high}], got {value!r}.")


@dataclass(frozen=True)
class CommandResult:
    """What one command did. ``output`` is stdout and stderr interleaved."""

    output: str
    exit_code: int | None
    """The command's exit status (128 + N when signal N ended it); None when it was killed or not run."""
    timed_out: bool
    output_bytes: int
    """Every byte the command wrote, kept or not."""
    truncated: bool
    seconds: float
    note: str = ""
    """Why the command ended early or what limit it hit, in words; empty when nothing happened."""


@dataclass(frozen=True)
class PytestRun:
    """A grading run of pytest inside a sandbox, decided from its JUnit XML report."""

    exit_code: int | None
    outcomes: dict[str, str]
    """Test node id -> ``"passed" | "failed" | "error" | "skipped"`` (requested ids that the report
    does not mention are absent: they did not run, so they did not pass)."""
    report_ok: bool
    seconds: float
    output_tail: str
    """The end of pytest's output, for logs only: never used to decide an outcome."""
    untrusted: str = ""
    """Why the run's outcomes cannot be trusted (the grader's canary test passed, pytest's own
    code was replaced, the workspace could not be copied for grading), or empty; when set,
    :attr:`report_ok` is False."""


def check_relpath(relpath: str) -> PurePosixPath:
    """A workspace-relative path as given by callers, refused when it is absolute or climbs out."""
    if not isinstance(relpath, str) or not relpath or "\x00" in relpath:
        raise ConfigError(f"a sandbox path must be a non-empty relative path string, got {relpath!r}.")
    path = PurePosixPath(relpath)
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts == (".",):
        raise ConfigError(
            f"a sandbox path must stay inside the workspace (relative, no '..'), got {relpath!r}; "
            "for example 'src/pkg/module.py'."
        )
    return path


class OutputSink:
    """Keeps the first and last bytes of a stream within ``limit`` and counts the rest.

    Memory stays below ``limit`` whatever the command writes, so a gigabyte of output costs one
    pass of reads, not a gigabyte of RAM."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_len = 0
        self.total = 0
        self.head_cap = limit // 2
        self.tail_cap = limit - self.head_cap

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        if len(chunk) >= self.tail_cap:
            self.tail.clear()
            self.tail.append(bytes(chunk[-self.tail_cap :]))
            self.tail_len = self.tail_cap
            return
        self.tail.append(bytes(chunk))
        self.tail_len += len(chunk)
        while self.tail_len - len(self.tail[0]) >= self.tail_cap:
            self.tail_len -= len(self.tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        tail = b"".join(self.tail)
        if not self.truncated:
            return (bytes(self.head) + tail).decode("utf-8", errors="replace")
        omitted = self.total - len(self.head) - self.tail_cap
        marker = f"\n[... {omitted} bytes of output omitted ...]\n".encode()
        keep_tail = max(0, self.tail_cap - len(marker))
        data = bytes(self.head) + marker + (tail[-keep_tail:] if keep_tail else b"")
        return data.decode("utf-8", errors="replace")


def describe_end(
    exit_code: int | None, timed_out: bool, timeout: float, sink: OutputSink, limits: Limits, cpu_seconds: int
) -> str:
    """The ``note`` of a command: which limit it hit, from its exit status and output."""
    notes: list[str] = []
    if timed_out:
        notes.append(f"killed at the {timeout:g} s timeout")
    elif exit_code is not None and exit_code > 128:
        signal_number = exit_code - 128
        names = {9: "SIGKILL", 11: "SIGSEGV", 24: "SIGXCPU", 25: "SIGXFSZ", 6: "SIGABRT", 15: "SIGTERM"}
        what = {
            24: f"CPU limit ({cpu_seconds} s)",
            25: f"file size limit ({limits.file_size_mb} MiB)",
            9: f"killed (memory limit {limits.memory_mb} MiB or CPU limit {cpu_seconds} s)",
        }.get(signal_number)
        if what:
            notes.append(f"{what}: signal {names.get(signal_number, signal_number)}")
    probe = bytes(sink.head[-4096:]) + b"".join(sink.tail)[-4096:]
    if b"MemoryError" in probe or b"Cannot allocate memory" in probe or b"bad_alloc" in probe:
        notes.append(f"memory limit ({limits.memory_mb} MiB) reached")
    if b"Resource temporarily unavailable" in probe and (b"fork" in probe or b"thread" in probe):
        notes.append(f"process limit ({limits.processes}) reached")
    if b"File size limit exceeded" in probe and not any("file size" in n for n in notes):
        notes.append(f"file size limit ({limits.file_size_mb} MiB) reached")
    if b"No space left on device" in probe:
        notes.append(
            f"disk quota reached: the workspace and /tmp hold at most {limits.disk_mb} MiB in {limits.inodes} files"
        )
    if sink.truncated:
        notes.append(f"output truncated: {sink.total} bytes written, the first and last {sink.limit // 2} kept")
    return "; ".join(notes)


def refused(reason: str) -> CommandResult:
    """The result of a command that was not run (bad input)."""
    return CommandResult("", None, False, 0, False, 0.0, note=f"not run: {reason}")


def check_command(command: object) -> str | None:
    """Why ``command`` cannot be run, or None."""
    if not isinstance(command, str):
        return f"the command must be a string, got {type(command).__name__}"
    if "\x00" in command:
        return "the command contains a NUL byte"
    if len(command.encode("utf-8", errors="surrogateescape")) > MAX_COMMAND_BYTES:
        return f"the command is longer than {MAX_COMMAND_BYTES} bytes; write long content to a file in steps"
    return None


def command_timeout(limits: Limits, timeout: float | None) -> float:
    if timeout is None:
        return limits.timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 86_400:
        raise ConfigError(f"timeout must be a number of seconds in (0, 86400], got {timeout!r}.")
    return float(timeout)


# ----------------------------------------------------------------------------- grading
def _mangle(nodeid: str) -> tuple[str, str]:
    """pytest's JUnit (classname, name) for a node id (``_pytest.junitxml.mangle_test_address``)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def parse_junit(xml_bytes: bytes, requested: Sequence[str] = ()) -> dict[str, str]:
    """Outcomes by node id from pytest's xunit1 JUnit XML; raises ``ElementTree.ParseError``.

    Requested ids are matched through pytest's own (classname, name) mangling; other test cases
    get their node id back from the ``file`` attribute xunit1 writes. A test case reported twice
    (a failure and a teardown error) keeps its worst outcome."""
    root = ElementTree.fromstring(xml_bytes)
    wanted = {_mangle(nodeid): nodeid for nodeid in requested}
    outcomes: dict[str, str] = {}
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        nodeid = wanted.get((classname, name))
        if nodeid is None:
            file = case.get("file") or ""
            module = re.sub(r"\.py$", "", file.replace("/", ".")) if file else ""
            if module and (classname == module or classname.startswith(module + ".")):
                rest = [part for part in classname[len(module) :].split(".") if part]
                nodeid = "::".join([file, *rest, name])
            else:
                nodeid = "::".join(part for part in (classname, name) if part)
        tags = {child.tag for child in case}
        if "error" in tags:
            outcome = "error"
        elif "failure" in tags:
            outcome = "failed"
        elif "skipped" in tags:
            outcome = "skipped"
        else:
            outcome = "passed"
        previous = outcomes.get(nodeid)
        if previous is None or OUTCOMES.index(outcome) > OUTCOMES.index(previous):
            outcomes[nodeid] = outcome
    return outcomes


def grading_path(workdir: str, pythonpath: Sequence[str]) -> list[str]:
    """``sys.path`` entries of the grading run: ``pythonpath`` (relative to the workspace; ``""`` is
    its root), then the workspace itself, where ``python3 -m pytest`` run from it would look."""
    if isinstance(pythonpath, str):
        raise ConfigError(f"pythonpath must be a sequence of relative folders, got the string {pythonpath!r}.")
    entries = [workdir if p in ("", ".") else f"{workdir}/{check_relpath(p)}" for p in pythonpath]
    if workdir not in entries:
        entries.append(workdir)
    return entries


def pytest_argv(test_ids: Sequence[str], junit_path: str, workdir: str, per_test_timeout: float | None) -> list[str]:
    """The grading pytest command (run by :data:`PYTEST_WRAPPER`), the same in every sandbox.

    No plugin loads from an entry point (``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` is set for the run, so
    no installed or planted distribution is read); :data:`PYTEST_WRAPPER` hands pytest-timeout in
    as an object it imported before the workspace joined ``sys.path``."""
    argv = [
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        f"--rootdir={workdir}",
        f"--confcutdir={workdir}",
        f"--junitxml={junit_path}",
        "-q",
        "-rN",
    ]
    if per_test_timeout is not None:
        argv += [f"--timeout={per_test_timeout:g}", "-o", "timeout_method=signal"]
    return argv + ["--", *test_ids]


#: The environment of a grading run on top of the sandbox's: no plugin autoload, no byte code,
#: and nothing that points Python elsewhere (``-I`` ignores the PYTHON* variables too).
GRADING_ENV: Mapping[str, str] = {"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

#: Exit status of the wrapper when pytest's own functions were replaced during the run.
TAMPERED_EXIT = 86

#: Runs pytest in a fresh ``python3 -I`` process: pytest, its plugins and the XML writer are
#: imported before the workspace joins ``sys.path``, so a ``pytest.py`` or ``xml/`` the agent
#: planted in the workspace cannot stand in for them. Before the run it notes every function of
#: pytest's, pluggy's and the XML writer's modules and classes; if the code under test replaced one of them (a patch
#: that rewrites outcomes in memory), the wrapper exits with :data:`TAMPERED_EXIT`. Argument: a file
#: holding the JSON argv and the sys.path entries.
PYTEST_WRAPPER = r"""
import json, os, sys
spec = json.load(open(sys.argv[1], encoding="utf-8"))
import pytest, _pytest.junitxml, _pytest.main, _pytest.python, _pytest.runner, _pytest.terminal, _pytest.reports
import xml.etree.ElementTree, xml.dom.minidom, platform, functools, json
try:
    import pytest_timeout
    _plugins = [pytest_timeout]
except ImportError:
    _plugins = []
def _functions():
    found = {}
    for name, module in list(sys.modules.items()):
        watched = name in ("pytest", "pluggy", "pytest_timeout", "xml.etree.ElementTree", "xml.dom.minidom")
        if module is None or not (watched or name.startswith(("_pytest.", "pluggy."))):
            continue
        for key, value in list(vars(module).items()):
            code = getattr(value, "__code__", None)
            if code is not None:
                found[(name, key)] = (value, code)
            elif isinstance(value, type) and value.__module__ == name:
                for attr, member in list(vars(value).items()):
                    code = getattr(member, "__code__", None) or getattr(getattr(member, "__func__", None), "__code__", None)
                    if code is not None:
                        found[(name, key, attr)] = (member, code)
    return found
_before = _functions()
sys.path[:0] = spec["path"]
_status = int(pytest.main(spec["argv"], plugins=_plugins))
_after = _functions()
for _key, (_value, _code) in _before.items():
    _now = _after.get(_key)
    if _now is None or _now[0] is not _value or _now[1] is not _code:
        sys.stderr.write("envgym: pytest's own code was replaced during the run: " + ".".join(_key) + "\n")
        os._exit(TAMPERED)
sys.exit(_status)
""".replace("TAMPERED", str(TAMPERED_EXIT))


def canary(test_ids: Sequence[str]) -> tuple[str, str, bytes]:
    """A test that must fail, written next to the first requested test for the grading run:
    (relative path, node id, source). A run that reports it as anything but failed, or exits 0
    with it failed, had its outcomes rewritten by the code under test."""
    first = test_ids[0].split("::", 1)[0] if test_ids else "test_x.py"
    folder = str(PurePosixPath(first).parent) if "/" in first else ""
    name = f"test_envgym_canary_{secrets.token_hex(6)}.py"
    rel = f"{folder}/{name}" if folder else name
    source = b"def test_canary():\n    assert False, 'this test must fail: it checks the grader'\n"
    return rel, f"{rel}::test_canary", source


def judge_canary(
    exit_code: int | None, outcomes: dict[str, str], canary_id: str
) -> tuple[int | None, dict[str, str], str]:
    """Check the canary of a grading run: returns (pytest's exit code as it would be without the
    canary, the outcomes without it, why the run cannot be trusted or "")."""
    seen = outcomes.pop(canary_id, None)
    if exit_code == TAMPERED_EXIT:
        return exit_code, outcomes, "pytest's own functions were replaced during the run"
    if seen != "failed":
        return exit_code, outcomes, f"the grader's canary test was reported {seen or 'missing'}, not failed"
    if exit_code == 0:
        return exit_code, outcomes, "pytest exited 0 although the grader's canary test failed"
    if exit_code == 1 and all(o in ("passed", "skipped") for o in outcomes.values()):
        return 0, outcomes, ""
    return exit_code, outcomes, ""


def grading_run(
    code: int | None,
    timed_out: bool,
    report_ok: bool,
    outcomes: dict[str, str],
    canary_id: str,
    sink: OutputSink,
    seconds: float,
    started: float,
) -> PytestRun:
    """The :class:`PytestRun` of a finished grading run (every backend's last step): the canary
    judged when the report is whole, then taken out of the outcomes, and the output's tail saying
    what cut the run short or made it untrusted."""
    untrusted = ""
    if report_ok and not timed_out:
        code, outcomes, untrusted = judge_canary(code, outcomes, canary_id)
    else:
        outcomes.pop(canary_id, None)
    tail = sink.text()[-4000:]
    if timed_out:
        tail += f"\n[envgym: pytest killed at the {seconds:g} s timeout]"
    if untrusted:
        tail += f"\n[envgym: outcomes not trusted: {untrusted}]"
    return PytestRun(code, outcomes, report_ok and not untrusted, elapsed(started), tail, untrusted)


def check_restore(restore: Mapping[str, bytes]) -> dict[str, bytes]:
    if not isinstance(restore, Mapping):
        raise ConfigError(f"restore must map relative paths to bytes, got {type(restore).__name__}.")
    clean: dict[str, bytes] = {}
    for rel, data in restore.items():
        path = check_relpath(rel)
        if not isinstance(data, (bytes, bytearray)):
            raise ConfigError(f"restore[{rel!r}] must be bytes, got {type(data).__name__}.")
        clean[str(path)] = bytes(data)
    return clean


def check_test_ids(test_ids: Sequence[str]) -> list[str]:
    if isinstance(test_ids, str) or not all(isinstance(t, str) and t and "\x00" not in t for t in test_ids):
        raise ConfigError(f"test_ids must be a sequence of pytest node id strings, got {test_ids!r}.")
    bad = [t for t in test_ids if t.startswith("-")]
    if bad:
        raise ConfigError(f"test ids must be node ids such as 'tests/test_x.py::test_y', not options: {bad!r}.")
    return list(test_ids)


# ----------------------------------------------------------------------------- the interface
class Sandbox(ABC):
    """One episode's isolated workspace: commands run in it with no network and limits applied.

    A context manager; :meth:`close` is idempotent and also runs when the object is collected or
    the interpreter exits."""

    kind: ClassVar[str]
    workdir: ClassVar[str] = "/workspace"

    _closed: bool = True
    _finalizer: weakref.finalize | None = None

    @classmethod
    @abstractmethod
    def unavailable_reason(cls) -> str | None:
        """None when this backend can run here; else why not, with the command that fixes it."""

    @abstractmethod
    def run(self, command: str, *, timeout: float | None = None) -> CommandResult:
        """``bash -c command`` in :attr:`workdir` as an unprivileged user, no network, limits on."""

    @abstractmethod
    def read_file(self, relpath: str) -> bytes:
        """A workspace file's bytes (host side; raises ``FileNotFoundError`` when absent)."""

    @abstractmethod
    def write_file(self, relpath: str, data: bytes) -> None:
        """Write a workspace file (host side), creating its folders."""

    @abstractmethod
    def run_pytest(
        self,
        test_ids: Sequence[str],
        *,
        restore: Mapping[str, bytes],
        pythonpath: Sequence[str] = (),
        timeout: float = 300.0,
        per_test_timeout: float | None = None,
    ) -> PytestRun:
        """The SWE-bench grading step (see the module docstring of :mod:`envgym.sandbox`)."""

    def close(self) -> None:
        """Kill every process and delete the workspace or container; safe to call twice."""
        if self._finalizer is not None:
            self._finalizer()

    @property
    def closed(self) -> bool:
        return self._finalizer is None or not self._finalizer.alive

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise ConfigError(f"this {self.kind} sandbox is closed; make a new one for the next episode.")


def elapsed(started: float) -> float:
    return time.perf_counter() - started


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
