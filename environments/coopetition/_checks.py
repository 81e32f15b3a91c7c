"""Checks of the games' own keyword arguments: each error names the game, the argument, the valid range and the value."""

from __future__ import annotations

import math
from typing import Any

from envgym.errors import ConfigError

__all__ = ["flag", "integer", "number"]


def number(
    game: str, name: str, value: Any, *, low: float | None = None, high: float | None = None, open_low: bool = False
) -> float:
    """``value`` as a float, finite and within ``[low, high]`` (``(low, high]`` with ``open_low``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{game}: {name} must be a finite number, got {value!r}.")
    too_low = low is not None and (value <= low if open_low else value < low)
    too_high = high is not None and value > high
    if too_low or too_high:
        left = "(" if open_low else "["
        span = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        raise ConfigError(f"{game}: {name} must be in {span}, got {value!r}.")
    return float(value)


def integer(game: str, name: str, value: Any, *, minimum: int) -> int:
    """``value`` as an int of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{game}: {name} must be an int >= {minimum}, got {value!r}.")
    return int(value)


def flag(game: str, name: str, value: Any) -> bool:
    """``value`` as a bool (only ``True`` or ``False``)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{game}: {name} must be True or False, got {value!r}.")
    return value
