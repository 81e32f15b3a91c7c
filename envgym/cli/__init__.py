"""The ``envgym`` command line.

Subcommands: ``list``, ``info``, ``play``, ``check``, ``run``, ``run-all``, ``bench``, ``train``, ``leaderboard``,
``webshop``, ``serve``, ``image``, ``mcp`` and ``new-family``. Results go to
stdout (``--json`` for machines), progress and messages to stderr. Exit codes: 0 ok, 1 failed
(a check or a run failed), 2 usage error (bad flag, unknown id, bad environment argument).

Entry point: ``envgym = "envgym.cli:main"``; ``python -m envgym.cli`` works too.
"""

from __future__ import annotations

from typing import Annotated

import typer

from envgym import __version__
from envgym.cli._bench import bench_app
from envgym.cli._catalog import info_command, list_command
from envgym.cli._check import check_command
from envgym.cli._image import image_app
from envgym.cli._leaderboard import leaderboard_app
from envgym.cli._mcp import mcp_app
from envgym.cli._newfamily import new_family_command
from envgym.cli._play import play_command
from envgym.cli._run import run_all_command, run_command
from envgym.cli._serve import serve_command
from envgym.cli._train import train_command
from envgym.cli._webshop import webshop_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="envgym",
    help="Gymnasium and PettingZoo text environments for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"envgym {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Gymnasium and PettingZoo text environments for LLM agents."""


app.command("list")(list_command)
app.command("info")(info_command)
app.command("play")(play_command)
app.command("check")(check_command)
app.command("run")(run_command)
app.command("run-all")(run_all_command)
app.add_typer(bench_app, name="bench")
app.command("train")(train_command)
app.add_typer(leaderboard_app, name="leaderboard")
app.add_typer(webshop_app, name="webshop")
app.add_typer(image_app, name="image")
app.add_typer(mcp_app, name="mcp")
app.command("new-family")(new_family_command)
app.command("serve")(serve_command)


def main() -> None:
    """Console-script entry point."""
    app()
