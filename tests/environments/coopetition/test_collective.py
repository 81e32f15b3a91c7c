"""TR-3 (collective action and loyalty): the closed forms, loyalty, multipliers, coalitions, info, kwargs.

Every expected number is worked out by hand in the comments. The games' agreement with upstream
over whole trajectories is test_reference.py's job; here each rule is pinned on its own.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from envgym.environments.coopetition.collective import (
    APACHE_PHASES,
    ApacheProject,
    CoalitionFormation,
    CollectiveActionParams,
    LoyaltyTeam,
    PublicGoods,
    TeamProduction,
    TR3Params,
    free_riding_equilibrium,
    loyalty_modifiers,
    social_optimum_effort,
    team_cohesion,
    team_payoffs,
    team_production,
)
from floats import FEW_OPS, assert_close_scaled

from envgym.errors import ConfigError, InvalidKwargsError

F32 = np.float32
F64 = np.float64


def close32(actual, expected, msg: str = "") -> None:
    assert_close_scaled(actual, expected, dtype=F32, ulps=FEW_OPS, msg=msg)


def close64(actual, expected, msg: str = "") -> None:
    assert_close_scaled(actual, expected, dtype=F64, ulps=FEW_OPS, msg=msg)


def play(game, actions, seed: int = 0):
    game.reset(seed)
    return game.step(np.asarray(actions, dtype=F32))


# ---------------------------------------------------------------------------- closed forms
def test_free_riding_nash_effort_at_team_productions_defaults() -> None:
    """omega=25, beta=0.7, c=1, n=4: omega*beta = 17.5, 4**1.3 = 6.062866, 17.5 / 6.062866 = 2.886424,
    2.886424 ** (1/0.3) = 34.23998; the same as (17.5/4) ** (10/3) / 4 = 136.95993 / 4 (the team's
    total Nash effort, shared by 4). Upstream's info["nash_equilibrium"] is 34.23998243391985."""
    a_star = free_riding_equilibrium(4, omega=25.0, beta=0.7, c=1.0, a_max=50.0)
    close64(a_star, 34.23998243391987)
    close64(a_star * 4, (17.5 / 4) ** (1 / 0.3))
    close64(TR3Params().nash_equilibrium(4), a_star)
    # CoalitionFormation (n=6): (17.5/6) ** (10/3) / 6 = 35.45052 / 6 = 5.908421
    close64(free_riding_equilibrium(6, omega=25.0, beta=0.7, c=1.0, a_max=50.0), 5.908420694752874)
    # omega=4, beta=0.5, c=1, n=2: (2 / 2**1.5) ** 2 = (1/sqrt 2) ** 2 = 0.5
    close64(free_riding_equilibrium(2, omega=4.0, beta=0.5, c=1.0, a_max=50.0), 0.5)


def test_nash_effort_is_a_best_response_in_the_team_production_model() -> None:
    """With the others at a*, agent 0's payoff Q/n - c*a_0 peaks at a_0 = a* (grid of step 0.01)."""
    a_star = free_riding_equilibrium(4, omega=25.0, beta=0.7, c=1.0, a_max=50.0)
    grid = np.arange(0.0, 50.0, 0.01)
    others = 3 * a_star
    payoff = 25.0 * (grid + others) ** 0.7 / 4 - grid
    assert abs(grid[np.argmax(payoff)] - a_star) <= 0.01


def test_linear_returns_have_corner_solutions() -> None:
    """beta = 1: Nash is 0 when omega/n < c (2/5 = 0.4 < 1), a_max when omega/n >= c (5/5 = 1);
    the social optimum is a_max when omega > c (2 > 1), 0 when omega <= c (1 = 1)."""
    assert free_riding_equilibrium(5, omega=2.0, beta=1.0, c=1.0, a_max=50.0) == 0.0
    assert free_riding_equilibrium(5, omega=5.0, beta=1.0, c=1.0, a_max=50.0) == 50.0
    assert social_optimum_effort(5, omega=2.0, beta=1.0, c=1.0, a_max=50.0) == 50.0
    assert social_optimum_effort(5, omega=1.0, beta=1.0, c=1.0, a_max=50.0) == 0.0


