"""What the sandbox tests share: finding host processes by a marker in their command line."""

from __future__ import annotations

import os
from pathlib import Path


def host_processes(marker: str) -> list[str]:
    """Command lines of host processes that contain ``marker`` (excluding this test process)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{entry}: {cmdline}")
    return found
