"""TR-4, sequential interaction and reciprocity: ReciprocalDilemma, GiftExchange, IndirectReciprocity,
GraduatedSanction, AppleAppStore.

Every TR-4 game is a :class:`TR4Game`: the engine's game with TR-2 trust always on, plus a
reciprocity modifier on each agent's reward computed from what the partners did lately. For agent
``i`` and each partner ``j`` (TR-4 Eqs 19-23, 44):

* memory average ``abar_j``: the mean of ``a_j`` over a window of ``w = min(k, t - 1)`` rounds,
  ``t`` the number of rounds played including this one (0 when ``t <= 1``);
* cooperation signal ``s_ij = a_j - abar_j`` and bounded response ``phi(s) = tanh(kappa * s)``;
* reciprocity sensitivity ``rho_ij = rho_0 * D_ij ** eta``;
* effect ``lambda_R * T_ij * (1 + omega * D_ij) * rho_ij * phi(s_ij)`` (``T`` after this
  round's trust update), summed over ``j != i`` into ``U_recip_i``;
* reward multiplier ``max(0.01, 1 + U_recip_i / mean(e))``, applied after the reward mode.

What the reference's code does where TR-4's Eq 20 reads otherwise (envgym follows the code):
the round being played is already in the history when the average is taken, so the window is the
current round and the ``w - 1`` rounds before it, not rounds ``t - w .. t - 1``. In round 2 the
window is round 2 alone and every signal is 0 (multiplier 1); in round 1 the average is 0, so the
signal is the whole contribution and ``phi`` is about 1 for any contribution above a few units.
Signals and responses are computed in float32 (the contributions' dtype), the rest in float64.

Parameters and rules as the reference (Coopetition-Gym v1, upstream commit d2dffd5103).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np
from envgym.environments.coopetition.game import Game, TrustParams, ValueParams, symmetric
from envgym.environments.coopetition.pair import _pack2, _unpack2, column_means32, f32, f32s, tanh32x2

from envgym.errors import ConfigError

__all__ = [
    "AppleAppStore",
    "GiftExchange",
    "GraduatedSanction",
    "IndirectReciprocity",
    "PairReciprocity",
    "ReciprocalDilemma",
    "ReciprocityParams",
    "TR4Game",
    "bounded_response",
    "cooperation_signal",
    "memory_average",
    "reciprocity_multiplier",
    "reciprocity_sensitivity",
    "trust_gated_effect",
]

_FLOAT32 = np.dtype(np.float32)
_array, _tanh = np.array, np.tanh
_new_pair = tuple.__new__  # PairReciprocity(...) without its Python-level __new__
#: The multiplier's floor: a strongly negative ``U_recip`` shrinks a reward but never flips its sign.
MULTIPLIER_FLOOR = 0.01


@dataclass(frozen=True, kw_only=True)
class ReciprocityParams:
    """The TR-4 reciprocity parameters (the reference's ``TR4Parameters``, same defaults).

    Attributes:
        rho_0: base reciprocity strength (Eq 23), >= 0.
        eta: elasticity of reciprocity in the dependency ``D_ij`` (Eq 23), > 0.
        kappa: response sensitivity of ``tanh(kappa * s)`` (Eq 21), > 0.
        k: memory window length in rounds (Eq 20), a positive int.
        lambda_R: weight of reciprocity in the reward (Eq 44), >= 0.
        omega: how much dependency amplifies reciprocity (Eq 44), >= 0.
    """

    rho_0: float = 1.0
    eta: float = 1.0
    kappa: float = 1.0
    k: int = 5
    lambda_R: float = 1.0
    omega: float = 0.6

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"reciprocity memory window k must be a positive int, got {self.k!r}.")
        checks = {
            "rho_0": lambda v: v >= 0,
            "eta": lambda v: v > 0,
            "kappa": lambda v: v > 0,
            "lambda_R": lambda v: v >= 0,
            "omega": lambda v: v >= 0,
        }
        for name, ok in checks.items():
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or not ok(value)
            ):
                bound = "> 0" if name in ("eta", "kappa") else ">= 0"
                raise ConfigError(f"reciprocity parameter {name} must be a finite number {bound}, got {value!r}.")


# ---------------------------------------------------------------------- the equations
def memory_average(history: Sequence[np.ndarray], agent: int, k: int) -> float:
    """``abar_j`` (Eq 20) as the reference computes it: the mean of the last ``min(k, t - 1)`` entries.

    ``history`` holds every round played, the current one last (``t = len(history)``); 0 when
    ``t <= 1``. The window therefore ends at the current round (see the module docstring). The
    mean is numpy's float32 mean of the agent's float32 contributions, as the reference.
    """
    t = len(history)
    if t <= 1:
        return 0.0
    window = min(k, t - 1)
    return _memory_averages(history[-window:], [agent])[0]


def _memory_averages(window: Sequence[np.ndarray], agents: Sequence[int]) -> list[float]:
    """:func:`memory_average` of each agent in ``agents`` over the rows ``window`` (at least one)."""
    if len(window) < 8:  # numpy's float32 mean, in Python floats
        rows = []
        for row in window:
            if row.dtype is not _FLOAT32:
                break
            rows.append(row.tolist())
        else:
            return list(map(column_means32(rows).__getitem__, agents))
    return [float(np.mean(np.array([row[agent] for row in window], dtype=np.float32))) for agent in agents]


def cooperation_signal(action: Any, average: float) -> Any:
    """``s_ij = a_j - abar_j`` (Eq 19); a float32 contribution gives a float32 signal (as the reference)."""
    return action - average


def bounded_response(signal: Any, kappa: float) -> float:
    """``phi(s) = tanh(kappa * s)`` (Eq 21), in ``(-1, 1)``; in float32 when ``signal`` is float32."""
    return float(np.tanh(kappa * signal))


def reciprocity_sensitivity(rho_0: float, D_ij: float, eta: float) -> float:
    """``rho_ij = rho_0 * D_ij ** eta`` (Eq 23)."""
    return rho_0 * (D_ij**eta)


def trust_gated_effect(T_ij: float, rho_ij: float, phi: float, lambda_R: float, omega: float, D_ij: float) -> float:
    """One partner's term of Eq 44: ``lambda_R * T_ij * (1 + omega * D_ij) * rho_ij * phi`` (in this order)."""
    return lambda_R * T_ij * (1.0 + omega * D_ij) * rho_ij * phi


def reciprocity_multiplier(u_recip: float, scale: float) -> float:
    """The reward multiplier ``max(0.01, 1 + U_recip / scale)`` (``scale``: the mean endowment)."""
    return max(MULTIPLIER_FLOOR, 1.0 + u_recip / scale)


class PairReciprocity(NamedTuple):
    """Agent ``i``'s view of partner ``j`` this round."""

    memory_average: float
    signal: float
    effect: float


# ---------------------------------------------------------------------- the base game
class TR4Game(Game):
    """A TR-4 game: the engine's game with trust on and the reciprocity multiplier (module docstring).

    The reference's ``BaseTR4Env``. Subclasses pass their :class:`ReciprocityParams` (positionally)
    and the engine's parameters; trust defaults to the canonical TR-2 rates (:class:`TrustParams`'
    defaults) and value to ``20 ln(1 + a)`` with synergy weight 0.65, as the reference.

    ``info`` adds, per ordered pair ``"i->j"``: ``cooperation_signals`` (``s_ij``),
    ``reciprocity_effects`` (the pair's term of ``U_recip_i``), ``memory_averages`` (``abar_j``);
    and ``tr4_memory_window`` (``k``).
    """

    mechanism = "TR-4"

    def __init__(self, reciprocity: ReciprocityParams, /, **game: Any) -> None:
        game.setdefault("trust", TrustParams())
        game.setdefault("value", ValueParams(theta=20.0, gamma=0.65))
        super().__init__(**game)
        self.reciprocity = reciprocity
        self._scale = float(np.mean(self.endowments))  # the multiplier's divisor (endowments are fixed)
        n = self.n_agents
        self._keys = {(i, j): f"{i}->{j}" for i in range(n) for j in range(n) if i != j}
        self._pairs: tuple[tuple[Any, ...], dict[tuple[int, int], PairReciprocity]] | None = None
        # (parameters, D, what _fixed() computed from them)
        self._fixed_parts: tuple[Any, ...] = (None, None, 0.0, [])

    def _fixed(self) -> tuple[float, list[list[tuple[float, float]]]]:
        """What the round's reciprocity uses that changes only with the parameters or ``D``:
        ``f32(kappa)`` (what numpy multiplies float32 signals by, NEP 50) and per ordered pair
        ``(1 + omega * D_ij, rho_ij)``, the middle factors of :func:`trust_gated_effect`."""
        p, D = self.reciprocity, self.D
        cached = self._fixed_parts
        if cached[0] is p and cached[1] is D:
            return cached[2], cached[3]
        d, n = D.tolist(), self.n_agents
        gates = [
            [(1.0 + p.omega * d[i][j], reciprocity_sensitivity(p.rho_0, d[i][j], p.eta)) for j in range(n)]
            for i in range(n)
        ]
        self._fixed_parts = (p, D, f32(p.kappa), gates)
        return self._fixed_parts[2], gates

    def pair(self, i: int, j: int) -> PairReciprocity:
        """Memory average of ``j``, signal ``s_ij`` and effect on ``i`` this round (zeros before round 1)."""
        found = self.pairs().get((i, j))
        return found if found is not None else self._compute_pairs(diagonal=True)[i, j]  # i == j: never needed

    def pairs(self) -> dict[tuple[int, int], PairReciprocity]:
        """:meth:`pair` of every ``(i, j)`` with ``i != j``, computed once per round.

        Kept until the actions, trust or history (objects: a round assigns new ones; so do the
        tests that set a state) or the history's length change.
        """
        state = (self.actions, self.trust, self.history, len(self.history))
        if self._pairs is not None:
            (actions, trust, history, t), pairs = self._pairs
            if actions is state[0] and trust is state[1] and history is state[2] and t == state[3]:
                return pairs
        pairs = self._compute_pairs()
        self._pairs = (state, pairs)
        return pairs

    def _compute_pairs(self, *, diagonal: bool = False) -> dict[tuple[int, int], PairReciprocity]:
        n, p, history = self.n_agents, self.reciprocity, self.history
        t = len(history)
        if not t:
            zero = PairReciprocity(0.0, 0.0, 0.0)
            return {(i, j): zero for i in range(n) for j in range(n)}
        if t <= 1:
            averages = [0.0] * n
        elif n == 2:  # _memory_averages' float32 means, two at a time
            window = history[-min(p.k, t - 1) :]
            if len(window) < 8 and all(row.dtype is _FLOAT32 for row in window):
                first, *rest = window
                m0, m1 = first.tolist()
                if rest:
                    for row in rest:
                        v0, v1 = row.tolist()
                        m0, m1 = _unpack2(_pack2(m0 + v0, m1 + v1))
                    count = len(window)
                    m0, m1 = _unpack2(_pack2(m0 / count, m1 / count))
                averages = [m0, m1]
            else:
                averages = _memory_averages(window, range(n))
        else:
            averages = _memory_averages(history[-min(p.k, t - 1) :], range(n))
        kappa, gates = self._fixed()
        if self.actions.dtype is _FLOAT32 and n == 2:  # as below, two at a time
            (a0, a1), (m0, m1) = self.actions.tolist(), averages
            signals = s0, s1 = _unpack2(_pack2(a0 - m0, a1 - m1))
            phis = tanh32x2(self._scratch2, kappa * s0, kappa * s1)
        elif self.actions.dtype is _FLOAT32:  # float32 signals and responses, as numpy's scalars give them
            signals = f32s([a - m for a, m in zip(self.actions.tolist(), averages, strict=True)])
            phis = _tanh(_array([kappa * s for s in signals], _FLOAT32)).tolist()  # the array rounds
        else:
            raw = [cooperation_signal(self.actions[j], averages[j]) for j in range(n)]
            phis = [bounded_response(s, p.kappa) for s in raw]
            signals = [float(s) for s in raw]
        trust, weight = self.trust.tolist(), p.lambda_R
        if n == 2 and not diagonal:  # the loop below, unrolled
            (_, t01), (t10, _) = trust
            (_, (amplification01, rho01)), ((amplification10, rho10), _) = gates
            return {
                (0, 1): _new_pair(
                    PairReciprocity, (averages[1], signals[1], weight * t01 * amplification01 * rho01 * phis[1])
                ),
                (1, 0): _new_pair(
                    PairReciprocity, (averages[0], signals[0], weight * t10 * amplification10 * rho10 * phis[0])
                ),
            }
        pairs = {}
        for i in range(n):
            trust_row, gate_row = trust[i], gates[i]
            for j in range(n):
                if i == j and not diagonal:
                    continue
                amplification, rho = gate_row[j]
                # trust_gated_effect, its product in the same order: lambda_R * T_ij * (1 + omega D_ij) * rho_ij * phi
                effect = weight * trust_row[j] * amplification * rho * phis[j]
                pairs[i, j] = _new_pair(PairReciprocity, (averages[j], signals[j], effect))
        return pairs

    def reciprocity_modifier(self, agent: int) -> float:
        if not self.history:
            return 1.0
        pairs = self.pairs()
        u_recip = 0.0
        for j in range(self.n_agents):
            if j != agent:
                u_recip += pairs[agent, j].effect
        multiplier = 1.0 + u_recip / self._scale  # reciprocity_multiplier, its max() written out
        return multiplier if multiplier > MULTIPLIER_FLOOR else MULTIPLIER_FLOOR  # noqa: FURB136 (no call)

    def _pair_factors(self) -> tuple[Any, Any]:
        """:meth:`reciprocity_modifier` of both agents of a two-agent game (``.pair.play_pair``)."""
        if type(self).reciprocity_modifier is not TR4Game.reciprocity_modifier or not self.history:
            return self.reciprocity_modifier(0), self.reciprocity_modifier(1)
        pairs = self.pairs()
        scale = self._scale
        m0 = 1.0 + (0.0 + pairs[0, 1].effect) / scale  # reciprocity_modifier's sum from 0.0, then the multiplier
        m1 = 1.0 + (0.0 + pairs[1, 0].effect) / scale
        return (m0 if m0 > MULTIPLIER_FLOOR else MULTIPLIER_FLOOR), (m1 if m1 > MULTIPLIER_FLOOR else MULTIPLIER_FLOOR)  # noqa: FURB136

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        if self.n_agents == 2:  # the loop below, unrolled
            pairs = self.pairs()
            m01, s01, e01 = pairs[0, 1]
            m10, s10, e10 = pairs[1, 0]
            info["cooperation_signals"] = {"0->1": s01, "1->0": s10}
            info["reciprocity_effects"] = {"0->1": e01, "1->0": e10}
            info["memory_averages"] = {"0->1": m01, "1->0": m10}
            info["tr4_memory_window"] = self.reciprocity.k
            return info
        signals: dict[str, float] = {}
        effects: dict[str, float] = {}
        averages: dict[str, float] = {}
        pairs = self.pairs()
        for pair, key in self._keys.items():
            averages[key], signals[key], effects[key] = pairs[pair]
        info["cooperation_signals"] = signals
        info["reciprocity_effects"] = effects
        info["memory_averages"] = averages
        info["tr4_memory_window"] = self.reciprocity.k
        return info

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "reciprocity": asdict(self.reciprocity)}


