"""Oracle for the coopetition joint-action views (``envgym/Coop-<Name>-v0``, Gymnasium).

One controller sends every agent's contribution at once; the solver plays each agent with the
trust-aware equilibrium policy of the text views' oracle
(:class:`envgym.agents.coopetition.TrustAware`, see :mod:`envgym.agents.solvers.coopetition`)
and answers with the contributions as action text, two decimals each (``"12.50 30.00"``). The
joint view's ``info`` carries no ``actions`` entry (the joint observation holds them): the solver
passes the policies the contributions it sent last round, which is what the env played.
"""

from __future__ import annotations

from typing import Any

from envgym.agents.coopetition import TrustAware

from envgym.rollout import Policy

__all__ = ["Solver"]


class Solver(Policy):
    """The joint oracle for one episode of a coopetition joint-action view."""

    def __init__(self, env_id: str, seed: int | None) -> None:
        self.env_id = env_id
        self.seed = seed
        self._policies: list[TrustAware] = []
        self._last: list[float] | None = None

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        task = info["task"]
        if not self._policies:
            self._policies = [TrustAware(i, task, self.seed) for i in range(len(task["endowments"]))]
        seen = info if self._last is None else {**info, "actions": self._last}
        contributions = [round(min(max(p.act(seen), 0.0), p.endowment), 2) for p in self._policies]
        self._last = contributions
        return " ".join(f"{c:.2f}" for c in contributions)
