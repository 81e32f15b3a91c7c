"""``envgym mcp``: MCP both ways (docs/mcp.md).

``envgym mcp serve ID`` serves an envgym env as an MCP server (its tools, ``reset`` and, for
text envs, ``act``) over stdio (for an MCP host that starts it) or streamable HTTP. Over stdio,
stdout belongs to the protocol: everything else goes to stderr.
"""

from __future__ import annotations

from typing import Annotated

import typer

from envgym.cli._common import EXIT_USAGE, err_console, fail, handle_errors, parse_kwargs
from envgym.mcp import serve
from envgym.registration import spec

__all__ = ["mcp_app"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}

mcp_app = typer.Typer(
    name="mcp",
    help="MCP both ways: serve an envgym env as an MCP server (envgym/MCP-v0 makes any MCP server an env).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


@mcp_app.command("serve")
@handle_errors
def serve_command(
    env_id: Annotated[str, typer.Argument(help="A registered single-agent id to serve.", show_default=False)],
    transport: Annotated[str, typer.Option("--transport", help="stdio or http (streamable HTTP).")] = "stdio",
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    max_sessions: Annotated[
        int, typer.Option("--max-sessions", min=1, help="Most sessions at once (each holds one env).")
    ] = 64,
    idle_timeout: Annotated[
        float, typer.Option("--idle-timeout", help="Seconds without a message before a session is closed.")
    ] = 900.0,
    kwargs: Annotated[
        list[str] | None,
        typer.Option("--kwargs", help="Env arguments, key=value (repeatable).", show_default=False),
    ] = None,
) -> None:
    """Serve an envgym env as an MCP server: its tools, reset(seed) and act(action).

    `envgym mcp serve envgym/Service-Retail-v0` speaks MCP on stdin/stdout (an MCP host starts it);
    `--transport http --port 8000` serves http://127.0.0.1:8000/mcp. Each MCP session gets its own env.
    """
    if transport not in ("stdio", "http"):
        fail(f"--transport must be 'stdio' or 'http', got {transport!r}.", EXIT_USAGE)
    if spec(env_id).multi_agent:
        fail(f"{env_id} is a multi-agent env: envgym mcp serve serves single-agent ids.", EXIT_USAGE)
    console = err_console()
    if transport == "http" and host not in _LOOPBACK:
        console.print(
            f"[bold yellow]warning:[/] serving on {host}: anyone who reaches this address can play this env.",
            soft_wrap=True,
        )

    def ready(where: str) -> None:
        if where != "stdio":
            console.print(f"serving {env_id} over MCP at {where}  (Ctrl-C stops)", soft_wrap=True)

    serve(
        env_id,
        parse_kwargs(kwargs),
        transport=transport,  # type: ignore[arg-type]
        host=host,
        port=port,
        ready=ready,
        max_sessions=max_sessions,
        idle_seconds=idle_timeout,
    )
