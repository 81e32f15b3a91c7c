"""Progress from the harness: the runner's ``on_progress`` totals (lock-step and async, a resumed
run folder), and the display ``envgym run`` and ``envgym bench run`` put on stderr, seen from a
real subprocess whose stderr is a pipe (not a terminal: plain lines)."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envgym.cli import app
from envgym.rollout import RunConfig, Runner
from envgym.rollout.agent import Agent, AgentInput, AgentOutput

ENV = "envgym/FrozenLake-v0"


class Walker(Agent):
    """Walks right, then down, forever; reports three completion tokens per reply."""

    name = "walker"

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        return [AgentOutput("right" if item.turn % 2 == 0 else "down", token_ids=[1, 2, 3]) for item in batch]


def record(calls: list[dict[str, int]], lock: threading.Lock) -> Any:
    def on_progress(**counts: int) -> None:
        with lock:
            calls.append(dict(counts))

    return on_progress


@pytest.mark.parametrize("mode", ["lockstep", "async"])
def test_runner_reports_running_totals(mode: str) -> None:
    calls: list[dict[str, int]] = []
    config = RunConfig(env_id=ENV, episodes=12, num_envs=4, max_turns=6, mode=mode)
    result = Runner(config, Walker(), on_progress=record(calls, threading.Lock())).run()
    turns = sum(len(t.turns) for t in result.trajectories)
    if mode == "lockstep":  # the turn budget left (every episode's limit of 6), for the ETA
        budget = [c.pop("turns_left") for c in calls]
        assert budget[0] == 12 * 6 and budget[-1] == 0
        assert all(after <= before for before, after in itertools.pairwise(budget))
        assert all(b <= 12 * 6 - c["turns"] for b, c in zip(budget, calls, strict=True))
    assert calls[0] == {"done": 0, "total": 12, "live": 0, "turns": 0, "tokens": 0}
    if mode == "lockstep":  # the first batch is live before its first agent call
        assert calls[1] == {"done": 0, "total": 12, "live": 4, "turns": 0, "tokens": 0}
    assert calls[-1] == {"done": 12, "total": 12, "live": 0, "turns": turns, "tokens": 3 * turns}
    most = max(c["live"] for c in calls)
    assert most == 4 if mode == "lockstep" else 1 <= most <= 4  # never more than num_envs at once
    for before, after in itertools.pairwise(calls):
        assert after["done"] >= before["done"] and after["turns"] >= before["turns"]


def test_runner_counts_a_resumed_folder_as_done(tmp_path: Path) -> None:
    Runner(RunConfig(env_id=ENV, episodes=2, num_envs=2, max_turns=3), Walker(), out=tmp_path).run()
    calls: list[dict[str, int]] = []
    config = RunConfig(env_id=ENV, episodes=5, num_envs=2, max_turns=3)  # 3 more into the same folder
    result = Runner(config, Walker(), out=tmp_path, on_progress=record(calls, threading.Lock())).run()
    played = sum(len(t.turns) for t in result.trajectories[2:])
    assert [c.pop("turns_left") for c in (calls[0], calls[-1])] == [3 * 3, 0]  # only the 3 episodes to play
    assert calls[0] == {"done": 2, "total": 5, "live": 0, "turns": 0, "tokens": 0}
    assert calls[-1] == {"done": 5, "total": 5, "live": 0, "turns": played, "tokens": 3 * played}


def _stderr_of(*args: str) -> str:
    env = {**os.environ, "ENVGYM_PROGRESS": "1", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "envgym.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_envgym_run_prints_a_plain_final_line_when_stderr_is_a_pipe() -> None:
    stderr = _stderr_of("run", ENV, "-a", "random", "-n", "20")
    assert "\r" not in stderr and "\x1b[K" not in stderr
    final = [line for line in stderr.splitlines() if line.startswith(f"{ENV} · random")]
    assert len(final) == 1, stderr
    assert re.match(
        rf"{re.escape(ENV)} · random  20/20 episodes \(100%\)  turns \d+ \(.+/s\)  success \d+%  \d+:\d\d$", final[0]
    )


def test_envgym_run_no_progress_and_environment_switch() -> None:
    assert ENV not in _stderr_of("run", ENV, "-a", "random", "-n", "4", "--no-progress")
    runner = CliRunner()
    result = runner.invoke(app, ["run", ENV, "-a", "random", "-n", "4"], env={"ENVGYM_PROGRESS": "0"})
    assert result.exit_code == 0 and "4/4 episodes" not in result.stderr


def test_bench_run_counts_the_whole_suite_and_resumes(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "bench"
    result = runner.invoke(app, ["bench", "run", "core-v1", "-a", "random", "--out", str(out)])
    assert result.exit_code == 0, result.output
    final = [line for line in result.stderr.splitlines() if line.startswith("core-v1 · random")]
    assert len(final) == 1, result.stderr
    total = int(re.search(r"(\d+)/(\d+) episodes", final[0]).group(2))  # type: ignore[union-attr]
    assert f"{total}/{total} episodes (100%)" in final[0]
    again = runner.invoke(app, ["bench", "run", "core-v1", "-a", "random", "--out", str(out)])
    assert again.exit_code == 0 and f"{total}/{total} episodes (100%)" in again.stderr
    assert "already recorded" in again.stderr


class Crashing(Walker):
    """Plays one turn, then raises: every episode ends as an agent_error."""

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        if any(item.turn >= 1 for item in batch):
            raise RuntimeError("the agent crashed")
        return super().act(batch)


@pytest.mark.parametrize("mode", ["lockstep", "async"])
def test_failed_episodes_count_as_done(mode: str) -> None:
    calls: list[dict[str, int]] = []
    config = RunConfig(
        env_id=ENV, episodes=6, num_envs=3, max_turns=4, max_retries=1, mode=mode, env_kwargs={"size": 8}
    )
    result = Runner(config, Crashing(), on_progress=record(calls, threading.Lock())).run()
    assert [t.termination_reason for t in result.trajectories].count("agent_error") >= 1
    assert calls[-1]["done"] == 6 and calls[-1]["live"] == 0
