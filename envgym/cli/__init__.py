"""The ``envgym`` command line.

Subcommands: ``list``, ``info``, ``play``, ``check``, ``run``, ``run-all``, ``bench``, ``train``, ``leaderboard``,
``webshop``, ``serve``, ``image``, ``mcp`` and ``new-family``. Results go to
stdout (``--json`` for machines), progress and messages to stderr. Exit codes: 0 ok, 1 failed
(a check or a run failed), 2 usage error (bad flag, unknown id, bad environment argument).

Entry point: ``envgym = "envgym.cli:main"``; ``python -m envgym.cli`` works too.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from typing import Annotated, Any

import typer

from envgym import __version__

__all__ = ["COMMANDS", "app", "build_app", "main"]

#: Every subcommand in help order: name -> (its module, the command function or
#: Typer group it defines). :func:`main` imports only the module of the subcommand it runs (each
#: pulls in its own part of envgym); the full :data:`app` imports them all.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("envgym.cli._catalog", "list_command"),
    "info": ("envgym.cli._catalog", "info_command"),
    "play": ("envgym.cli._play", "play_command"),
    "check": ("envgym.cli._check", "check_command"),
    "run": ("envgym.cli._run", "run_command"),
    "run-all": ("envgym.cli._run", "run_all_command"),
    "bench": ("envgym.cli._bench", "bench_app"),
    "train": ("envgym.cli._train", "train_command"),
    "leaderboard": ("envgym.cli._leaderboard", "leaderboard_app"),
    "webshop": ("envgym.cli._webshop", "webshop_app"),
    "image": ("envgym.cli._image", "image_app"),
    "mcp": ("envgym.cli._mcp", "mcp_app"),
    "new-family": ("envgym.cli._newfamily", "new_family_command"),
    "serve": ("envgym.cli._serve", "serve_command"),
}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"envgym {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Gymnasium and PettingZoo text environments for LLM agents."""


def build_app(names: Iterable[str] | None = None) -> typer.Typer:
    """The ``envgym`` Typer app with the subcommands ``names`` (default: all of :data:`COMMANDS`)."""
    app = typer.Typer(
        name="envgym",
        help="Gymnasium and PettingZoo text environments for LLM agents.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_show_locals=False,
        rich_markup_mode="markdown",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    wanted = set(COMMANDS if names is None else names)
    for name, (module, attribute) in COMMANDS.items():
        if name not in wanted:
            continue
        target = getattr(importlib.import_module(module), attribute)
        if isinstance(target, typer.Typer):
            app.add_typer(target, name=name)
        else:
            app.command(name)(target)
    return app


def __getattr__(name: str) -> Any:
    # ``from envgym.cli import app``: the full app, built at its first use (then a module global)
    if name == "app":
        full = globals()["app"] = build_app()
        return full
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None, prog_name: str | None = None) -> None:
    """Console-script entry point: the app with only the subcommand named first on the command
    line (a quicker start: the others' modules stay unimported), or the full app for anything else
    (no subcommand, ``--help``, a misspelt name: its suggestions list them all); ``--version``
    alone needs no subcommand."""
    args = sys.argv[1:] if argv is None else list(argv)
    first = args[0] if args else None
    names = [first] if first in COMMANDS else [] if args == ["--version"] else None
    build_app(names)(args=args, prog_name=prog_name)
