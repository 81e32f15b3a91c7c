"""``--agent`` specs: the one place where a command-line string becomes an :class:`Agent`.

A spec is ``kind`` or ``kind:argument`` (``random``, ``random:7``, ``oracle``). Each kind maps to
a factory in :data:`AGENT_KINDS`; new kinds (``hf:<model>``, ``openai:<model>@<url>``) are added
there and every command that takes ``--agent`` understands them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer

from envgym.errors import suggest

__all__ = ["AGENT_KINDS", "AgentKind", "parse_agent_spec", "known_agent_specs"]


@dataclass(frozen=True)
class AgentKind:
    """One kind of agent accepted by ``--agent``.

    Attributes:
        name: the part of the spec before ``:``.
        usage: how to write the spec, shown in errors and help.
        help: one line saying what the agent does.
        build: ``build(argument, seed) -> Agent``; ``argument`` is the text after ``:`` or ``None``.
        takes_argument: whether the text after ``:`` is required (``True``), optional (``None``)
            or forbidden (``False``).
    """

    name: str
    usage: str
    help: str
    build: Callable[[str | None, int], Any]
    takes_argument: bool | None = False


def _random(argument: str | None, seed: int) -> Any:
    from envgym.rollout import RandomAgent  # noqa: PLC0415

    if argument is None:
        return RandomAgent(seed=seed)
    try:
        return RandomAgent(seed=int(argument))
    except ValueError:
        raise typer.BadParameter(
            f"random takes an integer seed after ':' (random:7), got {argument!r}.", param_hint="--agent"
        ) from None


def _oracle(argument: str | None, seed: int) -> Any:
    # The library reaches agents by string only (ARCHITECTURE.md: layers point one way).
    return importlib.import_module("envgym.agents.oracle").OracleAgent()


#: Every agent kind the CLI can build, by name.
AGENT_KINDS: dict[str, AgentKind] = {
    kind.name: kind
    for kind in (
        AgentKind(
            "random",
            "random[:SEED]",
            "uniform over the admissible actions (seeded by --seed or SEED)",
            _random,
            takes_argument=None,
        ),
        AgentKind("oracle", "oracle", "the environment's solver (reads only the observation and info)", _oracle),
    )
}


def known_agent_specs() -> str:
    """``"random[:SEED], oracle"``: the accepted forms, for messages."""
    return ", ".join(kind.usage for kind in AGENT_KINDS.values())


def parse_agent_spec(spec: str, *, seed: int = 0) -> Any:
    """Build the agent named by ``spec`` (``kind`` or ``kind:argument``).

    Args:
        spec: the ``--agent`` value.
        seed: run seed, used by agents that sample.

    Raises:
        typer.BadParameter: an unknown kind (the message lists the known ones) or a bad argument.
    """
    text = spec.strip()
    name, sep, argument = text.partition(":")
    name = name.strip().lower()
    kind = AGENT_KINDS.get(name)
    if kind is None:
        raise typer.BadParameter(
            f"unknown agent {spec!r}.{suggest(name, AGENT_KINDS)} Known agents: {known_agent_specs()}.",
            param_hint="--agent",
        )
    arg: str | None = argument.strip() if sep else None
    if arg == "":
        arg = None
    if kind.takes_argument is True and arg is None:
        raise typer.BadParameter(f"agent {name!r} needs an argument: {kind.usage}.", param_hint="--agent")
    if kind.takes_argument is False and arg is not None:
        raise typer.BadParameter(
            f"agent {name!r} takes no argument, got {spec!r}; write it as {kind.usage!r}.", param_hint="--agent"
        )
    return kind.build(arg, seed)
