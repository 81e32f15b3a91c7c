"""``envgym leaderboard``: bundle a bench run, verify it by replay, store it, serve and export the board.

The leaderboard's modules (SQLAlchemy, FastAPI, uvicorn) load only when a subcommand needs them,
so ``envgym --help`` stays fast and works without the ``leaderboard`` extra.

A run is ranked once: a bundle of episodes already on the board under another name is refused
(naming the entry); ``rename`` changes an entry's name. Tokens for a server (``submit --url``,
``rename --url``, ``delete --url``) come from ``--token-file`` or
``$ENVGYM_LEADERBOARD_TOKEN``; ``--token`` works too but warns, since any user of the machine
sees a command line in ``ps``. Whatever a submitter wrote (agent and entry names) is printed
through :func:`envgym.leaderboard.pages.plain`, so no terminal escape reaches the admin's screen.
"""

from __future__ import annotations

import dataclasses
import getpass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from envgym.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    echo_json,
    err_console,
    fail,
    fmt_float,
    handle_errors,
    out_console,
    parse_kwargs,
)
from envgym.cli._options import DbOption, JsonOption, out_option
from envgym.cli._tokens import token_app
from envgym.leaderboard.bundle import (
    BUNDLE_SUFFIX,
    BundleError,
    check_agent_name,
    episodes_key,
    make_bundle,
    read_bundle,
    write_bundle,
)
from envgym.leaderboard.pages import export_site, plain
from envgym.leaderboard.verify import VerifyConfig, verify_bundle

__all__ = ["leaderboard_app"]

leaderboard_app = typer.Typer(
    name="leaderboard",
    help="Bundle bench runs, verify them by replay, rank them, and serve the leaderboard.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)
leaderboard_app.add_typer(token_app, name="token")

ReplayWorkersOption = Annotated[int, typer.Option("--workers", help="Processes replaying a bundle's episodes.")]
TOKEN_ENV = "ENVGYM_LEADERBOARD_TOKEN"
ServerUrlOption = Annotated[
    str | None,
    typer.Option("--url", help="A leaderboard server (http://127.0.0.1:8000) to act on instead of a local --db."),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar=TOKEN_ENV,
        help=f"Token for the server (or ${TOKEN_ENV}, or --token-file; on the command line it shows in `ps`).",
        show_default=False,
    ),
]
TokenFileOption = Annotated[
    Path | None,
    typer.Option("--token-file", help="File holding the token for the server (first line).", show_default=False),
]


def _cell(value: Any) -> str:
    """A submitter's text for a rich table cell: no control characters, no rich markup."""
    return escape(plain(value, newlines=False))


def _on_command_line(ctx: typer.Context, name: str) -> bool:
    # By name: Typer carries its own copy of click, whose ParameterSource is another enum.
    return getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"


def _token(ctx: typer.Context, token: str | None, token_file: Path | None) -> str | None:
    """The token from --token-file, $ENVGYM_LEADERBOARD_TOKEN or --token (which warns)."""
    if token_file is not None:
        if _on_command_line(ctx, "token"):
            fail("give the token once: --token-file or --token, not both.", EXIT_USAGE)
        try:
            text = token_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            fail(f"--token-file {str(token_file)!r} could not be read ({err}); it holds the token on its first line.",
                 EXIT_USAGE)  # fmt: skip
        found = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not found:
            fail(f"--token-file {str(token_file)!r} is empty; it holds the token on its first line.", EXIT_USAGE)
        return found
    if token and _on_command_line(ctx, "token"):
        err_console().print(
            f"warning: a token on the command line is visible to every user of this machine (ps); "
            f"use --token-file FILE or ${TOKEN_ENV} instead."
        )
    return token or None


def _store(db: str | None) -> Any:
    from envgym.leaderboard.store import Store

    return Store(db)


