"""The coopetition views: registration, Gymnasium joint view, PettingZoo Parallel and AEC, reward modes,
invalid actions, observation configs, splits; the engine's formulas on hand-worked values."""

from __future__ import annotations

import math
import pickle

import gymnasium
import numpy as np
import pytest
from envgym.environments.coopetition.catalog import GAMES
from envgym.environments.coopetition.game import Game, ObservationConfig, TrustParams, ValueParams, symmetric
from floats import FEW_OPS, assert_close_scaled
from pettingzoo.test import api_test, parallel_api_test

import envgym
from envgym.errors import ConfigError, InvalidKwargsError, ResetNeededError, UnknownAgentError

F32 = np.float32
TD = "envgym/Coop-TrustDilemma-v0"


def test_every_game_is_registered_as_gymnasium_and_parallel() -> None:
    specs = envgym.list_envs(family="coopetition")
    for game in GAMES:
        kinds = {s.kind for s in specs if s.id == f"envgym/Coop-{game.name}-v0"}
        assert {"gymnasium", "parallel"} <= kinds, game.name
    assert len(GAMES) == 20
    assert {g.mechanism for g in GAMES} == {"TR-1", "TR-2", "TR-3", "TR-4"}
    assert all(sum(g.mechanism == m for g in GAMES) == 5 for m in ("TR-1", "TR-2", "TR-3", "TR-4"))


# ---------------------------------------------------------------------- engine formulas
class Pair(Game):
    """A two-agent game with round numbers, for hand-worked values."""

    name = "Pair"
    mechanism = "TR-1"

    def __init__(self, *, trust: TrustParams | None = None, **common: object) -> None:
        super().__init__(
            n_agents=2,
            max_steps=5,
            endowments=[100.0, 100.0],
            alpha=[0.5, 0.5],
            D=[[0.0, 0.5], [0.25, 0.0]],
            value=ValueParams(theta=20.0, gamma=0.5),
            trust=trust,
            baselines=[40.0, 40.0],
            **common,  # type: ignore[arg-type]
        )


def test_private_payoff_and_integrated_utility_by_hand() -> None:
    game = Pair()
    a = np.array([24.0, 99.0], dtype=F32)
    # f(24) = 20 ln 25 = 64.3775, f(99) = 20 ln 100 = 92.1034; g = sqrt(24 * 99) = 48.7442, S = 0.5 g = 24.3721
    # pi_0 = (100 - 24) + 64.3775 + 0.5 * 24.3721 = 152.5636; pi_1 = 1 + 92.1034 + 12.1861 = 105.2895
    pi = game.private_payoffs(a)
    assert_close_scaled(
        pi,
        [76 + 20 * math.log(25) + 0.25 * math.sqrt(24 * 99), 1 + 20 * math.log(100) + 0.25 * math.sqrt(24 * 99)],
        dtype=F32,
        ulps=FEW_OPS,
    )
    # without trust: U_0 = pi_0 + 0.5 pi_1, U_1 = pi_1 + 0.25 pi_0
    u = game.integrated_utilities(a)
    assert_close_scaled(u, [pi[0] + 0.5 * pi[1], pi[1] + 0.25 * pi[0]], dtype=F32, ulps=FEW_OPS)
    # a zero contribution kills the synergy (geometric mean)
    assert game.value.synergy(np.array([0.0, 50.0], dtype=F32)) == 0.0
    # the power specification: a ** beta
    power = ValueParams(specification="power", beta=0.5)
    assert_close_scaled(power.individual(np.array([16.0], dtype=F32)), [4.0], dtype=F32, ulps=FEW_OPS)


def test_reward_modes_normalize_and_scale_by_hand() -> None:
    a = np.array([24.0, 99.0], dtype=F32)
    private = Pair(reward_mode="private")
    pi = private.private_payoffs(a)
    u = Pair().integrated_utilities(a)
    assert_close_scaled(private.mode_rewards(a, "private"), pi, dtype=F32, ulps=FEW_OPS)
    coop = Pair(reward_mode="cooperative")
    assert_close_scaled(coop.mode_rewards(a, "cooperative"), [u.mean(), u.mean()], dtype=F32, ulps=FEW_OPS)
    scaled = Pair(normalize=True, reward_scale=3.0)
    # normalise by the largest endowment (100), then scale
    assert_close_scaled(scaled.mode_rewards(a, "integrated"), u / 100 * 3, dtype=F32, ulps=FEW_OPS)


