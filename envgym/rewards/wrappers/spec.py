"""Reward wrappers from config: every wrapper has a name, so a list of plain ``{name: {options}}``
specs (YAML, a suite entry, a training config) stacks them on an environment.

::

    env = wrap_rewards(gym.make("envgym/Sokoban-v0"), [
        {"progress_shaping": {"gamma": 0.99}},
        {"format": {"tags": ["think", "action"]}},
        {"verifier": {"verifier": {"numeric": {"abs_tol": 1e-6}}, "reference": "answer"}},
        {"rubric": {"sum": ["success_reward", "format_reward"]}},
    ])

The first spec wraps the environment directly, the last is outermost. A bare name (``"outcome"``)
uses the wrapper's defaults. ``rubric`` takes a rubric spec (:class:`ApplyRubric`); every other
name takes the wrapper's keyword arguments, validated when the wrapper is built.
:func:`check_reward_wrappers` checks a list without an environment (names, option names, rubric
specs), for configs that are read long before an environment is made.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from envgym.errors import suggest
from envgym.rewards.wrappers.base import ApplyRubric, RewardLayer
from envgym.rewards.wrappers.components import FormatReward, InvalidActionPenalty, OutcomeReward, StepCost
from envgym.rewards.wrappers.meta_reasoning import MetaReasoningReward
from envgym.rewards.wrappers.shaping import ProgressShaping
from envgym.rewards.wrappers.verifier import VerifierReward
from envgym.rubric import WRAPPER_CONTEXT_FIELDS, RubricError, build_rubric

__all__ = ["REWARD_WRAPPERS", "build_reward_wrapper", "check_reward_wrappers", "wrap_rewards"]

#: Reward wrappers by config name.
REWARD_WRAPPERS: dict[str, type[RewardLayer]] = {
    "outcome": OutcomeReward,
    "format": FormatReward,
    "invalid_action": InvalidActionPenalty,
    "step_cost": StepCost,
    "progress_shaping": ProgressShaping,
    "meta_reasoning": MetaReasoningReward,
    "verifier": VerifierReward,
    "rubric": ApplyRubric,
}


def _name_and_options(spec: Any, where: str) -> tuple[str, Any]:
    """``(name, options)`` of one spec; unknown names and malformed specs raise :class:`RubricError`."""
    kinds = ", ".join(REWARD_WRAPPERS)
    options: Any
    if isinstance(spec, str):
        name, options = spec, {}
    elif isinstance(spec, Mapping) and len(spec) == 1:
        ((name, options),) = spec.items()
    else:
        raise RubricError(f"{where}: expected a wrapper name or {{name: {{options}}}}, got {spec!r}. Names: {kinds}.")
    if name not in REWARD_WRAPPERS:
        raise RubricError(
            f"{where}: unknown reward wrapper {name!r}.{suggest(str(name), REWARD_WRAPPERS)} Names: {kinds}."
        )
    if name == "rubric":
        if options is None:
            raise RubricError(f"{where}.rubric: expected a rubric spec, got nothing.")
        return name, options
    options = {} if options is None else options
    if not isinstance(options, Mapping) or not all(isinstance(key, str) for key in options):
        raise RubricError(f"{where}.{name}: expected a mapping of options, got {options!r}.")
    return name, options


def build_reward_wrapper(
    env: gym.Env[Any, Any], spec: str | Mapping[str, Any], *, where: str = "reward wrapper"
) -> Any:
    """Wrap ``env`` in the reward wrapper ``spec`` names: ``"outcome"`` or ``{"format": {"tags": [...]}}``."""
    name, options = _name_and_options(spec, where)
    if name == "rubric":
        return ApplyRubric(env, options)
    try:
        return REWARD_WRAPPERS[name](env, **options)
    except RubricError as err:  # also a TypeError (InvalidKwargsError): a bad value, not a bad option name
        raise RubricError(f"{where}.{name}: {err}") from err
    except TypeError as err:
        raise RubricError(f"{where}.{name}: {err}. Check the option names.") from err


def check_reward_wrappers(specs: Any, *, where: str = "reward_wrappers") -> None:
    """Check a list of wrapper specs without an environment: the list's shape, the wrapper
    names, the option names each wrapper takes, and the rubric specs' grammar.

    What needs the environment (option values, the components a rubric reads, the info keys a
    wrapper needs) is checked when :func:`wrap_rewards` builds the stack on one.

    Raises:
        RubricError: naming the spec (``reward_wrappers[1].step_cost``) and what it expected.
    """
    if isinstance(specs, (str, bytes, Mapping)) or not isinstance(specs, Sequence):
        raise RubricError(
            f"{where}: expected a list of wrapper specs such as [{{step_cost: {{cost: -0.01}}}}], got {specs!r}."
        )
    for i, spec in enumerate(specs):
        label = f"{where}[{i}]"
        name, options = _name_and_options(spec, label)
        if name == "rubric":
            _check_rubric(options, f"{label}.rubric")
            continue
        signature = inspect.signature(REWARD_WRAPPERS[name].__init__)
        try:
            signature.bind(None, None, **options)  # self, env
        except TypeError as err:
            takes = ", ".join(list(signature.parameters)[2:])
            raise RubricError(f"{label}.{name}: {err}. Options of {name!r}: {takes}.") from err
        if options.get("rubric") is not None:
            _check_rubric(options["rubric"], f"{label}.{name}.rubric")


def _check_rubric(spec: Any, where: str) -> None:
    """The rubric spec's grammar (its component names are checked against an environment later)."""
    try:
        build_rubric(spec, context=WRAPPER_CONTEXT_FIELDS, owner=where)
    except RubricError as err:
        raise RubricError(f"{where}: {err}") from err


def wrap_rewards(env: gym.Env[Any, Any], specs: Sequence[str | Mapping[str, Any]]) -> Any:
    """Stack the reward wrappers ``specs`` names on ``env``, first innermost; returns the outermost."""
    if isinstance(specs, (str, bytes, Mapping)) or not isinstance(specs, Sequence):
        raise RubricError(f"reward wrappers: expected a list of wrapper specs, got {specs!r}.")
    for i, spec in enumerate(specs):
        env = build_reward_wrapper(env, spec, where=f"reward_wrappers[{i}]")
    return env
