"""``envgym serve`` as a real process: URLs on stderr, a session over the printed URL, kwargs,
a clean stop on SIGTERM and SIGINT with the envs closed; usage errors exit 2 before binding."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import descendants
from typer.testing import CliRunner
from websockets.sync.client import connect

from envgym.cli import app

ROOT = Path(__file__).resolve().parents[2]
SOKOBAN = "envgym/Sokoban-v0"


def _start(*args: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start ``envgym serve ARGS --port 0``; returns it, its health URL's base and the stderr lines read."""
    process = subprocess.Popen(
        [sys.executable, "-m", "envgym.cli", "serve", *args, "--port", "0"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    assert process.stderr is not None
    while True:  # the process prints its URLs once bound; readline returns "" if it dies
        line = process.stderr.readline()
        if not line:
            pytest.fail(f"envgym serve exited ({process.wait()}): {''.join(lines)}")
        lines.append(line)
        found = re.search(r"health: (http://\S+)/health", line)
        if found:
            return process, found.group(1), lines


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[subprocess.Popen[str], str, list[str]]]:
    process, url, lines = _start(SOKOBAN, "envgym/Wordle-v0", "--kwargs", f'{SOKOBAN}={{"size": 6}}', "--lock-kwargs")
    yield process, url, lines
    if process.poll() is None:
        process.kill()
        process.wait()


def test_it_prints_the_urls_and_serves_them(served: tuple[subprocess.Popen[str], str, list[str]]) -> None:
    _, url, lines = served
    port = int(url.rsplit(":", 1)[1])
    assert port > 0
    assert f"serving {SOKOBAN} at ws://127.0.0.1:{port}/{SOKOBAN}/ws\n" in lines
    with connect(f"ws://127.0.0.1:{port}/{SOKOBAN}/ws", open_timeout=30) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        reply = json.loads(ws.recv(timeout=30))
        assert reply["data"]["observation"]["info"]["task"]["seed"] == 1
        assert reply["data"]["observation"]["info"]["task"]["size"] == 6  # --kwargs applied
        ws.send(json.dumps({"type": "reset", "data": {"env_kwargs": {"size": 7}}}))
        assert json.loads(ws.recv(timeout=30))["data"]["code"] == "BAD_KWARGS"  # --lock-kwargs


def test_sigterm_stops_it_cleanly(served: tuple[subprocess.Popen[str], str, list[str]]) -> None:
    process, url, _ = served
    port = int(url.rsplit(":", 1)[1])
    with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30) as ws:
        ws.send(json.dumps({"type": "reset"}))
        json.loads(ws.recv(timeout=30))
        process.send_signal(signal.SIGTERM)
        reply = json.loads(ws.recv(timeout=30))
        assert reply["data"]["code"] == "SERVER_STOPPING"
    assert process.wait(timeout=60) == 0
    assert process.stderr is not None
    assert "stopped: every session closed." in process.stderr.read()


@pytest.mark.slow  # a second server process and a browser launch
def test_sigint_stops_it_and_closes_a_browser_env() -> None:
    process, url, _ = _start("envgym/MiniWoB-click-button-v0")
    port = int(url.rsplit(":", 1)[1])
    try:
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            assert json.loads(ws.recv(timeout=120))["type"] == "observation"
            browser = [pid for pid, cmd in descendants(process.pid).items() if b"chrom" in cmd]
            assert browser, "the env runs no Chromium under the server"
            process.send_signal(signal.SIGINT)
            assert json.loads(ws.recv(timeout=30))["data"]["code"] == "SERVER_STOPPING"
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    deadline = time.monotonic() + 30
    while left := [pid for pid in browser if _running(pid)]:  # the browser went with the env
        assert time.monotonic() < deadline, f"Chromium processes {left} outlived the server"
        time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_usage_errors_exit_2_before_binding() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["serve", "envgym/Wordel-v0", "--port", "0"])
    assert result.exit_code == 2 and "Did you mean 'envgym/Wordle-v0'" in result.output
    result = runner.invoke(app, ["serve", SOKOBAN, "--kwargs", "siz=6", "--port", "0"])
    assert result.exit_code == 2 and "Did you mean 'size'" in result.output
    result = runner.invoke(app, ["serve", SOKOBAN, "envgym/Wordle-v0", "--kwargs", "size=6", "--port", "0"])
    assert result.exit_code == 2 and "several are served" in result.output
    result = runner.invoke(app, ["serve", SOKOBAN, "--kind", "aec", "--port", "0"])
    assert result.exit_code == 2 and "single-agent and PettingZoo Parallel" in result.output
