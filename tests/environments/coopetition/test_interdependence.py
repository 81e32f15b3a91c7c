"""TR-1 games (interdependence and complementarity), each rule on hand-worked values.

Most payoff checks use the contribution ``E1 = e - 1`` (1.718282), for which ``ln(1 + E1) = 1``:
the value of a contribution is then ``theta`` itself, and with equal contributions the synergy
(geometric mean) is ``E1``. Results the reference computes in float32 are compared with
:data:`FEW_OPS` ulps of float32; trust (float64 in the reference) with float64 ulps where the
arithmetic is a few operations on exact inputs. Trust after a defection goes through the
reference's float32 amplification ``1 + xi * D`` (``D`` is float32), so those values carry float32
rounding and are compared as float32 results.
"""

from __future__ import annotations

import inspect
import math

import gymnasium
import numpy as np
import pytest
from envgym.environments.coopetition.interdependence import (
    DynamicPartnerSelection,
    PartnerHoldUp,
    PlatformEcosystem,
    RenaultNissan,
    SynergySearch,
)
from floats import FEW_OPS, assert_close_scaled

from envgym.errors import ConfigError

E1 = math.e - 1.0
F32 = np.float32


def play(game, *rows):
    """Reset with seed 0 and play ``rows``; the last round's result."""
    game.reset(0)
    result = None
    for row in rows:
        result = game.step(np.asarray(row, dtype=F32))
    return result


def close32(actual, expected, msg=""):
    assert_close_scaled(actual, expected, dtype=F32, ulps=FEW_OPS, msg=msg)


def close64(actual, expected, msg=""):
    assert_close_scaled(actual, expected, dtype=np.float64, ulps=FEW_OPS, msg=msg)


@pytest.mark.parametrize(
    "cls", [PartnerHoldUp, PlatformEcosystem, DynamicPartnerSelection, SynergySearch, RenaultNissan]
)
def test_env_card_names_every_argument(cls):
    doc = inspect.getdoc(cls)
    assert doc and "Arguments:" in doc
    for name in inspect.signature(cls.__init__).parameters:
        if name not in ("self", "common"):
            assert f"``{name}" in doc, f"{cls.__name__}'s card does not mention {name}"


# ---------------------------------------------------------------- PartnerHoldUp
def test_partner_holdup_parameters():
    g = PartnerHoldUp()
    assert g.n_agents == 2 and g.max_steps == 100
    assert g.endowments.tolist() == [120.0, 80.0]
    assert g.alpha.tolist() == [F32(0.6), F32(0.4)]
    # D[0, 1] = strong_dependency (how much the strong partner needs the weak one), D[1, 0] = weak_dependency.
    assert g.D.tolist() == [[0.0, F32(0.35)], [F32(0.85), 0.0]]
    # 35 % of the endowments: 120 * 0.35 = 42, 80 * 0.35 = 28.
    assert g.baselines.tolist() == [42.0, 28.0]
    assert g.power_asymmetry == 0.85 - 0.35
    custom = PartnerHoldUp(strong_dependency=0.2, weak_dependency=0.9)
    assert custom.D.tolist() == [[0.0, F32(0.2)], [F32(0.9), 0.0]]


def test_partner_holdup_private_payoffs():
    # f = 20 ln(1 + E1) = 20 each; S = 0.6 * E1 = 1.030969
    # pi_0 = 120 - E1 + 20 + 0.6 * S = 138.900300;  pi_1 = 80 - E1 + 20 + 0.4 * S = 98.694106
    r = play(PartnerHoldUp(reward_mode="private"), [E1, E1])
    s = 0.6 * E1
    close32(r.rewards, [120 - E1 + 20 + 0.6 * s, 80 - E1 + 20 + 0.4 * s])
    close32([138.900300, 98.694106], r.rewards)


