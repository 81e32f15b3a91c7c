"""Baseline policies for the coopetition games, and the reference protocol's metrics.

Policies act for one agent of a PettingZoo Parallel coopetition env (``envgym.make_parallel(
"envgym/Coop-<Name>-v0")``, or its text view through :mod:`envgym.agents.solvers.coopetition`)
and see only that agent's ``info`` (the joint actions of the last round are public there, as
every reference game shows them to every agent; the rules are in ``info["task"]``):

* :class:`Constant` (``Constant_00`` .. ``Constant_100`` of the reference: a fixed share of the
  endowment), :class:`Random` (uniform over ``[0, e_i]``), :class:`TitForTat` (open at a share,
  then match the others' mean share of the last round);
* :class:`Equilibrium`, the game-theoretic oracle: every round it plays its part of the stage
  game's Nash equilibrium *in the env's reward mode* given the current trust state (private:
  the Nash equilibrium; integrated: the reference's coopetitive equilibrium, each agent
  maximising ``U_i = pi_i + sum_j w_ij pi_j``; cooperative: the profile maximising the shared
  mean, the social optimum), found by iterated best responses on a grid refined around the
  best point. It keeps its own copy of the game, rebuilt from ``info["task"]`` (game, seed,
  split, parameters) and advanced with the public joint actions, so it knows the trust state.
  It optimises one round's payoff (myopic); the TR-3 collective and TR-4 reciprocity modifiers,
  which depend on history, are left out of its objective. Myopia defects in trust dilemmas
  (the one-round optimum lies below the trust baseline, so trust collapses):
* :class:`TrustAware`, the reference's trust-aware oracle idea: the same equilibrium with every
  contribution kept just above its trust baseline, so trust builds instead of collapsing.

:func:`evaluate` runs a policy for every agent over seeds and returns the reference protocol's
metrics: mean episode return (summed over agents), mean final trust, cooperation rate
(contribution over endowment, averaged over rounds and agents) and episode length;
:func:`mode_contribution` is the reward-mode contribution ``(R_integrated - R_private) /
R_integrated``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from envgym.environments.coopetition.api import build_game

from envgym.errors import ConfigError
from envgym.registration import make_parallel

__all__ = [
    "POLICIES",
    "Constant",
    "CoopPolicy",
    "Equilibrium",
    "Random",
    "TitForTat",
    "TrustAware",
    "evaluate",
    "make_policy",
    "mode_contribution",
    "stage_equilibrium",
]


class CoopPolicy:
    """One agent's policy for one episode: :meth:`act` gets the agent's info, returns a contribution."""

    name = "policy"

    def __init__(self, agent: int, task: Mapping[str, Any], seed: int | None = None) -> None:
        self.agent = agent
        self.task = dict(task)
        self.endowments = np.asarray(task["endowments"], dtype=np.float64)
        self.rng = np.random.default_rng(seed)

    @property
    def endowment(self) -> float:
        return float(self.endowments[self.agent])

    def act(self, info: Mapping[str, Any]) -> float:
        raise NotImplementedError


class Constant(CoopPolicy):
    """A fixed share of the endowment every round (``share`` in [0, 1])."""

    name = "constant"

    def __init__(self, agent: int, task: Mapping[str, Any], seed: int | None = None, *, share: float = 0.5) -> None:
        super().__init__(agent, task, seed)
        if not 0 <= share <= 1:
            raise ConfigError(f"Constant: share must be in [0, 1], got {share!r}.")
        self.share = float(share)

    def act(self, info: Mapping[str, Any]) -> float:
        return self.share * self.endowment


class Random(CoopPolicy):
    """Uniform over ``[0, e_i]``, seeded per episode and agent."""

    name = "random"

    def act(self, info: Mapping[str, Any]) -> float:
        return float(self.rng.uniform(0.0, self.endowment))


class TitForTat(CoopPolicy):
    """Open at ``opening`` of the endowment, then give the share the others gave on average last round."""

    name = "tit_for_tat"

    def __init__(self, agent: int, task: Mapping[str, Any], seed: int | None = None, *, opening: float = 0.6) -> None:
        super().__init__(agent, task, seed)
        if not 0 <= opening <= 1:
            raise ConfigError(f"TitForTat: opening must be in [0, 1], got {opening!r}.")
        self.opening = float(opening)

    def act(self, info: Mapping[str, Any]) -> float:
        last = info.get("actions")
        if last is None or len(last) != len(self.endowments):
            return self.opening * self.endowment
        shares = np.asarray(last, dtype=np.float64) / self.endowments
        others = np.delete(shares, self.agent)
        return float(np.mean(others)) * self.endowment


def _stage_rewards(game: Any, profiles: np.ndarray, mode: str) -> np.ndarray:
    """Rewards of ``mode`` (before normalisation, scale and modifiers) for a batch of profiles ``(B, n)``."""
    a = profiles.astype(np.float32)
    value = game.value
    individual = value.individual(a).astype(np.float64)
    positive = np.all(a > 1e-10, axis=1)
    with np.errstate(divide="ignore"):
        synergy = np.where(positive, np.exp(np.mean(np.log(np.maximum(a, 1e-10)), axis=1)), 0.0)
    payoffs = (game.endowments - a).astype(np.float64) + individual + game.alpha * (value.gamma * synergy)[:, None]
    if mode == "private":
        return payoffs
    utilities = payoffs + payoffs @ game.utility_weights().astype(np.float64).T
    if mode == "cooperative":
        return np.repeat(utilities.mean(axis=1, keepdims=True), utilities.shape[1], axis=1)
    return utilities


def stage_equilibrium(
    game: Any,
    mode: str,
    start: np.ndarray | None = None,
    *,
    lower: np.ndarray | None = None,
    grid: int = 101,
    rounds: int = 30,
    tol: float = 1e-3,
) -> np.ndarray:
    """The stage game's equilibrium profile in ``mode`` by iterated best responses (see the module docstring).

    Agent ``i`` chooses in ``[lower_i, e_i]`` (``lower`` defaults to 0). Each best response scans
    ``grid`` points over that range, then ``grid`` points within one grid step of the best;
    sweeps stop when no contribution moves more than ``tol`` (or after ``rounds`` sweeps).
    """
    n = game.n_agents
    endowments = game.endowments.astype(np.float64)
    floor = np.zeros(n) if lower is None else np.minimum(np.asarray(lower, dtype=np.float64), endowments)
    profile = (endowments * 0.5) if start is None else np.asarray(start, dtype=np.float64).copy()
    profile = np.clip(profile, floor, endowments)
    for _ in range(rounds):
        moved = 0.0
        for i in range(n):
            step = (endowments[i] - floor[i]) / (grid - 1)
            candidates = np.linspace(floor[i], endowments[i], grid)
            for _refine in range(2):
                profiles = np.repeat(profile[None, :], len(candidates), axis=0)
                profiles[:, i] = candidates
                best = float(candidates[int(np.argmax(_stage_rewards(game, profiles, mode)[:, i]))])
                low, high = max(floor[i], best - step), min(endowments[i], best + step)
                candidates = np.linspace(low, high, grid)
                step = (high - low) / (grid - 1)
            moved = max(moved, abs(best - profile[i]))
            profile[i] = best
        if moved <= tol:
            break
    return profile


#: Equilibrium profiles by (policy, task, public history), shared by the agents of an episode.
_PROFILES: dict[tuple[Any, ...], np.ndarray] = {}
_PROFILE_CACHE = 4096


def canonical_task(task: Mapping[str, Any]) -> str:
    """The task as canonical JSON (game, seed, split, parameters): a cache key part."""
    return json.dumps(
        {k: task.get(k) for k in ("game", "seed", "split", "params", "reward_mode")}, sort_keys=True, default=str
    )


class Equilibrium(CoopPolicy):
    """The game-theoretic oracle (see the module docstring): the stage equilibrium of the env's mode."""

    name = "equilibrium"

    def __init__(self, agent: int, task: Mapping[str, Any], seed: int | None = None) -> None:
        super().__init__(agent, task, seed)
        self.game = build_game(task["game"], task["params"])
        episode_seed = task["seed"]
        self.game.reset(episode_seed if task["split"] == "test" else [episode_seed, 1])
        self.mode = self.game.reward_mode
        self.rounds_seen = 0
        self.profile: np.ndarray | None = None

    def _catch_up(self, info: Mapping[str, Any]) -> None:
        # rounds played so far: "round" in the text view (where "turn" counts answers), else "turn"
        played = int(info.get("round", info.get("turn", 0)))
        if played > self.rounds_seen and info.get("actions") is not None:
            self.game.step(np.asarray(info["actions"], dtype=np.float32))
            self.rounds_seen = played

    def _lower(self) -> np.ndarray | None:
        return None

    def act(self, info: Mapping[str, Any]) -> float:
        self._catch_up(info)
        # Every agent of an episode that runs this policy computes the same profile from the same
        # public history: the first computes it, the others read it (the cache key is that history).
        key = (type(self).__name__, canonical_task(self.task), tuple(h.tobytes() for h in self.game.history))
        profile = _PROFILES.get(key)
        if profile is None:
            profile = stage_equilibrium(self.game, self.mode, self.profile, lower=self._lower())
            if len(_PROFILES) >= _PROFILE_CACHE:
                _PROFILES.pop(next(iter(_PROFILES)))
            _PROFILES[key] = profile
        self.profile = profile.copy()
        return float(self.profile[self.agent])


