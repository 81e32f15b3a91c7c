"""The ASGI app of ``envgym serve``: routes, sessions, limits (docs/serving.md).

A plain ASGI callable (no web framework: the hot path is one ``receive``, one size check, one
``json.loads``, the env call on the session's thread, one ``json.dumps``, one ``send``). Every
limit is checked before the work it bounds: the session count before a session exists (so before
any env is built), a frame's size before it is parsed, a call's time while it runs (on its own
thread, so a slow env stalls no other session), a session's idle time by one reaper task.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from envgym import __version__
from envgym.errors import suggest
from envgym.serve._worker import Worker
from envgym.serve.codec import encode_space
from envgym.serve.session import ErrorCode, ServedEnv, ServeError, Session

__all__ = ["App"]

log = logging.getLogger("envgym.serve")

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

#: WebSocket close codes (RFC 6455) sent after a closing error.
_CLOSE_CODES = {
    ErrorCode.MESSAGE_TOO_BIG: 1009,
    ErrorCode.CAPACITY_REACHED: 1013,
    ErrorCode.SERVER_STOPPING: 1012,
    ErrorCode.STEP_TIMEOUT: 1011,
    ErrorCode.IDLE_TIMEOUT: 1000,
    ErrorCode.UNKNOWN_ENV: 1008,
}
#: HTTP status of an error reply.
_HTTP_STATUS = {
    ErrorCode.INVALID_JSON: 400,
    ErrorCode.UNKNOWN_TYPE: 400,
    ErrorCode.VALIDATION_ERROR: 422,
    ErrorCode.UNKNOWN_ENV: 404,
    ErrorCode.BAD_KWARGS: 422,
    ErrorCode.BAD_ACTION: 422,
    ErrorCode.NOT_RESET: 409,
    ErrorCode.ENV_CRASHED: 500,
    ErrorCode.STEP_TIMEOUT: 504,
    ErrorCode.CAPACITY_REACHED: 503,
    ErrorCode.MESSAGE_TOO_BIG: 413,
    ErrorCode.SERVER_STOPPING: 503,
}
_GET_ROUTES = ("health", "spec", "schema", "metadata")
_POST_ROUTES = ("reset", "step")
#: Fields of OpenEnv's HTTP ``/step`` body besides ``action`` that it ignores here: the server's own
#: per-call limit applies, and a request id has nothing to match in a one-call episode.
_OPENENV_STEP_EXTRAS = ("timeout_s", "request_id")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _Connection:
    """One WebSocket: its session and a send that refuses to write after the close."""

    __slots__ = ("closed", "send_raw", "session")

    def __init__(self, session: Session, send: Send) -> None:
        self.session = session
        self.send_raw = send
        self.closed = False

    async def send_text(self, text: str) -> None:
        if self.closed:
            return
        try:
            await self.send_raw({"type": "websocket.send", "text": text})
        except Exception:  # noqa: BLE001 - the peer is gone; the session ends on its disconnect event
            self.closed = True

    async def fail(self, err: ServeError) -> None:
        """Send the error; close the socket when the error closes the session."""
        await self.send_text(_dumps(err.frame()))
        if err.closes:
            await self.close(_CLOSE_CODES.get(err.code, 1000))

    async def close(self, code: int = 1000) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):  # the peer may be gone already
            await self.send_raw({"type": "websocket.close", "code": code})


class App:
    """The ASGI app serving ``served`` (ids in the order given; the first is the default).

    Args:
        served: the ids served, by id.
        max_sessions: most sessions at once (WebSocket sessions and HTTP reset/step calls); an env
            still closing after its session ended holds its slot until it is closed.
        idle_timeout: seconds without a message after which a session is closed.
        step_timeout: seconds one env call (build, reset, step, render) may take.
        max_message_bytes: largest frame or HTTP body read.
    """

    def __init__(
        self,
        served: Mapping[str, ServedEnv],
        *,
        max_sessions: int,
        idle_timeout: float,
        step_timeout: float,
        max_message_bytes: int,
    ) -> None:
        self.served = dict(served)
        self.default = next(iter(self.served))
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.step_timeout = step_timeout
        self.max_message_bytes = max_message_bytes
        self._slots = 0
        self._slots_lock = threading.Lock()
        self._connections: set[_Connection] = set()
        self._sessions: set[Session] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._stopping = False
        self._specs: dict[str, dict[str, Any]] = {}
        self._spec_locks: dict[str, asyncio.Lock] = {}

    # -- slots --------------------------------------------------------------------------------------
    @property
    def active_sessions(self) -> int:
        """Slots in use: live sessions plus envs still closing."""
        return self._slots

    def _take_slot(self) -> bool:
        with self._slots_lock:
            if self._slots >= self.max_sessions:
                return False
            self._slots += 1
            return True

    def _release_slot(self) -> None:
        with self._slots_lock:
            self._slots -= 1

    def _new_session(self, bound: str | None) -> Session:
        """A session holding a slot, or :class:`ServeError` when none is free or the server stops."""
        if self._stopping:
            raise ServeError(ErrorCode.SERVER_STOPPING, "the server is shutting down.")
        if not self._take_slot():
            raise ServeError(
                ErrorCode.CAPACITY_REACHED,
                f"the server runs its limit of {self.max_sessions} sessions: try again later.",
            )
        session = Session(
            self.served,
            bound=bound,
            default=self.default,
            step_timeout=self.step_timeout,
            on_released=self._release_slot,
        )
        self._sessions.add(session)
        return session

    def _end_session(self, session: Session) -> None:
        self._sessions.discard(session)
        session.close()

    # -- ASGI ---------------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket":
            await self._websocket(scope, receive, send)
        elif kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    def _route(self, path: str) -> tuple[str | None, str]:
        """``(id or None, endpoint)`` of a path such as ``/envgym/Wordle-v0/ws`` or ``/health``."""
        prefix, _, endpoint = path.rstrip("/").rpartition("/")
        return (prefix.lstrip("/") or None), endpoint

    def _unknown_env(self, env_id: str) -> ServeError:
        return ServeError(
            ErrorCode.UNKNOWN_ENV,
            f"this server does not serve {env_id!r}.{suggest(env_id, self.served)} Served: {', '.join(self.served)}.",
        )

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            event = await receive()
            if event["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif event["type"] == "lifespan.shutdown":
                await self.stop_sessions()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- WebSocket ----------------------------------------------------------------------------------
    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        event = await receive()
        if event["type"] != "websocket.connect":
            return
        env_id, endpoint = self._route(scope["path"])
        if endpoint != "ws":
            await send(
                {"type": "websocket.close", "code": 1008, "reason": "WebSocket sessions are at /ws and /<id>/ws"}
            )
            return
        await send({"type": "websocket.accept"})
        try:
            if env_id is not None and env_id not in self.served:
                raise self._unknown_env(env_id)
            session = self._new_session(env_id)
        except ServeError as err:
            probe = _Connection(None, send)  # type: ignore[arg-type]
            await probe.fail(err)
            await probe.close(_CLOSE_CODES.get(err.code, 1000))  # no session: nothing to keep
            return
        connection = _Connection(session, send)
        self._connections.add(connection)
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap())
        try:
            await self._play(connection, receive)
        finally:
            self._connections.discard(connection)
            self._end_session(session)

    async def _play(self, connection: _Connection, receive: Receive) -> None:
        session = connection.session
        limit = self.max_message_bytes
        while True:
            event = await receive()
            if event["type"] != "websocket.receive" or connection.closed:
                return
            text = event.get("text")
            if text is None:
                raw = event.get("bytes") or b""
                size = len(raw)
            else:
                raw = text
                size = len(text) if len(text) * 4 <= limit else len(text.encode("utf-8", "surrogatepass"))
            if size > limit:
                await connection.fail(
                    ServeError(
                        ErrorCode.MESSAGE_TOO_BIG,
                        f"a frame of {size} bytes is over the server's limit of {limit} bytes.",
                    )
                )
                return
            session.busy = True
            try:
                try:
                    message = json.loads(raw)
                except (ValueError, RecursionError) as err:
                    raise ServeError(ErrorCode.INVALID_JSON, f"the frame is not JSON: {err}") from None
                if type(message) is dict and message.get("type") == "close":
                    await connection.close(1000)
                    return
                reply = await session.handle(message)
            except ServeError as err:
                await connection.fail(err)
                if err.closes:
                    return
                continue
            except Exception as err:  # a bug here must not take the server down with it
                log.exception("a message raised in the server")
                await connection.fail(
                    ServeError(ErrorCode.ENV_CRASHED, f"the server failed on this message: {type(err).__name__}: {err}")
                )
                continue
            finally:
                session.busy = False
                session.last_active = time.monotonic()
            await connection.send_text(_dumps(reply))

    async def _reap(self) -> None:
        """Close sessions idle for longer than the limit (a session busy in an env call is not idle)."""
        period = min(max(self.idle_timeout / 4, 0.01), 1.0)
        while self._connections:
            await asyncio.sleep(period)
            now = time.monotonic()
            for connection in list(self._connections):
                session = connection.session
                if not session.busy and now - session.last_active > self.idle_timeout:
                    self._connections.discard(connection)
                    await connection.fail(
                        ServeError(
                            ErrorCode.IDLE_TIMEOUT,
                            f"no message for {self.idle_timeout:g} s (the server's idle limit): the session is closed.",
                        )
                    )
                    self._end_session(session)

    async def stop_sessions(self, timeout: float = 30.0) -> None:
        """Refuse new sessions, tell every open one the server stops, close every env; waits up to
        ``timeout`` seconds for the envs' ``close`` (one still stuck in a call is left to its daemon
        thread)."""
        self._stopping = True
        for connection in list(self._connections):
            await connection.fail(ServeError(ErrorCode.SERVER_STOPPING, "the server is shutting down."))
        workers = [s.worker for s in self._sessions if s.worker is not None]
        for session in list(self._sessions):
            self._end_session(session)
        if self._reaper is not None:
            self._reaper.cancel()
        deadline = time.monotonic() + timeout

        def wait() -> None:
            for worker in workers:
                worker.finished.wait(max(0.0, deadline - time.monotonic()))

        if workers:
            await asyncio.to_thread(wait)

    # -- HTTP ---------------------------------------------------------------------------------------
    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        env_id, endpoint = self._route(scope["path"])
        method = scope["method"]
        try:
            if env_id is None and endpoint == "envs" and method == "GET":
                body = {"envs": [{"id": s.env_id, "kind": s.kind} for s in self.served.values()]}
                await _respond(send, 200, body)
                return
            if endpoint not in _GET_ROUTES and endpoint not in _POST_ROUTES:
                await _respond(send, 404, {"detail": f"no route {scope['path']!r}"})
                return
            if env_id is not None and env_id not in self.served:
                raise self._unknown_env(env_id)
            wanted = "GET" if endpoint in _GET_ROUTES else "POST"
            if method != wanted:
                await _respond(send, 405, {"detail": f"{scope['path']} takes {wanted}, got {method}"})
                return
            served = self.served[env_id or self.default]
            if endpoint == "health":
                await _respond(send, 200, self.health())
            elif endpoint == "spec":
                await _respond(send, 200, await self.spec(served.env_id))
            elif endpoint == "schema":
                await _respond(send, 200, _schema(await self.spec(served.env_id)))
            elif endpoint == "metadata":
                await _respond(send, 200, _metadata(await self.spec(served.env_id)))
            else:
                body = await _read_body(scope, receive, self.max_message_bytes)
                await _respond(send, 200, await self._one_call(env_id, endpoint, body))
        except ServeError as err:
            await _respond(send, _HTTP_STATUS[err.code], err.frame())

    def health(self) -> dict[str, Any]:
        return {
            "status": "unhealthy" if self._stopping else "healthy",
            "active_sessions": self._slots,
            "max_sessions": self.max_sessions,
        }

    async def _one_call(self, env_id: str | None, endpoint: str, body: Any) -> dict[str, Any]:
        """OpenEnv's stateless ``/reset`` and ``/step``: one env for the request, closed after it."""
        if not isinstance(body, dict):
            raise ServeError(ErrorCode.VALIDATION_ERROR, f"the body must be a JSON object, got {type(body).__name__}.")
        reset = dict(body)
        action = None
        if endpoint == "step":
            if "action" not in reset:
                raise ServeError(
                    ErrorCode.VALIDATION_ERROR, "a /step body needs 'action' (the data of a step message)."
                )
            action = reset.pop("action")
            for extra in _OPENENV_STEP_EXTRAS:
                reset.pop(extra, None)
        session = self._new_session(env_id)
        try:
            reply = await session.handle({"type": "reset", "data": reset})
            if action is not None:
                reply = await session.handle({"type": "step", "data": action})
            return reply["data"]
        finally:
            self._end_session(session)

    async def spec(self, env_id: str) -> dict[str, Any]:
        """What a client builds its spaces from: built once per id (an env made, read, closed)."""
        cached = self._specs.get(env_id)
        if cached is not None:
            return cached
        lock = self._spec_locks.setdefault(env_id, asyncio.Lock())
        async with lock:
            if env_id not in self._specs:
                if not self._take_slot():
                    raise ServeError(
                        ErrorCode.CAPACITY_REACHED,
                        f"the server runs its limit of {self.max_sessions} sessions: try again later.",
                    )
                worker = Worker(f"envgym-serve-spec-{env_id}", on_exit=self._release_slot)
                try:
                    future = worker.submit(_describe, self.served[env_id])
                    self._specs[env_id] = await asyncio.wait_for(future, self.step_timeout)
                except TimeoutError:
                    raise ServeError(
                        ErrorCode.STEP_TIMEOUT, f"building {env_id} ran past the limit of {self.step_timeout:g} s."
                    ) from None
                except Exception as err:  # noqa: BLE001 - any failure of the env is its error reply
                    raise ServeError(
                        ErrorCode.ENV_CRASHED, f"building {env_id} raised: {type(err).__name__}: {err}"
                    ) from None
                finally:
                    worker.stop()
        return self._specs[env_id]


