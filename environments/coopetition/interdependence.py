"""TR-1, interdependence and complementarity: PartnerHoldUp, PlatformEcosystem, DynamicPartnerSelection,
SynergySearch, RenaultNissan.

Parameters and rules as the reference (Coopetition-Gym v1, upstream commit d2dffd5103), with these
differences, each so that one seed gives one episode whatever the environment played before:

* DynamicPartnerSelection clears its global reputation scores at every reset (the reference keeps
  them across episodes unless reset with ``options={"reset_reputation": True}``);
  ``carry_reputation=True`` keeps them, as the reference does by default.
* PlatformEcosystem's ``developer_exits`` count starts at 0 every episode (the reference never
  resets it).
* SynergySearch draws its hidden synergy weight from the seeded ``self.rng`` at reset (the
  reference draws it before seeding: from an unseeded generator at the first reset, from the
  previous episode's generator after that).

Where the reference builds an observation inside its own ``step`` before updating a game's extra
state (DynamicPartnerSelection's reputation scores), the observation shows that state as it was
before the round, as the reference's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
from envgym.environments.coopetition._checks import flag, integer, number
from envgym.environments.coopetition.game import Game, StepResult, TrustParams, ValueParams, symmetric
from envgym.environments.coopetition.pair import f32

from envgym.errors import ConfigError

__all__ = ["DynamicPartnerSelection", "PartnerHoldUp", "PlatformEcosystem", "RenaultNissan", "SynergySearch"]


class PartnerHoldUp(Game):
    """Asymmetric supplier relationship: a strong partner can hold up a weak one, who may walk away.

    Agent 0 is the strong partner (a manufacturer: endowment 120, bargaining share 0.6), agent 1
    the weak one (its supplier: endowment 80, share 0.4); each contributes in ``[0, e_i]``, and a
    contribution at or above 35 % of the endowment (42 and 28) builds trust. The weak partner
    depends on the strong one far more than the reverse: ``D[1, 0] = weak_dependency`` (0.85),
    ``D[0, 1] = strong_dependency`` (0.35). Value ``20 ln(1 + a)`` with synergy weight 0.6; trust
    builds at 0.10 and erodes at 0.35 (sensitivity 1.2, reputation damage 0.55, healing 0.025,
    interdependence amplification 0.7, initial trust 0.55). 100 rounds.

    Ends early (a failure: the weak partner exits) when the weak partner's trust in the strong
    one, ``T[1, 0]``, falls below 0.10.

    ``info`` adds ``trust_asymmetry`` (``T[1, 0] - T[0, 1]``), ``power_asymmetry``
    (``weak_dependency - strong_dependency``), and ``strong_agent_payoff`` and
    ``weak_agent_payoff``, which are always 0, as in the reference (it reads them from ``info``
    before the actions are put there).

    Arguments: ``strong_dependency=0.35`` and ``weak_dependency=0.85`` (in [0, 1]),
    ``max_steps=100``, and the common ``reward_mode``, ``normalize``, ``reward_scale``.
    """

    name = "PartnerHoldUp"
    mechanism = "TR-1"
    summary = "Strong and weak partner; hold-up risk, weak partner may exit"
    roles = ("strong partner (manufacturer)", "weak partner (supplier)")
    contribution = "investment in the relationship (strong partner 0-120, weak partner 0-80)"

    def __init__(
        self,
        *,
        strong_dependency: float = 0.35,
        weak_dependency: float = 0.85,
        max_steps: int = 100,
        **common: Any,
    ) -> None:
        strong = number(self.name, "strong_dependency", strong_dependency, low=0.0, high=1.0)
        weak = number(self.name, "weak_dependency", weak_dependency, low=0.0, high=1.0)
        endowments = np.array([120.0, 80.0])
        super().__init__(
            n_agents=2,
            max_steps=max_steps,
            endowments=endowments,
            alpha=[0.60, 0.40],
            D=[[0.0, strong], [weak, 0.0]],
            value=ValueParams(theta=20.0, gamma=0.60),
            trust=TrustParams(
                lambda_plus=0.10, lambda_minus=0.35, mu_R=0.55, delta_R=0.025, xi=0.70, kappa=1.2, initial_trust=0.55
            ),
            baselines=endowments * 0.35,  # float64, then float32, as the reference
            **common,
        )
        self.power_asymmetry = weak - strong

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        info["trust_asymmetry"] = self.trust.item(1, 0) - self.trust.item(0, 1)
        info["power_asymmetry"] = self.power_asymmetry
        info["strong_agent_payoff"] = 0
        info["weak_agent_payoff"] = 0
        return info

    def terminated(self) -> bool:
        return self.trust.item(1, 0) < 0.10


class PlatformEcosystem(Game):
    """A platform and its developers: over-extraction drives the developers away.

    Agent 0 is the platform (infrastructure budget 150, bargaining share ``platform_share`` 0.30),
    agents 1..N the ``n_developers`` developers (4 by default; budget 80 each, sharing the rest of
    the surplus equally). Each contributes in ``[0, e_i]``; 30 % of the endowment is the
    baseline of trust (45 and 24). Hub-and-spoke dependence: every developer depends on the
    platform with ``developer_dependency`` (0.75), the platform on each developer with
    ``platform_dependency`` (0.25), developers not on each other. Value ``25 ln(1 + a)`` with
    synergy weight 0.75 (network effects); trust builds at 0.08 and erodes at 0.25 (sensitivity
    1.0, reputation damage 0.45, healing 0.02, interdependence amplification 0.40, initial trust
    0.60). 100 rounds.

    Ends early (a failure: the ecosystem dies) when the developers' mean trust in the platform,
    ``mean_i T[i, 0]``, falls below 0.15.

    ``info`` adds ``platform_investment``, ``mean_developer_investment``,
    ``developer_investment_std``, ``developer_trust_in_platform`` (that mean trust) and
    ``developer_exits`` (all developers once the ecosystem died, else 0).

    Arguments: ``n_developers=4`` (>= 1), ``platform_share=0.30``, ``platform_dependency=0.25``,
    ``developer_dependency=0.75`` (in [0, 1]), ``max_steps=100``, and the common ``reward_mode``,
    ``normalize``, ``reward_scale``.
    """

    name = "PlatformEcosystem"
    mechanism = "TR-1"
    summary = "A platform and its developers; the ecosystem can die"
    contribution = "investment level (platform: infrastructure 0-150; developer: app quality 0-80)"

    def __init__(
        self,
        *,
        n_developers: int = 4,
        platform_share: float = 0.30,
        platform_dependency: float = 0.25,
        developer_dependency: float = 0.75,
        max_steps: int = 100,
        **common: Any,
    ) -> None:
        n_dev = integer(self.name, "n_developers", n_developers, minimum=1)
        share = number(self.name, "platform_share", platform_share, low=0.0, high=1.0)
        hub = number(self.name, "platform_dependency", platform_dependency, low=0.0, high=1.0)
        spoke = number(self.name, "developer_dependency", developer_dependency, low=0.0, high=1.0)
        n = 1 + n_dev
        D = np.zeros((n, n))
        D[0, 1:] = hub
        D[1:, 0] = spoke
        endowments = np.array([150.0] + [80.0] * n_dev, dtype=np.float32)
        super().__init__(
            n_agents=n,
            max_steps=max_steps,
            endowments=endowments,
            alpha=np.array([share] + [(1.0 - share) / n_dev] * n_dev, dtype=np.float32),
            D=D,
            value=ValueParams(theta=25.0, gamma=0.75),
            trust=TrustParams(
                lambda_plus=0.08, lambda_minus=0.25, mu_R=0.45, delta_R=0.02, xi=0.40, kappa=1.0, initial_trust=0.60
            ),
            baselines=endowments * 0.30,  # float32 arithmetic, as the reference
            **common,
        )
        self.n_developers = n_dev
        self.platform_share = share
        self.roles = ("the platform", *(f"developer {k}" for k in range(1, n)))
        self.developer_exits = 0

    def reset(self, seed: Any) -> None:
        super().reset(seed)
        self.developer_exits = 0

    def developer_trust(self) -> float:
        """The developers' mean trust in the platform, ``mean_i T[i, 0]``."""
        return float(np.mean([float(self.trust[i, 0]) for i in range(1, self.n_agents)]))

    def step(self, actions: np.ndarray) -> StepResult:
        result = super().step(actions)
        if result.terminated:
            self.developer_exits = self.n_developers
            result.info["developer_exits"] = self.developer_exits
        return result

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        info["platform_investment"] = float(self.actions[0])
        info["mean_developer_investment"] = float(np.mean(self.actions[1:]))
        info["developer_investment_std"] = float(np.std(self.actions[1:]))
        info["developer_trust_in_platform"] = self.developer_trust()
        info["developer_exits"] = self.developer_exits
        return info

    def terminated(self) -> bool:
        return self.developer_trust() < 0.15


