"""A blocking client of one MCP server, for the synchronous world of ``gymnasium.Env``.

The official MCP SDK is asynchronous and its session must be entered and left by one task, so
:class:`MCPConnection` keeps a private event loop on a daemon thread: one task there holds the
SDK's ``Client`` open for the life of the connection, and each call (``list_tools``,
``call_tool``) is sent to that loop and waited for under a deadline. Every failure to talk to
the server (it cannot be started or reached, it died, it did not answer in time, it answered
something that is not MCP) is an :class:`MCPServerError`: an infrastructure failure, never an
agent's mistake.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shlex
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Self

from envgym._imports import optional
from envgym.errors import EnvgymError
from envgym.tools import MAX_NAME_CHARS

__all__ = ["MCPConnection", "MCPServerError", "MCPToolResult", "describe_server", "openai_tools"]

#: Characters of one tool result kept (a hostile or chatty server cannot flood the context).
MAX_RESULT_CHARS = 16_000
#: Tools kept from one listing, and characters of one tool's description.
MAX_TOOLS = 128
MAX_DESCRIPTION_CHARS = 2_000
_PURPOSE = "MCP servers as environments (envgym/MCP-v0)"


class MCPServerError(EnvgymError, ConnectionError):
    """The MCP server could not be started or reached, went away, did not answer in time, or
    answered something that is not MCP: an infrastructure failure (``retryable``), not a zero."""

    retryable = True


class MCPToolResult:
    """One tool call's result: ``text`` (capped at ``MAX_RESULT_CHARS``), ``is_error`` (the
    server's own flag), ``structured`` (its structured content, or ``None``)."""

    __slots__ = ("is_error", "structured", "text", "truncated")

    def __init__(self, text: str, *, is_error: bool, structured: Any, truncated: int) -> None:
        self.text = text
        self.is_error = is_error
        self.structured = structured
        self.truncated = truncated


def describe_server(server: str | Sequence[str]) -> str:
    """The server as a user wrote it, for messages."""
    return server if isinstance(server, str) else shlex.join(server)


def _transport(server: str | Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> Any:
    """The SDK transport for ``server``: a streamable-HTTP URL or a stdio command line."""
    if isinstance(server, str) and server.startswith(("http://", "https://")):
        http = optional("mcp.client.streamable_http", purpose=_PURPOSE)
        return http.streamable_http_client(server)
    command = shlex.split(server) if isinstance(server, str) else [str(part) for part in server]
    if not command:
        raise EnvgymError("server must be a command line (['python', '-m', 'my_server']) or an http(s) URL, got [].")
    stdio = optional("mcp.client.stdio", purpose=_PURPOSE)
    params = stdio.StdioServerParameters(command=command[0], args=command[1:], env=dict(env or {}), cwd=cwd)
    return stdio.stdio_client(params)


def _text_of(content: Sequence[Any]) -> str:
    """The text of a result's content blocks: text blocks as they are, others named by type."""
    parts = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None else f"[resource {getattr(resource, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    return "\n".join(parts)


def _cap(text: str, limit: int) -> tuple[str, int]:
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    return f"{text[:limit]}\n[... {cut} more characters cut]", cut


def openai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """MCP tool listings (``mcp.types.Tool``) as OpenAI function schemas (docs/tools.md).

    A tool whose ``inputSchema`` is not a JSON object schema gets an empty object schema (the
    server still validates what it receives); tools past the first ``MAX_TOOLS``, second
    tools of one name and names longer than ``envgym.tools.MAX_NAME_CHARS`` are dropped.
    """
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for tool in tools:
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS or name in seen or len(out) >= MAX_TOOLS:
            continue
        seen.add(name)
        schema = getattr(tool, "input_schema", None)
        if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
            schema = {"type": "object", "properties": {}}
        properties = schema.get("properties")
        parameters: dict[str, Any] = {
            "type": "object",
            "properties": dict(properties) if isinstance(properties, Mapping) else {},
        }
        required = schema.get("required")
        if isinstance(required, list) and all(isinstance(r, str) for r in required):
            parameters["required"] = list(required)
        if schema.get("additionalProperties") is False:
            parameters["additionalProperties"] = False
        description = getattr(tool, "description", None) or ""
        out.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": str(description)[:MAX_DESCRIPTION_CHARS],
                    "parameters": parameters,
                },
            }
        )
    return out


