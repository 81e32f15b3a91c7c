"""Multi-agent reward modes on a small simultaneous-move text game (a public-goods game)."""

from __future__ import annotations

import contextlib
import io
import math
import random
import warnings
from typing import Any, ClassVar

import numpy as np
import pytest
from pettingzoo import ParallelEnv
from pettingzoo.test import api_test, parallel_api_test
from pettingzoo.utils.conversions import parallel_to_aec

from envgym.core import TerminationReason
from envgym.multiagent import TextObservation, TextSpaces, agent_info
from envgym.rewards import RubricError
from envgym.rewards.multiagent import (
    REWARD_MODES,
    AECRewardMode,
    ParallelRewardMode,
    apply_reward_mode,
    interdependence_matrix,
    with_reward_mode,
)

ENDOWMENT = 10
MULTIPLIER = 1.6


class PublicGoods(TextSpaces, ParallelEnv[str, str, str]):
    """A repeated public-goods game for three agents (tests only).

    Description: each round every agent keeps part of an endowment of 10 and contributes the
    rest; the pot is multiplied by 1.6 and shared equally.
    Observation: the round number and last round's contributions.
    Actions: ``contribute k`` with k from 0 to 10 (anything else counts as 0 and is invalid).
    Reward components: payoff_reward (``10 - c_i + 1.6 * sum(c) / 3``), or none with
    ``components=False``.
    Episode end: after ``rounds`` rounds (truncation).
    Arguments: rounds, reward_mode (``private``, ``integrated``, ``cooperative``: the mode as a
    first-class constructor argument), interdependence (the matrix D), components.
    Version history: v0 (tests only).
    """

    metadata: ClassVar[dict[str, Any]] = {"name": "public_goods_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(
        self, *, rounds: int = 3, reward_mode: str = "private", interdependence: Any = None, components: bool = True
    ) -> None:
        self.possible_agents = ["agent_0", "agent_1", "agent_2"]
        self.render_mode = None
        self.agents: list[str] = []
        self._init_text_spaces(self.possible_agents)
        self.rounds = rounds
        self.reward_mode = reward_mode
        self.matrix = None if interdependence is None else interdependence_matrix(interdependence, self.possible_agents)
        self.components = components
        self.round = 0
        self.last: dict[str, int] = {}

    def _obs(self, agent: str) -> TextObservation:
        return TextObservation(
            f"Round {self.round + 1} of {self.rounds}. Last contributions: {self.last}. You are {agent}."
        )

    def _info(self, payoff: float, valid: bool, done: bool) -> dict[str, Any]:
        return agent_info(
            {"id": "public-goods", "goal": "Maximise your payoff.", "split": "train"},
            admissible_actions=[f"contribute {k}" for k in range(ENDOWMENT + 1)] if not done else [],
            action_valid=valid,
            reward_components={"payoff_reward": payoff} if self.components else {},
            success=False,
            termination_reason=TerminationReason.MAX_TURNS if done else None,
            turn=self.round,
            invalid_actions=0,
        )

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        self.agents = list(self.possible_agents)
        self.round = 0
        self.last = {}
        return {a: self._obs(a) for a in self.agents}, {a: self._info(0.0, True, False) for a in self.agents}

    def step(self, actions: dict[str, Any]):
        contributions, valid = {}, {}
        for agent in self.agents:
            words = actions.get(agent).split() if isinstance(actions.get(agent), str) else []
            ok = len(words) == 2 and words[0] == "contribute" and words[1].isdigit() and int(words[1]) <= ENDOWMENT
            contributions[agent], valid[agent] = (int(words[1]) if ok else 0), ok
        pot = MULTIPLIER * sum(contributions.values()) / len(self.agents)
        payoffs = {a: ENDOWMENT - contributions[a] + pot for a in self.agents}
        rewards = apply_reward_mode(payoffs, self.reward_mode, self.matrix)
        self.round += 1
        self.last = contributions
        done = self.round >= self.rounds
        obs = {a: self._obs(a) for a in self.agents}
        infos = {a: self._info(payoffs[a], valid[a], done) for a in self.agents}
        terms = dict.fromkeys(self.agents, False)
        truncs = dict.fromkeys(self.agents, done)
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def sample_action(self, agent: str, rng: random.Random) -> str:
        return f"contribute {rng.randint(0, ENDOWMENT)}"


