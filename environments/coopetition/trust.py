"""TR-2, trust and reputation: TrustDilemma, RecoveryRace, SLCD, CooperativeNegotiation, ReputationMarket.

Parameters and rules as the reference (Coopetition-Gym v1, upstream commit d2dffd5103). Where the
reference builds an observation inside its own ``step`` before updating a game's extra state
(CooperativeNegotiation's agreement, ReputationMarket's public reputations), the observation shows
that state as it was before the round, as the reference's does. One difference: ReputationMarket's
observation right after reset shows the fresh reputations (the reference's shows the previous
episode's last ones, so one seed would give two different first observations).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
from envgym.environments.coopetition._checks import flag, integer, number
from envgym.environments.coopetition.game import Game, StepResult, TrustParams, ValueParams, symmetric
from envgym.environments.coopetition.pair import f32

from envgym.errors import ConfigError

_FLOAT32 = np.dtype(np.float32)

__all__ = ["SLCD", "CooperativeNegotiation", "RecoveryRace", "ReputationMarket", "TrustDilemma"]


class TrustDilemma(Game):
    """Repeated trust game between two partners: cooperation builds trust slowly, defection erodes it fast.

    Two agents, endowment 100 each, baseline 40 (a contribution at or above it counts as
    cooperation), ``D = 0.6`` both ways, value ``20 ln(1 + a)`` with synergy weight 0.7; trust
    builds at 0.15 and erodes at 0.45 (sensitivity 1.5, reputation damage 0.5, healing 0.02,
    interdependence amplification 0.6, initial trust 0.5). Ends early when mean trust falls
    below 0.05; 100 rounds. ``info`` adds per-agent cooperation and defection counts and rates.
    """

    name = "TrustDilemma"
    mechanism = "TR-2"
    summary = "Repeated dyadic trust game; ends if trust collapses"
    roles = ("partner A", "partner B")
    contribution = "cooperation level (0-100; 40 or more counts as cooperating)"

    def __init__(
        self,
        *,
        max_steps: int = 100,
        trust_sensitivity: float = 1.5,
        trust_building_rate: float = 0.15,
        trust_erosion_rate: float = 0.45,
        **common: Any,
    ) -> None:
        super().__init__(
            n_agents=2,
            max_steps=max_steps,
            endowments=[100.0, 100.0],
            alpha=[0.5, 0.5],
            D=symmetric(2, 0.6),
            value=ValueParams(theta=20.0, gamma=0.7),
            trust=TrustParams(
                lambda_plus=trust_building_rate,
                lambda_minus=trust_erosion_rate,
                mu_R=0.5,
                delta_R=0.02,
                xi=0.6,
                kappa=trust_sensitivity,
                initial_trust=0.5,
            ),
            baselines=[40.0, 40.0],
            **common,
        )
        self.cooperations = [0, 0]
        self.defections = [0, 0]

    def reset(self, seed: Any) -> None:
        super().reset(seed)
        self.cooperations = [0, 0]
        self.defections = [0, 0]

    def step(self, actions: np.ndarray) -> StepResult:
        raw = np.asarray(actions, dtype=_FLOAT32).tolist()  # the reference counts before clipping
        baselines = self.baselines.tolist()
        cooperations, defections = self.cooperations, self.defections
        for i in (0, 1):
            if raw[i] >= baselines[i]:
                cooperations[i] += 1
            else:
                defections[i] += 1
        result = super().step(actions)
        info = result.info
        info["defection_counts"] = list(defections)
        info["cooperation_counts"] = list(cooperations)
        (c0, c1), (d0, d1) = cooperations, defections  # two agents, always
        info["cooperation_rates"] = [c0 / (c0 + d0) if c0 + d0 > 0 else 0.0, c1 / (c1 + d1) if c1 + d1 > 0 else 0.0]
        return result

    def terminated(self) -> bool:
        return self.trust_enabled and self.mean_trust() < 0.05


class RecoveryRace(Game):
    """Two partners after a breach of trust race to rebuild it under a reputation ceiling.

    Two agents, endowment 100 each, equal shares, ``D = 0.55`` both ways, baseline 35. The
    episode starts in crisis: trust ``initial_trust`` (0.25) and reputation damage
    ``initial_reputation_damage`` (0.50) between the two, so trust cannot exceed the ceiling
    ``1 - R`` (0.50) until the damage heals. Value ``20 ln(1 + a)`` with synergy weight 0.6;
    trust builds at 0.08 and erodes at 0.35 (sensitivity 1.0, reputation damage 0.70, healing
    0.01, interdependence amplification 0.40). 150 rounds.

    Ends early, a success, when mean trust reaches ``recovery_target`` (0.90).

    ``info`` adds ``peak_trust`` (the highest mean trust so far, at least ``initial_trust``),
    ``recovery_step`` (the round the target was reached, else ``None``), ``trust_ceiling``
    (``1 - mean reputation damage``) and ``recovery_progress``
    (``(mean trust - initial_trust) / (recovery_target - initial_trust)``).

    Arguments: ``initial_trust=0.25``, ``initial_reputation_damage=0.50`` (in [0, 1]),
    ``recovery_target=0.90`` (above ``initial_trust``, at most 1), ``max_steps=150``, and the
    common ``reward_mode``, ``normalize``, ``reward_scale``.
    """

    name = "RecoveryRace"
    mechanism = "TR-2"
    summary = "Rebuild trust after a breach under a reputation ceiling"
    roles = ("partner A", "partner B")
    contribution = "cooperation level (0-100; 35 or more counts as cooperating)"

    def __init__(
        self,
        *,
        initial_trust: float = 0.25,
        initial_reputation_damage: float = 0.50,
        recovery_target: float = 0.90,
        max_steps: int = 150,
        **common: Any,
    ) -> None:
        trust = number(self.name, "initial_trust", initial_trust, low=0.0, high=1.0)
        damage = number(self.name, "initial_reputation_damage", initial_reputation_damage, low=0.0, high=1.0)
        target = number(self.name, "recovery_target", recovery_target, low=trust, high=1.0, open_low=True)
        super().__init__(
            n_agents=2,
            max_steps=max_steps,
            endowments=[100.0, 100.0],
            alpha=[0.50, 0.50],
            D=symmetric(2, 0.55),
            value=ValueParams(theta=20.0, gamma=0.60),
            trust=TrustParams(
                lambda_plus=0.08,
                lambda_minus=0.35,
                mu_R=0.70,
                delta_R=0.01,
                xi=0.40,
                kappa=1.0,
                initial_trust=trust,
                initial_reputation=damage,
            ),
            baselines=[35.0, 35.0],
            **common,
        )
        self.initial_trust = trust
        self.initial_reputation_damage = damage
        self.recovery_target = target
        self.peak_trust = trust
        self.recovery_step: int | None = None

    def reset(self, seed: Any) -> None:
        super().reset(seed)
        self.peak_trust = self.initial_trust
        self.recovery_step = None

    def step(self, actions: np.ndarray) -> StepResult:
        result = super().step(actions)
        current = result.info["mean_trust"]
        self.peak_trust = max(self.peak_trust, current)
        if current >= self.recovery_target and self.recovery_step is None:
            self.recovery_step = self.step_count
        result.info["peak_trust"] = self.peak_trust
        result.info["recovery_step"] = self.recovery_step
        result.info["trust_ceiling"] = 1.0 - result.info["mean_reputation_damage"]
        result.info["recovery_progress"] = (current - self.initial_trust) / (self.recovery_target - self.initial_trust)
        return result

    def terminated(self) -> bool:
        return self.mean_trust() >= self.recovery_target

    def termination_outcome(self) -> str:
        return "success"


class SLCD(Game):
    """The Samsung-Sony S-LCD joint venture (TR-1 case study, validated against 2004-2011 data).

    Agent 0 is Samsung (share 0.55), agent 1 Sony (share 0.45); endowment 100 and baseline 30
    each. Sony depends on Samsung's manufacturing (``D[1, 0] = 0.86``) more than Samsung on
    Sony's capital and offtake (``D[0, 1] = 0.64``). Value ``20 ln(1 + a)`` with synergy weight
    0.65; trust (when ``trust_enabled``) builds at 0.08 and erodes at 0.28 (sensitivity 1.0,
    reputation damage 0.50, healing 0.02, interdependence amplification 0.45, initial trust
    0.65). 100 rounds, no early termination.

    ``info`` adds ``agent_names``, ``samsung_investment`` and ``sony_investment``.

    Arguments: ``max_steps=100``, ``trust_enabled=True`` (``False``: the integrated utility
    weighs the partner's payoff by ``D`` alone), and the common ``reward_mode``, ``normalize``,
    ``reward_scale``.
    """

    name = "SLCD"
    mechanism = "TR-2"
    summary = "Samsung-Sony S-LCD joint venture case study"
    roles = ("Samsung", "Sony")
    contribution = "investment in the S-LCD joint venture (0-100)"

    AGENT_NAMES: ClassVar[tuple[str, str]] = ("Samsung", "Sony")

    def __init__(self, *, max_steps: int = 100, trust_enabled: bool = True, **common: Any) -> None:
        trust = TrustParams(
            lambda_plus=0.08, lambda_minus=0.28, mu_R=0.50, delta_R=0.02, xi=0.45, kappa=1.0, initial_trust=0.65
        )
        super().__init__(
            n_agents=2,
            max_steps=max_steps,
            endowments=[100.0, 100.0],
            alpha=[0.55, 0.45],
            D=[[0.0, 0.64], [0.86, 0.0]],
            value=ValueParams(theta=20.0, gamma=0.65),
            trust=trust if flag(self.name, "trust_enabled", trust_enabled) else None,
            baselines=[30.0, 30.0],
            **common,
        )

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        info["agent_names"] = list(self.AGENT_NAMES)
        info["samsung_investment"], info["sony_investment"] = self.actions.tolist()
        return info


class CooperativeNegotiation(Game):
    """Two partners propose cooperation levels; close proposals become an agreement, and breaking it costs.

    Two agents, endowment 100 each, equal shares, ``D = 0.55`` both ways, baseline 35. Value
    ``20 ln(1 + a)`` with synergy weight 0.6; trust builds at 0.12 and erodes at 0.40
    (sensitivity 1.2, reputation damage 0.65, healing 0.02, interdependence amplification 0.55,
    initial trust 0.50). 100 rounds, no early termination.

    Each round's contributions (clipped) are proposals. When they differ by at most
    ``agreement_threshold`` (10), they become the standing agreement (after this round's
    penalty). While an agreement stands, a round in which any agent's contribution is more than
    ``agreement_threshold`` away from its agreed level is a breach: every agent loses
    ``breach_penalty_multiplier`` (3) times its own distance from the agreement from its reward.

    Observation: the joint observation, then the standing agreement (zeros if none) and 1 or 0
    for whether there is one, both as they were before the round. ``info`` adds
    ``agreement_reached``, ``current_agreement`` (``None`` if none), ``breach_occurred``,
    ``total_agreements``, ``total_breaches`` and ``proposal_convergence``
    (``1 - |a_0 - a_1| / 100``).

    Arguments: ``agreement_threshold=10.0`` and ``breach_penalty_multiplier=3.0`` (>= 0),
    ``negotiation_rounds=5`` (stored, unused by the reference's rules), ``max_steps=100``, and
    the common ``reward_mode``, ``normalize``, ``reward_scale``.
    """

    name = "CooperativeNegotiation"
    mechanism = "TR-2"
    summary = "Negotiate toward an agreement"
    roles = ("negotiator A", "negotiator B")
    contribution = "proposed and executed cooperation level (0-100)"

    def __init__(
        self,
        *,
        agreement_threshold: float = 10.0,
        breach_penalty_multiplier: float = 3.0,
        negotiation_rounds: int = 5,
        max_steps: int = 100,
        **common: Any,
    ) -> None:
        self.agreement_threshold = number(self.name, "agreement_threshold", agreement_threshold, low=0.0)
        self.breach_penalty_multiplier = number(
            self.name, "breach_penalty_multiplier", breach_penalty_multiplier, low=0.0
        )
        self.negotiation_rounds = integer(self.name, "negotiation_rounds", negotiation_rounds, minimum=1)
        super().__init__(
            n_agents=2,
            max_steps=max_steps,
            endowments=[100.0, 100.0],
            alpha=[0.50, 0.50],
            D=symmetric(2, 0.55),
            value=ValueParams(theta=20.0, gamma=0.60),
            trust=TrustParams(
                lambda_plus=0.12, lambda_minus=0.40, mu_R=0.65, delta_R=0.02, xi=0.55, kappa=1.2, initial_trust=0.50
            ),
            baselines=[35.0, 35.0],
            **common,
        )
        self.agreement: np.ndarray | None = None
        self.shown_agreement: np.ndarray | None = None
        self.agreements = 0
        self.breaches = 0

    def reset(self, seed: Any) -> None:
        super().reset(seed)
        self.agreement = self.shown_agreement = None
        self.agreements = self.breaches = 0

    def step(self, actions: np.ndarray) -> StepResult:
        proposals = self.clip(actions)
        # float32 arithmetic in Python floats; numpy compares float32 values with the threshold's float32
        p0, p1 = proposals.tolist()
        threshold = f32(self.agreement_threshold)
        gap = abs(f32(p0 - p1))
        reached = gap <= threshold
        agreed = self.agreement
        breach = agreed is not None and any(
            abs(f32(p - a)) > threshold for p, a in zip((p0, p1), agreed.tolist(), strict=True)
        )
        if breach:
            self.breaches += 1
        self.shown_agreement = agreed
        result = super().step(proposals)
        rewards, payoffs = result.rewards, result.payoffs
        if breach and agreed is not None:
            penalty = self.breach_penalty_multiplier * np.abs(proposals - agreed)  # float32
            rewards, payoffs = rewards - penalty, payoffs - penalty
        if reached:
            self.agreement = proposals.copy()
            self.agreements += 1
        info = result.info
        info["agreement_reached"] = reached
        info["current_agreement"] = None if self.agreement is None else self.agreement.tolist()
        info["breach_occurred"] = breach
        info["total_agreements"] = self.agreements
        info["total_breaches"] = self.breaches
        info["proposal_convergence"] = f32(1.0 - f32(gap / 100.0))
        return StepResult(rewards, payoffs, result.terminated, result.truncated, info)

    def legacy_observation(self) -> np.ndarray:
        shown = self.shown_agreement
        agreement = np.zeros(self.n_agents, dtype=np.float32) if shown is None else shown
        has = np.array([0.0 if shown is None else 1.0])
        return np.concatenate([super().legacy_observation(), agreement, has]).astype(np.float32)


class ReputationMarket(Game):
    """A market where public reputation sorts agents into tiers that scale their rewards.

    ``n_agents`` agents (5 by default), endowment 100 each, equal shares, everyone depending on
    everyone with ``D = 0.35``; baseline 35. Value ``18 ln(1 + a)`` with synergy weight 0.5;
    trust builds at 0.10 and erodes at 0.30 (sensitivity 1.0, reputation damage 0.55, healing
    0.015, interdependence amplification 0.45, initial trust 0.50). 100 rounds, no early
    termination.

    Each agent has a public reputation, 0.5 at reset, moved after every round by
    ``0.1 (a / e - 0.5)`` (contribution as sent, before clipping) and clipped to [0, 1]. With
    ``tier_enabled``, each reward is then multiplied by the agent's tier bonus: premium
    (reputation >= 0.80) 1.30, standard (>= 0.50) 1.00, probation (>= 0.25) 0.70, excluded 0.40.

    Observation: the joint observation, then the public reputations as they were before the
    round plus Gaussian noise of standard deviation ``1 - reputation_visibility`` (clipped to
    [0, 1]; drawn from the episode's generator once at reset and once per round). ``info`` adds
    ``public_reputations``, ``reputation_ranking`` (agents by decreasing reputation),
    ``agent_tiers``, ``mean_reputation`` and ``reputation_inequality`` (standard deviation).

    Arguments: ``n_agents=5`` (>= 2), ``reputation_visibility=1.0`` (in [0, 1]),
    ``tier_enabled=True``, ``max_steps=100``, and the common ``reward_mode``, ``normalize``,
    ``reward_scale``.
    """

    name = "ReputationMarket"
    mechanism = "TR-2"
    summary = "Market of agents ranked in reputation tiers"
    contribution = "cooperation level (0-100; 35 or more counts as cooperating)"

    #: (tier, lowest reputation, reward multiplier), best tier first.
    TIERS: ClassVar[tuple[tuple[str, float, float], ...]] = (
        ("premium", 0.80, 1.30),
        ("standard", 0.50, 1.00),
        ("probation", 0.25, 0.70),
        ("excluded", 0.00, 0.40),
    )

    def __init__(
        self,
        *,
        n_agents: int = 5,
        reputation_visibility: float = 1.0,
        tier_enabled: bool = True,
        max_steps: int = 100,
        **common: Any,
    ) -> None:
        n = integer(self.name, "n_agents", n_agents, minimum=2)
        self.reputation_visibility = number(
            self.name, "reputation_visibility", reputation_visibility, low=0.0, high=1.0
        )
        self.tier_enabled = flag(self.name, "tier_enabled", tier_enabled)
        super().__init__(
            n_agents=n,
            max_steps=max_steps,
            endowments=np.full(n, 100.0),
            alpha=np.full(n, 1.0 / n),
            D=symmetric(n, 0.35),
            value=ValueParams(theta=18.0, gamma=0.50),
            trust=TrustParams(
                lambda_plus=0.10, lambda_minus=0.30, mu_R=0.55, delta_R=0.015, xi=0.45, kappa=1.0, initial_trust=0.50
            ),
            baselines=np.full(n, 35.0),
            **common,
        )
        self.public_reputations = np.full(n, 0.50, dtype=np.float32)
        self.shown_reputations = self.public_reputations.copy()

    @classmethod
    def tier(cls, reputation: float) -> tuple[str, float]:
        """The tier and reward multiplier of ``reputation``."""
        for tier, lowest, bonus in cls.TIERS:
            if reputation >= lowest:
                return tier, bonus
        raise ConfigError(f"reputation {reputation!r} is below every tier")  # unreachable: clipped to [0, 1]

    def observed_reputations(self) -> np.ndarray:
        """The public reputations plus observation noise (one draw from ``self.rng``)."""
        noise = self.rng.normal(0, 1 - self.reputation_visibility, size=self.n_agents)
        return np.clip(self.public_reputations + noise.astype(np.float32), 0.0, 1.0)

    def reset(self, seed: Any) -> None:
        super().reset(seed)
        self.public_reputations = np.full(self.n_agents, 0.50, dtype=np.float32)
        self.shown_reputations = self.observed_reputations()

    def step(self, actions: np.ndarray) -> StepResult:
        result = super().step(actions)
        self.shown_reputations = self.observed_reputations()  # before this round's update
        scores = np.asarray(actions, dtype=np.float32) / self.endowments
        self.public_reputations = np.clip(self.public_reputations + 0.1 * (scores - 0.5), 0.0, 1.0)
        tiers = [self.tier(r) for r in self.public_reputations]
        rewards, payoffs = result.rewards, result.payoffs
        if self.tier_enabled:
            bonuses = np.array([bonus for _, bonus in tiers])  # float64: the rewards become float64, as the reference's
            rewards, payoffs = rewards * bonuses, payoffs * bonuses
        info = result.info
        info["public_reputations"] = self.public_reputations.copy()
        info["reputation_ranking"] = np.argsort(-self.public_reputations).tolist()
        info["agent_tiers"] = [name for name, _ in tiers]
        info["mean_reputation"] = float(np.mean(self.public_reputations))
        info["reputation_inequality"] = float(np.std(self.public_reputations))
        return replace(result, rewards=rewards, payoffs=payoffs)

    def legacy_observation(self) -> np.ndarray:
        return np.concatenate([super().legacy_observation(), self.shown_reputations]).astype(np.float32)
