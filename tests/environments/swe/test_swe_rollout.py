"""SWE episodes through the rollout harness: in process, in the process pool and on Ray (one sandbox
per episode, each opened in the worker that plays it), with the same records everywhere."""

from __future__ import annotations

import json
from typing import Any

import pytest
from envgym.environments.swe.tasks import select_tasks

import envgym
from envgym.rollout import RunConfig, Runner
from envgym.rollout.records import Trajectory, episode_record

BASE = {
    "env_id": "envgym/SWE-v0",
    "env_kwargs": {"split": "test"},
    "episodes": 2,
    "seed": 0,
    "num_envs": 2,
    "agent": "oracle",
}


@pytest.fixture(autouse=True)
def _needs_the_env() -> None:
    try:
        envgym.make("envgym/SWE-v0", split="test").close()
    except envgym.errors.MissingDependencyError as err:
        pytest.skip(str(err))


def _run(**settings: Any) -> list[Any]:
    return Runner(RunConfig(**{**BASE, **settings})).run().trajectories


def test_oracle_episodes_match_in_process_and_in_the_process_pool() -> None:
    inproc = _run()
    pooled = _run(backend="process", workers=2)
    assert [t.success for t in inproc] == [True, True]
    assert [t.comparable() for t in inproc] == [t.comparable() for t in pooled]  # model_patch included
    assert len({t.task_id for t in inproc}) == 2
    # the episode record keeps the final diff (SWE-bench's model_patch): the oracle's one-line fix
    tasks = {t.id: t for t in select_tasks("test")}
    for traj in inproc:
        task = tasks[traj.task_id]
        patch = traj.extra["model_patch"]
        assert patch.startswith(f"diff --git a/{task.file} b/{task.file}\n") and patch.count("diff --git") == 1
        assert f"\n-{task.mutated.splitlines()[0]}\n" in patch and f"\n+{task.original.splitlines()[0]}\n" in patch
        assert episode_record(traj)["model_patch"] == patch
        assert Trajectory.from_dict(json.loads(json.dumps(traj.to_dict()))).extra["model_patch"] == patch


@pytest.mark.slow
def test_oracle_episodes_match_on_ray(ray_instance: Any) -> None:
    inproc = _run()
    on_ray = _run(backend="ray", workers=2)
    assert [t.comparable() for t in inproc] == [t.comparable() for t in on_ray]
    assert all(t.success for t in on_ray)
