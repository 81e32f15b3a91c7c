"""GRPO and Dr. GRPO: each episode's return (or each reward component, with GDPO) normalised
within its group; Dr. GRPO drops the division by the group's standard deviation and sums the loss
over tokens (Liu et al., 2025)."""

from __future__ import annotations

from typing import ClassVar

from envgym.trainer.algorithms.base import Advantages, Algorithm, Episodes, episode_advantages_to_turns

__all__ = ["GRPO", "DrGRPO", "group_episode_advantages"]


def group_episode_advantages(episodes: Episodes, *, normalize_std: bool) -> object:
    """``[N]`` episode advantages: returns (or, with ``reward_norm='gdpo'``, every reward
    component on its own, then summed) normalised within their group."""
    import torch

    from envgym.trainer import advantages as adv_fns

    trajs = episodes.trajectories
    if episodes.config.reward_norm == "gdpo":
        names = sorted({k for t in trajs for k in t.reward_components})
        components = {name: torch.tensor([float(t.reward_components.get(name, 0.0)) for t in trajs]) for name in names}
        return adv_fns.gdpo_advantages(components, episodes.group_ids, normalize_std=normalize_std)
    return adv_fns.grpo_advantages(episodes.returns, episodes.group_ids, normalize_std=normalize_std)


class GRPO(Algorithm):
    name = "grpo"
    summary = "group-normalised returns"
    reward_norms: ClassVar[tuple[str, ...]] = ("sum", "gdpo")
    normalize_std: ClassVar[bool] = True

    def advantages(self, episodes: Episodes) -> Advantages:
        adv = group_episode_advantages(episodes, normalize_std=self.normalize_std)
        return Advantages(episode_advantages_to_turns(adv, episodes.trajectories))


class DrGRPO(GRPO):
    name = "dr_grpo"
    summary = "no std division, token-sum loss"
    normalize_std = False
    default_aggregation = "seq-mean-token-sum-norm"
