"""Real envs whose ``close`` frees machine resources are closed when their session ends: a browser
env's Chromium, a SWE env's bwrap sandbox (its processes and its host folder), also when the
client leaves in the middle of a step."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from procs import descendants
from websockets.sync.client import connect

from envgym.browser import pool
from envgym.serve import Server

pytestmark = pytest.mark.slow  # a browser launch and sandboxes: seconds each on a busy machine


def _until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        time.sleep(0.05)


def _mine(marker: bytes) -> set[int]:
    """Live processes under this test process whose command line holds ``marker``."""
    return {pid for pid, cmd in descendants(os.getpid(), zombies=False).items() if marker in cmd}


def _play(url: str, messages: list[dict], *, wait_last: bool = True) -> list[dict]:
    replies = []
    with connect(url, open_timeout=30) as ws:
        for i, message in enumerate(messages):
            ws.send(json.dumps(message))
            if wait_last or i < len(messages) - 1:
                replies.append(json.loads(ws.recv(timeout=120)))
    return replies


def test_browser_sessions_leave_no_chromium(monkeypatch: pytest.MonkeyPatch) -> None:
    # a browser would otherwise outlive its env by this long, for the next env of its thread: a
    # session's thread ends with the session, so its browser must go at once
    monkeypatch.setattr(pool, "LINGER_S", 600.0)
    before = _mine(b"chrom")
    with Server(["envgym/MiniWoB-click-button-v0"]) as server:
        for seed in range(2):
            replies = _play(server.ws_url(), [{"type": "reset", "data": {"seed": seed}}])
            assert replies[0]["type"] == "observation", replies
            assert _mine(b"chrom") - before, "the env runs no Chromium"
            _until(lambda: server.active_sessions == 0, "the session released")
            _until(lambda: not (_mine(b"chrom") - before), "its Chromium gone", timeout=30)


def test_a_sandbox_is_removed_when_its_client_leaves() -> None:
    folders = lambda: set(Path(tempfile.gettempdir()).glob(f"envgym-sandbox-{os.getpid()}-*"))
    before = folders()
    with Server(["envgym/SWE-v0"], step_timeout=60) as server:
        replies = _play(
            server.ws_url(),
            [{"type": "reset", "data": {"seed": 0}}, {"type": "step", "data": {"action": "<action>ls</action>"}}],
        )
        assert "setup.py" in replies[1]["data"]["observation"]["obs"]
        _until(lambda: folders() == before, "the sandbox folder removed after a disconnect")
        # leaving in the middle of a command: the env is closed once the command returns
        _play(
            server.ws_url(),
            [{"type": "reset", "data": {"seed": 0}}, {"type": "step", "data": {"action": "<action>sleep 3</action>"}}],
            wait_last=False,
        )
        _until(lambda: bool(_mine(b"bwrap")), "the command running in bwrap after the client left", timeout=30)
        _until(lambda: not _mine(b"bwrap") and folders() == before, "no bwrap left and the folder removed")
        _until(lambda: server.active_sessions == 0, "sessions released")
