"""TR-4 games: the reciprocity equations and the five games on hand-worked values.

Conventions: ``t`` is the number of rounds played including the current one. The reference
computes the memory average over the last ``min(k, t - 1)`` entries of a history that already
holds the current round; these tests pin that (see :mod:`envgym.environments.coopetition.reciprocity`).
Signals and ``tanh`` are float32 (the contributions' dtype), the rest float64; rewards float32.
"""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest
from envgym.environments.coopetition.catalog import GAMES, game_class
from envgym.environments.coopetition.reciprocity import (
    AppleAppStore,
    GiftExchange,
    GraduatedSanction,
    IndirectReciprocity,
    ReciprocalDilemma,
    ReciprocityParams,
    TR4Game,
    bounded_response,
    cooperation_signal,
    memory_average,
    reciprocity_multiplier,
    reciprocity_sensitivity,
    trust_gated_effect,
)
from floats import FEW_OPS, assert_close_scaled

import envgym
from envgym.errors import ConfigError, InvalidKwargsError

F32 = np.float32
TR4 = [g for g in GAMES if g.mechanism == "TR-4"]


def rows(*values: list[float]) -> list[np.ndarray]:
    return [np.asarray(v, dtype=F32) for v in values]


def close32(actual: float, expected: float, msg: str = "") -> None:
    assert_close_scaled(actual, expected, dtype=F32, ulps=FEW_OPS, msg=msg)


# ---------------------------------------------------------------------- Eq 20: memory average
def test_memory_average_is_zero_before_two_rounds() -> None:
    # t = 0 and t = 1: no window (min(k, t - 1) <= 0), the average is 0.
    assert memory_average([], 0, 5) == 0.0
    assert memory_average(rows([80.0, 10.0]), 0, 5) == 0.0


def test_memory_average_window_ends_at_the_current_round() -> None:
    history = rows([10.0, 1.0], [20.0, 2.0], [40.0, 4.0])  # t = 3, current round last
    # w = min(5, 3 - 1) = 2: the last two entries, rounds 2 and 3 (Eq 20 would take rounds 1, 2):
    # agent 0: (20 + 40) / 2 = 30; agent 1: (2 + 4) / 2 = 3.
    assert memory_average(history, 0, 5) == 30.0
    assert memory_average(history, 1, 5) == 3.0
    # Round 2 (t = 2): w = 1, the current round alone: 20.
    assert memory_average(history[:2], 0, 5) == 20.0


def test_memory_average_window_is_capped_at_k() -> None:
    history = rows(*[[float(r)] for r in range(1, 13)])  # rounds 1..12 with contribution = round
    # t = 12, k = 10: w = min(10, 11) = 10, entries 3..12: (3 + ... + 12) / 10 = 75 / 10 = 7.5.
    assert memory_average(history, 0, 10) == 7.5
    # k = 3: entries 10, 11, 12: 33 / 3 = 11.
    assert memory_average(history, 0, 3) == 11.0


# ---------------------------------------------------------------------- Eqs 19, 21, 23, 44
def test_cooperation_signal_keeps_the_contributions_float32() -> None:
    assert cooperation_signal(40.0, 30.0) == 10.0
    signal = cooperation_signal(F32(25.0), 22.5)
    assert signal == 2.5 and signal.dtype == F32


def test_bounded_response() -> None:
    # tanh(1.0 * 0.5) = 0.46211715726; tanh(2.5) = 0.98661429815; tanh(-5) = -0.99990920426.
    close32(bounded_response(0.5, 1.0), 0.46211715726)
    close32(bounded_response(F32(2.5), 1.0), 0.98661429815)
    close32(bounded_response(F32(-5.0), 1.0), -0.99990920426)
    # kappa = 0.8, s = 1.25 (float32): tanh(1.0) = 0.76159415596.
    close32(bounded_response(F32(1.25), 0.8), 0.76159415596)
    # Saturation in float32: tanh(10) = 1 - 4.1e-9 rounds to exactly 1.
    assert bounded_response(F32(10.0), 1.0) == 1.0
    assert bounded_response(F32(-10.0), 1.0) == -1.0
    assert bounded_response(F32(0.0), 0.8) == 0.0


