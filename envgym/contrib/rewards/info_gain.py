"""IGPO turn-level information gain (Wang et al., 2025): :class:`InfoGainHook` and its helpers."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from envgym.rewards.wrappers.base import RewardLayer
from envgym.rubric import RubricError, RubricSpec


@dataclass(frozen=True, slots=True)
class InfoGainQuery:
    """What an information-gain scorer sees: the task and the turns so far.

    Attributes:
        task: ``info["task"]`` (its ``goal``, and the ground truth where the env exposes it).
        turns: ``(action_text, observation)`` for every step so far, oldest first.
    """

    task: Mapping[str, Any]
    turns: tuple[tuple[str, str], ...]

    @property
    def turn(self) -> int:
        return len(self.turns)


#: ``scorer(query) -> probability`` that the policy produces the ground-truth answer now.
Scorer = Callable[[InfoGainQuery], float]


def _probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise RubricError(f"{where}: expected a probability in [0, 1], got {value!r}.")
    return float(value)


def information_gain(probabilities: Sequence[float]) -> list[float]:
    """IGPO turn rewards from ``[p_0, p_1, ..., p_T]``: ``[p_t - p_(t-1) for t = 1..T]``.

    ``p_t`` is the policy's probability of the ground-truth answer after turn ``t`` (``p_0``:
    before the first turn). The rewards telescope to ``p_T - p_0``, so repeating or padding turns
    earns nothing overall.
    """
    ps = [_probability(p, f"information_gain[{i}]") for i, p in enumerate(probabilities)]
    return [b - a for a, b in itertools.pairwise(ps)]


def answer_probability(token_logprobs: Sequence[float]) -> float:
    """IGPO's answer probability: ``exp(mean(log pi(a_j | ...)))`` over the answer's tokens."""
    if not token_logprobs:
        raise RubricError("answer_probability: expected the log-probabilities of at least one answer token, got none.")
    values = [float(v) for v in token_logprobs]
    if any(not math.isfinite(v) or v > 0 for v in values):
        raise RubricError(f"answer_probability: expected finite log-probabilities <= 0, got {token_logprobs!r}.")
    return math.exp(math.fsum(values) / len(values))


class InfoGainHook(RewardLayer):
    """Turn-level information gain (IGPO, Wang et al., 2025), filled by a trainer-provided scorer.

    The trainer passes (or later sets, :meth:`set_scorer`) a scorer that returns the policy's
    probability of the ground-truth answer given the turns so far (typically
    :func:`answer_probability` of teacher-forced answer tokens). The component on turn ``t`` is
    ``p_t - p_(t-1)``; on the step that terminates the episode it is 0 when
    ``final_turn="outcome"`` (IGPO scores the answer turn by its outcome instead) or the gain
    when ``final_turn="gain"``. Without a scorer the component is 0 and the hook only records
    the turns. Trainers that score whole trajectories after the rollout use
    :func:`information_gain` instead.

    Args:
        scorer: ``scorer(InfoGainQuery) -> probability`` or ``None``.
        final_turn: ``"outcome"`` or ``"gain"``.
        name: component name (default ``info_gain_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "info_gain_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        scorer: Scorer | None = None,
        final_turn: str = "outcome",
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        if final_turn not in ("outcome", "gain"):
            raise RubricError(f"InfoGainHook final_turn must be 'outcome' or 'gain', got {final_turn!r}.")
        if scorer is not None and not callable(scorer):
            raise RubricError(f"InfoGainHook scorer must be a callable (InfoGainQuery) -> float, got {scorer!r}.")
        self.scorer = scorer
        self.final_turn = final_turn
        super().__init__(env, name=name, rubric=rubric)
        self._task: Mapping[str, Any] = {}
        self._turns: list[tuple[str, str]] = []
        self._p: float | None = None

    def set_scorer(self, scorer: Scorer | None) -> None:
        """Install (or remove) the scorer; takes effect from the next step."""
        if scorer is not None and not callable(scorer):
            raise RubricError(f"InfoGainHook scorer must be a callable (InfoGainQuery) -> float, got {scorer!r}.")
        self.scorer = scorer
        self._p = None

    @property
    def turns(self) -> tuple[tuple[str, str], ...]:
        """The ``(action_text, observation)`` turns of the current episode."""
        return tuple(self._turns)

    def _score(self, turns: Sequence[tuple[str, str]]) -> float:
        assert self.scorer is not None
        query = InfoGainQuery(task=self._task, turns=tuple(turns))
        return _probability(self.scorer(query), "InfoGainHook scorer")

    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        self._task = dict(info.get("task") or {})
        self._turns = []
        self._p = self._score(()) if self.scorer is not None else None

    def _component(
        self,
        action: Any,
        text: str,
        observation: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> float:
        before = list(self._turns)
        self._turns.append((text, str(observation)))
        if self.scorer is None:
            return 0.0
        if self._p is None:
            self._p = self._score(before)
        if terminated and self.final_turn == "outcome":
            return 0.0
        p = self._score(self._turns)
        gain = p - self._p
        self._p = p
        return gain
