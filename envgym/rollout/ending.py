"""When an episode ends and why: the one copy of the harness's end-of-episode rules.

The runner applies them after every step it records, and the leaderboard's replay applies them
to every replayed step, so a replay ends an episode exactly where the run did.

The rules, in order:

1. the environment ended the episode (``terminated`` or ``truncated``): its
   ``info["termination_reason"]`` stands; when a wrapper ended it without one (Gymnasium's
   ``TimeLimit`` from ``max_episode_steps``), ``truncated`` means ``max_turns`` and
   ``terminated`` means ``success`` or ``failure`` from ``info["success"]``;
2. otherwise the harness's turn limit (``max_turns``, an outer cap over the environment's own
   ``max_turns`` kwarg, which is the authoritative one) or the prompt's turn allowance truncates
   with reason ``max_turns`` (``truncated_by="harness_max_turns"``);
3. otherwise an exhausted completion-token budget truncates with reason ``max_turns``
   (``truncated_by="token_budget"``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envgym.core import TerminationReason

__all__ = ["HARNESS_MAX_TURNS", "TOKEN_BUDGET", "EpisodeEnd", "episode_end", "split_timed_out"]

#: ``truncated_by`` values: who cut an episode that the environment had not ended.
HARNESS_MAX_TURNS = "harness_max_turns"
TOKEN_BUDGET = "token_budget"


@dataclass(frozen=True)
class EpisodeEnd:
    """How an episode ended.

    Attributes:
        reason: the termination reason recorded for the episode.
        success: ``info["success"]`` of the last step.
        truncated: the last turn's ``truncated`` flag as recorded (the harness's cut sets it).
        truncated_by: ``None`` when the environment ended the episode, else
            :data:`HARNESS_MAX_TURNS` or :data:`TOKEN_BUDGET`.
    """

    reason: TerminationReason
    success: bool
    truncated: bool
    truncated_by: str | None = None


def episode_end(
    *,
    terminated: bool,
    truncated: bool,
    info: Mapping[str, Any],
    turns: int,
    max_turns: int | None = None,
    turns_exhausted: bool = False,
    budget_exhausted: bool = False,
) -> EpisodeEnd | None:
    """The end of an episode after its ``turns``-th step, or ``None`` while it goes on.

    Args:
        terminated, truncated, info: what the environment's last ``step`` returned.
        turns: steps played so far, this one included.
        max_turns: the harness's turn limit (``None``: none).
        turns_exhausted: the prompt's own turn allowance is used up (chat agents).
        budget_exhausted: the episode's completion-token budget is used up (chat agents).
    """
    success = bool(info.get("success", False))
    if terminated or truncated:
        reason = info.get("termination_reason")
        if reason is None:  # ended by a wrapper (gymnasium.make(..., max_episode_steps=N))
            if truncated:
                reason = TerminationReason.MAX_TURNS
            else:
                reason = TerminationReason.SUCCESS if success else TerminationReason.FAILURE
        return EpisodeEnd(TerminationReason(str(getattr(reason, "value", reason))), success, bool(truncated))
    if (max_turns is not None and turns >= max_turns) or turns_exhausted:
        return EpisodeEnd(TerminationReason.MAX_TURNS, success, True, HARNESS_MAX_TURNS)
    if budget_exhausted:
        return EpisodeEnd(TerminationReason.MAX_TURNS, success, True, TOKEN_BUDGET)
    return None


def split_timed_out(items: list[Any], timeout_s: float | None) -> tuple[list[Any], list[tuple[Any, str, str]]]:
    """The live episodes (each with a ``t0``) still within ``timeout_s``, and a ``timeout`` failure
    ``(episode, kind, message)`` for each of the others (none when ``timeout_s`` is ``None``)."""
    if timeout_s is None:
        return items, []
    now = time.perf_counter()
    keep, failed = [], []
    for item in items:
        if now - item.t0 > timeout_s:
            failed.append((item, TerminationReason.TIMEOUT.value, f"episode ran past episode_timeout_s={timeout_s:g}"))
        else:
            keep.append(item)
    return keep, failed
