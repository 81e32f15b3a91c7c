"""``envgym run`` on the numeric coopetition ids (``envgym/Coop-<Name>-v0``, the joint-action view).

The random agent sent ``""`` every turn there (the view listed no admissible actions and had no
``sample_action``) and the oracle failed with "looked for envgym.agents.solvers.None". Now the
view reads its joint action as text (``"12.5 30"``), draws seeded random actions as that text,
and has an oracle (:mod:`envgym.agents.solvers.coopetition_joint`); an env without a solver
fails with the ids of its family that have one.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import gymnasium
import numpy as np
import pytest
from envgym.agents.oracle import load_solver
from envgym.agents.solvers.coopetition_joint import Solver
from envgym.environments.coopetition.catalog import GAMES
from typer.testing import CliRunner

from envgym import registration
from envgym.cli import app
from envgym.errors import NotAvailableError
from envgym.testing.common import BAD_ACTIONS

NUMERIC_IDS = [f"envgym/Coop-{g.name}-v0" for g in GAMES]


def _run(env_id: str, agent: str, episodes: int = 2) -> dict:
    result = CliRunner().invoke(
        app, ["run", env_id, "-a", agent, "-n", str(episodes), "--json", "--per-episode", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("env_id", NUMERIC_IDS)
def test_sampled_and_oracle_actions_are_valid_action_text(env_id: str) -> None:
    env = gymnasium.make(env_id)
    try:
        _, info = env.reset(seed=3)
        endowments = np.asarray(info["task"]["endowments"])
        text = env.unwrapped.sample_action(random.Random(5))
        assert text == env.unwrapped.sample_action(random.Random(5))  # seeded
        values = np.array([float(x) for x in text.split()])
        assert values.shape == endowments.shape and np.all((values >= 0) & (values <= endowments))
        _, _, _, _, info = env.step(text)
        assert info["action_valid"], info.get("invalid_reason")
        oracle = Solver(env_id, 3).act(None, info)
        _, _, _, _, info = env.step(oracle)
        assert info["action_valid"], info.get("invalid_reason")
    finally:
        env.close()


def test_joint_action_text_forms_and_bad_text() -> None:
    env = gymnasium.make("envgym/Coop-GiftExchange-v0")  # two agents
    try:
        env.reset(seed=0)
        for text in ("10 20", "10, 20", "[10, 20]", " [ 10.5 ,20 ] "):
            assert env.step(text)[4]["action_valid"], text
        env.reset(seed=0)
        for text in ("10", "10 20 30", "nan 1", "ten twenty", "[10, 20"):
            info = env.step(text)[4]
            assert not info["action_valid"] and info["invalid_reason"], text
            env.reset(seed=0)  # three invalid actions in a row end the episode
        for bad in BAD_ACTIONS:
            info = env.step(bad)[4]
            assert not info["action_valid"], bad
            env.reset(seed=0)
        # text and the array it spells play the same round
        a, b = gymnasium.make("envgym/Coop-GiftExchange-v0"), env
        a.reset(seed=1), b.reset(seed=1)
        obs_a, r_a, *_ = a.step(np.array([12.25, 30.0], dtype=np.float32))
        obs_b, r_b, *_ = b.step("12.25 30")
        assert r_a == r_b and np.array_equal(obs_a, obs_b)
        a.close()
    finally:
        env.close()


def test_random_agent_plays_valid_seeded_actions() -> None:
    first = _run("envgym/Coop-TrustDilemma-v0", "random")
    assert first["invalid_actions"] == 0 and first["steps"] > 2
    assert first["termination_reasons"].get("invalid_limit") is None
    again = _run("envgym/Coop-TrustDilemma-v0", "random")
    played = [(e["total_reward"], e["num_turns"], e["final_observation"]) for e in first["per_episode"]]
    assert played == [(e["total_reward"], e["num_turns"], e["final_observation"]) for e in again["per_episode"]]


def test_oracle_plays_the_numeric_view_and_beats_random() -> None:
    oracle = _run("envgym/Coop-GiftExchange-v0", "oracle", episodes=1)
    random_ = _run("envgym/Coop-GiftExchange-v0", "random", episodes=1)
    assert oracle["invalid_actions"] == 0 and oracle["mean_turns"] == 100
    assert oracle["mean_return"] > 1.3 * random_["mean_return"] > 0


@pytest.fixture
def solverless_family() -> Iterator[str]:
    specs = [
        registration.EnvSpec(id="oracletest/Guess-v0", entry_point="toy_envs:GuessEnv", family="oracletest"),
        registration.EnvSpec(
            id="oracletest/Lake-v0",
            entry_point="envgym.environments.games.frozen_lake:FrozenLakeEnv",
            family="oracletest",
        ),
    ]
    for env_spec in specs:
        registration.register(env_spec)
    yield specs[0].id
    for env_spec in specs:
        # The registry has no public "unregister": tests clean up the private tables they filled.
        registration._single.pop(env_spec.id, None)
        gymnasium.registry.pop(env_spec.id, None)


def test_no_solver_names_the_ids_that_have_one(solverless_family: str) -> None:
    with pytest.raises(NotAvailableError) as caught:
        load_solver(solverless_family)
    message = str(caught.value)
    assert "no oracle solver for 'oracletest/Guess-v0' (GuessEnv; looked for envgym.agents.solvers.guess)" in message
    assert "Oracles in the oracletest family: oracletest/Lake-v0." in message
