"""Die at the N-th file write of a run, in-process: a deterministic sweep over every instant at
which a ``kill -9`` changes what a run folder holds (the random real kills are in
``tests/rollout/test_rundir_kill.py``).

A run folder changes in two ways only: a whole file replaced (:func:`envgym._runfiles.write_atomic`
ends in ``os.replace``) and a record appended (:meth:`envgym.rollout.rundir.RunFolder.append`).
:func:`dies_at` makes the N-th of these inside a folder fail the way a kill would: the rename never
happens (the new bytes sit in a temporary file), or the record line is half written. It raises
:class:`Killed`, a ``BaseException``, so no ``except Exception`` on the way turns it into an
episode error; the ``finally`` blocks it runs close files and release locks, which writes nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from envgym.rollout.rundir import RunFolder


class Killed(BaseException):
    """The process died here."""


@contextmanager
def dies_at(point: int | None, folder: Path) -> Iterator[list[str]]:
    """Within the block, the ``point``-th (0-based) write under ``folder`` dies half-way
    (``None``: none dies, only counted). Yields the list of writes seen, as ``"replace NAME"`` /
    ``"append NAME"``."""
    seen: list[str] = []
    real_replace, real_append = os.replace, RunFolder.append
    root = str(Path(folder).resolve())

    def hit(what: str) -> bool:
        seen.append(what)
        return point is not None and len(seen) - 1 == point

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        if str(Path(dst).resolve()).startswith(root) and hit(f"replace {Path(dst).name}"):
            raise Killed(f"killed before {dst} was replaced")
        real_replace(src, dst, **kwargs)

    def append(self: RunFolder, trajectory: Any) -> None:
        if hit(f"append {self.path.name}"):
            line = json.dumps(trajectory.to_dict(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            with (self.path / "episodes.jsonl").open("ab") as f:
                f.write(line[: len(line) // 2])
            raise Killed(f"killed half-way through a record of {self.path}")
        real_append(self, trajectory)

    os.replace, RunFolder.append = replace, append  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        os.replace, RunFolder.append = real_replace, real_append  # type: ignore[method-assign]
