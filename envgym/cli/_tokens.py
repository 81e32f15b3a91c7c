"""``envgym leaderboard token``: make, list and revoke the tokens a leaderboard server accepts.

A token is shown once, when it is made: the database keeps its sha256 only. Submitter tokens
upload (``envgym leaderboard serve --require-token`` turns anonymous uploads away); admin tokens
also hide, unhide and delete entries and read the audit. Revoking a token keeps its name taken, so
the audit and the submissions it names stay unambiguous.

``create --out FILE`` writes the token into a new file readable by its owner only (mode 0600)
instead of stdout; clients read it back with ``--token-file FILE`` (a token given as ``--token``
on a command line is visible to every user of the machine in ``ps``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from envgym.cli._common import EXIT_FAILED, EXIT_USAGE, echo_json, err_console, fail, handle_errors, out_console
from envgym.cli._options import DbOption, JsonOption, out_option

__all__ = ["token_app"]

token_app = typer.Typer(
    name="token",
    help="Make, list and revoke the upload and admin tokens of a leaderboard database.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _store(db: str | None) -> Any:
    from envgym.leaderboard.store import Store

    return Store(db)


@token_app.command("create")
@handle_errors
def create_command(
    name: Annotated[
        str,
        typer.Argument(help="Who holds the token: shown as the submitter of their uploads.", show_default=False),
    ],
    admin: Annotated[
        bool, typer.Option("--admin", help="An admin token: may also hide and unhide entries and read the audit.")
    ] = False,
    db: DbOption = None,
    out: Annotated[
        Path | None, out_option("New file to write the token into (mode 0600) instead of printing it.")
    ] = None,
) -> None:
    """Make a token and print it on stdout (or write it to --out), once: only its hash is stored."""
    role = "admin" if admin else "submitter"
    if out is not None and (out.exists() or out.is_symlink()):
        fail(f"{out} exists; --out writes a new file only (so no token is written where others can read it).",
             EXIT_USAGE)  # fmt: skip
    with _store(db) as store:
        token = store.create_token(name, role=role)
        url = store.url
    if out is not None:
        _write_private(out, token)
        err_console().print(
            f"{role} token {escape(name)!r} for {escape(url)} written to {escape(str(out))} (mode 0600); "
            "give it to clients as --token-file (the database keeps only its hash)."
        )
        return
    typer.echo(token)  # alone on stdout: TOKEN=$(envgym leaderboard token create NAME)
    err_console().print(
        f"{role} token {escape(name)!r} for {escape(url)}: copy it now, it will not be shown again "
        "(the database keeps only its hash)."
    )


def _write_private(path: Path, token: str) -> None:
    """Write ``token`` into the new file ``path``, readable and writable by its owner only."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(token + "\n")


@token_app.command("list")
@handle_errors
def list_command(db: DbOption = None, as_json: JsonOption = False) -> None:
    """List the tokens: name, role, creation time and whether revoked (never the tokens)."""
    with _store(db) as store:
        tokens = store.tokens()
    if as_json:
        echo_json(tokens)
        return
    if not tokens:
        err_console().print("no tokens yet (envgym leaderboard token create NAME)")
        return
    table = Table(title_justify="left")
    for column in ("name", "role", "created", "status"):
        table.add_column(column)
    for t in tokens:
        table.add_row(escape(t["name"]), t["role"], t["created_at"], "revoked" if t["revoked"] else "active")
    out_console().print(table)


@token_app.command("revoke")
@handle_errors
def revoke_command(
    name: Annotated[str, typer.Argument(help="The token's name (see `token list`).", show_default=False)],
    db: DbOption = None,
) -> None:
    """Revoke a token: the server refuses it from the next request on (its name stays taken)."""
    with _store(db) as store:
        revoked = store.revoke_token(name)
        names = {t["name"]: t["revoked"] for t in store.tokens()}
    if not revoked:
        if names.get(name):
            fail(f"token {name!r} is revoked already.", EXIT_FAILED)
        active = ", ".join(n for n, gone in names.items() if not gone) or "none"
        fail(f"no token named {name!r}; active tokens: {active}.", EXIT_FAILED)
    err_console().print(f"revoked token {escape(name)!r}")
