"""Timing of the sandboxes, for ``benchmarks/perf/swe.py``: episode start (workspace ready), mean
command latency (``true``) and close, per backend."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from pathlib import Path

from envgym.sandbox.base import Limits
from envgym.sandbox.bwrap import BwrapSandbox
from envgym.sandbox.dockerbox import DockerSandbox

__all__ = ["measure"]


def measure(
    kind: str,
    source: Path | str,
    *,
    episodes: int = 5,
    commands: int = 20,
    image: str | None = None,
    overlay: Mapping[str, bytes] | None = None,
) -> dict[str, float | int | str]:
    """Start ``episodes`` sandboxes of ``kind`` on ``source`` and run ``commands`` × ``true`` in
    each; returns mean/median seconds of start (constructor: workspace ready), command and close.

    The first episode warms caches (page cache, image layers) and is left out of the figures when
    there are two or more."""
    cls = {"bwrap": BwrapSandbox, "docker": DockerSandbox}[kind]
    starts: list[float] = []
    latencies: list[float] = []
    closes: list[float] = []
    for _ in range(max(1, episodes) + (1 if episodes > 1 else 0)):
        began = time.perf_counter()
        box = cls(source, overlay=dict(overlay or {}), image=image, limits=Limits())
        ready = time.perf_counter()
        per_command: list[float] = []
        for _ in range(commands):
            t0 = time.perf_counter()
            result = box.run("true")
            per_command.append(time.perf_counter() - t0)
            if result.exit_code != 0:
                raise RuntimeError(f"`true` failed in the {kind} sandbox: {result}")
        t1 = time.perf_counter()
        box.close()
        starts.append(ready - began)
        latencies.extend(per_command)
        closes.append(time.perf_counter() - t1)
    if episodes > 1:  # drop the warm-up episode
        starts, closes, latencies = starts[1:], closes[1:], latencies[commands:]
    tree_bytes = sum(p.stat().st_size for p in Path(source).rglob("*") if p.is_file())
    return {
        "kind": kind,
        "tree_bytes": tree_bytes,
        "episodes": len(starts),
        "commands_per_episode": commands,
        "start_s_mean": statistics.fmean(starts),
        "start_s_median": statistics.median(starts),
        "command_s_mean": statistics.fmean(latencies) if latencies else 0.0,
        "command_s_median": statistics.median(latencies) if latencies else 0.0,
        "close_s_mean": statistics.fmean(closes),
    }
