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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envgym.errors import ConfigError, UnknownAgentError, suggest
from envgym.rollout.agent import RandomAgent

__all__ = ["AGENT_KINDS", "AgentKind", "known_agent_specs", "make_agent", "split_agent_spec"]


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


def _random(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    if argument is None:
        return RandomAgent(seed=seed, **options)
    try:
        return RandomAgent(seed=int(argument), **options)
    except ValueError:
        raise ConfigError(f"random takes an integer seed after ':' (random:7), got {argument!r}.") from None


def _oracle(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    return _agents_module("oracle").OracleAgent(**options)


def _hf(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    return _agents_module("hf").HFAgent(model=argument or "smollm2", seed=seed, **options)


def _openai(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    module = _agents_module("openai_api")
    parsed = module.parse_openai_spec(argument or "")
    return module.OpenAIAgent(**parsed, seed=seed, **options)


def _human(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    return _agents_module("human").HumanAgent(**options)


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


def make_agent(spec: str, *, seed: int = 0, **options: Any) -> Any:
    """Build the agent named by ``spec`` (``kind`` or ``kind:argument``).

    Args:
        spec: e.g. ``"random"``, ``"oracle"``, ``"hf:smollm2"``, ``"openai:MODEL@URL"``.
        seed: run seed, used by agents that sample.
        **options: keyword arguments for the agent's constructor (``temperature=0.7`` ...).
    """
    kind, arg = split_agent_spec(spec)
    return kind.build(arg, seed, options)