def test_social_optimum_effort_is_uncapped_as_upstream() -> None:
    """(17.5 / 1) ** (10/3) = 13914.2615, / 4 = 3478.5654 (above the endowment 50: upstream's
    info reports it so); omega=4, beta=0.5, c=1, n=2: 2 ** 2 / 2 = 2."""
    close64(social_optimum_effort(4, omega=25.0, beta=0.7, c=1.0, a_max=50.0), 3478.565384638534)
    close64(social_optimum_effort(2, omega=4.0, beta=0.5, c=1.0, a_max=50.0), 2.0)
    close64(TR3Params().social_optimum(4), 3478.565384638534)


def test_team_production_payoffs_and_loyalty_modifier() -> None:
    # Q([1,2,3,4]) = 25 * 10**0.7 = 25 * 5.0118723 = 125.29681
    close64(team_production(np.array([1.0, 2.0, 3.0, 4.0]), 25.0, 0.7), 125.29680840681804)
    # float32 actions give a float32 output (upstream's team_output): 25 * 125**0.7 rounded to float32
    assert team_production(np.array([40, 40, 40, 5], dtype=F32), 25.0, 0.7) == float(F32(25.0) * F32(125.0) ** F32(0.7))
    # omega=4, beta=0.5, c=1, a=[1,3]: Q = 4 * sqrt(4) = 8, Q/n = 4, pi = [4-1, 4-3] = [3, 1]
    a = np.array([1.0, 3.0])
    np.testing.assert_array_equal(team_payoffs(a, 4.0, 0.5, 1.0), [3.0, 1.0])
    # L_0 = 0.5 * (0.8 * pi_1 + 0.3 * 1 * a_0) = 0.5 * (0.8 + 0.3) = 0.55
    # L_1 = 1.0 * (0.8 * pi_0 + 0.3 * 1 * a_1) = 2.4 + 0.9 = 3.3
    mods = loyalty_modifiers(a, np.array([0.5, 1.0]), omega=4.0, beta=0.5, c=1.0, phi_B=0.8, phi_C=0.3)
    close64(mods, [0.55, 3.3])
    # three agents a=[1,1,2]: Q/n = 8/3, pi = [5/3, 5/3, 2/3]; teammates' mean of agent 2 = 5/3,
    # of agent 0 = (5/3 + 2/3)/2 = 7/6; L = theta * (1.0 * mean + 0 * a) with phi_B=1, phi_C=0
    mods = loyalty_modifiers(np.array([1.0, 1.0, 2.0]), np.ones(3), omega=4.0, beta=0.5, c=1.0, phi_B=1.0, phi_C=0.0)
    close64(mods, [7 / 6, 7 / 6, 5 / 3])


def test_team_cohesion() -> None:
    # weights [1,1,2], loyalty [0.2,0.4,0.9]: (0.2 + 0.4 + 1.8) / 4 = 0.6
    close64(team_cohesion(np.array([0.2, 0.4, 0.9]), np.array([1.0, 1.0, 2.0])), 0.6)
    assert team_cohesion(np.array([0.2, 0.4]), np.zeros(2)) == 0.5  # no weight: neutral


