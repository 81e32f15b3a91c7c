"""The errors of :mod:`envgym.remote`: what the server answered, or why it could not answer.

Every error carries the server's ``code`` (docs/serving.md) and ``retryable``: ``True`` for an
infrastructure failure (the server is gone or restarting, the env crashed, a timeout, no capacity),
which a harness retries and never scores; ``False`` for a mistake of the caller (an unknown id, bad
kwargs, a step before reset), which would fail again.
"""

from __future__ import annotations

from envgym.errors import EnvgymError, InvalidKwargsError, ResetNeededError, UnknownEnvError

__all__ = [
    "RETRYABLE_CODES",
    "RemoteError",
    "RemoteKwargsError",
    "RemoteResetNeededError",
    "ServerLostError",
    "UnknownRemoteEnvError",
    "error_from_message",
]

#: Codes of the server's errors that are infrastructure failures (retried, never scored).
RETRYABLE_CODES = frozenset({"ENV_CRASHED", "STEP_TIMEOUT", "CAPACITY_REACHED", "SERVER_STOPPING"})


class RemoteError(EnvgymError):
    """An error from ``envgym serve``, or from talking to it.

    Attributes:
        code: the server's error code (``UNKNOWN_ENV``, ``ENV_CRASHED``, ...), or the client's own
            for a failure to talk to it (``CONNECT_FAILED``, ``CONNECTION_LOST``, ``TIMEOUT``,
            ``PROTOCOL_ERROR``).
        retryable: an infrastructure failure: the same call may succeed on a fresh session.
    """

    def __init__(self, message: str, *, code: str = "", retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable

    def __str__(self) -> str:  # KeyError (a base of UnknownRemoteEnvError) would quote the message
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[object, ...]:  # pickles with its code (worker pools ship errors)
        return (_rebuild, (type(self), str(self), self.code, self.retryable))


def _rebuild(cls: type[RemoteError], message: str, code: str, retryable: bool) -> RemoteError:
    return cls(message, code=code, retryable=retryable)


class ServerLostError(RemoteError, ConnectionError):
    """The server cannot be reached, went away mid-session, or did not answer in time: an
    infrastructure failure (``retryable`` is always ``True``); the session is closed."""

    def __init__(self, message: str, *, code: str = "CONNECTION_LOST", retryable: bool = True) -> None:
        # ``retryable`` is accepted (unpickling passes it) but a lost server is always retryable.
        super().__init__(message, code=code, retryable=True)


class UnknownRemoteEnvError(RemoteError, UnknownEnvError):
    """The server does not serve this id (the message lists the closest served ids)."""


class RemoteKwargsError(RemoteError, InvalidKwargsError):
    """The served env refused the keyword arguments."""


class RemoteResetNeededError(RemoteError, ResetNeededError):
    """A step before any reset, or after the episode ended."""


_CLASSES: dict[str, type[RemoteError]] = {
    "UNKNOWN_ENV": UnknownRemoteEnvError,
    "BAD_KWARGS": RemoteKwargsError,
    "NOT_RESET": RemoteResetNeededError,
}


def error_from_message(data: object, where: str) -> RemoteError:
    """The exception for the server's ``{"type": "error", "data": {...}}`` message."""
    if not isinstance(data, dict):
        return RemoteError(f"{where}: the server sent a malformed error {data!r:.200}.", code="PROTOCOL_ERROR")
    code = str(data.get("code") or "ERROR")
    message = str(data.get("message") or "no message")
    retryable = bool(data.get("retryable", code in RETRYABLE_CODES))
    cls = _CLASSES.get(code, RemoteError)
    return cls(f"{where}: {code}: {message}", code=code, retryable=retryable)
