"""``envgym serve``: serve registered environments over WebSocket and HTTP (docs/serving.md).

The ids are checked before anything binds (an unknown id exits 2 with "did you mean"); the URLs
go to stderr once the port is bound (the real port with ``--port 0``); SIGINT or SIGTERM stops
the server cleanly: every session is told ``SERVER_STOPPING`` and every env is closed.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from envgym.cli._common import EXIT_USAGE, err_console, fail, handle_errors, parse_kwargs, resolve_kind
from envgym.cli._options import KindOption
from envgym.serve import DEFAULT_MAX_MESSAGE_BYTES, ServeConfig, Server

__all__ = ["serve_command"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _env_kwargs(items: list[str] | None, env_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``--kwargs`` items: ``ID={"size": 6}`` (a JSON object for one id), or ``key=value`` when one
    id is served."""
    per_id: dict[str, dict[str, Any]] = {}
    plain: list[str] = []
    for item in items or ():
        key, sep, raw = item.partition("=")
        if sep and "/" in key:
            try:
                value = json.loads(raw)
            except ValueError as err:
                raise typer.BadParameter(
                    f"{item!r}: the value after '=' must be a JSON object ({err}).", param_hint="--kwargs"
                ) from None
            if not isinstance(value, dict):
                raise typer.BadParameter(
                    f"{item!r}: the value after '=' must be a JSON object such as {{\"size\": 6}}.",
                    param_hint="--kwargs",
                )
            per_id.setdefault(key.strip(), {}).update(value)
        else:
            plain.append(item)
    if plain:
        if len(env_ids) != 1:
            raise typer.BadParameter(
                f"{plain[0]!r} names no id, and several are served: write ID='{{\"key\": value}}'.",
                param_hint="--kwargs",
            )
        per_id.setdefault(env_ids[0], {}).update(parse_kwargs(plain))
    return per_id


@handle_errors
def serve_command(
    env_ids: Annotated[
        list[str], typer.Argument(help="Registered ids to serve; the first is the one of /ws.", show_default=False)
    ],
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    max_sessions: Annotated[
        int, typer.Option("--max-sessions", min=1, help="Most sessions at once (each holds one env).")
    ] = 256,
    idle_timeout: Annotated[
        float, typer.Option("--idle-timeout", help="Seconds without a message before a session is closed.")
    ] = 300.0,
    step_timeout: Annotated[
        float, typer.Option("--step-timeout", help="Seconds one env call (build, reset, step) may take.")
    ] = 60.0,
    max_message_bytes: Annotated[
        int, typer.Option("--max-message-bytes", help="Largest frame or HTTP body read.")
    ] = DEFAULT_MAX_MESSAGE_BYTES,
    kwargs: Annotated[
        list[str] | None,
        typer.Option(
            "--kwargs",
            help="Env arguments: ID='{\"size\": 6}' (per id), or key=value when one id is served. Repeatable.",
            show_default=False,
        ),
    ] = None,
    lock_kwargs: Annotated[
        bool, typer.Option("--lock-kwargs", help="Refuse the clients' env_kwargs: only --kwargs apply.")
    ] = False,
    kind: KindOption = None,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn's log level.")] = "warning",
) -> None:
    """Serve environments over WebSocket and HTTP: envgym.remote and OpenEnv clients connect.

    `envgym serve envgym/Wordle-v0 --port 8000`; a client plays at ws://127.0.0.1:8000/envgym/Wordle-v0/ws
    (protocol: docs/serving.md). `--port 0` takes a free port (printed). `--host` other than 127.0.0.1
    puts the envs on the network. `--kind parallel` serves the PettingZoo registration of an id
    registered as both. Ctrl-C stops it and closes every env.
    """
    registry_kind = resolve_kind(kind)
    if registry_kind == "aec":
        fail("--kind aec: envgym serve serves single-agent and PettingZoo Parallel registrations.", EXIT_USAGE)
    label = {"gymnasium": "single", "parallel": "parallel"}.get(registry_kind or "")
    config = ServeConfig(
        host=host,
        port=port,
        max_sessions=max_sessions,
        idle_timeout=idle_timeout,
        step_timeout=step_timeout,
        max_message_bytes=max_message_bytes,
        env_kwargs=_env_kwargs(kwargs, env_ids),
        lock_kwargs=lock_kwargs,
        kinds={env_id: label for env_id in env_ids} if label else {},
    )
    server = Server(env_ids, config, log_level=log_level)
    console = err_console()
    if host not in _LOOPBACK:
        console.print(
            f"[bold yellow]warning:[/] serving on {host}: anyone who reaches this address can play these envs "
            "(browsers, sandboxes, containers run on this machine). Use 127.0.0.1 unless you mean it.",
            soft_wrap=True,
        )
        if not lock_kwargs:
            console.print(
                "[bold yellow]warning:[/] clients' env_kwargs reach the envs' constructors: add --lock-kwargs "
                "to build them only with --kwargs.",
                soft_wrap=True,
            )

    def ready(running: Server) -> None:
        for env_id in running.env_ids:
            console.print(f"serving {env_id} at {running.ws_url(env_id)}", soft_wrap=True)
        console.print(f"health: {running.url}/health  (Ctrl-C stops)", soft_wrap=True)

    server.run(ready=ready)
    console.print("stopped: every session closed.", soft_wrap=True)
