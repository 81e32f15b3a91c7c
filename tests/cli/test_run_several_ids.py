"""``envgym run ID ID ...``: several environments in one run, one lock-step batch, one table each,
each id's episodes exactly those of a run of it alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from envgym.cli import app
from envgym.rollout import load_trajectories

runner = CliRunner()
IDS = ("envgym/FrozenLake-v0", "envgym/Sokoban-v0")


def run_json(*args: str) -> Any:
    result = runner.invoke(app, ["run", *args, "--json", "--no-progress", "--per-episode"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_each_id_plays_the_episodes_of_a_run_of_it_alone(tmp_path: Path) -> None:
    together = run_json(*IDS, "-a", "random:3", "-n", "6", "-g", "2", "--max-turns", "12", "--out", str(tmp_path / "r"))
    assert [r["env_id"] for r in together["runs"]] == list(IDS)
    assert together["combined"]["episodes"] == 12
    by_id: dict[str, list[Any]] = {}
    for episode in together["per_episode"]:
        by_id.setdefault(episode["env_id"], []).append(episode)
    for env_id, summary in zip(IDS, together["runs"], strict=True):
        alone = run_json(env_id, "-a", "random:3", "-n", "6", "-g", "2", "--max-turns", "12")
        for key in ("episodes", "success_rate", "mean_return", "steps", "invalid_actions"):
            assert summary[key] == alone[key], (env_id, key)
        keys = ("seed", "group", "member", "total_reward", "num_turns", "success")
        mine = [{k: e[k] for k in keys} for e in by_id[env_id]]
        assert mine == [{k: e[k] for k in keys} for e in alone["per_episode"]]
    # One folder, distinct episode numbers, tagged by id; running again resumes (nothing added).
    records = load_trajectories(tmp_path / "r")
    assert len({t.index for t in records}) == 12
    assert {t.episode_id.split("/")[0] for t in records} == {"FrozenLake-v0", "Sokoban-v0"}
    run_json(*IDS, "-a", "random:3", "-n", "6", "-g", "2", "--max-turns", "12", "--out", str(tmp_path / "r"))
    assert len((tmp_path / "r" / "episodes.jsonl").read_text().splitlines()) == 12


def test_bad_combinations_are_usage_errors() -> None:
    for args, message in (
        (("all", "--kwargs", "difficulty=easy"), "--kwargs applies to one environment"),  # several ids: every id
        (("all", IDS[0]), "'all' runs every environment"),
        ((IDS[0], IDS[0]), "names one twice"),
        ((*IDS, "-n", "3", "-g", "2"), "multiple of --group-size"),
    ):
        result = runner.invoke(app, ["run", *args, "--no-progress"])
        assert result.exit_code == 2, (args, result.output)
        assert message in " ".join(result.output.split()), (args, result.output)
