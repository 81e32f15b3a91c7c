"""``envgym webshop serve``: the WebShop store as a web site on this machine.

The server lives with the environment (``envgym.environments.webshop.server``) and is loaded by
name when the command runs, so ``envgym --help`` imports neither it nor FastAPI.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from envgym.cli._common import EXIT_USAGE, err_console, fail, handle_errors

__all__ = ["webshop_app"]

webshop_app = typer.Typer(
    name="webshop",
    help="The WebShop store: serve it over HTTP (what envgym/WebShop-Browser-v0 drives).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


@webshop_app.command("serve")
@handle_errors
def serve_command(
    # --host and --port read as `envgym leaderboard serve`'s (one help per long flag).
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 3000,
    catalogue_size: Annotated[
        int, typer.Option("--catalogue-size", help="Products in the generated catalogue.")
    ] = 10_000,
    catalogue_seed: Annotated[int, typer.Option("--catalogue-seed", help="Seed of the generated catalogue.")] = 0,
    split: Annotated[
        str, typer.Option("--split", help="Goals behind the fixed_N sessions: train, dev or test.")
    ] = "test",
    cache_dir: Annotated[
        str | None, typer.Option("--cache-dir", help="Search index cache folder (default: the envgym cache).")
    ] = None,
    items: Annotated[
        str | None, typer.Option("--items", help="WebShop's items_shuffle.json instead of the generated catalogue.")
    ] = None,
    attributes: Annotated[str | None, typer.Option("--attributes", help="WebShop's items_ins_v2.json.")] = None,
    human: Annotated[str | None, typer.Option("--human", help="WebShop's items_human_ins.json (the goals).")] = None,
) -> None:
    """Serve the WebShop store (one session per episode) with uvicorn until interrupted."""
    if split not in ("train", "dev", "test"):
        fail(f"--split must be train, dev or test, got {split!r}.", EXIT_USAGE)
    if not 20 <= catalogue_size <= 5_000_000:
        fail(f"--catalogue-size must be from 20 to 5,000,000, got {catalogue_size!r}.", EXIT_USAGE)
    server = importlib.import_module("envgym.environments.webshop.server")
    server.serve(
        host=host,
        port=port,
        catalogue_size=catalogue_size,
        catalogue_seed=catalogue_seed,
        split=split,
        cache_dir=cache_dir,
        items=items,
        attributes=attributes,
        human=human,
        announce=lambda line: err_console().print(line, markup=False, highlight=False),
    )
