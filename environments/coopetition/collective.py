"""TR-3, collective action and loyalty: TeamProduction, LoyaltyTeam, CoalitionFormation, ApacheProject, PublicGoods.

Parameters and rules as the reference (Coopetition-Gym v1, upstream commit d2dffd5103). The TR-3
team-production model, as closed forms (plain functions below, for oracles and analysis):

* team output ``Q(a) = omega * (sum_i a_i) ** beta`` (:func:`team_production`);
* base team payoff ``pi_i = Q(a) / n - c * a_i`` (:func:`team_payoffs`);
* loyalty modifier ``L_i = theta_i * (phi_B * mean_{j != i} pi_j + phi_C * c * a_i)``
  (:func:`loyalty_modifiers`);
* free-riding Nash effort per agent ``a* = (omega * beta / (c * n ** (2 - beta))) ** (1 / (1 - beta))``,
  which is ``(omega * beta / (n * c)) ** (1 / (1 - beta))`` (the team's total Nash effort) shared
  by ``n``; with ``beta = 1`` the corner ``0`` if ``omega / n < c`` else ``a_max``
  (:func:`free_riding_equilibrium`);
* social optimum per agent ``(omega * beta / c) ** (1 / (1 - beta)) / n``, not capped at ``a_max``
  (the reference reports it uncapped); with ``beta = 1``: ``a_max`` if ``omega > c`` else ``0``
  (:func:`social_optimum_effort`);
* team cohesion ``C = sum_i d_i theta_i / sum_i d_i`` with ``d_i`` the row means of ``D``, 0.5
  when ``sum d_i < 1e-8`` (:func:`team_cohesion`).

As in the reference, these numbers are reported in ``info``; the reward of every TR-3 game is the
engine's coopetition reward (value ``20 ln(1 + a)``, synergy 0.65, trust, the reward mode) times
the round's collective-action multiplier (:meth:`TR3Game.collective_modifier`). So ``a*`` is the
Nash effort of the team-production model, not of the reward the agents receive.

Every TR-3 game shares (the reference's ``BaseTR3Env``): endowment ``a_max`` for each agent
(50 unless stated), baseline 40 % of it, ``D = 0.55`` everywhere off the diagonal, equal shares,
trust building 0.10, erosion 0.25, reputation damage 0.40, healing 0.02, amplification 0.5,
sensitivity 1.0, initial trust 0.5; and a loyalty score per agent, 0.5 at reset, that moves with
the cooperation rate ``r_i = a_i / e_i`` each round: ``+0.02 r_i`` (capped at 1) when
``r_i >= 0.5``, else ``-0.05 (0.5 - r_i)`` (floored at 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
from envgym.environments.coopetition.game import Game, TrustParams, ValueParams, symmetric

from envgym.errors import ConfigError, suggest

__all__ = [
    "APACHE_PHASES",
    "ApachePhase",
    "ApacheProject",
    "CoalitionFormation",
    "CollectiveActionParams",
    "LoyaltyTeam",
    "PublicGoods",
    "TR3Game",
    "TR3Params",
    "TeamProduction",
    "free_riding_equilibrium",
    "loyalty_modifiers",
    "social_optimum_effort",
    "team_cohesion",
    "team_payoffs",
    "team_production",
]


# ---------------------------------------------------------------------------- closed forms
def team_production(actions: Any, omega: float, beta: float) -> float:
    """``Q(a) = omega * (sum a) ** beta`` (in the actions' dtype: float32 actions give a float32 value)."""
    return float(omega * (np.sum(actions) ** beta))


def team_payoffs(actions: np.ndarray, omega: float, beta: float, c: float) -> np.ndarray:
    """``pi_i = Q(a) / n - c * a_i`` per agent (in the actions' dtype)."""
    n = len(actions)
    share = omega * (np.sum(actions) ** beta) / n
    return share - c * actions


def loyalty_modifiers(
    actions: np.ndarray, loyalty: np.ndarray, *, omega: float, beta: float, c: float, phi_B: float, phi_C: float
) -> np.ndarray:
    """``L_i = theta_i * (phi_B * mean_{j != i} pi_j + phi_C * c * a_i)`` per agent (0 teammates' mean when alone)."""
    n = len(actions)
    payoffs = team_payoffs(actions, omega, beta, c)
    teammates = (np.sum(payoffs) - payoffs) / (n - 1) if n > 1 else np.zeros_like(payoffs)
    return loyalty * (phi_B * teammates + phi_C * (c * actions))


def free_riding_equilibrium(n_agents: int, *, omega: float, beta: float, c: float, a_max: float) -> float:
    """The free-riding Nash effort per agent: ``(omega * beta / (c * n ** (2 - beta))) ** (1 / (1 - beta))``.

    Each agent maximising ``Q(a) / n - c a_i`` alone sets ``(omega beta / n) (sum a) ** (beta - 1) = c``:
    the team's total effort is ``(omega beta / (n c)) ** (1 / (1 - beta))``, ``1 / n`` of it each.
    With ``beta = 1`` there is no interior solution: ``0`` if ``omega / n < c``, else ``a_max``.
    """
    if abs(beta - 1.0) < 1e-9:
        return 0.0 if omega / n_agents < c else float(a_max)
    return float((omega * beta / (c * n_agents ** (2 - beta))) ** (1.0 / (1.0 - beta)))


def social_optimum_effort(n_agents: int, *, omega: float, beta: float, c: float, a_max: float) -> float:
    """The welfare-maximising effort per agent: ``(omega * beta / c) ** (1 / (1 - beta)) / n``.

    Maximising ``Q(a) - c sum a`` sets the total effort to ``(omega beta / c) ** (1 / (1 - beta))``,
    shared equally. As in the reference it is not capped at ``a_max`` (agents can give at most
    their endowment: take ``min(a_max, ...)`` for an action). With ``beta = 1``: ``a_max`` if
    ``omega > c``, else ``0``.
    """
    if abs(beta - 1.0) < 1e-9:
        return float(a_max) if omega > c else 0.0
    return float((omega * beta / c) ** (1.0 / (1.0 - beta)) / n_agents)


def team_cohesion(loyalty: np.ndarray, weights: np.ndarray) -> float:
    """``sum_i w_i theta_i / sum_i w_i``; 0.5 (neutral) when the weights sum below ``1e-8``."""
    total = np.sum(weights)
    if total < 1e-8:
        return 0.5
    return float(np.sum(weights * loyalty) / total)


# ---------------------------------------------------------------------------- parameters
def _number(
    owner: str,
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    what: str = "",
) -> float:
    """``value`` as a float inside the given bounds, or a ConfigError saying which bound failed."""
    about = f" ({what})" if what else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{owner}: {name}{about} must be a finite number, got {value!r}.")
    too_low = low is not None and (value <= low if low_open else value < low)
    if too_low or (high is not None and value > high):
        left = "(" if low_open else "["
        bounds = f"{left}{low if low is not None else '-inf'}, {high if high is not None else 'inf'}"
        bounds += "]" if high is not None else ")"
        raise ConfigError(f"{owner}: {name}{about} must be in {bounds}, got {value!r}.")
    return float(value)


def _integer(owner: str, name: str, value: Any, *, low: int, what: str = "") -> int:
    about = f" ({what})" if what else ""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ConfigError(f"{owner}: {name}{about} must be an int >= {low}, got {value!r}.")
    return int(value)


@dataclass(frozen=True, kw_only=True)
class TR3Params:
    """The team-production model of TR-3 (the reference's ``TR3Parameters``).

    Attributes:
        omega: productivity factor of ``Q(a) = omega * (sum a) ** beta``, > 0.
        beta: returns to scale, in (0, 1] (below 1: diminishing).
        c: effort cost coefficient, > 0.
        phi_B: loyalty benefit strength (weight of the teammates' mean payoff), >= 0.
        phi_C: cost tolerance strength (weight of the own effort cost), >= 0.
        a_max: the largest effort, every agent's endowment, > 0.
    """

    omega: float = 25.0
    beta: float = 0.7
    c: float = 1.0
    phi_B: float = 0.8
    phi_C: float = 0.3
    a_max: float = 50.0

    def __post_init__(self) -> None:
        owner = "TR-3 parameters"
        _number(owner, "omega", self.omega, low=0.0, low_open=True, what="productivity")
        _number(owner, "beta", self.beta, low=0.0, high=1.0, low_open=True, what="returns to scale")
        _number(owner, "c", self.c, low=0.0, low_open=True, what="effort cost")
        _number(owner, "phi_B", self.phi_B, low=0.0, what="loyalty benefit strength")
        _number(owner, "phi_C", self.phi_C, low=0.0, what="cost tolerance strength")
        _number(owner, "a_max", self.a_max, low=0.0, low_open=True, what="endowment")

    def nash_equilibrium(self, n_agents: int) -> float:
        """:func:`free_riding_equilibrium` for ``n_agents``."""
        return free_riding_equilibrium(n_agents, omega=self.omega, beta=self.beta, c=self.c, a_max=self.a_max)

    def social_optimum(self, n_agents: int) -> float:
        """:func:`social_optimum_effort` for ``n_agents``."""
        return social_optimum_effort(n_agents, omega=self.omega, beta=self.beta, c=self.c, a_max=self.a_max)


@dataclass(frozen=True, kw_only=True)
class CollectiveActionParams:
    """The collective-action reward multipliers of the TR-3 games (the reference's ``CollectiveActionModel``).

    Each round, with cooperation rates ``r_i = a_i / e_i`` and sustained cooperation ``l_i`` (the
    mean of ``r_i`` over the last ``loyalty_horizon`` rounds, this one included), agent ``i``'s
    reward is multiplied by ``free_rider_penalty`` when ``r_i < free_rider_threshold``, by
    ``1 + loyalty_bonus_rate * l_i`` when ``l_i >= loyalty_threshold``, and everyone's by
    ``1 + coordination_bonus`` when every ``r_i >= coordination_threshold``.

    Attributes are the values the reference's TR-3 games use.
    """

    free_rider_threshold: float = 0.3
    free_rider_penalty: float = 0.5
    loyalty_horizon: int = 10
    loyalty_bonus_rate: float = 0.15
    loyalty_threshold: float = 0.6
    coordination_bonus: float = 0.2
    coordination_threshold: float = 0.5

    def sustained_cooperation(self, history: Sequence[np.ndarray], endowments: np.ndarray) -> np.ndarray:
        """Mean cooperation rate per agent over the last ``loyalty_horizon`` rounds (0.5 with no history; float32)."""
        if not history:
            return np.full(len(endowments), 0.5, dtype=np.float32)
        recent = np.stack(history[-self.loyalty_horizon :], axis=1)  # (agents, rounds), rows contiguous
        return np.clip(np.mean(recent / endowments[:, np.newaxis], axis=1), 0.0, 1.0)

    def multipliers(self, actions: np.ndarray, endowments: np.ndarray, history: Sequence[np.ndarray]) -> np.ndarray:
        """Each agent's reward multiplier this round (float32)."""
        rates = actions / endowments
        result = np.ones(len(actions), dtype=np.float32)
        result[rates < self.free_rider_threshold] *= self.free_rider_penalty
        sustained = self.sustained_cooperation(history, endowments)
        loyal = sustained >= self.loyalty_threshold
        result[loyal] *= 1.0 + self.loyalty_bonus_rate * sustained[loyal]
        if np.all(rates >= self.coordination_threshold):
            result *= 1.0 + self.coordination_bonus
        return result


# ---------------------------------------------------------------------------- the shared base
class TR3Game(Game):
    """What the five TR-3 games share (the reference's ``BaseTR3Env``): see the module docstring.

    ``info`` adds ``team_output`` (``Q`` of this round's efforts), ``nash_equilibrium`` and
    ``social_optimum`` (per-agent efforts of the closed forms), ``mean_loyalty``,
    ``loyalty_scores``, ``team_cohesion``, ``free_rider_count`` and ``free_rider_indices``
    (agents below 30 % of their endowment) and ``efficiency_ratio`` (mean effort over the social
    optimum, 0 when that is 0).

    Subclasses call ``super().__init__(params, n_agents, max_steps, **common)`` (positional, so
    these do not count as the games' own keyword arguments).
    """

    mechanism = "TR-3"
    contribution = "effort (0-50; 25 or more builds loyalty, under 15 counts as free-riding)"
    #: The trust dynamics of every TR-3 game.
    TRUST: ClassVar[TrustParams] = TrustParams(
        lambda_plus=0.10, lambda_minus=0.25, mu_R=0.40, delta_R=0.02, xi=0.50, kappa=1.0, initial_trust=0.50
    )
    #: Loyalty gained per unit of cooperation rate when cooperating (rate >= 0.5).
    LOYALTY_GAIN: ClassVar[float] = 0.02
    #: Loyalty lost per unit of shortfall below a rate of 0.5.
    LOYALTY_LOSS: ClassVar[float] = 0.05

    def __init__(self, params: TR3Params, n_agents: int, max_steps: int, /, **common: Any) -> None:
        n = _integer(self.name, "n_agents", n_agents, low=2, what="team size")
        endowments = np.full(n, params.a_max, dtype=np.float32)
        super().__init__(
            n_agents=n,
            max_steps=max_steps,
            endowments=endowments,
            D=symmetric(n, 0.55),
            value=ValueParams(theta=20.0, gamma=0.65),
            trust=self.TRUST,
            baselines=endowments * 0.4,  # in float32, as the reference
            **common,
        )
        self.params = params
        self.collective = CollectiveActionParams()
        self.loyalty = self.initial_loyalty()

    def initial_loyalty(self) -> np.ndarray:
        """The loyalty scores at reset (float32)."""
        return np.full(self.n_agents, 0.5, dtype=np.float32)

    def reset(self, seed: Any) -> None:
        super().reset(seed)
        self.loyalty = self.initial_loyalty()

    # ------------------------------------------------------------------ dynamics
    def update_loyalty(self, actions: np.ndarray) -> None:
        """Move each loyalty score with this round's cooperation rate (float32, as the reference)."""
        rates = actions / self.endowments
        gained = np.minimum(1.0, self.loyalty + self.LOYALTY_GAIN * rates)
        lost = np.maximum(0.0, self.loyalty - self.LOYALTY_LOSS * (0.5 - rates))
        self.loyalty = np.where(rates >= 0.5, gained, lost).astype(np.float32)

    def collective_modifier(self, actions: np.ndarray) -> np.ndarray:
        """Update loyalty, then the collective-action multipliers (:class:`CollectiveActionParams`)."""
        self.update_loyalty(actions)
        return self.collective.multipliers(actions, self.endowments, self.history)

    # ------------------------------------------------------------------ numbers
    def nash_equilibrium(self) -> float:
        """The free-riding Nash effort per agent (:func:`free_riding_equilibrium`)."""
        return self.params.nash_equilibrium(self.n_agents)

    def social_optimum(self) -> float:
        """The socially optimal effort per agent (:func:`social_optimum_effort`; uncapped)."""
        return self.params.social_optimum(self.n_agents)

    def free_riders(self, threshold: float = 0.3) -> list[int]:
        """Agents whose current effort is below ``threshold`` of their endowment."""
        return np.flatnonzero(self.actions / self.endowments < threshold).tolist()

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        info["team_output"] = team_production(self.actions, self.params.omega, self.params.beta)
        info["nash_equilibrium"] = self.nash_equilibrium()
        info["social_optimum"] = self.social_optimum()
        info["mean_loyalty"] = float(np.mean(self.loyalty))
        info["loyalty_scores"] = self.loyalty.tolist()
        info["team_cohesion"] = team_cohesion(self.loyalty, np.mean(self.D, axis=1))
        free_riders = self.free_riders(0.3)
        info["free_rider_count"] = len(free_riders)
        info["free_rider_indices"] = free_riders
        optimum = info["social_optimum"]
        info["efficiency_ratio"] = float(np.mean(self.actions) / optimum) if optimum > 0 else 0.0
        return info

    def describe(self) -> dict[str, Any]:
        description = super().describe()
        p = self.params
        description.update(omega=p.omega, beta=p.beta, c=p.c, phi_B=p.phi_B, phi_C=p.phi_C, a_max=p.a_max)
        return description


# ---------------------------------------------------------------------------- the games
class TeamProduction(TR3Game):
    """Team production with free-riding incentives: the TR-3 baseline without loyalty rewards.

    ``n_agents`` team members (default 4), endowment 50 each, baseline 20, ``D = 0.55`` between
    all, value ``20 ln(1 + a)`` with synergy weight 0.65, TR-3 trust (building 0.10, erosion
    0.25). The only collective-action effect: an agent giving under 20 % of its endowment has its
    reward multiplied by 0.9; loyalty scores stay at 0.5. No early termination; 100 rounds.

    Parameters: ``n_agents=4``, ``omega=25.0`` (productivity), ``beta=0.7`` (returns to scale,
    in (0, 1]), ``c=1.0`` (effort cost), ``max_steps=100``. ``omega``, ``beta`` and ``c`` enter
    the team-production numbers of ``info`` only (as in the reference): the free-riding Nash
    effort ``a* = (omega beta / (c n^(2 - beta)))^(1 / (1 - beta))`` (34.24 at the defaults) and
    the social optimum ``(omega beta / c)^(1 / (1 - beta)) / n`` (3478.6, above the endowment).

    ``info`` adds ``team_output``, ``nash_equilibrium``, ``social_optimum``, ``mean_loyalty``,
    ``loyalty_scores``, ``team_cohesion``, ``free_rider_count``, ``free_rider_indices``,
    ``efficiency_ratio`` (see :class:`TR3Game`).
    """

    name = "TeamProduction"
    summary = "Team production with free-riding incentives"
    contribution = "effort (0-50; under 10 is penalised as severe free-riding)"
    #: Efforts under this fraction of the endowment are penalised.
    SEVERE_FREE_RIDING: ClassVar[float] = 0.2
    #: The reward multiplier of a severe free-rider.
    PENALTY: ClassVar[float] = 0.9

    def __init__(
        self,
        *,
        n_agents: int = 4,
        omega: float = 25.0,
        beta: float = 0.7,
        c: float = 1.0,
        max_steps: int = 100,
        **common: Any,
    ) -> None:
        params = TR3Params(omega=omega, beta=beta, c=c, phi_B=0.0, phi_C=0.0, a_max=50.0)
        super().__init__(params, n_agents, max_steps, **common)

    def collective_modifier(self, actions: np.ndarray) -> np.ndarray:
        """0.9 for agents under 20 % of their endowment, else 1 (no loyalty update, as the reference)."""
        result = np.ones(self.n_agents, dtype=np.float32)
        result[actions / self.endowments < self.SEVERE_FREE_RIDING] *= self.PENALTY
        return result


class LoyaltyTeam(TR3Game):
    """Team production with loyalty bonuses: sustained cooperation raises loyalty and rewards.

    ``n_agents`` team members (default 4), endowment 50, baseline 20, ``D = 0.55``, value
    ``20 ln(1 + a)`` with synergy weight 0.65, TR-3 trust. Each round loyalty moves with the
    cooperation rate ``r = a / 50`` (``+0.02 r`` when ``r >= 0.5``, else ``-0.05 (0.5 - r)``), and
    rewards are multiplied by 0.5 for a free-rider (``r < 0.3``), by ``1 + 0.15 l`` when the
    mean rate ``l`` over the last 10 rounds is at least 0.6, and by 1.2 for everyone when all
    give at least half their endowment. No early termination; 100 rounds.

    Parameters: ``n_agents=4``, ``omega=25.0``, ``beta=0.7`` (in (0, 1]), ``c=1.0``,
    ``phi_B=0.8`` (loyalty benefit strength), ``phi_C=0.3`` (cost tolerance strength),
    ``max_steps=100``. As in the reference, ``omega``, ``beta`` and ``c`` enter ``info`` only and
    ``phi_B``/``phi_C`` change no number the game reports (the loyalty modifier ``L_i`` is
    defined, :func:`loyalty_modifiers`, but not paid).

    ``info`` adds the TR-3 numbers (``team_output``, ``nash_equilibrium``, ``social_optimum``,
    ``mean_loyalty``, ``loyalty_scores``, ``team_cohesion``, ``free_rider_count``,
    ``free_rider_indices``, ``efficiency_ratio``) and ``loyalty_lift``: team output over the output
    at the Nash effort (1.0 before the first round or when that output is 0).
    """

    name = "LoyaltyTeam"
    summary = "Team production with loyalty bonuses"

    def __init__(
        self,
        *,
        n_agents: int = 4,
        omega: float = 25.0,
        beta: float = 0.7,
        c: float = 1.0,
        phi_B: float = 0.8,
        phi_C: float = 0.3,
        max_steps: int = 100,
        **common: Any,
    ) -> None:
        params = TR3Params(omega=omega, beta=beta, c=c, phi_B=phi_B, phi_C=phi_C, a_max=50.0)
        super().__init__(params, n_agents, max_steps, **common)

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        lift = 1.0
        if self.history:
            nash = np.full(self.n_agents, info["nash_equilibrium"])
            nash_output = self.params.omega * np.sum(nash) ** self.params.beta
            if nash_output > 0:
                lift = float(info["team_output"] / nash_output)
        info["loyalty_lift"] = lift
        return info


class CoalitionFormation(TR3Game):
    """Coalitions form and collapse: disloyal members are excluded and may rejoin after a cooldown.

    ``n_agents`` potential members (default 6), endowment 50, baseline 20, ``D = 0.55``, value
    ``20 ln(1 + a)`` with synergy 0.65, TR-3 trust, and the loyalty dynamics and reward
    multipliers of :class:`LoyaltyTeam`. After them, each round: every member (in coalition
    order) whose loyalty is below ``exit_threshold`` is excluded while the coalition is larger
    than ``min_coalition_size``, with a ``reentry_cooldown`` timer; then every excluded agent's
    timer counts down by one (also in the round it was excluded) and, once at 0 or below, it
    rejoins (at the end of the order) if its loyalty is at least 0.4. Excluded agents' rewards are
    multiplied by 0.5; while the coalition has at least ``min_coalition_size`` members, theirs by
    1.1. Ends early when the coalition is smaller than ``min_coalition_size`` (only possible when
    ``n_agents`` is: exclusions never shrink it below); 150 rounds.

    Parameters: ``n_agents=6``, ``min_coalition_size=3``, ``exit_threshold=0.15`` (in [0, 1]),
    ``reentry_cooldown=5``, ``omega=25.0``, ``beta=0.7`` (the last two in ``info`` only),
    ``max_steps=150``.

    ``info`` adds the TR-3 numbers (``team_output``, ``nash_equilibrium``, ``social_optimum``,
    ``mean_loyalty``, ``loyalty_scores``, ``team_cohesion``, ``free_rider_count``,
    ``free_rider_indices``, ``efficiency_ratio``), ``coalition_size``, ``coalition_members`` (in
    coalition order), ``excluded_agents`` and ``coalition_stability`` (size over ``n_agents``).
    """

    name = "CoalitionFormation"
    summary = "Coalitions form and collapse"
    #: Loyalty an excluded agent needs to rejoin once its cooldown is over.
    REENTRY_LOYALTY: ClassVar[float] = 0.4
    #: Reward multiplier of an excluded agent (working alone).
    EXCLUDED_FACTOR: ClassVar[float] = 0.5
    #: Reward multiplier of a member of a coalition of viable size.
    STABILITY_BONUS: ClassVar[float] = 1.1

    def __init__(
        self,
        *,
        n_agents: int = 6,
        min_coalition_size: int = 3,
        exit_threshold: float = 0.15,
        reentry_cooldown: int = 5,
        omega: float = 25.0,
        beta: float = 0.7,
        max_steps: int = 150,
        **common: Any,
    ) -> None:
        self.min_coalition_size = _integer(self.name, "min_coalition_size", min_coalition_size, low=1)
        self.exit_threshold = _number(self.name, "exit_threshold", exit_threshold, low=0.0, high=1.0, what="loyalty")
        self.reentry_cooldown = _integer(self.name, "reentry_cooldown", reentry_cooldown, low=0, what="rounds")
        params = TR3Params(omega=omega, beta=beta, c=1.0, phi_B=0.7, phi_C=0.3, a_max=50.0)
        super().__init__(params, n_agents, max_steps, **common)
        self.members: list[int] = list(range(self.n_agents))
        self.excluded: list[int] = []
        self.timers: dict[int, int] = {}

    def reset(self, seed: Any) -> None:
        super().reset(seed)
        self.members = list(range(self.n_agents))
        self.excluded = []
        self.timers = {}

    def update_coalition(self) -> None:
        """Exclusions, then cooldowns and re-entries (the reference's order; see the class docstring)."""
        for i in list(self.members):
            if self.loyalty[i] < self.exit_threshold and len(self.members) > self.min_coalition_size:
                self.members.remove(i)
                self.excluded.append(i)
                self.timers[i] = self.reentry_cooldown
        for i in list(self.excluded):
            if i not in self.timers:
                continue
            self.timers[i] -= 1
            if self.timers[i] <= 0 and self.loyalty[i] >= self.REENTRY_LOYALTY:
                self.excluded.remove(i)
                self.members.append(i)
                del self.timers[i]

    def collective_modifier(self, actions: np.ndarray) -> np.ndarray:
        result = super().collective_modifier(actions)
        self.update_coalition()
        result[self.excluded] *= self.EXCLUDED_FACTOR
        if len(self.members) >= self.min_coalition_size:
            result[self.members] *= self.STABILITY_BONUS
        return result

    def terminated(self) -> bool:
        return len(self.members) < self.min_coalition_size

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        info["coalition_size"] = len(self.members)
        info["coalition_members"] = list(self.members)
        info["excluded_agents"] = list(self.excluded)
        info["coalition_stability"] = len(self.members) / self.n_agents
        return info


class ApachePhase(NamedTuple):
    """One phase of the Apache HTTP Server project as the TR-3 case study calibrates it."""

    n_agents: int
    loyalty_multiplier: float
    omega: float
    expected_effort: float
    years: str


#: The four phases of the Apache case study (TR-3 validation).
APACHE_PHASES: dict[str, ApachePhase] = {
    "emergence": ApachePhase(8, 1.0, 20.0, 35.0, "1995-1999"),
    "growth": ApachePhase(15, 0.85, 25.0, 30.0, "2000-2005"),
    "maturity": ApachePhase(40, 0.70, 30.0, 22.0, "2006-2015"),
    "evolution": ApachePhase(35, 0.60, 28.0, 18.0, "2016-2023"),
}


class ApacheProject(TR3Game):
    """Apache HTTP Server open-source project case study: contributors in one phase of the project's life.

    The phase sets the team: ``emergence`` (1995-1999: 8 contributors, loyalty multiplier 1.0,
    ``omega`` 20, expected effort 35), ``growth`` (2000-2005: 15, 0.85, 25, 30), ``maturity``
    (2006-2015: 40, 0.70, 30, 22; the default) or ``evolution`` (2016-2023: 35, 0.60, 28, 18).
    Endowment 50, baseline 20, ``D = 0.55``, value ``20 ln(1 + a)`` with synergy 0.65, TR-3 trust,
    ``beta = 0.7``, and the loyalty dynamics and reward multipliers of :class:`LoyaltyTeam`, with
    loyalty starting at ``0.5 * multiplier`` and capped at the multiplier. No early termination;
    60 rounds (monthly).

    Parameters: ``phase="maturity"``, ``max_steps=60``.

    ``info`` adds the TR-3 numbers (``team_output``, ``nash_equilibrium``, ``social_optimum``,
    ``mean_loyalty``, ``loyalty_scores``, ``team_cohesion``, ``free_rider_count``,
    ``free_rider_indices``, ``efficiency_ratio``), ``phase``, ``phase_years``, ``phase_loyalty``
    (the multiplier), ``expected_effort``, ``effort_deviation`` (``|mean effort - expected| /
    expected``, 0 before the first round) and ``validation_accuracy`` (``max(0, 1 - deviation)``, 1
    before the first round).
    """

    name = "ApacheProject"
    summary = "Apache HTTP Server open-source project case study"
    contribution = "monthly effort (0-50)"

    def __init__(self, *, phase: str = "maturity", max_steps: int = 60, **common: Any) -> None:
        if not isinstance(phase, str) or phase not in APACHE_PHASES:
            raise ConfigError(
                f"ApacheProject: unknown phase {phase!r}.{suggest(str(phase), APACHE_PHASES)} "
                f"Phases: {', '.join(APACHE_PHASES)}."
            )
        self.phase = phase
        self.phase_config = APACHE_PHASES[phase]
        params = TR3Params(omega=self.phase_config.omega, beta=0.70, c=1.0, phi_B=0.75, phi_C=0.25, a_max=50.0)
        super().__init__(params, self.phase_config.n_agents, max_steps, **common)

    def initial_loyalty(self) -> np.ndarray:
        loyalty = super().initial_loyalty()
        loyalty *= self.phase_config.loyalty_multiplier
        return loyalty

    def update_loyalty(self, actions: np.ndarray) -> None:
        super().update_loyalty(actions)
        self.loyalty = np.clip(self.loyalty, 0.0, self.phase_config.loyalty_multiplier)

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        phase = self.phase_config
        info["phase"] = self.phase
        info["phase_years"] = phase.years
        info["phase_loyalty"] = phase.loyalty_multiplier
        info["expected_effort"] = phase.expected_effort
        if self.history:
            deviation = abs(np.mean(self.actions) - phase.expected_effort) / phase.expected_effort
            info["effort_deviation"] = float(deviation)
            info["validation_accuracy"] = float(max(0, 1 - deviation))
        else:
            info["effort_deviation"] = 0.0
            info["validation_accuracy"] = 1.0
        return info

    def describe(self) -> dict[str, Any]:
        description = super().describe()
        description["phase"] = self.phase
        return description


class PublicGoods(TR3Game):
    """Public goods game with a multiplied common pool, and TR-3 loyalty and collective-action rewards.

    ``n_agents`` players (default 5), each with ``endowment`` (default 50; baseline 40 % of it),
    ``D = 0.55``, value ``20 ln(1 + a)`` with synergy 0.65, TR-3 trust, and the loyalty dynamics
    and reward multipliers of :class:`LoyaltyTeam`. As in the reference, the reward is the
    engine's coopetition reward times those multipliers; the public-goods payoff
    ``(endowment - a_i) + multiplier * sum(a) / n + L_i`` (``L_i`` the loyalty modifier with
    ``omega = multiplier``, ``beta = 1``) gives ``social_efficiency`` in ``info``. Linear returns:
    the Nash effort is 0 when ``multiplier / n < 1`` (else the endowment) and the social optimum
    the endowment when ``multiplier > 1``. No early termination; 100 rounds.

    Parameters: ``n_agents=5``, ``multiplier=2.0`` (> 0), ``endowment=50.0`` (> 0),
    ``phi_B=0.6``, ``phi_C=0.2`` (>= 0), ``max_steps=100``.

    ``info`` adds the TR-3 numbers (``team_output``, ``nash_equilibrium``, ``social_optimum``,
    ``mean_loyalty``, ``loyalty_scores``, ``team_cohesion``, ``free_rider_count``,
    ``free_rider_indices``, ``efficiency_ratio``), ``total_contribution``, ``public_good``
    (``multiplier * total``), ``contribution_rate`` (total over all endowments) and
    ``social_efficiency`` (the players' summed public-goods payoff over its value when all give
    everything; 0 when that is not positive).
    """

    name = "PublicGoods"
    summary = "Public goods game with a multiplied common pool"
    contribution = "contribution to the common pool (0 to the endowment)"

    def __init__(
        self,
        *,
        n_agents: int = 5,
        multiplier: float = 2.0,
        endowment: float = 50.0,
        phi_B: float = 0.6,
        phi_C: float = 0.2,
        max_steps: int = 100,
        **common: Any,
    ) -> None:
        self.multiplier = _number(self.name, "multiplier", multiplier, low=0.0, low_open=True)
        self.endowment = _number(self.name, "endowment", endowment, low=0.0, low_open=True)
        params = TR3Params(omega=multiplier, beta=1.0, c=1.0, phi_B=phi_B, phi_C=phi_C, a_max=endowment)
        super().__init__(params, n_agents, max_steps, **common)

    def public_goods_payoffs(self, actions: np.ndarray) -> np.ndarray:
        """``(endowment - a_i) + multiplier * sum(a) / n + L_i`` per player (float32)."""
        actions = np.asarray(actions, dtype=np.float32)
        p = self.params
        share = self.multiplier * np.sum(actions) / self.n_agents
        bonus = loyalty_modifiers(actions, self.loyalty, omega=p.omega, beta=1.0, c=p.c, phi_B=p.phi_B, phi_C=p.phi_C)
        return ((self.endowment - actions) + share + bonus).astype(np.float32)

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        total = np.sum(self.actions)
        info["total_contribution"] = float(total)
        info["public_good"] = float(self.multiplier * total)
        info["contribution_rate"] = float(total / (self.endowment * self.n_agents))
        actual = np.sum(self.public_goods_payoffs(self.actions))
        best = np.sum(self.public_goods_payoffs(np.full(self.n_agents, self.endowment)))
        info["social_efficiency"] = float(actual / best) if best > 0 else 0.0
        return info

    def describe(self) -> dict[str, Any]:
        description = super().describe()
        description.update(multiplier=self.multiplier, endowment=self.endowment)
        return description
