"""Losses against hand-computed numbers, plus the gradient contract: masked tokens get exactly 0."""

from __future__ import annotations

import math

import pytest
import torch
from floats import FEW_OPS, assert_close_scaled

from envgym.errors import ConfigError
from envgym.trainer import losses
from envgym.trainer.losses import (
    AGGREGATIONS,
    aggregate,
    combine,
    entropy_from_logits,
    kl_penalty,
    policy_loss,
    token_logprobs,
    value_loss,
)

VALUES = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def approx(value: torch.Tensor | float, expected: float) -> None:
    """A float32 result of a few operations on inputs of magnitude about 1, against a hand-computed
    number: equal to a few ulps of max(1, |expected|)."""
    value = value.detach() if isinstance(value, torch.Tensor) else value
    assert_close_scaled(float(value), expected, dtype=torch.float32, ulps=FEW_OPS, scale=max(1.0, abs(expected)))


def close(actual: torch.Tensor, expected: torch.Tensor, *, scale: float | None = None) -> None:
    """Tensors from a few operations on small inputs, against numbers computed another way: equal to a
    few ulps of their dtype, relative to ``scale`` (default: their largest magnitude)."""
    actual, expected = actual.detach(), torch.as_tensor(expected).detach()
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert_close_scaled(actual, expected, dtype=actual.dtype, ulps=FEW_OPS, scale=scale)


# ---------------------------------------------------------------------------------- aggregate
def test_aggregate_modes_hand_computed() -> None:
    # valid: row 0 -> {1, 2} (sum 3, 2 tokens), row 1 -> {4} (sum 4, 1 token)
    approx(aggregate(VALUES, MASK, "token-mean"), 7 / 3)  # (1 + 2 + 4) / 3
    approx(aggregate(VALUES, MASK, "seq-mean-token-mean"), 2.75)  # (3/2 + 4/1) / 2
    approx(aggregate(VALUES, MASK, "seq-mean-token-sum"), 3.5)  # (3 + 4) / 2
    approx(aggregate(VALUES, MASK, "seq-mean-token-sum-norm", max_tokens=4), 0.875)  # (3/4 + 4/4) / 2
    approx(aggregate(VALUES, MASK, "token-sum-norm", max_tokens=4), 0.875)
    # a bool mask means the same
    approx(aggregate(VALUES, MASK.bool(), "token-mean"), 7 / 3)


def test_aggregate_empty_sequences_and_empty_batches_are_zero_not_nan() -> None:
    values = torch.tensor([[1.0, 2.0, float("nan")], [float("inf"), 5.0, 6.0]])  # garbage on masked positions
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    approx(aggregate(values, mask, "token-mean"), 1.5)
    approx(aggregate(values, mask, "seq-mean-token-mean"), 0.75)  # (1.5 + 0) / 2: the empty row counts as 0
    approx(aggregate(values, mask, "seq-mean-token-sum"), 1.5)  # (3 + 0) / 2
    for mode in AGGREGATIONS:
        out = aggregate(values, torch.zeros(2, 3), mode, max_tokens=8)
        assert float(out) == 0.0


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_aggregate_gradient_is_exactly_zero_on_masked_tokens(mode: str) -> None:
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    aggregate(values, mask, mode, max_tokens=4).backward()
    assert values.grad is not None
    assert (values.grad[mask == 0] == 0).all()
    assert (values.grad[mask == 1] > 0).all()


def test_aggregate_rejects_bad_input() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'token-mean'"):
        aggregate(VALUES, MASK, "token_mean")
    with pytest.raises(ConfigError, match="max_tokens"):
        aggregate(VALUES, MASK, "seq-mean-token-sum-norm")
    with pytest.raises(ConfigError, match="max_tokens"):
        aggregate(VALUES, MASK, "token-sum-norm", max_tokens=0)
    with pytest.raises(ValueError, match="shape of the token tensor"):
        aggregate(VALUES, MASK[:, :2], "token-mean")
    with pytest.raises(ValueError, match=r"\[B, L\]"):
        aggregate(torch.ones(3), torch.ones(3))


# ---------------------------------------------------------------------------------- policy loss
def _ratios_case() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    # ratios 1.5, 0.5, 1.1, 0.9 against an old policy of log-prob 0; advantages +1, -1, +1, -1
    logprobs = torch.log(torch.tensor([[1.5, 0.5, 1.1, 0.9]])).requires_grad_(True)
    return logprobs, torch.zeros(1, 4), torch.tensor([[1.0, -1.0, 1.0, -1.0]]), torch.ones(1, 4)


