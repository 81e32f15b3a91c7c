"""``envgym mcp serve ID``: an envgym env as an MCP server (the official SDK's low-level server).

The server's tools are the env's own (``info["tools"]``, OpenAI function schemas, served as MCP
tools with the same input schemas), plus ``reset`` (``seed``, ``task_id``: a new episode) and,
for envs whose actions are text, ``act`` (``action``: any action text, a message to a simulated
user as much as a tool call). A call's result is the observation text; its structured content
holds ``reward``, ``terminated``, ``truncated``, ``action_valid``, ``reward_components``,
``success`` and ``termination_reason``. An invalid action is a result with ``isError`` set, as
a malformed call is an invalid step in process.

Each MCP session gets its own env: a stdio server serves its one client (in either protocol
era); over streamable HTTP each ``Mcp-Session-Id`` has one. An episode is state, and the
stateless 2026-07-28 era of streamable HTTP has no session to hold it, so the HTTP server
answers the discovery probe with the handshake-era versions only: an SDK client in
``mode="auto"`` falls back to the ``initialize`` handshake and gets a session.
At most ``max_sessions`` envs live at once (the least recently used one is closed first) and
an env idle for ``idle_seconds`` is closed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from envgym._imports import optional
from envgym.errors import ConfigError
from envgym.registration import make
from envgym.spaces import Text

__all__ = ["EnvSessions", "HTTPServer", "build_server", "serve", "start_http"]

logger = logging.getLogger(__name__)

_PURPOSE = "envgym mcp serve"
#: Tools the server adds to the env's own.
RESET_TOOL = "reset"
ACT_TOOL = "act"
#: Characters of one action accepted through ``act``.
MAX_ACTION_CHARS = 200_000


@dataclass
class _Session:
    env: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    running: bool = False


class EnvSessions:
    """The envs of the live MCP sessions: one per session key, made on first use, closed when
    the session is evicted (``max_sessions``, least recently used first) or idle too long."""

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        max_sessions: int = 64,
        idle_seconds: float = 900.0,
    ) -> None:
        if not isinstance(max_sessions, int) or max_sessions < 1:
            raise ConfigError(f"max_sessions must be a positive integer, got {max_sessions!r}.")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.max_sessions = max_sessions
        self.idle_seconds = float(idle_seconds)
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> _Session:
        closing: list[_Session] = []
        with self._lock:
            now = time.monotonic()
            for other, session in list(self._sessions.items()):
                if other != key and now - session.last_used > self.idle_seconds:
                    closing.append(self._sessions.pop(other))
            session = self._sessions.get(key)
            if session is None:
                while len(self._sessions) >= self.max_sessions:
                    closing.append(self._sessions.popitem(last=False)[1])
                session = self._sessions[key] = _Session(make(self.env_id, **self.env_kwargs))
            self._sessions.move_to_end(key)
            session.last_used = now
        for old in closing:
            _close_quietly(old.env)
        return session

    def __len__(self) -> int:
        return len(self._sessions)

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), OrderedDict()
        for session in sessions:
            _close_quietly(session.env)


def _close_quietly(env: Any) -> None:
    try:
        env.close()
    except Exception:  # one env's failing close must not stop the others'
        logger.exception("closing a served env failed")


def _json_safe(value: Any) -> Any:
    """``value`` as plain JSON (numpy scalars and other objects become numbers or strings)."""
    return json.loads(json.dumps(value, default=lambda v: v.item() if hasattr(v, "item") else str(v)))


def _outcome(observation: Any, reward: float, terminated: bool, truncated: bool, info: Mapping[str, Any]) -> dict:
    return {
        "observation": observation if isinstance(observation, str) else json.dumps(_json_safe(observation)),
        "reward": float(reward) if math.isfinite(float(reward)) else None,
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "action_valid": bool(info.get("action_valid", True)),
        "reward_components": _json_safe(dict(info.get("reward_components", {}))),
        "success": bool(info.get("success", False)),
        "termination_reason": info.get("termination_reason"),
    }


def env_tools(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[list[dict[str, Any]], bool]:
    """The env's tools (``info["tools"]`` after a reset) and whether its actions are text."""
    env = make(env_id, **dict(env_kwargs or {}))
    try:
        _, info = env.reset(seed=0)
        tools = [tool for tool in info.get("tools") or [] if isinstance(tool, Mapping)]
        text_actions = isinstance(env.action_space, Text)
    finally:
        env.close()
    names = [tool.get("function", tool).get("name") for tool in tools]
    for reserved in (RESET_TOOL, ACT_TOOL):
        if reserved in names:
            raise ConfigError(f"{env_id} has a tool named {reserved!r}, which envgym mcp serve adds itself.")
    return [_json_safe(tool) for tool in tools], text_actions


