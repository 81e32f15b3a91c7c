"""Two-agent rounds in Python floats (:mod:`envgym.environments.coopetition.pair`) give the array code's numbers bit for bit.

Exact equality is the claim here, not closeness: the scalar path makes the same IEEE operations
as numpy's float32/float64 array code, on the same values, in the same order (the module
docstring says why each rounding agrees), so any difference, even one ulp, is a bug. Each case
plays one game twice with the same seeded actions, once with ``game._pair`` switched off (the
array code, which games of three or more agents play), and compares every observation, reward,
termination and ``info`` entry by its bytes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from envgym.environments.coopetition.api import build_game
from envgym.environments.coopetition.interdependence import SynergySearch, _variance32
from envgym.environments.coopetition.pair import column_means32, f32, f32s, f32x2
from envgym.environments.coopetition.reciprocity import memory_average

import envgym

#: (game, its keyword arguments): every game with two agents, by default or by argument.
TWO_AGENT: list[tuple[str, dict[str, Any]]] = [
    ("PartnerHoldUp", {}),
    ("SynergySearch", {}),
    ("SynergySearch", {"reveal_gamma_in_obs": True}),
    ("RenaultNissan", {"phase": "crisis"}),
    ("TrustDilemma", {}),
    ("RecoveryRace", {}),
    ("SLCD", {}),
    ("SLCD", {"trust_enabled": False}),
    ("CooperativeNegotiation", {}),
    ("ReciprocalDilemma", {}),
    ("GiftExchange", {}),
    ("PlatformEcosystem", {"n_developers": 1}),
    ("DynamicPartnerSelection", {"n_agents": 2}),
    ("ReputationMarket", {"n_agents": 2}),
    ("TeamProduction", {"n_agents": 2}),
    ("LoyaltyTeam", {"n_agents": 2}),
    ("PublicGoods", {"n_agents": 2}),
]
MODES = [("private", False, 1.0), ("integrated", True, 0.37), ("cooperative", False, -2.5)]


def canonical(value: Any) -> Any:
    """``value`` with every float as its exact bits and every array as dtype, shape and bytes."""
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return ("scalar", str(value.dtype), value.tobytes())
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(canonical(v) for v in value)
    return value


def contributions(rng: np.random.Generator, highs: list[float]) -> list[float]:
    """Mostly inside the box, sometimes at its edges, below 0, above the endowment, -0.0 or tiny."""
    row = []
    for high in highs:
        u = rng.uniform()
        if u < 0.2:
            row.append([0.0, -0.0, high, -3.0, 2.5 * high, 1e-12, 3e-10][int(rng.integers(7))])
        else:
            row.append(float(rng.uniform(0.0, high)))
    return row


def play_both(name: str, kwargs: dict[str, Any], obs_config: Any, steps: int, seed: int) -> None:
    envs = [envgym.make_parallel(f"envgym/Coop-{name}-v0", obs_config=obs_config, **kwargs) for _ in range(2)]
    assert envs[0].game._pair, f"{name} {kwargs}: expected the two-agent path"
    envs[1].game._pair = False
    agents = envs[0].possible_agents
    highs = [float(envs[0].action_space(a).high[0]) for a in agents]
    rng = np.random.default_rng(seed)
    where = f"{name} {kwargs} obs_config={obs_config}"
    for episode in range(2):
        first = [canonical(env.reset(seed=seed + episode)) for env in envs]
        assert first[0] == first[1], f"{where}: reset"
        for t in range(steps):
            row = contributions(rng, highs)
            dtype = np.float64 if rng.uniform() < 0.2 else np.float32
            actions = {a: np.asarray([x], dtype=dtype) for a, x in zip(agents, row, strict=True)}
            outs = [canonical(env.step(dict(actions))) for env in envs]
            for part, (fast, slow) in zip(("obs", "rewards", "terminations", "truncations", "infos"), zip(*outs)):
                assert fast == slow, f"{where} episode {episode} step {t + 1}: {part} differ"
            assert envs[0].state_text() == envs[1].state_text(), f"{where} step {t + 1}: state"
            if not envs[0].agents:
                break


@pytest.mark.parametrize(("name", "kwargs"), TWO_AGENT, ids=[f"{n}{'-' + str(k) if k else ''}" for n, k in TWO_AGENT])
def test_two_agent_path_equals_the_array_code_bit_for_bit(name: str, kwargs: dict[str, Any]) -> None:
    for k, (mode, normalize, scale) in enumerate(MODES):
        args = {**kwargs, "reward_mode": mode, "normalize": normalize, "reward_scale": scale}
        play_both(name, args, None, steps=40, seed=11 * k + 1)
    play_both(name, kwargs, "full_observability", steps=15, seed=5)
    play_both(name, kwargs, "minimal", steps=15, seed=6)
    play_both(name, kwargs, {"own_actions_visible": False, "others_actions_visible": False,
                             "own_trust_row_visible": False, "own_reputation_visible": False,
                             "public_reputation_visible": False, "interdependence_visible": False,
                             "step_count_visible": True}, steps=5, seed=7)  # fmt: skip


def test_power_value_and_engine_step_agree() -> None:
    """The engine's own ``step`` and ``play`` (no API around them), with the power value specification."""
    from dataclasses import replace

    fast, slow = build_game("TrustDilemma", {}), build_game("TrustDilemma", {})
    slow._pair = False
    for game in (fast, slow):
        game.value = replace(game.value, specification="power", beta=0.6)
        game.reset(3)
    rng = np.random.default_rng(2)
    for _ in range(30):
        row = np.asarray(contributions(rng, [100.0, 100.0]), dtype=np.float32)
        a, b = fast.step(row), slow.step(row)
        assert canonical((a.rewards, a.payoffs, a.terminated, a.truncated, a.info)) == canonical(
            (b.rewards, b.payoffs, b.terminated, b.truncated, b.info)
        )
        assert canonical(fast.play(row).rewards) == canonical(slow.play(row).rewards)