class DynamicPartnerSelection(Game):
    """A pool of agents whose public reputation scores signal whom to partner with.

    ``n_agents`` agents (6 by default), endowment 100 each, equal bargaining shares, every agent
    depending on every other with ``D = 0.40``; a contribution at or above 35 is cooperation.
    Value ``18 ln(1 + a)`` with synergy weight 0.55; trust builds at 0.12 and erodes at 0.35
    (sensitivity 1.2, reputation damage 0.60, healing 0.015, interdependence amplification 0.45,
    initial trust 0.50). Besides pairwise trust, each agent has a global reputation score,
    updated after every round from its contribution (as sent, before clipping) as
    ``r <- 0.9 r + 0.1 a / e``. 50 rounds, no early termination.

    Observation: the joint observation followed by the reputation scores as they were before
    the round (the reference builds it before updating them). ``info`` adds
    ``reputation_scores`` (after the round) and ``reputation_ranking`` (agents by decreasing
    score).

    Arguments: ``n_agents=6`` (>= 2), ``reputation_weight=0.5`` (in [0, 1]; stored, unused by
    the reference's rules), ``max_steps=50``, ``carry_reputation=False`` (``True`` keeps the
    scores across resets, as the reference does unless reset with ``reset_reputation``), and the
    common ``reward_mode``, ``normalize``, ``reward_scale``.
    """

    name = "DynamicPartnerSelection"
    mechanism = "TR-1"
    summary = "Agents choose whom to invest in"
    contribution = "cooperation level (0-100; 35 or more counts as cooperating)"

    def __init__(
        self,
        *,
        n_agents: int = 6,
        reputation_weight: float = 0.5,
        max_steps: int = 50,
        carry_reputation: bool = False,
        **common: Any,
    ) -> None:
        n = integer(self.name, "n_agents", n_agents, minimum=2)
        self.reputation_weight = number(self.name, "reputation_weight", reputation_weight, low=0.0, high=1.0)
        self.carry_reputation = flag(self.name, "carry_reputation", carry_reputation)
        endowments = np.full(n, 100.0, dtype=np.float32)
        super().__init__(
            n_agents=n,
            max_steps=max_steps,
            endowments=endowments,
            alpha=np.full(n, 1.0 / n, dtype=np.float32),
            D=symmetric(n, 0.40),
            value=ValueParams(theta=18.0, gamma=0.55),
            trust=TrustParams(
                lambda_plus=0.12, lambda_minus=0.35, mu_R=0.60, delta_R=0.015, xi=0.45, kappa=1.2, initial_trust=0.50
            ),
            baselines=endowments * 0.35,  # float32 arithmetic, as the reference
            **common,
        )
        self.global_reputation = np.zeros(n, dtype=np.float32)
        self.shown_reputation = self.global_reputation.copy()

    def reset(self, seed: Any) -> None:
        super().reset(seed)
        if not self.carry_reputation:
            self.global_reputation = np.zeros(self.n_agents, dtype=np.float32)
        self.shown_reputation = self.global_reputation.copy()

    def step(self, actions: np.ndarray) -> StepResult:
        self.shown_reputation = self.global_reputation.copy()
        result = super().step(actions)
        scores = np.asarray(actions, dtype=np.float32) / self.endowments
        self.global_reputation = 0.9 * self.global_reputation + 0.1 * scores
        result.info["reputation_scores"] = self.global_reputation.copy()
        result.info["reputation_ranking"] = np.argsort(-self.global_reputation).tolist()
        return result

    def legacy_observation(self) -> np.ndarray:
        return np.concatenate([super().legacy_observation(), self.shown_reputation]).astype(np.float32)


