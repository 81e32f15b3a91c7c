"""Advantage estimators against hand-computed numbers (the arithmetic is written next to each)."""

from __future__ import annotations

import math

import pytest
import torch
from floats import EPS32, FEW_OPS, assert_close_scaled

from envgym.errors import ConfigError
from envgym.trainer.advantages import (
    combine_episode_and_step,
    discounted_returns,
    gae,
    gdpo_advantages,
    gigpo_step_advantages,
    group_stats,
    grpo_advantages,
    rloo_advantages,
    zero_variance_groups,
)


def close(actual: torch.Tensor, expected: list[float], ulps: float = FEW_OPS) -> None:
    """An estimator's result from a few float32 operations on rewards of magnitude about 1, against
    hand-computed numbers: equal to ``ulps`` of max(1, the values' magnitude)."""
    assert actual.shape == (len(expected),), actual.shape
    scale = max([1.0, *map(abs, expected)])
    assert_close_scaled(actual, expected, dtype=actual.dtype, ulps=ulps, scale=scale)


# ---------------------------------------------------------------------------------- group_stats
def test_group_stats_population_and_sample_std() -> None:
    values = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 4.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    mean, std, count = group_stats(values, groups)
    # group 0: mean 0.5, deviations +-0.5, squares 0.25 * 4 = 1, / 4 = 0.25 -> std 0.5
    # group 1: mean 3, deviations +-1, squares 2, / 2 = 1 -> std 1
    close(mean, [0.5, 0.5, 0.5, 0.5, 3.0, 3.0])
    close(std, [0.5, 0.5, 0.5, 0.5, 1.0, 1.0])
    assert count.tolist() == [4, 4, 4, 4, 2, 2] and count.dtype == torch.int64
    _, sample, _ = group_stats(values, groups, unbiased=True)
    # group 0: sqrt(1 / 3) = 0.577350; group 1: sqrt(2 / 1) = 1.414214
    close(sample, [0.577350] * 4 + [1.414214] * 2)


def test_group_stats_accepts_any_integer_ids_and_lists() -> None:
    mean, std, count = group_stats([5, 1, 7, 3], [7, 3, 7, 3])
    # group 7: {5, 7} mean 6 std 1; group 3: {1, 3} mean 2 std 1
    close(mean, [6.0, 2.0, 6.0, 2.0])
    close(std, [1.0, 1.0, 1.0, 1.0])
    assert count.tolist() == [2, 2, 2, 2]


def test_group_stats_single_member_has_zero_std_even_unbiased() -> None:
    _, std, count = group_stats([3.0], [0], unbiased=True)
    assert std.tolist() == [0.0] and count.tolist() == [1]


def test_group_stats_two_pass_is_exact_for_large_offsets() -> None:
    # E[x^2] - E[x]^2 in float32 would lose everything at 1e4 + {0, 1}; two passes keep std 0.5,
    # exactly: every intermediate (10000.5, +-0.5, 0.25) is a float32 number.
    _, std, _ = group_stats(torch.tensor([10000.0, 10001.0]), torch.tensor([0, 0]))
    assert std.tolist() == [0.5, 0.5]


# ---------------------------------------------------------------------------------- GRPO
def test_grpo_hand_computed() -> None:
    # one group [1, 0, 0, 1]: mean 0.5, population std 0.5 -> (r - 0.5) / 0.5 = [1, -1, -1, 1]
    close(grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([0, 0, 0, 0]), eps=0.0), [1, -1, -1, 1])
    # with eps = 1e-6: 0.5 / 0.500001 = 0.999998; two correctly rounded operations (+, /) on exact
    # inputs, so 2 ulps, which still tell it from 1
    adv = grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([0, 0, 0, 0]))
    close(adv, [0.999998, -0.999998, -0.999998, 0.999998], ulps=2)
    # group [3, 1, 2]: mean 2, std sqrt((1 + 1 + 0) / 3) = 0.816497 -> [1.224745, -1.224745, 0]
    rewards, groups = torch.tensor([3.0, 1.0, 2.0]), torch.tensor([4, 4, 4])
    close(grpo_advantages(rewards, groups, eps=0.0), [1.224745, -1.224745, 0.0])
    # Dr. GRPO: no std division -> r - 2
    close(grpo_advantages(rewards, groups, normalize_std=False), [1.0, -1.0, 0.0])
    # sample std (TRL's torch.std): sqrt(2 / 2) = 1 -> [1, -1, 0]
    close(grpo_advantages(rewards, groups, eps=0.0, unbiased=True), [1.0, -1.0, 0.0])