def test_actions_the_scalar_path_hands_to_the_array_code() -> None:
    """NaN and a wrong shape are the array code's to handle: the same result (or error) either way."""
    fast, slow = build_game("SLCD", {}), build_game("SLCD", {})
    slow._pair = False
    for game in (fast, slow):
        game.reset(0)
    nan = np.array([np.nan, 50.0], dtype=np.float32)
    a, b = fast.play(nan), slow.play(nan)
    assert canonical((a.rewards, fast.actions, fast.trust)) == canonical((b.rewards, slow.actions, slow.trust))
    assert math.isnan(float(fast.actions[0]))
    scalar = np.float32(30.0)  # broadcast to both agents by np.clip
    assert canonical(fast.play(scalar).rewards) == canonical(slow.play(scalar).rewards)
    for game in (fast, slow):
        with pytest.raises(ValueError):
            game.play(np.zeros(3, dtype=np.float32))


def test_rounds_beyond_float32_and_numpy_parameters_match_the_array_code() -> None:
    """A value past float32's range (``theta = 1e39``: infinite payoffs, which the scalar path hands
    to the array code, whose ``w @ pi`` makes NaN of them) and a numpy ``kappa`` (it promotes the
    signal to float64): the same numbers and the same state either way."""
    from dataclasses import replace

    for change in (
        lambda g: setattr(g, "value", replace(g.value, theta=1e39)),
        lambda g: setattr(g, "trust_params", replace(g.trust_params, kappa=np.float64(1.5))),
    ):
        fast, slow = build_game("TrustDilemma", {}), build_game("TrustDilemma", {})
        slow._pair = False
        for game in (fast, slow):
            change(game)
            game._pair_constants = type(game._pair_constants).of(game)
            game.reset(1)
        rng = np.random.default_rng(4)
        with np.errstate(all="ignore"):
            for _ in range(12):
                row = np.asarray(contributions(rng, [100.0, 100.0]), dtype=np.float32)
                a, b = fast.step(row), slow.step(row)
                assert canonical((a.rewards, a.payoffs, a.info)) == canonical((b.rewards, b.payoffs, b.info))
                assert canonical((fast.trust, fast.reputation, fast.actions)) == canonical(
                    (slow.trust, slow.reputation, slow.actions)
                )
        assert fast._pair_constants.kappa32 is None or math.isnan(float(fast.step(row).rewards[0]))


