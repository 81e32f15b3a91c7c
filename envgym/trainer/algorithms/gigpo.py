"""GiGPO: GRPO's episode advantage plus a step-level one, from the discounted returns of the
turns that saw the same observation within a group (Feng et al., 2025)."""

from __future__ import annotations

from typing import ClassVar

from envgym.trainer.algorithms.base import Advantages, Algorithm, Episodes
from envgym.trainer.algorithms.grpo import group_episode_advantages

__all__ = ["GiGPO"]


class GiGPO(Algorithm):
    name = "gigpo"
    summary = "grpo plus step-level groups of identical observations"
    reward_norms: ClassVar[tuple[str, ...]] = ("sum", "gdpo")

    def advantages(self, episodes: Episodes) -> Advantages:
        import torch

        from envgym.trainer import advantages as adv_fns

        cfg = episodes.config
        trajs = episodes.trajectories
        episode_adv = group_episode_advantages(episodes, normalize_std=True)
        keys = [[turn.observation for turn in t.turns] for t in trajs]
        step_returns = [
            adv_fns.discounted_returns(torch.tensor(t.rewards, dtype=torch.float32), cfg.gamma) for t in trajs
        ]
        step_adv = adv_fns.gigpo_step_advantages(keys, step_returns, episodes.group_ids)
        return Advantages(adv_fns.combine_episode_and_step(episode_adv, step_adv, step_weight=cfg.step_weight))
