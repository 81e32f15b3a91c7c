"""A run folder that a run made new and left without an episode or a summary is taken away on
close, so a run that fails before its first episode leaves nothing that refuses the next one."""

from __future__ import annotations

from pathlib import Path

from envgym.rollout.records import Trajectory
from envgym.rollout.rundir import RunFolder


def test_a_new_folder_closed_empty_is_removed(tmp_path: Path) -> None:
    RunFolder(tmp_path / "run", {"env_id": "x"}, ["env_id"]).close()
    assert not (tmp_path / "run").exists()


def test_a_folder_the_user_made_stays_and_only_our_files_go(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine\n")
    RunFolder(tmp_path / "run", {"env_id": "x"}, ["env_id"]).close()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["notes.txt"]


def test_a_folder_with_an_episode_or_a_summary_stays(tmp_path: Path) -> None:
    with RunFolder(tmp_path / "a", {"env_id": "x"}, ["env_id"]) as folder:
        folder.append(Trajectory(episode_id="x-0", index=0, env_id="x", seed=0, agent="random"))
    with RunFolder(tmp_path / "b", {"env_id": "x"}, ["env_id"]) as folder:
        folder.write_summary({"episodes": 0})
    assert {"config.json", "meta.json", "episodes.jsonl"} <= {p.name for p in (tmp_path / "a").iterdir()}
    assert {"config.json", "meta.json", "summary.json"} <= {p.name for p in (tmp_path / "b").iterdir()}


def test_a_resumed_folder_is_never_removed(tmp_path: Path) -> None:
    with RunFolder(tmp_path / "run", {"env_id": "x"}, ["env_id"]) as folder:
        folder.write_summary({"episodes": 0})
    RunFolder(tmp_path / "run", {"env_id": "x"}, ["env_id"]).close()  # a session that wrote nothing
    assert (tmp_path / "run" / "config.json").is_file() and (tmp_path / "run" / "summary.json").is_file()
