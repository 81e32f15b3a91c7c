"""Processes seen through Linux ``/proc``, for tests that check nothing is left running."""

from __future__ import annotations

import os
from pathlib import Path


def descendants(pid: int, *, zombies: bool = True) -> dict[int, bytes]:
    """Descendants of ``pid`` and their command lines (``b""`` when unreadable).

    ``zombies=False`` leaves out processes that have exited but were not reaped yet (state Z or X),
    and those gone before their command line was read (their children are not followed)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if zombies or fields[0] not in ("Z", "X"):
                children.setdefault(int(fields[1]), []).append(int(entry))
    out: dict[int, bytes] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            try:
                out[child] = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                if not zombies:
                    continue
                out[child] = b""
            todo.append(child)
    return out
