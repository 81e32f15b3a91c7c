"""Oracle (solver) agents: one per environment, found by convention.

The solver of an environment whose class has ``name = "sokoban"`` lives in
``envgym.agents.solvers.sokoban`` as a :class:`envgym.rollout.Policy` subclass named ``Solver``,
constructed as ``Solver(env_id, seed)``. Solvers see only what any agent sees: the observation
text and ``info``.
"""

from __future__ import annotations

import importlib
import importlib.util

from envgym.errors import NotAvailableError
from envgym.registration import EnvSpec, list_envs, spec
from envgym.rollout import Policy, PolicyAgent

__all__ = ["OracleAgent", "load_solver"]


def _has_solver(env_spec: EnvSpec) -> bool:
    module, _, attribute = env_spec.entry_point.partition(":")
    try:
        name = getattr(getattr(importlib.import_module(module), attribute), "name", None)
    except (ImportError, AttributeError):
        return False
    return isinstance(name, str) and importlib.util.find_spec(f"envgym.agents.solvers.{name}") is not None


def load_solver(env_id: str) -> type[Policy]:
    """The solver class of ``env_id``'s environment (see the module docstring).

    Raises:
        NotAvailableError: the environment has no solver; the message names the ids of its
            family that have one.
    """
    env_spec = spec(env_id)
    env_cls = env_spec.load()
    name = getattr(env_cls, "name", None)
    if isinstance(name, str):
        try:
            module = importlib.import_module(f"envgym.agents.solvers.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"envgym.agents.solvers.{name}":
                raise  # the solver exists but imports something missing: say that, not "no solver"
            module = None
        if module is not None:
            return module.Solver
    where = f"envgym.agents.solvers.{name}" if isinstance(name, str) else "none: its class names no solver"
    others = sorted({s.id for s in list_envs(family=env_spec.family) if s.id != env_id and _has_solver(s)})
    shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
    raise NotAvailableError(
        f"no oracle solver for {env_id!r} ({env_cls.__name__}; looked for {where}). "
        + (f"Oracles in the {env_spec.family} family: {shown}." if others else f"No {env_spec.family} id has one.")
    )


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
