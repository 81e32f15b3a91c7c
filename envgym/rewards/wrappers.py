"""Built-in reward components as Gymnasium wrappers, usable on any environment.

Each wrapper adds one named component to ``info["reward_components"]`` (on ``reset`` as 0.0 and
on every step) and to its ``reward_components`` attribute, and recomputes the scalar reward with
a *wrapper-level rubric* (:mod:`envgym.rewards.rubrics`):

* by default the rubric is ``Inner() + Term(name)``: the wrapped environment's own scalar plus
  the new component, so stacking wrappers adds their components to whatever the environment's
  rubric gave;
* with ``rubric=spec`` the scalar is ``rubric(info["reward_components"], context)`` over *every*
  component visible at that point: the environment's and those of the wrappers below.

Either way the invariant holds on every step: ``reward == wrapper.rubric(info["reward_components"],
context)``, and the components never disappear from ``info``. :class:`ApplyRubric` only applies a
rubric (it adds no component); put it outermost to define the final scalar. The wrappers pass a
:class:`~envgym.rewards.rubrics.StepContext` (with ``truncated``, the wrapped scalar and the
episode history), so history-reading rubrics such as ``at_end`` work here. When the rubric is
:class:`~envgym.rewards.rubrics.Lexicographic`, the priority tuple is put in
``info["reward_priorities"]``.

Components (default names; pass ``name=`` to rename):

=========================  =====================================================================
``outcome_reward``         :class:`OutcomeReward`: ``success`` on the terminal success step,
                           ``failure`` on a terminal failure, else 0. At most once per episode.
``format_reward``          :class:`FormatReward`: 0 for well-formed output, ``invalid`` (< 0)
                           otherwise (tags present once, closed, in order, nothing outside).
``invalid_action_reward``  :class:`InvalidActionPenalty`: ``penalty`` when ``info["action_valid"]``
                           is false.
``step_cost_reward``       :class:`StepCost`: ``cost`` every step.
``shaping_reward``         :class:`ProgressShaping`: ``gamma * Phi(s') - Phi(s)`` with
                           ``Phi = scale * info["progress"]`` and ``Phi(terminal) = 0``.
``meta_reasoning_reward``  :class:`MetaReasoningReward`: RLVMR-style rewards for ``<plan>``,
                           ``<explore>``, ``<reflect>`` segments followed by useful actions.
``info_gain_reward``       :class:`InfoGainHook`: IGPO turn-level information gain, filled by a
                           trainer-provided scorer.
``verifier_reward``        :class:`VerifierReward`: the score of a verifier on the agent's answer.
=========================  =====================================================================

Anti-hacking by construction: every per-step component is either non-positive (format, invalid
action, step cost), paid at most once per episode (outcome, verifier on the terminal step),
telescoping (shaping, information gain: the episode total does not depend on how the agent got
there) or capped per episode and never paid for repeated or goal-echoing text (meta-reasoning).
``tests/test_rewards_wrappers.py`` checks each against adversarial policies.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym

from envgym.core import TextEnv, extract_action
from envgym.errors import EnvContractError, suggest
from envgym.rewards.rubrics import (
    WRAPPER_CONTEXT_FIELDS,
    Inner,
    Lexicographic,
    Rubric,
    RubricError,
    RubricSpec,
    StepContext,
    StepRecord,
    Term,
    build_rubric,
)

__all__ = [
    "ApplyRubric",
    "FormatReward",
    "InfoGainHook",
    "InfoGainQuery",
    "InvalidActionPenalty",
    "MetaReasoningReward",
    "OutcomeReward",
    "ProgressShaping",
    "StepCost",
    "VerifierReward",
    "answer_probability",
    "information_gain",
]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def _declared_components(env: gym.Env[Any, Any]) -> tuple[str, ...]:
    try:
        names = env.get_wrapper_attr("reward_components")
    except AttributeError:
        return ()
    return tuple(names)


def _action_text(action: Any) -> str:
    if isinstance(action, str):
        return action
    if isinstance(action, (bytes, bytearray)):
        return bytes(action).decode("utf-8", errors="replace")
    return ""


def _finite(value: Any, label: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RubricError(f"{label} must be a finite number, got {value!r}.")
    return float(value)


def _norm(text: str) -> str:
    """Case-, accent- and whitespace-insensitive form used to spot repeated or echoed text."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


