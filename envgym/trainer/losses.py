"""Losses of policy optimisation on token tensors: PPO-clip, KL penalties, entropy, value loss.

Token tensors are ``[B, L]`` (B sequences of L positions) with a mask of the same shape that is 1
on the agent's tokens (the ones that carry loss) and 0 on prompt and padding positions. Masked
positions never reach the result and get exactly zero gradient, even when they hold garbage
(padding log-probs of 0, or huge values): they are selected away with ``torch.where`` before any
exponential, so an overflow there cannot turn into ``0 * inf = nan``.

The training loop combines the terms as::

    loss = policy + kl_coef * kl + vf_coef * value - entropy_coef * entropy      (see combine)
"""

from __future__ import annotations

import math
from typing import Any

from envgym.errors import ConfigError, MissingDependencyError, suggest

try:
    import torch
except ImportError as err:  # pragma: no cover - torch ships with the llm extra
    raise MissingDependencyError("torch", "llm", "envgym.trainer.losses") from err

__all__ = [
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "aggregate",
    "combine",
    "entropy_from_logits",
    "kl_penalty",
    "policy_loss",
    "token_logprobs",
    "value_loss",
]

#: Modes of :func:`aggregate`. ``token-sum-norm`` is another name of ``seq-mean-token-sum-norm``.
AGGREGATIONS: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "token-sum-norm",
)
#: Estimators of :func:`kl_penalty`.
KL_ESTIMATORS: tuple[str, ...] = ("k1", "k2", "k3")

#: Log-ratios are clamped to +-LOG_RATIO_LIMIT before ``exp`` (e**20 ~ 5e8): a finite stand-in for
#: a ratio that is astronomically off, so one broken token cannot make the loss inf or nan.
LOG_RATIO_LIMIT = 20.0


# ---------------------------------------------------------------------------------- helpers
def _mask_like(mask: Any, values: torch.Tensor, name: str = "mask") -> torch.Tensor:
    """``mask`` as a float tensor of ``values``' shape, dtype and device."""
    m = torch.as_tensor(mask, device=values.device)
    if m.shape != values.shape:
        raise ValueError(f"{name} must have the shape of the token tensor {tuple(values.shape)}, got {tuple(m.shape)}.")
    return m.to(values.dtype if values.is_floating_point() else torch.float32)


