"""Next-token sampling for :class:`~envgym.agents.hf.HFAgent`, with counter-based noise.

Every random number a reply uses is a pure function of a counter: the row's key (a 63-bit mix
of agent seed, episode seed, group member and turn), the decoding step and a vocabulary index.
It is computed on the logits' device with 32-bit integer arithmetic held in ``int64`` tensors
(every product stays below 2**63, so there is no signed overflow anywhere), so

* a row's draws do not depend on the other rows of its batch, their order or the batch size;
* the same counter gives the same bits on every device: CPU and CUDA hash identically. The
  uniforms are then turned into Gumbel noise with ``log`` in float64, whose last bit may differ
  between devices; a draw can differ only when two candidates' scores tie to that precision;
* no Python loop runs over rows and nothing leaves the device.

The draw is the exponential race (Gumbel-max trick) restricted, without changing its law, to the
:data:`RACE_CANDIDATES` most likely tokens plus one competitor standing for all the others: the
maximum of ``log p_j + G_j`` over a set ``R`` is distributed as ``log p(R) + G`` for one Gumbel
``G``, and which ``j`` attains it is distributed as ``p_j / p(R)`` independently of its value. So
``R`` gets one noise draw; when it wins (rarely: its mass is what the most likely tokens leave),
the token is drawn inside ``R`` by a second race over its members, with noise from a separate
counter range. Noise for a few dozen candidates is cheap where a hash of the whole vocabulary
per row and step would cost more than the model's decoding step on a CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["RACE_CANDIDATES", "counter_bits", "row_step_keys", "sample_next_tokens"]

#: How many of a row's most likely tokens race with their own noise; the rest race as one.
RACE_CANDIDATES = 64

_M32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9  # 2**32 / golden ratio: spreads consecutive counters
_STEP = 0x85EBCA77


def _mul32(x: Any, c: int) -> Any:
    """``x * c mod 2**32`` for ``x`` in ``[0, 2**32)`` (an int64 tensor or a Python int) and a
    constant ``c < 2**32``, without any intermediate reaching 2**63."""
    if c < 1 << 31:
        return (x * c) & _M32
    return (x * (c - (1 << 31)) + ((x & 1) << 31)) & _M32


def _mix32(x: Any) -> Any:
    """A 32-bit integer finaliser (xorshift-multiply, the constants of Wellons' ``lowbias32``)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def _mul32_(x: Any, c: int) -> Any:
    """:func:`_mul32` in place on an int64 tensor (the same arithmetic, no new tensor for each op)."""
    if c < 1 << 31:
        return x.mul_(c).bitwise_and_(_M32)
    high = (x & 1).bitwise_left_shift_(31)
    return x.mul_(c - (1 << 31)).add_(high).bitwise_and_(_M32)


def _mix32_(x: Any) -> Any:
    """:func:`_mix32` in place on an int64 tensor."""
    x.bitwise_xor_(x >> 16)
    _mul32_(x, 0x7FEB352D)
    x.bitwise_xor_(x >> 15)
    _mul32_(x, 0x846CA68B)
    return x.bitwise_xor_(x >> 16)


def row_step_keys(keys: Any, step: int) -> tuple[Any, Any]:
    """Two 32-bit words per row for decoding step ``step``, from the rows' 63-bit ``keys``
    (int64 tensor or Python int)."""
    lo, hi = keys & _M32, (keys >> 32) & _M32
    a = _mix32(lo ^ _mix32(hi ^ _mul32(step & _M32, _STEP)))
    b = _mix32(hi ^ _mix32(a ^ 0x5BD1E995))
    return a, b


def counter_bits(keys: Any, step: int, ids: Any) -> Any:
    """32 random bits for each (row, ``ids`` entry) at decoding step ``step``.

    ``keys``: the rows' 63-bit keys (``[rows]`` int64); ``ids``: ``[rows, n]`` non-negative
    counters below 2**32 (vocabulary indices). Returns ``[rows, n]`` int64 in ``[0, 2**32)``.
    Also works on Python ints (the tests' reference)."""
    a, b = row_step_keys(keys, step)
    if isinstance(a, int):
        return _mix32(_mix32(a ^ _mix32(_mul32(ids & _M32, _GOLDEN) ^ 0x27D4EB2F)) ^ b)
    # The same arithmetic in place. The ids' own part is hashed once per distinct row: ids that
    # broadcast one row over all (a stride-0 ``expand``, as the rest's race passes) hash that row.
    shared = ids.dim() == 2 and ids.shape[0] > 1 and ids.stride(0) == 0
    per_id = _mix32_(_mul32_(ids[:1] & _M32 if shared else ids & _M32, _GOLDEN).bitwise_xor_(0x27D4EB2F))
    x = _mix32_(a.unsqueeze(-1) ^ per_id)
    return _mix32_(x.bitwise_xor_(b.unsqueeze(-1)))


def _gumbel(keys: Any, step: int, ids: Any) -> Any:
    """Standard Gumbel noise (float64) for each (row, id): ``-log(-log(u))``, ``u`` in (0, 1)."""
    u = (counter_bits(keys, step, ids).double() + 0.5) * 2.0**-32
    return -(-u.log()).log()


def sample_next_tokens(
    logits: Any,
    keys: Any,
    *,
    step: int = 0,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    allowed: Sequence[Sequence[int] | None] | None = None,
) -> tuple[Any, Any, Any]:
    """Pick one token per line of ``logits`` (``[batch, vocab]``), line ``i`` drawing with key ``keys[i]``.

    Temperature 0 is greedy (argmax; the keys are not used). Otherwise the logits are divided by
    ``temperature``, truncated to the ``top_k`` most likely tokens (0: no limit) and to the
    smallest most-likely-first set whose probability reaches ``top_p`` (the most likely token
    always stays), and a token is drawn by the exponential race (the Gumbel-max trick): token
    ``argmax_i(log p_i + G_i)`` with independent standard Gumbel ``G_i`` is distributed exactly as
    ``p``. Unlike inverting a cumulative sum over the vocabulary, whose ~50k boundaries each move
    with float rounding, the race only flips when the two best scores are within rounding of
    each other, so a line's draw hardly ever depends on the other lines of the batch. The noise
    is counter-based (see the module docstring): ``G_i`` is a function of ``(keys[line], step, i)``,
    so the same key and step give the same draw alone or in any batch, on any device.

    ``allowed`` (one entry per line, ``None`` for no restriction) restricts a line to those token
    ids before temperature and truncation: the draw (and argmax) is from the model distribution
    renormalised over them.

    Args:
        keys: ``[batch]`` int64 tensor of 63-bit keys (or a sequence of ints).
        step: the decoding step (token position in the reply), part of the counter.

    Returns:
        Tensors on the logits' device ``(tokens, model_logprobs, sampling_logprobs)``: the chosen
        ids; their log-probability under ``log_softmax(logits)`` (temperature 1, no truncation);
        and under the distribution they were drawn from (0.0 for greedy).
    """
    import torch

    logits = logits.float()
    device = logits.device
    model_lp_all = torch.log_softmax(logits, dim=-1)
    restricted = allowed is not None and any(ids is not None for ids in allowed)
    if restricted:
        assert allowed is not None
        lines = [line for line, ids in enumerate(allowed) if ids is not None]
        flat = [(line, token) for line in lines for token in allowed[line] or ()]
        keep = torch.ones_like(logits, dtype=torch.bool)
        keep[torch.tensor(lines, dtype=torch.long, device=device)] = False
        if flat:
            index = torch.tensor(flat, dtype=torch.long, device=device)
            keep[index[:, 0], index[:, 1]] = True
        logits = logits.masked_fill(~keep, float("-inf"))
    if temperature == 0:
        tokens = logits.argmax(dim=-1)
        sampling_lp = torch.zeros(logits.shape[0], dtype=torch.float32, device=device)
    else:
        if not isinstance(keys, torch.Tensor):
            keys = torch.tensor(list(keys), dtype=torch.long)
        keys = keys.to(device=device, dtype=torch.long)
        scaled = logits / temperature if temperature != 1 else logits
        vocab = scaled.shape[-1]
        truncate = (0 < top_k < vocab) or top_p < 1.0
        if truncate:
            ranked, order = torch.sort(scaled, dim=-1, descending=True, stable=True)
            drop = torch.zeros_like(ranked, dtype=torch.bool)
            if 0 < top_k < vocab:
                drop[:, top_k:] = True
            if top_p < 1.0:
                probs = torch.softmax(ranked.masked_fill(drop, float("-inf")), dim=-1)
                mass_before = probs.cumsum(dim=-1) - probs  # mass of the more likely tokens
                drop |= mass_before >= top_p
            drop[:, 0] = False  # the most likely token always stays
            scaled = scaled.masked_fill(torch.zeros_like(drop).scatter_(-1, order, drop), float("-inf"))
        plain = temperature == 1 and not truncate and not restricted
        log_probs = model_lp_all if plain else torch.log_softmax(scaled, dim=-1)
        tokens = _race(log_probs, keys, step)
        sampling_lp = log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    model_lp = model_lp_all.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return tokens, model_lp, sampling_lp


def _race(log_probs: Any, keys: Any, step: int) -> Any:
    """The exponential race over each line of ``log_probs`` (``-inf``: excluded), its top
    :data:`RACE_CANDIDATES` tokens racing one by one and the rest as one competitor."""
    import torch

    rows, vocab = log_probs.shape
    if vocab <= RACE_CANDIDATES + 1:
        ids = torch.arange(vocab, device=log_probs.device).expand(rows, vocab)
        return (log_probs.double() + _gumbel(keys, step, ids)).argmax(dim=-1)
    top_lp, top_ids = log_probs.topk(RACE_CANDIDATES, dim=-1, sorted=False)
    # The rest's mass: all minus the candidates', summed in float64. Its error (~1e-7, the float32
    # rounding of the probabilities themselves) is the precision p is known to anyway.
    total = log_probs.exp().sum(dim=-1, keepdim=True).double()
    rest = (total - top_lp.double().exp().sum(dim=-1, keepdim=True)).clamp_min(0.0)
    rest_mass = rest.log()  # -inf when nothing is left
    rest_id = torch.full_like(top_ids[:, :1], vocab)  # the counter of the rest's one draw
    scores = torch.cat([top_lp.double(), rest_mass], dim=-1)
    scores = scores + _gumbel(keys, step, torch.cat([top_ids, rest_id], dim=-1))
    best = scores.argmax(dim=-1, keepdim=True)
    tokens = torch.cat([top_ids, rest_id], dim=-1).gather(-1, best).squeeze(-1)
    lines = (best.squeeze(-1) == RACE_CANDIDATES).nonzero().squeeze(-1)
    if lines.numel():  # the rest won: which of its tokens, by a race among them (ids vocab+1...)
        ids = torch.arange(vocab + 1, 2 * vocab + 1, device=log_probs.device).expand(lines.numel(), vocab)
        rest_lp = log_probs[lines].scatter(-1, top_ids[lines], float("-inf"))
        inner = rest_lp.double() + _gumbel(keys[lines], step, ids)
        tokens[lines] = inner.argmax(dim=-1)
    return tokens