# ---------------------------------------------------------------------- the games
class ReciprocalDilemma(TR4Game):
    """Continuous iterated prisoner's dilemma between two firms, with fast behavioural reciprocity.

    Two symmetric firms choose how much to put into a shared project each round (0-100, baseline
    30), ``D = 0.5`` both ways, value ``20 ln(1 + a)`` with synergy weight 0.65; TR-2 trust at the
    canonical rates (build 0.10, erode 0.30, reputation damage 0.60, healing 0.03, amplification
    0.5, sensitivity 1.0, initial trust 0.5). Each reward is multiplied by the TR-4 reciprocity
    multiplier (``envgym.environments.coopetition.reciprocity``) with ``rho_0 = 1.0``, ``eta = 1.0``,
    ``kappa = 1.0``, memory window ``k = 5``, ``lambda_R = 1.0``, ``omega = 0.6``: contributing
    above one's recent average rewards the partner, dropping below it penalises them.

    Horizon ``max_steps`` (default 100); no early termination. ``info`` adds, per ordered pair
    ``"i->j"``, ``cooperation_signals``, ``reciprocity_effects`` and ``memory_averages``, and
    ``tr4_memory_window``.
    """

    name = "ReciprocalDilemma"
    summary = "Dyadic dilemma with reciprocity over 5 rounds"
    roles = ("firm A", "firm B")
    contribution = "cooperation level in the shared project (0-100; baseline 30)"

    def __init__(self, *, max_steps: int = 100, **common: Any) -> None:
        super().__init__(
            ReciprocityParams(rho_0=1.0, eta=1.0, kappa=1.0, k=5, lambda_R=1.0, omega=0.6),
            n_agents=2,
            max_steps=max_steps,
            endowments=[100.0, 100.0],
            D=symmetric(2, 0.5),
            baselines=[30.0, 30.0],
            **common,
        )