D = [[0.0, 0.5, 0.2], [0.5, 0.0, 0.0], [-0.3, 0.0, 0.0]]
AGENTS = ["agent_0", "agent_1", "agent_2"]


def payoffs_for(c: list[int]) -> list[float]:
    pot = MULTIPLIER * sum(c) / 3
    return [ENDOWMENT - ci + pot for ci in c]


def play_round(env: Any, contributions: list[int]) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    env.reset(seed=0)
    _, rewards, _, _, infos = env.step({a: f"contribute {c}" for a, c in zip(AGENTS, contributions)})
    return rewards, infos


def test_private_integrated_cooperative_match_the_formulas() -> None:
    c = [10, 4, 0]
    p = payoffs_for(c)
    integrated = [p[i] + sum(D[i][j] * p[j] for j in range(3) if j != i) for i in range(3)]
    expected = {
        "private": p,
        "integrated": integrated,
        "cooperative": [sum(p) / 3] * 3,
    }
    for mode, values in expected.items():
        env = ParallelRewardMode(PublicGoods(), mode, interdependence=D if mode == "integrated" else None)
        rewards, infos = play_round(env, c)
        assert [rewards[a] for a in AGENTS] == pytest.approx(values), mode
        for agent, value in zip(AGENTS, values):
            components = infos[agent]["reward_components"]
            assert set(components) == {"payoff_reward", "social_reward"}
            assert math.fsum(components.values()) == pytest.approx(value)
            assert infos[agent]["reward_mode"] == mode
    shared = ParallelRewardMode(PublicGoods(), "cooperative", interdependence=D)
    rewards, _ = play_round(shared, c)
    assert [rewards[a] for a in AGENTS] == pytest.approx([sum(integrated) / 3] * 3)


def test_modes_change_the_incentives() -> None:
    """Free-riding is dominant for private payoffs; contributing everything is best when cooperative."""
    for mode, best in (("private", 0), ("cooperative", ENDOWMENT)):
        env = ParallelRewardMode(PublicGoods(), mode)
        own = [play_round(env, [k, 5, 5])[0]["agent_0"] for k in range(ENDOWMENT + 1)]
        assert own.index(max(own)) == best, mode


def test_the_constructor_argument_and_the_wrapper_agree() -> None:
    for mode in REWARD_MODES:
        matrix = D if mode != "private" else None
        built_in = PublicGoods(reward_mode=mode, interdependence=matrix)
        wrapped = ParallelRewardMode(PublicGoods(), mode, interdependence=matrix)
        for contributions in ([0, 0, 0], [3, 7, 10], [10, 10, 1]):
            a, _ = play_round(built_in, contributions)
            b, _ = play_round(wrapped, contributions)
            assert a == pytest.approx(b)


def test_components_are_added_when_the_env_reports_none() -> None:
    env = ParallelRewardMode(PublicGoods(components=False), "integrated", interdependence=D)
    _, infos = env.reset(seed=0)
    assert infos["agent_0"]["reward_components"] == {"private_reward": 0.0, "social_reward": 0.0}
    rewards, infos = play_round(env, [2, 4, 6])
    p = payoffs_for([2, 4, 6])
    for i, agent in enumerate(AGENTS):
        assert infos[agent]["reward_components"]["private_reward"] == pytest.approx(p[i])
        assert math.fsum(infos[agent]["reward_components"].values()) == pytest.approx(rewards[agent])


