"""OpenEnv's own example environment, and OpenEnv's server for it on loopback, for the OpenEnv tests.

The environment is the one ``openenv init`` writes: OpenEnv's template (``openenv.cli.templates.
openenv_env``, an echo env: ``EchoAction(message)``, ``EchoObservation(echoed_message,
message_length)``, reward ``0.1 * len(message)``, never done). :func:`echo_package` instantiates
it into a folder with ``openenv init``'s own template functions (all of ``openenv init`` but its
``uv lock``, which needs the network), so nothing of OpenEnv's code is copied into this
repository and the test runs the package's example exactly as its version ships it.

:class:`LoopbackServer` runs an ASGI app (OpenEnv's ``create_app``) under uvicorn in a thread, on
127.0.0.1 and a free port, and can stop and start again on the same port (a server that went
away mid-run and came back).
"""

from __future__ import annotations

import importlib
import socket
import sys
import threading
from pathlib import Path
from typing import Any, Self

#: The package name ``openenv init echo_env`` gives the example (classes ``Echo*``).
ECHO_PACKAGE = "echo_env"


def echo_package(folder: Path) -> tuple[Any, Any, Any]:
    """Instantiate OpenEnv's template as ``folder/echo_env`` (as ``openenv init echo_env`` does),
    import it and return ``(EchoEnvironment, EchoAction, EchoObservation)``."""
    from openenv.cli.commands import init as openenv_init

    replacements = openenv_init._create_template_replacements(ECHO_PACKAGE)
    openenv_init._copy_template_directory(
        "openenv.cli.templates.openenv_env", "", folder / ECHO_PACKAGE, replacements, ECHO_PACKAGE
    )
    sys.path.insert(0, str(folder))
    try:
        models = importlib.import_module(f"{ECHO_PACKAGE}.models")
        environment = importlib.import_module(f"{ECHO_PACKAGE}.server.{ECHO_PACKAGE}_environment")
    finally:
        sys.path.remove(str(folder))
    return environment.EchoEnvironment, models.EchoAction, models.EchoObservation


def echo_app(folder: Path, max_sessions: int = 8) -> Any:
    """OpenEnv's server app (``create_app``) for the echo example, ``max_sessions`` sessions at once."""
    from openenv.core.env_server.http_server import create_app

    environment, action, observation = echo_package(folder)
    return create_app(environment, action, observation, env_name=ECHO_PACKAGE, max_concurrent_envs=max_sessions)


class LoopbackServer:
    """``app`` served by uvicorn in a thread on 127.0.0.1 (``port=0``: a free port, kept across
    :meth:`restart`)."""

    def __init__(self, app: Any, port: int = 0, startup_timeout_s: float = 60.0) -> None:
        self.app = app
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LoopbackServer:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self.app, log_level="critical", lifespan="on"))
        started = threading.Event()
        server = self._server

        def serve() -> None:
            try:
                server.run(sockets=[sock])
            finally:
                sock.close()
                started.set()

        # uvicorn sets `started` once it listens; a callback-free wait on it, with a deadline
        original = server.startup

        async def startup(*args: Any, **kwargs: Any) -> None:
            await original(*args, **kwargs)
            started.set()

        server.startup = startup
        self._thread = threading.Thread(target=serve, name=f"openenv-test-server-{self.port}", daemon=True)
        self._thread.start()
        if not started.wait(self.startup_timeout_s) or not server.started:
            self.stop()
            raise RuntimeError(f"the test OpenEnv server did not start on port {self.port}")
        return self

    def stop(self) -> None:
        """Stop serving (open WebSocket sessions are closed: 1012, service restart)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)
        self._server = self._thread = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
