"""Reward-component metrics: ``rewards/<name>/mean`` from per-episode component totals.

The one place that defines how a component's metric key is spelled: the component
``format_reward`` becomes ``rewards/format/mean`` (the ``_reward`` suffix is dropped, as in the
metric paths of STYLE.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from envgym.errors import ConfigError

__all__ = ["component_metrics", "episode_totals", "metric_key"]


def metric_key(component: str, statistic: str = "mean") -> str:
    """``rewards/<name>/<statistic>`` for a component (``format_reward`` -> ``rewards/format/mean``)."""
    if not isinstance(component, str) or not component or "/" in component:
        raise ConfigError(f"expected a component name without '/', such as 'format_reward', got {component!r}.")
    name = component.removesuffix("_reward") or component
    return f"rewards/{name}/{statistic}"


def episode_totals(steps: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Sum per-step component dicts (``info["reward_components"]`` of each step) into episode totals."""
    parts: dict[str, list[float]] = {}
    for components in steps:
        for name, value in components.items():
            parts.setdefault(name, []).append(float(value))
    return {name: math.fsum(values) for name, values in parts.items()}


def component_metrics(episodes: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Mean of each component's per-episode total over the episodes that report it.

    Args:
        episodes: one mapping of component name to episode total per episode (plain dicts, e.g.
            ``EpisodeResult.reward_components`` or :func:`episode_totals` of an episode's steps).

    Returns:
        ``{"rewards/<name>/mean": mean}``, sorted by key; empty for no episodes.

    Raises:
        ConfigError: a total is not a finite number.
    """
    totals: dict[str, list[float]] = {}
    for index, episode in enumerate(episodes):
        if not isinstance(episode, Mapping):
            raise ConfigError(
                f"episode {index}: expected a mapping of component name to episode total, got {type(episode).__name__}."
            )
        for name, value in episode.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"episode {index}: component {name!r} total must be a finite number, got {value!r}.")
            totals.setdefault(name, []).append(float(value))
    return {metric_key(name): math.fsum(values) / len(values) for name, values in sorted(totals.items())}