def _same_shape(reference: torch.Tensor, other: Any, name: str) -> torch.Tensor:
    t = torch.as_tensor(other, device=reference.device)
    if t.shape != reference.shape:
        raise ValueError(f"{name} must have shape {tuple(reference.shape)} (like logprobs), got {tuple(t.shape)}.")
    return t.to(reference.dtype)


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``sum(values * mask) / sum(mask)``, or 0 when the mask is all zeros (never nan)."""
    count = mask.sum()
    total = torch.where(mask > 0, values, torch.zeros_like(values)).mul(mask).sum()
    return total / torch.where(count > 0, count, torch.ones_like(count))


def _choice(name: str, value: Any, options: tuple[str, ...]) -> str:
    if isinstance(value, str) and value in options:
        return value
    raise ConfigError(
        f"{name} must be one of {', '.join(map(repr, options))}, got {value!r}.{suggest(str(value), options)}"
    )


def _check_number(name: str, value: Any, *, minimum: float = 0.0, below: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum:
        raise ConfigError(f"{name} must be a number >= {minimum:g}, got {value!r}.")
    if below is not None and not value < below:
        raise ConfigError(f"{name} must be below {below:g}, got {value!r}.")
    return float(value)


# ---------------------------------------------------------------------------------- aggregation
def aggregate(
    values: torch.Tensor, mask: Any, mode: str = "token-mean", *, max_tokens: int | None = None
) -> torch.Tensor:
    """Reduce per-token ``values[B, L]`` to a scalar over the masked-in tokens.

    With ``m`` the mask, ``n_b = sum_l m_bl`` the valid tokens of sequence ``b``::

        token-mean               sum_bl v_bl m_bl / sum_bl m_bl
        seq-mean-token-mean      1/B sum_b (sum_l v_bl m_bl / n_b)
        seq-mean-token-sum       1/B sum_b  sum_l v_bl m_bl
        seq-mean-token-sum-norm  1/B sum_b  sum_l v_bl m_bl / max_tokens        (Dr. GRPO)
        token-sum-norm           the same as seq-mean-token-sum-norm

    ``token-mean`` weighs every token alike (long replies weigh more); ``seq-mean-*`` weigh every
    sequence alike; Dr. GRPO divides by a constant so that no length bias enters the gradient.

    A sequence without valid tokens contributes 0 and still counts in ``B`` (the denominators are
    the batch size, so micro-batch losses add up with weights ``B_micro / B``); a batch without
    valid tokens gives 0. Never nan.

    Args:
        values: ``[B, L]`` per-token values.
        mask: ``[B, L]`` 1 (or True) on tokens that count.
        mode: one of :data:`AGGREGATIONS`.
        max_tokens: the constant of the ``*-norm`` modes (e.g. the generation's max_new_tokens);
            required there, ignored otherwise.
    """
    _choice("mode", mode, AGGREGATIONS)
    if not isinstance(values, torch.Tensor) or values.dim() != 2:
        shape = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise ValueError(f"values must be a [B, L] tensor of per-token values, got {shape}.")
    m = _mask_like(mask, values)
    if mode == "token-mean":
        return _masked_mean(values, m)
    masked = torch.where(m > 0, values, torch.zeros_like(values)) * m
    sums = masked.sum(dim=-1)  # [B]
    batch = max(values.shape[0], 1)
    if mode == "seq-mean-token-mean":
        counts = m.sum(dim=-1)
        return (sums / torch.where(counts > 0, counts, torch.ones_like(counts))).sum() / batch
    if mode == "seq-mean-token-sum":
        return sums.sum() / batch
    if max_tokens is None or isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ConfigError(
            f"aggregation {mode!r} divides each sequence's token sum by a constant max_tokens (an integer >= 1, "
            f"usually the generation's max_new_tokens), got max_tokens={max_tokens!r}."
        )
    return sums.sum() / (batch * max_tokens)


# ---------------------------------------------------------------------------------- policy loss
def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: Any,
    advantages: Any,
    mask: Any,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    aggregation: str = "token-mean",
    max_tokens: int | None = None,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip surrogate with asymmetric clipping (DAPO's clip-higher), aggregated over tokens.

    Per token, with ``rho = exp(logprobs - old_logprobs)`` and advantage ``A``::

        loss = -min(rho * A, clip(rho, 1 - clip_low, 1 + clip_high) * A)
        loss = min(loss, -dual_clip * A)          where A < 0, when dual_clip is set (dual-clip PPO)

    A larger ``clip_high`` lets unlikely tokens with positive advantage grow more (fights entropy
    collapse). Where the clip is active (``rho > 1 + clip_high`` with ``A > 0``, or
    ``rho < 1 - clip_low`` with ``A < 0``) the token's gradient is 0.

    Args:
        logprobs: ``[B, L]`` log-probs of the sampled tokens under the current policy (with grad).
        old_logprobs: ``[B, L]`` log-probs under the policy that sampled them.
        advantages: ``[B, L]`` per token, or ``[B]`` per sequence (broadcast to its tokens).
        mask: ``[B, L]`` 1 on the agent's tokens.
        clip_low: ratios below ``1 - clip_low`` are clipped; in [0, 1).
        clip_high: ratios above ``1 + clip_high`` are clipped; >= 0.
        aggregation, max_tokens: how token losses become a scalar (:func:`aggregate`).
        dual_clip: the dual-clip constant ``c > 1`` bounding the loss of negative advantages, or None.

    Returns:
        ``(loss, stats)`` with stats over the valid tokens: ``clip_fraction`` (share of tokens
        where the clip is active), ``approx_kl`` (k3 estimate of KL(old || new):
        ``mean(rho - 1 - log rho)``), ``ratio_mean`` and ``ratio_max`` (1.0 when no token is valid).
    """
    clip_low = _check_number("clip_low", clip_low, below=1.0)
    clip_high = _check_number("clip_high", clip_high)
    if dual_clip is not None:
        dual_clip = _check_number("dual_clip", dual_clip, minimum=1.0)
    if not isinstance(logprobs, torch.Tensor) or logprobs.dim() != 2:
        shape = tuple(logprobs.shape) if isinstance(logprobs, torch.Tensor) else type(logprobs).__name__
        raise ValueError(f"logprobs must be a [B, L] tensor of token log-probs, got {shape}.")
    old = _same_shape(logprobs, old_logprobs, "old_logprobs").detach()
    m = _mask_like(mask, logprobs)
    adv = torch.as_tensor(advantages, device=logprobs.device).to(logprobs.dtype).detach()
    if adv.shape == logprobs.shape[:1]:
        adv = adv.unsqueeze(-1).expand_as(logprobs)
    elif adv.shape != logprobs.shape:
        raise ValueError(
            f"advantages must be per token {tuple(logprobs.shape)} or per sequence ({logprobs.shape[0]},), "
            f"got {tuple(adv.shape)}."
        )
    valid = m > 0
    zero = torch.zeros_like(logprobs)
    log_ratio = torch.where(valid, logprobs - old, zero).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    adv = torch.where(valid, adv, zero)
    ratio = torch.exp(log_ratio)
    unclipped = -ratio * adv
    clipped = -ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = torch.maximum(unclipped, clipped)
    if dual_clip is not None:
        per_token = torch.where(adv < 0, torch.minimum(per_token, -dual_clip * adv), per_token)
    loss = aggregate(per_token, m, aggregation, max_tokens=max_tokens)

    with torch.no_grad():
        n = m.sum()
        clip_active = ((ratio > 1.0 + clip_high) & (adv > 0)) | ((ratio < 1.0 - clip_low) & (adv < 0))
        if dual_clip is not None:
            clip_active |= (ratio > dual_clip) & (adv < 0)
        if float(n) > 0:
            stats = {
                "clip_fraction": float((clip_active & valid).to(m.dtype).mul(m).sum() / n),
                "approx_kl": float(_masked_mean(ratio - 1.0 - log_ratio, m)),
                "ratio_mean": float(_masked_mean(ratio, m)),
                "ratio_max": float(ratio[valid].max()),
            }
        else:
            stats = {"clip_fraction": 0.0, "approx_kl": 0.0, "ratio_mean": 1.0, "ratio_max": 1.0}
    return loss, stats


# ---------------------------------------------------------------------------------- KL
def kl_penalty(logprobs: torch.Tensor, ref_logprobs: Any, mask: Any = None, *, estimator: str = "k3") -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from tokens sampled by the policy.

    With ``d = ref_logprobs - logprobs`` (the log of ``pi_ref / pi`` at the sampled token)::

        k1 = -d                     unbiased, high variance, negative on some tokens
        k2 = d**2 / 2               biased (low bias near the reference), always >= 0
        k3 = exp(d) - d - 1         unbiased, low variance, always >= 0 (Schulman's estimator)

    ``d`` is clamped to +-:data:`LOG_RATIO_LIMIT` for k3 so that ``exp`` stays finite.

    Args:
        logprobs: ``[B, L]`` policy log-probs of the sampled tokens (with grad).
        ref_logprobs: ``[B, L]`` reference-model log-probs of the same tokens.
        mask: optional ``[B, L]``; masked-out positions are 0 (and get no gradient).
        estimator: ``"k1"``, ``"k2"`` or ``"k3"``.

    Returns:
        ``[B, L]`` per-token KL estimates; reduce them with :func:`aggregate`.
    """
    _choice("estimator", estimator, KL_ESTIMATORS)
    if not isinstance(logprobs, torch.Tensor):
        raise TypeError(f"logprobs must be a tensor of token log-probs, got {type(logprobs).__name__}.")
    ref = _same_shape(logprobs, ref_logprobs, "ref_logprobs").detach()
    zero = torch.zeros_like(logprobs)
    valid = None if mask is None else _mask_like(mask, logprobs) > 0
    d = ref - logprobs if valid is None else torch.where(valid, ref - logprobs, zero)
    if estimator == "k1":
        kl = -d
    elif estimator == "k2":
        kl = 0.5 * d * d
    else:
        d = d.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
        kl = torch.exp(d) - d - 1.0
    return kl if valid is None else torch.where(valid, kl, zero)


# ---------------------------------------------------------------------------------- from logits
#: Without autograd, logits are processed in row chunks of at most this many entries (16 MiB of
#: float32), so the working copies stay small whatever the batch size.
CHUNK_ELEMENTS = 1 << 22


def _vocab_logits(logits: Any) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor) or logits.dim() < 1 or not logits.is_floating_point():
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"logits must be a floating tensor [..., V] (vocabulary last), got {shape}.")
    return logits


def _compute_dtype(logits: torch.Tensor) -> torch.dtype:
    # half-precision logsumexp loses digits that matter for ratios near 1
    return torch.float32 if logits.dtype in (torch.float16, torch.bfloat16) else logits.dtype


def _needs_grad(logits: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and logits.requires_grad


def _row_chunks(rows: int, vocab: int) -> list[slice]:
    step = max(1, CHUNK_ELEMENTS // max(vocab, 1))
    return [slice(start, start + step) for start in range(0, rows, step)]


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the next-token distribution at every position.

    ::

        H = -sum_v p_v log p_v = logsumexp(z) - sum_v p_v z_v,    p = softmax(z)

    The second form never takes the log of a probability, so it is exact where probabilities
    underflow to 0; ``-inf`` logits (banned tokens) count as probability 0. Half-precision logits
    are computed in float32. Without a gradient (``torch.no_grad()`` or detached logits) the rows
    are processed in chunks of :data:`CHUNK_ELEMENTS` logits with in-place work buffers.

    Args:
        logits: ``[..., V]`` (typically ``[B, L, V]``).

    Returns:
        ``[...]`` entropies in nats, >= 0.
    """
    logits = _vocab_logits(logits)
    dtype = _compute_dtype(logits)
    lowest = torch.finfo(dtype).min
    if _needs_grad(logits):
        # a -inf logit would give p * z = 0 * -inf = nan; the most negative float gives p = 0 exactly
        z = logits.to(dtype).clamp(min=lowest)
        lse = torch.logsumexp(z, dim=-1, keepdim=True)
        p = torch.exp(z - lse)
        return (lse.squeeze(-1) - (p * z).sum(dim=-1)).clamp_min(0.0)
    vocab = logits.shape[-1]
    flat = logits.detach().reshape(-1, vocab)
    out = torch.empty(flat.shape[0], dtype=dtype, device=logits.device)
    for rows in _row_chunks(flat.shape[0], vocab):
        # with w = z - max(z) and s = sum(e^w):  H = log s - sum(e^w * w) / s
        w = flat[rows].to(dtype, copy=True).clamp_(min=lowest)
        w.sub_(w.amax(dim=-1, keepdim=True))
        e = torch.exp(w)
        total = e.sum(dim=-1)
        out[rows] = (total.log() - e.mul_(w).sum(dim=-1) / total).clamp_min_(0.0)
    return out.reshape(logits.shape[:-1])


def token_logprobs(logits: torch.Tensor, token_ids: Any, *, temperature: float = 1.0) -> torch.Tensor:
    """Log-probability of each given token under the logits, at temperature ``temperature``.

    ::

        log p(x) = z_x / T - logsumexp(z / T)

    Only the chosen logit is gathered and the normaliser is one ``logsumexp`` over the vocabulary,
    so no ``[..., V]`` log-softmax is materialised: with a gradient the only full-size temporary is
    logsumexp's own (plus ``z / T`` when ``T != 1`` and a float32 copy of half-precision logits);
    without one (``torch.no_grad()``, e.g. old and reference log-probs) rows are processed in
    chunks of :data:`CHUNK_ELEMENTS` logits in one in-place work buffer.

    Args:
        logits: ``[..., V]`` (typically ``[B, L, V]``).
        token_ids: ``[...]`` token ids (``logits.shape[:-1]``).
        temperature: the sampling temperature (> 0) the tokens were drawn with.

    Returns:
        ``[...]`` log-probs (float32 for half-precision logits).
    """
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ConfigError(f"temperature must be a number > 0, got {temperature!r}.")
    logits = _vocab_logits(logits)
    ids = torch.as_tensor(token_ids, device=logits.device)
    if ids.shape != logits.shape[:-1]:
        raise ValueError(
            f"token_ids must have shape {tuple(logits.shape[:-1])} (the logits without the vocabulary axis), "
            f"got {tuple(ids.shape)}."
        )
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise ValueError(f"token_ids must be integers, got dtype {ids.dtype}.")
    vocab = logits.shape[-1]
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise ValueError(f"token id {bad} is outside the vocabulary of the logits (size {vocab}).")
    ids = ids.long()
    dtype = _compute_dtype(logits)
    if _needs_grad(logits):
        z = logits.to(dtype)
        if temperature != 1.0:
            z = z / float(temperature)
        chosen = z.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
        return chosen - torch.logsumexp(z, dim=-1)
    flat, flat_ids = logits.detach().reshape(-1, vocab), ids.reshape(-1, 1)
    out = torch.empty(flat.shape[0], dtype=dtype, device=logits.device)
    for rows in _row_chunks(flat.shape[0], vocab):
        z = flat[rows].to(dtype, copy=True)
        if temperature != 1.0:
            z.div_(float(temperature))
        chosen = z.gather(-1, flat_ids[rows]).squeeze(-1)
        top = z.amax(dim=-1)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        out[rows] = chosen - top - z.sub_(top.unsqueeze(-1)).exp_().sum(dim=-1).log()
    return out.reshape(ids.shape)


# ---------------------------------------------------------------------------------- value loss
def value_loss(
    values: torch.Tensor,
    returns: Any,
    mask: Any,
    *,
    old_values: Any = None,
    clip_range: float | None = None,
) -> torch.Tensor:
    """Masked mean of the squared value error, optionally with PPO's value clipping.

    ::

        l       = 0.5 * (V - R)**2
        V_clip  = V_old + clip(V - V_old, -clip_range, clip_range)
        l_clip  = 0.5 * max((V - R)**2, (V_clip - R)**2)          (when clip_range is set)
        loss    = sum(l * m) / sum(m)                              (0 when the mask is empty)

    Args:
        values: current value predictions (any shape, e.g. ``[B]`` or ``[B, L]``).
        returns: value targets (same shape), e.g. from :func:`envgym.trainer.advantages.gae`.
        mask: 1 where the value counts (same shape).
        old_values: predictions before the update; required with ``clip_range``.
        clip_range: largest move of a value away from ``old_values`` that lowers the loss.
    """
    if not isinstance(values, torch.Tensor):
        raise TypeError(f"values must be a tensor of value predictions, got {type(values).__name__}.")
    target = _same_shape(values, returns, "returns").detach()
    m = _mask_like(mask, values)
    valid = m > 0
    zero = torch.zeros_like(values)
    error = torch.where(valid, values - target, zero)
    squared = error * error
    if clip_range is not None:
        clip_range = _check_number("clip_range", clip_range)
        if old_values is None:
            raise ConfigError("value clipping (clip_range) needs old_values, the predictions before the update.")
        old = _same_shape(values, old_values, "old_values").detach()
        moved = torch.where(valid, values - old, zero).clamp(-clip_range, clip_range)
        clipped_error = torch.where(valid, old + moved - target, zero)
        squared = torch.maximum(squared, clipped_error * clipped_error)
    return 0.5 * _masked_mean(squared, m)


# ---------------------------------------------------------------------------------- total
def combine(
    policy: torch.Tensor,
    *,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
    value: torch.Tensor | None = None,
    vf_coef: float = 0.0,
) -> torch.Tensor:
    """The total loss ``policy + kl_coef * kl + vf_coef * value - entropy_coef * entropy``.

    A term whose coefficient is 0 is left out (it may be None); a non-zero coefficient needs its term.
    """
    total = policy
    for name, term, coef, sign in (
        ("kl", kl, kl_coef, 1.0),
        ("entropy", entropy, entropy_coef, -1.0),
        ("value", value, vf_coef, 1.0),
    ):
        if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not math.isfinite(coef):
            raise ConfigError(f"{name}_coef must be a number, got {coef!r}.")
        if coef == 0:
            continue
        if term is None:
            raise ConfigError(f"{name}_coef is {coef!r} but no {name} term was given; pass {name}= or set it to 0.")
        total = total + sign * float(coef) * term
    return total
