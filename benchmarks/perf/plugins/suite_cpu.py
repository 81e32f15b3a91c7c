"""pytest plugin: each test's wall and CPU seconds, for ``benchmarks/perf/suite_time.py``.

Load it with ``-p suite_cpu`` and ``benchmarks/perf/plugins`` on ``PYTHONPATH`` (a folder of its own,
so that the scripts of ``benchmarks/perf`` cannot shadow modules of the same names); each process (each
xdist worker) appends one JSON line per test to ``$ENVGYM_SUITE_CPU_DIR/<pid>.jsonl``::

    PYTHONPATH=benchmarks/perf/plugins ENVGYM_SUITE_CPU_DIR=/tmp/cpu bash scripts/test.sh -p suite_cpu --junitxml=/tmp/run.xml

Per test (setup, call and teardown together): ``wall``; ``self``, the CPU seconds of the test's
process; ``children``, those of the child processes it reaped (``RUSAGE_CHILDREN``); ``live``, the
CPU seconds gained by its descendants still running at the end (a browser, a server, a
container's client), read from ``/proc`` (Linux; 0 elsewhere). A descendant that outlives tests
(a lingering browser, a process pool) is counted as it runs; when it is reaped, in whatever later
test, ``RUSAGE_CHILDREN`` grows by its whole life, so the part already counted is taken off
``children`` there (each second is counted once). A grandchild that starts and ends between two
readings (a browser's short-lived helper) is missed: the figures are a floor.
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


def descendants_cpu(root: int | None = None, parents: dict[int, int] | None = None) -> dict[int, float]:
    """CPU seconds (user + system) of every process below ``root`` (and, in ``parents``, its parent).

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
            if parents is not None:
                parents[pid] = parent[pid]
    return below


def _reading() -> tuple[float, float, float, dict[int, float], dict[int, int]]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    parents: dict[int, int] = {}
    return (
        time.perf_counter(),
        own.ru_utime + own.ru_stime,
        reaped.ru_utime + reaped.ru_stime,
        descendants_cpu(parents=parents),
        parents,
    )


class _Ledger:
    """Each descendant's CPU seconds counted so far, so that reaping does not count them again.

    A process's ``RUSAGE_CHILDREN`` grows, when it reaps a child, by the child's CPU and that of
    the descendants the child reaped. So the seconds counted live for a descendant that ended
    go to its parent's account while the parent lives, and to the test process's credit when the
    parent is the test process; the credit is taken off the next growth of ``RUSAGE_CHILDREN``.
    (Those of an orphan, whose parent ended first, are dropped: no one here reaps it.)
    """

    def __init__(self) -> None:
        self.reaped_total: float | None = None  # RUSAGE_CHILDREN at the last reading
        self.counted: dict[int, float] = {}  # live descendants: seconds counted, theirs and their reaped ones'
        self.parent: dict[int, int] = {}
        self.credit = 0.0  # counted seconds of ended children, not yet seen in RUSAGE_CHILDREN

    def update(
        self,
        reaped_total: float,
        live_now: dict[int, float],
        parents: dict[int, int],
        live_before: dict[int, float] | None,
    ) -> tuple[float, float]:
        """``(live, reaped)`` since ``live_before`` (a test's start; None between tests, counting
        nothing live): the CPU the live descendants gained, and the growth of ``reaped_total``
        since the last reading less what was counted live before."""
        grown = 0.0 if self.reaped_total is None else reaped_total - self.reaped_total
        self.reaped_total = reaped_total
        ended = [pid for pid in self.counted if pid not in live_now]

        def depth(pid: int) -> int:
            hops = 0
            while pid in self.parent and hops < 64:
                pid, hops = self.parent[pid], hops + 1
            return hops

        me = os.getpid()
        for pid in sorted(ended, key=depth, reverse=True):  # children before their parents
            seconds, up = self.counted.pop(pid), self.parent.pop(pid, None)
            if up == me:
                self.credit += seconds
            elif up in self.counted:
                self.counted[up] += seconds
        live = 0.0
        if live_before is not None:
            for pid, cpu in live_now.items():
                gained = cpu - live_before.get(pid, 0.0)
                self.counted[pid] = self.counted.get(pid, 0.0) + gained
                live += gained
        self.parent = dict(parents)
        taken = min(self.credit, max(grown, 0.0))
        self.credit -= taken
        return live, grown - taken


_LEDGER = _Ledger()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Any:
    before = _reading()
    _LEDGER.update(before[2], before[3], before[4], None)  # (what was reaped between tests belongs to no test)
    yield
    after = _reading()
    live, reaped = _LEDGER.update(after[2], after[3], after[4], before[3])
    row = {
        "id": item.nodeid,
        "wall": round(after[0] - before[0], 4),
        "self": round(after[1] - before[1], 4),
        "children": round(reaped, 4),
        "live": round(live, 4),
    }
    folder = Path(os.environ.get("ENVGYM_SUITE_CPU_DIR") or "suite-cpu")
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{os.getpid()}.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