def test_grpo_invariants_over_random_groups() -> None:
    gen = torch.Generator().manual_seed(0)
    rewards = torch.rand(40, generator=gen)
    groups = torch.arange(40) // 8
    adv = grpo_advantages(rewards, groups, eps=0.0)
    for g in range(5):
        members = adv[groups == g]
        # sums to 0 in every group, to the rounding of a sum: relative to the sum of magnitudes
        assert abs(float(members.sum())) <= FEW_OPS * EPS32 * float(members.abs().sum())
        close((members**2).mean().reshape(1), [1.0])  # population std -> unit mean square


def test_grpo_edge_cases_give_zero_not_nan() -> None:
    # a group of one, and a group whose rewards are all equal, carry no signal: 0 (also with eps = 0)
    rewards = torch.tensor([5.0, 2.0, 2.0, 2.0, 1.0, 0.0])
    groups = torch.tensor([0, 1, 1, 1, 2, 2])
    for eps in (0.0, 1e-6):
        for normalize_std in (True, False):
            adv = grpo_advantages(rewards, groups, eps=eps, normalize_std=normalize_std)
            assert torch.isfinite(adv).all()
            assert adv[:4].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert grpo_advantages(torch.tensor([]), torch.tensor([], dtype=torch.long)).shape == (0,)


@pytest.mark.parametrize("value", [0.1, 0.3, 0.7, 1 / 3, 12345.678])
def test_equal_rewards_that_float_sums_do_not_reproduce_give_exactly_zero(value: float) -> None:
    # in float32, (0.1 * 7) / 7 != 0.1: a naive mean would leave a residue that the std division blows
    # up to +-1 (eps = 0) or a few percent (eps = 1e-6) for a group without any signal
    rewards, groups = torch.full((7,), value), torch.zeros(7, dtype=torch.long)
    mean, std, _ = group_stats(rewards, groups)
    assert (mean == rewards).all() and (std == 0).all()
    for eps in (0.0, 1e-6):
        assert grpo_advantages(rewards, groups, eps=eps).tolist() == [0.0] * 7
    assert rloo_advantages(rewards, groups).tolist() == [0.0] * 7
    assert gdpo_advantages({"a": rewards, "b": rewards * 3}, groups).tolist() == [0.0] * 7


def test_grpo_keeps_float64_and_converts_integers() -> None:
    assert grpo_advantages(torch.tensor([1.0, 0.0], dtype=torch.float64), [0, 0]).dtype == torch.float64
    adv = grpo_advantages([1, 0], [0, 0], eps=0.0)
    assert adv.dtype == torch.float32 and adv.tolist() == [1.0, -1.0]


@pytest.mark.parametrize(
    ("rewards", "groups", "message"),
    [
        ([1.0, float("nan")], [0, 0], "position 1"),
        ([1.0, float("inf")], [0, 0], "finite"),
        ([1.0, 0.0], [0], "one group per item"),
        ([1.0, 0.0], [0.0, 0.0], "integers"),
        ([[1.0, 0.0]], [0], "1-D"),
        (["a", "b"], [0, 0], "numbers"),
    ],
)
def test_grpo_rejects_bad_input(rewards, groups, message) -> None:
    with pytest.raises(ValueError, match=message):
        grpo_advantages(rewards, groups)


def test_grpo_rejects_negative_eps() -> None:
    with pytest.raises(ConfigError, match="eps must be"):
        grpo_advantages([1.0, 0.0], [0, 0], eps=-1.0)


