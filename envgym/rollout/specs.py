"""Agent specs: the one place where a string such as ``hf:smollm2`` becomes an :class:`Agent`.

A spec is ``kind`` or ``kind:argument``:

=====================  ==========================================================================
``random[:SEED]``      uniform over the admissible actions
``oracle``             the environment's solver (reads only the observation and info)
``hf[:MODEL]``         a transformers causal LM; ``MODEL`` is ``smollm2`` (default, the bundled
                       SmolLM2-135M-Instruct) or a local model folder
``openai:MODEL@URL``   any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, ...)
``human``              a person at the terminal
=====================  ==========================================================================

Agents live in ``envgym.agents``; the library reaches them by import path only (layers point one
way). The benchmark CLI, the trainer and ``envgym run`` all build agents here.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envgym.errors import ConfigError, UnknownAgentError, suggest
from envgym.rollout.agent import RandomAgent

__all__ = ["AGENT_KINDS", "AgentKind", "agent_prompt", "known_agent_specs", "make_agent", "split_agent_spec"]


@dataclass(frozen=True)
class AgentKind:
    """One kind of agent a spec can name.

    Attributes:
        name: the part of the spec before ``:``.
        usage: how to write the spec, shown in errors and help.
        help: one line saying what the agent does.
        build: ``build(argument, seed, options) -> Agent``; ``argument`` is the text after ``:``
            or ``None``; ``options`` are keyword arguments for the agent's constructor.
        takes_argument: whether the text after ``:`` is required (``True``), optional (``None``)
            or forbidden (``False``).
    """

    name: str
    usage: str
    help: str
    build: Callable[[str | None, int, dict[str, Any]], Any]
    takes_argument: bool | None = False


def _agents_module(name: str) -> Any:
    return importlib.import_module(f"envgym.agents.{name}")


def _construct(kind: str, cls: Any, options: dict[str, Any], **fixed: Any) -> Any:
    """``cls(**fixed, **options)``, after checking ``options`` against its constructor: an unknown
    option (``-O tempreature=0.7``) or one the spec already sets is a :class:`ConfigError` naming
    the options the agent takes, not a ``TypeError`` from deep inside."""
    parameters = inspect.signature(cls).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    named = [
        name
        for name, p in parameters.items()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) and name not in fixed
    ]
    for key in options:
        if key in fixed:
            raise ConfigError(f"agent {kind!r}: option {key!r} is set by the agent spec or the run; leave it out.")
        if not accepts_any and key not in named:
            raise ConfigError(
                f"agent {kind!r} has no option {key!r}.{suggest(key, named)} Its options: {', '.join(named) or 'none'}."
            )
    return cls(**fixed, **options)


def _random(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    if argument is not None:
        try:
            seed = int(argument)
        except ValueError:
            raise ConfigError(f"random takes an integer seed after ':' (random:7), got {argument!r}.") from None
    return _construct("random", RandomAgent, options, seed=seed)


def _oracle(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    return _construct("oracle", _agents_module("oracle").OracleAgent, options)


def _hf(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    return _construct("hf", _agents_module("hf").HFAgent, options, model=argument or "smollm2", seed=seed)


def _openai(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    module = _agents_module("openai_api")
    parsed = module.parse_openai_spec(argument or "")
    return _construct("openai", module.OpenAIAgent, options, **parsed, seed=seed)


def _human(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    return _construct("human", _agents_module("human").HumanAgent, options)


#: Every agent kind a spec can name.
AGENT_KINDS: dict[str, AgentKind] = {
    kind.name: kind
    for kind in (
        AgentKind("random", "random[:SEED]", "uniform over the admissible actions (seeded)", _random, None),
        AgentKind("oracle", "oracle", "the environment's solver (reads only the observation and info)", _oracle),
        AgentKind(
            "hf",
            "hf[:MODEL]",
            "a transformers causal LM: smollm2 (bundled SmolLM2-135M-Instruct, default) or a local folder",
            _hf,
            None,
        ),
        AgentKind(
            "openai",
            "openai:MODEL@URL",
            "any OpenAI-compatible chat server, e.g. openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1",
            _openai,
            True,
        ),
        AgentKind("human", "human", "you, at the terminal", _human),
    )
}


def known_agent_specs() -> str:
    """``"random[:SEED], oracle, ..."``: the accepted forms, for messages."""
    return ", ".join(kind.usage for kind in AGENT_KINDS.values())


def split_agent_spec(spec: str) -> tuple[AgentKind, str | None]:
    """Validate ``spec``'s form and return its kind and argument, building nothing.

    Raises:
        UnknownAgentError: an unknown kind (the message lists the known ones).
        ConfigError: a missing or forbidden argument.
    """
    if not isinstance(spec, str):
        raise ConfigError(f"an agent spec is a string such as 'random' or 'hf:smollm2', got {spec!r}.")
    text = spec.strip()
    name, sep, argument = text.partition(":")
    name = name.strip().lower()
    kind = AGENT_KINDS.get(name)
    if kind is None:
        raise UnknownAgentError(
            f"unknown agent {spec!r}.{suggest(name, AGENT_KINDS)} Known agents: {known_agent_specs()}."
        )
    arg: str | None = argument.strip() if sep else None
    if arg == "":
        arg = None
    if kind.takes_argument is True and arg is None:
        raise ConfigError(f"agent {name!r} needs an argument: {kind.usage}.")
    if kind.takes_argument is False and arg is not None:
        raise ConfigError(f"agent {name!r} takes no argument, got {spec!r}; write it as {kind.usage!r}.")
    return kind, arg


def agent_prompt(spec: str) -> dict[str, Any]:
    """The prompt config fields the agent named by ``spec`` was trained with, read without
    building it: for ``hf:BASE+ADAPTER``, the adapter's record (:func:`envgym.models.adapter_prompt`);
    ``{}`` for every other agent. A run applies them to the prompt fields it leaves unset
    (:meth:`~envgym.rollout.prompting.PromptConfig.with_defaults`)."""
    kind, arg = split_agent_spec(spec)
    if kind.name != "hf" or arg is None:
        return {}
    from envgym.models import adapter_prompt

    return adapter_prompt(arg)


def make_agent(spec: str, *, seed: int = 0, **options: Any) -> Any:
    """Build the agent named by ``spec`` (``kind`` or ``kind:argument``).

    Args:
        spec: e.g. ``"random"``, ``"oracle"``, ``"hf:smollm2"``, ``"openai:MODEL@URL"``.
        seed: run seed, used by agents that sample.
        **options: keyword arguments for the agent's constructor (``temperature=0.7`` ...).
    """
    kind, arg = split_agent_spec(spec)
    return kind.build(arg, seed, options)
