"""Potential-based progress shaping (Ng et al., 1999): ``gamma * Phi(s') - Phi(s)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from envgym.core import TextEnv
from envgym.errors import EnvContractError
from envgym.rewards.wrappers.base import RewardLayer, _finite
from envgym.rubric import (
    RubricError,
    RubricSpec,
)


class ProgressShaping(RewardLayer):
    """Potential-based shaping from the environment's progress (Ng, Harada and Russell, 1999).

    ``F(s, s') = gamma * Phi(s') - Phi(s)`` with ``Phi(s) = scale * progress(s)``, progress in
    [0, 1] read from ``info["progress"]``. Convention: ``Phi(terminal) = 0`` on the step that
    *terminates* the episode (a truncated step is not terminal: its state keeps its potential).
    Over an episode the discounted sum telescopes,
    ``sum_t gamma**t * F_t = gamma**T * Phi(s_T) - Phi(s_0)``, which is ``-Phi(s_0)`` for a
    terminated episode: it does not depend on the actions, so the optimal policy of the shaped
    reward is the optimal policy of the original one (use the trainer's discount as ``gamma``).
    Cycles cannot earn anything: going A -> B -> A nets ``(gamma - 1) * Phi`` <= 0.

    Args:
        gamma: discount, in (0, 1]; must equal the trainer's for exact policy invariance.
        scale: potential scale (> 0).
        name: component name (default ``shaping_reward``).
        rubric: wrapper-level rubric (default: the wrapped scalar plus this component).
    """

    component = "shaping_reward"

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        gamma: float = 0.99,
        scale: float = 1.0,
        name: str | None = None,
        rubric: RubricSpec | None = None,
    ) -> None:
        self.gamma = _finite(gamma, "ProgressShaping gamma")
        if not 0.0 < self.gamma <= 1.0:
            raise RubricError(f"ProgressShaping gamma must be in (0, 1], got {gamma!r}.")
        self.scale = _finite(scale, "ProgressShaping scale")
        if self.scale <= 0:
            raise RubricError(f"ProgressShaping scale must be > 0, got {scale!r}.")
        base = env.unwrapped
        if isinstance(base, TextEnv) and type(base).progress is TextEnv.progress:
            raise RubricError(
                f"ProgressShaping needs progress(), which {type(base).__name__} does not implement (it reports no "
                f"info['progress']). Use it on an environment that reports progress."
            )
        super().__init__(env, name=name, rubric=rubric)
        self._phi = 0.0

    def potential(self, info: Mapping[str, Any]) -> float:
        """``Phi`` of the state described by ``info``."""
        progress = info.get("progress")
        if progress is None:
            raise RubricError(
                f"ProgressShaping needs info['progress'] from {type(self.env.unwrapped).__name__}, which is missing."
            )
        if isinstance(progress, bool) or not isinstance(progress, (int, float)) or not 0.0 <= progress <= 1.0:
            raise EnvContractError(
                f"{type(self.env.unwrapped).__name__} reported info['progress']={progress!r}; expected a number in [0, 1]."
            )
        return self.scale * float(progress)

    def _on_reset(self, observation: Any, info: dict[str, Any]) -> None:
        self._phi = self.potential(info)

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
        phi_next = 0.0 if terminated else self.potential(info)
        shaped = self.gamma * phi_next - self._phi
        self._phi = phi_next
        return shaped