class TrustAware(Equilibrium):
    """The trust-aware oracle: the stage equilibrium with every contribution kept at least ``2 / kappa``
    above its trust baseline (a signal ``tanh(kappa (a - baseline)) >= tanh 2 = 0.96``), so trust
    builds toward its ceiling and the integrated utility's weights grow with it; in games without
    trust it is :class:`Equilibrium`."""

    name = "trust_aware"

    def _lower(self) -> np.ndarray | None:
        if not self.game.trust_enabled:
            return None
        return self.game.baselines.astype(np.float64) + 2.0 / self.game.trust_params.kappa


#: Policy names for :func:`make_policy` and the CLI: ``constant:<share>`` sets the share.
POLICIES: dict[str, type[CoopPolicy]] = {
    "constant": Constant,
    "random": Random,
    "tit_for_tat": TitForTat,
    "equilibrium": Equilibrium,
    "trust_aware": TrustAware,
}


def make_policy(spec: str, agent: int, task: Mapping[str, Any], seed: int | None = None) -> CoopPolicy:
    """A policy from its name (``constant:0.8`` for a share)."""
    name, _, arg = spec.partition(":")
    cls = POLICIES.get(name)
    if cls is None:
        raise ConfigError(f"unknown coopetition policy {spec!r}; policies: {', '.join(POLICIES)} (constant:<share>).")
    if arg:
        if cls is not Constant:
            raise ConfigError(f"policy {name!r} takes no argument, got {spec!r}.")
        try:
            share = float(arg)
        except ValueError:
            raise ConfigError(f"constant:<share> needs a number in [0, 1], got {arg!r}.") from None
        return Constant(agent, task, seed, share=share)
    return cls(agent, task, seed)