# ---------------------------------------------------------------------------- collective action
def test_collective_action_multipliers() -> None:
    model = CollectiveActionParams()
    e = np.full(4, 50.0, dtype=F32)
    # rates [1, .5, .2, 0]; sustained (one round) the same. Agents 2, 3 free-ride (< 0.3): x0.5;
    # agent 0 loyal (1.0 >= 0.6): x(1 + 0.15 * 1.0) = 1.15; not all >= 0.5: no coordination bonus.
    a = np.array([50, 25, 10, 0], dtype=F32)
    got = model.multipliers(a, e, [a])
    assert got.dtype == F32
    close32(got, [1.15, 1.0, 0.5, 0.5])
    # everyone at 40 (rate 0.8): loyal x(1 + 0.15 * 0.8) = 1.12, coordinated x1.2: 1.344
    a = np.full(4, 40, dtype=F32)
    close32(model.multipliers(a, e, [a]), [1.344] * 4)
    # sustained cooperation: mean rate over the last 3 rounds (50, 50, 5): (1 + 1 + 0.1)/3 = 0.7 ->
    # x(1 + 0.15 * 0.7) = 1.105; this round's rate 0.1 < 0.3 -> x0.5: 0.5525
    hist = [np.full(4, 50, dtype=F32), np.full(4, 50, dtype=F32), np.full(4, 5, dtype=F32)]
    close32(model.sustained_cooperation(hist, e), [0.7] * 4)
    close32(model.multipliers(hist[-1], e, hist), [0.5525] * 4)
    # the horizon is 10 rounds: two rounds of 0 then ten of 50 -> 1.0
    hist = [np.zeros(4, dtype=F32)] * 2 + [np.full(4, 50, dtype=F32)] * 10
    close32(model.sustained_cooperation(hist, e), [1.0] * 4)
    np.testing.assert_array_equal(model.sustained_cooperation([], e), [0.5] * 4)


def test_loyalty_update_builds_erodes_and_clips() -> None:
    """Rates [1, .5, .4, 0]: 0.5 + 0.02*1 = 0.52; 0.5 + 0.02*0.5 = 0.51; 0.5 - 0.05*(0.5-0.4) = 0.495;
    0.5 - 0.05*0.5 = 0.475. Mean (and cohesion, equal weights): 2.0 / 4 = 0.5."""
    game = LoyaltyTeam()
    result = play(game, [50, 25, 20, 0])
    assert game.loyalty.dtype == F32
    close32(result.info["loyalty_scores"], [0.52, 0.51, 0.495, 0.475])
    close32(result.info["mean_loyalty"], 0.5)
    close32(result.info["team_cohesion"], 0.5)
    game.loyalty = np.array([0.99, 0.01, 0.5, 0.5], dtype=F32)
    game.step(np.array([50, 0, 25, 25], dtype=F32))
    # min(1, 0.99 + 0.02) = 1; max(0, 0.01 - 0.025) = 0; 0.5 + 0.02*0.5 = 0.51
    close32(game.loyalty, [1.0, 0.0, 0.51, 0.51])


def test_team_production_rewards_are_private_payoffs_times_its_penalty() -> None:
    """Private mode, a = [40,40,40,5]: geometric mean (40^3 * 5)^(1/4) = 23.784142, S = 0.65 * it =
    15.459692, each share S/4 = 3.864923. pi_0 = 10 + 20 ln 41 (74.271441) + 3.864923 = 88.136364;
    pi_3 = 45 + 20 ln 6 (35.835189) + 3.864923 = 84.700113, and 5/50 = 0.1 < 0.2 gives x0.9: 76.230101."""
    result = play(TeamProduction(reward_mode="private"), [40, 40, 40, 5])
    close32(result.rewards, [88.136364457845, 88.136364457845, 88.136364457845, 76.23010125748795])
    # 10/50 = 0.2 is not below 0.2: no penalty; loyalty never moves in TeamProduction
    game = TeamProduction()
    result = play(game, [40, 40, 40, 10])
    assert game.collective_modifier(np.array([40, 40, 40, 10], dtype=F32)).tolist() == [1.0] * 4
    assert result.info["loyalty_scores"] == [0.5] * 4


def test_team_production_info() -> None:
    """a = [40,40,40,5]: team_output = 25 * 125**0.7 = 25 * 29.365474 = 734.13684; efficiency_ratio =
    mean 31.25 / 3478.5654 = 0.0089835885; agent 3 (0.1 < 0.3) is the one free-rider."""
    result = play(TeamProduction(), [40, 40, 40, 5])
    info = result.info
    close32(info["team_output"], 734.1368394300117)
    close64(info["nash_equilibrium"], 34.23998243391987)
    close64(info["social_optimum"], 3478.565384638534)
    close32(info["efficiency_ratio"], 0.008983588504042824)
    assert (info["free_rider_count"], info["free_rider_indices"]) == (1, [3])
    assert info["mean_loyalty"] == 0.5 and info["team_cohesion"] == 0.5
    assert info["step"] == 1 and not result.terminated


