"""One process per output folder: an OS file lock held for the life of a run.

Run folders, bench run folders and training folders are appended to by the process that owns
them. Two processes writing into the same folder would interleave their records (two
``envgym run ... --out DIR`` started together once left 5,889 rows for 3,000 episodes), so each
writer takes an exclusive, non-blocking ``flock`` on ``DIR/.lock`` when it opens the folder and
keeps it until it closes it. The operating system releases the lock when the process ends, however
it ends (``kill -9`` included), so a killed run resumes without anyone deleting a stale lock file.
The file itself stays (removing it would race with a process about to lock it); it holds the
owner's pid, host and start time, only to name the owner in the error a second process gets.

``flock`` locks belong to an open file, so a second :class:`FolderLock` on the same folder in the
same process is refused too. On platforms without ``fcntl`` (Windows) the lock is a no-op.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from envgym._clock import utc_timestamp
from envgym.errors import ConfigError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "FolderInUseError", "FolderLock"]

LOCK_FILE = ".lock"


class FolderInUseError(ConfigError):
    """Another process (or another writer in this one) holds the folder's lock. A usage error
    (a :class:`ConfigError`: pick another ``--out``), so every caller that reports bad settings
    reports it too."""

    def __init__(self, folder: Path, what: str, owner: dict[str, Any]) -> None:
        self.folder = folder
        self.owner = owner
        pid = owner.get("pid", "unknown")
        since = f" since {owner['started_at']}" if owner.get("started_at") else ""
        host = owner.get("host")
        where = f" on {host}" if host and host != socket.gethostname() else ""
        super().__init__(
            f"{folder} is in use: the {what} is being written by process {pid}{where}{since}. Wait for it to "
            "finish (or stop it; a stopped run resumes), or write into another folder (--out)."
        )


class FolderLock:
    """An exclusive lock on ``folder`` (created if missing), taken on construction.

    Args:
        folder: the output folder.
        what: what the folder holds, for the error message (``"run folder"``...).

    Raises:
        FolderInUseError: another open :class:`FolderLock` holds the folder, in any process.
        ConfigError: the folder or its lock file cannot be created (a file in the path, a
            read-only or virtual file system such as ``/proc``); the message says which part.
    """

    def __init__(self, folder: str | os.PathLike[str], what: str = "run folder") -> None:
        self._fd: int | None = None  # first: __del__ runs even when the lock was never taken
        self.folder = Path(folder)
        self.what = what
        self.path = self.folder / LOCK_FILE
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise ConfigError(
                f"cannot create the {what} {self.folder}: {_why(self.folder, err)}. Pick another --out."
            ) from err
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _read_owner(fd)
                os.close(fd)
                raise FolderInUseError(self.folder, what, owner) from None
            except BaseException:
                os.close(fd)
                raise
        self._fd = fd
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": utc_timestamp(), "argv": sys.argv}
        data = (json.dumps(owner, default=str) + "\n").encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the folder up (idempotent). The lock file stays; only the lock goes."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor of the open file releases the flock

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()

    def __del__(self) -> None:
        if hasattr(self, "_fd"):  # a constructor that failed before its first line sets nothing
            self.release()


def _why(folder: Path, err: OSError) -> str:
    """Why ``folder`` cannot be made, in words: the part of its path that is a file, else the OS's reason."""
    for part in (folder, *folder.parents):
        if part.exists():
            if not part.is_dir():
                return f"{part} is a file, not a folder"
            break
    where = f" ({err.filename})" if err.filename and str(err.filename) != str(folder) else ""
    return f"{err.strerror or type(err).__name__}{where}"


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        owner = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}
