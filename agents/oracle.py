"""Oracle (solver) agents: one per environment, found by convention.

The solver of an environment whose class has ``name = "sokoban"`` lives in
``envgym.agents.solvers.sokoban`` as a :class:`envgym.rollout.Policy` subclass named ``Solver``,
constructed as ``Solver(env_id, seed)``. Solvers see only what any agent sees: the observation
text and ``info``.
"""

from __future__ import annotations

import importlib

from envgym.errors import NotAvailableError
from envgym.registration import spec
from envgym.rollout import Policy, PolicyAgent

__all__ = ["OracleAgent", "load_solver"]


def load_solver(env_id: str) -> type[Policy]:
    env_cls = spec(env_id).load()
    name = getattr(env_cls, "name", None)
    try:
        module = importlib.import_module(f"envgym.agents.solvers.{name}")
    except ModuleNotFoundError as err:
        raise NotAvailableError(f"no oracle solver for {env_id!r} (looked for envgym.agents.solvers.{name}).") from err
    return module.Solver


class OracleAgent(PolicyAgent):
    """Plays every episode with its environment's solver."""

    def __init__(self) -> None:
        self._solvers: dict[str, type[Policy]] = {}
        super().__init__(self._make, name="oracle")

    def _make(self, env_id: str, seed: int | None) -> Policy:
        solver = self._solvers.get(env_id)
        if solver is None:
            solver = self._solvers[env_id] = load_solver(env_id)
        return solver(env_id, seed)
