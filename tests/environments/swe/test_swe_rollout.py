"""SWE episodes through the rollout harness: in process, in the process pool and on Ray (one sandbox
per episode, each opened in the worker that plays it), with the same records everywhere."""

from __future__ import annotations

from typing import Any

import pytest

import envgym
from envgym.rollout import RunConfig, Runner

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
    assert [t.comparable() for t in inproc] == [t.comparable() for t in pooled]
    assert len({t.task_id for t in inproc}) == 2


@pytest.mark.slow
def test_oracle_episodes_match_on_ray(ray_instance: Any) -> None:
    inproc = _run()
    on_ray = _run(backend="ray", workers=2)
    assert [t.comparable() for t in inproc] == [t.comparable() for t in on_ray]
    assert all(t.success for t in on_ray)