def test_policy_loss_hand_computed_with_clip_higher() -> None:
    logprobs, old, adv, mask = _ratios_case()
    loss, stats = policy_loss(logprobs, old, adv, mask, clip_low=0.2, clip_high=0.28)
    # token 0: r 1.5, A +1: max(-1.5, -1.28) = -1.28  (clipped at 1 + 0.28)
    # token 1: r 0.5, A -1: max(0.5, 0.8)   = 0.8    (clipped at 1 - 0.2)
    # token 2: r 1.1, A +1: max(-1.1, -1.1) = -1.1
    # token 3: r 0.9, A -1: max(0.9, 0.9)   = 0.9
    # token-mean: (-1.28 + 0.8 - 1.1 + 0.9) / 4 = -0.17
    approx(loss, -0.17)
    assert stats["clip_fraction"] == 0.5  # tokens 0 and 1: a count over a count, exact
    approx(stats["ratio_mean"], 1.0)  # (1.5 + 0.5 + 1.1 + 0.9) / 4
    approx(stats["ratio_max"], 1.5)
    # k3 of old vs new: mean(r - 1 - ln r) = (0.094535 + 0.193147 + 0.004690 + 0.005361) / 4 = 0.297733 / 4
    approx(stats["approx_kl"], 0.074433)
    assert all(isinstance(v, float) for v in stats.values())
    loss.backward()
    # clipped tokens have zero gradient; else d/dlp (-r A) / 4 = -r A / 4: token 2 -0.275, token 3 +0.225
    close(logprobs.grad, torch.tensor([[0.0, 0.0, -0.275, 0.225]]))


def test_policy_loss_clips_at_the_asymmetric_bounds() -> None:
    # ratio 1.25 with A = +1: inside [0.8, 1.28] -> -1.25; with a symmetric 0.2 it clips to -1.2
    lp = torch.log(torch.tensor([[1.25]]))
    ones = torch.ones(1, 1)
    approx(policy_loss(lp, torch.zeros(1, 1), ones, ones, clip_low=0.2, clip_high=0.28)[0], -1.25)
    approx(policy_loss(lp, torch.zeros(1, 1), ones, ones, clip_low=0.2, clip_high=0.2)[0], -1.2)
    # ratio 0.75 with A = -1: clip_low 0.2 -> max(0.75, 0.8) = 0.8; clip_low 0.3 -> 0.75 (not clipped)
    lp = torch.log(torch.tensor([[0.75]]))
    approx(policy_loss(lp, torch.zeros(1, 1), -ones, ones, clip_low=0.2, clip_high=0.28)[0], 0.8)
    approx(policy_loss(lp, torch.zeros(1, 1), -ones, ones, clip_low=0.3, clip_high=0.28)[0], 0.75)


def test_policy_loss_dual_clip() -> None:
    # ratio 5 with A = -1: PPO loss max(5, 1.2) = 5; dual clip c = 3 bounds it to -c A = 3 (zero gradient)
    lp = torch.log(torch.tensor([[5.0]])).requires_grad_(True)
    ones = torch.ones(1, 1)
    approx(policy_loss(lp, torch.zeros(1, 1), -ones, ones)[0], 5.0)
    loss, stats = policy_loss(lp, torch.zeros(1, 1), -ones, ones, dual_clip=3.0)
    approx(loss, 3.0)
    assert stats["clip_fraction"] == 1.0
    loss.backward()
    assert lp.grad is not None and lp.grad.item() == 0.0
    with pytest.raises(ConfigError, match="dual_clip"):
        policy_loss(lp, torch.zeros(1, 1), -ones, ones, dual_clip=0.5)


def test_policy_loss_sequence_advantages_are_broadcast() -> None:
    gen = torch.Generator().manual_seed(3)
    logprobs = -torch.rand(3, 5, generator=gen)
    old = -torch.rand(3, 5, generator=gen)
    mask = (torch.rand(3, 5, generator=gen) > 0.3).float()
    per_seq = torch.tensor([1.0, -0.5, 2.0])
    a, stats_a = policy_loss(logprobs, old, per_seq, mask)
    b, stats_b = policy_loss(logprobs, old, per_seq[:, None].expand(3, 5), mask)
    close(a, b)
    assert stats_a == stats_b


