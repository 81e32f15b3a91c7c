"""Oracle for the coopetition LLM views (``envgym/Coop-<Name>-Text-v0``): the trust-aware equilibrium.

The solver plays one agent (``info["agent"]``) with :class:`envgym.agents.coopetition.TrustAware`:
each round its part of the stage game's equilibrium in the env's reward mode, kept just above its
trust baseline where the game has trust (see that module). It sees only ``info``: the task (game,
parameters, seed, split), the round and the public joint contributions of the last round; and it
answers with the contribution as ``<action>x</action>``, to two decimals.
"""

from __future__ import annotations

from typing import Any

from envgym.agents.coopetition import CoopPolicy, TrustAware

from envgym.rollout import Policy

__all__ = ["Solver"]


class Solver(Policy):
    """One agent's oracle for one episode of a coopetition text view."""

    def __init__(self, env_id: str, seed: int | None) -> None:
        self.env_id = env_id
        self.seed = seed
        self._policy: CoopPolicy | None = None

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self._policy is None:
            index = int(str(info["agent"]).removeprefix("agent_"))
            self._policy = TrustAware(index, info["task"], self.seed)
        contribution = min(max(self._policy.act(info), 0.0), self._policy.endowment)
        return f"<action>{contribution:.2f}</action>"
