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


def tiny_project(folder: Path, module: str, tests: str) -> Path:
    """A tiny library (``pkg/mod.py`` holding ``module``) with its test suite
    (``tests/test_mod.py`` holding ``tests``) in ``folder/project``: the pristine tree of a task."""
    root = folder / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text(module)
    (root / "tests" / "test_mod.py").write_text(tests)
    return root
