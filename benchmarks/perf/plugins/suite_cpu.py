"""pytest plugin: each test's wall and CPU seconds, for ``benchmarks/perf/suite_time.py``.

Load it with ``-p suite_cpu`` and ``benchmarks/perf/plugins`` on ``PYTHONPATH`` (a folder of its own,
so that the scripts of ``benchmarks/perf`` cannot shadow modules of the same names); each process (each
xdist worker) appends one JSON line per test to ``$ENVGYM_SUITE_CPU_DIR/<pid>.jsonl``::

    PYTHONPATH=benchmarks/perf/plugins ENVGYM_SUITE_CPU_DIR=/tmp/cpu bash scripts/test.sh -p suite_cpu --junitxml=/tmp/run.xml

Per test (setup, call and teardown together): ``wall``; ``self``, the CPU seconds of the test's
process; ``children``, those of the child processes it reaped (``RUSAGE_CHILDREN``); ``live``, the
CPU seconds gained by its descendants still running at the end (a browser, a server, a
container's client), read from ``/proc`` (Linux; 0 elsewhere). A grandchild that starts and ends
between the two readings (a browser's short-lived helper) is missed: the figures are a floor.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import pytest

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def descendants_cpu(root: int | None = None) -> dict[int, float]:
    """CPU seconds (user + system) of every process below ``root``.

    Not the children each has reaped: a browser's driver reaps the browser when it stops, and the
    browser's whole life would land on the test during which it stopped (it lingers across tests)."""
    root = os.getpid() if root is None else root
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue  # ended while we looked
        fields = stat[stat.rfind(")") + 2 :].split()  # after the command name, which may hold spaces
        parent[int(name)] = int(fields[1])
        cpu[int(name)] = (int(fields[11]) + int(fields[12])) / _TICKS  # utime stime
    below: dict[int, float] = {}
    for pid, seconds in cpu.items():
        up, hops = parent.get(pid), 0
        while up is not None and up != root and up in parent and hops < 64:
            up, hops = parent[up], hops + 1
        if up == root and pid != root:
            below[pid] = seconds
    return below


def _reading() -> tuple[float, float, float, dict[int, float]]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        time.perf_counter(),
        own.ru_utime + own.ru_stime,
        reaped.ru_utime + reaped.ru_stime,
        descendants_cpu(),
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Any:
    before = _reading()
    yield
    after = _reading()
    row = {
        "id": item.nodeid,
        "wall": round(after[0] - before[0], 4),
        "self": round(after[1] - before[1], 4),
        "children": round(after[2] - before[2], 4),
        "live": round(sum(s - before[3].get(pid, 0.0) for pid, s in after[3].items()), 4),
    }
    folder = Path(os.environ.get("ENVGYM_SUITE_CPU_DIR") or "suite-cpu")
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{os.getpid()}.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