def test_aec_wrapper_accumulates_like_pettingzoo() -> None:
    contributions = {"agent_0": 10, "agent_1": 3, "agent_2": 0}
    for mode in REWARD_MODES:
        matrix = D if mode != "private" else None
        aec = with_reward_mode(parallel_to_aec(PublicGoods(rounds=2)), mode, interdependence=matrix)
        assert isinstance(aec, AECRewardMode)
        parallel = ParallelRewardMode(PublicGoods(rounds=2), mode, interdependence=matrix)
        expected, _ = play_round(parallel, list(contributions.values()))
        aec.reset(seed=0)
        seen: dict[str, list[float]] = {a: [] for a in AGENTS}
        for agent in aec.agent_iter():
            _, reward, terminated, truncated, info = aec.last()
            seen[agent].append(reward)
            assert info["reward_mode"] == mode
            aec.step(None if terminated or truncated else f"contribute {contributions[agent]}")
        for agent in AGENTS:
            # First turn: nothing yet; then one round's reward per later turn (PettingZoo's convention).
            assert seen[agent][0] == 0.0
            assert seen[agent][1:] == pytest.approx([expected[agent]] * (len(seen[agent]) - 1))


def test_wrappers_pass_the_pettingzoo_api_tests() -> None:
    # PettingZoo warns that text spaces are not Box/Discrete and str observations not arrays: expected here.
    expected = ("probably should be gymnasium.spaces", "Observation is not a NumPy array")
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        parallel_api_test(ParallelRewardMode(PublicGoods(rounds=4), "integrated", interdependence=D), num_cycles=20)
        api_test(AECRewardMode(parallel_to_aec(PublicGoods(rounds=4)), "cooperative"), num_cycles=20)
    unexpected = {str(w.message) for w in caught if not any(e in str(w.message) for e in expected)}
    assert not unexpected


def test_interdependence_matrix_forms_and_validation() -> None:
    as_mapping = interdependence_matrix(
        {"agent_0": {"agent_1": 0.5, "agent_2": 0.2}, "agent_2": {"agent_0": -0.3}}, AGENTS
    )
    as_rows = interdependence_matrix(D[:1] + [[0.5, 0.0, 0.0], [-0.3, 0.0, 0.0]], AGENTS)
    as_array = interdependence_matrix(np.array([[0.0, 0.5, 0.2], [0.0, 0.0, 0.0], [-0.3, 0.0, 0.0]]), AGENTS)
    assert as_mapping == as_array
    assert as_rows["agent_1"]["agent_0"] == 0.5
    bad = [
        ([[0.0, 1.0], [1.0, 0.0]], r"3 x 3 matrix"),
        ([[0.0, 1.0, 0.0], [1.0, 0.0], [0.0, 0.0, 0.0]], r"row 1: expected 3 entries"),
        ([[0.0, math.nan, 0.0], [0.0] * 3, [0.0] * 3], r"\[0\]\[1\]: expected a finite number"),
        ([[1.0, 0.0, 0.0], [0.0] * 3, [0.0] * 3], r"the diagonal must be 0"),
        ({"agent_9": {"agent_0": 1.0}}, r"unknown agent 'agent_9'.*Did you mean"),
        ({"agent_0": {"agnet_1": 1.0}}, r"Did you mean 'agent_1'"),
        ("0.5", r"3 x 3"),
    ]
    for matrix, match in bad:
        with pytest.raises(RubricError, match=match):
            interdependence_matrix(matrix, AGENTS)


def test_bad_modes_fail_at_construction() -> None:
    with pytest.raises(RubricError, match="Did you mean 'cooperative'"):
        ParallelRewardMode(PublicGoods(), "cooperativ")
    with pytest.raises(RubricError, match="needs interdependence=D"):
        ParallelRewardMode(PublicGoods(), "integrated")
    with pytest.raises(RubricError, match="ParallelEnv or AECEnv"):
        with_reward_mode(object(), "private")
    with pytest.raises(RubricError, match="one of private, integrated, cooperative"):
        apply_reward_mode({"a": 1.0}, "selfish")
    assert apply_reward_mode({}, "cooperative") == {}