def test_partner_holdup_trust_and_integrated_utility():
    # (0, 0) is far below both baselines: each signal is tanh(1.2 * (0 - b)) = -1 (exactly, in float32).
    # T_ij <- 0.55 - 0.35 * 0.55 * (1 + 0.7 D_ij):  T_10 = 0.55 * (1 - 0.35 * 1.595) = 0.2429625,
    #                                               T_01 = 0.55 * (1 - 0.35 * 1.245) = 0.3103375
    # R_ij <- 0.55 * 1 * (1 - 0) = 0.55, so the ceiling 1 - R = 0.45 is above both.
    g = PartnerHoldUp(reward_mode="integrated")
    r = play(g, [0.0, 0.0])
    close32([g.trust[1, 0], g.trust[0, 1]], [0.2429625, 0.3103375])
    close32(r.info["trust_asymmetry"], 0.2429625 - 0.3103375)
    assert r.info["power_asymmetry"] == 0.85 - 0.35
    # Nothing contributed: pi = e = (120, 80); U_0 = 120 + 0.3103375 * 0.35 * 80, U_1 = 80 + 0.2429625 * 0.85 * 120.
    close32(r.rewards, [120 + 0.3103375 * 0.35 * 80, 80 + 0.2429625 * 0.85 * 120])
    # The reference reads these from info before the actions are there: always 0.
    assert (r.info["strong_agent_payoff"], r.info["weak_agent_payoff"]) == (0, 0)


def test_partner_holdup_weak_partner_exits_when_its_trust_falls_below_0_10():
    # T_10 shrinks by 0.44175 per defecting round: 0.2430, 0.1073 (still >= 0.10), 0.0474 (< 0.10).
    g = PartnerHoldUp()
    g.reset(0)
    for expected in (0.55 * 0.44175, 0.55 * 0.44175**2):
        r = g.step(np.zeros(2, dtype=F32))
        close32(g.trust[1, 0], expected)
        assert not r.terminated
    r = g.step(np.zeros(2, dtype=F32))
    assert r.terminated and g.trust[1, 0] < 0.10 and g.termination_outcome() == "failure"


def test_partner_holdup_no_exit_while_the_strong_partner_cooperates():
    g = PartnerHoldUp()
    g.reset(0)
    for _ in range(100):
        r = g.step(np.array([60.0, 40.0], dtype=F32))
        assert not r.terminated
    assert r.truncated and g.trust[1, 0] > 0.55


@pytest.mark.parametrize(
    "kwargs", [{"strong_dependency": 1.5}, {"weak_dependency": -0.1}, {"weak_dependency": "high"}, {"max_steps": 0}]
)
def test_partner_holdup_rejects_bad_kwargs(kwargs):
    with pytest.raises(ConfigError, match="dependency|max_steps"):
        PartnerHoldUp(**kwargs)


# ---------------------------------------------------------------- PlatformEcosystem
def test_platform_ecosystem_parameters():
    g = PlatformEcosystem()
    assert g.n_agents == 5 and g.max_steps == 100
    assert g.endowments.tolist() == [150.0, 80.0, 80.0, 80.0, 80.0]
    # The platform takes 0.30 of the surplus; the developers share 0.70 / 4 = 0.175 each.
    assert g.alpha.tolist() == [F32(0.3)] + [F32(0.175)] * 4
    # 30 % of the endowments: 45 and 24.
    assert g.baselines.tolist() == [45.0, 24.0, 24.0, 24.0, 24.0]
    D = np.zeros((5, 5), dtype=F32)
    D[0, 1:] = F32(0.25)  # the platform on each developer
    D[1:, 0] = F32(0.75)  # each developer on the platform; developers not on each other
    assert np.array_equal(g.D, D)
    assert g.roles == ("the platform", "developer 1", "developer 2", "developer 3", "developer 4")
    small = PlatformEcosystem(n_developers=2, platform_share=0.4)
    assert small.n_agents == 3 and small.alpha.tolist() == [F32(0.4), F32(0.3), F32(0.3)]


def test_platform_ecosystem_private_payoffs():
    # f = 25 ln(1 + E1) = 25; S = 0.75 * E1 = 1.288711
    # platform: 150 - E1 + 25 + 0.3 * S = 173.668331; developer: 80 - E1 + 25 + 0.175 * S = 103.507243
    r = play(PlatformEcosystem(reward_mode="private"), [E1] * 5)
    s = 0.75 * E1
    close32(r.rewards, [150 - E1 + 25 + 0.3 * s] + [80 - E1 + 25 + 0.175 * s] * 4)
    close32(r.rewards[:2], [173.668331, 103.507243])


