"""What a rubric may look at besides the step's reward components.

:class:`RewardContext` is what :class:`envgym.core.TextEnv` passes; :class:`StepContext` is what
the reward wrappers pass (it adds ``truncated``, ``base_reward`` and the episode's history).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["REWARD_CONTEXT_FIELDS", "WRAPPER_CONTEXT_FIELDS", "RewardContext", "StepContext", "StepRecord"]


@dataclass(frozen=True, slots=True)
class RewardContext:
    """What a rubric may look at besides the components of the current step."""

    action_text: str
    turn: int
    action_valid: bool
    terminated: bool
    success: bool
    task: Mapping[str, Any]
    progress: float | None = None


#: Fields every rubric may read: those of :class:`envgym.core.RewardContext`.
REWARD_CONTEXT_FIELDS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(RewardContext))
#: Fields the reward wrappers add in :class:`StepContext`.
WRAPPER_CONTEXT_FIELDS: frozenset[str] = REWARD_CONTEXT_FIELDS | {"truncated", "base_reward", "history"}


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One earlier step of the episode, as a history-reading rubric sees it."""

    components: Mapping[str, float]
    context: RewardContext


@dataclass(frozen=True, slots=True)
class StepContext(RewardContext):
    """The context the reward wrappers pass: :class:`RewardContext` plus episode-level fields.

    Attributes:
        truncated: the episode was cut at this step (time limit), see ``terminated`` for the rest.
        base_reward: the scalar reward the wrapped environment returned for this step.
        history: the earlier steps of this episode (oldest first); filled only for rubrics that
            read it.
    """

    truncated: bool = False
    base_reward: float | None = None
    history: tuple[StepRecord, ...] = ()
