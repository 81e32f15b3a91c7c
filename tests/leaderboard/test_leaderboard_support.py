"""Shared helpers of the leaderboard tests: a tiny suite, and real bench runs of it.

Test modules import the fixtures (``suite_dir``, ``runs``, ``bundles``) by their function names
(``*_fixture``); each module then builds its own runs once.

Runs are made by :func:`envgym.bench.run_suite` (``envgym bench run``), so the bundles under test
have exactly the layout users submit. No tests live here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SUITE_ID = "lbtest-v1"
SUITE_YAML = """\
# A tiny suite for the leaderboard tests: two games, two tasks each, two trials per task.
name: lbtest
version: 1
description: leaderboard tests
defaults: {episodes: 2, split: train, trials: 2}
entries:
  - name: frozenlake
    env: envgym/FrozenLake-v0
    seeds: {start: 3, count: 2}
    max_turns: 12
  - name: sokoban
    env: envgym/Sokoban-v0
    kwargs: {size: 6, boxes: 1}
    seeds: [10, 12]
    max_turns: 20
"""


def write_suite(folder: Path, text: str = SUITE_YAML) -> Path:
    """Write the test suite into ``folder`` (point ``$ENVGYM_BENCHMARKS`` at it) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{SUITE_ID}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def bench_run(out: Path, suite_path: Path, agent: str) -> Path:
    """Run ``agent`` on the suite at ``suite_path`` into the bench run folder ``out``."""
    from envgym.bench.run import run_suite

    run_suite(suite_path, agent, out=out, num_envs=4)
    return out


@pytest.fixture(scope="module", name="suite_dir")
def suite_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder holding the test suite, as ``$ENVGYM_BENCHMARKS`` for the module."""
    folder = tmp_path_factory.mktemp("suites")
    write_suite(folder)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVGYM_BENCHMARKS", str(folder))
        yield folder


@pytest.fixture(scope="module", name="runs")
def runs_fixture(suite_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Bench runs of the random and the oracle agent."""
    root = tmp_path_factory.mktemp("runs")
    return {agent: bench_run(root / agent, suite_dir / f"{SUITE_ID}.yaml", agent) for agent in ("random", "oracle")}


@pytest.fixture(scope="module", name="bundles")
def bundles_fixture(runs: dict[str, Path]) -> dict[str, Any]:
    """Their bundles, named ``<agent> baseline``."""
    from envgym.leaderboard.bundle import make_bundle

    return {
        agent: make_bundle(path, name=f"{agent} baseline", metadata={"model": agent}) for agent, path in runs.items()
    }


class Server:
    """``envgym leaderboard serve`` in a subprocess on a free loopback port (a real uvicorn)."""

    def __init__(self, db: Path, suites: Path, *extra: str) -> None:
        import os
        import socket
        import subprocess
        import sys
        import time

        import httpx

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "ENVGYM_BENCHMARKS": str(suites)}
        command = [sys.executable, "-m", "envgym.cli", "leaderboard", "serve", "--port", str(self.port)]
        self.log = db.with_suffix(f".{self.port}.log")
        self._log_file = self.log.open("wb")
        self.proc = subprocess.Popen(
            [*command, "--db", str(db), *extra], env=env, stdout=self._log_file, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}: {self.log.read_text()}")
            try:
                if httpx.get(self.url + "/api/suites", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not answer within 60 s: {self.log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        import subprocess

        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log_file.close()
