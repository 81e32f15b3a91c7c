"""envgym.vector.split_infos: Gymnasium's batched vector infos back to one dict per sub-environment."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv
from toy_envs import GuessEnv

import envgym
from envgym.vector import split_infos

ENV_ID = "envgym/Sokoban-v0"


class _Finisher(GuessEnv):
    """GuessEnv whose info names the secret only on the step that ends the episode (a key some envs lack)."""

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        if terminated:
            info["secret"] = {"value": self.secret, "tries": np.int64(self._turn)}
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_infos_split_into_each_envs_own_info(mode: str) -> None:
    envs = gym.make_vec(ENV_ID, num_envs=3, vectorization_mode=mode)
    try:
        _, infos = envs.reset(seed=10)
        per_env = split_infos(infos, envs.num_envs)
        actions = tuple(info["admissible_actions"][0] for info in per_env)
        _, _, _, _, stepped = envs.step(actions)
        after = split_infos(stepped, envs.num_envs)
    finally:
        envs.close()
    for i in range(3):  # make_vec seeds env i with seed + i: a plain env gives the same infos
        env = envgym.make(ENV_ID)
        _, info = env.reset(seed=10 + i)
        assert per_env[i] == info
        *_, info = env.step(actions[i])
        assert after[i] == info
        env.close()
    assert len({info["task"]["id"] for info in per_env}) == 3
    assert isinstance(per_env[0]["reward_components"]["success_reward"], float)  # not a numpy scalar


@pytest.mark.parametrize("vector", [SyncVectorEnv, AsyncVectorEnv])
def test_keys_only_some_envs_gave_follow_the_masks(vector: type) -> None:
    twin = _Finisher(high=3)
    twin.reset(seed=1)  # what env 1 draws: the vector env seeds env i with seed + i
    wrong = next(str(guess) for guess in (1, 2, 3) if guess != twin.secret)
    envs = vector([lambda: _Finisher(high=1), lambda: _Finisher(high=3)])  # high=1: "1" wins at once
    try:
        envs.reset(seed=0)
        _, _, terminated, _, infos = envs.step(("1", wrong))
    finally:
        envs.close()
    assert list(terminated) == [True, False]
    per_env = split_infos(infos, 2)
    assert per_env[0]["secret"] == {"value": 1, "tries": 1} and isinstance(per_env[0]["secret"]["tries"], int)
    assert per_env[0]["success"] is True and per_env[1]["success"] is False
    assert "secret" not in per_env[1]  # its mask is False: the key is left out, not filled with a 0
    assert not any(key.startswith("_") for info in per_env for key in info)


def test_what_is_not_a_vector_info_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match=r"infos\['a'\] has no mask '_a'"):
        split_infos({"a": np.zeros(2)}, 2)
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(2,\)"):
        split_infos({"a": np.zeros(3), "_a": np.ones(3, bool)}, 2)
    with pytest.raises(ValueError, match="num_envs must be a positive integer"):
        split_infos({}, 0)
    assert split_infos({}, 2) == [{}, {}]
