"""``--agent`` specs on the command line: :mod:`envgym.rollout.specs` with usage errors.

Every command that takes ``--agent`` understands the same specs (``random[:SEED]``, ``oracle``,
``hf[:MODEL]``, ``openai:MODEL@URL``, ``human``); new kinds are added to
:data:`envgym.rollout.specs.AGENT_KINDS`.
"""

from __future__ import annotations

from typing import Any

import typer

from envgym.errors import ConfigError, UnknownAgentError
from envgym.rollout.specs import AGENT_KINDS, AgentKind, known_agent_specs, make_agent, split_agent_spec

__all__ = ["AGENT_KINDS", "AgentKind", "check_agent_spec", "known_agent_specs", "parse_agent_spec"]


def check_agent_spec(spec: str) -> None:
    """Validate ``spec``'s form without building the agent (no model loads)."""
    try:
        split_agent_spec(spec)
    except (UnknownAgentError, ConfigError) as err:
        raise typer.BadParameter(str(err), param_hint="--agent") from None


def parse_agent_spec(spec: str, *, seed: int = 0, **options: Any) -> Any:
    """Build the agent named by ``spec``.

    Raises:
        typer.BadParameter: an unknown kind (the message lists the known ones) or a bad argument.
    """
    check_agent_spec(spec)
    try:
        return make_agent(spec, seed=seed, **options)
    except (UnknownAgentError, ConfigError) as err:
        raise typer.BadParameter(str(err), param_hint="--agent") from None