class SynergySearch(Game):
    """Two partners who do not know how complementary they are: explore, then exploit.

    Two agents, endowment 100 each, equal shares, ``D = 0.5`` both ways, baseline 40. Value
    ``20 ln(1 + a)`` with a hidden synergy weight ``gamma`` drawn uniformly from ``gamma_range``
    (0.20 to 0.90) at every reset, from the episode's seeded generator; trust builds at 0.10 and
    erodes at 0.30 (the engine's other defaults; initial trust 0.55). 100 rounds, no early
    termination.

    Observation: the joint observation, followed by ``gamma`` when ``reveal_gamma_in_obs``.
    ``info`` adds ``true_gamma`` (``gamma`` when revealed, else ``None``), ``gamma_type``
    (``"high"`` when ``gamma > 0.6``, else ``"low"``), ``cumulative_rewards`` per agent, and from
    round 4 on ``reward_variance`` (the variance of every reward so far).

    Arguments: ``gamma_range=(0.20, 0.90)`` (``0 <= low <= high <= 1``),
    ``reveal_gamma_in_obs=False``, ``max_steps=100``, and the common ``reward_mode``,
    ``normalize``, ``reward_scale``.
    """

    name = "SynergySearch"
    mechanism = "TR-1"
    summary = "Two partners learn a hidden synergy strength"
    roles = ("partner A", "partner B")
    contribution = "investment in the joint venture (0-100; 40 or more counts as cooperating)"

    def __init__(
        self,
        *,
        gamma_range: Sequence[float] = (0.20, 0.90),
        reveal_gamma_in_obs: bool = False,
        max_steps: int = 100,
        **common: Any,
    ) -> None:
        if isinstance(gamma_range, (str, bytes)) or not isinstance(gamma_range, Sequence) or len(gamma_range) != 2:
            raise ConfigError(f"{self.name}: gamma_range must be a pair (low, high), got {gamma_range!r}.")
        low = number(self.name, "gamma_range[0]", gamma_range[0], low=0.0, high=1.0)
        high = number(self.name, "gamma_range[1]", gamma_range[1], low=0.0, high=1.0)
        if low > high:
            raise ConfigError(f"{self.name}: gamma_range must have low <= high, got {gamma_range!r}.")
        self.gamma_range = (low, high)
        self.reveal_gamma_in_obs = flag(self.name, "reveal_gamma_in_obs", reveal_gamma_in_obs)
        super().__init__(
            n_agents=2,
            max_steps=max_steps,
            endowments=[100.0, 100.0],
            alpha=[0.50, 0.50],
            D=symmetric(2, 0.50),
            value=ValueParams(theta=20.0, gamma=0.5),  # gamma: drawn at every reset
            trust=TrustParams(lambda_plus=0.10, lambda_minus=0.30, initial_trust=0.55),
            baselines=[40.0, 40.0],
            **common,
        )
        self.true_gamma = self.value.gamma
        self.reward_history: list[np.ndarray] = []
        # The rewards so far as one float32 block (what np.sum and np.var make of the list) and
        # their running column sums (numpy sums the rows of a two-column block one after another).
        self._reward_rows = np.empty((max_steps, 2), dtype=np.float32)
        self._reward_sums = [0.0, 0.0]

    def reset(self, seed: Any) -> None:
        super().reset(seed)
        self.set_gamma(self.rng.uniform(*self.gamma_range))
        self.reward_history = []
        self._reward_sums = [0.0, 0.0]

    def set_gamma(self, gamma: float) -> None:
        """Make ``gamma`` the hidden synergy weight of this episode."""
        self.true_gamma = float(gamma)
        self.value = replace(self.value, gamma=self.true_gamma)

    def prepare_reference(self, data: dict[str, Any], seed: int) -> None:
        """Use the synergy weight the reference drew for ``seed`` (recorded in ``data["hidden"]``).

        The reference draws it from a generator it does not seed; the recording script pins that
        generator per seed and records the value, so a replay needs only this one number.
        """
        self.set_gamma(data["hidden"][str(seed)]["true_gamma"])

    def step(self, actions: np.ndarray) -> StepResult:
        result = super().step(actions)
        rewards = result.rewards.copy()
        self.reward_history.append(rewards)
        t = len(self.reward_history)
        if t > len(self._reward_rows):  # max_steps rows; the engine itself can be stepped past them
            self._reward_rows = np.concatenate([self._reward_rows, np.empty_like(self._reward_rows)])
        self._reward_rows[t - 1] = rewards
        r0, r1 = rewards.tolist()
        s0, s1 = self._reward_sums
        self._reward_sums = [r0, r1] if t == 1 else [f32(s0 + r0), f32(s1 + r1)]
        result.info["true_gamma"] = self.true_gamma if self.reveal_gamma_in_obs else None
        result.info["gamma_type"] = "high" if self.true_gamma > 0.6 else "low"
        result.info["cumulative_rewards"] = list(self._reward_sums)
        if t > 3:
            result.info["reward_variance"] = _variance32(self._reward_rows[:t])
        return result

    def legacy_observation(self) -> np.ndarray:
        base = super().legacy_observation()
        if not self.reveal_gamma_in_obs:
            return base
        return np.concatenate([base, [self.true_gamma]]).astype(np.float32)