def test_clip_pair_of_two_floats_is_numpys_clip_of_their_float32_array() -> None:
    """The Parallel view hands two Python floats: rounded to float32 as numpy casts them (to infinity
    past its range), then clipped, as ``np.clip(np.asarray(floats, float32), 0, e)``; NaN is left to
    the array code, as it is from an array."""
    from envgym.environments.coopetition.pair import clip_pair

    values = [0.0, -0.0, -3.0, 1e-46, 3e-10, 0.1, 1 / 3, 79.99999999, 80.0, 80.000001, 1e39, -1e39, math.inf]
    for x0 in values:
        for x1 in values:
            with np.errstate(over="ignore"):
                array = np.asarray([x0, x1], dtype=np.float32)
            expected = np.clip(array, 0.0, np.array([100.0, 80.0])).tolist()
            got = clip_pair([x0, x1], 100.0, 80.0)
            assert got is not None and [v.hex() for v in got] == [float(v).hex() for v in expected], (x0, x1)
            assert clip_pair(array, 100.0, 80.0) == got
    assert clip_pair([math.nan, 1.0], 100.0, 80.0) is None
    assert clip_pair([1.0, math.nan], 100.0, 80.0) is None


def test_f32_is_numpys_float32_cast() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.normal(0, 1e3, 20_000),
            rng.uniform(-1, 1, 5_000) * 1e-40,  # float32 subnormals
            # halfway between two float32 values: ties go to the even one
            (np.arange(1, 2_000, dtype=np.float64) * 2.0**-23 + 1.0) + 2.0**-24,
            [0.0, -0.0, 3.5e38, 3.5e38 * 10, -1e300, math.inf, -math.inf],
        ]
    )
    with np.errstate(over="ignore"):
        expected = values.astype(np.float32).astype(np.float64)
    got = np.array([f32(v) for v in values.tolist()])
    assert got.tobytes() == expected.tobytes()


def test_f32s_and_f32x2_round_each_number() -> None:
    values = [0.1, -2.0 / 3.0, 1e-42, 1e39, 7.0]
    assert f32s(values) == tuple(f32(v) for v in values) == (f32(0.1), f32(-2.0 / 3.0), f32(1e-42), math.inf, 7.0)
    assert f32x2(0.1, -1e39) == (f32(0.1), -math.inf)


def test_column_means32_are_numpys_float32_means() -> None:
    rng = np.random.default_rng(1)
    for rows in range(1, 8):
        for columns in (1, 2, 6):
            for _ in range(500):
                block = (rng.uniform(0, 100, (rows, columns)) * rng.choice([1.0, 1e-3, 1e3])).astype(np.float32)
                expected = tuple(float(np.mean(block[:, j])) for j in range(columns))
                assert column_means32(block.tolist()) == expected, block


def test_memory_averages_are_numpys_means() -> None:
    """TR-4's memory averages (Python floats for windows under 8) against ``np.mean`` over the window."""
    rng = np.random.default_rng(2)
    history = [rng.uniform(0, 100, 2).astype(np.float32) for _ in range(30)]
    for k in (1, 3, 5, 7, 8, 10):
        for t in range(30):
            for agent in (0, 1):
                window = min(k, t - 1)
                expected = 0.0 if t <= 1 else float(np.mean(np.array([r[agent] for r in history[t - window : t]])))
                assert memory_average(history[:t], agent, k) == expected


def test_synergy_search_variance_and_running_sums_are_numpys() -> None:
    rng = np.random.default_rng(3)
    rows = (rng.normal(100, 40, (300, 2)) * rng.choice([1.0, 1e-2], (300, 1))).astype(np.float32)
    for t in (1, 2, 7, 8, 9, 16, 17, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300):
        assert _variance32(rows[:t]) == float(np.var(list(rows[:t]))), t
    game = SynergySearch()
    game.reset(4)
    for t in range(120):
        game.step(rng.uniform(0, 100, 2).astype(np.float32))
    result = game.step(np.array([60.0, 20.0], dtype=np.float32))
    assert result.info["cumulative_rewards"] == np.sum(game.reward_history, axis=0).tolist()
    assert result.info["reward_variance"] == float(np.var(game.reward_history))
