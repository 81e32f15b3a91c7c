"""TR-2 games (trust and reputation) other than TrustDilemma, each rule on hand-worked values.

As in ``test_interdependence``: ``E1 = e - 1`` makes ``ln(1 + E1) = 1``; float32 results (rewards, and trust
after a defection, which goes through the reference's float32 ``1 + xi * D``) are compared with
:data:`FEW_OPS` ulps of float32, trust built from exact float64 steps with float64 ulps.
"""

from __future__ import annotations

import inspect
import math

import gymnasium
import numpy as np
import pytest
from envgym.environments.coopetition.trust import SLCD, CooperativeNegotiation, RecoveryRace, ReputationMarket
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


def log_payoff(e, a, theta):
    """``e - a + theta ln(1 + a)``: a payoff without synergy (some contribution is 0)."""
    return e - a + theta * math.log1p(a)


@pytest.mark.parametrize("cls", [RecoveryRace, SLCD, CooperativeNegotiation, ReputationMarket])
def test_env_card_names_every_argument(cls):
    doc = inspect.getdoc(cls)
    assert doc and "Arguments:" in doc
    for name in inspect.signature(cls.__init__).parameters:
        if name not in ("self", "common"):
            assert f"``{name}" in doc, f"{cls.__name__}'s card does not mention {name}"


# ---------------------------------------------------------------- RecoveryRace
def test_recovery_race_starts_in_crisis():
    g = RecoveryRace()
    g.reset(0)
    assert (g.max_steps, g.baselines.tolist(), g.D[0, 1]) == (150, [35.0, 35.0], F32(0.55))
    assert g.trust.tolist() == [[1.0, 0.25], [0.25, 1.0]]
    assert g.reputation.tolist() == [[0.0, 0.5], [0.5, 0.0]]


def test_recovery_race_private_payoffs():
    # f = 20; S = 0.6 E1; pi = 100 - E1 + 20 + 0.5 * 0.6 * E1 = 118.797203
    r = play(RecoveryRace(reward_mode="private"), [E1, E1])
    close32(r.rewards, [100 - E1 + 20 + 0.3 * E1] * 2)
    close32(r.rewards, [118.797203] * 2)


def test_recovery_race_info():
    # Full cooperation: signal tanh(100 - 35) = 1; T += 0.08 * min(1 - 0.25, (1 - 0.5) - 0.25) = 0.02 -> 0.27;
    # R -= 0.01 * 0.5 -> 0.495.
    r = play(RecoveryRace(), [100.0, 100.0])
    close64(r.info["mean_trust"], 0.27)
    close64(r.info["peak_trust"], 0.27)
    assert r.info["recovery_step"] is None
    close64(r.info["trust_ceiling"], 1 - 0.495)
    close64(r.info["recovery_progress"], (0.27 - 0.25) / (0.90 - 0.25))  # 0.030769
    # A defection lowers trust; the peak stays.
    g = RecoveryRace()
    play(g, [100.0, 100.0])
    r = g.step(np.zeros(2, dtype=F32))
    assert r.info["mean_trust"] < 0.27
    close64(r.info["peak_trust"], 0.27)


def test_recovery_race_ends_in_success_at_the_target():
    # Target 0.26: the first cooperative round (trust 0.27) reaches it.
    env = gymnasium.make("envgym/Coop-RecoveryRace-v0", recovery_target=0.26)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(np.array([100.0, 100.0], dtype=F32))
    assert terminated and not truncated
    assert info["recovery_step"] == 1 and info["success"] and info["termination_reason"] == "success"


def test_recovery_race_default_target_is_out_of_reach_in_150_rounds():
    # Reputation heals by 1 % a round: after 150 rounds R = 0.5 * 0.99**150 = 0.11, so the ceiling
    # 1 - R = 0.89 keeps mean trust below the 0.90 target: the episode is truncated, not won.
    g = RecoveryRace()
    g.reset(0)
    for _ in range(150):
        r = g.step(np.array([100.0, 100.0], dtype=F32))
        assert not r.terminated
    assert r.truncated and r.info["recovery_step"] is None and r.info["peak_trust"] < 0.9