def test_loyalty_team_rewards_carry_the_loyalty_and_coordination_bonuses() -> None:
    """Everyone at 40 (rate 0.8): x1.12 (loyal) x1.2 (coordinated) = 1.344 on the private payoff
    10 + 20 ln 41 + 0.65 * 40 / 4 = 10 + 74.271441 + 6.5 = 90.771441 -> 121.99682."""
    result = play(LoyaltyTeam(reward_mode="private"), [40, 40, 40, 40])
    close32(result.rewards, [90.77144133408616 * 1.344] * 4)


def test_loyalty_lift() -> None:
    """Everyone at 40: team output 25 * 160**0.7 over the Nash output 25 * (4 * 34.239982)**0.7:
    (160 / 136.95993)**0.7 = 1.1168224**0.7... = 1.1149837. Before the first round: 1.0."""
    game = LoyaltyTeam()
    game.reset(0)
    assert game.legacy_info()["loyalty_lift"] == 1.0
    result = game.step(np.full(4, 40, dtype=F32))
    close32(result.info["loyalty_lift"], 1.114983705727507)


def test_games_without_a_termination_rule_run_to_the_horizon() -> None:
    for game in (TeamProduction(max_steps=3), LoyaltyTeam(max_steps=3), PublicGoods(max_steps=3)):
        game.reset(0)
        for t in range(3):
            result = game.step(np.zeros(game.n_agents, dtype=F32))  # total free-riding
            assert not result.terminated
            assert result.truncated == (t == 2)


# ---------------------------------------------------------------------------- CoalitionFormation
def test_coalition_excludes_a_disloyal_member_and_readmits_it() -> None:
    game = CoalitionFormation(reward_mode="private")
    game.reset(0)
    game.loyalty[0] = 0.16
    a = np.array([0, 40, 40, 40, 40, 40], dtype=F32)
    expected = game.mode_rewards(a, "private")
    result = game.step(a)
    # agent 0: 0.16 - 0.05 * 0.5 = 0.135 < 0.15 and 6 > 3 members: excluded, timer 5 then -1 = 4.
    # Multipliers: agent 0 free-rides (x0.5) and is excluded (x0.5): 0.25; the others are loyal
    # (rate 0.8: x1.12) in a coalition of 5 >= 3 (x1.1): 1.232; no coordination (agent 0 at 0).
    close32(result.rewards, expected * np.array([0.25, 1.232, 1.232, 1.232, 1.232, 1.232]))
    info = result.info
    assert info["coalition_members"] == [1, 2, 3, 4, 5] and info["excluded_agents"] == [0]
    assert info["coalition_size"] == 5 and info["coalition_stability"] == 5 / 6
    assert game.timers == {0: 4} and not result.terminated
    # four more rounds: the timer reaches 0, but loyalty 0.135 + 4 * 0.02 = 0.215 < 0.4: stays out
    full = np.full(6, 50, dtype=F32)
    for _ in range(4):
        game.step(full)
    assert game.excluded == [0] and game.timers == {0: 0}
    close32(game.loyalty[0], 0.215)
    # loyalty 0.39 + 0.02 = 0.41 >= 0.4 with the cooldown over: it rejoins at the end of the order
    game.loyalty[0] = 0.39
    info = game.step(full).info
    assert info["coalition_members"] == [1, 2, 3, 4, 5, 0] and info["excluded_agents"] == []
    assert game.timers == {}


def test_coalition_never_shrinks_below_its_minimum() -> None:
    """n=4, minimum 3: agents 0 and 1 both fall below 0.15; 0 goes (4 > 3), then 1 stays (3 > 3 fails)."""
    game = CoalitionFormation(n_agents=4)
    game.reset(0)
    game.loyalty[:2] = 0.1
    info = game.step(np.array([0, 0, 40, 40], dtype=F32)).info
    assert info["coalition_members"] == [1, 2, 3] and info["excluded_agents"] == [0]