class GiftExchange(TR4Game):
    """Employer-worker gift exchange: generous wages are repaid with effort, asymmetrically.

    Agent 0 is the employer (endowment 100, baseline 30: wage-cooperation), agent 1 the worker
    (endowment 80, baseline 24: effort-cooperation). The worker depends more on the employer
    (``D[1, 0] = 0.7``) than the employer on the worker (``D[0, 1] = 0.4``), so the worker's
    reciprocity sensitivity ``rho = 1.2 * 0.7 ** 1.5 = 0.703`` exceeds the employer's
    ``1.2 * 0.4 ** 1.5 = 0.304``. Value ``20 ln(1 + a)`` with synergy weight 0.65, equal shares;
    canonical TR-2 trust (initial 0.5). Reciprocity: ``rho_0 = 1.2``, ``eta = 1.5``,
    ``kappa = 1.0``, memory window ``k = 3``, ``lambda_R = 1.2``, ``omega = 0.8``; the multiplier
    divides by the mean endowment, 90.

    Horizon ``max_steps`` (default 100); no early termination. ``info`` adds, per ordered pair
    ``"i->j"``, ``cooperation_signals``, ``reciprocity_effects`` and ``memory_averages``, and
    ``tr4_memory_window``.
    """

    name = "GiftExchange"
    summary = "Employer-worker gift exchange"
    roles = ("employer", "worker")
    contribution = "cooperation level (employer: wage, 0-100, baseline 30; worker: effort, 0-80, baseline 24)"

    def __init__(self, *, max_steps: int = 100, **common: Any) -> None:
        super().__init__(
            ReciprocityParams(rho_0=1.2, eta=1.5, kappa=1.0, k=3, lambda_R=1.2, omega=0.8),
            n_agents=2,
            max_steps=max_steps,
            endowments=[100.0, 80.0],
            D=[[0.0, 0.4], [0.7, 0.0]],
            baselines=[30.0, 24.0],
            **common,
        )