async def _read_body(scope: Scope, receive: Receive, limit: int) -> Any:
    too_big = ServeError(ErrorCode.MESSAGE_TOO_BIG, f"the body is over the server's limit of {limit} bytes.")
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise too_big
    chunks = []
    size = 0
    while True:
        event = await receive()
        if event["type"] != "http.request":
            raise ServeError(ErrorCode.VALIDATION_ERROR, "the client left before sending its body.")
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
        if not event.get("more_body"):
            break
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise ServeError(ErrorCode.INVALID_JSON, f"the body is not JSON: {err}") from None


async def _respond(send: Send, status: int, body: Any) -> None:
    data = _dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _describe(served: ServedEnv) -> dict[str, Any]:
    """The spec of ``served``: spaces, agents, reward components and card, read from one env."""
    env = served.make(**served.kwargs)
    try:
        cls = type(getattr(env, "unwrapped", env))
        spec: dict[str, Any] = {"env_id": served.env_id, "kind": served.kind}
        if served.kind == "parallel":
            agents = [str(a) for a in env.possible_agents]
            spec["possible_agents"] = agents
            spec["observation_spaces"] = {str(a): encode_space(env.observation_space(a)) for a in env.possible_agents}
            spec["action_spaces"] = {str(a): encode_space(env.action_space(a)) for a in env.possible_agents}
        else:
            spec["observation_space"] = encode_space(env.observation_space)
            spec["action_space"] = encode_space(env.action_space)
        spec["reward_components"] = [str(c) for c in getattr(cls, "reward_components", ()) or ()]
        spec["metadata"] = {k: v for k, v in dict(getattr(env, "metadata", {}) or {}).items() if _plain(v)}
        getter = getattr(cls, "env_card", None)
        spec["card"] = getter(dict(served.kwargs)) if getter is not None else (inspect.getdoc(cls) or cls.__name__)
        return spec
    finally:
        env.close()