@pytest.mark.parametrize(
    "kwargs",
    [{"recovery_target": 0.25}, {"recovery_target": 1.2}, {"initial_trust": -0.1}, {"initial_reputation_damage": 2}],
)
def test_recovery_race_rejects_bad_kwargs(kwargs):
    with pytest.raises(ConfigError, match="RecoveryRace: "):
        RecoveryRace(**kwargs)


# ---------------------------------------------------------------- SLCD
def test_slcd_parameters_and_private_payoffs():
    g = SLCD(reward_mode="private")
    assert g.D.tolist() == [[0.0, F32(0.64)], [F32(0.86), 0.0]]
    assert (g.alpha.tolist(), g.baselines.tolist()) == ([F32(0.55), F32(0.45)], [30.0, 30.0])
    # f = 20; S = 0.65 E1 = 1.116883; Samsung 100 - E1 + 20 + 0.55 S = 118.896004, Sony ... + 0.45 S = 118.784316
    r = play(g, [E1, E1])
    s = 0.65 * E1
    close32(r.rewards, [100 - E1 + 20 + 0.55 * s, 100 - E1 + 20 + 0.45 * s])
    close32(r.rewards, [118.896004, 118.784316])
    assert r.info["agent_names"] == ["Samsung", "Sony"]
    assert (r.info["samsung_investment"], r.info["sony_investment"]) == (F32(E1), F32(E1))


def test_slcd_integrated_utility_with_and_without_trust():
    # (0, 0): pi = (100, 100). Trust off: U_0 = 100 + 0.64 * 100, U_1 = 100 + 0.86 * 100.
    r = play(SLCD(trust_enabled=False), [0.0, 0.0])
    close32(r.rewards, [164.0, 186.0])
    # Trust on: signals tanh(0 - 30) = -1; T_01 = 0.65 - 0.28 * 0.65 * (1 + 0.45 * 0.64) = 0.415584,
    # T_10 = 0.65 - 0.28 * 0.65 * (1 + 0.45 * 0.86) = 0.397566; R = 0.5 (ceiling 0.5 above both).
    g = SLCD()
    r = play(g, [0.0, 0.0])
    close32([g.trust[0, 1], g.trust[1, 0]], [0.415584, 0.397566])
    close32(r.rewards, [100 + 0.415584 * 0.64 * 100, 100 + 0.397566 * 0.86 * 100])


def test_slcd_has_no_early_termination():
    g = SLCD()
    g.reset(0)
    results = [g.step(np.zeros(2, dtype=F32)) for _ in range(100)]
    assert not any(r.terminated for r in results) and results[-1].truncated


def test_slcd_rejects_bad_kwargs():
    with pytest.raises(ConfigError, match="SLCD: trust_enabled must be True or False"):
        SLCD(trust_enabled="no")


# ---------------------------------------------------------------- CooperativeNegotiation
def negotiation_payoffs(a0, a1):
    """pi_i = 100 - a_i + 20 ln(1 + a_i) + 0.5 * 0.6 * sqrt(a0 a1)."""
    s = 0.6 * math.sqrt(a0 * a1)
    return [log_payoff(100, a0, 20) + 0.5 * s, log_payoff(100, a1, 20) + 0.5 * s]