def test_coalition_terminates_when_smaller_than_its_minimum() -> None:
    # two agents can never make a coalition of three: the first round ends the episode
    result = play(CoalitionFormation(n_agents=2, min_coalition_size=3), [40, 40])
    assert result.terminated and result.info["coalition_size"] == 2
    # members below 0.15 loyalty never push the default game below its minimum of 3
    game = CoalitionFormation(max_steps=40)
    game.reset(0)
    for _ in range(40):
        result = game.step(np.zeros(6, dtype=F32))
        assert not result.terminated
    assert result.truncated and result.info["coalition_size"] == 3


def test_coalition_reset_restores_everyone() -> None:
    game = CoalitionFormation(n_agents=4)
    game.reset(0)
    game.loyalty[0] = 0.1
    game.step(np.array([0, 40, 40, 40], dtype=F32))
    game.reset(1)
    assert (game.members, game.excluded, game.timers) == ([0, 1, 2, 3], [], {})
    assert game.loyalty.tolist() == [0.5] * 4


# ---------------------------------------------------------------------------- ApacheProject
def test_apache_phases_set_the_team_and_the_loyalty_cap() -> None:
    for phase, n in (("emergence", 8), ("growth", 15), ("maturity", 40), ("evolution", 35)):
        game = ApacheProject(phase=phase)
        game.reset(0)
        assert game.n_agents == n == APACHE_PHASES[phase].n_agents
        # loyalty starts at 0.5 * multiplier (maturity: 0.5 * 0.7 = 0.35)
        close32(game.loyalty, [0.5 * APACHE_PHASES[phase].loyalty_multiplier] * n)
    assert ApacheProject().n_agents == 40
    game = ApacheProject(phase="evolution")
    game.reset(0)
    game.loyalty[:] = 0.59
    game.step(np.full(35, 50, dtype=F32))
    # min(1, 0.59 + 0.02) = 0.61, capped at the evolution multiplier 0.6
    close32(game.loyalty, [0.6] * 35)


def test_apache_info() -> None:
    game = ApacheProject(phase="emergence")
    game.reset(0)
    info = game.legacy_info()
    assert (info["effort_deviation"], info["validation_accuracy"]) == (0.0, 1.0)
    assert (info["phase"], info["phase_years"], info["phase_loyalty"], info["expected_effort"]) == (
        "emergence",
        "1995-1999",
        1.0,
        35.0,
    )
    # mean effort 42: |42 - 35| / 35 = 0.2, accuracy 0.8
    info = game.step(np.full(8, 42, dtype=F32)).info
    close32(info["effort_deviation"], 0.2)
    close32(info["validation_accuracy"], 0.8)
    # mean effort 0: deviation 1, accuracy max(0, 0) = 0; emergence: omega 20, n 8:
    # Nash (14/8) ** (10/3) / 8 = 6.4602 / 8 = 0.80752
    info = game.step(np.zeros(8, dtype=F32)).info
    assert (info["effort_deviation"], info["validation_accuracy"]) == (1.0, 0.0)
    close64(info["nash_equilibrium"], (14 / 8) ** (1 / 0.3) / 8)
    assert not game.terminated()


# ---------------------------------------------------------------------------- PublicGoods
def test_public_goods_info() -> None:
    """a = [50,50,0,0,25] (endowment 50, n 5, multiplier 2): total 125, public good 250, rate 125/250.
    Loyalty after the round (rates [1,1,0,0,.5]): [0.52, 0.52, 0.475, 0.475, 0.51].
    Team payoffs pi = 2*125/5 - a = [0, 0, 50, 50, 25] (sum 125); teammates' means (125 - pi)/4 =
    [31.25, 31.25, 18.75, 18.75, 25]; L = theta * (0.6 * mean + 0.2 * a) = [0.52*28.75 = 14.95,
    14.95, 0.475*11.25 = 5.34375, 5.34375, 0.51*20 = 10.2]; payoffs (50 - a) + 50 + L sum to
    64.95*2 + 105.34375*2 + 85.2 = 425.7875. All giving 50: 100 + 0.6*50 + 0.2*50 = 100 + 40 theta
    each, 500 + 40 * 2.5 = 600. Efficiency 425.7875 / 600 = 0.70964583."""
    game = PublicGoods()
    result = play(game, [50, 50, 0, 0, 25])
    info = result.info
    assert (info["total_contribution"], info["public_good"], info["contribution_rate"]) == (125.0, 250.0, 0.5)
    close32(game.public_goods_payoffs(game.actions), [64.95, 64.95, 105.34375, 105.34375, 85.2])
    close32(info["social_efficiency"], 425.7875 / 600)
    # linear returns: Nash 0 (2/5 < 1), social optimum the endowment 50; efficiency 25 / 50
    assert (info["nash_equilibrium"], info["social_optimum"]) == (0.0, 50.0)
    close32(info["efficiency_ratio"], 0.5)
    assert (info["free_rider_count"], info["free_rider_indices"]) == (2, [2, 3])