def test_reciprocity_sensitivity() -> None:
    # rho = rho_0 * D ** eta: 1.0 * 0.5 ** 1 = 0.5; 1.2 * 0.7 ** 1.5 = 1.2 * 0.58566201 = 0.70279441;
    # 1.2 * 0.4 ** 1.5 = 1.2 * 0.25298221 = 0.30357866; 0.6 * 0.35 ** 1.5 = 0.6 * 0.20706279 = 0.12423768;
    # 0.8 ** 1.2 = 0.76508200.
    assert reciprocity_sensitivity(1.0, 0.5, 1.0) == 0.5
    close32(reciprocity_sensitivity(1.2, 0.7, 1.5), 0.70279441)
    close32(reciprocity_sensitivity(1.2, 0.4, 1.5), 0.30357866)
    close32(reciprocity_sensitivity(0.6, 0.35, 1.5), 0.12423768)
    close32(reciprocity_sensitivity(1.0, 0.8, 1.2), 0.76508200)
    assert reciprocity_sensitivity(1.0, 0.0, 1.2) == 0.0


def test_trust_gated_effect() -> None:
    # lambda_R * T * (1 + omega * D) * rho * phi = 1.0 * 0.5 * (1 + 0.6 * 0.5) * 0.5 * 1.0 = 0.5 * 1.3 * 0.5 = 0.325.
    close32(trust_gated_effect(0.5, 0.5, 1.0, 1.0, 0.6, 0.5), 0.325)
    # 1.5 * 0.55 * 1.2 * 0.32 * -1 = -0.3168.
    close32(trust_gated_effect(0.55, 0.32, -1.0, 1.5, 0.5, 0.4), -0.3168)
    assert trust_gated_effect(0.0, 0.5, 1.0, 1.0, 0.6, 0.5) == 0.0


def test_reciprocity_multiplier_and_its_floor() -> None:
    assert reciprocity_multiplier(0.0, 100.0) == 1.0
    assert reciprocity_multiplier(-50.0, 100.0) == 0.5  # 1 - 50/100
    assert reciprocity_multiplier(45.0, 90.0) == 1.5  # 1 + 45/90
    assert reciprocity_multiplier(-150.0, 100.0) == 0.01  # 1 - 1.5 < 0.01: floored
    assert reciprocity_multiplier(-100.0, 100.0) == 0.01  # exactly 0 would zero the reward: floored


# ---------------------------------------------------------------------- the modifier in a game
def test_gift_exchange_modifier_from_a_set_state() -> None:
    game = GiftExchange()
    game.reset(0)
    game.history = rows([30.0, 24.0], [50.0, 20.0], [40.0, 25.0])
    game.actions = game.history[-1]
    game.trust = np.array([[1.0, 0.6], [0.4, 1.0]])
    # t = 3, k = 3: w = min(3, 2) = 2, rounds 2 and 3: abar_0 = (50 + 40) / 2 = 45, abar_1 = (20 + 25) / 2 = 22.5.
    # Employer (0) looks at the worker: s_01 = 25 - 22.5 = 2.5, phi = tanh(2.5) = 0.98661430,
    # D_01 = 0.4 (float32), rho_01 = 1.2 * 0.4 ** 1.5 = 0.30357866,
    # effect = 1.2 * 0.6 * (1 + 0.8 * 0.4) * 0.30357866 * 0.98661430 = 0.72 * 1.32 * 0.29952... = 0.28465910;
    # multiplier 1 + 0.28465910 / mean(100, 80) = 1 + 0.28465910 / 90 = 1.00316288.
    # Worker (1) looks at the employer: s_10 = 40 - 45 = -5, phi = tanh(-5) = -0.99990920,
    # rho_10 = 1.2 * 0.7 ** 1.5 = 0.70279440, effect = 1.2 * 0.4 * (1 + 0.8 * 0.7) * 0.70279440 * -0.99990920
    # = 0.48 * 1.56 * -0.70273059 = -0.52620467; multiplier 1 - 0.52620467 / 90 = 0.99415328.
    pair01, pair10 = game.pair(0, 1), game.pair(1, 0)
    assert (pair01.memory_average, pair01.signal) == (22.5, 2.5)
    assert (pair10.memory_average, pair10.signal) == (45.0, -5.0)
    close32(pair01.effect, 0.28465910)
    close32(pair10.effect, -0.52620467)
    close32(game.reciprocity_modifier(0), 1.00316288)
    close32(game.reciprocity_modifier(1), 0.99415328)


