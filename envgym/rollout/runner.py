"""In-process, lock-step episode runner (the embedded default).

Every turn, the live episodes' states go to the agent in one batch, so a batched model makes one
generation call per turn. Each episode's seed is ``seed + index``: the same arguments replay the
same tasks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from envgym.core import TerminationReason
from envgym.rollout.agent import Agent, AgentInput

__all__ = ["EpisodeResult", "run_episodes"]


@dataclass(slots=True)
class EpisodeResult:
    """Summary and action log of one finished episode."""

    episode_id: str
    env_id: str
    seed: int
    task_id: str
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    success: bool = False
    termination_reason: str = TerminationReason.MAX_TURNS.value
    turns: int = 0
    invalid_actions: int = 0
    reward_components: dict[str, float] = field(default_factory=dict)
    wall_time_s: float = 0.0

    @property
    def total_reward(self) -> float:
        return sum(self.rewards)


def run_episodes(
    env_id: str,
    agent: Agent,
    *,
    episodes: int,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    num_envs: int = 8,
    on_episode_end: Callable[[EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """Run ``episodes`` episodes of ``env_id`` with ``agent``, ``num_envs`` at a time, in order."""
    from envgym.registration import make  # noqa: PLC0415

    if episodes < 0:
        raise ValueError(f"episodes must be >= 0, got {episodes!r}.")
    kwargs = dict(env_kwargs or {})
    envs = [make(env_id, **kwargs) for _ in range(max(1, min(num_envs, episodes)))]
    results: list[EpisodeResult | None] = [None] * episodes
    next_index = 0
    live: dict[int, tuple[Any, EpisodeResult, str, dict[str, Any], float]] = {}

    def start(slot: int) -> None:
        nonlocal next_index
        index = next_index
        next_index += 1
        env = envs[slot]
        episode_seed = seed + index
        obs, info = env.reset(seed=episode_seed)
        episode_id = f"{index:06d}"
        agent.start_episode(episode_id, env_id, episode_seed)
        result = EpisodeResult(episode_id=episode_id, env_id=env_id, seed=episode_seed, task_id=str(info["task"]["id"]))
        result.reward_components = dict.fromkeys(info["reward_components"], 0.0)
        live[slot] = (index, result, obs, info, time.perf_counter())

    try:
        for slot in range(len(envs)):
            if next_index < episodes:
                start(slot)
        while live:
            slots = sorted(live)
            batch = [
                AgentInput(
                    live[s][1].episode_id,
                    env_id,
                    live[s][2],
                    live[s][3],
                    live[s][1].turns,
                    sample_action=getattr(envs[s].unwrapped, "sample_action", None),
                )
                for s in slots
            ]
            outputs = agent.act(batch)
            if len(outputs) != len(batch):
                raise RuntimeError(f"agent {agent.name!r} returned {len(outputs)} outputs for {len(batch)} inputs.")
            for s, output in zip(slots, outputs):
                index, result, _, _, started = live[s]
                obs, reward, terminated, truncated, info = envs[s].step(output.text)
                result.actions.append(output.text)
                result.rewards.append(float(reward))
                result.turns += 1
                for key, value in info["reward_components"].items():
                    result.reward_components[key] = result.reward_components.get(key, 0.0) + value
                if terminated or truncated:
                    result.success = bool(info["success"])
                    reason = info["termination_reason"]
                    if reason is None:  # ended by a wrapper (gymnasium.make(..., max_episode_steps=N))
                        if truncated:
                            reason = TerminationReason.MAX_TURNS
                        else:
                            reason = TerminationReason.SUCCESS if result.success else TerminationReason.FAILURE
                    result.termination_reason = str(reason)
                    result.invalid_actions = int(info["invalid_actions"])
                    result.wall_time_s = time.perf_counter() - started
                    results[index] = result
                    agent.end_episode(result.episode_id)
                    del live[s]
                    if on_episode_end is not None:
                        on_episode_end(result)
                    if next_index < episodes:
                        start(s)
                else:
                    live[s] = (index, result, obs, info, started)
    finally:
        for env in envs:
            env.close()
    return [r for r in results if r is not None]