@dataclass(frozen=True)
class Metrics:
    """The reference protocol's metrics over a set of episodes (means over episodes)."""

    episodes: int
    mean_return: float
    mean_final_trust: float
    cooperation_rate: float
    mean_length: float
    per_agent_return: tuple[float, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "mean_return": self.mean_return,
            "mean_final_trust": self.mean_final_trust,
            "cooperation_rate": self.cooperation_rate,
            "mean_length": self.mean_length,
            "per_agent_return": list(self.per_agent_return),
        }


def evaluate(
    env_id: str,
    policy: str | Callable[[int, Mapping[str, Any], int | None], CoopPolicy],
    seeds: Sequence[int],
    **env_kwargs: Any,
) -> Metrics:
    """Play every agent with ``policy`` on the Parallel view for each seed; the protocol's metrics."""
    returns, trusts, rates, lengths = [], [], [], []
    for seed in seeds:
        env = make_parallel(env_id, **env_kwargs)
        try:
            _, infos = env.reset(seed=seed)
            agents = list(env.possible_agents)
            task = infos[agents[0]]["task"]
            policies = [
                make_policy(policy, i, task, seed * 1000 + i) if isinstance(policy, str) else policy(i, task, seed)
                for i in range(len(agents))
            ]
            total = np.zeros(len(agents))
            shares: list[float] = []
            endowments = np.asarray(task["endowments"], dtype=np.float64)
            while env.agents:
                actions = {a: np.asarray([policies[i].act(infos[a])], dtype=np.float32) for i, a in enumerate(agents)}
                _, rewards, _, _, infos = env.step(actions)
                total += [rewards[a] for a in agents]
                shares.extend(np.asarray(infos[agents[0]]["actions"], dtype=np.float64) / endowments)
            info = infos[agents[0]]
            returns.append(total)
            trusts.append(float(info["mean_trust"]))
            rates.append(float(np.mean(shares)) if shares else 0.0)
            lengths.append(int(info["turn"]))
        finally:
            env.close()
    per_agent = np.mean(np.asarray(returns), axis=0)
    return Metrics(
        episodes=len(seeds),
        mean_return=float(np.mean([r.sum() for r in returns])),
        mean_final_trust=float(np.mean(trusts)),
        cooperation_rate=float(np.mean(rates)),
        mean_length=float(np.mean(lengths)),
        per_agent_return=tuple(float(x) for x in per_agent),
    )


def mode_contribution(integrated_return: float, private_return: float) -> float:
    """The reference's reward-mode contribution ``(R_integrated - R_private) / R_integrated`` (NaN if 0)."""
    if integrated_return == 0:
        return math.nan
    return (integrated_return - private_return) / integrated_return