# ---------------------------------------------------------------------------------- RLOO
def test_rloo_hand_computed() -> None:
    # [1, 0, 0, 1]: item 0 minus mean of others (0 + 0 + 1) / 3 = 1 - 1/3 = 2/3; item 1: 0 - 2/3
    close(
        rloo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([0, 0, 0, 0])), [2 / 3, -2 / 3, -2 / 3, 2 / 3]
    )
    # [3, 1] plus a lone 9: 3 - 1 = 2, 1 - 3 = -2, lone member -> 0
    close(rloo_advantages([3.0, 1.0, 9.0], [0, 0, 1]), [2.0, -2.0, 0.0])


def test_rloo_is_k_over_k_minus_one_times_centred_reward() -> None:
    gen = torch.Generator().manual_seed(1)
    rewards = torch.rand(30, generator=gen, dtype=torch.float64)
    groups = torch.tensor([0] * 3 + [1] * 5 + [2] * 10 + [3] * 12)
    adv = rloo_advantages(rewards, groups)
    for i in range(30):
        members = rewards[groups == groups[i]]
        k = len(members)
        others = (float(members.sum()) - float(rewards[i])) / (k - 1)  # the leave-one-out definition
        assert float(adv[i]) == pytest.approx(float(rewards[i]) - others, abs=1e-12)
        assert float(adv[i]) == pytest.approx(k / (k - 1) * (float(rewards[i]) - float(members.mean())), abs=1e-12)


# ---------------------------------------------------------------------------------- GDPO
def test_gdpo_differs_from_normalising_the_summed_reward() -> None:
    # two groups of two; components c1 = [0, 1 | 0, 1], c2 = [0, 0 | 0, 1]; summed = [0, 1 | 0, 2]
    c1 = torch.tensor([0.0, 1.0, 0.0, 1.0])
    c2 = torch.tensor([0.0, 0.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1])
    # GRPO on the sum: group 0 mean 0.5 std 0.5 -> [-1, 1]; group 1 mean 1 std 1 -> [-1, 1]: the two
    # different combinations (one reward vs both rewards) collapse to the same advantages
    close(grpo_advantages(c1 + c2, groups, eps=0.0), [-1.0, 1.0, -1.0, 1.0])
    # GDPO: c1 -> [-1, 1, -1, 1]; c2 -> group 0 flat [0, 0], group 1 [-1, 1]; sum [-1, 1, -2, 2]
    raw = gdpo_advantages({"c1": c1, "c2": c2}, groups, batch_normalize=False, eps=0.0)
    close(raw, [-1.0, 1.0, -2.0, 2.0])
    # batch step: mean 0, population std sqrt((1 + 1 + 4 + 4) / 4) = 1.581139 -> / 1.581139
    close(gdpo_advantages({"c1": c1, "c2": c2}, groups, eps=0.0), [-0.632456, 0.632456, -1.264911, 1.264911])


def test_gdpo_weights_and_dr_grpo_mode() -> None:
    c1 = torch.tensor([0.0, 1.0, 0.0, 1.0])
    c2 = torch.tensor([0.0, 0.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1])
    # weights 2 and 0.5: 2 * [-1, 1, -1, 1] + 0.5 * [0, 0, -1, 1] = [-2, 2, -2.5, 2.5]
    adv = gdpo_advantages({"c1": c1, "c2": c2}, groups, weights={"c1": 2, "c2": 0.5}, batch_normalize=False, eps=0.0)
    close(adv, [-2.0, 2.0, -2.5, 2.5])
    # no std division: c1 -> [-0.5, 0.5, -0.5, 0.5], c2 -> [0, 0, -0.5, 0.5]; sum [-0.5, 0.5, -1, 1]
    adv = gdpo_advantages({"c1": c1, "c2": c2}, groups, normalize_std=False, batch_normalize=False)
    close(adv, [-0.5, 0.5, -1.0, 1.0])
    # a single trajectory: batch normalisation gives 0, not nan
    assert gdpo_advantages({"c1": [1.0]}, [0]).tolist() == [0.0]


