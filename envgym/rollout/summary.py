"""Run summaries: the numbers a report shows, computed once from trajectories.

Scores (success rate, returns, turns, reward components) are over the *scored* episodes only;
episodes ended by an infrastructure failure (``env_error``, ``agent_error``, ``timeout``) are
counted apart in ``infra_errors`` and never enter a mean as a zero.

Success is not defined for every environment: a game scored only by its returns (most
coopetition games) says so with ``info["task"]["success_defined"] = False``
(:data:`SUCCESS_DEFINED`). Its episodes stay out of the success rate, which is ``None`` (shown as
"—", not 0 %) when no scored episode defines success.
"""

from __future__ import annotations

import collections
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from envgym.rollout.records import Trajectory

__all__ = ["SUCCESS_DEFINED", "defines_success", "summarize", "summarize_multiagent"]

#: The ``info["task"]`` key by which an environment says its episodes have no success (``False``);
#: absent or true: success is defined (``info["success"]`` says whether the episode reached it).
SUCCESS_DEFINED = "success_defined"


def defines_success(trajectory: Trajectory) -> bool:
    """Whether success means something for ``trajectory``'s task (see :data:`SUCCESS_DEFINED`)."""
    task = trajectory.task if isinstance(trajectory.task, dict) else {}
    return task.get(SUCCESS_DEFINED) is not False


def summarize(
    trajectories: Sequence[Trajectory], wall_time_s: float, *, played: Sequence[Trajectory] | None = None
) -> dict[str, Any]:
    """Aggregate ``trajectories`` into a flat, JSON-ready dict.

    Args:
        trajectories: every episode of the run (a resumed run's earlier ones included).
        wall_time_s: how long this session took to play ``played``.
        played: the episodes this session played (default: all of ``trajectories``). Speed is
            over these only: a resumed run's earlier episodes took time this session did not see.

    Keys: episodes (all), scored, success_rate, mean_return, std_return, mean_turns, steps,
    invalid_actions (total), invalid_per_episode, format_error_rate (chat agents, else None),
    success_defined (False when no scored episode's task defines success; its success_rate is then
    None), mean_reward_components, termination_reasons, infra_errors (by reason), retries (extra
    attempts over all episodes), prompt_tokens, completion_tokens, wall_time_s (this session's),
    steps_played (this session's steps), steps_per_s (steps_played / wall_time_s; None when this
    session played nothing).
    """
    scored = [t for t in trajectories if t.scored]
    n = len(scored)
    judged = [t for t in scored if defines_success(t)]  # the success rate is over these
    returns = [t.total_reward for t in scored]
    turns = [t.num_turns for t in scored]
    invalid = [t.invalid_actions for t in scored]
    keys: list[str] = []
    for t in scored:
        keys.extend(k for k in t.reward_components if k not in keys)
    components = {k: (math.fsum(t.reward_components.get(k, 0.0) for t in scored) / n if n else 0.0) for k in keys}
    formats = [turn.format_ok for t in scored for turn in t.turns if turn.format_ok is not None]
    steps = sum(t.num_turns for t in trajectories)
    steps_played = steps if played is None else sum(t.num_turns for t in played)
    return {
        "episodes": len(trajectories),
        "scored": n,
        "success_rate": (sum(1 for t in judged if t.success) / len(judged)) if judged else None,
        "success_defined": bool(judged) or not scored,
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
        "steps_played": steps_played,
        "steps_per_s": round(steps_played / wall_time_s, 1) if wall_time_s > 0 and steps_played else None,
    }


def summarize_multiagent(trajectories: Sequence[Trajectory]) -> dict[str, Any] | None:
    """Run-level multi-agent numbers over the scored episodes (``None`` without multi-agent records).

    Keys: ``episodes`` (distinct scored episodes), ``agents_per_episode``, ``mean_joint_return``,
    ``mean_return_by_agent``, ``mean_return_by_policy``, ``mean_return_gap``, ``mean_rounds``,
    ``mean_invalid_rounds`` and ``mean_final`` (per number of the environment's final info).
    """
    episodes: dict[str, dict[str, Any]] = {}
    by_agent: dict[str, list[float]] = collections.defaultdict(list)
    by_policy: dict[str, list[float]] = collections.defaultdict(list)
    for t in trajectories:
        meta = t.extra.get("multiagent") if isinstance(t.extra, dict) else None
        if not isinstance(meta, dict) or not t.scored:
            continue
        by_agent[str(meta.get("agent_id"))].append(float(t.total_reward))
        by_policy[str(t.agent)].append(float(t.total_reward))
        episodes.setdefault(str(meta.get("episode_id")), meta)
    if not episodes:
        return None
    metas = list(episodes.values())
    finals: dict[str, list[float]] = collections.defaultdict(list)
    for meta in metas:
        for key, value in (meta.get("final") or {}).items():
            finals[key].append(float(value))

    def mean(key: str) -> float:
        return statistics.fmean(float(m.get(key, 0.0)) for m in metas)

    return {
        "episodes": len(metas),
        "agents_per_episode": max(len(m.get("agents", ())) for m in metas),
        "mean_joint_return": mean("joint_return"),
        "mean_return_by_agent": {a: statistics.fmean(v) for a, v in sorted(by_agent.items())},
        "mean_return_by_policy": {p: statistics.fmean(v) for p, v in sorted(by_policy.items())},
        "mean_return_gap": mean("return_gap"),
        "mean_rounds": mean("rounds"),
        "mean_invalid_rounds": mean("invalid_rounds"),
        "mean_final": {k: statistics.fmean(v) for k, v in sorted(finals.items())},
    }