def build_server(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    max_sessions: int = 64,
    idle_seconds: float = 900.0,
) -> tuple[Any, EnvSessions]:
    """The MCP server (``mcp.server.lowlevel.Server``) serving ``env_id`` over ``transport``, and
    its sessions."""
    types = optional("mcp.types", purpose=_PURPOSE)
    lowlevel = optional("mcp.server.lowlevel", purpose=_PURPOSE)
    version = optional("mcp_types.version", purpose=_PURPOSE, extra="mcp")
    anyio = optional("anyio", purpose=_PURPOSE, extra="mcp")
    tools, text_actions = env_tools(env_id, env_kwargs)
    sessions = EnvSessions(env_id, env_kwargs, max_sessions=max_sessions, idle_seconds=idle_seconds)
    listing = [
        types.Tool(
            name=RESET_TOOL,
            description=f"Start a new episode of {env_id}; returns the first observation.",
            input_schema={
                "type": "object",
                "properties": {"seed": {"type": "integer"}, "task_id": {"type": "string"}},
                "additionalProperties": False,
            },
        )
    ]
    if text_actions:
        listing.append(
            types.Tool(
                name=ACT_TOOL,
                description="Take one action in the episode (the env's own action text); returns the observation.",
                input_schema={
                    "type": "object",
                    "properties": {"action": {"type": "string", "maxLength": MAX_ACTION_CHARS}},
                    "required": ["action"],
                    "additionalProperties": False,
                },
            )
        )
    for tool in tools:
        function = tool.get("function", tool)
        listing.append(
            types.Tool(
                name=function["name"],
                description=function.get("description", ""),
                input_schema=dict(function.get("parameters") or {"type": "object"}),
            )
        )
    env_tool_names = {tool.name for tool in listing} - {RESET_TOOL, ACT_TOOL}

    def result(text: str, structured: Mapping[str, Any] | None = None, *, error: bool = False) -> Any:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=dict(structured) if structured is not None else None,
            is_error=error,
        )

    def session_key(ctx: Any) -> str | None:
        request = getattr(ctx, "request", None)
        if request is None:
            return "stdio"  # one client per stdio server
        return request.headers.get("mcp-session-id")

    def run_call(session: _Session, name: str, arguments: Mapping[str, Any]) -> Any:
        env = session.env
        if name == RESET_TOOL:
            seed = arguments.get("seed")
            options = {"task_id": arguments["task_id"]} if arguments.get("task_id") is not None else None
            try:
                observation, info = env.reset(seed=seed, options=options)
            except Exception as err:  # noqa: BLE001 - a bad seed or task id is the caller's to fix
                return result(f"reset failed: {type(err).__name__}: {err}", error=True)
            session.running = True
            return result(*_reset_outcome(observation, info))
        if not session.running:
            return result(f"No episode is running: call {RESET_TOOL}(seed) first.", error=True)
        if name == ACT_TOOL:
            action = arguments.get("action")
            if not isinstance(action, str) or len(action) > MAX_ACTION_CHARS:
                return result(f"act needs the action as a string of at most {MAX_ACTION_CHARS} characters.", error=True)
        else:
            action = json.dumps({"name": name, "arguments": dict(arguments)})
        observation, reward, terminated, truncated, info = env.step(action)
        outcome = _outcome(observation, reward, terminated, truncated, info)
        if terminated or truncated:
            session.running = False
        return result(outcome["observation"], outcome, error=not outcome["action_valid"])

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx: Any, params: Any) -> Any:
        name, arguments = params.name, dict(params.arguments or {})
        if name not in (RESET_TOOL, ACT_TOOL, *env_tool_names) or (name == ACT_TOOL and not text_actions):
            return result(f"Unknown tool {name!r}.", error=True)
        key = session_key(ctx)
        if key is None:
            return result(
                "This server keeps one episode per MCP session: connect with the initialize handshake "
                "(the SDK client's mode='auto' or 'legacy').",
                error=True,
            )
        session = await anyio.to_thread.run_sync(sessions.get, key)
        if not session.lock.acquire(blocking=False):
            return result("Another call of this session is still running: wait for its result.", error=True)
        try:
            return await anyio.to_thread.run_sync(run_call, session, name, arguments)
        finally:
            session.lock.release()

    async def discover(ctx: Any, params: Any) -> Any:
        # Handshake-era versions only: an episode needs a session (see the module docstring).
        return types.DiscoverResult(
            supported_versions=list(version.HANDSHAKE_PROTOCOL_VERSIONS),
            capabilities=server.get_capabilities(protocol_version=ctx.protocol_version),
        )

    server = lowlevel.Server(f"envgym {env_id}", on_list_tools=list_tools, on_call_tool=call_tool)
    if transport == "http":
        # Over stdio the connection is the session (either era); over HTTP only the handshake
        # era has one, so the discovery probe of a client is answered with those versions.
        server.add_request_handler("server/discover", types.RequestParams, discover)
    return server, sessions


