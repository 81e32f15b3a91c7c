"""Reward wrappers by name (``wrap_rewards``): a list of config specs builds the same stack as code."""

from __future__ import annotations

import inspect
import random
from typing import Any

import gymnasium as gym
import pytest
import yaml
from test_rewards_envs import LineWalk, QuizEnv

from envgym.errors import ConfigError
from envgym.rewards import (
    REWARD_WRAPPERS,
    ApplyRubric,
    FormatReward,
    InvalidActionPenalty,
    MetaReasoningReward,
    NumericMatch,
    OutcomeReward,
    ProgressShaping,
    RubricError,
    StepCost,
    VerifierReward,
    build_reward_wrapper,
    wrap_rewards,
)
from envgym.rewards import wrappers as wrappers_module

SPECS_YAML = """
- progress_shaping: {gamma: 0.9}
- format: {tags: [think, action]}
- meta_reasoning
- step_cost: {cost: -0.02, name: time_cost_reward}
- invalid_action: {penalty: -0.3, name: extra_invalid_reward}
- outcome: {success: 0.5}
- rubric:
    sum:
      - gate: {component: format_reward, ">=": 0}
        then: {sum: [success_reward, outcome_reward, shaping_reward]}
      - time_cost_reward
      - extra_invalid_reward
"""


def by_hand() -> gym.Env[Any, Any]:
    env: gym.Env[Any, Any] = LineWalk(max_turns=15)
    env = ProgressShaping(env, gamma=0.9)
    env = FormatReward(env, tags=("think", "action"))
    env = MetaReasoningReward(env)
    env = StepCost(env, cost=-0.02, name="time_cost_reward")
    env = InvalidActionPenalty(env, penalty=-0.3, name="extra_invalid_reward")
    env = OutcomeReward(env, success=0.5)
    return ApplyRubric(env, yaml.safe_load(SPECS_YAML)[-1]["rubric"])


def noisy(rng: random.Random, turn: int) -> str:
    move = rng.choice(["right", "right", "left", "wait", "jump"])
    return rng.choice(
        [
            f"<action>{move}</action>",
            f"<think>go</think><action>{move}</action>",
            f"<explore>try {turn}</explore><action>{move}</action>",
            move,
        ]
    )


def play(env: gym.Env[Any, Any], seed: int) -> list[tuple[float, dict[str, float], bool, bool]]:
    rng = random.Random(seed)
    _, info = env.reset(seed=seed)
    steps = [(0.0, dict(info["reward_components"]), False, False)]
    for turn in range(40):
        _, reward, terminated, truncated, info = env.step(noisy(rng, turn))
        steps.append((float(reward), dict(info["reward_components"]), terminated, truncated))
        if terminated or truncated:
            break
    return steps


def test_a_yaml_list_of_specs_builds_the_same_stack_as_code() -> None:
    named = wrap_rewards(LineWalk(max_turns=15), yaml.safe_load(SPECS_YAML))
    coded = by_hand()
    assert isinstance(named, ApplyRubric) and named.reward_components == coded.reward_components
    for seed in range(8):
        assert play(named, seed) == play(coded, seed)


def test_the_verifier_wrapper_takes_its_verifier_by_name() -> None:
    env = wrap_rewards(QuizEnv(), [{"verifier": {"verifier": {"numeric": {"abs_tol": 0.5}}, "reference": "answer"}}])
    assert isinstance(env, VerifierReward) and isinstance(env.verifier, NumericMatch)
    _, info = env.reset(seed=3)
    _, reward, terminated, _, info = env.step(f"<action>answer {info['task']['answer']}</action>")
    assert terminated and info["reward_components"]["verifier_reward"] == 1.0 and reward == 2.0
    assert info["verification"]["status"] == "passed"
    with pytest.raises(ConfigError, match="Did you mean 'numeric'"):
        wrap_rewards(QuizEnv(), [{"verifier": {"verifier": "numerc"}}])


def test_bare_names_use_the_defaults() -> None:
    env = wrap_rewards(LineWalk(), ["outcome", "format"])
    assert isinstance(env, FormatReward) and isinstance(env.env, OutcomeReward)
    assert env.reward_components[-2:] == ("outcome_reward", "format_reward")
    assert wrap_rewards(LineWalk(), []).reward_components == LineWalk.reward_components


@pytest.mark.parametrize(
    ("specs", "match"),
    [
        (["fromat"], r"reward_wrappers\[0\]: unknown reward wrapper 'fromat'. Did you mean 'format'"),
        ([{"step_cost": {"cots": -1}}], r"reward_wrappers\[0\]\.step_cost: .*cots.*Check the option names"),
        (["outcome", {"format": ["action"]}], r"reward_wrappers\[1\]\.format: expected a mapping of options"),
        ([{"outcome": {}, "format": {}}], r"expected a wrapper name or \{name: \{options\}\}"),
        ([{"rubric": None}], r"rubric: expected a rubric spec"),
        ([{"rubric": {"sum": ["no_such_reward"]}}], r"no_such_reward"),
        ("outcome", r"expected a list of wrapper specs"),
        ([{"step_cost": {"name": "step_cost_reward"}}], r"already emits 'step_cost_reward'"),
    ],
)
def test_bad_specs_fail_before_any_episode_with_the_place(specs: Any, match: str) -> None:
    with pytest.raises(RubricError, match=match):
        wrap_rewards(LineWalk(), specs)


def test_every_reward_wrapper_has_a_config_name() -> None:
    classes = {
        obj
        for _, obj in inspect.getmembers(wrappers_module, inspect.isclass)
        if issubclass(obj, wrappers_module.RewardLayer) and obj is not wrappers_module.RewardLayer
    }
    assert classes == set(REWARD_WRAPPERS.values())
    assert isinstance(build_reward_wrapper(LineWalk(), {"step_cost": {"cost": -0.5, "name": "c"}}), StepCost)