def test_platform_ecosystem_info():
    # Platform at 150 (signal tanh(150 - 45) = 1): each developer's trust in it grows by
    # 0.08 * 1 * min(1 - 0.6, 1 - 0 - 0.6) = 0.032, to 0.632.
    r = play(PlatformEcosystem(), [150.0, 10.0, 20.0, 30.0, 40.0])
    assert r.info["platform_investment"] == 150.0
    assert r.info["mean_developer_investment"] == 25.0
    # Deviations -15, -5, 5, 15: std = sqrt((225 + 25 + 25 + 225) / 4) = sqrt(125) = 11.180340
    close32(r.info["developer_investment_std"], math.sqrt(125))
    close64(r.info["developer_trust_in_platform"], 0.632)
    assert r.info["developer_exits"] == 0


def test_platform_ecosystem_dies_when_developer_trust_falls_below_0_15():
    # The platform gives nothing: each T_i0 shrinks by 1 - 0.25 * (1 + 0.4 * 0.75) = 0.675 per round:
    # 0.405, 0.273375, 0.184528 (>= 0.15), 0.124556 (< 0.15: the ecosystem dies in round 4).
    g = PlatformEcosystem()
    g.reset(0)
    for k in range(1, 4):
        r = g.step(np.array([0.0, 80.0, 80.0, 80.0, 80.0], dtype=F32))
        close32(r.info["developer_trust_in_platform"], 0.6 * 0.675**k)
        assert not r.terminated and r.info["developer_exits"] == 0
    r = g.step(np.array([0.0, 80.0, 80.0, 80.0, 80.0], dtype=F32))
    close32(r.info["developer_trust_in_platform"], 0.6 * 0.675**4)
    assert r.terminated and r.info["developer_exits"] == 4
    g.reset(1)  # envgym counts exits per episode (the reference never resets the count)
    assert g.legacy_info()["developer_exits"] == 0


def test_platform_ecosystem_survives_a_fair_platform():
    g = PlatformEcosystem()
    g.reset(0)
    for _ in range(100):
        r = g.step(np.array([60.0, 30.0, 30.0, 30.0, 30.0], dtype=F32))
        assert not r.terminated
    assert r.truncated


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_developers": 0},
        {"n_developers": True},
        {"n_developers": 2.5},
        {"platform_share": 1.2},
        {"developer_dependency": float("nan")},
    ],
)
def test_platform_ecosystem_rejects_bad_kwargs(kwargs):
    with pytest.raises(ConfigError, match="PlatformEcosystem: "):
        PlatformEcosystem(**kwargs)


# ---------------------------------------------------------------- DynamicPartnerSelection
def test_dynamic_partner_selection_parameters():
    g = DynamicPartnerSelection()
    assert g.n_agents == 6 and g.max_steps == 50
    assert g.baselines.tolist() == [35.0] * 6
    assert np.array_equal(g.D, np.where(np.eye(6, dtype=bool), 0.0, F32(0.4)).astype(F32))
    assert g.alpha.tolist() == [F32(1 / 6)] * 6
    assert DynamicPartnerSelection(n_agents=3).n_agents == 3


def test_dynamic_partner_selection_private_payoffs():
    # f = 18; S = 0.55 * E1 = 0.945055; pi = 100 - E1 + 18 + S / 6 = 116.439227
    r = play(DynamicPartnerSelection(reward_mode="private"), [E1] * 6)
    close32(r.rewards, [100 - E1 + 18 + 0.55 * E1 / 6] * 6)
    close32(r.rewards[0], 116.439227)


def test_dynamic_partner_selection_reputation_scores():
    # r <- 0.9 r + 0.1 a / e with a as sent (120 counts as 1.2 though it is clipped to 100 for the payoffs).
    g = DynamicPartnerSelection()
    row = [100.0, 50.0, 0.0, 120.0, 10.0, 30.0]
    r1 = play(g, row)
    first = [0.1, 0.05, 0.0, 0.12, 0.01, 0.03]
    close32(r1.info["reputation_scores"], first)
    assert r1.info["reputation_ranking"] == [3, 0, 1, 5, 4, 2]
    assert g.actions[3] == 100.0  # the round itself used the clipped contribution
    # The observation ends with the scores before the round (the reference builds it first).
    assert g.legacy_observation().shape == (6 + 3 * 36 + 1 + 6,)
    assert g.legacy_observation()[-6:].tolist() == [0.0] * 6
    r2 = g.step(np.asarray(row, dtype=F32))
    # 0.9 r + 0.1 s with r = 0.1 s: 1.9 r
    close32(r2.info["reputation_scores"], [1.9 * x for x in first])
    close32(g.legacy_observation()[-6:], first)


