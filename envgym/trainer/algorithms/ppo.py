"""PPO: a value head on the policy, GAE advantages per episode (every episode end terminal),
whitened over the batch, and a clipped value loss (Schulman et al., 2017)."""

from __future__ import annotations

from envgym.trainer.algorithms.base import Advantages, Algorithm, Episodes

__all__ = ["PPO"]


class PPO(Algorithm):
    name = "ppo"
    summary = "value head + GAE"
    value_head = True
    group_relative = False
    whiten = True

    def advantages(self, episodes: Episodes) -> Advantages:
        import torch

        from envgym.trainer import advantages as adv_fns

        cfg = episodes.config
        per_turn, returns, values = [], [], []
        for traj, v in zip(episodes.trajectories, episodes.turn_values(), strict=True):
            rewards = torch.tensor(traj.rewards, dtype=torch.float32)
            adv, ret = adv_fns.gae(rewards, v, last_value=0.0, terminated=True, gamma=cfg.gamma, lam=cfg.lam)
            per_turn.append(adv)
            returns.append(ret)
            values.append(v)
        return Advantages(per_turn, returns, values)
