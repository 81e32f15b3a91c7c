"""``Server``: registered envs served on a port (uvicorn), in process or from ``envgym serve``.

::

    from envgym.serve import Server

    with Server(["envgym/Wordle-v0"]) as server:     # 127.0.0.1, a free port
        print(server.ws_url("envgym/Wordle-v0"))    # ws://127.0.0.1:PORT/envgym/Wordle-v0/ws
        ...                                         # envgym.remote / OpenEnv clients connect here

``Server.start()`` serves from a background thread (tests, notebooks); :meth:`Server.run` serves in
the calling thread until SIGINT/SIGTERM (the CLI). Both close every session's env on stop.
"""

from __future__ import annotations

import contextlib
import functools
import math
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from envgym._imports import optional
from envgym.errors import ConfigError, suggest
from envgym.registration import list_envs, make, make_parallel
from envgym.registration import spec as find_spec
from envgym.serve.app import App
from envgym.serve.session import ServedEnv, accepted_params

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "ServeConfig", "Server", "served_envs"]

#: Default largest frame or HTTP body: 8 MiB.
DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024
_KINDS = {"single": "gymnasium", "parallel": "parallel"}


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """How ``envgym serve`` serves its ids (every field is a flag of the command)."""

    host: str = "127.0.0.1"
    """Address to bind. Anything but loopback puts the envs on the network: only for envs you trust strangers with."""
    port: int = 8000
    """Port to bind (0: a free one, printed at start)."""
    max_sessions: int = 256
    """Most sessions at once (each holds one env); more are refused with CAPACITY_REACHED."""
    idle_timeout: float = 300.0
    """Seconds without a message after which a session is closed (IDLE_TIMEOUT)."""
    step_timeout: float = 60.0
    """Seconds one env call (build, reset, step, render) may take; past it the session is closed (STEP_TIMEOUT)."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest frame or HTTP body read; a larger one closes the session (MESSAGE_TOO_BIG)."""
    env_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Keyword arguments per id, under the clients' own ``env_kwargs``."""
    lock_kwargs: bool = False
    """Refuse every client ``env_kwargs``: the envs are built only with ``env_kwargs`` above."""
    kinds: Mapping[str, str] = field(default_factory=dict)
    """Per id, ``single`` or ``parallel``, for an id registered as both (default: single when registered)."""

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be an integer in 0..65535, got {self.port!r}.")
        if not isinstance(self.max_sessions, int) or self.max_sessions < 1:
            raise ConfigError(f"max_sessions must be a positive integer, got {self.max_sessions!r}.")
        for name in ("idle_timeout", "step_timeout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}.")
        if not isinstance(self.max_message_bytes, int) or self.max_message_bytes < 1024:
            raise ConfigError(f"max_message_bytes must be an integer of at least 1024, got {self.max_message_bytes!r}.")
        for env_id, kind in self.kinds.items():
            if kind not in _KINDS:
                raise ConfigError(f"the kind of {env_id!r} must be 'single' or 'parallel', got {kind!r}.")


def served_envs(env_ids: Sequence[str], config: ServeConfig) -> dict[str, ServedEnv]:
    """The :class:`ServedEnv` of each id, checked against the registry before anything binds.

    Raises:
        UnknownEnvError: an id is not registered (with the closest ids).
        ConfigError: an id is served as a kind it is not registered as, a turn-based (AEC) id, or
            operator kwargs the env does not take.
    """
    if not env_ids:
        raise ConfigError("serve at least one environment id.")
    unknown_kwargs = sorted(set(config.env_kwargs) - set(env_ids))
    if unknown_kwargs:
        raise ConfigError(
            f"kwargs given for {unknown_kwargs[0]!r}, which is not served.{suggest(unknown_kwargs[0], env_ids)}"
        )
    served: dict[str, ServedEnv] = {}
    for env_id in dict.fromkeys(env_ids):
        registrations = {s.kind: s for s in list_envs() if s.id == env_id}
        if not registrations:
            find_spec(env_id)  # raises UnknownEnvError with "did you mean"
        wanted = config.kinds.get(env_id)
        if wanted is not None:
            spec = registrations.get(_KINDS[wanted])
            if spec is None:
                have = ", ".join(sorted(registrations))
                raise ConfigError(f"{env_id!r} is not registered as {wanted!r}; it is registered as: {have}.")
        else:
            spec = registrations.get("gymnasium") or registrations.get("parallel")
            if spec is None:
                raise ConfigError(
                    f"{env_id!r} is a turn-based (AEC) environment: envgym serve serves single-agent and "
                    "PettingZoo Parallel ids."
                )
        single = spec.kind == "gymnasium"
        params = accepted_params(spec.load(), single=single)
        kwargs = dict(config.env_kwargs.get(env_id, {}))
        if params is not None:
            bad = sorted(set(kwargs) - params)
            if bad:
                raise ConfigError(
                    f"{env_id} takes no argument {bad[0]!r}.{suggest(bad[0], params)} "
                    f"Valid arguments: {', '.join(sorted(params))}."
                )
        build = make if single else make_parallel
        served[env_id] = ServedEnv(
            env_id=env_id,
            kind="single" if single else "parallel",
            make=functools.partial(build, env_id),
            kwargs=kwargs,
            params=params,
            lock_kwargs=config.lock_kwargs,
        )
    return served