def test_dynamic_partner_selection_reset_clears_scores_unless_carried():
    g = DynamicPartnerSelection()
    play(g, [100.0] * 6)
    g.reset(0)
    assert g.global_reputation.tolist() == [0.0] * 6
    carried = DynamicPartnerSelection(carry_reputation=True)
    play(carried, [100.0] * 6)
    carried.reset(0)
    close32(carried.global_reputation, [0.1] * 6)
    close32(carried.legacy_observation()[-6:], [0.1] * 6)


def test_dynamic_partner_selection_has_no_early_termination():
    g = DynamicPartnerSelection()
    g.reset(0)
    results = [g.step(np.zeros(6, dtype=F32)) for _ in range(50)]
    assert not any(r.terminated for r in results)
    assert [r.truncated for r in results] == [False] * 49 + [True]


@pytest.mark.parametrize(
    "kwargs", [{"n_agents": 1}, {"reputation_weight": 2.0}, {"carry_reputation": "yes"}, {"max_steps": -5}]
)
def test_dynamic_partner_selection_rejects_bad_kwargs(kwargs):
    with pytest.raises(ConfigError):
        DynamicPartnerSelection(**kwargs)


# ---------------------------------------------------------------- SynergySearch
def test_synergy_search_draws_its_hidden_gamma_from_the_seed():
    g = SynergySearch()
    draws = {}
    for seed in (0, 1, 2, 0):
        g.reset(seed)
        draws.setdefault(seed, g.true_gamma)
        assert g.true_gamma == draws[seed]  # same seed, same value
        assert g.value.gamma == g.true_gamma
        assert 0.2 <= g.true_gamma <= 0.9
    assert len(set(draws.values())) == 3  # different seeds, different values
    # The draw is default_rng(seed).uniform(0.2, 0.9): 0.645873... for seed 0.
    assert draws[0] == np.random.default_rng(0).uniform(0.2, 0.9)
    close64(draws[0], 0.645873181125018)
    narrow = SynergySearch(gamma_range=(0.3, 0.3))
    narrow.reset(5)
    assert narrow.true_gamma == 0.3


def test_synergy_search_gamma_through_the_views():
    def gamma(split, seed):
        env = gymnasium.make("envgym/Coop-SynergySearch-v0", split=split)
        env.reset(seed=seed)
        return env.unwrapped.game.true_gamma

    assert gamma("test", 3) == gamma("test", 3) == np.random.default_rng(3).uniform(0.2, 0.9)
    assert gamma("train", 3) == np.random.default_rng([3, 1]).uniform(0.2, 0.9) != gamma("test", 3)


def test_synergy_search_payoffs_use_the_hidden_gamma():
    # pi = 100 - E1 + 20 + 0.5 * gamma * E1
    g = SynergySearch(reward_mode="private")
    r = play(g, [E1, E1])
    close32(r.rewards, [100 - E1 + 20 + 0.5 * g.true_gamma * E1] * 2)
    g.set_gamma(0.9)
    r = g.step(np.array([E1, E1], dtype=F32))
    close32(r.rewards, [100 - E1 + 20 + 0.45 * E1] * 2)
    close32(r.info["total_value"], 40 + 0.9 * E1)  # sum f + gamma * g


def test_synergy_search_prepare_reference_sets_the_recorded_gamma():
    g = SynergySearch()
    g.reset(0)
    g.prepare_reference({"hidden": {"0": {"true_gamma": 0.25}, "1": {"true_gamma": 0.75}}}, 1)
    assert g.true_gamma == 0.75 and g.value.gamma == 0.75