class IndirectReciprocity(TR4Game):
    """Four agents whose cooperation is seen by all: reputation-mediated (indirect) reciprocity.

    Four agents, endowment 100 each, baseline 30, ``D = 0.4`` between every pair, value
    ``20 ln(1 + a)`` with synergy weight 0.65 over the geometric mean of all four contributions,
    equal shares; canonical TR-2 trust (initial 0.5). Every agent's multiplier sums the signals
    of all three others, so one agent's drop below its recent average is felt by the whole
    group, and a long memory keeps it in the average for a while. Reciprocity: ``rho_0 = 0.8``, ``eta = 1.0``, ``kappa = 1.0``, a
    long memory window ``k = 7``, ``lambda_R = 1.5``, ``omega = 0.5``.

    Horizon ``max_steps`` (default 150); no early termination. ``info`` adds, per ordered pair
    ``"i->j"``, ``cooperation_signals``, ``reciprocity_effects`` and ``memory_averages``, and
    ``tr4_memory_window``.
    """

    name = "IndirectReciprocity"
    summary = "Reciprocity through reputation among 4"
    contribution = "cooperation level (0-100; baseline 30)"

    def __init__(self, *, max_steps: int = 150, **common: Any) -> None:
        super().__init__(
            ReciprocityParams(rho_0=0.8, eta=1.0, kappa=1.0, k=7, lambda_R=1.5, omega=0.5),
            n_agents=4,
            max_steps=max_steps,
            endowments=[100.0] * 4,
            D=symmetric(4, 0.4),
            baselines=[30.0] * 4,
            **common,
        )


