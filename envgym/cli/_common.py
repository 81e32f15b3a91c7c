"""Helpers shared by the ``envgym`` subcommands: consoles, errors, ids and ``--kwargs`` parsing.

Conventions (see STYLE.md): results go to stdout (``--json`` prints one JSON document there),
progress and messages to stderr; exit codes are 0 (ok), 1 (failed) and 2 (usage error).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import math
import os
import re
import socket
import sys
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from envgym.errors import ConfigError, EnvgymError, InvalidKwargsError, UnknownAgentError, UnknownEnvError, suggest
from envgym.registration import list_envs, spec
from envgym.rollout.specs import split_agent_spec

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "KIND_LABELS",
    "echo_json",
    "err_console",
    "exit_if_nothing_scored",
    "fail",
    "fmt_float",
    "fmt_success",
    "handle_errors",
    "jsonable",
    "out_console",
    "parse_kwargs",
    "probe_agent_server",
    "progress_bar",
    "read_system_prompt",
    "resolve_kind",
    "select_spec",
    "specs_for",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

#: CLI names of the registry kinds (``EnvSpec.kind`` -> label shown to people).
KIND_LABELS: dict[str, str] = {"gymnasium": "single", "aec": "aec", "parallel": "parallel"}
_KIND_BY_LABEL = {label: kind for kind, label in KIND_LABELS.items()}
_KIND_WORDS = {"gymnasium": "single-agent", "aec": "turn-based (AEC)", "parallel": "PettingZoo Parallel"}

_KWARG_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def out_console() -> Console:
    """Console for results (stdout). Piped output is not cut at 80 columns."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 200
    return console


