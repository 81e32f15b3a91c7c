"""One WebSocket session with ``envgym serve``, and the server's HTTP endpoints.

:class:`Session` is the wire and nothing more: it sends a message, waits for the answer within
``message_timeout_s`` and turns every way of failing into a :class:`~envgym.remote.errors.RemoteError`
(the server's typed errors) or a :class:`~envgym.remote.errors.ServerLostError` (connection refused,
the server gone mid-session, no answer in time). Sending and receiving are separate calls
(:meth:`Session.send` / :meth:`Session.receive`), so a pool can send one step to each of many
sessions before it waits for the first answer, and the server steps them at the same time.

The URL is the server's base (``ws://HOST:P``; ``http://``, ``https://`` and ``wss://`` work too,
and a trailing ``/ws`` is ignored); the session of ``env_id`` is at ``<base>/<env_id>/ws`` and its
spec at ``<base>/<env_id>/spec`` (docs/serving.md).
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from envgym._imports import optional
from envgym.errors import ConfigError, suggest
from envgym.remote.errors import (
    RemoteError,
    ServerLostError,
    UnknownRemoteEnvError,
    error_from_message,
)
from envgym.serve import codec

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MESSAGE_TIMEOUT_S",
    "Session",
    "base_urls",
    "check_served",
    "fetch_json",
    "quote_id",
    "served_kinds",
    "wire_kwargs",
    "wire_number",
]

#: Seconds to open a connection (TCP and the WebSocket handshake) or to answer an HTTP request.
DEFAULT_CONNECT_TIMEOUT_S = 10.0
#: Seconds to wait for the answer to one message: above the server's default per-step limit
#: (60 s), so a slow step is reported by the server (``STEP_TIMEOUT``) rather than guessed at here.
DEFAULT_MESSAGE_TIMEOUT_S = 90.0
#: Largest frame accepted from the server (an image observation is a few MiB as base64).
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Largest HTTP answer read from the server (``/envs``, ``/spec``).
_MAX_HTTP_BYTES = 8 * 1024 * 1024
_SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def base_urls(url: str) -> tuple[str, str]:
    """``(ws_base, http_base)`` of a server URL, without a trailing slash.

    Raises:
        ConfigError: not a ``ws://``, ``wss://``, ``http://`` or ``https://`` URL with a host.
    """
    if not isinstance(url, str):
        raise ConfigError(f"url must be the server's address such as 'ws://127.0.0.1:8000', got {url!r}.")
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES or not parts.hostname:
        raise ConfigError(
            f"url must look like 'ws://HOST:PORT' (or wss://, http://, https://), got {url!r}."
            + suggest(scheme, _SCHEMES)
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as err:
        raise ConfigError(f"url {url!r} has a bad port: {err}.") from err
    if parts.query or parts.fragment:
        raise ConfigError(f"url must be the server's base address without a query or fragment, got {url!r}.")
    path = parts.path.rstrip("/").removesuffix("/ws")
    secure = _SCHEMES[scheme] == "https"
    ws = urllib.parse.urlunsplit(("wss" if secure else "ws", parts.netloc, path, "", ""))
    http = urllib.parse.urlunsplit(("https" if secure else "http", parts.netloc, path, "", ""))
    return ws, http


def quote_id(env_id: str) -> str:
    """``env_id`` as a URL path (``envgym/Wordle-v0`` stays as it is)."""
    return urllib.parse.quote(env_id, safe="/")


def fetch_json(url: str, path: str, *, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> Any:
    """``GET <http base of url><path>`` as JSON.

    Raises:
        ServerLostError: the server cannot be reached or did not answer in time.
        RemoteError: an HTTP error status (``code`` ``HTTP_<status>``, with the server's detail)
            or an answer that is not JSON.
    """
    _, http = base_urls(url)
    target = http + path
    handlers: list[Any] = []
    if urllib.parse.urlsplit(target).hostname in _LOOPBACK:
        handlers.append(urllib.request.ProxyHandler({}))  # a proxy set for the outside never sees loopback
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(
            urllib.request.Request(target, headers={"Accept": "application/json"}), timeout=timeout_s
        ) as r:
            body = r.read(_MAX_HTTP_BYTES + 1)
    except urllib.error.HTTPError as err:
        detail = _http_detail(err)
        if err.code == 404:
            raise RemoteError(f"GET {target}: not found (404){detail}", code="HTTP_404") from err
        raise RemoteError(
            f"GET {target}: HTTP {err.code}{detail}", code=f"HTTP_{err.code}", retryable=err.code >= 500
        ) from err
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise ServerLostError(
            f"cannot reach envgym serve at {http} ({reason}); is `envgym serve` running there?", code="CONNECT_FAILED"
        ) from err
    if len(body) > _MAX_HTTP_BYTES:
        raise RemoteError(f"GET {target}: the answer is over {_MAX_HTTP_BYTES} bytes.", code="PROTOCOL_ERROR")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as err:
        raise RemoteError(f"GET {target}: the answer is not JSON ({err}).", code="PROTOCOL_ERROR") from err


def _http_detail(err: urllib.error.HTTPError) -> str:
    try:
        body = err.read(4096).decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - the status alone still says what failed
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return f": {body[:300]}" if body else ""
    detail = data.get("detail", data) if isinstance(data, dict) else data
    return f": {detail}"


def served_kinds(url: str, *, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> dict[str, str]:
    """The ids the server serves, each with its kind (``"single"`` or ``"parallel"``): ``GET /envs``."""
    data = fetch_json(url, "/envs", timeout_s=timeout_s)
    items: Any = data.get("envs", data) if isinstance(data, dict) else data
    kinds: dict[str, str] = {}
    if isinstance(items, dict):  # {"envgym/Wordle-v0": "single", ...}
        kinds = {str(k): str(v.get("kind") if isinstance(v, dict) else v) for k, v in items.items()}
    elif isinstance(items, list):  # [{"id": ..., "kind": ...}, ...]
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                kinds[item["id"]] = str(item.get("kind", "single"))
    if not kinds:
        raise RemoteError(f"GET /envs of {url}: expected the served ids with their kinds, got {data!r:.300}.")
    return kinds


def check_served(url: str, env_id: str, *, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> str:
    """The kind of ``env_id`` on the server at ``url``; an id it does not serve raises
    :class:`UnknownRemoteEnvError` with the closest served ids."""
    kinds = served_kinds(url, timeout_s=timeout_s)
    if env_id not in kinds:
        raise UnknownRemoteEnvError(
            f"the server at {url} does not serve {env_id!r}.{suggest(env_id, kinds)} "
            f"It serves: {', '.join(sorted(kinds))}.",
            code="UNKNOWN_ENV",
        )
    return kinds[env_id]


class Session:
    """One WebSocket session on ``<url>/<env_id>/ws``, opened on construction.

    Args:
        url: the server's base URL.
        env_id: the served id.
        connect_timeout_s: seconds to open the connection.
        message_timeout_s: seconds to wait for each answer (``None``: wait as long as it takes).
        max_message_bytes: largest frame accepted from the server.

    Raises:
        UnknownRemoteEnvError: the server has no session endpoint for ``env_id`` (HTTP 404).
        ServerLostError: the server cannot be reached.
    """

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        message_timeout_s: float | None = DEFAULT_MESSAGE_TIMEOUT_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        client = optional("websockets.sync.client", purpose="envgym.remote (the client of envgym serve)", extra="serve")
        exceptions = optional("websockets.exceptions", purpose="envgym.remote", extra="serve")
        ws_base, _ = base_urls(url)
        self.url = url
        self.env_id = env_id
        self.address = f"{ws_base}/{quote_id(env_id)}/ws"
        self.message_timeout_s = message_timeout_s
        self._closed_exc = exceptions.ConnectionClosed
        self._ws: Any = None
        loopback = urllib.parse.urlsplit(self.address).hostname in _LOOPBACK
        try:
            # Entered by hand, not in a with block: the connection lives as long as this session.
            # (websockets >= 17.1 warns about a connect() that is not entered; older ones return the
            # connection itself, whose __enter__ returns it.)
            self._ws = client.connect(
                self.address,
                open_timeout=connect_timeout_s,
                close_timeout=1.0,
                max_size=max_message_bytes,
                compression=None,  # frames are small and the server is near: deflate costs more than it saves
                proxy=None if loopback else True,
            ).__enter__()
        except exceptions.InvalidStatus as err:
            status = err.response.status_code
            if status == 404:
                raise UnknownRemoteEnvError(
                    f"the server at {url} has no session endpoint for {env_id!r} ({self.address}: HTTP 404).",
                    code="UNKNOWN_ENV",
                ) from err
            raise ServerLostError(
                f"the server at {url} refused the session for {env_id!r} (HTTP {status}).", code="CONNECT_FAILED"
            ) from err
        except (OSError, TimeoutError, exceptions.InvalidHandshake) as err:
            raise ServerLostError(
                f"cannot open a session at {self.address}: {type(err).__name__}: {err}. Is `envgym serve` running there?",
                code="CONNECT_FAILED",
            ) from err

    @property
    def closed(self) -> bool:
        return self._ws is None

    def send(self, message: dict[str, Any]) -> None:
        """Send one message (its answer is read by :meth:`receive`)."""
        if self._ws is None:
            raise ServerLostError(f"the session with {self.address} is closed.", code="CONNECTION_LOST")
        try:
            text = json.dumps(message, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as err:
            raise RemoteError(f"cannot send {message!r:.200} as JSON: {err}.", code="ENCODE_ERROR") from err
        try:
            self._ws.send(text)
        except (self._closed_exc, OSError) as err:
            self._lose()
            raise ServerLostError(f"the server at {self.url} went away ({_why(err)}).") from err

    def receive(self, expected: str, where: str, *, deadline: float | None = None) -> Any:
        """Read the answer to the oldest message sent: the ``data`` of a message of type
        ``expected``; an error message raises its :class:`RemoteError`.

        Args:
            expected: the answer's ``type`` (``"observation"``, ``"state"``, ...).
            where: what was asked, for error messages (``"step envgym/Wordle-v0"``).
            deadline: a ``time.monotonic()`` to stop waiting at (default: ``message_timeout_s`` from now).
        """
        if self._ws is None:
            raise ServerLostError(f"{where}: the session with {self.address} is closed.", code="CONNECTION_LOST")
        if deadline is None and self.message_timeout_s is not None:
            deadline = time.monotonic() + self.message_timeout_s
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            text = self._ws.recv(timeout=timeout)
        except TimeoutError as err:
            self._lose()  # the late answer would be read as the answer to the next message
            raise ServerLostError(
                f"{where}: no answer from {self.url} within {self.message_timeout_s:g} s.", code="TIMEOUT"
            ) from err
        except (self._closed_exc, OSError) as err:
            self._lose()
            raise ServerLostError(f"{where}: the server at {self.url} went away ({_why(err)}).") from err
        try:
            message = json.loads(text)
            kind, data = message["type"], message.get("data")
        except (ValueError, TypeError, KeyError, RecursionError) as err:  # RecursionError: hostile nesting
            self._lose()
            raise RemoteError(
                f"{where}: the server sent a frame that is not a message: {text!r:.200}.",
                code="PROTOCOL_ERROR",
                retryable=True,
            ) from err
        if kind == "error":
            error = error_from_message(data, where)
            if error.retryable:
                self._lose()  # the server closed the session, or its env (docs/serving.md)
            raise error
        if kind != expected:
            self._lose()
            raise RemoteError(
                f"{where}: expected a {expected!r} message, got {kind!r}.", code="PROTOCOL_ERROR", retryable=True
            )
        return data

    def request(self, message: dict[str, Any], expected: str, where: str) -> Any:
        """:meth:`send` then :meth:`receive`."""
        self.send(message)
        return self.receive(expected, where)

    def _lose(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):  # the connection is already broken
                ws.close()

    def close(self) -> None:
        """Say goodbye (``{"type": "close"}``) and close the connection. Calling it again does nothing."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        with contextlib.suppress(Exception):  # a server already gone needs no goodbye
            ws.send('{"type":"close"}')
        with contextlib.suppress(Exception):
            ws.close()

    def __repr__(self) -> str:
        return f"Session({self.address!r}, {'closed' if self._ws is None else 'open'})"


def wire_kwargs(env_kwargs: Mapping[str, Any], env_id: str) -> dict[str, Any]:
    """``env_kwargs`` as they travel (plain JSON); anything else is refused before a connection opens."""
    try:
        encoded = codec.encode_obs(dict(env_kwargs))
        json.dumps(encoded, allow_nan=False)
    except (codec.CodecError, TypeError, ValueError) as err:
        raise ConfigError(
            f"the keyword arguments of a served {env_id!r} travel as JSON, and {dict(env_kwargs)!r:.200} do not: "
            f"{err}. Pass plain data (numbers, text, lists, dicts), e.g. reward wrappers as specs."
        ) from err
    return encoded


def wire_number(value: Any, where: str) -> float:
    """A reward as it travels (a number, ``None`` on a reset, ``{"__float__": "nan"}``) as a float."""
    if value is None:
        return 0.0
    try:
        number = codec.decode_obs(value)
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise TypeError(f"not a number: {value!r:.80}")
        return float(number)
    except (codec.CodecError, TypeError, RecursionError) as err:
        raise RemoteError(f"{where}: malformed reward from the server ({err}).", code="PROTOCOL_ERROR") from err


def _why(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