def test_cooperative_negotiation_agreement_and_breach():
    g = CooperativeNegotiation(reward_mode="private")
    g.reset(0)
    # Round 1: proposals 50 and 55 differ by 5 <= 10: an agreement, no breach (none stood before).
    r = g.step(np.array([50.0, 55.0], dtype=F32))
    close32(r.rewards, negotiation_payoffs(50, 55))
    assert (r.info["agreement_reached"], r.info["breach_occurred"]) == (True, False)
    assert r.info["current_agreement"] == [50.0, 55.0] and r.info["total_agreements"] == 1
    close32(r.info["proposal_convergence"], 0.95)  # 1 - 5 / 100
    assert g.legacy_observation()[-3:].tolist() == [0.0, 0.0, 0.0]  # the agreement as it was before the round
    # Round 2: agent 1 moves 15 > 10 from its agreed 55: a breach; each loses 3 x its own distance
    # (0 and 45). No new agreement (70 - 50 = 20 > 10): the old one stands.
    r = g.step(np.array([50.0, 70.0], dtype=F32))
    expected = negotiation_payoffs(50, 70)
    close32(r.rewards, [expected[0], expected[1] - 45.0])
    assert np.array_equal(r.payoffs, r.rewards)  # the penalty is the agent's own loss
    assert (r.info["agreement_reached"], r.info["breach_occurred"]) == (False, True)
    assert (r.info["current_agreement"], r.info["total_breaches"]) == ([50.0, 55.0], 1)
    close32(r.info["proposal_convergence"], 0.8)
    assert g.legacy_observation()[-3:].tolist() == [50.0, 55.0, 1.0]
    # Round 3: 52 and 58 are within 10 of 50 and 55 (no breach) and of each other: a new agreement.
    r = g.step(np.array([52.0, 58.0], dtype=F32))
    close32(r.rewards, negotiation_payoffs(52, 58))
    assert (r.info["breach_occurred"], r.info["current_agreement"], r.info["total_agreements"]) == (
        False,
        [52.0, 58.0],
        2,
    )
    assert g.legacy_observation().shape == (15 + 3,)


def test_cooperative_negotiation_penalty_comes_after_the_reward_mode():
    # Cooperative mode: both get the mean integrated utility, then each loses its own penalty.
    plain = CooperativeNegotiation(reward_mode="cooperative", breach_penalty_multiplier=0.0)
    penalised = CooperativeNegotiation(reward_mode="cooperative")
    a = play(plain, [50.0, 55.0], [50.0, 70.0])
    b = play(penalised, [50.0, 55.0], [50.0, 70.0])
    assert a.rewards[0] == a.rewards[1] and a.info["breach_occurred"]
    close32(b.rewards, [a.rewards[0], a.rewards[1] - 45.0])


def test_cooperative_negotiation_clips_proposals_and_never_ends_early():
    g = CooperativeNegotiation()
    r = play(g, [150.0, 145.0])
    assert r.info["current_agreement"] == [100.0, 100.0]
    results = [g.step(np.zeros(2, dtype=F32)) for _ in range(99)]
    assert g.mean_trust() < 0.05  # trust collapsed; the game goes on to its horizon
    assert not any(r.terminated for r in results) and results[-1].truncated


@pytest.mark.parametrize(
    "kwargs",
    [
        {"agreement_threshold": -1.0},
        {"breach_penalty_multiplier": float("nan")},
        {"negotiation_rounds": 0},
        {"negotiation_rounds": 2.0},
    ],
)
def test_cooperative_negotiation_rejects_bad_kwargs(kwargs):
    with pytest.raises(ConfigError, match="CooperativeNegotiation: "):
        CooperativeNegotiation(**kwargs)


# ---------------------------------------------------------------- ReputationMarket
@pytest.mark.parametrize(
    ("reputation", "tier"),
    [
        (1.0, ("premium", 1.30)),
        (0.80, ("premium", 1.30)),
        (0.79, ("standard", 1.00)),
        (0.50, ("standard", 1.00)),
        (0.4999, ("probation", 0.70)),
        (0.25, ("probation", 0.70)),
        (0.2499, ("excluded", 0.40)),
        (0.0, ("excluded", 0.40)),
    ],
)
def test_reputation_market_tiers(reputation, tier):
    assert ReputationMarket.tier(reputation) == tier


def test_reputation_market_parameters():
    g = ReputationMarket()
    assert (g.n_agents, g.baselines.tolist(), g.D[0, 1], g.alpha[0]) == (5, [35.0] * 5, F32(0.35), F32(0.2))
    assert ReputationMarket(n_agents=3).n_agents == 3


