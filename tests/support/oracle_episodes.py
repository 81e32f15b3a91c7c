"""The oracle's episode of a seed, played in-process: what the trainer adapters' tests compare with."""

from __future__ import annotations

from typing import Any

from envgym.agents.oracle import load_solver

import envgym


def oracle_episode(env_id: str, seed: int) -> tuple[list[str], list[float], list[dict[str, float]], dict[str, Any]]:
    """The oracle's actions for ``seed`` played in-process: actions, rewards, components, last info."""
    env = envgym.make(env_id)
    obs, info = env.reset(seed=seed)
    policy = load_solver(env_id)(env_id, seed)
    actions, rewards, components = [], [], []
    while True:
        action = policy.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        rewards.append(float(reward))
        components.append(dict(info["reward_components"]))
        if terminated or truncated:
            env.close()
            return actions, rewards, components, info