def err_console() -> Console:
    """Console for progress, logs and errors (stderr)."""
    console = Console(stderr=True, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 200
    return console


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    err_console().print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def jsonable(value: Any) -> Any:
    """``value`` made JSON-serialisable (tuples become lists, unknown objects their repr)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v) for v in items]
    return repr(value)


def echo_json(document: Any) -> None:
    """Write one JSON document to stdout (no rich formatting, so it always parses)."""
    sys.stdout.write(json.dumps(jsonable(document), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def parse_kwargs(items: Sequence[str] | None, *, flag: str = "--kwargs") -> dict[str, Any]:
    """Parse ``key=value`` strings: values are JSON when they parse (``6``, ``true``, ``[1, 2]``,
    ``{"a": 1}``, ``null``), else plain strings (``difficulty=hard``).

    Raises:
        typer.BadParameter: an item without ``=``, a key that is not an identifier, or a key twice.
    """
    kwargs: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise typer.BadParameter(
                f"expected key=value (for example size=6 or slippery=true), got {item!r}.", param_hint=flag
            )
        if not _KWARG_KEY.match(key):
            raise typer.BadParameter(
                f"the key of {item!r} must be a Python identifier such as max_turns, got {key!r}.",
                param_hint=flag,
            )
        if key in kwargs:
            raise typer.BadParameter(f"{key!r} is given twice; pass each key once.", param_hint=flag)
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        kwargs[key] = value
    return kwargs


def read_system_prompt(value: str | None) -> str | None:
    """The text of ``--system-prompt``: the value itself, or the contents of FILE for ``@FILE``
    (UTF-8). A file that cannot be read is a usage error naming it."""
    if value is None or not value.startswith("@"):
        return value
    path = value[1:]
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise typer.BadParameter(
            f"cannot read the system prompt from {path!r}: {reason}.", param_hint="--system-prompt"
        ) from None


def resolve_kind(label: str | None) -> str | None:
    """Registry kind for a ``--kind`` label (``single``, ``aec``, ``parallel``); exits 2 when unknown."""
    if label is None:
        return None
    kind = _KIND_BY_LABEL.get(label.lower()) or (label if label in KIND_LABELS else None)
    if kind is None:
        options = sorted(_KIND_BY_LABEL)
        fail(f"--kind must be one of {', '.join(options)}, got {label!r}.{suggest(label, options)}", EXIT_USAGE)
    return kind


def specs_for(env_id: str) -> list[Any]:
    """Every registration of ``env_id`` (an id may be both single-agent and multi-agent).

    Exits with code 2 and a "did you mean" message when the id is unknown.
    """
    found = [s for s in list_envs() if s.id == env_id]
    if not found:
        try:
            found = [spec(env_id)]  # an address id (openenv:URL); an unknown id raises, with suggestions
        except UnknownEnvError as err:
            fail(str(err), EXIT_USAGE)
    order = {"gymnasium": 0, "aec": 1, "parallel": 2}
    return sorted(found, key=lambda s: order.get(s.kind, 3))


def select_spec(
    env_id: str, kind: str | None, *, allowed: Iterable[str] | None = None, command: str | None = None
) -> Any:
    """The one registration of ``env_id`` to act on.

    ``kind`` (a registry kind) picks among registrations; without it the single-agent one wins
    and a note on stderr names the other kinds. ``allowed`` restricts the kinds a command handles.
    ``command`` names a command without ``--kind`` (``envgym run``): its note says which
    registration it plays and where the others play, instead of pointing to a flag it lacks.
    """
    specs = specs_for(env_id)
    allowed_set = set(allowed) if allowed is not None else None
    if kind is not None:
        chosen = [s for s in specs if s.kind == kind]
        if not chosen:
            have = ", ".join(KIND_LABELS[s.kind] for s in specs)
            fail(f"{env_id!r} is not registered as {KIND_LABELS[kind]!r}; it is registered as: {have}.", EXIT_USAGE)
        spec = chosen[0]
    else:
        candidates = [s for s in specs if allowed_set is None or s.kind in allowed_set] or specs
        spec = candidates[0]
        others = [KIND_LABELS[s.kind] for s in specs if s is not spec]
        if others and command is None:
            err_console().print(
                f"note: {env_id} is also registered as {', '.join(others)}; pass --kind to choose.", soft_wrap=True
            )
        elif others:
            err_console().print(
                f"note: {env_id} is also registered as {', '.join(others)}; `{command}` plays its "
                f"{_KIND_WORDS[spec.kind]} registration; `envgym play --kind {others[0]} {env_id}` plays the "
                f"{others[0]} one.",
                soft_wrap=True,
            )
    if allowed_set is not None and spec.kind not in allowed_set:
        labels = ", ".join(KIND_LABELS[k] for k in sorted(allowed_set))
        fail(
            f"{env_id!r} is a {KIND_LABELS[spec.kind]} (multi-agent) environment; this command handles {labels} "
            "environments only.",
            EXIT_USAGE,
        )
    return spec


def progress_bar(console: Console | None = None) -> Progress:
    """A rich progress bar on stderr, disabled (silent) when stderr is not a terminal."""
    console = console or err_console()
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


#: How long the probe of an agent's server waits for a TCP connection before it lets the run go on.
PROBE_TIMEOUT_S = 5.0


def probe_agent_server(agent_spec: str, *, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Open (and close) one TCP connection to the server of an ``openai:MODEL@URL`` agent before
    a run; other agents have no server and pass.

    A refused connection, a host name that does not resolve or an unreachable network exits 1
    at once with one line saying so: without it, every episode would spend the agent's retries
    (over a minute) and end as an ``agent_error``. A probe that only times out lets the run go
    on (a slow network is not a dead server), with a note on stderr.
    """
    try:
        kind, argument = split_agent_spec(agent_spec)
    except EnvgymError:
        return  # the spec's own check reports it
    if kind.name != "openai" or argument is None:
        return
    # agents are reached by import path only (layers point one way)
    url = importlib.import_module("envgym.agents.openai_api").parse_openai_spec(argument)["base_url"]
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        fail(f"the server URL {url!r} of --agent {agent_spec!r} has a bad port.", EXIT_USAGE)
    host = parts.hostname or ""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except TimeoutError:
        err_console().print(
            f"note: {escape(url)} did not accept a connection within {timeout_s:g} s; running anyway.", soft_wrap=True
        )
    except socket.gaierror as err:
        fail(
            f"the agent's server {url} cannot be reached: host {host!r} does not resolve ({err.strerror}). "
            "Fix the URL in --agent openai:MODEL@URL."
        )
    except OSError as err:
        fail(
            f"the agent's server {url} cannot be reached: {err.strerror or err} ({host}:{port}). Is it running? "
            "Start it, or fix the URL in --agent openai:MODEL@URL."
        )


def exit_if_nothing_scored(episodes: int, scored: int, infra_errors: Mapping[str, int]) -> None:
    """Exit 1 after the results are shown when a run had episodes and every one of them ended by
    an infrastructure error (``env_error``, ``agent_error``, ``timeout``): nothing was measured, and
    scripts must not read that as a result."""
    if episodes and not scored:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(infra_errors.items()))
        fail(
            f"every episode ({episodes}) ended by an infrastructure error ({reasons}); nothing was scored. "
            "Their errors are in the records; run the same command again to retry them."
        )


#: How a table shows a success rate that is not defined (a game scored only by its returns), apart
#: from "-" (no scored episode yet).
NOT_DEFINED = "—"


def fmt_success(row: Mapping[str, Any], digits: int = 3) -> str:
    """``row["success_rate"]`` for a table cell: "—" where success is not defined for the
    environment (``row["success_defined"]`` false), never a 0 % it cannot score."""
    if row.get("success_defined") is False:
        return NOT_DEFINED
    return fmt_float(row.get("success_rate"), digits)


def fmt_float(value: float | None, digits: int = 3) -> str:
    """A float for a table cell (``-`` for missing values)."""
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


def handle_errors(func: Any) -> Any:
    """Decorate a command so that envgym's errors become one clean line and the right exit code.

    Usage errors (bad ``--kwargs`` or ``--agent``, unknown ids, bad environment arguments) exit 2;
    any other :class:`envgym.errors.EnvgymError` exits 1. Other exceptions keep their traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except typer.BadParameter as err:
            fail(err.format_message(), EXIT_USAGE)
        except (UnknownEnvError, UnknownAgentError, InvalidKwargsError, ConfigError) as err:
            fail(str(err), EXIT_USAGE)
        except EnvgymError as err:
            fail(str(err), EXIT_FAILED)

    wrapper.__doc__ = inspect.cleandoc(func.__doc__ or "")  # Typer shows the docstring as given
    return wrapper