def test_public_goods_endowment_sets_the_action_box() -> None:
    game = PublicGoods(n_agents=3, endowment=20.0, multiplier=4.0)
    assert game.endowments.tolist() == [20.0] * 3 and game.baselines.tolist() == [F32(8.0)] * 3
    # 4/3 >= 1: contributing everything is the Nash corner
    assert game.nash_equilibrium() == 20.0
    result = play(game, [30, 20, 10])  # 30 is clipped to the endowment
    assert game.actions.tolist() == [20.0, 20.0, 10.0]
    close32(result.info["contribution_rate"], 50 / 60)


# ---------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (TeamProduction, {"n_agents": 1}, "n_agents"),
        (TeamProduction, {"n_agents": 2.5}, "n_agents"),
        (TeamProduction, {"n_agents": True}, "n_agents"),
        (TeamProduction, {"beta": 0.0}, "beta"),
        (TeamProduction, {"beta": 1.5}, "beta"),
        (TeamProduction, {"omega": -1.0}, "omega"),
        (TeamProduction, {"c": 0.0}, "c (effort cost)"),
        (TeamProduction, {"omega": float("nan")}, "omega"),
        (TeamProduction, {"max_steps": 0}, "max_steps"),
        (TeamProduction, {"reward_mode": "selfish"}, "reward_mode"),
        (LoyaltyTeam, {"phi_B": -0.1}, "phi_B"),
        (LoyaltyTeam, {"phi_C": "0.3"}, "phi_C"),
        (CoalitionFormation, {"min_coalition_size": 0}, "min_coalition_size"),
        (CoalitionFormation, {"exit_threshold": 1.5}, "exit_threshold"),
        (CoalitionFormation, {"reentry_cooldown": -1}, "reentry_cooldown"),
        (ApacheProject, {"phase": "matrity"}, "Did you mean 'maturity'"),
        (ApacheProject, {"phase": ["maturity"]}, "unknown phase"),
        (PublicGoods, {"multiplier": 0.0}, "multiplier"),
        (PublicGoods, {"endowment": -5.0}, "endowment"),
    ],
)
def test_bad_parameters_are_config_errors(cls, kwargs, message) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cls(**kwargs)


def test_keyword_arguments_through_make() -> None:
    env = gymnasium.make("envgym/Coop-CoalitionFormation-v0", n_agents=4, min_coalition_size=2, split="test")
    assert env.unwrapped.game.n_agents == 4 and env.action_space.shape == (4,)
    env.close()
    # the base class's setup arguments are positional-only: not keyword arguments of any game
    with pytest.raises(InvalidKwargsError, match="params"):
        gymnasium.make("envgym/Coop-TeamProduction-v0", params=TR3Params())
    with pytest.raises(InvalidKwargsError, match="n_agents"):
        gymnasium.make("envgym/Coop-ApacheProject-v0", n_agents=4)


def test_describe_and_env_cards() -> None:
    description = PublicGoods().describe()
    assert description["mechanism"] == "TR-3" and description["multiplier"] == 2.0 and description["beta"] == 1.0
    assert ApacheProject().describe()["phase"] == "maturity"
    for cls in (TeamProduction, LoyaltyTeam, CoalitionFormation, ApacheProject, PublicGoods):
        assert "info" in cls.__doc__ and "max_steps" in cls.__doc__