def _variance32(rows: np.ndarray) -> float:
    """``float(np.var(rows))`` of a C-contiguous float32 block, without ``np.var``'s dispatch: the same
    pairwise float32 sums and float64 divisions by the count, in the same order."""
    count = np.intp(rows.size)
    mean = np.add.reduce(rows, axis=None, keepdims=True)
    np.true_divide(mean, count, out=mean, casting="unsafe")
    deviations = np.subtract(rows, mean)
    np.square(deviations, out=deviations)
    total = np.add.reduce(deviations, axis=None)
    return float(np.float32(total / count))


class RenaultNissan(Game):
    """The Renault-Nissan alliance (TR-2 case study), started in one of four historical phases.

    Agent 0 is Nissan (endowment 90, share 0.48, baseline 27), agent 1 Renault (endowment 100,
    share 0.52, baseline 30). Value ``22 ln(1 + a)`` with synergy weight 0.58; trust builds at
    0.08 and erodes at 0.25 (sensitivity 1.0, reputation damage 0.55, healing 0.02,
    interdependence amplification 0.50). The phase sets the dependence and the starting trust
    and reputation damage:

    ============  ==========  ================  ================  =====  ======
    phase         period      D[Nissan, Ren.]   D[Ren., Nissan]   trust  damage
    ============  ==========  ================  ================  =====  ======
    formation     1999-2002   0.78              0.66              0.45   0.05
    mature        2002-2018   0.51              0.66              0.70   0.02
    crisis        2018-2020   0.35              0.72              0.30   0.45
    strained      2020-2025   0.28              0.65              0.40   0.35
    ============  ==========  ================  ================  =====  ======

    100 rounds, no early termination. ``info`` adds ``phase``, ``period`` and ``agent_names``.

    Arguments: ``phase="mature"`` (one of the four, any case), ``max_steps=100``, and the common
    ``reward_mode``, ``normalize``, ``reward_scale``.
    """

    name = "RenaultNissan"
    mechanism = "TR-1"
    summary = "Renault-Nissan alliance case study in four phases"
    roles = ("Nissan", "Renault")
    contribution = "investment in the alliance (Nissan 0-90, Renault 0-100)"

    #: phase -> (period, D[0, 1], D[1, 0], initial trust, initial reputation damage)
    PHASES: ClassVar[dict[str, tuple[str, float, float, float, float]]] = {
        "formation": ("1999-2002", 0.78, 0.66, 0.45, 0.05),
        "mature": ("2002-2018", 0.51, 0.66, 0.70, 0.02),
        "crisis": ("2018-2020", 0.35, 0.72, 0.30, 0.45),
        "strained": ("2020-2025", 0.28, 0.65, 0.40, 0.35),
    }
    AGENT_NAMES: ClassVar[tuple[str, str]] = ("Nissan", "Renault")

    def __init__(self, *, phase: str = "mature", max_steps: int = 100, **common: Any) -> None:
        if not isinstance(phase, str) or phase.lower() not in self.PHASES:
            raise ConfigError(f"{self.name}: phase must be one of {', '.join(self.PHASES)}, got {phase!r}.")
        self.phase = phase.lower()
        self.period, d01, d10, trust, damage = self.PHASES[self.phase]
        super().__init__(
            n_agents=2,
            max_steps=max_steps,
            endowments=[90.0, 100.0],
            alpha=[0.48, 0.52],
            D=[[0.0, d01], [d10, 0.0]],
            value=ValueParams(theta=22.0, gamma=0.58),
            trust=TrustParams(
                lambda_plus=0.08,
                lambda_minus=0.25,
                mu_R=0.55,
                delta_R=0.02,
                xi=0.50,
                kappa=1.0,
                initial_trust=trust,
                initial_reputation=damage,
            ),
            baselines=[27.0, 30.0],
            **common,
        )

    def legacy_info(self) -> dict[str, Any]:
        info = super().legacy_info()
        info["phase"] = self.phase
        info["period"] = self.period
        info["agent_names"] = list(self.AGENT_NAMES)
        return info
