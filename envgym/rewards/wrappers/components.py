"""Plain per-step components: outcome, format validity, invalid-action penalty and step cost."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from envgym.rewards.wrappers.base import RewardLayer, _finite
from envgym.rubric import (
    RubricError,
    RubricSpec,
)


class OutcomeReward(RewardLayer):
    """Outcome (success) reward for any environment that reports ``info["success"]``.

    Pays ``success`` on the step that terminates the episode successfully and ``failure`` on a
    terminal failure (truncation is not an outcome). At most one payment per episode.

    Args:
        success: value on success.
        failure: value on a terminal failure (0 by default; make it negative to punish losing).
        name: component name (default ``outcome_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "outcome_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        success: float = 1.0,
        failure: float = 0.0,
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        self.success_value = _finite(success, "OutcomeReward success")
        self.failure_value = _finite(failure, "OutcomeReward failure")
        if self.failure_value > self.success_value:
            raise RubricError(
                f"OutcomeReward: failure ({failure!r}) must not exceed success ({success!r}), or losing pays more."
            )
        super().__init__(env, name=name, rubric=rubric)
        self._paid = False

    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        if "success" not in info:
            raise RubricError(
                f"OutcomeReward needs info['success'] from {type(self.env.unwrapped).__name__}, which its reset() "
                f"info lacks (keys: {', '.join(sorted(info)) or 'none'}). Report success in info to use it."
            )
        self._paid = False

    def _component(
        self,
        action: Any,
        text: str,
        observation: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> float:
        if not terminated or self._paid:
            return 0.0
        self._paid = True
        return self.success_value if info.get("success") else self.failure_value


class FormatReward(RewardLayer):
    """Format validity of the agent's raw text.

    Well-formed means: every tag of ``tags`` appears exactly once as ``<tag>...</tag>`` with
    non-empty content, in the given order (when ``ordered``), without nesting, and nothing but
    whitespace lies outside the blocks (unless ``allow_outside_text``). Non-string actions are
    malformed.

    The defaults make the component non-positive (0 for well-formed, ``invalid`` otherwise), so
    it can only be avoided, never farmed. A positive ``valid`` bonus is allowed but paid on every
    step: an agent can farm it by stalling, so pair it with a step cost or a gate.

    Args:
        tags: required tags, e.g. ``("think", "action")``.
        valid: value for well-formed output.
        invalid: value for malformed output.
        ordered: the tags must appear in the order given.
        allow_outside_text: text outside the tag blocks is allowed.
        name: component name (default ``format_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "format_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        tags: Sequence[str] = ("action",),
        valid: float = 0.0,
        invalid: float = -0.1,
        ordered: bool = True,
        allow_outside_text: bool = False,
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        if isinstance(tags, str) or not tags or not all(isinstance(t, str) and re.fullmatch(r"\w+", t) for t in tags):
            raise RubricError(
                f"FormatReward tags must be a non-empty list of tag names such as ('think', 'action'), got {tags!r}."
            )
        if len({t.lower() for t in tags}) != len(tags):
            raise RubricError(f"FormatReward tags must be distinct, got {tags!r}.")
        self.tags = tuple(t.lower() for t in tags)
        self.valid_value = _finite(valid, "FormatReward valid")
        self.invalid_value = _finite(invalid, "FormatReward invalid")
        if self.invalid_value > self.valid_value:
            raise RubricError(f"FormatReward: invalid ({invalid!r}) must not exceed valid ({valid!r}).")
        self.ordered = bool(ordered)
        self.allow_outside_text = bool(allow_outside_text)
        names = "|".join(self.tags)
        self._token = re.compile(rf"<\s*(/?)\s*({names})\s*>", re.IGNORECASE)
        super().__init__(env, name=name, rubric=rubric)

    def well_formed(self, text: Any) -> bool:
        """Whether ``text`` follows the format."""
        if not isinstance(text, str):
            return False
        blocks: list[str] = []
        outside: list[str] = []
        position = 0
        open_tag: str | None = None
        open_end = 0
        for match in self._token.finditer(text):
            closing, tag = match.group(1) == "/", match.group(2).lower()
            if open_tag is None:
                if closing:
                    return False
                outside.append(text[position : match.start()])
                open_tag, open_end = tag, match.end()
            else:
                if not closing or tag != open_tag:
                    return False
                if not text[open_end : match.start()].strip():
                    return False
                blocks.append(tag)
                open_tag = None
                position = match.end()
        if open_tag is not None:
            return False
        outside.append(text[position:])
        if sorted(blocks) != sorted(self.tags):
            return False
        if self.ordered and blocks != list(self.tags):
            return False
        return self.allow_outside_text or not "".join(outside).strip()

    def _component(
        self,
        action: Any,
        text: str,
        observation: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> float:
        return self.valid_value if self.well_formed(action) else self.invalid_value


class InvalidActionPenalty(RewardLayer):
    """A penalty on every step whose ``info["action_valid"]`` is false.

    ``TextEnv`` environments already emit ``invalid_action_reward`` (set ``invalid_penalty=`` on
    them); this wrapper gives the same component to other environments.

    Args:
        penalty: value on an invalid step (<= 0).
        name: component name (default ``invalid_action_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "invalid_action_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        penalty: float = -0.1,
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        self.penalty = _finite(penalty, "InvalidActionPenalty penalty")
        if self.penalty > 0:
            raise RubricError(
                f"InvalidActionPenalty penalty must be <= 0, got {penalty!r}; a positive value rewards invalid actions."
            )
        super().__init__(env, name=name, rubric=rubric)

    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        if "action_valid" not in info:
            raise RubricError(
                f"InvalidActionPenalty needs info['action_valid'] from {type(self.env.unwrapped).__name__}, which its "
                f"reset() info lacks. Report action validity in info to use it."
            )

    def _component(
        self,
        action: Any,
        text: str,
        observation: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> float:
        return 0.0 if info.get("action_valid", True) else self.penalty


class StepCost(RewardLayer):
    """A constant cost on every step (a pressure towards short episodes).

    Args:
        cost: value on every step (<= 0).
        name: component name (default ``step_cost_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "step_cost_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        cost: float = -0.01,
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        self.cost = _finite(cost, "StepCost cost")
        if self.cost > 0:
            raise RubricError(f"StepCost cost must be <= 0, got {cost!r}; a positive value pays for stalling.")
        super().__init__(env, name=name, rubric=rubric)

    def _component(
        self,
        action: Any,
        text: str,
        observation: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> float:
        return self.cost
