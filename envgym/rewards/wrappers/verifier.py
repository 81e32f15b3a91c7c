"""The score of a verifier on the agent's answer as a reward component."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from envgym.core import extract_action
from envgym.errors import suggest
from envgym.rewards.verifiers import build_verifier
from envgym.rewards.wrappers.base import RewardLayer
from envgym.rubric import (
    RubricError,
    RubricSpec,
)


class VerifierReward(RewardLayer):
    """The score of a verifier (:mod:`envgym.rewards.verifiers`) on the agent's answer.

    The answer is the content of the last ``<answer>``/``<action>`` block (or the whole text);
    the reference is ``info["task"][reference]`` or ``reference(task)``. With ``when="terminal"``
    (default) only the step that terminates the episode is verified, so the reward is paid once.
    The verifier's result is put in ``info["verification"]``; an infrastructure failure (a judge
    backend down) scores 0 there with ``infrastructure: True`` so it is never a silent zero.

    Args:
        verifier: a verifier, e.g. ``NumericMatch(abs_tol=1e-6)``, or its config spec
            (``{"numeric": {"abs_tol": 1e-6}}``, built by :func:`~envgym.rewards.verifiers.build_verifier`).
        reference: task key or callable giving the reference answer.
        when: ``"terminal"`` or ``"every_step"``.
        answer_tags: tags whose last block is the answer.
        name: component name (default ``verifier_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "verifier_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        verifier: Any,
        *,
        reference: str | Callable[[Mapping[str, Any]], Any] = "answer",
        when: str = "terminal",
        answer_tags: Sequence[str] = ("answer", "action"),
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        if isinstance(verifier, (str, Mapping)):
            # The verifiers load on first use (a sandbox and an HTTP client): only for a spec.
            verifier = build_verifier(verifier)
        if not callable(getattr(verifier, "verify", None)):
            raise RubricError(
                f"VerifierReward: expected a verifier with .verify(candidate, reference), got {verifier!r}."
            )
        if when not in ("terminal", "every_step"):
            raise RubricError(f"VerifierReward when must be 'terminal' or 'every_step', got {when!r}.")
        if not (isinstance(reference, str) or callable(reference)):
            raise RubricError(f"VerifierReward reference must be a task key or a callable, got {reference!r}.")
        self.verifier = verifier
        self.reference = reference
        self.when = when
        self.answer_tags = tuple(answer_tags)
        super().__init__(env, name=name, rubric=rubric)
        self._task: Mapping[str, Any] = {}

    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        self._task = dict(info.get("task") or {})
        if isinstance(self.reference, str) and self.reference not in self._task:
            raise RubricError(
                f"VerifierReward: info['task'] has no {self.reference!r} key (keys: {', '.join(sorted(self._task))})."
                f"{suggest(self.reference, self._task)} Pass reference= the key holding the answer, or a callable."
            )

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
        if self.when == "terminal" and not terminated:
            return 0.0
        reference = self._task[self.reference] if isinstance(self.reference, str) else self.reference(self._task)
        result = self.verifier.verify(extract_action(text, self.answer_tags), reference)
        info["verification"] = result.as_dict()
        return float(result.score)
