"""Agent specs: the one place where a string such as ``hf:smollm2`` becomes an :class:`Agent`.

A spec is ``kind`` or ``kind:argument``:

=====================  ==========================================================================
``random[:SEED]``      uniform over the admissible actions
``oracle``             the environment's solver (reads only the observation and info)
``hf[:MODEL]``         a transformers causal LM; ``MODEL`` is ``smollm2`` (default, the bundled
                       SmolLM2-135M-Instruct) or a local model folder
``openai:MODEL@URL``   any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, ...)
``human``              a person at the terminal
``module:Class``       your own :class:`~envgym.rollout.agent.Agent` subclass, imported from a
                       module on ``sys.path`` (``my_pkg.agents:Greedy``) ...
``path/file.py:Class`` ... or from a Python file (``./my_agent.py:Greedy``)
=====================  ==========================================================================

The kinds above win over a module of the same name (write such a module as a file path). Your
class gets the run's ``seed`` when its constructor takes one, and ``-O key=value`` options as
keyword arguments.

Agents live in ``envgym.agents``; the library reaches them by import path only (layers point one
way). The benchmark CLI, the trainer and ``envgym run`` all build agents here.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgym.errors import ConfigError, UnknownAgentError, suggest
from envgym.models import adapter_prompt
from envgym.rollout.agent import Agent, Policy, RandomAgent

__all__ = [
    "AGENT_KINDS",
    "IMPORT_KIND",
    "AgentKind",
    "agent_class",
    "agent_prompt",
    "known_agent_specs",
    "make_agent",
    "split_agent_spec",
]


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


_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z")
_QUALNAME = _MODULE  # Class or Outer.Inner
_import_lock = threading.Lock()


def _import_where(spec: str, where: str) -> Any:
    """The module named by the part of an import spec before ``:``: a file path or a module name."""
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where).expanduser()
        if not path.is_file():
            siblings = sorted(p.name for p in path.parent.glob("*.py")) if path.parent.is_dir() else []
            raise ConfigError(
                f"agent spec {spec!r}: no Python file {where!r} (from {Path.cwd()}).{suggest(path.name, siblings)} "
                "Write a file agent as path/to/file.py:Class."
            )
        if path.suffix != ".py":
            raise ConfigError(
                f"agent spec {spec!r}: {where!r} is not a Python file (.py); write path/to/file.py:Class."
            )
        path = path.resolve()
        # One module per file, under a name no other import uses; kept in sys.modules (pickling,
        # dataclasses and a second spec naming the same file need it there).
        name = f"_envgym_agent_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
        with _import_lock:
            module = sys.modules.get(name)
            if module is None:
                loader_spec = importlib.util.spec_from_file_location(name, path)
                if loader_spec is None or loader_spec.loader is None:  # pragma: no cover - a .py file always loads
                    raise ConfigError(f"agent spec {spec!r}: cannot load {where!r} as a Python module.")
                module = importlib.util.module_from_spec(loader_spec)
                sys.modules[name] = module
                try:
                    loader_spec.loader.exec_module(module)
                except BaseException as err:
                    del sys.modules[name]
                    raise ConfigError(
                        f"agent spec {spec!r}: running {where!r} failed: {type(err).__name__}: {err}"
                    ) from err
        return module
    try:
        found = importlib.util.find_spec(where)
    except (ImportError, ValueError):  # a parent package that is missing
        found = None
    if found is None:
        raise ConfigError(
            f"agent spec {spec!r}: no module {where!r} to import (not an agent kind either).{suggest(where, AGENT_KINDS)} "
            f"Known agents: {known_agent_specs()}; a module must be importable (on sys.path), a file written as "
            "path/to/file.py:Class."
        )
    try:
        return importlib.import_module(where)
    except Exception as err:
        raise ConfigError(f"agent spec {spec!r}: importing {where!r} failed: {type(err).__name__}: {err}") from err


def _defines_agent(owner: Any, value: Any) -> bool:
    """Whether ``value`` is a concrete Agent subclass defined in ``owner`` (not one it imports)."""
    if not (isinstance(value, type) and issubclass(value, Agent)) or inspect.isabstract(value):
        return False
    return not isinstance(owner, type(sys)) or value.__module__ == owner.__name__


def agent_class(spec: str) -> type[Agent]:
    """The :class:`Agent` subclass an import spec names (``module:Class`` or ``path/file.py:Class``).

    Raises:
        ConfigError: no such module or file, no such class (with "did you mean"), or not an agent.
    """
    where, _, qualname = spec.strip().rpartition(":")
    module = _import_where(spec, where.strip())
    obj: Any = module
    for part in qualname.split("."):
        if not hasattr(obj, part):
            members = [m for m in dir(obj) if not m.startswith("_")]
            agents = [m for m in members if _defines_agent(obj, getattr(obj, m))]
            raise ConfigError(
                f"agent spec {spec!r}: {where!r} has no {qualname!r}.{suggest(part, agents or members)} "
                f"Agent classes it holds: {', '.join(agents) or 'none'}."
            )
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, Agent)):
        what = f"the class {obj.__name__}" if isinstance(obj, type) else f"a {type(obj).__name__}"
        hint = (
            " It is a Policy (one episode's act(observation, info)): wrap it in a PolicyAgent subclass."
            if isinstance(obj, type) and issubclass(obj, Policy)
            else ""
        )
        raise ConfigError(
            f"agent spec {spec!r} names {what}, which is not an agent: expected a subclass of "
            f"envgym.rollout.Agent (act(batch) -> list[AgentOutput]).{hint}"
        )
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        raise ConfigError(f"agent spec {spec!r}: {obj.__name__} is abstract (it does not define {missing}).")
    return obj


def _imported(argument: str | None, seed: int, options: dict[str, Any]) -> Any:
    assert argument is not None
    cls = agent_class(argument)
    parameters = inspect.signature(cls).parameters
    fixed = {"seed": seed} if "seed" in parameters else {}
    return _construct(argument, cls, options, **fixed)


#: Specs that name your own agent class rather than a kind: ``module:Class``, ``path/file.py:Class``.
IMPORT_KIND = AgentKind(
    "import",
    "module:Class | path/to/file.py:Class",
    "your own Agent subclass, from an importable module or a Python file",
    _imported,
    True,
)


def _is_import_spec(text: str) -> bool:
    where, sep, qualname = text.rpartition(":")
    where = where.strip()
    if not sep or not where or not _QUALNAME.match(qualname.strip()):
        return False
    return where.endswith(".py") or "/" in where or "\\" in where or bool(_MODULE.match(where))


def known_agent_specs() -> str:
    """``"random[:SEED], oracle, ..."``: the accepted forms, for messages."""
    return ", ".join([*(kind.usage for kind in AGENT_KINDS.values()), IMPORT_KIND.usage])


def split_agent_spec(spec: str) -> tuple[AgentKind, str | None]:
    """Validate ``spec``'s form and return its kind and argument, building nothing.

    An import spec (``module:Class``, ``path/file.py:Class``) comes back as :data:`IMPORT_KIND`
    with the whole spec as its argument; its module is imported here and the class checked.

    Raises:
        UnknownAgentError: an unknown kind (the message lists the known ones).
        ConfigError: a missing or forbidden argument; an import spec naming no module, file or
            class, or a class that is not an agent.
    """
    if not isinstance(spec, str):
        raise ConfigError(f"an agent spec is a string such as 'random' or 'hf:smollm2', got {spec!r}.")
    text = spec.strip()
    name, sep, argument = text.partition(":")
    name = name.strip().lower()
    kind = AGENT_KINDS.get(name)
    if kind is None and _is_import_spec(text):
        agent_class(text)  # no such module, file or class, or not an agent: fail here
        return IMPORT_KIND, text
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
    return adapter_prompt(arg)


def make_agent(spec: str, *, seed: int = 0, **options: Any) -> Any:
    """Build the agent named by ``spec`` (``kind`` or ``kind:argument``).

    Args:
        spec: e.g. ``"random"``, ``"oracle"``, ``"hf:smollm2"``, ``"openai:MODEL@URL"``,
            ``"my_pkg.agents:Greedy"``, ``"./my_agent.py:Greedy"``.
        seed: run seed, used by agents that sample.
        **options: keyword arguments for the agent's constructor (``temperature=0.7`` ...).
    """
    kind, arg = split_agent_spec(spec)
    return kind.build(arg, seed, options)
