"""The one exception hierarchy of envgym.

Every error says what was expected, what came, and how to fix it. Errors that describe a bad
argument also derive from the matching builtin (``ValueError``, ``TypeError``, ``KeyError``) so
callers that catch the builtin keep working.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "EnvgymError",
    "UnknownEnvError",
    "InvalidKwargsError",
    "ResetNeededError",
    "EnvContractError",
    "MissingDependencyError",
    "ConfigError",
    "suggest",
]


def suggest(value: str, options: Iterable[str], *, n: int = 3) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest options, or an empty string."""
    matches = difflib.get_close_matches(str(value), list(options), n=n, cutoff=0.5)
    if not matches:
        return ""
    if len(matches) == 1:
        return f" Did you mean {matches[0]!r}?"
    return " Did you mean one of " + ", ".join(repr(m) for m in matches) + "?"


class EnvgymError(Exception):
    """Base class of every error raised on purpose by envgym."""


class UnknownEnvError(EnvgymError, KeyError):
    """An environment id that no registry knows."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0]) if self.args else ""


class InvalidKwargsError(EnvgymError, TypeError):
    """An environment or config received a keyword argument it does not accept, or a bad value."""


class ResetNeededError(EnvgymError, RuntimeError):
    """``step`` was called before ``reset`` or after the episode ended."""


class EnvContractError(EnvgymError, AssertionError):
    """An environment broke the envgym contract (raised by ``envgym.testing`` checkers)."""


class MissingDependencyError(EnvgymError, ImportError):
    """An optional dependency is not installed; the message names the exact install command."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the optional dependency {package!r}, which is not installed. "
            f"Install it with: pip install 'envgym[{extra}]'"
        )
        self.package = package
        self.extra = extra


class ConfigError(EnvgymError, ValueError):
    """A configuration file or value is malformed."""
