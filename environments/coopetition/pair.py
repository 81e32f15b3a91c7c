"""The engine's round for two agents in Python floats: numpy's numbers, bit for bit, at a fraction of its cost.

NumPy spends close to a microsecond on each call with arrays of two, and the array code of a
round (:meth:`.game.Game.play`) makes some forty calls. :func:`play_pair` plays the round of a
two-agent game with Python floats instead and keeps every rounding of the array code:

* a float32 ``+``, ``-``, ``*`` or ``/`` of float32 values is the float64 operation rounded once to
  float32 (float64 carries more than twice float32's 24 bits, so rounding twice changes nothing):
  :func:`f32` of the float64 result;
* numpy casts a Python float operand of a float32 operation to float32 first (NEP 50), so
  ``k * x`` on a float32 ``x`` is ``f32(f32(k) * x)``, and comparisons against a Python float
  compare against its float32 value;
* numpy's float32 ``log1p``, ``log``, ``exp`` and ``tanh`` are its own (they differ from the
  float64 functions rounded to float32 in the last bit on a third of the inputs), so these stay
  numpy calls, one per function for both agents at once (numpy gives each element the same
  result whatever the array's length);
* numpy adds fewer than 8 float32 values left to right, as Python does; float64 sums and the
  trust update are Python's float64 already.

``tests/environments/coopetition/test_pair.py`` plays every game that has two agents through both
this path and the array code and compares every reward, observation and ``info`` number bit for
bit, in every reward mode.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from envgym.environments.coopetition.game import Game, TrustParams

__all__ = [
    "PairConstants",
    "clip_pair",
    "column_means32",
    "f32",
    "f32s",
    "f32x2",
    "play_pair",
    "tanh32x2",
    "trust_step",
]

_pack, _unpack = struct.Struct("f").pack, struct.Struct("f").unpack
_pack2, _unpack2 = struct.Struct("2f").pack, struct.Struct("2f").unpack
_pack4, _unpack4 = struct.Struct("4f").pack, struct.Struct("4f").unpack
_pack6, _unpack6 = struct.Struct("6f").pack, struct.Struct("6f").unpack
_pack7, _unpack7 = struct.Struct("7f").pack, struct.Struct("7f").unpack
# numpy's functions bound once: the round reads them without a module lookup each time
_array, _asarray, _float32, _FLOAT32 = np.array, np.asarray, np.float32, np.dtype(np.float32)
_tanh, _log, _log1p, _exp = np.tanh, np.log, np.log1p, np.exp
#: ``f32(1e-10)``: the float32 value numpy compares contributions with (``game.EPSILON``).
_EPSILON32 = _unpack(_pack(1e-10))[0]


def f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (ties to even, as numpy's casts), as a Python float;
    beyond float32's range, infinity (as numpy's cast; ``struct`` itself refuses)."""
    try:
        return _unpack(_pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def f32x2(x: float, y: float) -> tuple[float, float]:
    """:func:`f32` of two numbers at once (one agent's and the other's)."""
    try:
        return _unpack2(_pack2(x, y))
    except OverflowError:
        return f32(x), f32(y)


def f32s(values: Sequence[float]) -> tuple[float, ...]:
    """:func:`f32` of each number, all at once."""
    packer = _PACKERS.get(len(values))
    if packer is None:
        packer = _PACKERS[len(values)] = struct.Struct(f"{len(values)}f")
    try:
        return packer.unpack(packer.pack(*values))
    except OverflowError:
        return tuple(f32(v) for v in values)


_PACKERS: dict[int, struct.Struct] = {}


def column_means32(rows: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """``np.mean`` of each column of 1 to 7 rows of float32 values, as Python floats.

    numpy sums fewer than 8 float32 values left to right in float32, then divides in float32.
    """
    count = len(rows)
    if len(rows[0]) == 2:  # two agents: the same roundings, two at a time
        t0, t1 = rows[0]
        for v0, v1 in rows[1:]:
            t0, t1 = _unpack2(_pack2(t0 + v0, t1 + v1))
        return _unpack2(_pack2(t0 / count, t1 / count))
    totals = rows[0]
    for row in rows[1:]:
        totals = f32s([t + v for t, v in zip(totals, row, strict=True)])
    return f32s([t / count for t in totals])


def tanh32x2(scratch: np.ndarray, x: float, y: float) -> list[float]:
    """numpy's float32 ``tanh`` of ``x`` and ``y`` rounded to float32 (what ``np.tanh`` of their
    float32 array gives), computed in ``scratch`` (a float32 array of two, the game's own) so that
    no array is made per round; its elements round the numbers as numpy's cast does."""
    scratch[0], scratch[1] = x, y
    return _tanh(scratch, out=scratch).tolist()


def trust_step(params: TrustParams, s: float, t: float, r: float, amp: float) -> tuple[float, float]:
    """One ordered pair's trust and reputation after a round: the signal ``s`` the partner sent,
    trust ``t`` and damage ``r`` before it, ``amp = 1 + xi * D`` (float32); see :mod:`.game`.

    ``min(x, y)`` is written ``y if y < x else x`` and ``max(x, y)`` ``y if y > x else x``: what
    the builtins return (the first argument unless the second is strictly smaller or larger, so
    NaN and signed zeros come out the same), without their call.
    """
    ceiling = 1.0 - r
    if s > 0:
        room, headroom = 1.0 - t, ceiling - t
        room = headroom if headroom < room else room  # noqa: FURB136 (min(1 - t, ceiling - t))
        d_trust = (params.lambda_plus * s) * (room if room > 0.0 else 0.0)  # noqa: FURB136 (max(0.0, room))
    else:
        d_trust = (params.lambda_minus * s) * t * amp
    d_rep = (params.mu_R * -s) * ceiling if s < 0 else -params.delta_R * r
    trust, damage = t + d_trust, r + d_rep
    trust = 0.0 if 0.0 > trust else trust  # noqa: FURB136 (max(trust, 0.0))
    damage = 0.0 if 0.0 > damage else damage  # noqa: FURB136 (max(damage, 0.0))
    return (ceiling if ceiling < trust else trust), (1.0 if 1.0 < damage else damage)  # noqa: FURB136 (min)


class PairConstants(NamedTuple):
    """A two-agent game's fixed parameters as Python floats (float32 values where numpy keeps float32)."""

    e0: float
    e1: float
    alpha0: float
    alpha1: float
    D01: float
    D10: float
    amp01: float
    amp10: float
    max_endowment: float
    b0: float
    b1: float
    #: ``f32(kappa)`` of the trust signal: what numpy multiplies a float32 array by for a Python
    #: number ``kappa`` (NEP 50); ``None`` when ``kappa`` is a numpy number, which promotes.
    kappa32: float | None

    @classmethod
    def of(cls, game: Game) -> PairConstants:
        e0, e1 = game.endowments.tolist()
        a0, a1 = game.alpha.tolist()
        amp = game._amplification
        (_, amp01), (amp10, _) = ((0.0, 0.0), (0.0, 0.0)) if amp is None else amp.tolist()
        (_, d01), (d10, _) = game.D.tolist()
        b0, b1 = game.baselines.tolist()
        kappa = None if game.trust_params is None else game.trust_params.kappa
        kappa32 = f32(kappa) if type(kappa) in (float, int) else None
        return cls(e0, e1, a0, a1, d01, d10, amp01, amp10, float(game._max_endowment), b0, b1, kappa32)


def clip_pair(actions: Any, e0: float, e1: float) -> tuple[float, float] | None:
    """``np.clip(np.asarray(actions, float32), 0, e)`` as two floats; ``None`` for anything but two
    numbers without NaN (the array code then decides: it broadcasts, raises or keeps the NaN)."""
    if (
        actions.__class__ is list
        and len(actions) == 2
        and actions[0].__class__ is float
        and actions[1].__class__ is float
    ):
        x0, x1 = f32x2(*actions)  # two Python floats (the Parallel view's round): numpy's float32 cast
    else:
        raw = _asarray(actions, _FLOAT32)
        if raw.shape != (2,):
            return None
        x0, x1 = raw.tolist()
    if math.isnan(x0) or math.isnan(x1):
        return None
    # np.clip gives +0.0 for -0.0 and everything below 0, as these conditionals do.
    return (min(x0, e0) if x0 > 0.0 else 0.0), (min(x1, e1) if x1 > 0.0 else 0.0)


def play_pair(game: Game, actions: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """:meth:`.game.Game.play`'s round for a two-agent game up to its rewards and payoffs (before
    the step is counted), or ``None`` when ``actions`` need the array code (see :func:`clip_pair`)."""
    c: PairConstants = game._pair_constants
    clipped = clip_pair(actions, c.e0, c.e1)
    if clipped is None:
        return None
    a0, a1 = clipped
    acts = _array(clipped, _FLOAT32)
    params, value = game.trust_params, game.value
    # Every float32 rounding packs its numbers with ``struct`` (several at a time where they do not
    # depend on each other; native ``f`` rounds as numpy's cast, to infinity beyond float32's
    # range). Nothing is changed before the payoffs are known to be finite (see below).
    if params is not None:
        (t00, t01), (t10, t11) = game.trust.tolist()
        (r00, r01), (r10, r11) = game.reputation.tolist()
        kappa = c.kappa32
        if kappa is None:
            s0, s1 = np.tanh(params.kappa * (acts - game.baselines)).tolist()
        else:  # kappa * (a - b) in float32, then numpy's float32 tanh
            d0, d1 = _unpack2(_pack2(a0 - c.b0, a1 - c.b1))
            s0, s1 = tanh32x2(game._scratch2, kappa * d0, kappa * d1)
        t01, r01 = trust_step(params, s1, t01, r01, c.amp01)  # agent 0 sees agent 1's signal
        t10, r10 = trust_step(params, s0, t10, r10, c.amp10)
        # min(T_ij, 1 - R_ij) of the new matrices (Game.effective_trust), rounded below
        m01, m10 = 1.0 - r01, 1.0 - r10
        m01 = m01 if m01 < t01 else t01  # noqa: FURB136 (min(t01, 1 - r01), as the builtin)
        m10 = m10 if m10 < t10 else t10  # noqa: FURB136
    else:
        m01 = m10 = 0.0  # no trust: the weights are D itself (below)
    # pi_i = (e_i - a_i) + f(a_i) + alpha_i * gamma * g (Game.private_payoffs, in float32)
    if a0 <= _EPSILON32 or a1 <= _EPSILON32:
        synergy, theta = 0.0, _unpack(_pack(value.theta))[0]
    else:  # exp(sum(log a) / 2), each step in float32 (np.float32() rounds the halved sum)
        g0, g1 = _log(acts).tolist()
        theta, log_sum = _unpack2(_pack2(value.theta, g0 + g1))
        synergy = float(_exp(_float32(log_sum / 2)))
    if value.specification == "logarithmic":
        l0, l1 = _log1p(acts).tolist()  # acts >= +0.0: np.maximum(acts, 0.0) changes nothing
        i0, i1, q0, q1, m01, m10 = _unpack6(_pack6(theta * l0, theta * l1, c.e0 - a0, c.e1 - a1, m01, m10))
    else:
        i0, i1 = value.individual(acts).tolist()
        q0, q1, m01, m10 = _unpack4(_pack4(c.e0 - a0, c.e1 - a1, m01, m10))
    shared, individual = _unpack2(_pack2(value.gamma * synergy, i0 + i1))
    total, q0, q1, s0, s1, w01, w10 = _unpack7(
        _pack7(individual + shared, q0 + i0, q1 + i1, c.alpha0 * shared, c.alpha1 * shared, m01 * c.D01, m10 * c.D10)
    )
    p0, p1 = _unpack2(_pack2(q0 + s0, q1 + s1))
    if p0 + p1 - (p0 + p1) != 0.0:  # an infinite or NaN payoff: the array code's 0 * inf in w @ pi makes NaN
        return None
    game.history.append(acts.copy())
    game.actions = acts
    if params is not None:
        game.trust = _array(((t00, t01), (t10, t11)))
        game.reputation = _array(((r00, r01), (r10, r11)))
    else:
        w01, w10 = c.D01, c.D10
    game._value_parts = (acts, total)
    # Game._scaled: float64 division by the largest endowment, then the scale, then float32.
    scale, normalize = game.reward_scale, game.normalize
    m = c.max_endowment
    mode = game.reward_mode
    if mode == "private":
        u0, u1 = p0, p1
    else:  # w_ij = float32(min(T_ij, 1 - R_ij)) * D_ij with trust (Game.utility_weights), else D_ij
        u0, u1 = p0 + w01 * p1, p1 + w10 * p0  # the zero diagonal adds an exact 0 in the matrix product
        if mode == "cooperative":
            u0 = u1 = (u0 + u1) / 2
    if normalize:
        p0, p1, u0, u1 = p0 / m, p1 / m, u0 / m, u1 / m
    payoff = [p0 * scale, p1 * scale]
    reward = [u0 * scale, u1 * scale]
    if game._has_collective:
        collective = np.asarray(game.collective_modifier(acts), dtype=np.float32)
        payoffs = np.array(payoff, dtype=np.float32) * collective
        rewards = np.array(reward, dtype=np.float32) * collective
        payoff, reward = payoffs.tolist(), rewards.tolist()
    if game._has_reciprocity:
        factors = game._pair_factors()
        if factors[0].__class__ is float and factors[1].__class__ is float:  # both at once, as below
            f0, f1, p0, r0, p1, r1 = _unpack6(_pack6(*factors, payoff[0], reward[0], payoff[1], reward[1]))
            payoff[0], reward[0], payoff[1], reward[1] = _unpack4(_pack4(p0 * f0, r0 * f0, p1 * f1, r1 * f1))
            factors = ()
        for i, factor in enumerate(factors):
            if isinstance(factor, (float, int)):  # a Python number: cast to float32 first (NEP 50)
                factor = f32(factor)
                p, r = f32x2(payoff[i], reward[i])
                payoff[i], reward[i] = f32x2(p * factor, r * factor)
            else:  # a numpy number promotes as numpy does, then the array's float32 takes it
                payoff[i] = f32(np.float32(payoff[i]) * factor)
                reward[i] = f32(np.float32(reward[i]) * factor)
    return _array(reward, _FLOAT32), _array(payoff, _FLOAT32)