def test_policy_loss_masked_tokens_get_exactly_zero_gradient_even_with_garbage() -> None:
    logprobs, old, adv, mask = _ratios_case()
    # a second row that is all padding, holding values that would overflow exp() or be nan
    garbage = torch.tensor([[100.0, -1e30, float("nan"), 0.0]])
    lp = torch.cat([logprobs.detach(), garbage]).requires_grad_(True)
    old2 = torch.cat([old, torch.tensor([[-100.0, 0.0, 0.0, float("nan")]])])
    adv2 = torch.cat([adv, torch.tensor([[1e9, -1e9, float("inf"), 1.0]])])
    mask2 = torch.cat([mask, torch.zeros(1, 4)])
    loss, stats = policy_loss(lp, old2, adv2, mask2, clip_low=0.2, clip_high=0.28)
    approx(loss, -0.17)  # the padding row changes nothing
    approx(stats["ratio_max"], 1.5)
    loss.backward()
    assert lp.grad is not None and torch.isfinite(lp.grad).all()
    assert (lp.grad[1] == 0).all()
    close(lp.grad[0], torch.tensor([0.0, 0.0, -0.275, 0.225]))


def test_policy_loss_aggregations_and_empty_mask() -> None:
    logprobs, old, adv, mask = _ratios_case()
    # sequence sum -0.68 over max_tokens 8, one sequence -> -0.085
    approx(policy_loss(logprobs, old, adv, mask, clip_high=0.28, aggregation="token-sum-norm", max_tokens=8)[0], -0.085)
    loss, stats = policy_loss(logprobs, old, adv, torch.zeros(1, 4))
    assert float(loss.detach()) == 0.0
    assert stats == {"clip_fraction": 0.0, "approx_kl": 0.0, "ratio_mean": 1.0, "ratio_max": 1.0}


def test_policy_loss_rejects_bad_input() -> None:
    logprobs, old, adv, mask = _ratios_case()
    with pytest.raises(ConfigError, match="clip_low must be below 1"):
        policy_loss(logprobs, old, adv, mask, clip_low=1.0)
    with pytest.raises(ConfigError, match="clip_high"):
        policy_loss(logprobs, old, adv, mask, clip_high=-0.1)
    with pytest.raises(ValueError, match="per token"):
        policy_loss(logprobs, old, torch.ones(3), mask)
    with pytest.raises(ValueError, match="old_logprobs must have shape"):
        policy_loss(logprobs, old[:, :2], adv, mask)
    with pytest.raises(ConfigError, match="mode must be one of"):
        policy_loss(logprobs, old, adv, mask, aggregation="mean")


# ---------------------------------------------------------------------------------- KL
def test_kl_estimators_hand_computed() -> None:
    # policy 0.5, reference 0.25 at the sampled token: d = ln(0.25 / 0.5) = -ln 2 = -0.693147
    lp = torch.log(torch.tensor([[0.5, 0.25]]))
    ref = torch.log(torch.tensor([[0.25, 0.5]]))  # second token: d = +ln 2
    ln2 = math.log(2)
    close(kl_penalty(lp, ref, estimator="k1"), torch.tensor([[ln2, -ln2]]))
    close(kl_penalty(lp, ref, estimator="k2"), torch.tensor([[ln2**2 / 2, ln2**2 / 2]]))
    # k3 = e^d - d - 1: 0.5 + ln 2 - 1 = 0.193147; 2 - ln 2 - 1 = 0.306853
    close(kl_penalty(lp, ref), torch.tensor([[0.5 + ln2 - 1, 1 - ln2]]))


def test_k1_and_k3_are_unbiased_estimates_of_the_kl() -> None:
    # exact expectation under the policy over a 5-token vocabulary equals KL(policy || reference)
    gen = torch.Generator().manual_seed(4)
    p = torch.softmax(torch.randn(5, generator=gen, dtype=torch.float64), -1)
    q = torch.softmax(torch.randn(5, generator=gen, dtype=torch.float64), -1)
    exact = float((p * (p.log() - q.log())).sum())
    for estimator in ("k1", "k3"):
        per_token = kl_penalty(p.log()[None], q.log()[None], estimator=estimator)[0]
        assert float((p * per_token).sum()) == pytest.approx(exact, rel=1e-9)
    # k3 (and k2) never go below 0; k1 does
    assert (kl_penalty(p.log()[None], q.log()[None]) >= 0).all()
    assert (kl_penalty(p.log()[None], q.log()[None], estimator="k1") < 0).any()


