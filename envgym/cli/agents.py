"""``--agent`` specs on the command line: :mod:`envgym.rollout.specs` with usage errors.

Every command that takes ``--agent`` understands the same specs (``random[:SEED]``, ``oracle``,
``hf[:MODEL]``, ``openai:MODEL@URL``, ``human``, and your own class as ``module:Class`` or
``path/file.py:Class``); new kinds are added to :data:`envgym.rollout.specs.AGENT_KINDS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

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


#: The prompt flags of ``envgym run``: command parameter -> the
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


def prompt_for_agent(
    spec: str, prompt: PromptConfig, flags: Mapping[str, str], ctx: typer.Context | None = None
) -> PromptConfig:
    """``prompt`` with the prompt the agent ``spec`` was trained with (a shipped LoRA adapter's
    record, see :func:`envgym.rollout.specs.agent_prompt`) in every field no flag set.

    Args:
        spec: the ``--agent`` spec.
        prompt: the prompt config built from the command's flags.
        flags: command parameter name -> the :class:`PromptConfig` field it sets (``reply_tokens``
            -> ``max_new_tokens``).
        ctx: the command's context. A flag given on the command line (or through its environment
            variable) counts as set, even when it repeats the default (``--history full``); any
            other field (or every field, without ``ctx``) counts as set when it is not the default.
    """
    try:
        defaults = agent_prompt(spec)
    except (UnknownAgentError, ConfigError) as err:
        raise typer.BadParameter(str(err), param_hint="--agent") from None
    if not defaults:
        return prompt
    params = ctx.params if ctx is not None else {}
    by_flag = {name: param for param, name in flags.items() if param in params}
    blank = PromptConfig()
    explicit = set()
    for f in dataclasses.fields(PromptConfig):
        param = by_flag.get(f.name)
        if param is None:
            if getattr(prompt, f.name) != getattr(blank, f.name):
                explicit.add(f.name)
        # By name: Typer carries its own copy of click, whose ParameterSource is another enum.
        elif getattr(ctx.get_parameter_source(param), "name", None) in ("COMMANDLINE", "ENVIRONMENT", "PROMPT"):
            explicit.add(f.name)
    try:
        return prompt.with_defaults(defaults, explicit=explicit)
    except ConfigError as err:
        raise typer.BadParameter(
            f"the prompt recorded for {spec!r} is not valid: {err}", param_hint="--agent"
        ) from None