def _reset_outcome(observation: Any, info: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    outcome = _outcome(observation, 0.0, False, False, info)
    task = info.get("task") or {}
    outcome["task"] = {key: task.get(key) for key in ("id", "goal", "split") if key in task}
    return outcome["observation"], outcome


class HTTPServer:
    """A streamable-HTTP MCP server on a bound socket, served by uvicorn from a thread."""

    def __init__(self, server: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        uvicorn = optional("uvicorn", purpose=_PURPOSE, extra="mcp")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: without it a small response waits for the client's
        # delayed ACK (~40 ms per call on Linux loopback, measured by benchmarks/perf/mcp_overhead.py).
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._socket.bind((host, port))
        except OSError as err:
            self._socket.close()
            raise ConfigError(f"cannot bind {host}:{port}: {err.strerror or err}.") from None
        self._socket.listen(256)
        self.host, self.port = host, self._socket.getsockname()[1]
        app = server.streamable_http_app(host=host)
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
        self._uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/mcp"

    def start(self, timeout: float = 30.0) -> HTTPServer:
        """Serve from a background thread; returns once the server accepts connections."""
        self._thread = threading.Thread(
            target=lambda: self._uvicorn.run(sockets=[self._socket]), name="envgym-mcp-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ConfigError(f"the MCP HTTP server did not start within {timeout:g} s.")
            time.sleep(0.005)
        return self

    def run(self) -> None:
        """Serve in this thread until SIGINT or SIGTERM."""
        self._uvicorn.run(sockets=[self._socket])

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._socket.close()


@contextlib.contextmanager
def start_http(
    env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, host: str = "127.0.0.1", port: int = 0, **options: Any
) -> Iterator[HTTPServer]:
    """Serve ``env_id`` over streamable HTTP from a background thread while the block runs."""
    server, sessions = build_server(env_id, env_kwargs, transport="http", **options)
    http = HTTPServer(server, host=host, port=port).start()
    try:
        yield http
    finally:
        http.stop()
        sessions.close()


def serve(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    ready: Callable[[str], None] | None = None,
    **options: Any,
) -> None:
    """Serve ``env_id`` as an MCP server until the client leaves (stdio) or a signal (HTTP).

    ``ready(where)`` is called once the server listens (``where``: ``"stdio"`` or the URL).
    """
    if transport not in ("stdio", "http"):
        raise ConfigError(f"transport must be 'stdio' or 'http', got {transport!r}.")
    server, sessions = build_server(env_id, env_kwargs, transport=transport, **options)
    try:
        if transport == "http":
            http = HTTPServer(server, host=host, port=port)
            if ready is not None:
                ready(http.url)
            http.run()
            return
        anyio = optional("anyio", purpose=_PURPOSE, extra="mcp")
        stdio = optional("mcp.server.stdio", purpose=_PURPOSE)

        async def run() -> None:
            async with stdio.stdio_server() as (read, write):
                if ready is not None:
                    ready("stdio")
                await server.run(read, write, server.create_initialization_options())

        anyio.run(run)
    finally:
        sessions.close()
