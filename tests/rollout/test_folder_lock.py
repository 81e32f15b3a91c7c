"""One writer per output folder: run, bench run and training folders are locked by the OS for the
life of the process that writes them, with real processes on both sides."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envgym._folderlock import LOCK_FILE, FolderInUseError, FolderLock
from envgym.bench.run import run_suite
from envgym.errors import ConfigError
from envgym.rollout import RunConfig, Runner, load_trajectories
from envgym.rollout.rundir import RunFolder

ROOT = Path(__file__).resolve().parents[2]

HOLD = """
import sys, time
from envgym._folderlock import FolderLock
lock = FolderLock(sys.argv[1], "test folder")
print("locked", flush=True)
time.sleep(600)
"""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "envgym.cli", *args]


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """Another process that holds the lock on ``tmp_path / "held"`` until it is killed."""
    folder = tmp_path / "held"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield folder, proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_second_lock_is_refused_and_names_the_owner(tmp_path: Path) -> None:
    first = FolderLock(tmp_path / "out")
    with pytest.raises(FolderInUseError) as caught:
        FolderLock(tmp_path / "out", "run folder")  # same process, another open file: refused too
    message = str(caught.value)
    assert str(tmp_path / "out") in message and f"process {os.getpid()}" in message
    assert isinstance(caught.value, ConfigError)  # the CLI reports it as a usage error (exit 1)
    owner = json.loads((tmp_path / "out" / LOCK_FILE).read_text())
    assert owner["pid"] == os.getpid()
    first.release()
    first.release()  # idempotent
    with FolderLock(tmp_path / "out") as again:
        assert again.held
    assert not again.held


def test_the_os_releases_the_lock_of_a_killed_process(holder: tuple[Path, subprocess.Popen[str]]) -> None:
    folder, proc = holder
    with pytest.raises(FolderInUseError, match=f"process {proc.pid}"):
        FolderLock(folder)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    FolderLock(folder).release()  # no stale lock to remove by hand


def test_a_run_folder_is_locked_until_closed_and_a_closed_one_refuses_writes(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run", {"env_id": "x"}, ["env_id"])
    with pytest.raises(FolderInUseError):
        RunFolder(tmp_path / "run", {"env_id": "x"}, ["env_id"])
    folder.close()
    with pytest.raises(RuntimeError, match="closed"):
        folder.write_summary({})
    with RunFolder(tmp_path / "run", {"env_id": "x"}, ["env_id"]) as reopened:
        reopened.write_summary({})  # a folder closed with nothing in it is taken away (see test_rundir_undo)
    # A refused configuration leaves the folder unlocked for the right one.
    with pytest.raises(ConfigError, match="different configuration"):
        RunFolder(tmp_path / "run", {"env_id": "y"}, ["env_id"])
    RunFolder(tmp_path / "run", {"env_id": "x"}, ["env_id"]).close()


def test_runner_releases_the_folder_when_the_agent_cannot_be_built(tmp_path: Path) -> None:
    config = RunConfig(env_id="envgym/FrozenLake-v0", agent="random", agent_options={"no_such_option": 1}, episodes=2)
    with pytest.raises(ConfigError, match="no option"):
        Runner(config, out=tmp_path / "run").run()
    FolderLock(tmp_path / "run").release()


@pytest.mark.slow
def test_two_runs_on_one_folder_the_second_stops_at_once_and_kill_9_then_resume_is_whole(tmp_path: Path) -> None:
    out = tmp_path / "run"
    episodes = 300
    args = ["run", "envgym/Sokoban-v0", "--agent", "random:4", "-n", str(episodes), "--seed", "3", "--max-turns", "40"]
    first = subprocess.Popen(_cli(*args, "--out", str(out)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        records = out / "episodes.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (records.exists() and records.stat().st_size > 0):
            time.sleep(0.01)
        assert records.exists(), "the first run wrote nothing within 60 s"
        # Frozen (SIGSTOP) wherever it is, lock held: it cannot finish before the second run has
        # started, however slow that start, and the run need not be long enough to outlast it.
        first.send_signal(signal.SIGSTOP)
        second = subprocess.run(
            _cli(*args, "--out", str(out)), capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
        )
        assert first.poll() is None, "the first run ended before the second one started"
        assert second.returncode == 2  # a usage error, as any bad --out
        err = " ".join(second.stderr.split())
        assert f"{out} is in use" in err and f"process {first.pid}" in err
        first.send_signal(signal.SIGKILL)  # the OS drops the lock with the process
        first.wait(timeout=30)
    finally:
        first.kill()
        first.wait(timeout=30)
    done_before = len(load_trajectories(out))
    assert done_before < episodes
    subprocess.run(_cli(*args, "--out", str(out)), check=True, capture_output=True, cwd=ROOT, timeout=300)
    played = load_trajectories(out)
    assert [t.index for t in played] == list(range(episodes))  # none missing
    rows = (out / "episodes.jsonl").read_text().splitlines()
    assert len({json.loads(row)["index"] for row in rows}) == len(rows) == episodes  # none duplicated


def test_a_bench_run_folder_held_by_another_process_is_refused(
    holder: tuple[Path, subprocess.Popen[str]], tmp_path: Path
) -> None:
    folder, proc = holder
    suite = tmp_path / "tiny-v1.yaml"
    suite.write_text(
        "name: tiny\nversion: 1\ndefaults: {episodes: 2, seed: 0, max_turns: 5}\nmetrics: [success_rate]\n"
        "entries:\n  - {name: lake, env: envgym/FrozenLake-v0, kwargs: {difficulty: easy}}\n",
        encoding="utf-8",
    )
    with pytest.raises(FolderInUseError, match=f"bench run folder is being written by process {proc.pid}"):
        run_suite(suite, "random", out=folder)
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_FILE]  # nothing written
    proc.kill()
    proc.wait(timeout=30)
    run = run_suite(suite, "random", out=folder)
    assert len(load_trajectories(folder / "entries" / "lake")) == 2
    assert (folder / "results.json").exists() and run.path == folder
    run_suite(suite, "random", out=folder)  # released after the first: resuming a finished run works


def test_a_training_folder_held_by_another_process_is_refused_before_the_model_loads(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    from envgym.trainer import TrainConfig, Trainer

    folder, proc = holder
    config = TrainConfig(env_id="envgym/FrozenLake-v0", model="tiny", device="cpu", updates=1, out=str(folder))
    trainer = Trainer(config)
    with pytest.raises(FolderInUseError, match=f"training folder is being written by process {proc.pid}"):
        trainer.train()
    assert trainer.policy is None  # refused before any model was built
    assert not (folder / "config.json").exists()
