"""The one exception hierarchy of envgym.

Every error says what was expected, what came, and how to fix it. Errors that describe a bad
argument also derive from the matching builtin (``ValueError``, ``TypeError``, ``KeyError``) so
callers that catch the builtin keep working.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "AgentContractError",
    "ConfigError",
    "EnvContractError",
    "EnvgymError",
    "InvalidKwargsError",
    "MissingDependencyError",
    "NotAvailableError",
    "ResetNeededError",
    "StopRun",
    "UnknownAgentError",
    "UnknownEnvError",
    "check_choice",
    "suggest",
]


def suggest(value: str, options: Iterable[str], *, n: int = 3) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest options, or an empty string.

    Only options nearly as close as the best one are offered, so a clear typo gets one answer.
    """
    value = str(value)
    scored = []
    for option in set(options):
        matcher = difflib.SequenceMatcher(None, value.lower(), str(option).lower())
        if matcher.real_quick_ratio() >= 0.5 and matcher.quick_ratio() >= 0.5:
            ratio = matcher.ratio()
            if ratio >= 0.5:
                scored.append((ratio, str(option)))
    if not scored:
        return ""
    scored.sort(key=lambda item: (-item[0], item[1]))
    best = scored[0][0]
    matches = [option for ratio, option in scored[:n] if ratio >= best - 0.05]
    if len(matches) == 1:
        return f" Did you mean {matches[0]!r}?"
    return " Did you mean one of " + ", ".join(repr(m) for m in matches) + "?"


class EnvgymError(Exception):
    """Base class of every error raised on purpose by envgym."""


class UnknownEnvError(EnvgymError, KeyError):
    """An environment id that no registry knows."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0]) if self.args else ""


class UnknownAgentError(EnvgymError, KeyError):
    """An agent name a multi-agent environment does not know."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0]) if self.args else ""


class InvalidKwargsError(EnvgymError, TypeError):
    """An environment or config received a keyword argument it does not accept, or a bad value."""


class ResetNeededError(EnvgymError, RuntimeError):
    """``step`` was called before ``reset`` or after the episode ended."""


class EnvContractError(EnvgymError, AssertionError):
    """An environment broke the envgym contract (raised by ``envgym.testing`` checkers)."""


class AgentContractError(EnvgymError, AssertionError):
    """An agent broke the agent protocol (raised by ``envgym.rollout.check_agent``)."""


class StopRun(EnvgymError):
    """Raised by an agent to end the whole run now (a person typed ``:quit``). Finished episodes
    stay recorded; live ones are dropped and run again when the run resumes."""


class NotAvailableError(EnvgymError):
    """Something is not available on this installation (an optional extra, a solver for an
    environment); callers that sweep many environments report it as skipped, not failed."""


class MissingDependencyError(NotAvailableError, ImportError):
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


def check_choice(name: str, value: object, options: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``options``, else raise :class:`InvalidKwargsError` naming
    the valid options and the closest one (``check_choice("difficulty", level, DIFFICULTIES)``)."""
    names = [str(option) for option in options]
    if isinstance(value, str) and value in names:
        return value
    raise InvalidKwargsError(
        f"{name} must be one of {', '.join(map(repr, names))}, got {value!r}.{suggest(str(value), names)}"
    )
