"""RLVMR-style meta-reasoning rewards for ``<plan>``, ``<explore>`` and ``<reflect>`` segments."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym

from envgym.core import TextEnv, extract_action
from envgym.errors import suggest
from envgym.rewards.wrappers.base import RewardLayer, _finite
from envgym.rubric import (
    RubricError,
    RubricSpec,
)


def _norm(text: str) -> str:
    """Case-, accent- and whitespace-insensitive form used to spot repeated or echoed text."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


_SEGMENT_CACHE: dict[tuple[str, ...], re.Pattern[str]] = {}


class MetaReasoningReward(RewardLayer):
    """Rule-based meta-reasoning rewards in the style of RLVMR (Zhang et al., 2025).

    The agent may tag its reasoning with ``<plan>``, ``<explore>`` or ``<reflect>`` segments
    before its ``<action>``. On each step, the segment that closes last before the action block
    (the one "followed by" the action) is judged, and only when the action is valid:

    * ``plan``: paid when the episode ends in success, at that final step (a plan is useful
      when it leads somewhere), ``plan`` per planned step;
    * ``explore``: paid when the action is novel: not taken before in a valid step of this
      episode (``novelty="action"``, RLVMR's rule) or leading to a state not seen before
      (``novelty="state"``: the board text of a ``TextEnv``, the observation of other envs);
    * ``reflect``: paid when the previous step was invalid and this action differs from it
      (the reflection corrected an error).

    Anti-hacking rules on top of RLVMR: a segment must be non-empty, must not repeat an earlier
    segment of the same kind in the episode, and must not merely echo the goal text; one segment
    per step counts; and the episode total is capped at ``max_total``. Keep ``max_total`` below
    the success reward so no amount of tagging beats solving the task.

    Args:
        plan, explore, reflect: bonuses (>= 0).
        max_total: cap on the component's episode total (>= 0).
        tags: tag names for the plan, explore and reflect roles.
        action_tag: the tag holding the action.
        novelty: ``"action"`` or ``"state"``.
        name: component name (default ``meta_reasoning_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "meta_reasoning_reward"
    ROLES: ClassVar[tuple[str, str, str]] = ("plan", "explore", "reflect")

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        plan: float = 0.1,
        explore: float = 0.05,
        reflect: float = 0.05,
        max_total: float = 0.5,
        tags: Sequence[str] = ("plan", "explore", "reflect"),
        action_tag: str = "action",
        novelty: str = "action",
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        self.bonus = {
            "plan": _finite(plan, "MetaReasoningReward plan"),
            "explore": _finite(explore, "MetaReasoningReward explore"),
            "reflect": _finite(reflect, "MetaReasoningReward reflect"),
        }
        for role, value in self.bonus.items():
            if value < 0:
                raise RubricError(f"MetaReasoningReward {role} must be >= 0, got {value!r}.")
        self.max_total = _finite(max_total, "MetaReasoningReward max_total")
        if self.max_total < 0:
            raise RubricError(f"MetaReasoningReward max_total must be >= 0, got {max_total!r}.")
        if (
            isinstance(tags, str)
            or len(tags) != 3
            or not all(isinstance(t, str) and re.fullmatch(r"\w+", t) for t in tags)
        ):
            raise RubricError(f"MetaReasoningReward tags must name the plan, explore and reflect tags, got {tags!r}.")
        if novelty not in ("action", "state"):
            raise RubricError(
                f"MetaReasoningReward novelty must be 'action' or 'state', got {novelty!r}.{suggest(str(novelty), ('action', 'state'))}"
            )
        if not isinstance(action_tag, str) or not re.fullmatch(r"\w+", action_tag):
            raise RubricError(f"MetaReasoningReward action_tag must be a tag name, got {action_tag!r}.")
        self.tags = tuple(t.lower() for t in tags)
        self.action_tag = action_tag.lower()
        self.novelty = novelty
        key = (*self.tags, self.action_tag)
        pattern = _SEGMENT_CACHE.get(key)
        if pattern is None:
            names = "|".join(map(re.escape, self.tags))
            pattern = re.compile(rf"<\s*({names})\s*>(.*?)<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL)
            _SEGMENT_CACHE[key] = pattern
        self._segment = pattern
        self._action_open = re.compile(rf"<\s*{re.escape(self.action_tag)}\s*>", re.IGNORECASE)
        super().__init__(env, name=name, rubric=rubric)
        self._reset_state("", {})

    def _reset_state(self, observation: Any, info: Mapping[str, Any]) -> None:
        self._paid = 0.0
        self._plans = 0
        self._seen_actions: set[str] = set()
        self._seen_states: set[str] = {self._state_key(observation)}
        self._segments: dict[str, set[str]] = {role: set() for role in self.ROLES}
        task = info.get("task") or {}
        self._goal = _norm(str(task.get("goal", ""))) if isinstance(task, Mapping) else ""
        self._prev_valid = True
        self._prev_action: str | None = None

    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        self._reset_state(observation, info)

    def _state_key(self, observation: Any) -> str:
        # A TextEnv's observation carries the intro at reset and messages after steps; its board
        # text (_observe, the hook every TextEnv implements) identifies the state itself.
        base = self.env.unwrapped
        if isinstance(base, TextEnv) and base._task is not None:
            return base._observe()
        return str(observation)

    def segment(self, text: str) -> tuple[str | None, str]:
        """``(role, content)`` of the segment judged for ``text`` (``(None, "")`` when there is none)."""
        opens = list(self._action_open.finditer(text))
        limit = opens[-1].start() if opens else len(text)
        chosen: tuple[str | None, str] = (None, "")
        for match in self._segment.finditer(text):
            if match.end() > limit:
                break
            chosen = (self.ROLES[self.tags.index(match.group(1).lower())], match.group(2))
        return chosen

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
        valid = bool(info.get("action_valid", True))
        role, content = self.segment(text)
        action_key = _norm(extract_action(text, (self.action_tag,))) if text else ""
        state_key = self._state_key(observation)
        value = 0.0
        judged = None
        if role is not None and valid:
            key = _norm(content)
            if key and key != self._goal and key not in self._segments[role]:
                self._segments[role].add(key)
                judged = role
                if role == "plan":
                    self._plans += 1
                elif role == "explore":
                    novel = (
                        action_key not in self._seen_actions
                        if self.novelty == "action"
                        else state_key not in self._seen_states
                    )
                    if novel:
                        value += self.bonus["explore"]
                elif not self._prev_valid and action_key != self._prev_action:
                    value += self.bonus["reflect"]
        if terminated and info.get("success"):
            value += self.bonus["plan"] * self._plans
        if valid:
            self._seen_actions.add(action_key)
            self._seen_states.add(state_key)
        self._prev_valid = valid
        self._prev_action = action_key
        value = max(0.0, min(value, self.max_total - self._paid))
        self._paid += value
        info["meta_reasoning"] = {"segment": role, "counted": judged, "paid": value}
        return value