def test_kl_mask_zeroes_value_and_gradient() -> None:
    lp = torch.tensor([[-1.0, 50.0], [-2.0, -3.0]], requires_grad=True)
    ref = torch.tensor([[-0.5, -80.0], [-2.5, -3.0]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    for estimator in ("k1", "k2", "k3"):
        lp.grad = None
        kl = kl_penalty(lp, ref, mask, estimator=estimator)
        assert kl[0, 1] == 0 and torch.isfinite(kl).all()
        kl.sum().backward()
        assert lp.grad is not None and lp.grad[0, 1] == 0 and lp.grad[0, 0] != 0
    with pytest.raises(ConfigError, match="estimator must be one of"):
        kl_penalty(lp, ref, estimator="k4")


# ---------------------------------------------------------------------------------- entropy
def test_entropy_hand_computed_and_against_categorical() -> None:
    # probabilities 1/6, 2/6, 3/6: H = (1/6) ln 6 + (1/3) ln 3 + (1/2) ln 2 = 1.011404
    logits = torch.log(torch.tensor([[[1.0, 2.0, 3.0]]]))
    approx(entropy_from_logits(logits)[0, 0], 1.011404)
    approx(entropy_from_logits(torch.zeros(4)), math.log(4))  # uniform over 4
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 3, 11, generator=gen) * 3
    expected = torch.distributions.Categorical(logits=logits).entropy()
    manual = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1)
    out = entropy_from_logits(logits)
    assert out.shape == (2, 3)
    close(out, expected, scale=float(logits.abs().max()))  # rounding relative to the logits (up to ~10)
    close(out, manual, scale=float(logits.abs().max()))


def test_entropy_is_stable_for_extreme_and_banned_logits() -> None:
    # huge logits: one token has all the mass -> 0, not nan; -inf logits are banned tokens
    approx(entropy_from_logits(torch.tensor([1e4, 0.0, -1e4])), 0.0)
    logits = torch.tensor([0.0, 0.0, -math.inf], requires_grad=True)
    out = entropy_from_logits(logits)
    approx(out, math.log(2))
    out.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    half = entropy_from_logits(torch.zeros(2, 8, dtype=torch.bfloat16))
    assert half.dtype == torch.float32
    close(half, torch.full((2,), math.log(8)))


# ---------------------------------------------------------------------------------- token log-probs
def test_token_logprobs_hand_computed_and_with_temperature() -> None:
    logits = torch.log(torch.tensor([[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]]))
    ids = torch.tensor([[2, 0]])
    # p(2) = 3/6 -> ln 0.5 = -0.693147; p(0) = 1/6 -> -1.791759
    close(token_logprobs(logits, ids), torch.tensor([[math.log(0.5), math.log(1 / 6)]]))
    # T = 2: probabilities proportional to sqrt(1), sqrt(2), sqrt(3) = 1, 1.414214, 1.732051 (sum 4.146264)
    # -> p(2) = 0.4177377, ln = -0.872902
    approx(token_logprobs(logits, ids, temperature=2.0)[0, 0], -0.872902)


def test_token_logprobs_matches_log_softmax_gather_values_and_gradients() -> None:
    gen = torch.Generator().manual_seed(6)
    logits = (torch.randn(2, 4, 13, generator=gen) * 4).requires_grad_(True)
    ids = torch.randint(0, 13, (2, 4), generator=gen)
    reference = torch.log_softmax(logits / 0.7, -1).gather(-1, ids[..., None]).squeeze(-1)
    (grad_ref,) = torch.autograd.grad(reference.sum(), logits)
    out = token_logprobs(logits, ids, temperature=0.7)
    scale = float(logits.detach().abs().max()) / 0.7  # the scaled logits' magnitude, up to ~15
    close(out, reference, scale=scale)
    (grad,) = torch.autograd.grad(out.sum(), logits)
    close(grad, grad_ref)
    # the policy calls it on the K selected positions: logits [K, V], ids [K]
    flat = token_logprobs(logits.detach().reshape(8, 13), ids.reshape(8), temperature=0.7)
    close(flat, reference.detach().reshape(8), scale=scale)


