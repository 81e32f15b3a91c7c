"""A bench run folder after a crash: whatever instant the run was killed at, the same command
resumes it. Here the states a kill leaves are built directly; the real ``kill -9`` of
``envgym bench run`` is in ``tests/rollout/test_rundir_kill.py``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from crash_points import Killed, dies_at

from envgym._folderlock import LOCK_FILE
from envgym.bench.run import BenchRun, load_bench_run, run_suite
from envgym.bench.suite import load_suite
from envgym.errors import ConfigError

TINY = """\
name: tiny
version: 1
defaults: {episodes: 3, seed: 0, max_turns: 6}
metrics: [success_rate, mean_reward]
entries:
  - {name: lake, env: envgym/FrozenLake-v0, kwargs: {difficulty: easy}}
  - {name: boxes, env: envgym/Sokoban-v0, kwargs: {difficulty: easy}}
"""


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("suites") / "tiny-v1.yaml"
    path.write_text(TINY, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def straight(suite_file: Path, tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    return run_suite(suite_file, "random:2", out=tmp_path_factory.mktemp("runs") / "straight")


def _episodes(run: BenchRun) -> dict[str, list[dict[str, Any]]]:
    return {name: [t.comparable() for t in trajs] for name, trajs in run.per_entry().items()}


def _same_run(run: BenchRun, straight: BenchRun) -> None:
    assert _episodes(run) == _episodes(straight)
    for name in run.entry_names:  # one line per episode: nothing played twice
        rows = (run.entry_dir(name) / "episodes.jsonl").read_text().splitlines()
        assert sorted(json.loads(row)["index"] for row in rows) == list(range(3))
    got, want = run.results(), straight.results()
    assert got["complete"] and [e["success_rate"] for e in got["entries"]] == [
        e["success_rate"] for e in want["entries"]
    ]


def test_killed_between_suite_yaml_and_bench_json_resumes(
    suite_file: Path, straight: BenchRun, tmp_path: Path
) -> None:
    # The first two things a bench run writes are the lock file and suite.yaml; a kill before
    # bench.json leaves exactly these (and perhaps the temporary file of bench.json's write).
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_FILE).write_text("{}", encoding="utf-8")
    (folder / "suite.yaml").write_text(load_suite(suite_file).to_yaml(), encoding="utf-8")
    (folder / ".bench.json.k2j4x8.tmp").write_text('{"format": "envgym-be', encoding="utf-8")
    run = run_suite(suite_file, "random:2", out=folder)
    _same_run(run, straight)


def test_a_folder_that_is_not_a_bench_run_is_still_refused(suite_file: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "suite.yaml").write_text("my notes", encoding="utf-8")
    (folder / "thesis.tex").write_text("...", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not a bench run folder"):
        run_suite(suite_file, "random:2", out=folder)
    assert sorted(p.name for p in folder.iterdir()) == ["suite.yaml", "thesis.tex"]


def _interrupt(folder: Path, entry: str) -> None:
    """Make ``folder`` look like a run killed during ``entry``: its last episode and its summary
    never written."""
    records = folder / "entries" / entry / "episodes.jsonl"
    rows = records.read_text().splitlines(keepends=True)
    records.write_text("".join(rows[:-1]))
    (folder / "entries" / entry / "summary.json").unlink()
    (folder / "results.json").unlink()


def test_resume_leaves_suite_yaml_untouched(suite_file: Path, straight: BenchRun, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    run_suite(suite_file, "random:2", out=folder)
    _interrupt(folder, "boxes")
    suite_yaml = folder / "suite.yaml"
    before = suite_yaml.stat()
    time.sleep(0.02)  # a rewrite would show in the modification time
    run = run_suite(suite_file, "random:2", out=folder)
    after = suite_yaml.stat()
    # A rewrite in place would leave a window in which a kill truncates the resolved suite, and
    # `bench report` / `leaderboard submit` then refuse the folder (the hash no longer matches).
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    _same_run(run, straight)
    assert load_bench_run(folder).suite.sha256 == straight.suite.sha256


def test_a_torn_record_in_an_entry_resumes(suite_file: Path, straight: BenchRun, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    run_suite(suite_file, "random:2", out=folder)
    _interrupt(folder, "lake")
    records = folder / "entries" / "lake" / "episodes.jsonl"
    with records.open("ab") as f:  # the kill came in the middle of a record with a non-ASCII character
        f.write('{"record_version":1,"episode_id":"000002","final_observation":"\u2713'.encode()[:-1])
    partial = load_bench_run(folder)  # report and submit read the folder as it is
    assert partial.missing() == {"lake": 1} and not partial.results(recompute=True)["complete"]
    run = run_suite(suite_file, "random:2", out=folder)
    _same_run(run, straight)


def test_a_kill_at_any_write_of_a_bench_run_resumes_to_the_same_run(
    suite_file: Path, straight: BenchRun, tmp_path: Path
) -> None:
    with dies_at(None, tmp_path) as writes:
        run_suite(suite_file, "random:2", out=tmp_path / "counted")
    # bench.json, per entry config + meta + 3 records + summary, results.json (and suite.yaml first)
    assert "replace bench.json" in writes and len(writes) >= 14, writes
    for point, write in enumerate(writes):
        folder = tmp_path / f"killed-{point}"
        with pytest.raises(Killed), dies_at(point, folder):
            run_suite(suite_file, "random:2", out=folder)
        run = run_suite(suite_file, "random:2", out=folder)  # the same command again
        _same_run(run, straight)
        assert load_bench_run(folder).results()["complete"], write