class MCPConnection:
    """One open session with an MCP server, driven from synchronous code.

    Args:
        server: a stdio command line (``["python", "-m", "my_server"]`` or one string) or a
            streamable-HTTP URL (``http://127.0.0.1:8000/mcp``).
        timeout: seconds allowed for each call.
        connect_timeout: seconds allowed for starting (stdio) or reaching (HTTP) the server and
            the MCP handshake.
        env: environment variables for a stdio server (over the SDK's safe defaults).
        cwd: the working directory of a stdio server.
        max_result_chars: characters of a tool result kept.
    """

    def __init__(
        self,
        server: str | Sequence[str],
        *,
        timeout: float = 30.0,
        connect_timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        max_result_chars: int = MAX_RESULT_CHARS,
    ) -> None:
        self.server = server
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.max_result_chars = int(max_result_chars)
        self._name = describe_server(server)
        client_module = optional("mcp.client.client", purpose=_PURPOSE)
        try:
            transport = _transport(server, env, cwd)
        except ValueError as err:
            raise MCPServerError(f"MCP server {self._name!r} cannot be started: {err}") from err
        self._client = client_module.Client(transport)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="envgym-mcp", daemon=True)
        self._thread.start()
        self._closing: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._holder = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
        try:
            self._ready.result(timeout=self.connect_timeout)
        except concurrent.futures.TimeoutError:
            self.close()
            raise MCPServerError(
                f"MCP server {self._name!r} did not complete the MCP handshake within {self.connect_timeout:g} s."
            ) from None
        except BaseException as err:
            self.close()
            raise MCPServerError(f"MCP server {self._name!r} could not be started or reached: {_reason(err)}") from err

    async def _hold(self) -> None:
        """Keep the SDK client open (entered and left by this one task) until ``close``."""
        self._closing = asyncio.Event()
        try:
            async with self._client:
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as err:
            if not self._ready.done():
                self._ready.set_exception(err)
            raise

    def _run(self, what: str, coroutine: Any) -> Any:
        if self._holder.done():
            coroutine.close()
            raise MCPServerError(f"MCP server {self._name!r} is gone (the session ended); {what} cannot run.")
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coroutine, self.timeout), self._loop)
        try:
            return future.result(timeout=self.timeout + 5.0)
        except (TimeoutError, concurrent.futures.TimeoutError):
            future.cancel()
            raise MCPServerError(
                f"MCP server {self._name!r}: {what} got no answer within {self.timeout:g} s."
            ) from None
        except EnvgymError:
            raise
        except Exception as err:
            raise MCPServerError(f"MCP server {self._name!r}: {what} failed: {_reason(err)}") from err

    def list_tools(self) -> list[Any]:
        """The server's tools (``mcp.types.Tool``), every page."""

        async def listing() -> list[Any]:
            tools: list[Any] = []
            cursor = None
            for _ in range(16):  # a server that pages forever is cut off
                page = await self._client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor or len(tools) >= MAX_TOOLS:
                    break
            return tools

        return self._run("tools/list", listing())

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> MCPToolResult:
        """Call one tool; a tool's own failure is a result with ``is_error`` (not an exception)."""
        result = self._run(f"tools/call {name!r}", self._client.call_tool(name, dict(arguments)))
        text, cut = _cap(_text_of(result.content or []), self.max_result_chars)
        return MCPToolResult(text, is_error=bool(result.is_error), structured=result.structured_content, truncated=cut)

    @property
    def alive(self) -> bool:
        return not self._holder.done()

    def close(self) -> None:
        """End the session (a stdio server is stopped) and the private loop. Idempotent."""
        if self._loop.is_closed():
            return
        if self._ready.done() and self._closing is not None and not self._holder.done():
            self._loop.call_soon_threadsafe(self._closing.set)  # a clean end: the SDK stops the server
        else:
            self._holder.cancel()  # still connecting: give up on it
        try:
            self._holder.result(timeout=self.timeout)
        except BaseException:  # noqa: BLE001 - the session is being dropped; its failure was reported already
            self._holder.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=self.timeout)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reason(err: BaseException) -> str:
    """The innermost useful message of an error (the SDK wraps failures in exception groups)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    text = (str(err) or type(err).__name__)[:1000]
    return f"{type(err).__name__}: {text}" if type(err).__name__ not in text else text
