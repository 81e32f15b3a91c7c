"""``envgym image build|run|list``: Docker images that serve one environment family.

The work lives in :mod:`envgym.serve.images` (loaded when a command runs, so ``envgym --help``
imports neither it nor the Docker tooling).
"""

from __future__ import annotations

import importlib
import json
import logging
import signal
import threading
from typing import Annotated

import typer

from envgym.cli._common import err_console, handle_errors
from envgym.cli._options import JsonOption

__all__ = ["image_app"]

image_app = typer.Typer(
    name="image",
    help="Docker images that serve an environment family with `envgym serve` (built here, no registry).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

_FAMILY = typer.Argument(help="The environment family (swe, gui, games, ...).", show_default=False)
_TAG = typer.Option("--tag", help="Image name (default: envgym-serve/FAMILY:latest).")


def _images():
    return importlib.import_module("envgym.serve.images")


def _progress_to_stderr() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")


@image_app.command("build")
@handle_errors
def build_command(
    family: Annotated[str, _FAMILY],
    tag: Annotated[str | None, _TAG] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Rebuild from scratch (no Docker layer cache) even when the inputs did not change."
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Build the image serving FAMILY from this machine's files alone (idempotent)."""
    _progress_to_stderr()
    images = _images()
    result = images.build(family, tag=tag, force=force)
    if as_json:
        typer.echo(json.dumps(images.describe(result)))
        return
    what = "built" if result.built else "up to date"
    typer.echo(f"{result.tag} {what}: {result.size_bytes / 1e6:.0f} MB, {result.seconds:.1f} s")


@image_app.command("run")
@handle_errors
def run_command(
    family: Annotated[str, _FAMILY],
    tag: Annotated[str | None, _TAG] = None,
    memory: Annotated[str | None, typer.Option("--memory", help="Memory limit (docker's syntax: 2g).")] = None,
    cpus: Annotated[float, typer.Option("--cpus", help="CPU limit.")] = 2.0,
    pids: Annotated[int, typer.Option("--pids", help="Most processes in the container.")] = 1024,
    network: Annotated[
        str,
        typer.Option(
            "--network",
            help="loopback (a free port of 127.0.0.1) or internal (a Docker network with no route out; "
            "the URL is the container's address, reached from this host only).",
        ),
    ] = "loopback",
) -> None:
    """Run the image of FAMILY on a free port of 127.0.0.1 until Ctrl-C; the container is removed."""
    _progress_to_stderr()
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with _images().running(family, tag=tag, memory=memory, cpus=cpus, pids=pids, network=network) as url:
            typer.echo(url)
            err_console().print(f"serving {family} at {url} (Ctrl-C stops and removes the container)", markup=False)
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
    finally:
        signal.signal(signal.SIGTERM, previous)


@image_app.command("list")
@handle_errors
def list_command() -> None:
    """Show the family images here, then the containers running from them."""
    images = _images()
    for row in images.family_images():
        typer.echo(f"{row['tag']}\t{row['family']}\t{row['id']}\t{row['size']}")
    for container in images.containers():
        typer.echo(f"container {container}")


@image_app.command("fetch")
@handle_errors
def fetch_command(family: Annotated[str, _FAMILY]) -> None:
    """Download the Debian packages FAMILY's image installs that the apt cache lacks (setup time: network, root)."""
    _progress_to_stderr()
    fetched = _images().fetch_debs(family)
    typer.echo(f"fetched {len(fetched)} packages" + (f": {' '.join(fetched)}" if fetched else " (all cached)"))