def test_reciprocal_dilemma_three_rounds_by_hand() -> None:
    game = ReciprocalDilemma()
    game.reset(0)
    # Round 1, [50, 50]. Trust: signal tanh(50 - 30) = 1 (float32), T_01 = 0.5 + 0.1 * 1 * min(1 - 0.5, 1 - 0 - 0.5)
    # = 0.55. Reciprocity: t = 1, abar = 0, s = 50, phi = tanh(50) = 1, rho = 0.5,
    # effect = 1 * 0.55 * (1 + 0.6 * 0.5) * 0.5 * 1 = 0.3575, multiplier 1 + 0.3575 / 100 = 1.003575.
    # Reward (integrated): pi = (100 - 50) + 20 ln 51 + 0.5 * 0.65 * sqrt(50 * 50) = 50 + 78.636513 + 16.25
    # = 144.886513; U = pi * (1 + min(0.55, 1) * 0.5) = 144.886513 * 1.275 = 184.730304;
    # reward = 184.730304 * 1.003575 = 185.390714.
    result = game.step(np.array([50.0, 50.0], dtype=F32))
    assert game.trust[0, 1] == pytest.approx(0.55, rel=1e-15)
    assert result.info["cooperation_signals"] == {"0->1": 50.0, "1->0": 50.0}
    assert result.info["memory_averages"] == {"0->1": 0.0, "1->0": 0.0}
    close32(result.info["reciprocity_effects"]["0->1"], 0.3575)
    close32(game.reciprocity_modifier(0), 1.003575)
    assert_close_scaled(result.rewards, [185.390714, 185.390714], dtype=F32, ulps=FEW_OPS)

    # Round 2, [60, 40]: t = 2, w = 1, the window is round 2 itself: abar = a, every signal 0, multiplier 1
    # (Eq 20 would give s_01 = 40 - 50 = -10). Trust: both signals tanh(30), tanh(10) round to 1,
    # T = 0.55 + 0.1 * (1 - 0.55) = 0.595.
    result = game.step(np.array([60.0, 40.0], dtype=F32))
    assert result.info["cooperation_signals"] == {"0->1": 0.0, "1->0": 0.0}
    assert result.info["memory_averages"] == {"0->1": 40.0, "1->0": 60.0}
    assert result.info["reciprocity_effects"] == {"0->1": 0.0, "1->0": 0.0}
    assert game.reciprocity_modifier(0) == game.reciprocity_modifier(1) == 1.0
    np.testing.assert_array_equal(result.rewards, game.mode_rewards(game.actions, "integrated"))

    # Round 3, [70, 20]: t = 3, w = 2 (rounds 2, 3): abar_1 = (40 + 20) / 2 = 30, s_01 = 20 - 30 = -10;
    # abar_0 = (60 + 70) / 2 = 65, s_10 = 70 - 65 = 5.
    # Trust: agent 1's signal tanh(20 - 30) = -1: T_01 = 0.595 - 0.3 * 0.595 * (1 + 0.5 * 0.5) = 0.595 - 0.223125
    # = 0.371875; agent 0's tanh(40) = 1: T_10 = 0.595 + 0.1 * (1 - 0.595) = 0.6355.
    # effect_01 = 0.371875 * 1.3 * 0.5 * tanh(-10) = 0.24171875 * -1 = -0.24171875 -> multiplier 0.9975828125;
    # effect_10 = 0.6355 * 1.3 * 0.5 * tanh(5) = 0.413075 * 0.99990920 = 0.41303750 -> multiplier 1.0041303750.
    result = game.step(np.array([70.0, 20.0], dtype=F32))
    assert result.info["cooperation_signals"] == {"0->1": -10.0, "1->0": 5.0}
    assert result.info["memory_averages"] == {"0->1": 30.0, "1->0": 65.0}
    close32(game.trust[0, 1], 0.371875)
    close32(game.trust[1, 0], 0.6355)
    close32(result.info["reciprocity_effects"]["0->1"], -0.24171875)
    close32(result.info["reciprocity_effects"]["1->0"], 0.41303750)
    close32(game.reciprocity_modifier(0), 0.9975828125)
    close32(game.reciprocity_modifier(1), 1.0041303750)
    # The multiplier scales the mode's reward as float32 (the reference's rewards[i] *= m).
    base = game.mode_rewards(game.actions, "integrated")
    expected = [F32(base[0]) * F32(0.9975828125), F32(base[1]) * F32(1.0041303750)]
    assert_close_scaled(result.rewards, expected, dtype=F32, ulps=FEW_OPS)