def _print_scores(title: str, scores: dict[str, Any]) -> None:
    table = Table(title=_cell(title), title_justify="left", title_style="bold")
    for column in ("entry", "environment", "success", "95% CI", "mean reward", "scored", "infra"):
        table.add_column(column, justify="left" if column in ("entry", "environment") else "right")
    for e in scores["entries"]:
        ci = "-" if e["ci_low"] is None else f"{e['ci_low']:.3f}-{e['ci_high']:.3f}"
        table.add_row(
            _cell(e["entry"]),
            _cell(e["env_id"]),
            fmt_float(e["success_rate"]),
            ci,
            fmt_float(e["mean_reward"]),
            f"{e['scored']}/{e['episodes']}",
            str(e["infra"]),
        )
    ci = "-" if scores["ci_low"] is None else f"{scores['ci_low']:.3f}-{scores['ci_high']:.3f}"
    table.add_row(
        "[bold]all[/]", "", fmt_float(scores["success_rate"]), ci, fmt_float(scores["mean_reward"]),
        f"{scores['scored']}/{scores['episodes']}", str(scores["infra"]),
    )  # fmt: skip
    out_console().print(table)
    passes = ", ".join(f"pass^{k} {v:.3f}" for k, v in scores["pass_k"].items())
    if passes:
        out_console().print(passes)


@leaderboard_app.command("submit")
@handle_errors
def submit_command(
    ctx: typer.Context,
    run: Annotated[
        Path,
        typer.Argument(help="A bench run folder (envgym bench run --out DIR), or a bundle file.", show_default=False),
    ],
    name: Annotated[
        str | None, typer.Option("--name", help="Agent name on the board (default: the agent spec).")
    ] = None,
    meta: Annotated[
        list[str] | None,
        typer.Option("--meta", help="Agent metadata key=value (model=..., scaffold=..., authors=...); repeatable."),
    ] = None,
    out: Annotated[Path | None, out_option("Bundle file to write (default: RUN/submission.envgym.jsonl.gz).")] = None,
    db: DbOption = None,
    url: ServerUrlOption = None,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    text_cap: Annotated[
        int, typer.Option("--text-cap", help="Characters kept of each observation and completion.")
    ] = 2000,
    as_json: JsonOption = False,
) -> None:
    """Bundle a bench run into one file; with --db verify it by replay and store it, with --url upload it.

    Given a bundle file instead of a run folder, stores (--db) or uploads (--url) that bundle.

    The bundle holds the manifest (suite, environment versions, agent, packages, git commit) and
    every episode's actions and claimed rewards; see `leaderboards/README.md`.
    """
    if db is not None and url is not None:
        fail("give --db (store here) or --url (upload to a server), not both.", EXIT_USAGE)
    token = _token(ctx, token, token_file) if url is not None else None
    metadata = parse_kwargs(meta, flag="--meta")
    if Path(run).is_file():  # an existing bundle: store or upload it as it is
        if name is not None or metadata or out is not None:
            fail("--name, --meta and --out apply when bundling a run folder, not to an existing bundle.", EXIT_USAGE)
        bundle = read_bundle(run)
        path = Path(run)
    else:
        bundle = make_bundle(run, name=name, metadata=metadata, text_cap=text_cap)
        path = write_bundle(bundle, out if out is not None else Path(run) / f"submission{BUNDLE_SUFFIX}")
        err_console().print(f"wrote {path} ({len(bundle.episodes)} episodes, hash {bundle.content_hash[:12]})")
    result: dict[str, Any] = {"bundle": str(path), "content_hash": bundle.content_hash}
    if db is not None:
        with _store(db) as store:
            # The same content (hash checked against the content) is the same entry: report the
            # stored one instead of replaying it again (as the server answers 200 "exists").
            existing = store.find(bundle.content_hash) if bundle.recompute_hash() == bundle.content_hash else None
            if existing is None:
                # The same episodes under another name are refused before the replay they would cost.
                _refuse_twin(store, bundle)
                verified = verify_bundle(bundle)
                stored, created = store.add(verified, bundle_size=path.stat().st_size)
                scores = verified.scores.to_dict()
            else:
                stored, created, scores = existing, False, existing
        result.update(status="created" if created else "exists", submission=stored)
        if not as_json:
            if created:
                note = f"verified by replay; stored as submission {stored['id']} in {store.url}"
            else:
                note = (
                    f"already stored as submission {stored['id']} in {store.url} (same content hash "
                    f"{bundle.content_hash[:12]}, submitted {stored['submitted_at']}"
                    f"{', hidden by a moderator' if stored.get('hidden') else ''}); not added again"
                )
            err_console().print(escape(note))
            _print_scores(f"{stored['agent_name']} on {stored['suite_id']}", scores)
    elif url is not None:
        result.update(_upload(path, url, token))
        if not as_json:
            err_console().print(_cell(f"{result['status']}: submission {result['submission']['id']} at {url}"))
    if as_json:
        echo_json(result)