def test_reputation_market_round():
    # Reputation 0.5 + 0.1 (a / 100 - 0.5): 0.55, 0.50, 0.45, 0.53, 0.47
    # -> tiers standard, standard, probation, standard, probation (multipliers 1, 1, 0.7, 1, 0.7).
    # Agent 2 gives 0, so there is no synergy: pi_i = 100 - a_i + 18 ln(1 + a_i).
    g = ReputationMarket(reward_mode="private")
    row = [100.0, 50.0, 0.0, 80.0, 20.0]
    r = play(g, row)
    reps = [0.55, 0.50, 0.45, 0.53, 0.47]
    close32(r.info["public_reputations"], reps)
    assert r.info["agent_tiers"] == ["standard", "standard", "probation", "standard", "probation"]
    assert r.info["reputation_ranking"] == [0, 3, 1, 4, 2]
    close32(r.info["mean_reputation"], 0.5)
    # std: sqrt((0.05^2 + 0 + 0.05^2 + 0.03^2 + 0.03^2) / 5) = sqrt(0.00136) = 0.036878
    close32(r.info["reputation_inequality"], math.sqrt(0.00136), "std")
    pi = [log_payoff(100, a, 18) for a in row]
    close32(r.rewards, [p * m for p, m in zip(pi, [1, 1, 0.7, 1, 0.7], strict=True)])
    assert r.rewards[2] == 70.0  # 100 * 0.7
    untiered = play(ReputationMarket(reward_mode="private", tier_enabled=False), row)
    close32(untiered.rewards, pi)


def test_reputation_market_premium_tier():
    # Full contributions: +0.05 a round; after 7 rounds 0.85 >= 0.80: premium, rewards x 1.3.
    g = ReputationMarket(reward_mode="private")
    r = play(g, *[[100.0] * 5] * 7)
    close32(r.info["public_reputations"], [0.85] * 5)
    assert r.info["agent_tiers"] == ["premium"] * 5
    # pi = 100 - 100 + 18 ln 101 + 0.2 * 0.5 * 100 = 93.071...
    close32(r.rewards, [(18 * math.log(101) + 10) * 1.3] * 5)


def test_reputation_market_observation_shows_last_rounds_reputations():
    g = ReputationMarket()
    play(g, [100.0, 50.0, 0.0, 80.0, 20.0])
    assert g.legacy_observation().shape == (5 + 75 + 1 + 5,)
    assert g.legacy_observation()[-5:].tolist() == [0.5] * 5
    g.step(np.full(5, 50.0, dtype=F32))
    close32(g.legacy_observation()[-5:], [0.55, 0.50, 0.45, 0.53, 0.47])


def test_reputation_market_observation_noise_is_seeded():
    # Visibility 0.5: noise N(0, 0.5) per agent, the first draw of the episode's generator at reset.
    g = ReputationMarket(reputation_visibility=0.5)
    g.reset(7)
    noise = np.random.default_rng(7).normal(0, 0.5, size=5).astype(F32)
    assert np.array_equal(g.legacy_observation()[-5:], np.clip(F32(0.5) + noise, 0.0, 1.0))
    first = g.legacy_observation()[-5:].copy()
    g.reset(7)
    assert np.array_equal(g.legacy_observation()[-5:], first)
    g.reset(8)
    assert not np.array_equal(g.legacy_observation()[-5:], first)


def test_reputation_market_has_no_early_termination():
    g = ReputationMarket()
    g.reset(0)
    results = [g.step(np.zeros(5, dtype=F32)) for _ in range(100)]
    assert results[-1].info["agent_tiers"] == ["excluded"] * 5
    assert not any(r.terminated for r in results) and results[-1].truncated


@pytest.mark.parametrize(
    "kwargs", [{"n_agents": 1}, {"reputation_visibility": 1.5}, {"tier_enabled": None}, {"max_steps": 1.5}]
)
def test_reputation_market_rejects_bad_kwargs(kwargs):
    with pytest.raises(ConfigError):
        ReputationMarket(**kwargs)
