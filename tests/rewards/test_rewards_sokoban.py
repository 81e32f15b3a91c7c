"""The reward layer on a real registered environment: envgym/Sokoban-v0 with its oracle solver."""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import pytest

import envgym
from envgym.agents.oracle import OracleAgent
from envgym.agents.solvers.sokoban import Solver
from envgym.core import RewardContext
from envgym.rewards import (
    ApplyRubric,
    FormatReward,
    MetaReasoningReward,
    ProgressShaping,
    RubricError,
    build_rubric,
    component_metrics,
)
from envgym.rollout import run_episodes

ENV_ID = "envgym/Sokoban-v0"
SPEC = {
    "gate": {"context": "action_valid"},
    "then": {"sum": ["success_reward", {"weighted_sum": {"box_on_target_reward": 0.5}}, "step_cost_reward"]},
    "else": -0.2,
}


def oracle_episode(
    env: Any, seed: int, *, wrap: bool = True, every: int = 0
) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """Play the oracle (optionally inserting an invalid action every ``every`` turns); return the steps."""
    solver = Solver(ENV_ID, seed)
    obs, info = env.reset(seed=seed)
    steps = []
    while True:
        if every and info["turn"] % every == every - 1:
            action = "dance"
        else:
            move = solver.act(obs, info)
            action = f"<action>{move}</action>" if wrap else move
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((action, reward, terminated, truncated, info))
        if terminated or truncated:
            return steps, info


def test_make_sokoban_with_a_structured_reward() -> None:
    env = gymnasium.make(ENV_ID, reward=SPEC)
    rubric = build_rubric(SPEC, components=env.unwrapped.reward_components)
    for seed in range(3):
        steps, info = oracle_episode(env, seed, every=4)
        assert info["success"]
        assert any(reward == -0.2 for _, reward, *_ in steps)
        for action, reward, terminated, _, step_info in steps:
            context = RewardContext(
                action_text=action,
                turn=step_info["turn"],
                action_valid=step_info["action_valid"],
                terminated=terminated,
                success=step_info["success"],
                task=step_info["task"],
                progress=step_info.get("progress"),
            )
            assert reward == rubric(step_info["reward_components"], context)


def test_sokoban_rejects_a_rubric_naming_a_missing_component() -> None:
    with pytest.raises(RubricError, match=r"'box_on_targets_reward'.*Did you mean 'box_on_target_reward'"):
        gymnasium.make(ENV_ID, reward={"sum": ["success_reward", "box_on_targets_reward"]})


def test_shaped_sokoban_oracle_beats_adversaries_and_shaping_telescopes() -> None:
    gamma = 0.99

    def stack() -> Any:
        env = ProgressShaping(envgym.make(ENV_ID, max_turns=40), gamma=gamma)
        env = MetaReasoningReward(FormatReward(env, tags=("action",)))
        return ApplyRubric(
            env,
            {
                "sum": [
                    "success_reward",
                    "box_on_target_reward",
                    "format_reward",
                    "shaping_reward",
                    "meta_reasoning_reward",
                    "invalid_action_reward",
                ]
            },
        )

    env = stack()
    for seed in range(3):
        _, reset_info = env.reset(seed=seed)
        phi0 = reset_info["progress"]
        steps, info = oracle_episode(env, seed)
        assert info["success"]
        optimum = math.fsum(reward for _, reward, *_ in steps)
        shaped = math.fsum(gamma**t * s[4]["reward_components"]["shaping_reward"] for t, s in enumerate(steps))
        assert shaped == pytest.approx(-phi0, abs=1e-12)
        for adversary in (
            lambda t, goal: "<plan>push every box</plan><explore>try</explore><action>up</action><action>up</action>",
            lambda t, goal: f"<explore>move {t}</explore><action>{['up', 'down', 'left', 'right'][t % 4]}</action>",
            lambda t, goal: f"<plan>{goal}</plan><action>{goal}</action>",
            lambda t, goal: "",
        ):
            _, info = env.reset(seed=seed)
            total = 0.0
            while True:
                _, reward, terminated, truncated, info = env.step(adversary(info["turn"], info["task"]["goal"]))
                total += reward
                if terminated or truncated:
                    break
            assert total < optimum


def test_sokoban_components_reach_episode_results_and_metrics() -> None:
    results = run_episodes(ENV_ID, OracleAgent(), episodes=4, seed=0, env_kwargs={"reward": SPEC})
    assert all(r.success for r in results)
    metrics = component_metrics([r.reward_components for r in results])
    assert metrics["rewards/success/mean"] == 1.0
    assert metrics["rewards/box_on_target/mean"] > 0
    for result in results:
        assert result.total_reward == pytest.approx(
            1.0 + 0.5 * result.reward_components["box_on_target_reward"] + result.reward_components["step_cost_reward"]
        )


def test_reward_wrappers_rebuild_from_spec_and_pass_the_checker() -> None:
    import gymnasium as gym

    import envgym
    from envgym.rewards import FormatReward, ProgressShaping

    env = FormatReward(ProgressShaping(gym.make("envgym/Sokoban-v0"), gamma=0.9), tags=("think", "action"))
    names = [w.name for w in env.spec.additional_wrappers]
    assert names[-2:] == ["ProgressShaping", "FormatReward"]
    assert env.spec.additional_wrappers[-2].kwargs == {"gamma": 0.9}
    twin = gym.make(env.spec)
    assert twin.get_wrapper_attr("reward_components") == env.get_wrapper_attr("reward_components")
    assert twin.get_wrapper_attr("gamma") == 0.9
    assert "seeded_determinism" in envgym.check_env(env).checks