def test_synergy_search_info():
    # Private rewards: (0, 0) gives (100, 100); (0, E1) gives (100, 100 - E1 + 20 = 118.281718), no synergy.
    g = SynergySearch(reward_mode="private")
    g.reset(0)
    rows = [[0.0, 0.0], [0.0, 0.0], [0.0, E1], [0.0, E1]]
    results = [g.step(np.asarray(row, dtype=F32)) for row in rows]
    d = 20 - E1
    close32(results[2].info["cumulative_rewards"], [300.0, 300.0 + d])
    assert "reward_variance" not in results[2].info  # from the 4th round on
    # Six rewards of 100 and two of 100 + d: variance (6 (d/4)^2 + 2 (3d/4)^2) / 8 = 3 d^2 / 16 = 62.66...
    close32(results[3].info["reward_variance"], 3 * d * d / 16)
    assert results[3].info["true_gamma"] is None
    g.set_gamma(0.6)
    assert g.step(np.zeros(2, dtype=F32)).info["gamma_type"] == "low"  # high only above 0.6
    g.set_gamma(0.61)
    assert g.step(np.zeros(2, dtype=F32)).info["gamma_type"] == "high"


def test_synergy_search_can_reveal_gamma():
    g = SynergySearch(reveal_gamma_in_obs=True)
    r = play(g, [50.0, 50.0])
    assert r.info["true_gamma"] == g.true_gamma
    obs = g.legacy_observation()
    assert obs.shape == (2 + 3 * 4 + 1 + 1,) and obs[-1] == F32(g.true_gamma)
    assert SynergySearch().legacy_observation().shape == (15,)


def test_synergy_search_has_no_early_termination():
    g = SynergySearch()
    g.reset(0)
    results = [g.step(np.zeros(2, dtype=F32)) for _ in range(100)]
    assert g.mean_trust() < 0.05  # trust collapsed, and the game goes on
    assert not any(r.terminated for r in results) and results[-1].truncated


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gamma_range": (0.9, 0.2)},
        {"gamma_range": (0.0, 1.5)},
        {"gamma_range": "ab"},
        {"gamma_range": (0.1,)},
        {"reveal_gamma_in_obs": 1},
    ],
)
def test_synergy_search_rejects_bad_kwargs(kwargs):
    with pytest.raises(ConfigError, match="SynergySearch: "):
        SynergySearch(**kwargs)


# ---------------------------------------------------------------- RenaultNissan
@pytest.mark.parametrize(
    ("phase", "period", "d01", "d10", "trust", "damage"),
    [
        ("formation", "1999-2002", 0.78, 0.66, 0.45, 0.05),
        ("mature", "2002-2018", 0.51, 0.66, 0.70, 0.02),
        ("crisis", "2018-2020", 0.35, 0.72, 0.30, 0.45),
        ("strained", "2020-2025", 0.28, 0.65, 0.40, 0.35),
    ],
)
def test_renault_nissan_phases(phase, period, d01, d10, trust, damage):
    g = RenaultNissan(phase=phase.upper())
    g.reset(0)
    assert g.D.tolist() == [[0.0, F32(d01)], [F32(d10), 0.0]]
    assert g.trust[0, 1] == g.trust[1, 0] == trust
    assert g.reputation[0, 1] == g.reputation[1, 0] == damage
    info = g.legacy_info()
    assert (info["phase"], info["period"], info["agent_names"]) == (phase, period, ["Nissan", "Renault"])


def test_renault_nissan_private_payoffs():
    # f = 22; S = 0.58 * E1 = 0.996603; Nissan: 90 - E1 + 22 + 0.48 S = 110.760087;
    # Renault: 100 - E1 + 22 + 0.52 S = 120.800351
    g = RenaultNissan(reward_mode="private")
    assert (g.endowments.tolist(), g.baselines.tolist()) == ([90.0, 100.0], [27.0, 30.0])
    r = play(g, [E1, E1])
    s = 0.58 * E1
    close32(r.rewards, [90 - E1 + 22 + 0.48 * s, 100 - E1 + 22 + 0.52 * s])
    close32(r.rewards, [110.760087, 120.800351])


def test_renault_nissan_has_no_early_termination():
    g = RenaultNissan(phase="crisis")
    g.reset(0)
    results = [g.step(np.zeros(2, dtype=F32)) for _ in range(100)]
    assert not any(r.terminated for r in results) and results[-1].truncated


@pytest.mark.parametrize("phase", ["boom", 3, None])
def test_renault_nissan_rejects_unknown_phases(phase):
    with pytest.raises(ConfigError, match="phase must be one of formation, mature, crisis, strained"):
        RenaultNissan(phase=phase)
