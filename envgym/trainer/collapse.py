"""Is the run still learning? Reward-variance and reply-diversity metrics, and a collapse monitor.

Group-relative algorithms (GRPO, RLOO, GiGPO) learn only from groups whose returns differ: when a
policy gives the same reply everywhere, every group's returns are equal, every advantage is zero
and the run spends its updates on nothing. The bundled 135M model does exactly this on FrozenLake
with the map view (it learns to answer a bare direction, then answers ``right`` to everything).
These metrics make that visible at every update, and :class:`CollapseMonitor` stops (or warns
about) a run stuck there:

=================================  ===============================================================
``episode/return_std``             standard deviation of the update's episode returns
``groups/zero_variance_share``     share of the update's task groups whose returns are all equal
``policy/top_reply_share``         share of the update's turns whose reply is the most common one
``policy/distinct_replies``        distinct replies among the update's turns, over the turns
``collapse/streak``                consecutive updates that met the collapse test (see below)
=================================  ===============================================================

A collapsed update: at least ``zero_variance`` of the groups have equal returns, and at least
``top_reply`` of the turns give one reply, while the success rate is below ``solved`` (a policy
that solves every task also has equal returns: that run is done, not collapsed, and the monitor
says so, after the same patience). ``patience`` such updates in a row end the run when the trainer's ``collapse`` is
``"stop"`` (``"warn"`` logs it; ``"off"`` ignores it).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CollapseMonitor", "diversity_metrics"]


def diversity_metrics(trajectories: Sequence[Any]) -> dict[str, float]:
    """Reward variance and reply diversity of one update's scored episodes (grouped by task seed)."""
    scored = [t for t in trajectories if getattr(t, "scored", True)]
    if not scored:
        return {}
    returns = [float(t.total_reward) for t in scored]
    mean = sum(returns) / len(returns)
    metrics: dict[str, float] = {"episode/return_std": math.sqrt(sum((r - mean) ** 2 for r in returns) / len(returns))}
    groups: dict[Any, list[float]] = {}
    for traj, ret in zip(scored, returns, strict=True):
        groups.setdefault((traj.env_id, traj.seed), []).append(ret)
    sized = [g for g in groups.values() if len(g) > 1]
    if sized:
        flat = sum(1 for g in sized if max(g) - min(g) <= 1e-9 * max(1.0, abs(max(g))))
        metrics["groups/zero_variance_share"] = flat / len(sized)
    replies = Counter(
        (turn.completion if turn.completion is not None else turn.action or "").strip()
        for traj in scored
        for turn in traj.turns
    )
    turns = sum(replies.values())
    if turns:
        metrics["policy/top_reply_share"] = replies.most_common(1)[0][1] / turns
        metrics["policy/distinct_replies"] = len(replies) / turns
    return metrics


@dataclass
class CollapseMonitor:
    """Counts consecutive collapsed updates (see the module docstring) and says when to stop.

    Args:
        patience: collapsed updates in a row that make a collapse.
        zero_variance: least share of equal-return groups of a collapsed update.
        top_reply: least share of turns with the most common reply of a collapsed update.
        solved: a success rate from which equal returns mean "solved", not "collapsed".
    """

    patience: int = 5
    zero_variance: float = 0.9
    top_reply: float = 0.9
    solved: float = 0.99
    streak: int = 0

    def observe(self, metrics: Mapping[str, Any]) -> str | None:
        """Record an update's metrics (adds ``collapse/streak``); the reason to stop, or ``None``."""
        share = metrics.get("groups/zero_variance_share")
        top = metrics.get("policy/top_reply_share")
        success = float(metrics.get("episode/success_rate", 0.0) or 0.0)
        if share is None or top is None:
            return None
        solved = share >= self.zero_variance and success >= self.solved
        collapsed = share >= self.zero_variance and top >= self.top_reply
        self.streak = self.streak + 1 if (solved or collapsed) else 0
        if isinstance(metrics, dict):
            metrics["collapse/streak"] = self.streak
        if self.streak < self.patience:
            return None
        if solved:
            return f"solved: success rate {success:.2f} with no reward variance left to learn from"
        return (
            f"collapsed: for {self.streak} updates {share:.0%} of the groups had equal returns and "
            f"{top:.0%} of the replies were the same (success rate {success:.2f}); the gradient is zero"
        )
