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

* :mod:`envgym.rewards.rubrics`: :class:`Rubric` nodes (:class:`Term`, :class:`WeightedSum`,
  :class:`Gate`, :class:`Product`, :class:`Clip`, :class:`Lexicographic`, :class:`AtEnd`, ...),
  :func:`build_rubric` (dict), :func:`load_rubric` (YAML);
* :mod:`envgym.rewards.wrappers`: built-in components usable on any env (outcome, format,
  invalid action, step cost, potential-based progress shaping, RLVMR meta-reasoning, IGPO
  information gain, verifier score) and :class:`ApplyRubric`;
* :mod:`envgym.rewards.verifiers`: exact, normalised, numeric, regex, JSON schema, sandboxed unit
  tests, LLM judge (loaded on first use);
* :mod:`envgym.rewards.multiagent`: private / integrated / cooperative reward modes for PettingZoo
  (loaded on first use);
* :mod:`envgym.rewards.metrics`: ``rewards/<name>/mean`` from per-episode component totals.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from envgym.rewards.metrics import component_metrics, episode_totals, metric_key
from envgym.rewards.rubrics import (
    OPERATORS,
    REWARD_CONTEXT_FIELDS,
    WRAPPER_CONTEXT_FIELDS,
    AllOf,
    AnyOf,
    AtEnd,
    Clip,
    Compare,
    Condition,
    Const,
    ContextValue,
    Flag,
    FunctionRubric,
    Gate,
    Inner,
    Lexicographic,
    Not,
    Product,
    Rubric,
    RubricError,
    RubricSpec,
    StepContext,
    StepRecord,
    Sum,
    Term,
    TextMatches,
    WeightedSum,
    as_rubric,
    build_condition,
    build_rubric,
    dump_rubric,
    load_rubric,
)
from envgym.rewards.wrappers import (
    ApplyRubric,
    FormatReward,
    InfoGainHook,
    InfoGainQuery,
    InvalidActionPenalty,
    MetaReasoningReward,
    OutcomeReward,
    ProgressShaping,
    StepCost,
    VerifierReward,
    answer_probability,
    information_gain,
)

_LAZY: dict[str, str] = {
    "ExactMatch": "envgym.rewards.verifiers",
    "FakeJudgeBackend": "envgym.rewards.verifiers",
    "JsonSchemaMatch": "envgym.rewards.verifiers",
    "JudgeBackend": "envgym.rewards.verifiers",
    "LLMJudge": "envgym.rewards.verifiers",
    "NormalizedMatch": "envgym.rewards.verifiers",
    "NumericMatch": "envgym.rewards.verifiers",
    "OpenAICompatibleBackend": "envgym.rewards.verifiers",
    "RegexMatch": "envgym.rewards.verifiers",
    "UnitTests": "envgym.rewards.verifiers",
    "Verifier": "envgym.rewards.verifiers",
    "VerifierResult": "envgym.rewards.verifiers",
    "build_verifier": "envgym.rewards.verifiers",
    "REWARD_MODES": "envgym.rewards.multiagent",
    "AECRewardMode": "envgym.rewards.multiagent",
    "ParallelRewardMode": "envgym.rewards.multiagent",
    "apply_reward_mode": "envgym.rewards.multiagent",
    "interdependence_matrix": "envgym.rewards.multiagent",
    "with_reward_mode": "envgym.rewards.multiagent",
}

__all__ = [
    "OPERATORS",
    "REWARD_CONTEXT_FIELDS",
    "REWARD_MODES",
    "WRAPPER_CONTEXT_FIELDS",
    "AECRewardMode",
    "AllOf",
    "AnyOf",
    "ApplyRubric",
    "AtEnd",
    "Clip",
    "Compare",
    "Condition",
    "Const",
    "ContextValue",
    "ExactMatch",
    "FakeJudgeBackend",
    "Flag",
    "FormatReward",
    "FunctionRubric",
    "Gate",
    "InfoGainHook",
    "InfoGainQuery",
    "Inner",
    "InvalidActionPenalty",
    "JsonSchemaMatch",
    "JudgeBackend",
    "LLMJudge",
    "Lexicographic",
    "MetaReasoningReward",
    "NormalizedMatch",
    "Not",
    "NumericMatch",
    "OpenAICompatibleBackend",
    "OutcomeReward",
    "ParallelRewardMode",
    "Product",
    "ProgressShaping",
    "RegexMatch",
    "Rubric",
    "RubricError",
    "RubricSpec",
    "StepContext",
    "StepCost",
    "StepRecord",
    "Sum",
    "Term",
    "TextMatches",
    "UnitTests",
    "Verifier",
    "VerifierResult",
    "VerifierReward",
    "WeightedSum",
    "answer_probability",
    "apply_reward_mode",
    "as_rubric",
    "build_condition",
    "build_rubric",
    "build_verifier",
    "component_metrics",
    "dump_rubric",
    "episode_totals",
    "information_gain",
    "interdependence_matrix",
    "load_rubric",
    "metric_key",
    "with_reward_mode",
]

if TYPE_CHECKING:  # pragma: no cover
    from envgym.rewards.multiagent import (
        REWARD_MODES,
        AECRewardMode,
        ParallelRewardMode,
        apply_reward_mode,
        interdependence_matrix,
        with_reward_mode,
    )
    from envgym.rewards.verifiers import (
        ExactMatch,
        FakeJudgeBackend,
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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'envgym.rewards' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
