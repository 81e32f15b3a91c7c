"""Training rollouts with the environments on worker pools: the policy generates in the trainer's
process and the environments step in worker processes (``rollout_backend="process"``) or Ray
actors (``"ray"``); the same seed gives the same metrics as the in-process backend.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
from test_trainer_loop import config

from envgym.trainer import train
from envgym.trainer.metrics import comparable

#: Two-turn episodes (the second prompt carries the history), two short updates.
SETTINGS: dict[str, Any] = {
    "updates": 2,
    "groups_per_update": 2,
    "group_size": 4,
    "ppo_epochs": 1,
    "env_kwargs": {"turns": 2},
    "max_turns": 3,
    "eval_every": 2,
    "eval_episodes": 2,
}


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def inproc_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    rows = train(config(tmp_path_factory.mktemp("inproc"), **SETTINGS)).rows
    assert [r["update"] for r in rows] == [0, 1, 2] and rows[1]["episode/turns"] == 2
    return [comparable(r) for r in rows]


def test_process_backend_gives_the_inproc_metrics(tmp_path: Path, inproc_rows: list[dict[str, Any]]) -> None:
    result = train(config(tmp_path, rollout_backend="process", rollout_workers=2, **SETTINGS))
    assert [comparable(r) for r in result.rows] == inproc_rows
    rollout = (tmp_path / "run" / "rollouts" / "update-000001" / "config.json").read_text()
    assert '"backend": "process"' in rollout and '"workers": 2' in rollout
    # The backend may change when a run resumes: it moves the environments, not the episodes.
    more = train(config(tmp_path, **{**SETTINGS, "updates": 3}))
    assert more.start_update == 2 and [r["update"] for r in more.rows] == [3]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A 1-CPU local Ray (or the session's, when another test started one)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (pip install 'envgym[ray]'): the ray rollout backend is not tested")
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


def test_ray_backend_gives_the_inproc_metrics(
    tmp_path: Path, inproc_rows: list[dict[str, Any]], local_ray: Any
) -> None:
    result = train(config(tmp_path, rollout_backend="ray", rollout_workers=1, **SETTINGS))
    assert [comparable(r) for r in result.rows] == inproc_rows
    assert local_ray.is_initialized()  # the trainer leaves a Ray it did not start running