def test_no_grad_chunked_paths_match_the_autograd_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    # without a gradient both functions work through row chunks in place; force one row per chunk
    monkeypatch.setattr(losses, "CHUNK_ELEMENTS", 20)
    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(3, 4, 13, generator=gen) * 5
    logits[0, 1, 3] = logits[2, 0, 0] = -math.inf  # banned tokens
    ids = torch.randint(4, 13, (3, 4), generator=gen)
    scale = float(logits[logits.isfinite()].abs().max()) / 0.7  # the finite scaled logits' magnitude
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        z = logits.to(dtype)
        with_grad = z.clone().requires_grad_(True)
        for temperature in (1.0, 0.7):
            expected = token_logprobs(with_grad, ids, temperature=temperature)
            with torch.no_grad():
                chunked = token_logprobs(z, ids, temperature=temperature)
            assert chunked.dtype == expected.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
            close(chunked, expected, scale=scale)
        expected = entropy_from_logits(with_grad)
        chunked = entropy_from_logits(z)  # no requires_grad: the chunked path
        close(chunked, expected, scale=scale)
        assert torch.isfinite(chunked).all() and (chunked >= 0).all()
    reference = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    close(token_logprobs(logits, ids), reference, scale=scale)


def test_token_logprobs_rejects_bad_input() -> None:
    logits = torch.zeros(1, 2, 5)
    with pytest.raises(ValueError, match="token id 5 is outside the vocabulary"):
        token_logprobs(logits, torch.tensor([[0, 5]]))
    with pytest.raises(ValueError, match="token id -1"):
        token_logprobs(logits, torch.tensor([[0, -1]]))
    with pytest.raises(ValueError, match=r"must have shape \(1, 2\)"):
        token_logprobs(logits, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="integers"):
        token_logprobs(logits, torch.tensor([[0.0, 1.0]]))
    with pytest.raises(ConfigError, match="temperature"):
        token_logprobs(logits, torch.tensor([[0, 1]]), temperature=0)


# ---------------------------------------------------------------------------------- value loss
def test_value_loss_hand_computed_with_and_without_clipping() -> None:
    values = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    returns = torch.tensor([0.0, 2.0, 5.0])
    mask = torch.tensor([1.0, 1.0, 0.0])
    # 0.5 * mean((1 - 0)^2, (2 - 2)^2) = 0.5 * (1 + 0) / 2 = 0.25 (item 2 masked)
    approx(value_loss(values, returns, mask), 0.25)
    old = torch.tensor([0.5, 2.5, 3.0])
    loss = value_loss(values, returns, mask, old_values=old, clip_range=0.2)
    # item 0: clipped value 0.5 + 0.2 = 0.7 -> 0.49 vs 1 -> 1; item 1: 2.5 - 0.2 = 2.3 -> 0.09 vs 0 -> 0.09
    # 0.5 * (1 + 0.09) / 2 = 0.2725
    approx(loss, 0.2725)
    loss.backward()
    # item 0: d/dv 0.5 * (v - R)^2 / 2 = (1 - 0) / 2 = 0.5; item 1 takes the clipped branch (flat); item 2 masked
    close(values.grad, torch.tensor([0.5, 0.0, 0.0]))
    assert float(value_loss(values, returns, torch.zeros(3)).detach()) == 0.0


def test_value_loss_rejects_bad_input() -> None:
    values = torch.zeros(3)
    with pytest.raises(ConfigError, match="needs old_values"):
        value_loss(values, torch.zeros(3), torch.ones(3), clip_range=0.2)
    with pytest.raises(ValueError, match="returns must have shape"):
        value_loss(values, torch.zeros(2), torch.ones(3))
    with pytest.raises(ConfigError, match="clip_range"):
        value_loss(values, torch.zeros(3), torch.ones(3), old_values=values, clip_range=-1.0)


# ---------------------------------------------------------------------------------- combine
def test_combine() -> None:
    # 1 + 0.1 * 2 - 0.01 * 3 + 0.5 * 4 = 3.17
    total = combine(
        torch.tensor(1.0),
        kl=torch.tensor(2.0),
        kl_coef=0.1,
        entropy=torch.tensor(3.0),
        entropy_coef=0.01,
        value=torch.tensor(4.0),
        vf_coef=0.5,
    )
    approx(total, 3.17)
    approx(combine(torch.tensor(1.0), kl=None, kl_coef=0.0), 1.0)
    with pytest.raises(ConfigError, match="no kl term"):
        combine(torch.tensor(1.0), kl_coef=0.1)
