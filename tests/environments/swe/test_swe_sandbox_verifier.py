"""The reward layer's UnitTests verifier in the SWE sandboxes (issue 14, item 6): no network, no
writes outside its workspace, nothing left running, same verdicts as the subprocess fallback."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from envgym.errors import InvalidKwargsError, MissingDependencyError
from envgym.rewards import UnitTests
from envgym.sandbox import sandbox_class

TESTS = """
def test_add():
    assert add(2, 3) == 5

def test_negative():
    assert add(-2, -3) == -5
"""
GOOD = "def add(a, b):\n    return a + b\n"


@pytest.fixture(params=["bwrap", "docker"])
def mode(request: pytest.FixtureRequest) -> str:
    reason = sandbox_class(request.param).unavailable_reason()
    if reason is not None:
        pytest.skip(f"{request.param} sandbox unavailable here: {reason}")
    return request.param


def test_auto_picks_bwrap_when_installed_and_subprocess_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if sandbox_class("bwrap").unavailable_reason() is None:
        assert UnitTests(TESTS).sandbox == "bwrap"
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    fallback = UnitTests(TESTS)
    assert fallback.sandbox == "subprocess"
    assert fallback.verify(GOOD).status == "passed"  # the fallback still works
    with pytest.raises(MissingDependencyError, match="apt-get install bubblewrap"):
        UnitTests(TESTS, sandbox="bwrap")
    with pytest.raises(InvalidKwargsError, match="subprocess"):
        UnitTests(TESTS, sandbox="chroot")


def test_sandboxed_verdicts_match_the_subprocess_mode(mode: str) -> None:
    for candidate, status, score in [
        (GOOD, "passed", 1.0),
        ("def add(a, b):\n    return abs(a + b)\n", "failed", 0.5),
        ("def add(a, b) return a + b\n", "error", 0.0),
    ]:
        for sandbox in (mode, "subprocess"):
            result = UnitTests(TESTS, timeout=20, sandbox=sandbox).verify(candidate)
            assert (result.status, result.score) == (status, score), (sandbox, result)


def test_sandboxed_code_has_no_network(mode: str) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    hits: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                hits.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    candidate = (
        "import socket\n"
        "def add(a, b):\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        "    return a + b\n"
    )
    sandboxed = UnitTests(TESTS, timeout=20, sandbox=mode).verify(candidate)
    # The same candidate in the subprocess fallback reaches the host: the test can tell them apart.
    fallback = UnitTests(TESTS, timeout=20, sandbox="subprocess").verify(candidate)
    time.sleep(0.3)
    stop.set()
    thread.join()
    server.close()
    assert sandboxed.status == "failed" and sandboxed.score == 0.0
    assert "ConnectionRefusedError" in sandboxed.detail or "OSError" in sandboxed.detail or "Errno" in sandboxed.detail
    assert fallback.status == "passed"
    assert len(hits) == 2  # the fallback's two tests connected; nothing from the sandbox did


def test_sandboxed_code_cannot_write_outside(mode: str, tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("untouched")
    created = tmp_path / "created.txt"
    candidate = (
        "def add(a, b):\n"
        f"    for path in ({str(canary)!r}, {str(created)!r}, '/usr/envgym-x', '/etc/envgym-x'):\n"
        "        try:\n"
        "            open(path, 'w').write('pwned')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return a + b\n"
    )
    result = UnitTests(TESTS, timeout=20, sandbox=mode).verify(candidate)
    assert result.status == "passed"
    assert canary.read_text() == "untouched" and not created.exists()
    assert not Path("/usr/envgym-x").exists() and not Path("/etc/envgym-x").exists()


def test_sandboxed_code_leaves_no_process_and_bounded_output(mode: str) -> None:
    marker = f"{6000 + os.getpid() % 1000}.5"
    candidate = (
        f"import subprocess, sys\nsubprocess.Popen(['setsid', 'sleep', '{marker}'])\ndef add(a, b):\n    return a + b\n"
    )
    result = UnitTests(TESTS, timeout=20, sandbox=mode).verify(candidate)
    assert result.status == "passed"
    leftovers = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if f"sleep {marker}".encode() in Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" "):
                    leftovers.append(entry)
            except OSError:
                pass
    assert leftovers == []
    started = time.perf_counter()
    flood = UnitTests(TESTS, timeout=20, max_output_bytes=64_000, sandbox=mode).verify(
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    )
    assert flood.status == "error" and "output exceeded" in flood.detail
    assert time.perf_counter() - started < 15