@pytest.mark.parametrize(
    ("cls", "actions", "expected"),
    [
        # Every partner contributes above baseline in round 1: trust 0.5 -> 0.55 (0.6 -> 0.64 for Apple), phi = 1.
        # IndirectReciprocity: 3 partners * 1.5 * 0.55 * (1 + 0.5 * 0.4) * 0.8 * 0.4 = 3 * 0.3168 = 0.9504 -> 1.009504.
        (IndirectReciprocity, [60.0] * 4, [1.009504] * 4),
        # GraduatedSanction: kappa 0.8, phi = tanh(0.8 * 60) = 1; 5 * 1.8 * 0.55 * (1 + 0.35) * 0.6 * 0.35 ** 1.5
        # = 5 * 1.3365 * 0.12423768 = 0.83021824 -> 1.0083021824.
        (GraduatedSanction, [60.0] * 6, [1.0083021824] * 6),
        # AppleAppStore, mean endowment 80, T = 0.64:
        # Apple: 0.64 * (1 + 0.8 * 0.3) * 0.3 ** 1.2 + 0.64 * (1 + 0.8 * 0.2) * 0.2 ** 1.2
        #   = 0.64 * 1.24 * 0.23580093 + 0.64 * 1.16 * 0.14495593 = 0.18713161 + 0.10761529 = 0.29474691 -> 1.00368434;
        # major: 0.64 * 1.64 * 0.8 ** 1.2 + 0.64 * 1.12 * 0.15 ** 1.2 = 0.80303... + 0.07357... = 0.87660123 -> 1.01095752;
        # small: 0.64 * 1.68 * 0.85 ** 1.2 + 0.64 * 1.08 * 0.1 ** 1.2 = 0.88469... + 0.04361... = 0.92830354 -> 1.01160379.
        (AppleAppStore, [70.0, 56.0, 42.0], [1.00368434, 1.01095752, 1.01160379]),
    ],
)
def test_first_round_multipliers(cls: type[TR4Game], actions: list[float], expected: list[float]) -> None:
    game = cls()
    game.reset(0)
    result = game.step(np.asarray(actions, dtype=F32))
    got = [game.reciprocity_modifier(i) for i in range(game.n_agents)]
    assert_close_scaled(got, expected, dtype=F32, ulps=FEW_OPS)
    base = game.mode_rewards(game.actions, "integrated")
    assert_close_scaled(result.rewards, base * np.asarray(expected), dtype=F32, ulps=FEW_OPS)


def test_the_floor_holds_in_play() -> None:
    # A TR-4 game with lambda_R = 1000. Round 3, [50, 0]: agent 0 sees s_01 = 0 - (50 + 0) / 2 = -25, phi = -1:
    # U = 1000 * T_01 * 1.3 * 0.5 * -1, hundreds below -99 -> multiplier floored at 0.01.
    game = TR4Game(ReciprocityParams(lambda_R=1000.0), n_agents=2, max_steps=5, endowments=[100.0, 100.0])
    game.reset(0)
    game.step(np.array([50.0, 50.0], dtype=F32))
    game.step(np.array([50.0, 50.0], dtype=F32))
    result = game.step(np.array([50.0, 0.0], dtype=F32))
    assert game.reciprocity_modifier(0) == 0.01
    base = game.mode_rewards(game.actions, "integrated")
    assert result.rewards[0] == F32(base[0]) * F32(0.01)
    assert result.rewards[0] > 0  # shrunk, not flipped


# ---------------------------------------------------------------------- info, termination, kwargs
def test_info_extras_at_reset_and_after_a_round() -> None:
    game = AppleAppStore()
    game.reset(3)
    info = game.legacy_info()
    pairs = ["0->1", "0->2", "1->0", "1->2", "2->0", "2->1"]
    for key in ("cooperation_signals", "reciprocity_effects", "memory_averages"):
        assert list(info[key]) == pairs
        assert set(info[key].values()) == {0.0}
    assert info["tr4_memory_window"] == 4
    result = game.step(np.array([70.0, 56.0, 42.0], dtype=F32))
    # Round 1: abar = 0, s_ij = a_j.
    assert result.info["cooperation_signals"] == {
        "0->1": 56.0,
        "0->2": 42.0,
        "1->0": 70.0,
        "1->2": 42.0,
        "2->0": 70.0,
        "2->1": 56.0,
    }
    # Apple's two effects (see test_first_round_multipliers): 0.18713161 and 0.10761529.
    close32(result.info["reciprocity_effects"]["0->1"], 0.18713161)
    close32(result.info["reciprocity_effects"]["0->2"], 0.10761529)
    assert all(isinstance(v, float) for v in result.info["cooperation_signals"].values())
    assert game.describe()["reciprocity"] == {
        "rho_0": 1.0,
        "eta": 1.2,
        "kappa": 0.8,
        "k": 4,
        "lambda_R": 1.0,
        "omega": 0.8,
    }


