"""The trainer with ``rollout_backend="remote"``: the tiny policy generates here, the envs step in
an envgym serve server, and one update gives the metrics and the weights of the in-process backend."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from envgym.errors import ConfigError
from envgym.serve import Server
from envgym.trainer import TrainConfig, train
from envgym.trainer.metrics import comparable

ENV = "envgym/Wordle-v0"


def _config(tmp_path: Path, **changes: Any) -> TrainConfig:
    values: dict[str, Any] = {
        "env_id": ENV,
        "model": "tiny",
        "device": "cpu",
        "algo": "grpo",
        "group_size": 2,
        "groups_per_update": 1,
        "updates": 1,
        "ppo_epochs": 1,
        "max_new_tokens": 2,
        "max_turns": 2,
        "micro_batch_size": 4,
        "generation_batch_size": 4,
        "checkpoint_every": 0,
        "eval_every": 0,
        "tensorboard": False,
        "out": str(tmp_path / "run"),
    }
    values.update(changes)
    return TrainConfig(**values)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with Server([ENV]) as live:
        yield live
    torch.set_num_threads(threads)


@pytest.mark.slow  # two trainings of the tiny model (~20 s on 2 busy cores)
def test_one_update_on_served_envs_matches_the_inproc_update(server: Server, tmp_path: Path) -> None:
    local = train(_config(tmp_path / "inproc"))
    served = train(_config(tmp_path / "remote", rollout_backend="remote", rollout_url=server.url))
    assert [r["update"] for r in served.rows] == [1] and served.rows[0]["episode/turns"] > 0
    assert [comparable(r) for r in served.rows] == [comparable(r) for r in local.rows]
    rollout = (tmp_path / "remote" / "run" / "rollouts" / "update-000001" / "config.json").read_text()
    assert '"backend": "remote"' in rollout and server.url in rollout
    with pytest.raises(ConfigError, match="give both or neither"):
        _config(tmp_path, rollout_backend="remote")
