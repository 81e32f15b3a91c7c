"""Grading preparation of a workspace (the step before the SWE-bench test run). Standard library
only: the docker backend sends this file into the container and runs it there as root."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["prepare_workspace"]


def prepare_workspace(root: Path, restore: Mapping[str, bytes], owner: tuple[int, int] | None) -> list[str]:
    """Make a workspace gradable (run with no command of the agent alive): delete the files Python
    or pytest would run implicitly that ``restore`` does not name (``conftest.py``,
    ``sitecustomize.py``, ``usercustomize.py``, ``*.pth``, pytest/tox/setup.cfg/pyproject
    configs), every byte-code cache (an "unchecked" ``.pyc`` is loaded without looking at its
    source), and symlinks that leave the workspace; then write ``restore`` with fresh parents.
    Returns the relative paths deleted. ``owner``: (uid, gid) for the restored files.

    This module runs on the host (bwrap) and inside the container as root (docker: its source is
    sent in and run as a script), so it imports only the standard library."""
    implicit = {
        "conftest.py",
        "sitecustomize.py",
        "usercustomize.py",
        "pytest.ini",
        ".pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
    }
    root_real = os.path.realpath(root)
    keep = set(restore)
    deleted: list[str] = []
    for folder, dirs, files in os.walk(root_real, topdown=True, followlinks=False):
        rel_folder = os.path.relpath(folder, root_real)
        for name in list(dirs):
            full = os.path.join(folder, name)
            rel = os.path.normpath(os.path.join(rel_folder, name))
            if name == "__pycache__" and not os.path.islink(full):
                shutil.rmtree(full, ignore_errors=True)
                dirs.remove(name)
                deleted.append(rel)
            elif os.path.islink(full):
                dirs.remove(name)
                target = os.path.realpath(full)
                if target != root_real and not target.startswith(root_real + os.sep):
                    os.unlink(full)
                    deleted.append(rel)
        for name in files:
            full = os.path.join(folder, name)
            rel = os.path.normpath(os.path.join(rel_folder, name))
            outside = False
            if os.path.islink(full):
                target = os.path.realpath(full)
                outside = target != root_real and not target.startswith(root_real + os.sep)
            drop = (name in implicit or name.endswith((".pth", ".pyc", ".pyo"))) and rel not in keep
            if drop or outside:
                os.unlink(full)
                deleted.append(rel)
    for rel, data in sorted(restore.items()):
        parts = rel.split("/")
        current = root_real
        for part in parts[:-1]:
            current = os.path.join(current, part)
            info = os.lstat(current) if os.path.lexists(current) else None
            if info is not None and not stat.S_ISDIR(info.st_mode):
                os.unlink(current)
                info = None
            if info is None:
                os.mkdir(current, 0o755)
                if owner is not None:
                    os.chown(current, *owner)
        target = os.path.join(current, parts[-1])
        if os.path.lexists(target):
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            else:
                os.unlink(target)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if owner is not None:
            os.chown(target, *owner)
    return deleted


def main(argv: list[str]) -> int:
    """``python3 _prepare.py ROOT SPEC.json``: SPEC holds {"restore": {relpath: path of the bytes},
    "owner": [uid, gid] or null}; prints the deleted paths as JSON."""
    root, spec_path = argv
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    restore = {}
    for rel, source in spec["restore"].items():
        with open(source, "rb") as handle:
            restore[rel] = handle.read()
    owner = tuple(spec["owner"]) if spec.get("owner") else None
    print(json.dumps(prepare_workspace(Path(root), restore, owner)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