class GraduatedSanction(TR4Game):
    """Six-member common-pool resource with graduated, memory-based sanctions (Ostrom).

    Six agents, endowment 100 each, baseline 40, ``D = 0.35`` between every pair, value
    ``20 ln(1 + a)`` with synergy weight 0.65, equal shares; canonical TR-2 trust (initial 0.5).
    The response is graduated by a gentle slope (``kappa = 0.8``) and a long memory window
    (``k = 10``); each agent's multiplier sums the signals of its five partners, so a free
    rider's drop lowers all five partners' multipliers at once. Reciprocity:
    ``rho_0 = 0.6``, ``eta = 1.5``, ``kappa = 0.8``, ``k = 10``, ``lambda_R = 1.8``,
    ``omega = 1.0``.

    Horizon ``max_steps`` (default 200); no early termination. ``info`` adds, per ordered pair
    ``"i->j"``, ``cooperation_signals``, ``reciprocity_effects`` and ``memory_averages``, and
    ``tr4_memory_window``.
    """

    name = "GraduatedSanction"
    summary = "Community with graduated sanctions among 6"
    contribution = "contribution to the common resource (0-100; baseline 40)"

    def __init__(self, *, max_steps: int = 200, **common: Any) -> None:
        super().__init__(
            ReciprocityParams(rho_0=0.6, eta=1.5, kappa=0.8, k=10, lambda_R=1.8, omega=1.0),
            n_agents=6,
            max_steps=max_steps,
            endowments=[100.0] * 6,
            D=symmetric(6, 0.35),
            baselines=[40.0] * 6,
            **common,
        )


