"""``--agent`` specs on the command line: :mod:`envgym.rollout.specs` with usage errors.

Every command that takes ``--agent`` understands the same specs (``random[:SEED]``, ``oracle``,
``hf[:MODEL]``, ``openai:MODEL@URL``, ``human``); new kinds are added to
:data:`envgym.rollout.specs.AGENT_KINDS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import click
import typer

from envgym.errors import ConfigError, UnknownAgentError
from envgym.rollout.prompting import PromptConfig
from envgym.rollout.specs import AGENT_KINDS, AgentKind, agent_prompt, known_agent_specs, make_agent, split_agent_spec

__all__ = [
    "AGENT_KINDS",
    "PROMPT_FLAGS",
    "AgentKind",
    "check_agent_spec",
    "known_agent_specs",
    "parse_agent_spec",
    "prompt_for_agent",
]


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


#: The prompt flags of ``envgym run`` and ``bench run``: command parameter -> the
#: :class:`PromptConfig` field it sets.
PROMPT_FLAGS: dict[str, str] = {
    "system_prompt": "system_prompt",
    "history": "history",
    "last_k": "last_k",
    "token_budget": "token_budget",
    "reply_tokens": "max_new_tokens",
    "stop_at_action": "stop_at_action",
    "goal_reminder": "goal_reminder",
}


def prompt_for_agent(spec: str, prompt: PromptConfig, flags: Mapping[str, str]) -> PromptConfig:
    """``prompt`` with the prompt the agent ``spec`` was trained with (a shipped LoRA adapter's
    record, see :func:`envgym.rollout.specs.agent_prompt`) in every field no flag set.

    Args:
        spec: the ``--agent`` spec.
        prompt: the prompt config built from the command's flags.
        flags: command parameter name -> the :class:`PromptConfig` field it sets (``reply_tokens``
            -> ``max_new_tokens``). A flag given on the command line (or through its environment
            variable) wins, even when it repeats the default (``--history full``).
    """
    try:
        defaults = agent_prompt(spec)
    except (UnknownAgentError, ConfigError) as err:
        raise typer.BadParameter(str(err), param_hint="--agent") from None
    if not defaults:
        return prompt
    context = click.get_current_context(silent=True)
    blank = PromptConfig()
    unset = (None, click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP)
    # A field set through a flag counts as set when the flag was given; any other field (one set
    # in code, or by a flag missing from ``flags``) when it differs from the default.
    given = {
        name
        for param, name in flags.items()
        if context is not None and context.get_parameter_source(param) not in unset
    }
    by_flag = {name for param, name in flags.items() if context is not None and param in context.params}
    explicit = given | {
        f.name
        for f in dataclasses.fields(PromptConfig)
        if f.name not in by_flag and getattr(prompt, f.name) != getattr(blank, f.name)
    }
    try:
        return prompt.with_defaults(defaults, explicit=explicit)
    except ConfigError as err:
        raise typer.BadParameter(
            f"the prompt recorded for {spec!r} is not valid: {err}", param_hint="--agent"
        ) from None
