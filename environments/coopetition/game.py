"""The coopetition engine: value creation, trust, payoffs and reward modes, free of any API.

A :class:`Game` holds one mixed-motive game's parameters and state and plays rounds of
simultaneous contributions; :mod:`.api` presents it as a Gymnasium joint-action env, a
PettingZoo Parallel env (and AEC through PettingZoo's converter) and :mod:`.text` as an LLM view.
Each of the 20 environments of Coopetition-Gym v1 (Pant & Yu) is a subclass in ``interdependence``
(TR-1), ``trust`` (TR-2), ``collective`` (TR-3) or ``reciprocity`` (TR-4) that sets its parameters
and overrides the hooks below, exactly as the reference does.

The formulas, with the reference's defaults (the reference is upstream's Gymnasium API at commit
d2dffd5103; ``tests/environments/coopetition/reference`` holds what it returns):

* value of one agent's contribution ``f(a) = theta * ln(1 + a)`` (or ``a ** beta``), synergy
  ``g(a) = (prod a_i) ** (1 / n)`` (0 when any ``a_i <= 1e-10``), surplus ``S = gamma * g``;
* private payoff ``pi_i = (e_i - a_i) + f(a_i) + alpha_i * S``;
* integrated utility ``U_i = pi_i + sum_j w_ij * pi_j`` with ``w_ij = min(T_ij, 1 - R_ij) * D_ij``
  when trust is on, else ``D_ij``;
* trust: the signal of agent ``j`` is ``s_j = tanh(kappa * (a_j - baseline_j))``; when
  ``s > 0``, ``T_ij += lambda_plus * s * max(0, min(1 - T_ij, (1 - R_ij) - T_ij))`` and
  ``R_ij -= delta_R * R_ij``; when ``s < 0``, ``T_ij += lambda_minus * s * T_ij * (1 + xi * D_ij)``
  and ``R_ij += mu_R * (-s) * (1 - R_ij)``; then ``T_ij`` is clipped to ``[0, 1 - R_ij(old)]`` and
  ``R_ij`` to ``[0, 1]`` (all pairs update from the old matrices at once);
* reward modes: ``private`` gives ``pi``, ``integrated`` gives ``U``, ``cooperative`` gives
  every agent ``mean(U)``; then ``/ max(e)`` when ``normalize``, ``* reward_scale``, then the
  TR-3 collective modifier and the TR-4 reciprocity modifier multiply each agent's reward.

One round (:meth:`Game.step`): clip the actions to ``[0, e_i]`` -> append them to the history ->
update trust -> rewards of the mode -> collective modifier -> reciprocity modifiers -> count the
step -> early termination (:meth:`Game.terminated`) and truncation (``step >= max_steps``).

Arithmetic follows the reference's dtypes (actions, endowments, ``D`` and rewards in float32;
trust in float64), so envgym's numbers match it to float32 rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any, ClassVar

import numpy as np
from envgym.environments.coopetition.pair import PairConstants, clip_pair, f32x2, play_pair, trust_step

from envgym.errors import ConfigError

__all__ = [
    "MECHANISMS",
    "REWARD_MODES",
    "Game",
    "ObservationConfig",
    "StepResult",
    "TrustParams",
    "ValueParams",
    "symmetric",
]

#: The reward modes, in order of how much agents care about each other.
REWARD_MODES: tuple[str, ...] = ("private", "integrated", "cooperative")
#: The four mechanism classes of Coopetition-Gym v1 (the technical report each comes from).
MECHANISMS: dict[str, str] = {
    "TR-1": "interdependence and complementarity",
    "TR-2": "trust and reputation",
    "TR-3": "collective action and loyalty",
    "TR-4": "sequential interaction and reciprocity",
}
EPSILON = 1e-10
#: numpy's float32 dtype (one object: ``dtype is _FLOAT32`` is the cheap test of ``dtype == np.float32``).
_FLOAT32 = np.dtype(np.float32)
_array = np.array  # bound once: the per-round code reads it without numpy's module lookup
#: Games with at most this many agents update trust pair by pair in Python floats (faster there).
SMALL_GAME = 4
#: What :func:`.pair.play_pair` computes in place of these methods: a subclass that overrides one
#: plays its two-agent rounds with the array code.
_PAIR_ARITHMETIC: tuple[str, ...] = (
    "clip",
    "private_payoffs",
    "utility_weights",
    "effective_trust",
    "integrated_utilities",
    "_mode_from_payoffs",
    "_scaled",
    "play",
    "_round",
    "mean_trust",  # legacy_info's two-agent branch reads the matrices itself
    "mean_reputation_damage",
)


@dataclass(frozen=True, kw_only=True)
class ValueParams:
    """How contributions create value (TR-1).

    Attributes:
        specification: ``"logarithmic"`` (``theta * ln(1 + a)``) or ``"power"`` (``a ** beta``).
        theta: scale of the logarithmic value.
        beta: exponent of the power value, in (0, 1].
        gamma: weight of the synergistic surplus, in [0, 1].
    """

    specification: str = "logarithmic"
    theta: float = 20.0
    beta: float = 0.75
    gamma: float = 0.65

    def __post_init__(self) -> None:
        if self.specification not in ("logarithmic", "power"):
            raise ConfigError(f"value specification must be 'logarithmic' or 'power', got {self.specification!r}.")
        if not 0 < self.beta <= 1:
            raise ConfigError(f"beta must be in (0, 1], got {self.beta!r}.")
        if not self.theta > 0:
            raise ConfigError(f"theta must be positive, got {self.theta!r}.")
        if not 0 <= self.gamma <= 1:
            raise ConfigError(f"gamma must be in [0, 1], got {self.gamma!r}.")

    def individual(self, actions: np.ndarray) -> np.ndarray:
        """``f(a)`` per agent (float32 in, float32 out)."""
        if self.specification == "power":
            return np.power(np.maximum(actions, EPSILON), self.beta)
        return self.theta * np.log1p(np.maximum(actions, 0.0))

    def synergy(self, actions: np.ndarray) -> float:
        """The geometric mean of the contributions, 0 when any is ``<= 1e-10``."""
        if len(actions) == 0 or np.any(actions <= EPSILON):
            return 0.0
        return float(np.exp(np.sum(np.log(np.maximum(actions, EPSILON))) / len(actions)))

    def surplus(self, actions: np.ndarray) -> float:
        """``S = gamma * g(a)``."""
        return self.gamma * self.synergy(actions)

    def total(self, actions: np.ndarray) -> float:
        """Total value created: ``sum_i f(a_i) + gamma * g(a)``."""
        return float(np.sum(self.individual(actions)) + self.gamma * self.synergy(actions))


@dataclass(frozen=True, kw_only=True)
class TrustParams:
    """Trust and reputation dynamics (TR-2); see the module docstring for the update.

    Attributes:
        lambda_plus: trust building rate, in (0, 1].
        lambda_minus: trust erosion rate, in (0, 1] (negativity bias when above ``lambda_plus``).
        mu_R: reputation damage rate, in [0, 1].
        delta_R: reputation healing rate, in [0, 1].
        xi: how much interdependence amplifies erosion, >= 0.
        kappa: sensitivity of the signal ``tanh(kappa * (a - baseline))``, > 0.
        initial_trust: every off-diagonal ``T_ij`` at reset, in [0, 1].
        initial_reputation: every off-diagonal ``R_ij`` at reset, in [0, 1].
    """

    lambda_plus: float = 0.1
    lambda_minus: float = 0.3
    mu_R: float = 0.6
    delta_R: float = 0.03
    xi: float = 0.5
    kappa: float = 1.0
    initial_trust: float = 0.5
    initial_reputation: float = 0.0

    def __post_init__(self) -> None:
        checks = {
            "lambda_plus": 0 < self.lambda_plus <= 1,
            "lambda_minus": 0 < self.lambda_minus <= 1,
            "mu_R": 0 <= self.mu_R <= 1,
            "delta_R": 0 <= self.delta_R <= 1,
            "xi": self.xi >= 0,
            "kappa": self.kappa > 0,
            "initial_trust": 0 <= self.initial_trust <= 1,
            "initial_reputation": 0 <= self.initial_reputation <= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise ConfigError(f"trust parameter {name}={getattr(self, name)!r} is out of range (see TrustParams).")

    def initial(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The trust and reputation matrices at reset (diagonal 1 and 0)."""
        trust = np.full((n, n), self.initial_trust, dtype=np.float64)
        reputation = np.full((n, n), self.initial_reputation, dtype=np.float64)
        return _settle(trust, reputation)

    def signals(self, actions: np.ndarray, baselines: np.ndarray) -> np.ndarray:
        """``tanh(kappa * (a_j - baseline_j))`` per agent ``j`` (computed in float32, as the reference)."""
        return np.tanh(self.kappa * (actions - baselines)).astype(np.float64)

    def update(
        self,
        trust: np.ndarray,
        reputation: np.ndarray,
        actions: np.ndarray,
        baselines: np.ndarray,
        D: np.ndarray,
        amplification: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One round of trust and reputation updates from everyone's contribution (diagonals stay 1 and 0).

        ``amplification`` is ``1 + xi * D`` in float32 (computed from ``D`` when not given).
        """
        if amplification is None:
            amplification = (1 + self.xi * D).astype(np.float32)
        if len(trust) <= SMALL_GAME:
            return self._update_pairs(trust, reputation, actions, baselines, amplification)
        s = self.signals(actions, baselines)  # s[j]: the signal agent j sent, seen by every i
        ceiling = 1.0 - reputation
        # s == 0 changes no trust: the erosion branch then multiplies by s = 0.
        grow = (self.lambda_plus * s) * np.maximum(0.0, np.minimum(1.0 - trust, ceiling - trust))
        erode = (self.lambda_minus * s) * trust * amplification
        new_trust = np.minimum(np.maximum(trust + np.where(s > 0, grow, erode), 0.0), ceiling)
        heal = np.where(s < 0, (self.mu_R * -s) * ceiling, -self.delta_R * reputation)
        new_reputation = np.minimum(np.maximum(reputation + heal, 0.0), 1.0)
        diagonal = np.arange(len(trust))
        new_trust[diagonal, diagonal] = 1.0
        new_reputation[diagonal, diagonal] = 0.0
        return new_trust, new_reputation

    def _update_pairs(
        self,
        trust: np.ndarray,
        reputation: np.ndarray,
        actions: np.ndarray,
        baselines: np.ndarray,
        amplification: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`update` pair by pair in Python floats: the same IEEE float64 operations in the same
        order (so the same numbers), without numpy's per-call cost on tiny matrices."""
        signals = self.signals(actions, baselines).tolist()
        t, r, amp = trust.tolist(), reputation.tolist(), amplification.tolist()
        n = len(t)
        for i in range(n):
            t_row, r_row, amp_row = t[i], r[i], amp[i]
            for j in range(n):
                if i != j:
                    t_row[j], r_row[j] = trust_step(self, signals[j], t_row[j], r_row[j], amp_row[j])
        return np.array(t), np.array(r)


def _settle(trust: np.ndarray, reputation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    trust = np.clip(trust, 0.0, 1.0)
    reputation = np.clip(reputation, 0.0, 1.0)
    np.fill_diagonal(trust, 1.0)
    np.fill_diagonal(reputation, 0.0)
    return trust, reputation


def symmetric(n: int, strength: float) -> np.ndarray:
    """An ``n x n`` interdependence matrix with ``strength`` off the diagonal and 0 on it."""
    matrix = np.full((n, n), strength, dtype=np.float64)
    np.fill_diagonal(matrix, 0.0)
    return matrix


@dataclass(frozen=True, kw_only=True)
class ObservationConfig:
    """What each agent sees in the per-agent (PettingZoo) views: information asymmetry.

    The observation is the concatenation, in this order, of the parts switched on: own action,
    the others' actions, the trust matrix (whole) or else the own trust row and/or the others'
    trust toward the agent, the own reputation row, the others' public reputation (mean damage of
    each other agent's row), the own row of ``D``, and the step count over the horizon.

    Presets: :meth:`realistic_asymmetry` (the multi-agent default), :meth:`full_observability`,
    :meth:`minimal`.
    """

    own_actions_visible: bool = True
    others_actions_visible: bool = True
    own_trust_row_visible: bool = True
    others_trust_toward_self_visible: bool = False
    full_trust_matrix_visible: bool = False
    own_reputation_visible: bool = True
    public_reputation_visible: bool = True
    interdependence_visible: bool = True
    step_count_visible: bool = True

    PRESETS: ClassVar[tuple[str, ...]] = ("realistic_asymmetry", "full_observability", "minimal")

    @classmethod
    def realistic_asymmetry(cls) -> ObservationConfig:
        """Own trust row, not the others' trust toward oneself (the default)."""
        return cls()

    @classmethod
    def full_observability(cls) -> ObservationConfig:
        """The whole trust matrix."""
        return cls(full_trust_matrix_visible=True)

    @classmethod
    def minimal(cls) -> ObservationConfig:
        """Own action and own trust row only."""
        return cls(
            others_actions_visible=False,
            own_reputation_visible=False,
            public_reputation_visible=False,
            interdependence_visible=False,
            step_count_visible=False,
        )

    @classmethod
    def resolve(cls, value: Any) -> ObservationConfig:
        """A config from ``None`` (the default), a preset name, a mapping of fields, or a config."""
        if value is None:
            return cls()
        if isinstance(value, ObservationConfig):
            return value
        if isinstance(value, str):
            if value not in cls.PRESETS:
                raise ConfigError(f"obs_config: unknown preset {value!r}; presets: {', '.join(cls.PRESETS)}.")
            return getattr(cls, value)()
        if isinstance(value, dict):
            known = {f for f in cls.__dataclass_fields__ if f != "PRESETS"}
            unknown = sorted(set(value) - known)
            if unknown:
                raise ConfigError(f"obs_config: unknown fields {unknown}; fields: {', '.join(sorted(known))}.")
            if not all(isinstance(v, bool) for v in value.values()):
                raise ConfigError(f"obs_config: every field is a bool, got {value!r}.")
            return replace(cls(), **value)
        raise ConfigError(
            f"obs_config: expected None, a preset name ({', '.join(cls.PRESETS)}), a dict of fields or an "
            f"ObservationConfig, got {value!r}."
        )


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one round gave.

    Attributes:
        rewards: each agent's reward in the game's reward mode (float32).
        payoffs: each agent's reward had the mode been ``private`` (same normalisation, scale and
            modifiers): the part of ``rewards`` that is the agent's own payoff.
        terminated: the game ended early (its own rule: trust collapse, exit, ...).
        truncated: the horizon was reached.
        info: the reference's ``info`` for this round (numbers and lists).
    """

    rewards: np.ndarray
    payoffs: np.ndarray
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)


class Game:
    """One coopetition game: parameters, state, and a round of simultaneous contributions.

    Subclasses set the class attributes, pass their parameters to ``__init__`` and override the
    hooks the reference overrides: :meth:`reset`, :meth:`step` (calling ``super()``),
    :meth:`collective_modifier`, :meth:`reciprocity_modifier`, :meth:`terminated`,
    :meth:`legacy_info` and :meth:`legacy_observation`.

    Args:
        n_agents, max_steps, endowments, alpha, D, value, trust, baselines: the game (``alpha``
            defaults to equal shares, ``baselines`` to 30 % of the endowments, ``D`` to 0.5
            everywhere off the diagonal; ``trust=None`` switches trust off).
        reward_mode: ``private``, ``integrated`` or ``cooperative``.
        normalize: divide rewards by the largest endowment.
        reward_scale: multiply rewards by this.
    """

    #: The reference's environment name (``TrustDilemma``); the id is ``envgym/Coop-<name>-v0``.
    name: ClassVar[str] = ""
    #: ``TR-1`` .. ``TR-4`` (:data:`MECHANISMS`).
    mechanism: ClassVar[str] = ""
    #: One line for ``envgym list``.
    summary: ClassVar[str] = ""
    #: What agent ``i`` stands for, in words, for the text view (``None``: "player i").
    roles: ClassVar[Sequence[str] | None] = None
    #: What a contribution is, in words, for the text view.
    contribution: ClassVar[str] = "cooperation level"

    def __init__(
        self,
        *,
        n_agents: int,
        max_steps: int,
        endowments: Sequence[float],
        alpha: Sequence[float] | None = None,
        D: Any = None,
        value: ValueParams | None = None,
        trust: TrustParams | None = None,
        baselines: Sequence[float] | None = None,
        reward_mode: str = "integrated",
        normalize: bool = False,
        reward_scale: float = 1.0,
    ) -> None:
        if reward_mode not in REWARD_MODES:
            raise ConfigError(f"reward_mode must be one of {', '.join(REWARD_MODES)}, got {reward_mode!r}.")
        if not isinstance(normalize, bool):
            raise ConfigError(f"normalize must be a bool, got {normalize!r}.")
        if (
            isinstance(reward_scale, bool)
            or not isinstance(reward_scale, (int, float))
            or not math.isfinite(reward_scale)
        ):
            raise ConfigError(f"reward_scale must be a finite number, got {reward_scale!r}.")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ConfigError(f"max_steps must be a positive int, got {max_steps!r}.")
        self.n_agents = int(n_agents)
        self.max_steps = max_steps
        self.endowments = np.asarray(endowments, dtype=np.float64).astype(np.float32)
        n = self.n_agents
        alpha_ = np.full(n, 1.0 / n) if alpha is None else np.asarray(alpha, dtype=np.float64)
        if not np.isclose(alpha_.sum(), 1.0, rtol=1e-3):
            alpha_ = alpha_ / alpha_.sum()  # the reference renormalises bargaining shares
        self.alpha = alpha_.astype(np.float32)
        self.D = (symmetric(n, 0.5) if D is None else np.asarray(D, dtype=np.float64)).astype(np.float32)
        self.baselines = (
            self.endowments.astype(np.float64) * 0.3 if baselines is None else np.asarray(baselines, dtype=np.float64)
        ).astype(np.float32)
        if self.endowments.shape != (n,) or self.alpha.shape != (n,) or self.baselines.shape != (n,):
            raise ConfigError(f"{self.name}: endowments, alpha and baselines need one entry per agent ({n}).")
        if self.D.shape != (n, n):
            raise ConfigError(f"{self.name}: D must be {n} x {n}, got shape {self.D.shape}.")
        self._max_endowment = np.max(self.endowments)
        self._off_diagonal = ~np.eye(n, dtype=bool)
        self._others = [np.array([j for j in range(n) if j != i], dtype=np.intp) for i in range(n)]
        self._plans: dict[ObservationConfig, list[np.ndarray]] = {}
        # The two-agent observations: the last config asked for and its index pickers (:meth:`observe_all`).
        self._pickers: tuple[ObservationConfig | None, list[Callable[[list[float]], tuple[float, ...]]]] = (None, [])
        self.value = value or ValueParams()
        self.trust_params = trust
        self._amplification = None if trust is None else (1 + trust.xi * self.D).astype(np.float32)
        self._value_parts: tuple[np.ndarray, float] | None = None
        self.reward_mode = reward_mode
        self.normalize = normalize
        self.reward_scale = float(reward_scale)
        # Two agents play their rounds in Python floats (:mod:`.pair`, the same numbers) unless a
        # subclass changes the arithmetic that path replaces. The parameters are fixed from here on.
        cls = type(self)
        self._pair = n == 2 and all(getattr(cls, name) is getattr(Game, name) for name in _PAIR_ARITHMETIC)
        self._pair_constants = PairConstants.of(self) if self._pair else None
        #: float32 scratch of two numbers: the pair path's ``tanh`` runs in it (no array made per round)
        self._scratch2 = np.zeros(2, dtype=np.float32)
        self._has_collective = cls.collective_modifier is not Game.collective_modifier
        self._has_reciprocity = cls.reciprocity_modifier is not Game.reciprocity_modifier
        self.rng = np.random.default_rng(0)
        self.step_count = 0
        self.history: list[np.ndarray] = []
        self.actions = self.baselines.copy()
        self.trust, self.reputation = self._initial_trust()

    # ------------------------------------------------------------------ state
    def _initial_trust(self) -> tuple[np.ndarray, np.ndarray]:
        if self.trust_params is None:
            return np.ones((self.n_agents, self.n_agents)), np.zeros((self.n_agents, self.n_agents))
        return self.trust_params.initial(self.n_agents)

    def reset(self, seed: int | None) -> None:
        """Start a new episode; ``self.rng`` is ``np.random.default_rng(seed)`` (as the reference)."""
        self.rng = np.random.default_rng(seed)
        self.step_count = 0
        self.history = []
        self.actions = self.baselines.copy()
        self.trust, self.reputation = self._initial_trust()

    @property
    def trust_enabled(self) -> bool:
        return self.trust_params is not None

    def mean_trust(self) -> float:
        """Mean off-diagonal trust (1.0 with trust off or one agent)."""
        if self.n_agents == 2:
            return (self.trust.item(1) + self.trust.item(2)) / 2  # numpy's sum in row order, then / 2
        return _mean(self.trust[self._off_diagonal]) if self.n_agents > 1 else 1.0

    def mean_reputation_damage(self) -> float:
        """Mean off-diagonal reputation damage."""
        if self.n_agents == 2:
            return (self.reputation.item(1) + self.reputation.item(2)) / 2
        return _mean(self.reputation[self._off_diagonal]) if self.n_agents > 1 else 0.0

    def effective_trust(self) -> np.ndarray:
        """``min(T_ij, 1 - R_ij)``."""
        return np.minimum(self.trust, 1.0 - self.reputation)

    # ------------------------------------------------------------------ payoffs
    def private_payoffs(self, actions: np.ndarray) -> np.ndarray:
        """``pi_i`` per agent (float64 holding float32 values, as the reference)."""
        individual = self.value.individual(actions)
        synergy = self.value.synergy(actions)
        self._value_parts = (actions, float(np.add.reduce(individual) + self.value.gamma * synergy))
        payoffs = (self.endowments - actions) + individual + self.alpha * (self.value.gamma * synergy)
        return payoffs.astype(np.float64)

    def total_value(self) -> float:
        """Total value created by the current contributions: ``sum_i f(a_i) + gamma * g(a)``."""
        parts = self._value_parts  # (the actions, their total value) of the last payoffs computed
        if parts is None or parts[0] is not self.actions:
            return self.value.total(self.actions)
        return parts[1]

    def utility_weights(self) -> np.ndarray:
        """``w_ij``: ``min(T_ij, 1 - R_ij) * D_ij`` with trust on, else ``D_ij`` (float32, zero diagonal)."""
        if not self.trust_enabled:
            weights = self.D.copy()
        else:
            weights = self.effective_trust().astype(np.float32) * self.D
        np.fill_diagonal(weights, 0.0)
        return weights

    def integrated_utilities(self, actions: np.ndarray) -> np.ndarray:
        """``U_i = pi_i + sum_j w_ij pi_j``."""
        payoffs = self.private_payoffs(actions)
        return payoffs + self.utility_weights().astype(np.float64) @ payoffs

    def mode_rewards(self, actions: np.ndarray, mode: str) -> np.ndarray:
        """The rewards of ``mode`` before the TR-3/TR-4 modifiers (normalised and scaled)."""
        return self._scaled(self._mode_from_payoffs(self.private_payoffs(actions), mode))

    def _mode_from_payoffs(self, payoffs: np.ndarray, mode: str) -> np.ndarray:
        if mode == "private":
            return payoffs
        utilities = payoffs + self.utility_weights().astype(np.float64) @ payoffs
        if mode == "cooperative":
            return np.full_like(utilities, np.sum(utilities) / self.n_agents)
        return utilities

    def _scaled(self, rewards: np.ndarray) -> np.ndarray:
        if self.normalize:
            rewards = rewards / self._max_endowment
        return (rewards * self.reward_scale).astype(np.float32)

    # ------------------------------------------------------------------ hooks
    def collective_modifier(self, actions: np.ndarray) -> np.ndarray:
        """TR-3 hook: a reward multiplier per agent (called once per round; may update state)."""
        return np.ones(self.n_agents, dtype=np.float32)

    def reciprocity_modifier(self, agent: int) -> float:
        """TR-4 hook: agent ``agent``'s reward multiplier this round."""
        return 1.0

    def _pair_factors(self) -> tuple[Any, Any]:
        """:meth:`reciprocity_modifier` of both agents of a two-agent game, in agent order."""
        return self.reciprocity_modifier(0), self.reciprocity_modifier(1)

    def terminated(self) -> bool:
        """The game's own early-termination rule (checked after each round)."""
        return False

    def termination_outcome(self) -> str:
        """How an early termination counts: ``"failure"`` (collapse, exit; the default) or ``"success"``."""
        return "failure"

    def clip(self, actions: np.ndarray) -> np.ndarray:
        """Contributions clipped to ``[0, e_i]`` (float32)."""
        if self._pair:
            c = self._pair_constants
            clipped = clip_pair(actions, c.e0, c.e1)
            if clipped is not None:
                return np.array(clipped, dtype=np.float32)
        return np.clip(np.asarray(actions, dtype=np.float32), 0.0, self.endowments)

    def play(self, actions: np.ndarray) -> StepResult:
        """The reference's round (``process_actions``): clip, history, trust, rewards, modifiers, end."""
        return StepResult(*self._round(actions))

    def _round(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool, bool]:
        """:meth:`play`'s rewards, payoffs, terminated and truncated (two agents: :func:`.pair.play_pair`)."""
        played = play_pair(self, actions) if self._pair else None
        if played is not None:
            self.step_count += 1
            return played[0], played[1], bool(self.terminated()), self.step_count >= self.max_steps
        actions = self.clip(actions)
        self.history.append(actions.copy())
        self.actions = actions
        if self.trust_params is not None:
            self.trust, self.reputation = self.trust_params.update(
                self.trust, self.reputation, actions, self.baselines, self.D, self._amplification
            )
        private = self.private_payoffs(actions)
        payoffs = self._scaled(private)
        rewards = (
            payoffs.copy()
            if self.reward_mode == "private"
            else self._scaled(self._mode_from_payoffs(private, self.reward_mode))
        )
        collective = np.asarray(self.collective_modifier(actions), dtype=np.float32)
        rewards = rewards * collective
        payoffs = payoffs * collective
        for i in range(self.n_agents):
            factor = self.reciprocity_modifier(i)
            rewards[i] *= factor
            payoffs[i] *= factor
        self.step_count += 1
        return rewards, payoffs, bool(self.terminated()), self.step_count >= self.max_steps

    def step(self, actions: np.ndarray) -> StepResult:
        """One round as the reference's Gymnasium ``step``: :meth:`play` plus ``info``.

        Subclasses that count or record per round override this, call ``super().step`` and add
        to the result's ``info``, as the reference's environments do.
        """
        rewards, payoffs, terminated, truncated = self._round(actions)
        info = self.legacy_info()
        info["actions"] = self.actions.copy()
        return StepResult(rewards, payoffs, terminated, truncated, info)

    def legacy_info(self) -> dict[str, Any]:
        """The reference's ``info`` (its ``_get_legacy_info``)."""
        actions = self.actions
        if self._pair and actions.dtype is _FLOAT32:  # numpy's float32 means, in Python floats
            a0, a1 = actions.tolist()
            c = self._pair_constants
            x0, x1 = f32x2(a0 / c.e0, a1 / c.e1)
            actions_sum, rates_sum = f32x2(a0 + a1, x0 + x1)
            mean_cooperation, cooperation_rate = f32x2(actions_sum / 2, rates_sum / 2)
            (_, t01), (t10, _) = self.trust.tolist()  # mean_trust() and mean_reputation_damage(), inline
            (_, r01), (r10, _) = self.reputation.tolist()
            return {
                "step": self.step_count,
                "mean_trust": (t01 + t10) / 2,
                "mean_reputation_damage": (r01 + r10) / 2,
                "total_value": self.total_value(),
                "mean_cooperation": mean_cooperation,
                "cooperation_rate": cooperation_rate,
            }
        return {
            "step": self.step_count,
            "mean_trust": self.mean_trust(),
            "mean_reputation_damage": self.mean_reputation_damage(),
            "total_value": self.total_value(),
            "mean_cooperation": _mean(actions),
            "cooperation_rate": _mean(actions / self.endowments),
        }

    def legacy_observation(self) -> np.ndarray:
        """The joint (Gymnasium) observation: actions, trust, reputation, ``D``, step count."""
        return np.concatenate(
            [
                self.actions,
                self.trust.ravel(),
                self.reputation.ravel(),
                self.D.ravel(),
                np.array([self.step_count], dtype=np.float32),
            ]
        ).astype(np.float32)

    def observe(self, agent: int, config: ObservationConfig) -> np.ndarray:
        """Agent ``agent``'s observation under ``config`` (the per-agent views)."""
        return self.observe_all(config)[agent]

    def observe_all(self, config: ObservationConfig) -> list[np.ndarray]:
        """Every agent's observation under ``config``, in agent order.

        The observation is the concatenation of the parts ``config`` switches on (see
        :class:`ObservationConfig`); every part is a slice of one state vector (actions, trust,
        reputation, ``D``, each agent's mean reputation damage, step over horizon), so each agent's
        observation is one indexing of it.
        """
        if self._pair:  # the same state vector as a list of Python floats (float32 when made an array)
            if config is not self._pickers[0]:
                self._pickers = (config, [_picker(idx.tolist()) for idx in self._plan_of(config)])
            (r0, r1), (r2, r3) = self.reputation.tolist()
            (t0, t1), (t2, t3) = self.trust.tolist()
            (d0, d1), (d2, d3) = self.D.tolist()
            a0, a1 = self.actions.tolist()
            state = [a0, a1, t0, t1, t2, t3, r0, r1, r2, r3, d0, d1, d2, d3, (r0 + r1) / 2, (r2 + r3) / 2]
            state.append(self.step_count / self.max_steps)
            pick0, pick1 = self._pickers[1]
            return [_array(pick0(state), _FLOAT32), _array(pick1(state), _FLOAT32)]
        n = self.n_agents
        plan = self._plan_of(config)
        state = np.concatenate(
            [
                self.actions,
                self.trust.ravel(),
                self.reputation.ravel(),
                self.D.ravel(),
                np.add.reduce(self.reputation, axis=1) / n,
                [self.step_count / self.max_steps],
            ]
        )
        return [state[idx].astype(np.float32) for idx in plan]

    def _plan_of(self, config: ObservationConfig) -> list[np.ndarray]:
        plan = self._plans.get(config)
        if plan is None:
            plan = self._plans[config] = self._plan(config)
        return plan

    def _plan(self, config: ObservationConfig) -> list[np.ndarray]:
        n = self.n_agents
        square = n * n
        trust, reputation, d, public, step = n, n + square, n + 2 * square, n + 3 * square, n + 3 * square + n
        row = np.arange(n)
        plans = []
        for i in range(n):
            others = self._others[i]
            parts: list[np.ndarray] = []
            if config.own_actions_visible:
                parts.append(np.array([i]))
            if config.others_actions_visible:
                parts.append(others)
            if config.full_trust_matrix_visible:
                parts.append(trust + np.arange(square))
            else:
                if config.own_trust_row_visible:
                    parts.append(trust + i * n + row)
                if config.others_trust_toward_self_visible:
                    parts.append(trust + row * n + i)
            if config.own_reputation_visible:
                parts.append(reputation + i * n + row)
            if config.public_reputation_visible and n > 1:
                parts.append(public + others)  # each other agent's mean damage (its row, diagonal included)
            if config.interdependence_visible:
                parts.append(d + i * n + row)
            if config.step_count_visible:
                parts.append(np.array([step]))
            plans.append(np.concatenate(parts).astype(np.intp) if parts else np.arange(n))  # nothing: the actions
        return plans

    def describe(self) -> dict[str, Any]:
        """The game's parameters, JSON-serialisable (for the env card and ``info["task"]``)."""
        return {
            "name": self.name,
            "mechanism": self.mechanism,
            "n_agents": self.n_agents,
            "max_steps": self.max_steps,
            "endowments": self.endowments.tolist(),
            "baselines": self.baselines.tolist(),
            "reward_mode": self.reward_mode,
            "normalize": self.normalize,
            "reward_scale": self.reward_scale,
        }


def _picker(indices: list[int]) -> Callable[[list[float]], tuple[float, ...]]:
    """A function picking ``indices`` out of a list, always as a tuple (``itemgetter`` of one index is not)."""
    if len(indices) == 1:
        (only,) = indices
        return lambda values: (values[only],)
    return itemgetter(*indices)


def _mean(values: np.ndarray) -> float:
    """``float(np.mean(values))`` without its Python-level overhead (same pairwise sum, same division)."""
    return float(np.add.reduce(values) / values.size)
