"""RLOO: each episode's return minus the mean return of the other episodes of its group
(Ahmadian et al., 2024)."""

from __future__ import annotations

from envgym.trainer.algorithms.base import Advantages, Algorithm, Episodes, episode_advantages_to_turns

__all__ = ["RLOO"]


class RLOO(Algorithm):
    name = "rloo"
    summary = "leave-one-out baseline"

    def advantages(self, episodes: Episodes) -> Advantages:
        from envgym.trainer import advantages as adv_fns

        adv = adv_fns.rloo_advantages(episodes.returns, episodes.group_ids)
        return Advantages(episode_advantages_to_turns(adv, episodes.trajectories))
