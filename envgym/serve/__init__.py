"""``envgym serve``: registered environments over WebSocket and HTTP (protocol: docs/serving.md).

:class:`Server` serves ids in process (tests, notebooks) or from the command line;
:mod:`envgym.serve.codec` is the JSON codec of observations, actions, infos and spaces, shared
with the client :mod:`envgym.remote`. uvicorn is imported only when a server starts.
"""

from envgym.serve.server import DEFAULT_MAX_MESSAGE_BYTES, ServeConfig, Server, served_envs
from envgym.serve.session import ErrorCode, ServeError

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "ErrorCode", "ServeConfig", "ServeError", "Server", "served_envs"]