class Server:
    """Serve registered ids over WebSocket and HTTP (docs/serving.md).

    Args:
        env_ids: the ids to serve; the first is the default of ``/ws``.
        config: the limits and options (:class:`ServeConfig`); keyword ``options`` override its
            fields (``Server(["envgym/Wordle-v0"], port=0, max_sessions=4)``). In process the
            default port is 0 (a free one).
        log_level: uvicorn's log level.

    Raises:
        UnknownEnvError, ConfigError: before anything binds (see :func:`served_envs`).
    """

    def __init__(
        self,
        env_ids: str | Sequence[str],
        config: ServeConfig | None = None,
        *,
        log_level: str = "warning",
        **options: Any,
    ) -> None:
        ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
        base = config or ServeConfig(port=0)
        try:
            self.config = ServeConfig(**{**{f: getattr(base, f) for f in _FIELDS}, **options})
        except TypeError as err:
            raise ConfigError(f"{err}. Options: {', '.join(_FIELDS)}.") from None
        self.app = App(
            served_envs(ids, self.config),
            max_sessions=self.config.max_sessions,
            idle_timeout=self.config.idle_timeout,
            step_timeout=self.config.step_timeout,
            max_message_bytes=self.config.max_message_bytes,
        )
        self._log_level = log_level
        self._socket: socket.socket | None = None
        self._uvicorn: Any = None
        self._thread: threading.Thread | None = None

    # -- addresses ------------------------------------------------------------------------------
    @property
    def env_ids(self) -> list[str]:
        return list(self.app.served)

    @property
    def port(self) -> int:
        if self._socket is None:
            raise RuntimeError("the server is not bound yet: call start() first.")
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        """``http://HOST:PORT``."""
        host = self.config.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    def base_url(self, env_id: str | None = None) -> str:
        """The base URL OpenEnv clients take for ``env_id`` (they append ``/ws``)."""
        return self.url if env_id is None else f"{self.url}/{self._served_id(env_id)}"

    def ws_url(self, env_id: str | None = None) -> str:
        """``ws://HOST:PORT/<id>/ws`` (``/ws`` without an id)."""
        return "ws" + self.base_url(env_id)[len("http") :] + "/ws"

    def _served_id(self, env_id: str) -> str:
        if env_id not in self.app.served:
            raise ConfigError(f"{env_id!r} is not served here.{suggest(env_id, self.app.served)}")
        return env_id

    @property
    def active_sessions(self) -> int:
        return self.app.active_sessions

    # -- life -----------------------------------------------------------------------------------
    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.config.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.config.host, self.config.port))
        except OSError as err:
            sock.close()
            raise ConfigError(f"cannot bind {self.config.host}:{self.config.port}: {err.strerror or err}.") from None
        sock.listen(2048)
        sock.set_inheritable(True)
        return sock

    def _make_uvicorn(self) -> Any:
        uvicorn = optional("uvicorn", purpose="envgym serve", extra="serve")
        app = self.app

        class _Uvicorn(uvicorn.Server):
            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                await app.stop_sessions()  # SERVER_STOPPING to every session, before uvicorn drops them
                await super().shutdown(sockets)

            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                # uvicorn's own re-raises the signal after its shutdown (killing the process with
                # SIGTERM's default action); a stop by signal is a clean stop here: run() returns.
                if threading.current_thread() is not threading.main_thread():
                    yield
                    return
                previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
                try:
                    yield
                finally:
                    for sig, handler in previous.items():
                        signal.signal(sig, handler)

        config = uvicorn.Config(
            self.app,
            log_level=self._log_level,
            lifespan="on",
            ws="websockets-sansio",
            # The protocol layer cuts frames far over the limit (close code 1009); the app answers
            # those just over it with MESSAGE_TOO_BIG. Between them a frame is read, never parsed.
            ws_max_size=self.config.max_message_bytes + (64 << 10),
            h11_max_incomplete_event_size=64 << 10,
            timeout_graceful_shutdown=5,
        )
        return _Uvicorn(config)

    def start(self, timeout: float = 30.0) -> Self:
        """Bind and serve from a background thread; returns once the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("the server is already started.")
        self._socket = self._bind()
        self._uvicorn = self._make_uvicorn()
        sock = self._socket
        self._thread = threading.Thread(
            target=lambda: self._uvicorn.run(sockets=[sock]), name="envgym-serve", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uvicorn.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server stopped while starting: see the log above.")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start in {timeout:g} s.")
            time.sleep(0.005)
        return self

    def run(self, ready: Callable[[Server], None] | None = None) -> None:
        """Bind and serve in this thread until SIGINT or SIGTERM, then close every env and return.

        ``ready(self)`` is called once the port is bound (connections queue from then on).
        """
        if self._socket is None:
            self._socket = self._bind()
        self._uvicorn = self._make_uvicorn()
        if ready is not None:
            ready(self)
        try:
            self._uvicorn.run(sockets=[self._socket])
        finally:
            self._socket.close()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop serving: every session gets SERVER_STOPPING and its env is closed. Idempotent."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> Self:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_FIELDS = tuple(f for f in ServeConfig.__dataclass_fields__)