def test_gdpo_rejects_bad_components_and_weights() -> None:
    comps = {"format_reward": [1.0, 0.0], "success_reward": [0.0, 1.0]}
    with pytest.raises(ConfigError, match="Did you mean 'format_reward'"):
        gdpo_advantages(comps, [0, 0], weights={"formt_reward": 1.0, "success_reward": 1.0})
    with pytest.raises(ConfigError, match="missing 'success_reward'"):
        gdpo_advantages(comps, [0, 0], weights={"format_reward": 1.0})
    with pytest.raises(ConfigError, match="non-empty mapping"):
        gdpo_advantages({}, [0, 0])
    with pytest.raises(ValueError, match="component 'b' has 3"):
        gdpo_advantages({"a": [1.0, 0.0], "b": [1.0, 0.0, 1.0]}, [0, 0])
    with pytest.raises(ConfigError, match="weight of component 'a'"):
        gdpo_advantages({"a": [1.0, 0.0]}, [0, 0], weights={"a": float("nan")})


# ---------------------------------------------------------------------------------- dynamic sampling
def test_zero_variance_groups() -> None:
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 2.0, 2.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 3])
    assert zero_variance_groups(rewards, groups).tolist() == [True, True, False, False, True, True, True]
    # with a tolerance, a spread of 0.001 counts as flat
    assert zero_variance_groups([0.5, 0.501], [0, 0], atol=0.01).tolist() == [True, True]
    assert zero_variance_groups([0.5, 0.501], [0, 0]).tolist() == [False, False]
    # flat groups are exactly the ones GRPO gives all-zero advantages
    adv = grpo_advantages(rewards, groups)
    assert ((adv == 0) | ~zero_variance_groups(rewards, groups)).all()


# ---------------------------------------------------------------------------------- returns and GAE
def test_discounted_returns() -> None:
    # gamma 0.9 on [0, 0, 1]: G2 = 1, G1 = 0.9, G0 = 0.81
    close(discounted_returns(torch.tensor([0.0, 0.0, 1.0]), 0.9), [0.81, 0.9, 1.0])
    # gamma 0.5 on [1, 2, 3]: G2 = 3, G1 = 2 + 1.5 = 3.5, G0 = 1 + 1.75 = 2.75
    close(discounted_returns([1.0, 2.0, 3.0], 0.5), [2.75, 3.5, 3.0])
    close(discounted_returns([1.0, 2.0, 3.0], 1.0), [6.0, 5.0, 3.0])
    close(discounted_returns([1.0, 2.0, 3.0], 0.0), [1.0, 2.0, 3.0])
    assert discounted_returns(torch.tensor([]), 0.9).shape == (0,)
    with pytest.raises(ConfigError, match=r"gamma must be a number in \[0, 1\]"):
        discounted_returns([1.0], 1.5)


def test_gae_hand_computed_terminated_and_truncated() -> None:
    rewards, values = torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.5, 0.5, 0.5])
    adv, ret = gae(rewards, values, gamma=0.9, lam=0.5)
    # terminated: V_3 = 0. delta_2 = 1 - 0.5 = 0.5; A_2 = 0.5
    # delta_1 = 0 + 0.9 * 0.5 - 0.5 = -0.05; A_1 = -0.05 + 0.45 * 0.5 = 0.175
    # delta_0 = -0.05; A_0 = -0.05 + 0.45 * 0.175 = 0.02875; returns = A + V
    close(adv, [0.02875, 0.175, 0.5])
    close(ret, [0.52875, 0.675, 1.0])
    adv, ret = gae(rewards, values, last_value=2.0, terminated=False, gamma=0.9, lam=0.5)
    # truncated: V_3 = 2. delta_2 = 1 + 1.8 - 0.5 = 2.3; A_1 = -0.05 + 0.45 * 2.3 = 0.985;
    # A_0 = -0.05 + 0.45 * 0.985 = 0.39325
    close(adv, [0.39325, 0.985, 2.3])
    close(ret, [0.89325, 1.485, 2.8])
    # last_value is ignored when the episode terminated
    close(gae(rewards, values, last_value=2.0, gamma=0.9, lam=0.5)[0], [0.02875, 0.175, 0.5])


