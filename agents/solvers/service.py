"""Oracle for ``envgym/Service-*``: dispatches to the domain's own solver.

Each domain's solver lives in ``envgym.agents.solvers.service_<domain>`` (a ``Solver`` policy that
sees only the observation text and ``info``); this one picks it from ``info["task"]["domain"]`` on
the first turn.
"""

from __future__ import annotations

import importlib
from typing import Any

from envgym.errors import NotAvailableError
from envgym.rollout import Policy

__all__ = ["Solver"]


class Solver(Policy):
    """The oracle of one service episode: the solver of its domain."""

    def __init__(self, env_id: str, seed: int | None) -> None:
        self.env_id = env_id
        self.seed = seed
        self._inner: Policy | None = None

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self._inner is None:
            domain = str(info["task"]["domain"])
            try:
                module = importlib.import_module(f"envgym.agents.solvers.service_{domain}")
            except ModuleNotFoundError as err:
                raise NotAvailableError(f"no oracle solver for the service domain {domain!r}.") from err
            self._inner = module.Solver(self.env_id, self.seed)
        return self._inner.act(observation, info)
