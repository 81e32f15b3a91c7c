"""A control group per sandbox: every process a sandbox starts, killed as a whole, with one memory
and one process limit for all of them together.

Linux offers cgroups in two shapes, and machines mix them:

* **v2** (the unified hierarchy): ``cgroup.kill`` SIGKILLs every process of a group at once
  (Linux >= 5.14), ``memory.max``/``memory.swap.max``/``pids.max`` bound the group when those
  controllers are enabled for it.
* **v1** (one hierarchy per controller): ``memory.limit_in_bytes`` (and ``memsw``) and
  ``pids.max``; killing means reading ``cgroup.procs`` and signalling each process until the
  group is empty (a process cannot leave its group, and ``pids.max`` bounds how fast it refills).

A *hybrid* machine (v1 controllers plus an empty v2 hierarchy, like this project's CI) gets
both: v1 groups for the limits and a v2 group for ``cgroup.kill``. The host process joins a
sandbox's groups by writing to their ``cgroup.procs`` files between ``fork`` and ``exec``
(the launcher, see :meth:`CgroupSet.launcher`), so the sandbox never runs outside them.

Creating groups needs write access to the hierarchy (root, or a delegated subtree); where none
is writable :func:`create` returns None and the sandbox falls back to killing its PID
namespace's init (the kernel then kills every process of that namespace).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from envgym.sandbox.base import pid_alive

__all__ = ["CgroupSet", "available", "create", "reap_stale"]

PREFIX = "envgym-sandbox-"
#: Environment switch for tests and odd hosts: "off" never uses cgroups.
SWITCH = "ENVGYM_SANDBOX_CGROUPS"


@dataclass(frozen=True)
class _Layout:
    """Where this process's groups are, per hierarchy."""

    v2: Path | None
    """This process's group in the unified hierarchy (for ``cgroup.kill``), when writable."""
    v2_memory: bool
    """Whether ``memory`` and ``pids`` can be enabled below :attr:`v2`."""
    v1_memory: Path | None
    v1_pids: Path | None


def _mounts() -> dict[str, tuple[Path, str]]:
    """Hierarchy name -> (mount point, root inside the hierarchy) from /proc/self/mountinfo."""
    found: dict[str, tuple[Path, str]] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        fstype, options = extra[0], extra[2].split(",")
        if fstype == "cgroup2":
            found.setdefault("unified", (Path(fields[4]), fields[3]))
        elif fstype == "cgroup":
            for controller in ("memory", "pids"):
                if controller in options:
                    found.setdefault(controller, (Path(fields[4]), fields[3]))
    return found


def _own_paths() -> dict[str, str]:
    """Hierarchy name -> this process's group path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            paths["unified"] = path
        for controller in controllers.split(","):
            if controller in ("memory", "pids"):
                paths[controller] = path
    return paths


def _locate(mounts: dict[str, tuple[Path, str]], paths: dict[str, str], name: str) -> Path | None:
    if name not in mounts or name not in paths:
        return None
    mount, root = mounts[name]
    own = paths[name]
    if root != "/" and not (own == root or own.startswith(root.rstrip("/") + "/")):
        return None
    relative = own[len(root) :] if root != "/" else own
    folder = mount / relative.lstrip("/")
    return folder if folder.is_dir() and os.access(folder, os.W_OK) else None


@functools.lru_cache(maxsize=1)
def _layout() -> _Layout | None:
    if os.environ.get(SWITCH, "").lower() in ("off", "0", "no"):
        return None
    mounts, paths = _mounts(), _own_paths()
    v2 = _locate(mounts, paths, "unified")
    if v2 is not None and not (v2 / "cgroup.kill").exists() and not (v2 / "cgroup.procs").exists():
        v2 = None
    v2_memory = False
    if v2 is not None:
        with contextlib.suppress(OSError):
            v2_memory = {"memory", "pids"} <= set((v2 / "cgroup.controllers").read_text().split())
    layout = _Layout(v2, v2_memory, _locate(mounts, paths, "memory"), _locate(mounts, paths, "pids"))
    if layout.v2 is None and layout.v1_memory is None and layout.v1_pids is None:
        return None
    return layout


def available() -> str | None:
    """What a sandbox's groups would be made of here ("v2", "v1", "v1+v2"), or None."""
    layout = _layout()
    if layout is None:
        return None
    parts = []
    if layout.v1_memory or layout.v1_pids:
        parts.append("v1")
    if layout.v2 is not None:
        parts.append("v2")
    return "+".join(parts)


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