class AppleAppStore(TR4Game):
    """Apple iOS App Store case study (2008-2024, TR-4 section 8): a platform and two kinds of developers.

    Agent 0 is Apple (endowment 100, baseline 30), agent 1 the major developers (80, 24), agent 2
    the small developers (60, 18); one round per quarter, 66 quarters. Dependencies are
    asymmetric: ``D = [[0, 0.3, 0.2], [0.8, 0, 0.15], [0.85, 0.1, 0]]`` (row ``i`` depends on
    column ``j``), so developers respond strongly to Apple (``rho = 0.8 ** 1.2 = 0.765`` and
    ``0.85 ** 1.2 = 0.823``) and Apple weakly to them (``0.3 ** 1.2 = 0.236``,
    ``0.2 ** 1.2 = 0.145``). Value ``20 ln(1 + a)`` with synergy weight 0.65, equal shares;
    TR-2 trust at the canonical rates but starting at 0.6. Reciprocity: ``rho_0 = 1.0``,
    ``eta = 1.2``, ``kappa = 0.8``, memory window ``k = 4``, ``lambda_R = 1.0``, ``omega = 0.8``;
    the multiplier divides by the mean endowment, 80. The historical phases (symbiosis,
    maturation, tension, crisis, adjustment) are a reading of the quarters, not rules of the game.

    Horizon ``max_steps`` (default 66); no early termination. ``info`` adds, per ordered pair
    ``"i->j"``, ``cooperation_signals``, ``reciprocity_effects`` and ``memory_averages``, and
    ``tr4_memory_window``.
    """

    name = "AppleAppStore"
    summary = "Apple, developers and users: App Store case study"
    roles = ("Apple", "major developers", "small developers")
    contribution = "cooperation level (Apple 0-100, major developers 0-80, small developers 0-60)"

    def __init__(self, *, max_steps: int = 66, **common: Any) -> None:
        super().__init__(
            ReciprocityParams(rho_0=1.0, eta=1.2, kappa=0.8, k=4, lambda_R=1.0, omega=0.8),
            n_agents=3,
            max_steps=max_steps,
            endowments=[100.0, 80.0, 60.0],
            D=[[0.0, 0.3, 0.2], [0.8, 0.0, 0.15], [0.85, 0.1, 0.0]],
            trust=TrustParams(initial_trust=0.6),
            baselines=[30.0, 24.0, 18.0],
            **common,
        )