def _refuse_twin(store: Any, bundle: Any) -> None:
    from envgym.leaderboard.store import DuplicateEpisodes

    try:
        key = episodes_key(bundle.suite_id, str(bundle.manifest["agent"]["spec"]), bundle.episodes)
    except (KeyError, TypeError, ValueError, AttributeError):
        return  # no suite or malformed episodes: the replay rejects the bundle with the reason
    twin = store.find_episodes(key)
    if twin is not None:
        raise DuplicateEpisodes(twin)


def _request(method: str, endpoint: str, what: str, **kwargs: Any) -> dict[str, Any]:
    """One request to a leaderboard server; its JSON answer, or exit 1 with the server's reason
    (neutralised for the terminal) when it refuses ``what``."""
    try:
        import httpx
    except ImportError:
        fail("talking to a server needs httpx: pip install 'envgym[leaderboard]'", EXIT_FAILED)
    try:
        response = httpx.request(method, endpoint, **kwargs)
    except httpx.HTTPError as err:
        fail(f"could not reach {endpoint}: {err}", EXIT_FAILED)
    try:
        data = response.json()
    except ValueError:
        data = {"reason": response.text[:500]}
    if response.status_code >= 400:
        reason = plain(data.get("reason", data) if isinstance(data, dict) else data, newlines=False)
        retry = response.headers.get("retry-after")
        later = f" (retry after {plain(retry)} s)" if retry else ""
        fail(f"the server refused the {what} ({response.status_code}): {reason}{later}", EXIT_FAILED)
    return data if isinstance(data, dict) else {"answer": data}


