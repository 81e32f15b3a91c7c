"""``envgym run`` and ``envgym bench run`` as a new user meets them (issue 37, "Commands"):
what a failed start leaves behind, unwritable ``--out`` folders, dead endpoints, the flags a
newcomer reaches for, and the numbers the tables show."""

from __future__ import annotations

import gc
import http.server
import json
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envgym._folderlock import FolderLock
from envgym.cli import app
from envgym.errors import ConfigError

runner = CliRunner()

LAKE = "envgym/FrozenLake-v0"
SUITE = """\
name: mini
version: 1
description: two tiny entries
defaults: {episodes: 2, seed: 3, split: test, max_turns: 6, trials: 1}
metrics: [success_rate, mean_reward, mean_turns, wall_time]
entries:
  - {name: lake, env: envgym/FrozenLake-v0, kwargs: {difficulty: easy}}
  - {name: sums, env: envgym/Countdown-v0, kwargs: {difficulty: easy}, max_turns: 3}
"""


def invoke(*args: str) -> Any:
    return runner.invoke(app, [*args, "--no-progress"])


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("suites") / "mini-v1.yaml"
    path.write_text(SUITE, encoding="utf-8")
    return path


def files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


# ---------------------------------------------------------------- 1. a failed start leaves nothing
@pytest.mark.parametrize("where", ["new", "existing empty"])
def test_run_with_a_typo_in_an_agent_option_leaves_no_folder(tmp_path: Path, where: str) -> None:
    out = tmp_path / "run"
    if where == "existing empty":
        out.mkdir()
    typo = invoke("run", LAKE, "-n", "2", "-O", "temprature=1", "--out", str(out))
    assert typo.exit_code == 2, typo.output
    assert "temprature" in typo.stderr
    assert files(out) == set()
    assert out.exists() == (where == "existing empty")  # a folder the user made stays
    fixed = invoke("run", LAKE, "-n", "2", "--out", str(out), "--json")
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout)["episodes"] == 2
    assert {"config.json", "meta.json", "episodes.jsonl", "summary.json", ".lock"} <= files(out)


def test_bench_run_with_a_typo_in_an_agent_option_leaves_no_folder(tmp_path: Path, suite_file: Path) -> None:
    out = tmp_path / "bench"
    typo = invoke("bench", "run", str(suite_file), "-O", "temprature=1", "--out", str(out))
    assert typo.exit_code == 2, typo.output
    assert "temprature" in typo.stderr
    assert not out.exists()
    fixed = invoke("bench", "run", str(suite_file), "--out", str(out), "--json")
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout)["overall"]["episodes"] == 4
    assert {"bench.json", "suite.yaml", "entries/lake/episodes.jsonl", "entries/sums/episodes.jsonl"} <= files(out)


def test_a_failed_resume_keeps_the_recorded_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert invoke("run", LAKE, "-n", "2", "--out", str(out)).exit_code == 0
    before = {name: (out / name).read_bytes() for name in ("config.json", "episodes.jsonl", "summary.json")}
    again = invoke("run", LAKE, "-n", "3", "-a", "random", "-O", "temprature=1", "--out", str(out))
    assert again.exit_code == 2
    assert {name: (out / name).read_bytes() for name in before} == before


# ---------------------------------------------------------------- 2. --out that cannot be made
@pytest.mark.parametrize("command", ["run", "bench"])
def test_out_under_a_file_is_one_line_and_exit_2(tmp_path: Path, suite_file: Path, command: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    out = blocker / "run"
    args = ["run", LAKE, "-n", "1"] if command == "run" else ["bench", "run", str(suite_file)]
    result = invoke(*args, "--out", str(out))
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert f"{blocker} is a file, not a folder" in lines[0] and "--out" in lines[0]
    assert "Traceback" not in result.output


def test_out_under_proc_is_one_line_and_exit_2() -> None:
    result = invoke("run", LAKE, "-n", "1", "--out", "/proc/envgym-test/run")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot create the run folder /proc/envgym-test/run")


def test_a_lock_that_was_never_taken_is_collected_quietly(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    raised: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, raised.append
    try:
        with pytest.raises(ConfigError, match="is a file, not a folder"):
            FolderLock(tmp_path / "file" / "out")
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert raised == []


# ---------------------------------------------------------------- 3. a dead or broken agent server
@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def broken_server() -> Iterator[str]:
    """A real HTTP server on loopback that answers every chat completion with HTTP 500."""

    class Broken(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = b'{"error": "overloaded"}'
            self.send_response(500)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_refused_connection_fails_before_the_run(
    tmp_path: Path, suite_file: Path, closed_port: int, command: str
) -> None:
    agent = f"openai:some-model@http://127.0.0.1:{closed_port}/v1"
    args = ["run", LAKE, "-n", "2"] if command == "run" else ["bench", "run", str(suite_file)]
    result = invoke(*args, "-a", agent, "--out", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert f"127.0.0.1:{closed_port}" in result.stderr and "cannot be reached" in result.stderr
    assert not (tmp_path / "out").exists()  # no episode ran (each would spend the agent's retries)


def test_a_host_that_does_not_resolve_fails_before_the_run(tmp_path: Path) -> None:
    result = invoke("run", LAKE, "-n", "1", "-a", "openai:m@http://no-such-host.invalid:8000/v1")
    assert result.exit_code == 1, result.output
    assert "does not resolve" in result.stderr


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_run_whose_every_episode_is_an_infrastructure_error_exits_1(
    tmp_path: Path, suite_file: Path, broken_server: str, command: str
) -> None:
    agent = f"openai:some-model@{broken_server}"
    quick = ["-O", "max_retries=0", "--max-retries", "0"]
    args = ["run", LAKE, "-n", "2"] if command == "run" else ["bench", "run", str(suite_file)]
    result = invoke(*args, "-a", agent, *quick, "--out", str(tmp_path / "out"), "--json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)  # the results are still printed
    numbers = document if command == "run" else document["overall"]
    assert numbers["scored"] == 0 and numbers["episodes"] == (2 if command == "run" else 4)
    assert "every episode (" in result.stderr and "agent_error" in result.stderr
