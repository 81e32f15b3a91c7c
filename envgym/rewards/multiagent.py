"""Multi-agent reward modes for PettingZoo environments: private, integrated, cooperative.

An agent's *payoff* is what the game gives it (``r_i``); its *reward* depends on the mode:

* ``private``: ``r_i`` (self-interested agents);
* ``integrated``: ``r_i + sum_(j != i) D[i][j] * r_j`` with an interdependence matrix ``D``
  (how much agent ``i`` cares about agent ``j``'s payoff; negative entries model rivalry);
* ``cooperative``: the mean over agents of the integrated rewards when ``D`` is given, else of
  the private payoffs (every agent gets the same team reward).

``D`` is given as an ``n x n`` nested sequence (rows and columns in ``possible_agents`` order)
or as ``{agent: {other: weight}}`` (missing entries are 0). It must be finite, with a zero
diagonal: an agent's own payoff already has weight 1, a diagonal entry would silently rescale it.

The mode is a first-class argument: environment authors call :func:`apply_reward_mode` in their
``step`` (a constructor argument ``reward_mode=``), and any PettingZoo environment can be wrapped
with :class:`ParallelRewardMode`, :class:`AECRewardMode` or :func:`with_reward_mode`. Nothing is
patched. Every agent's ``info["reward_components"]`` gets ``social_reward`` (``reward - r_i``, 0 in
private mode) and, when the environment reports no components, ``private_reward`` (``r_i``), so the
components of every agent sum to its reward; ``info["reward_mode"]`` names the mode.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from pettingzoo.utils.env import AECEnv, ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper, BaseWrapper

from envgym.errors import suggest
from envgym.rubric import RubricError

__all__ = [
    "REWARD_MODES",
    "AECRewardMode",
    "ParallelRewardMode",
    "apply_reward_mode",
    "interdependence_matrix",
    "with_reward_mode",
]

#: The reward modes, in order of how much agents care about each other.
REWARD_MODES: tuple[str, ...] = ("private", "integrated", "cooperative")

Matrix = dict[str, dict[str, float]]


def _weight(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise RubricError(f"interdependence {where}: expected a finite number, got {value!r}.")
    return float(value)


def interdependence_matrix(matrix: Any, agents: Sequence[str]) -> Matrix:
    """Validate ``D`` and return it as ``{agent: {other: weight}}`` over ``agents``.

    Raises:
        RubricError: not square ``n x n``, an unknown agent, a non-finite entry, or a non-zero
            diagonal.
    """
    agents = list(agents)
    n = len(agents)
    result: Matrix = {a: dict.fromkeys(agents, 0.0) for a in agents}
    if isinstance(matrix, Mapping):
        for row_agent, row in matrix.items():
            if row_agent not in result:
                raise RubricError(
                    f"interdependence: unknown agent {row_agent!r}.{suggest(str(row_agent), agents)} "
                    f"Agents: {', '.join(agents)}."
                )
            if not isinstance(row, Mapping):
                raise RubricError(f"interdependence[{row_agent!r}]: expected {{other_agent: weight}}, got {row!r}.")
            for col_agent, value in row.items():
                if col_agent not in result:
                    raise RubricError(
                        f"interdependence[{row_agent!r}]: unknown agent {col_agent!r}.{suggest(str(col_agent), agents)} "
                        f"Agents: {', '.join(agents)}."
                    )
                result[row_agent][col_agent] = _weight(value, f"[{row_agent!r}][{col_agent!r}]")
    else:
        rows = matrix.tolist() if hasattr(matrix, "tolist") else matrix
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or len(rows) != n:
            raise RubricError(
                f"interdependence: expected an {n} x {n} matrix (one row per agent: {', '.join(agents)}), got {matrix!r}."
            )
        for i, row in enumerate(rows):
            if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != n:
                raise RubricError(f"interdependence row {i}: expected {n} entries (a square matrix), got {row!r}.")
            for j, value in enumerate(row):
                result[agents[i]][agents[j]] = _weight(value, f"[{i}][{j}]")
    for agent in agents:
        if result[agent][agent] != 0.0:
            raise RubricError(
                f"interdependence[{agent!r}][{agent!r}] = {result[agent][agent]!r}: the diagonal must be 0 (an agent's "
                f"own payoff already has weight 1). Scale rewards with a rubric instead."
            )
    return result


def apply_reward_mode(rewards: Mapping[str, float], mode: str, matrix: Matrix | None = None) -> dict[str, float]:
    """The rewards of ``mode`` from the payoffs ``rewards`` of the agents present this step.

    Args:
        rewards: payoff of each agent (agents absent from the mapping count for nothing).
        mode: one of :data:`REWARD_MODES`.
        matrix: a validated interdependence matrix (required for ``integrated``).
    """
    if mode == "private":
        return {a: float(r) for a, r in rewards.items()}
    if mode == "integrated" or (mode == "cooperative" and matrix is not None):
        if matrix is None:
            raise RubricError("the integrated reward mode needs an interdependence matrix D.")
        base = {
            a: math.fsum([float(r), *(matrix[a][b] * float(rb) for b, rb in rewards.items() if b != a)])
            for a, r in rewards.items()
        }
    elif mode == "cooperative":
        base = {a: float(r) for a, r in rewards.items()}
    else:
        raise RubricError(
            f"reward mode must be one of {', '.join(REWARD_MODES)}, got {mode!r}.{suggest(str(mode), REWARD_MODES)}"
        )
    if mode == "integrated":
        return base
    if not base:
        return {}
    shared = math.fsum(base.values()) / len(base)
    return dict.fromkeys(base, shared)


def _configure(agents: Sequence[str], mode: str, interdependence: Any) -> Matrix | None:
    if mode not in REWARD_MODES:
        raise RubricError(
            f"reward mode must be one of {', '.join(REWARD_MODES)}, got {mode!r}.{suggest(str(mode), REWARD_MODES)}"
        )
    if interdependence is None:
        if mode == "integrated":
            raise RubricError(
                "the integrated reward mode needs interdependence=D: an n x n matrix, row i holding how much agent i "
                "cares about each other agent's payoff (zero diagonal)."
            )
        return None
    return interdependence_matrix(interdependence, agents)


def _annotate(
    infos: Mapping[str, Mapping[str, Any]], raw: Mapping[str, float], shaped: Mapping[str, float], mode: str
) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = {}
    for agent, info in infos.items():
        info = dict(info)
        components = dict(info.get("reward_components") or {})
        payoff = float(raw.get(agent, 0.0))
        if not components:
            components["private_reward"] = payoff
        components["social_reward"] = float(shaped.get(agent, payoff)) - payoff
        info["reward_components"] = components
        info["reward_mode"] = mode
        result[agent] = info
    return result


class ParallelRewardMode(BaseParallelWrapper):
    """Apply a reward mode to a PettingZoo ``ParallelEnv``.

    Args:
        env: the parallel environment.
        mode: ``private``, ``integrated`` or ``cooperative``.
        interdependence: the matrix ``D`` (required for ``integrated``; optional for
            ``cooperative``, which then shares the mean integrated reward).
    """

    def __init__(self, env: ParallelEnv[Any, Any, Any], mode: str, *, interdependence: Any = None) -> None:
        super().__init__(env)
        self.reward_mode = mode
        self.interdependence = _configure(list(env.possible_agents), mode, interdependence)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[Any, Any], dict[Any, dict[str, Any]]]:
        observations, infos = self.env.reset(seed=seed, options=options)
        zeros = dict.fromkeys(infos, 0.0)
        return observations, _annotate(infos, zeros, zeros, self.reward_mode)

    def step(
        self, actions: dict[Any, Any]
    ) -> tuple[dict[Any, Any], dict[Any, float], dict[Any, bool], dict[Any, bool], dict[Any, dict[str, Any]]]:
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        raw = {a: float(r) for a, r in rewards.items()}
        shaped = apply_reward_mode(raw, self.reward_mode, self.interdependence)
        return observations, shaped, terminations, truncations, _annotate(infos, raw, shaped, self.reward_mode)


class AECRewardMode(BaseWrapper):
    """Apply a reward mode to a PettingZoo ``AECEnv``.

    After every step the wrapped environment's per-step ``rewards`` are transformed and
    accumulated with the AEC convention (an agent's cumulative reward restarts when it acts),
    so ``last()`` returns the mode's cumulative reward.

    Args:
        env: the AEC environment.
        mode: ``private``, ``integrated`` or ``cooperative``.
        interdependence: the matrix ``D`` (see :class:`ParallelRewardMode`).
    """

    def __init__(self, env: AECEnv[Any, Any, Any], mode: str, *, interdependence: Any = None) -> None:
        super().__init__(env)
        self.reward_mode = mode
        self.interdependence = _configure(list(env.possible_agents), mode, interdependence)
        self.rewards: dict[Any, float] = {}
        self._cumulative_rewards: dict[Any, float] = {}
        self.infos: dict[Any, dict[str, Any]] = {}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)
        self._cumulative_rewards = {}
        self._sync(acting=None)

    def step(self, action: Any) -> None:
        acting = self.env.agent_selection
        self.env.step(action)
        self._sync(acting)

    def _sync(self, acting: Any) -> None:
        raw = {a: float(r) for a, r in self.env.rewards.items()}
        shaped = apply_reward_mode(raw, self.reward_mode, self.interdependence)
        cumulative = {a: (0.0 if a == acting else self._cumulative_rewards.get(a, 0.0)) for a in self.env.agents}
        for agent, value in shaped.items():
            if agent in cumulative:
                cumulative[agent] += value
        self.rewards = shaped
        self._cumulative_rewards = cumulative
        self.infos = _annotate(self.env.infos, raw, shaped, self.reward_mode)


def with_reward_mode(env: Any, mode: str, *, interdependence: Any = None) -> Any:
    """Wrap a PettingZoo ``ParallelEnv`` or ``AECEnv`` with the reward mode."""
    if isinstance(env, ParallelEnv):
        return ParallelRewardMode(env, mode, interdependence=interdependence)
    if isinstance(env, AECEnv):
        return AECRewardMode(env, mode, interdependence=interdependence)
    raise RubricError(f"with_reward_mode: expected a PettingZoo ParallelEnv or AECEnv, got {type(env).__name__}.")