def _upload(path: Path, url: str, token: str | None = None) -> dict[str, Any]:
    headers = {"Content-Type": "application/gzip"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    endpoint = url.rstrip("/") + "/api/submissions"
    return _request("POST", endpoint, "bundle", content=path.read_bytes(), headers=headers, timeout=600)


@leaderboard_app.command("verify")
@handle_errors
def verify_command(
    bundle: Annotated[Path, typer.Argument(help="A bundle file.", show_default=False)],
    workers: ReplayWorkersOption = 1,
    as_json: JsonOption = False,
) -> None:
    """Verify a bundle by replaying every episode; exit 1 with the reason when it is rejected."""
    verified = verify_bundle(bundle, VerifyConfig(workers=workers, parallel_threshold=1 if workers > 1 else 256))
    scores = verified.scores.to_dict()
    if as_json:
        echo_json({"status": "verified", "content_hash": verified.bundle.content_hash, "scores": scores})
        return
    err_console().print(f"verified: {len(verified.outcomes)} episodes replayed, every claim matches")
    _print_scores(f"{verified.bundle.agent_name} on {verified.suite.id}", scores)


@leaderboard_app.command("list")
@handle_errors
def list_command(
    suite: Annotated[str | None, typer.Option("--suite", help="Only this suite id.")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the leaderboard of every suite (or one) in the terminal."""
    with _store(db) as store:
        suites = [s["id"] for s in store.suites()]
        if suite is not None:
            if suite not in suites:
                listed = ", ".join(plain(s, newlines=False) for s in suites) or "none"
                fail(f"no submissions for suite {plain(suite)!r}; suites with submissions: {listed}.")
            suites = [suite]
        boards = {s: store.leaderboard(s) for s in suites}
    if as_json:
        echo_json(boards)
        return
    if not boards:
        err_console().print("no submissions yet (envgym leaderboard submit RUN --db ...)")
    for suite_id, board in boards.items():
        entries = [e["entry"] for e in board[0]["entries"]]
        table = Table(title=_cell(suite_id), title_justify="left", title_style="bold")
        for column in ("#", "agent", "success", "95% CI", "mean reward", *entries, "infra", "id"):
            table.add_column(_cell(column), justify="left" if column == "agent" else "right")
        for b in board:
            per = {e["entry"]: e["success_rate"] for e in b["entries"]}
            ci = "-" if b["ci_low"] is None else f"{b['ci_low']:.3f}-{b['ci_high']:.3f}"
            table.add_row(
                str(b["rank"]), _cell(b["agent_name"]), fmt_float(b["success_rate"]), ci,
                fmt_float(b["mean_reward"]), *(fmt_float(per.get(e)) for e in entries), str(b["infra"]), str(b["id"]),
            )  # fmt: skip
        out_console().print(table)


@leaderboard_app.command("delete")
@handle_errors
def delete_command(
    ctx: typer.Context,
    submission_id: Annotated[int, typer.Argument(metavar="ID", help="The submission's id (see `list`).", min=0)],
    reason: Annotated[str, typer.Option("--reason", help="Why it is deleted (kept in the audit).")],
    db: DbOption = None,
    url: ServerUrlOption = None,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a submission with its scores and episodes, and write an audit row.

    With --db the database is changed directly (the audit names you as local:USER); with --url the
    server does it (DELETE /api/submissions/ID) for an admin token (--token-file or
    $ENVGYM_LEADERBOARD_TOKEN). To take an entry off the board but keep it, hide it instead
    (POST /api/submissions/ID/hide).
    """
    if db is not None and url is not None:
        fail("give --db (delete here) or --url (delete on a server), not both.", EXIT_USAGE)
    if not reason.strip() or len(reason) > 1000:
        fail(f"--reason must be 1 to 1000 characters (the audit keeps it), got {reason!r:.80}.", EXIT_USAGE)
    if url is not None:
        audit = _delete_remote(url, submission_id, reason.strip(), _token(ctx, token, token_file))
    else:
        with _store(db) as store:
            audit = store.delete(submission_id, reason=reason.strip(), by=f"local:{getpass.getuser()}")
            where = store.url
        if audit is None:
            fail(f"no submission {submission_id} in {where}; `envgym leaderboard list` shows the ids.", EXIT_FAILED)
    if as_json:
        echo_json({"submission_id": submission_id, "deleted": True, "audit": audit})
        return
    subject = audit.get("subject", "")
    err_console().print(_cell(f"deleted submission {submission_id} ({subject}); audit row {audit['id']}"))


@leaderboard_app.command("rename")
@handle_errors
def rename_command(
    ctx: typer.Context,
    submission_id: Annotated[int, typer.Argument(metavar="ID", help="The submission's id (see `list`).", min=0)],
    name: Annotated[str, typer.Argument(metavar="NAME", help="The agent's new name on the board.")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is renamed (kept in the audit).")] = "",
    db: DbOption = None,
    url: ServerUrlOption = None,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give a submission a new agent name (the audit keeps the old one).

    A run is ranked once: submitting it again under another --name is refused, and this is how
    its name changes. With --db the database is changed directly (the audit names you as
    local:USER); with --url the server does it (POST /api/submissions/ID/rename) for an admin
    token (--token-file or $ENVGYM_LEADERBOARD_TOKEN).
    """
    if db is not None and url is not None:
        fail("give --db (rename here) or --url (rename on a server), not both.", EXIT_USAGE)
    if len(reason) > 1000:
        fail(f"--reason must be at most 1000 characters, got {len(reason)}.", EXIT_USAGE)
    try:
        check_agent_name(name.strip())
    except BundleError as err:
        fail(f"NAME: {err}", EXIT_USAGE)
    if url is not None:
        tok = _token(ctx, token, token_file)
        if not tok:
            fail(f"renaming on a server needs an admin token: --token-file FILE or ${TOKEN_ENV}.", EXIT_USAGE)
        endpoint = f"{url.rstrip('/')}/api/submissions/{submission_id}/rename"
        data = _request("POST", endpoint, "rename", json={"name": name.strip(), "reason": reason.strip()},
                        headers={"Authorization": f"Bearer {tok}"}, timeout=60)  # fmt: skip
        audit = dict(data.get("audit") or {})
    else:
        with _store(db) as store:
            audit = store.rename(submission_id, name, reason=reason.strip(), by=f"local:{getpass.getuser()}")
            where = store.url
        if audit is None:
            fail(f"no submission {submission_id} in {where}; `envgym leaderboard list` shows the ids.", EXIT_FAILED)
    if as_json:
        echo_json({"submission_id": submission_id, "renamed": True, "audit": audit})
        return
    err_console().print(_cell(f"submission {submission_id}: {audit.get('reason', '')}; audit row {audit.get('id')}"))


def _delete_remote(url: str, submission_id: int, reason: str, token: str | None) -> dict[str, Any]:
    if not token:
        fail(f"deleting on a server needs an admin token: --token-file FILE or ${TOKEN_ENV}.", EXIT_USAGE)
    endpoint = f"{url.rstrip('/')}/api/submissions/{submission_id}"
    headers = {"Authorization": f"Bearer {token}"}
    data = _request("DELETE", endpoint, "delete", json={"reason": reason}, headers=headers, timeout=60)
    return dict(data.get("audit") or {})


@leaderboard_app.command("serve")
@handle_errors
def serve_command(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    db: DbOption = None,
    max_upload_mb: Annotated[float, typer.Option("--max-upload-mb", help="Largest accepted upload (MiB).")] = 32.0,
    workers: ReplayWorkersOption = 1,
    require_token: Annotated[
        bool,
        typer.Option(
            "--require-token", help="Accept uploads only with a token (Authorization: Bearer; see `token create`)."
        ),
    ] = False,
    uploads_per_minute: Annotated[
        int,
        typer.Option(
            "--uploads-per-minute", min=1, help="Uploads accepted per token in any 60 s (per server process)."
        ),
    ] = 30,
    anonymous_uploads_per_minute: Annotated[
        int,
        typer.Option(
            "--anonymous-uploads-per-minute",
            min=1,
            help="Uploads without a token accepted per client address in any 60 s (per server process).",
        ),
    ] = 20,
    verify_workers: Annotated[
        int, typer.Option("--verify-workers", min=1, help="Uploads verified at the same time (a process each).")
    ] = 2,
    verify_queue: Annotated[
        int,
        typer.Option("--verify-queue", min=0, help="Uploads that may wait for a verify worker (503 beyond)."),
    ] = 16,
    verify_timeout: Annotated[
        float | None,
        typer.Option(
            "--verify-timeout",
            help="Wall-clock seconds one upload's replay may take (422 beyond); its process is killed a minute "
            "later. Default: the verifier's budget.",
            show_default=False,
        ),
    ] = None,
    verify_memory_mb: Annotated[
        int,
        typer.Option(
            "--verify-memory-mb", min=0, help="Writable memory (MiB) of each process verifying an upload; 0: no limit."
        ),
    ] = 2048,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A host name clients use for this board (besides 127.0.0.1 and localhost); repeatable; '*': any.",
        ),
    ] = None,
    allow_anonymous_sandboxed: Annotated[
        bool,
        typer.Option(
            "--allow-anonymous-sandboxed",
            help="Take uploads without a token for suites whose replay runs agent commands in a sandbox (SWE).",
        ),
    ] = False,
    openapi: Annotated[
        bool, typer.Option("--openapi", help="Serve the OpenAPI schema at /api/openapi.json (no Swagger page).")
    ] = False,
) -> None:
    """Serve the leaderboard (pages, JSON API and uploads) with uvicorn.

    Uploads are verified in their own processes (--verify-workers at a time, --verify-queue
    waiting), never in the threads that serve pages. Beyond loopback, serve with --require-token
    and name the host clients use with --allowed-host.
    """
    try:
        import uvicorn
    except ImportError:
        fail("serving needs uvicorn: pip install 'envgym[leaderboard]'", EXIT_FAILED)
    from envgym.leaderboard.app import PoolConfig, beyond_loopback, create_app

    if max_upload_mb <= 0:
        fail(f"--max-upload-mb must be positive, got {max_upload_mb!r}.", EXIT_USAGE)
    hosts = list(allowed_host or [])
    if beyond_loopback(host):
        wildcard = host.strip("[]") in ("0.0.0.0", "::", "")
        if not wildcard:
            hosts.append(host)  # the address it listens on is a name clients use
        if not require_token:
            err_console().print(
                f"[bold yellow]warning:[/] serving on {escape(host)}, beyond this machine, without "
                "--require-token: anyone who reaches it can upload bundles (each costs verification time)."
            )
        if wildcard and not allowed_host:
            err_console().print(
                "[bold yellow]note:[/] requests must name 127.0.0.1 or localhost as their host; add the names "
                "clients use with --allowed-host NAME (DNS rebinding protection)."
            )
    if verify_timeout is not None and not 0 < verify_timeout < float("inf"):
        fail(f"--verify-timeout must be a positive number of seconds, got {verify_timeout!r}.", EXIT_USAGE)
    config = VerifyConfig(workers=workers)
    if verify_timeout is not None and hasattr(config, "budget_s"):
        limits = {"budget_s": verify_timeout}
        if getattr(config, "episode_timeout_s", 0) > verify_timeout:
            limits["episode_timeout_s"] = verify_timeout
        config = dataclasses.replace(config, **limits)
    budget = getattr(config, "budget_s", None) or verify_timeout or 600.0
    app = create_app(
        db,
        max_upload_bytes=int(max_upload_mb * 1024 * 1024),
        verify_config=config,
        require_token=require_token,
        uploads_per_minute=uploads_per_minute,
        anonymous_uploads_per_minute=anonymous_uploads_per_minute,
        pool=PoolConfig(
            workers=verify_workers,
            queue=verify_queue,
            timeout_s=float(budget) + 60.0,  # reading and storing, past the replay's own budget
            memory_mb=verify_memory_mb or None,
        ),
        allowed_hosts=hosts,
        allow_anonymous_sandboxed=allow_anonymous_sandboxed,
        openapi=openapi,
    )
    err_console().print(f"envgym leaderboard on http://{host}:{port} (database {escape(app.state.store.url)})")
    uvicorn.run(app, host=host, port=port, log_level="warning")


@leaderboard_app.command("export")
@handle_errors
def export_command(
    directory: Annotated[
        Path | None, typer.Argument(metavar="DIR", help="Folder to write the static site into.", show_default=False)
    ] = None,
    out: Annotated[Path | None, out_option("The same as DIR.")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write the leaderboard as a static site: every page, and the JSON API as .json files.

    Relative links throughout: open DIR/index.html from disk, or serve the folder with any static
    file server. DIR/api/ holds the documents the server's /api/ answers (suites.json,
    suites/ID/entries.json, entries/N.json, entries/N/episodes.json, entries/N/episodes/K.json).
    """
    if directory is not None and out is not None and Path(directory) != Path(out):
        fail(f"give the folder once: DIR {str(directory)!r} or --out {str(out)!r}.", EXIT_USAGE)
    target = directory if directory is not None else out
    if target is None:
        fail("give the folder to write: envgym leaderboard export DIR", EXIT_USAGE)
    if target.exists() and not target.is_dir():
        fail(f"{target} exists and is not a folder.", EXIT_USAGE)
    with _store(db) as store:
        written = export_site(store, target)
    pages = sum(1 for f in written if f.suffix == ".html")
    documents = sum(1 for f in written if f.suffix == ".json")
    size = sum(f.stat().st_size for f in written)
    if as_json:
        echo_json(
            {"out": str(target), "pages": pages, "api_documents": documents, "files": len(written), "bytes": size}
        )
        return
    err_console().print(
        f"wrote {pages} pages and {documents} JSON documents under {target} ({size / 1e6:.2f} MB); "
        f"open {target / 'index.html'}"
    )
