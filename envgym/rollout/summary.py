"""Run summaries: the numbers a report shows, computed once from trajectories.

Scores (success rate, returns, turns, reward components) are over the *scored* episodes only;
episodes ended by an infrastructure failure (``env_error``, ``agent_error``, ``timeout``) are
counted apart in ``infra_errors`` and never enter a mean as a zero.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from envgym.rollout.records import Trajectory

__all__ = ["summarize"]


def summarize(trajectories: Sequence[Trajectory], wall_time_s: float) -> dict[str, Any]:
    """Aggregate ``trajectories`` into a flat, JSON-ready dict.

    Keys: episodes (all), scored, success_rate, mean_return, std_return, mean_turns, steps,
    invalid_actions (total), invalid_per_episode, format_error_rate (chat agents, else None),
    mean_reward_components, termination_reasons, infra_errors (by reason), retries (extra
    attempts over all episodes), prompt_tokens, completion_tokens, wall_time_s, steps_per_s.
    """
    scored = [t for t in trajectories if t.scored]
    n = len(scored)
    returns = [t.total_reward for t in scored]
    turns = [t.num_turns for t in scored]
    invalid = [t.invalid_actions for t in scored]
    keys: list[str] = []
    for t in scored:
        keys.extend(k for k in t.reward_components if k not in keys)
    components = {k: (math.fsum(t.reward_components.get(k, 0.0) for t in scored) / n if n else 0.0) for k in keys}
    formats = [turn.format_ok for t in scored for turn in t.turns if turn.format_ok is not None]
    steps = sum(t.num_turns for t in trajectories)
    return {
        "episodes": len(trajectories),
        "scored": n,
        "success_rate": (sum(1 for t in scored if t.success) / n) if n else None,
        "mean_return": statistics.fmean(returns) if n else None,
        "std_return": statistics.pstdev(returns) if n else None,
        "mean_turns": statistics.fmean(turns) if n else None,
        "steps": steps,
        "invalid_actions": sum(invalid),
        "invalid_per_episode": (sum(invalid) / n) if n else None,
        "format_error_rate": (sum(1 for ok in formats if not ok) / len(formats)) if formats else None,
        "mean_reward_components": components,
        "termination_reasons": dict(Counter(t.termination_reason for t in trajectories)),
        "infra_errors": dict(Counter(t.termination_reason for t in trajectories if not t.scored)),
        "retries": sum(max(0, t.attempts - 1) for t in trajectories),
        "prompt_tokens": sum(t.prompt_tokens for t in trajectories),
        "completion_tokens": sum(t.completion_tokens for t in trajectories),
        "wall_time_s": round(wall_time_s, 4),
        "steps_per_s": round(steps / wall_time_s, 1) if wall_time_s > 0 else None,
    }