def test_trust_update_by_hand() -> None:
    params = TrustParams(
        lambda_plus=0.1, lambda_minus=0.3, mu_R=0.6, delta_R=0.03, xi=0.5, kappa=1.0, initial_trust=0.5
    )
    game = Pair(trust=params)
    game.reset(0)
    # agent 0 gives 41 (signal tanh(1) = 0.76159), agent 1 gives 39 (signal tanh(-1) = -0.76159)
    game.play(np.array([41.0, 39.0], dtype=F32))
    s = math.tanh(1.0)
    # T[1][0] (1 trusts 0, who cooperated): 0.5 + 0.1 s (1 - 0.5) = 0.538080; R[1][0] stays 0 (heals from 0)
    # T[0][1] (0 trusts 1, who defected): 0.5 - 0.3 s 0.5 (1 + 0.5 * 0.5) = 0.357202; R[0][1] = 0.6 s = 0.456954
    assert_close_scaled(game.trust[1, 0], 0.5 + 0.1 * s * 0.5, dtype=np.float64, ulps=FEW_OPS * 1e8)
    assert_close_scaled(game.trust[0, 1], 0.5 - 0.3 * s * 0.5 * 1.25, dtype=np.float64, ulps=FEW_OPS * 1e8)
    assert_close_scaled(game.reputation[0, 1], 0.6 * s, dtype=np.float64, ulps=FEW_OPS * 1e8)
    assert game.reputation[1, 0] == 0.0 and game.trust[0, 0] == 1.0 and game.reputation[1, 1] == 0.0
    # trust can't exceed its ceiling 1 - R: agent 1 now cooperates; T[0][1] grows by 0.1 s' min(1 - T, 1 - R - T)
    t01, r01 = game.trust[0, 1], game.reputation[0, 1]
    game.play(np.array([41.0, 45.0], dtype=F32))
    s5 = math.tanh(5.0)
    room = max(0.0, min(1 - t01, (1 - r01) - t01))
    assert_close_scaled(game.trust[0, 1], min(t01 + 0.1 * s5 * room, 1 - r01), dtype=np.float64, ulps=FEW_OPS * 1e8)
    assert_close_scaled(game.reputation[0, 1], r01 - 0.03 * r01, dtype=np.float64, ulps=FEW_OPS * 1e8)


def test_trust_weights_the_integrated_utility() -> None:
    game = Pair(trust=TrustParams(initial_trust=0.5))
    game.reset(0)
    a = np.array([50.0, 50.0], dtype=F32)
    pi = game.private_payoffs(a)
    # w_ij = min(T_ij, 1 - R_ij) D_ij = 0.5 D_ij at reset
    assert_close_scaled(
        game.integrated_utilities(a), [pi[0] + 0.25 * pi[1], pi[1] + 0.125 * pi[0]], dtype=F32, ulps=FEW_OPS
    )


def test_bad_game_parameters_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="reward_mode"):
        Pair(reward_mode="selfish")
    with pytest.raises(ConfigError, match="lambda_plus"):
        TrustParams(lambda_plus=0.0)
    with pytest.raises(ConfigError, match="gamma"):
        ValueParams(gamma=2.0)
    with pytest.raises(ConfigError, match="reward_scale"):
        Pair(reward_scale=float("nan"))
    with pytest.raises(InvalidKwargsError, match="trust_sensitivty|trust_sensitivity"):
        gymnasium.make(TD, trust_sensitivty=2.0)
    assert symmetric(3, 0.2).tolist() == [[0.0, 0.2, 0.2], [0.2, 0.0, 0.2], [0.2, 0.2, 0.0]]