def test_gae_lambda_limits() -> None:
    gen = torch.Generator().manual_seed(2)
    rewards, values = torch.rand(6, generator=gen), torch.rand(6, generator=gen, requires_grad=True)
    # lam = 1: advantages are discounted returns minus values
    adv, ret = gae(rewards, values, gamma=0.8, lam=1.0)
    close(adv, (discounted_returns(rewards, 0.8) - values.detach()).tolist())
    close(ret, discounted_returns(rewards, 0.8).tolist())
    # lam = 0: one-step TD errors r_t + gamma V_{t+1} - V_t
    adv, _ = gae(rewards, values, gamma=0.8, lam=0.0)
    v_next = torch.cat([values.detach()[1:], torch.zeros(1)])
    close(adv, (rewards + 0.8 * v_next - values.detach()).tolist())
    assert not adv.requires_grad and not ret.requires_grad  # targets carry no graph


def test_gae_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="one entry per turn"):
        gae([1.0, 0.0], [0.0])
    with pytest.raises(ConfigError, match="lam"):
        gae([1.0], [0.0], lam=2.0)
    with pytest.raises(ValueError, match="last_value must be a finite"):
        gae([1.0], [0.0], last_value=float("nan"), terminated=False)


# ---------------------------------------------------------------------------------- GiGPO
def test_gigpo_step_groups_hand_computed() -> None:
    keys = [["s0", "s1", "s2"], ["s0", "s2", "s2"], ["s0"]]
    returns = [torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0.5, 0.25, 0.0]), torch.tensor([3.0])]
    groups = [0, 0, 1]
    out = gigpo_step_advantages(keys, returns, groups, eps=0.0)
    # group 0, state s0: returns {1.0, 0.5}: mean 0.75, std 0.25 -> [+1, -1]
    # group 0, state s1: visited once -> 0
    # group 0, state s2: {1.0, 0.25, 0.0}: mean 0.416667, deviations 0.583333, -0.166667, -0.416667,
    #   squares 0.340278 + 0.027778 + 0.173611 = 0.541667, / 3 = 0.180556, std 0.424918
    #   -> [1.372813, -0.392232, -0.980581]
    # group 1, state s0: a different task, so not grouped with group 0's s0 -> singleton -> 0
    close(out[0], [1.0, 0.0, 1.372813])
    close(out[1], [-1.0, -0.392232, -0.980581])
    close(out[2], [0.0])
    raw = gigpo_step_advantages(keys, returns, groups, normalize_std=False)
    close(raw[0], [0.25, 0.0, 0.583333])
    close(raw[1], [-0.25, -0.166667, -0.416667])


def test_gigpo_tuple_keys_and_empty_episodes() -> None:
    out = gigpo_step_advantages([[(1, 2), (1, 2)], []], [[2.0, 0.0], []], [0, 0], eps=0.0)
    close(out[0], [1.0, -1.0])
    assert out[1].shape == (0,)


def test_gigpo_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="one entry per episode"):
        gigpo_step_advantages([["a"]], [], [0])
    with pytest.raises(ValueError, match="episode 0 has 2 step keys but 1"):
        gigpo_step_advantages([["a", "b"]], [[1.0]], [0])
    with pytest.raises(TypeError, match="must be hashable"):
        gigpo_step_advantages([[["a"]]], [[1.0]], [0])
    with pytest.raises(TypeError, match="one state key per turn"):
        gigpo_step_advantages(["abc"], [[1.0, 2.0, 3.0]], [0])


def test_combine_episode_and_step() -> None:
    step = [torch.tensor([1.0, 0.0, 1.372813]), torch.tensor([-1.0, -0.392232])]
    out = combine_episode_and_step(torch.tensor([0.5, -0.5]), step, step_weight=0.5)
    # episode 0: 0.5 + 0.5 * [1, 0, 1.372813]; episode 1: -0.5 + 0.5 * [-1, -0.392232]
    close(out[0], [1.0, 0.5, 1.1864065])
    close(out[1], [-1.0, -0.696116])
    with pytest.raises(ValueError, match="one entry per episode"):
        combine_episode_and_step(torch.tensor([0.5]), step)
    with pytest.raises(ConfigError, match="step_weight"):
        combine_episode_and_step(torch.tensor([0.5, 0.1]), step, step_weight=math.inf)