class _RewardLayer(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Shared machinery: add one component, keep the history, recompute the scalar with the rubric.

    Constructor keyword arguments are recorded (Gymnasium's ``RecordConstructorArgs``), so a
    wrapped env's ``spec`` rebuilds the same stack: ``gym.make(env.spec)``.
    """

    #: Default component name (empty for wrappers that add none).
    component: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        signature = inspect.signature(init)

        @functools.wraps(init)
        def recording_init(self: _RewardLayer, env: gym.Env[Any, Any], *args: Any, **kw: Any) -> None:
            if type(self) is cls:  # the outermost __init__ records what the user passed, by name
                bound = signature.bind(self, env, *args, **kw).arguments
                recorded = {k: v for k, v in list(bound.items())[2:]}
                gym.utils.RecordConstructorArgs.__init__(self, **recorded)
            init(self, env, *args, **kw)

        cls.__init__ = recording_init  # type: ignore[method-assign]

    def __init__(self, env: gym.Env[Any, Any], *, name: str | None, rubric: RubricSpec | None) -> None:
        super().__init__(env)
        inner = _declared_components(env)
        owner = f"{type(env.unwrapped).__name__} (wrapped in {type(self).__name__})"
        component = self.component if name is None else name
        if component:
            if not isinstance(component, str) or not _NAME.match(component):
                raise RubricError(
                    f"{type(self).__name__}: name must be a component name such as 'format_reward', got {component!r}."
                )
            if component in inner:
                raise RubricError(
                    f"{type(self).__name__}: {type(env.unwrapped).__name__} already emits {component!r}. "
                    f"Configure it on the environment instead, or pass name= to add a second, differently named "
                    f"component."
                )
        self.component_name: str | None = component or None
        #: Every component in ``info["reward_components"]`` after this wrapper.
        self.reward_components: tuple[str, ...] = inner + ((component,) if component else ())
        if rubric is None:
            if not component:
                raise RubricError(f"{type(self).__name__}: expected a rubric, got None.")
            built: Rubric = Inner() + Term(component)
        else:
            built = build_rubric(rubric, components=self.reward_components, context=WRAPPER_CONTEXT_FIELDS, owner=owner)
        #: The wrapper-level rubric: ``reward == rubric(info["reward_components"], context)``.
        self.rubric: Rubric = built
        self._needs_history = "history" in built.requirements()
        self._additive = rubric is None
        self._history: list[StepRecord] = []
        self._turn = 0

    # hooks ------------------------------------------------------------------------------------
    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        """Start a new episode's bookkeeping."""

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
        """This step's value of the component."""
        return 0.0

    # gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._history.clear()
        self._turn = 0
        self._on_reset(observation, info)
        components = dict(info.get("reward_components") or {})
        if self.component_name:
            components[self.component_name] = 0.0
        info["reward_components"] = components
        return observation, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._turn += 1
        text = _action_text(action)
        components = dict(info.get("reward_components") or {})
        if self.component_name:
            value = self._component(action, text, observation, float(reward), terminated, truncated, info)
            components[self.component_name] = float(value)
        info["reward_components"] = components
        if self._additive:
            # The default rubric Inner() + Term(name), without building a context.
            return observation, math.fsum((float(reward), components[self.component_name])), terminated, truncated, info
        context = StepContext(
            action_text=text,
            turn=int(info.get("turn", self._turn)),
            action_valid=bool(info.get("action_valid", True)),
            terminated=bool(terminated),
            success=bool(info.get("success", False)),
            task=info.get("task") or {},
            progress=info.get("progress"),
            truncated=bool(truncated),
            base_reward=float(reward),
            history=tuple(self._history) if self._needs_history else (),
        )
        rubric = self.rubric
        if isinstance(rubric, Lexicographic):
            priorities = rubric.priorities(components, context)
            info["reward_priorities"] = priorities
            scalar = rubric.scalarise(priorities)
        else:
            scalar = float(rubric(components, context))
        if self._needs_history:
            self._history.append(StepRecord(dict(components), dataclasses.replace(context, history=())))
        return observation, scalar, terminated, truncated, info


class ApplyRubric(_RewardLayer):
    """Recompute the scalar reward with a rubric over every visible component; adds no component.

    Validates the rubric against the components of the wrapped stack when constructed.

    Args:
        env: the environment (any stack of envgym reward wrappers over a ``TextEnv``, or any env
            whose ``reward_components`` attribute lists what its ``info`` carries).
        rubric: a rubric or spec (see :mod:`envgym.rewards.rubrics`); history-reading nodes
            (``at_end``) and ``inner`` are allowed here.
    """

    def __init__(self, env: gym.Env[Any, Any], rubric: RubricSpec) -> None:
        if rubric is None:
            raise RubricError("ApplyRubric: expected a rubric or rubric spec, got None.")
        super().__init__(env, name="", rubric=rubric)


class OutcomeReward(_RewardLayer):
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


class FormatReward(_RewardLayer):
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


class InvalidActionPenalty(_RewardLayer):
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


class StepCost(_RewardLayer):
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


class ProgressShaping(_RewardLayer):
    """Potential-based shaping from the environment's progress (Ng, Harada and Russell, 1999).

    ``F(s, s') = gamma * Phi(s') - Phi(s)`` with ``Phi(s) = scale * progress(s)``, progress in
    [0, 1] read from ``info["progress"]``. Convention: ``Phi(terminal) = 0`` on the step that
    *terminates* the episode (a truncated step is not terminal: its state keeps its potential).
    Over an episode the discounted sum telescopes,
    ``sum_t gamma**t * F_t = gamma**T * Phi(s_T) - Phi(s_0)``, which is ``-Phi(s_0)`` for a
    terminated episode: it does not depend on the actions, so the optimal policy of the shaped
    reward is the optimal policy of the original one (use the trainer's discount as ``gamma``).
    Cycles cannot earn anything: going A -> B -> A nets ``(gamma - 1) * Phi`` <= 0.

    Args:
        gamma: discount, in (0, 1]; must equal the trainer's for exact policy invariance.
        scale: potential scale (> 0).
        name: component name (default ``shaping_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "shaping_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        gamma: float = 0.99,
        scale: float = 1.0,
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        self.gamma = _finite(gamma, "ProgressShaping gamma")
        if not 0.0 < self.gamma <= 1.0:
            raise RubricError(f"ProgressShaping gamma must be in (0, 1], got {gamma!r}.")
        self.scale = _finite(scale, "ProgressShaping scale")
        if self.scale <= 0:
            raise RubricError(f"ProgressShaping scale must be > 0, got {scale!r}.")
        base = env.unwrapped
        if isinstance(base, TextEnv) and type(base).progress is TextEnv.progress:
            raise RubricError(
                f"ProgressShaping needs progress(), which {type(base).__name__} does not implement (it reports no "
                f"info['progress']). Use it on an environment that reports progress."
            )
        super().__init__(env, name=name, rubric=rubric)
        self._phi = 0.0

    def potential(self, info: Mapping[str, Any]) -> float:
        """``Phi`` of the state described by ``info``."""
        progress = info.get("progress")
        if progress is None:
            raise RubricError(
                f"ProgressShaping needs info['progress'] from {type(self.env.unwrapped).__name__}, which is missing."
            )
        if isinstance(progress, bool) or not isinstance(progress, (int, float)) or not 0.0 <= progress <= 1.0:
            raise EnvContractError(
                f"{type(self.env.unwrapped).__name__} reported info['progress']={progress!r}; expected a number in [0, 1]."
            )
        return self.scale * float(progress)

    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        self._phi = self.potential(info)

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
        phi_next = 0.0 if terminated else self.potential(info)
        shaped = self.gamma * phi_next - self._phi
        self._phi = phi_next
        return shaped


_SEGMENT_CACHE: dict[tuple[str, ...], re.Pattern[str]] = {}


class MetaReasoningReward(_RewardLayer):
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


@dataclass(frozen=True, slots=True)
class InfoGainQuery:
    """What an information-gain scorer sees: the task and the turns so far.

    Attributes:
        task: ``info["task"]`` (its ``goal``, and the ground truth where the env exposes it).
        turns: ``(action_text, observation)`` for every step so far, oldest first.
    """

    task: Mapping[str, Any]
    turns: tuple[tuple[str, str], ...]

    @property
    def turn(self) -> int:
        return len(self.turns)


#: ``scorer(query) -> probability`` that the policy produces the ground-truth answer now.
Scorer = Callable[[InfoGainQuery], float]


def _probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise RubricError(f"{where}: expected a probability in [0, 1], got {value!r}.")
    return float(value)


def information_gain(probabilities: Sequence[float]) -> list[float]:
    """IGPO turn rewards from ``[p_0, p_1, ..., p_T]``: ``[p_t - p_(t-1) for t = 1..T]``.

    ``p_t`` is the policy's probability of the ground-truth answer after turn ``t`` (``p_0``:
    before the first turn). The rewards telescope to ``p_T - p_0``, so repeating or padding turns
    earns nothing overall.
    """
    ps = [_probability(p, f"information_gain[{i}]") for i, p in enumerate(probabilities)]
    return [b - a for a, b in itertools.pairwise(ps)]


def answer_probability(token_logprobs: Sequence[float]) -> float:
    """IGPO's answer probability: ``exp(mean(log pi(a_j | ...)))`` over the answer's tokens."""
    if not token_logprobs:
        raise RubricError("answer_probability: expected the log-probabilities of at least one answer token, got none.")
    values = [float(v) for v in token_logprobs]
    if any(not math.isfinite(v) or v > 0 for v in values):
        raise RubricError(f"answer_probability: expected finite log-probabilities <= 0, got {token_logprobs!r}.")
    return math.exp(math.fsum(values) / len(values))


class InfoGainHook(_RewardLayer):
    """Turn-level information gain (IGPO, Wang et al., 2025), filled by a trainer-provided scorer.

    The trainer passes (or later sets, :meth:`set_scorer`) a scorer that returns the policy's
    probability of the ground-truth answer given the turns so far (typically
    :func:`answer_probability` of teacher-forced answer tokens). The component on turn ``t`` is
    ``p_t - p_(t-1)``; on the step that terminates the episode it is 0 when
    ``final_turn="outcome"`` (IGPO scores the answer turn by its outcome instead) or the gain
    when ``final_turn="gain"``. Without a scorer the component is 0 and the hook only records
    the turns. Trainers that score whole trajectories after the rollout use
    :func:`information_gain` instead.

    Args:
        scorer: ``scorer(InfoGainQuery) -> probability`` or ``None``.
        final_turn: ``"outcome"`` or ``"gain"``.
        name: component name (default ``info_gain_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "info_gain_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        scorer: Scorer | None = None,
        final_turn: str = "outcome",
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        if final_turn not in ("outcome", "gain"):
            raise RubricError(f"InfoGainHook final_turn must be 'outcome' or 'gain', got {final_turn!r}.")
        if scorer is not None and not callable(scorer):
            raise RubricError(f"InfoGainHook scorer must be a callable (InfoGainQuery) -> float, got {scorer!r}.")
        self.scorer = scorer
        self.final_turn = final_turn
        super().__init__(env, name=name, rubric=rubric)
        self._task: Mapping[str, Any] = {}
        self._turns: list[tuple[str, str]] = []
        self._p: float | None = None

    def set_scorer(self, scorer: Scorer | None) -> None:
        """Install (or remove) the scorer; takes effect from the next step."""
        if scorer is not None and not callable(scorer):
            raise RubricError(f"InfoGainHook scorer must be a callable (InfoGainQuery) -> float, got {scorer!r}.")
        self.scorer = scorer
        self._p = None

    @property
    def turns(self) -> tuple[tuple[str, str], ...]:
        """The ``(action_text, observation)`` turns of the current episode."""
        return tuple(self._turns)

    def _score(self, turns: Sequence[tuple[str, str]]) -> float:
        assert self.scorer is not None
        query = InfoGainQuery(task=self._task, turns=tuple(turns))
        return _probability(self.scorer(query), "InfoGainHook scorer")

    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        self._task = dict(info.get("task") or {})
        self._turns = []
        self._p = self._score(()) if self.scorer is not None else None

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
        before = list(self._turns)
        self._turns.append((text, str(observation)))
        if self.scorer is None:
            return 0.0
        if self._p is None:
            self._p = self._score(before)
        if terminated and self.final_turn == "outcome":
            return 0.0
        p = self._score(self._turns)
        gain = p - self._p
        self._p = p
        return gain


class VerifierReward(_RewardLayer):
    """The score of a verifier (:mod:`envgym.rewards.verifiers`) on the agent's answer.

    The answer is the content of the last ``<answer>``/``<action>`` block (or the whole text);
    the reference is ``info["task"][reference]`` or ``reference(task)``. With ``when="terminal"``
    (default) only the step that terminates the episode is verified, so the reward is paid once.
    The verifier's result is put in ``info["verification"]``; an infrastructure failure (a judge
    backend down) scores 0 there with ``infrastructure: True`` so it is never a silent zero.

    Args:
        verifier: a verifier, e.g. ``NumericMatch(abs_tol=1e-6)``.
        reference: task key or callable giving the reference answer.
        when: ``"terminal"`` or ``"every_step"``.
        answer_tags: tags whose last block is the answer.
        name: component name (default ``verifier_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "verifier_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        verifier: Any,
        *,
        reference: str | Callable[[Mapping[str, Any]], Any] = "answer",
        when: str = "terminal",
        answer_tags: Sequence[str] = ("answer", "action"),
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        if not callable(getattr(verifier, "verify", None)):
            raise RubricError(
                f"VerifierReward: expected a verifier with .verify(candidate, reference), got {verifier!r}."
            )
        if when not in ("terminal", "every_step"):
            raise RubricError(f"VerifierReward when must be 'terminal' or 'every_step', got {when!r}.")
        if not (isinstance(reference, str) or callable(reference)):
            raise RubricError(f"VerifierReward reference must be a task key or a callable, got {reference!r}.")
        self.verifier = verifier
        self.reference = reference
        self.when = when
        self.answer_tags = tuple(answer_tags)
        super().__init__(env, name=name, rubric=rubric)
        self._task: Mapping[str, Any] = {}

    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        self._task = dict(info.get("task") or {})
        if isinstance(self.reference, str) and self.reference not in self._task:
            raise RubricError(
                f"VerifierReward: info['task'] has no {self.reference!r} key (keys: {', '.join(sorted(self._task))})."
                f"{suggest(self.reference, self._task)} Pass reference= the key holding the answer, or a callable."
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
        if self.when == "terminal" and not terminated:
            return 0.0
        reference = self._task[self.reference] if isinstance(self.reference, str) else self.reference(self._task)
        result = self.verifier.verify(extract_action(text, self.answer_tags), reference)
        info["verification"] = result.as_dict()
        return float(result.score)
