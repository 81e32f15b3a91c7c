"""envgym's verifiable reward layer: components, composable rubrics, process rewards, verifiers
and multi-agent reward modes.

Environments emit named reward components every step (``info["reward_components"]``); a rubric
turns them into the scalar reward. Ablate a reward by configuration, not by forking an env::

    import gymnasium as gym
    env = gym.make("envgym/Sokoban-v0", reward={               # validated before any episode runs
        "gate": {"context": "action_valid"},
        "then": {"sum": ["success_reward", "step_cost_reward"]},
        "else": -0.5,
    })

    from envgym.rewards import ApplyRubric, FormatReward, ProgressShaping, load_rubric
    env = ProgressShaping(gym.make("envgym/Sokoban-v0"), gamma=0.99)
    env = FormatReward(env, tags=("think", "action"))
    env = ApplyRubric(env, load_rubric("rubric.yaml"))          # or a dict, or Rubric objects

Modules:

* :mod:`envgym.rubric` (also under its older path :mod:`envgym.rewards.rubrics`): :class:`Rubric`
  nodes (:class:`Term`, :class:`WeightedSum`, :class:`Gate`, :class:`Product`, :class:`Clip`,
  :class:`Lexicographic`, :class:`AtEnd`, ...), :func:`build_rubric` (dict), :func:`load_rubric`
  (YAML). It sits below :mod:`envgym.core`, which builds ``make(id, reward=spec)`` with it;
* :mod:`envgym.rewards.wrappers`: built-in components usable on any env (outcome, format,
  invalid action, step cost, potential-based progress shaping, RLVMR meta-reasoning, verifier
  score), :class:`ApplyRubric`, and :func:`wrap_rewards`, which stacks them from config by name;
* :mod:`envgym.rewards.verifiers`: exact, normalised, numeric, regex, JSON schema, sandboxed unit
  tests, LLM judge, and :func:`build_verifier` by kind name (loaded on first use);
* :mod:`envgym.rewards.metrics`: ``rewards/<name>/mean`` from per-episode component totals.

IGPO's information-gain hook (:class:`InfoGainHook` and its helpers) moved to
:mod:`envgym.contrib.rewards`; the old names here still load it.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports name the lazy exports for type checkers)
from __future__ import annotations

from typing import TYPE_CHECKING

from envgym import rubric as _rubric
from envgym._imports import lazy_exports
from envgym.rewards.metrics import component_metrics, episode_totals, metric_key
from envgym.rewards.wrappers import (
    REWARD_WRAPPERS,
    ApplyRubric,
    FormatReward,
    InvalidActionPenalty,
    MetaReasoningReward,
    OutcomeReward,
    ProgressShaping,
    StepCost,
    VerifierReward,
    build_reward_wrapper,
    wrap_rewards,
)
from envgym.rubric import *  # the rubric language, re-exported whole (its __all__)

#: Contributed names that lived here before; they load from :mod:`envgym.contrib.rewards`.
_MOVED_TO_CONTRIB = ("InfoGainHook", "InfoGainQuery", "answer_probability", "information_gain")

__getattr__, __dir__, _lazy = lazy_exports(
    __name__,
    {
        "verifiers": (
            "VERIFIER_KINDS",
            "ExactMatch",
            "JsonSchemaMatch",
            "JudgeBackend",
            "LLMJudge",
            "NormalizedMatch",
            "NumericMatch",
            "OpenAICompatibleBackend",
            "RegexMatch",
            "UnitTests",
            "Verifier",
            "VerifierResult",
            "build_verifier",
        ),
        "envgym.contrib.rewards": _MOVED_TO_CONTRIB,
    },
)

__all__ = sorted(  # noqa: PLE0605 - one list: the eager names and the lazy ones
    {name for name in _lazy if name not in _MOVED_TO_CONTRIB}
    | set(_rubric.__all__)
    | {
        "REWARD_WRAPPERS",
        "ApplyRubric",
        "FormatReward",
        "InvalidActionPenalty",
        "MetaReasoningReward",
        "OutcomeReward",
        "ProgressShaping",
        "StepCost",
        "VerifierReward",
        "build_reward_wrapper",
        "component_metrics",
        "episode_totals",
        "metric_key",
        "wrap_rewards",
    }
)

if TYPE_CHECKING:  # pragma: no cover
    from envgym.rewards.verifiers import (
        VERIFIER_KINDS,
        ExactMatch,
        JsonSchemaMatch,
        JudgeBackend,
        LLMJudge,
        NormalizedMatch,
        NumericMatch,
        OpenAICompatibleBackend,
        RegexMatch,
        UnitTests,
        Verifier,
        VerifierResult,
        build_verifier,
    )