# ---------------------------------------------------------------------- views
def test_joint_view_reward_is_the_sum_and_components_add_up() -> None:
    env = gymnasium.make(TD, reward_mode="integrated", split="test")
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(np.array([50.0, 30.0], dtype=F32))
    # the reference's first-step rewards for this profile (see reference/TrustDilemma): [159.91212, 201.29143]
    assert_close_scaled(info["rewards"], [159.91212, 201.29143], dtype=F32, ulps=FEW_OPS)
    assert_close_scaled(reward, sum(info["rewards"]), dtype=F32, ulps=FEW_OPS)
    comps = info["reward_components"]
    assert_close_scaled(comps["payoff_reward"] + comps["social_reward"], reward, dtype=F32, ulps=FEW_OPS)
    assert not terminated and not truncated and info["action_valid"] and info["turn"] == 1
    private = gymnasium.make(TD, reward_mode="private", split="test")
    private.reset(seed=0)
    *_, pinfo = private.step(np.array([50.0, 30.0], dtype=F32))
    assert pinfo["reward_components"]["social_reward"] == 0.0
    assert_close_scaled(pinfo["rewards"], info["payoffs"], dtype=F32, ulps=FEW_OPS)
    one = gymnasium.make(TD, reward="agent_1", split="test")
    one.reset(seed=0)
    _, r1, *_ = one.step(np.array([50.0, 30.0], dtype=F32))
    assert_close_scaled(r1, 201.29143, dtype=F32, ulps=FEW_OPS)
    with pytest.raises(ConfigError, match="reward must be one of"):
        gymnasium.make(TD, reward="agent_7")


def test_joint_view_invalid_actions_change_nothing_and_end_after_the_limit() -> None:
    env = gymnasium.make(TD, invalid_limit=2).unwrapped
    obs0, _ = env.reset(seed=3)
    before = env.state_text()
    obs, reward, terminated, _, info = env.step([1.0, float("nan")])
    assert not info["action_valid"] and "finite" in info["invalid_reason"] and reward == 0.0 and not terminated
    assert env.state_text() == before and np.array_equal(obs, obs0)
    _, _, _, _, info = env.step(np.array([50.0, 50.0]))  # a valid round ends the run of invalid actions
    assert info["action_valid"] and info["turn"] == 1
    _, _, terminated, _, info = env.step(np.array([10.0, 20.0, 30.0]))  # wrong shape
    assert not terminated and "3 numbers" not in info["invalid_reason"] and "got 3" in info["invalid_reason"]
    _, _, terminated, _, info = env.step("forty")
    assert terminated and info["termination_reason"] == "invalid_limit" and info["invalid_actions"] == 3
    assert info["turn"] == 1 and not info["success"]
    with pytest.raises(ResetNeededError):
        env.step(np.array([1.0, 1.0]))


def test_actions_outside_the_box_are_clipped_as_in_the_reference() -> None:
    env = gymnasium.make(TD, split="test").unwrapped
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([-5.0, 1e9]))
    assert info["action_valid"] and info["actions"] == [0.0, 100.0]


def test_parallel_view_passes_pettingzoo_and_aec_buffers_the_round() -> None:
    parallel_api_test(envgym.make_parallel(TD), num_cycles=50)
    aec = envgym.make_aec(TD)
    api_test(aec, num_cycles=50)
    # AEC: agent_0's move is held until agent_1 has moved; then both play at once
    aec = envgym.make_aec(TD, split="test")
    aec.reset(seed=0)
    aec.step(np.array([50.0], dtype=F32))
    assert aec.unwrapped.game.step_count == 0
    aec.step(np.array([30.0], dtype=F32))
    assert aec.unwrapped.game.step_count == 1
    assert_close_scaled(aec.rewards["agent_1"], 201.29143, dtype=F32, ulps=FEW_OPS)


def test_parallel_view_matches_the_joint_view_step_for_step() -> None:
    rng = np.random.default_rng(7)
    joint = gymnasium.make(TD, reward_mode="cooperative").unwrapped
    par = envgym.make_parallel(TD, reward_mode="cooperative")
    joint.reset(seed=5)
    par.reset(seed=5)
    while par.agents:
        a = rng.uniform(20, 100, size=2).astype(F32)
        _, _, term, trunc, info = joint.step(a)
        _, rewards, terms, truncs, infos = par.step({"agent_0": a[:1], "agent_1": a[1:]})
        assert [rewards["agent_0"], rewards["agent_1"]] == info["rewards"]
        assert terms["agent_0"] == term and truncs["agent_1"] == trunc
        assert infos["agent_0"]["mean_trust"] == info["mean_trust"]
    assert term or trunc


def test_parallel_invalid_round_is_not_played_and_names_the_offender() -> None:
    env = envgym.make_parallel(TD)
    env.reset(seed=0)
    before = env.state_text()
    _, rewards, terms, _, infos = env.step({"agent_0": np.array([50.0]), "agent_1": "lots"})
    assert env.state_text() == before and rewards == {"agent_0": 0.0, "agent_1": 0.0}
    assert infos["agent_0"]["action_valid"] and not infos["agent_1"]["action_valid"]
    assert "agent_1" in infos["agent_0"]["invalid_reason"] and infos["agent_1"]["invalid_actions"] == 1
    _, _, _, _, infos = env.step({"agent_0": np.array([50.0])})
    assert infos["agent_1"]["invalid_reason"] == {"agent_1": "no action"}
    with pytest.raises(UnknownAgentError, match="agent_9"):
        env.step({"agent_9": 1.0})
    assert not any(terms.values())