@dataclass
class CgroupSet:
    """The groups of one sandbox (one folder per hierarchy, all named alike)."""

    name: str
    folders: list[Path] = field(default_factory=list)
    kill_file: Path | None = None
    """``cgroup.kill`` when the unified hierarchy has one."""
    memory_limited: bool = False
    pids_limited: bool = False
    memory_folder: Path | None = None
    _oom_seen: int = 0

    @property
    def procs_files(self) -> list[str]:
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def launcher(self, argv: list[str], *, uid: int | None, gid: int | None) -> list[str]:
        """``argv`` started inside the groups: a shell joins them (``echo 0 > cgroup.procs``) then
        execs ``argv``, through ``setpriv`` to ``uid``/``gid`` when given (the cgroup files are
        root's, so the switch of user comes after joining)."""
        join = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'
        prefix = ["/bin/sh", "-c", join, "envgym-cgroup", *self.procs_files, "--"]
        if uid is not None:
            prefix += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
        return prefix + argv

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return found

    def kill(self, wait: float = 10.0) -> bool:
        """SIGKILL every process of the groups and wait until they are empty; True when empty."""
        deadline = time.monotonic() + wait
        while True:
            if self.kill_file is not None:
                _write(self.kill_file, "1")
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    def oom_kills(self) -> int:
        """How many times the memory limit was hit since the last call (0 when unknown)."""
        folder = self.memory_folder
        if folder is None:
            return 0
        count = 0
        with contextlib.suppress(OSError, ValueError):
            name = "memory.events" if (folder / "memory.events").exists() else "memory.oom_control"  # v2, v1
            for line in (folder / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    count = int(value)
        new = count - self._oom_seen
        self._oom_seen = count
        return max(0, new)

    def remove(self) -> None:
        """Kill what is left and delete the groups (a group is removable once empty)."""
        self.kill()
        for folder in self.folders:
            for _ in range(200):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)


def create(memory_bytes: int, processes: int) -> CgroupSet | None:
    """New groups for one sandbox with its memory and process limits, or None where this process
    may not make groups."""
    layout = _layout()
    if layout is None:
        return None
    name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    groups = CgroupSet(name)
    try:
        if layout.v1_memory is not None:
            folder = layout.v1_memory / name
            folder.mkdir()
            groups.folders.append(folder)
            groups.memory_folder = folder
            ok = _write(folder / "memory.limit_in_bytes", str(memory_bytes))
            if (folder / "memory.memsw.limit_in_bytes").exists():
                ok = _write(folder / "memory.memsw.limit_in_bytes", str(memory_bytes)) and ok
            groups.memory_limited = ok
        if layout.v1_pids is not None:
            folder = layout.v1_pids / name
            folder.mkdir()
            groups.folders.append(folder)
            groups.pids_limited = _write(folder / "pids.max", str(processes))
        if layout.v2 is not None:
            folder = layout.v2 / name
            folder.mkdir()
            groups.folders.append(folder)
            if (folder / "cgroup.kill").exists():
                groups.kill_file = folder / "cgroup.kill"
            # enabling controllers needs the parent to have no processes of its own (v2's rule)
            if (
                layout.v2_memory
                and not groups.memory_limited
                and _write(layout.v2 / "cgroup.subtree_control", "+memory +pids")
            ):
                groups.memory_limited = _write(folder / "memory.max", str(memory_bytes))
                _write(folder / "memory.swap.max", "0")
                groups.pids_limited = _write(folder / "pids.max", str(processes)) or groups.pids_limited
                groups.memory_folder = folder
    except OSError:
        groups.remove()
        return None
    return groups


def reap_stale() -> int:
    """Delete the empty groups of sandboxes whose owning process is gone; returns how many."""
    layout = _layout()
    if layout is None:
        return 0
    removed = 0
    for parent in (layout.v1_memory, layout.v1_pids, layout.v2):
        if parent is None:
            continue
        with contextlib.suppress(OSError):
            for folder in parent.glob(PREFIX + "*"):
                try:
                    owner = int(folder.name[len(PREFIX) :].split("-")[0])
                except ValueError:
                    continue
                if pid_alive(owner):
                    continue
                stale = CgroupSet(
                    folder.name, [folder], folder / "cgroup.kill" if (folder / "cgroup.kill").exists() else None
                )
                stale.remove()
                removed += 1
    return removed