def _plain(value: Any) -> bool:
    try:
        _dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _space_schema(space: dict[str, Any]) -> dict[str, Any]:
    kind = space["type"]
    if kind in ("envgym.Text", "Text"):
        return {"type": "string", "maxLength": space["max_length"]}
    if kind == "Discrete":
        return {"type": "integer", "minimum": space["start"], "maximum": space["start"] + space["n"] - 1}
    if kind == "Dict":
        return {
            "type": "object",
            "properties": {key: _space_schema(sub) for key, sub in space["spaces"]},
            "required": [key for key, _ in space["spaces"]],
        }
    return {"description": f"a {kind} value: a JSON list, or an encoded array (docs/serving.md)"}


def _schema(spec: dict[str, Any]) -> dict[str, Any]:
    """OpenEnv's ``/schema``: JSON schemas of a step's data, an observation and the state."""
    if spec["kind"] == "parallel":
        actions = {a: _space_schema(s) for a, s in spec["action_spaces"].items()}
        action = {
            "type": "object",
            "properties": {"actions": {"type": "object", "properties": actions}},
            "required": ["actions"],
        }
    else:
        action = {
            "type": "object",
            "properties": {"action": _space_schema(spec["action_space"])},
            "required": ["action"],
        }
    observation = {
        "type": "object",
        "properties": {
            "obs": {},
            "info": {"type": "object"},
            "terminated": {"type": "boolean"},
            "truncated": {"type": "boolean"},
            "env_id": {"type": "string"},
            "episode_id": {"type": "string"},
            "step": {"type": "integer"},
        },
    }
    state = {
        "type": "object",
        "properties": {
            "env_id": {"type": "string"},
            "episode_id": {"type": ["string", "null"]},
            "step_count": {"type": "integer"},
            "seed": {"type": ["integer", "null"]},
            "done": {"type": "boolean"},
        },
    }
    return {"action": action, "observation": observation, "state": state}


def _metadata(spec: dict[str, Any]) -> dict[str, Any]:
    """OpenEnv's ``/metadata``."""
    card = spec["card"]
    return {
        "name": spec["env_id"],
        "description": card.strip().splitlines()[0] if card.strip() else spec["env_id"],
        "readme_content": card,
        "version": __version__,
        "author": None,
        "documentation_url": None,
    }
