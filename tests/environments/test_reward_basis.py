"""The reward basis (docs/family-contract.md), per family: every step's reward is the rubric's
combination of the components in ``info["reward_basis"]`` alone, that basis is the one the class
declares (and its card names), and the other components are marked diagnostic.

Every family's default rubric is a weighted sum (weight 1 on the basis, 0 on diagnostic
components), so the reward must equal ``math.fsum`` of the basis components. Both sides are
``math.fsum`` over the same float64 values (correctly rounded), so they agree exactly; the
tolerance (1e-12 absolute and relative) only allows for a rubric that adds in another order,
whose error is a few ulps of rewards below 1e3. Coopetition derives ``social_reward`` as
``reward - payoff_reward``, so ``payoff + social`` may differ from the reward by one rounding.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

import envgym
from envgym.families import card_sections

TOL = {"rel": 1e-12, "abs": 1e-12}


def _check_step(env: Any, reward: float, info: dict[str, Any]) -> None:
    basis = info["reward_basis"]
    components = info["reward_components"]
    assert set(basis) <= set(components)
    assert reward == pytest.approx(math.fsum(components[c] for c in basis), **TOL)


def _declared(env: Any) -> tuple[str, ...]:
    return type(env.unwrapped).reward_basis


def _play(env_id: str, *, steps: int, seed: int = 0, oracle: bool = False, **kwargs: Any) -> list[dict[str, Any]]:
    """Play one episode (the oracle's, or random valid actions) checking every step; the infos."""
    env = envgym.make(env_id, **kwargs)
    infos = []
    try:
        obs, info = env.reset(seed=seed)
        if not {"reward", "reward_mode"} & set(kwargs):  # the default reward: the declared basis
            assert tuple(info["reward_basis"]) == _declared(env)
        infos.append(info)
        policy = None
        if oracle:
            from envgym.agents.oracle import load_solver

            policy = load_solver(env_id)(env_id, seed)
        rng = random.Random(seed)
        for _ in range(steps):
            action = policy.act(obs, info) if policy else env.unwrapped.sample_action(rng)
            obs, reward, terminated, truncated, info = env.step(action)
            _check_step(env, reward, info)
            infos.append(info)
            if terminated or truncated:
                break
    finally:
        env.close()
    return infos


def test_games() -> None:
    _play("envgym/Sokoban-v0", steps=40)
    _play("envgym/Countdown-v0", steps=5, oracle=True)
    env = envgym.make_aec("envgym/TicTacToe-v0")
    env.reset(seed=1)
    rng = random.Random(1)
    for agent in env.agent_iter(max_iter=20):
        _, reward, terminated, truncated, info = env.last()
        assert info["reward_basis"] == list(type(env.unwrapped).reward_basis)
        _check_step(env, reward, info)
        env.step(None if terminated or truncated else rng.choice(info["admissible_actions"]))
    env.close()


def test_household() -> None:
    infos = _play("envgym/Household-Easy-v0", steps=30, oracle=True)
    assert infos[-1]["success"]
    # A zero weight takes a component out of the basis, and the reward follows it.
    infos = _play("envgym/Household-Easy-v0", steps=30, oracle=True, reward={"progress_reward": 0})
    assert "progress_reward" not in infos[-1]["reward_basis"]
    assert infos[-1]["reward_components"]["progress_reward"] != 0.0


def test_webshop_diagnostic_components_are_not_in_the_basis() -> None:
    infos = _play("envgym/WebShop-Small-v0", steps=15, seed=1, oracle=True)  # seed 1: a perfect purchase
    last = infos[-1]
    diagnostic = set(last["reward_components"]) - set(last["reward_basis"])
    assert diagnostic == {"type_reward", "attribute_reward", "option_reward", "price_reward", "success_reward"}
    # The diagnostic terms are not zero on the purchase: summing every component is not the reward.
    assert last["success"] and last["reward_components"]["success_reward"] == 1.0
    assert math.fsum(last["reward_components"].values()) > last["reward_components"]["webshop_reward"] + 1
    from envgym.environments.webshop.env import WebShopEnv

    basis_text = card_sections(WebShopEnv.env_card())["Reward basis"]
    assert "Diagnostic" in basis_text and all(f"``{c}``" in basis_text for c in diagnostic)


def test_service_tasks_name_their_basis_components() -> None:
    from envgym.environments.service.env import BASIS_COMPONENTS

    for seed in range(3):
        infos = _play("envgym/Service-Retail-v0", steps=40, seed=seed, oracle=True)
        first, last = infos[0], infos[-1]
        task_basis = [BASIS_COMPONENTS[b] for b in first["task"]["reward_basis"]]
        assert first["task_reward_basis"] == task_basis == last["task_reward_basis"]
        # task_reward is the product of the task's basis components (each 1 or 0).
        assert last["reward_components"]["task_reward"] == math.prod(last["reward_components"][c] for c in task_basis)
        assert last["success"] and last["reward_components"]["task_reward"] == 1.0


def test_coopetition() -> None:
    env = envgym.make_parallel("envgym/Coop-TrustDilemma-Text-v0")
    _, infos = env.reset(seed=0)
    rng = random.Random(0)
    for _ in range(5):
        actions = {a: f"<action>{rng.randint(0, 100)}</action>" for a in env.agents}
        _, rewards, _, _, infos = env.step(actions)
        for agent, reward in rewards.items():
            assert infos[agent]["reward_basis"] == ["payoff_reward", "social_reward"]
            _check_step(env, reward, infos[agent])
    env.close()
    joint = envgym.make("envgym/Coop-TrustDilemma-v0")
    joint.reset(seed=0)
    for _ in range(3):
        _, reward, _, _, info = joint.step(joint.action_space.sample())
        _check_step(joint, reward, info)
    joint.close()


@pytest.mark.slow  # highway-env's import and simulator: seconds, not milliseconds
def test_driving() -> None:
    pytest.importorskip("highway_env")
    infos = _play("envgym/Drive-Highway-v0", steps=4)
    assert infos[-1]["reward_basis"] == ["env_reward", "invalid_action_reward", "step_cost_reward"]
    # Another reward mode is another basis, and the reward follows it.
    infos = _play("envgym/Drive-Highway-v0", steps=4, reward_mode="carl")
    assert infos[-1]["reward_basis"] == ["carl_reward", "invalid_action_reward", "step_cost_reward"]
    assert "env_reward" in infos[-1]["reward_components"]


def test_swe_basis_from_its_rubric() -> None:
    # An episode needs a sandbox (tests/environments/swe plays them); the rubric is checked here on
    # every component at once: only the basis counts.
    env = envgym.make("envgym/SWE-v0")
    try:
        unwrapped = env.unwrapped
        assert unwrapped._basis == type(unwrapped).reward_basis
        values = {c: float(i + 1) for i, c in enumerate(unwrapped.reward_components)}
        reward = unwrapped._rubric(values, None)
        assert reward == math.fsum(values[c] for c in type(unwrapped).reward_basis)
    finally:
        env.close()


@pytest.mark.slow
def test_gui_grounding_in_a_browser() -> None:
    pytest.importorskip("playwright")
    infos = _play("envgym/GUIGrounding-v0", steps=1, oracle=True)
    assert infos[-1]["success"]
    assert infos[-1]["reward_basis"] == list(type(envgym.make("envgym/GUIGrounding-v0").unwrapped).reward_basis)


def test_tools_sql_exploration_is_diagnostic() -> None:
    infos = _play("envgym/Tools-SQL-v0", steps=6, oracle=True)  # the oracle runs its query before submitting
    last = infos[-1]
    assert last["success"] and last["reward_components"]["exploration_reward"] > 0
    assert "exploration_reward" not in last["reward_basis"]
    from envgym.environments.tools.sql import SQLEnv

    assert "diagnostic" in card_sections(SQLEnv.env_card())["Reward basis"]