@pytest.mark.parametrize("game", ["GiftExchange", "PartnerHoldUp"])
def test_parallel_two_agent_round_is_the_same_from_a_dict_and_any_mapping(game: str) -> None:
    """A plain dict takes the written-out two-agent path of ``step``, other mappings the loops:
    the same observations, rewards, ends and infos (values, types and key order)."""
    from types import MappingProxyType

    def trace(env, wrap):
        rng = np.random.default_rng(3)
        out = [repr(env.reset(seed=4))]
        for k in range(30):
            if not env.agents:  # an early end (the hold-up game's exit)
                out.append(repr(env.reset(seed=k)))
            acts = {a: np.asarray([rng.uniform(-10, 110)], dtype=F32) for a in env.possible_agents}
            if k % 7 == 3:
                acts["agent_1"] = np.asarray([np.nan], dtype=F32)
            obs, rewards, terms, truncs, infos = env.step(wrap(acts))
            out.append(repr((obs, rewards, terms, truncs, infos)))
            out.append(repr([type(v) for d in (rewards, *infos.values()) for v in d.values()]))
        return out

    fast, slow = (envgym.make_parallel(f"envgym/Coop-{game}-v0", reward_mode="integrated") for _ in range(2))
    assert trace(fast, dict) == trace(slow, MappingProxyType)
    with pytest.raises(UnknownAgentError, match="agent_9"):
        fast.step({"agent_0": np.array([50.0], F32), "agent_9": np.array([1.0], F32)})


def test_observation_configs_shape_what_agents_see() -> None:
    full = envgym.make_parallel(TD, obs_config="full_observability")
    real = envgym.make_parallel(TD)
    minimal = envgym.make_parallel(TD, obs_config="minimal")
    # 2 agents: own 1 + others 1 + trust row 2 + reputation row 2 + public 1 + D row 2 + step 1 = 10
    assert full.observation_space("agent_0").shape == (12,)  # trust matrix 4 in place of the row 2
    assert real.observation_space("agent_0").shape == (10,)
    assert minimal.observation_space("agent_0").shape == (3,)
    custom = envgym.make_parallel(TD, obs_config={"others_trust_toward_self_visible": True})
    assert custom.observation_space("agent_0").shape == (12,)  # the realistic 10 + the column T[:, 0]
    obs, _ = real.reset(seed=0)
    # own action = baseline 40, other's 40, own trust row (1, 0.5), reputation row (0, 0), public 0, D row (0, 0.6), step 0
    assert_close_scaled(obs["agent_0"], [40, 40, 1, 0.5, 0, 0, 0, 0, 0.6, 0], dtype=F32, ulps=FEW_OPS, scale=40)
    with pytest.raises(ConfigError, match="unknown preset"):
        envgym.make_parallel(TD, obs_config="everything")
    with pytest.raises(ConfigError, match="unknown fields"):
        envgym.make_parallel(TD, obs_config={"telepathy": True})
    assert ObservationConfig.resolve(None) == ObservationConfig.realistic_asymmetry()


def test_seeding_splits_and_pickling() -> None:
    env = gymnasium.make(TD).unwrapped
    _, info = env.reset(seed=4)
    assert info["task"]["split"] == "train" and info["task"]["id"] == "Coop-TrustDilemma/train/seed=4"
    twin = pickle.loads(pickle.dumps(env))
    a = np.array([60.0, 10.0], dtype=F32)
    assert twin.step(a)[4]["rewards"] == env.step(a)[4]["rewards"]
    with pytest.raises(ConfigError, match="split"):
        gymnasium.make(TD, split="validation")


@pytest.mark.parametrize("game", [g.name for g in GAMES])
def test_every_game_passes_pettingzoo_aec_api_test(game: str) -> None:
    """PettingZoo's own AEC API test on the AEC form of every game (the Parallel form is checked by
    tests/test_all_envs.py through envgym.testing.check_parallel_env, which runs parallel_api_test)."""
    api_test(envgym.make_aec(f"envgym/Coop-{game}-v0"), num_cycles=5)
