"""Finite task pools and the task filter in the training loop: the pool's seeds are played pass
after pass in a seeded order, the filter drops tasks whose last groups were all solved or all
failed (never below ``groups_per_update`` tasks), the drops are in ``metrics.jsonl`` and in the
checkpoint, and a stopped run resumes to the same results.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
from test_trainer_loop import config

from envgym.trainer import Trainer, train
from envgym.trainer.metrics import comparable, read_metrics

#: 4 tasks, 2 groups of 4 per update, judged on their last group: drops come fast on the tiny model.
POOL: dict[str, Any] = {
    "task_pool": 4,
    "groups_per_update": 2,
    "group_size": 4,
    "task_filter": True,
    "task_filter_groups": 1,
    "updates": 6,
    "ppo_epochs": 2,
}


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Any:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def played(run: Path) -> dict[int, dict[int, list[bool]]]:
    """``{update: {task seed: [success of each episode]}}`` from the rollout records."""
    out: dict[int, dict[int, list[bool]]] = {}
    for file in sorted((run / "rollouts").glob("update-*/**/episodes.jsonl")):
        update = int(file.relative_to(run / "rollouts").parts[0].removeprefix("update-").split("-")[0])
        for line in file.read_text().splitlines():
            episode = json.loads(line)
            out.setdefault(update, {}).setdefault(episode["seed"], []).append(episode["success"])
    return out


def test_pool_seeds_cycle_without_a_filter(tmp_path: Path) -> None:
    rows = train(config(tmp_path, task_pool=4, groups_per_update=2, group_size=4, updates=2, ppo_epochs=1)).rows
    seeds = played(tmp_path / "run")
    assert [sorted(seeds[u]) for u in (1, 2)] != [[0, 1], [2, 3]]  # a shuffled order, not 0, 1, 2, 3
    assert sorted(list(seeds[1]) + list(seeds[2])) == [0, 1, 2, 3]  # one pass: every task once
    assert all(len(results) == 4 for update in seeds.values() for results in update.values())
    assert [(r["tasks/active"], r["tasks/passes"]) for r in rows] == [(4, 0), (4, 1)]
    assert "tasks/dropped" not in rows[0]


def test_task_filter_drops_settled_tasks_and_resumes_exactly(tmp_path: Path) -> None:
    straight = train(config(tmp_path / "a", **POOL))
    rows = straight.rows
    run = tmp_path / "a" / "run"
    seeds = played(run)
    dropped_at = {seed: row["update"] for row in rows for seed in row["tasks/dropped_seeds"]}
    assert dropped_at, "the tiny model settles some task within 6 updates"
    for row in rows:
        assert row["tasks/active"] >= 2 and row["tasks/active"] + row["tasks/dropped"] == 4
        assert row["tasks/dropped_solved"] + row["tasks/dropped_failed"] == len(row["tasks/dropped_seeds"])
    for update, groups in seeds.items():
        assert len(groups) == 2 and set(groups) <= {0, 1, 2, 3}  # two distinct pool tasks per update
        for seed, results in groups.items():
            assert len(results) == 4
            assert seed not in dropped_at or update <= dropped_at[seed]  # never played after its drop
    for seed, update in dropped_at.items():
        last = seeds[max(u for u in seeds if u <= update and seed in seeds[u])][seed]
        assert len(set(last)) == 1, (seed, last)  # its last group: all solved or all failed
    state = json.loads((straight.checkpoint / "state.json").read_text())
    assert sorted(map(tuple, state["task_pool"]["dropped"])) == sorted(dropped_at.items())
    assert state["task_filter"]["window"] == 1

    # Stopped during update 4's rollout, then resumed: the same metrics, drops included.
    trainer: Trainer

    def on_event(message: str) -> None:
        if message.startswith("update 4: rollout"):
            trainer.request_stop()

    trainer = Trainer(config(tmp_path / "b", **POOL), on_event=on_event)
    stopped = trainer.train()
    assert stopped.stopped and stopped.abandoned == 4 and stopped.final_update == 3
    resumed = train(config(tmp_path / "b", **POOL))
    assert resumed.start_update == 3
    assert [comparable(r) for r in read_metrics(tmp_path / "b" / "run")] == [comparable(r) for r in rows]
    assert played(tmp_path / "b" / "run") == seeds