@pytest.mark.parametrize("entry", TR4, ids=lambda g: g.name)
def test_no_early_termination_even_under_total_defection(entry) -> None:
    game = game_class(entry.name)()
    game.reset(0)
    horizon = game.max_steps
    for t in range(1, horizon + 1):
        result = game.step(np.zeros(game.n_agents, dtype=F32))
        assert not result.terminated, f"{entry.name} terminated at round {t}"
        assert result.truncated == (t == horizon)
    assert game.mean_trust() < 0.01  # trust collapsed, and still no early end


@pytest.mark.parametrize(
    ("entry", "n", "horizon", "window"),
    [
        (TR4[0], 2, 100, 5),
        (TR4[1], 2, 100, 3),
        (TR4[2], 4, 150, 7),
        (TR4[3], 6, 200, 10),
        (TR4[4], 3, 66, 4),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_catalog_entries_and_defaults(entry, n: int, horizon: int, window: int) -> None:
    cls = game_class(entry.name)
    assert (cls.name, cls.mechanism, cls.summary) == (entry.name, "TR-4", entry.summary)
    game = cls()
    assert (game.n_agents, game.max_steps, game.reciprocity.k) == (n, horizon, window)
    assert game.trust_enabled and game.reward_mode == "integrated"
    assert f"default {horizon}" in cls.__doc__ and "no early termination" in cls.__doc__


def test_max_steps_kwarg_truncates() -> None:
    env = gymnasium.make("envgym/Coop-GiftExchange-v0", max_steps=3, split="test")
    env.reset(seed=0)
    ends = [env.step(np.array([50.0, 40.0], dtype=F32))[2:4] for _ in range(3)]
    assert ends == [(False, False), (False, False), (False, True)]
    env.close()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_bad_max_steps_is_a_config_error(bad) -> None:
    with pytest.raises(ConfigError, match="max_steps must be a positive int"):
        ReciprocalDilemma(max_steps=bad)


@pytest.mark.parametrize("kwarg", ["reciprocity", "k", "n_agents", "kappa"])
def test_only_upstream_kwargs_are_accepted(kwarg: str) -> None:
    with pytest.raises(InvalidKwargsError, match="Accepted: max_steps, normalize, reward_mode, reward_scale"):
        envgym.make_parallel("envgym/Coop-IndirectReciprocity-v0", **{kwarg: 1})


def test_common_kwargs_reach_the_game() -> None:
    game = GraduatedSanction(reward_mode="private", normalize=True, reward_scale=2.0)
    assert (game.reward_mode, game.normalize, game.reward_scale) == ("private", True, 2.0)
    with pytest.raises(ConfigError, match="reward_mode"):
        GraduatedSanction(reward_mode="selfish")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("k", 0, "memory window k must be a positive int"),
        ("k", 2.0, "memory window k must be a positive int"),
        ("k", True, "memory window k must be a positive int"),
        ("rho_0", -0.1, "rho_0 must be a finite number >= 0"),
        ("eta", 0.0, "eta must be a finite number > 0"),
        ("kappa", -1.0, "kappa must be a finite number > 0"),
        ("lambda_R", math.nan, "lambda_R must be a finite number >= 0"),
        ("omega", math.inf, "omega must be a finite number >= 0"),
        ("omega", "0.5", "omega must be a finite number >= 0"),
    ],
)
def test_reciprocity_params_are_validated(field: str, value, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ReciprocityParams(**{field: value})


def test_reciprocity_params_defaults_are_the_references() -> None:
    p = ReciprocityParams()
    assert (p.rho_0, p.eta, p.kappa, p.k, p.lambda_R, p.omega) == (1.0, 1.0, 1.0, 5, 1.0, 0.6)


def test_new_reciprocity_parameters_take_effect_mid_episode() -> None:
    """The fixed factors of each pair (``1 + omega D_ij``, ``rho_ij``, ``f32(kappa)``) are kept
    between rounds; new parameters replace them from the next round on."""
    from dataclasses import replace

    game = GiftExchange()
    game.reset(0)
    for a0, a1 in ((60.0, 10.0), (20.0, 50.0), (70.0, 5.0)):
        result = game.step(np.array([a0, a1], dtype=np.float32))
    assert any(v != 0.0 for v in result.info["reciprocity_effects"].values())
    game.reciprocity = replace(game.reciprocity, lambda_R=0.0)
    result = game.step(np.array([10.0, 70.0], dtype=np.float32))
    assert set(result.info["reciprocity_effects"].values()) == {0.0}
    assert game.reciprocity_modifier(0) == game.reciprocity_modifier(1) == 1.0
