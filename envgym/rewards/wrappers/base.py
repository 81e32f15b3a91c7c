"""The machinery every reward wrapper shares (:class:`RewardLayer`: add one component, keep the
episode history, recompute the scalar with the wrapper-level rubric) and :class:`ApplyRubric`,
which only applies a rubric."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym

from envgym.rubric import (
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


class RewardLayer(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
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
        def recording_init(self: RewardLayer, env: gym.Env[Any, Any], *args: Any, **kw: Any) -> None:
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


class ApplyRubric(RewardLayer):
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
