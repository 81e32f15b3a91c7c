"""Files of a run that survive a kill at any instant.

A run (``envgym run``, ``envgym bench run``, ``envgym train``) may be killed anywhere, ``kill -9``
and power cuts included, and the same command must then resume from its folder. Two kinds of file
make that hold:

* **Whole files** (``config.json``, ``meta.json``, ``summary.json``, ``suite.yaml``,
  ``bench.json``, ``results.json``, a checkpoint's ``state.json``, ``report.md``) go through
  :func:`write_atomic`: the bytes go to a temporary file in the same folder, are flushed to disk,
  and the temporary file is renamed over the target (``os.replace``, atomic within a file system).
  A reader sees the old content or the new one, never a mix; a kill leaves at most a stray
  ``.<name>.<random>.tmp`` that nothing reads.
* **Append-only JSONL** (``episodes.jsonl``, ``metrics.jsonl``): one record per line, appended and
  fsynced as it ends. Only the last line can be cut short by a crash, so :func:`read_jsonl` treats
  a damaged last line (torn anywhere, even inside a multibyte UTF-8 character; not UTF-8; not JSON;
  JSON of the wrong shape) as the write the crash interrupted: dropped, and cut off the file when
  repairing, so the run plays that record again. A damaged line before the last cannot come from
  a crash: it is refused with :class:`DamagedFileError` (``line N of PATH is damaged: ...``).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from envgym.errors import ConfigError

__all__ = ["DamagedFileError", "MalformedRecordError", "fsync_folder", "read_jsonl", "write_atomic"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class MalformedRecordError(ConfigError):
    """A JSON value that is not a record of the kind expected (``{}``, ``[1, 2]``, a field of the
    wrong type). Raised by the parsers :func:`read_jsonl` applies to each line."""


class DamagedFileError(ConfigError):
    """A line of a JSONL run file, other than the last, cannot be read: no crash leaves that, so
    the file was edited or damaged on disk."""

    def __init__(self, path: Path, number: int, reason: str) -> None:
        self.path = path
        self.number = number
        super().__init__(
            f"line {number} of {path} is damaged: {reason}. A crash can only cut the last line short, so "
            "the file was changed after it was written: restore it, or write the run into another folder (--out)."
        )


def fsync_folder(folder: Path) -> None:
    """Push a rename in ``folder`` to disk (best effort: not every platform can open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(
    path: str | os.PathLike[str], data: str | bytes, *, encoding: str = "utf-8", skip_unchanged: bool = False
) -> bool:
    """Replace ``path`` with ``data`` so that a kill at any instant leaves the old file or the new one.

    Args:
        path: the file (its folder must exist).
        data: the whole new content; text is encoded with ``encoding``.
        skip_unchanged: leave the file alone (no write at all) when it already holds ``data``.

    Returns whether the file was written.
    """
    target = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else bytes(data)
    if skip_unchanged:
        try:
            if target.read_bytes() == payload:
                return False
        except OSError:
            pass
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_folder(target.parent)
    return True


class _Damage(Exception):
    """Why one line cannot be read (internal to :func:`read_jsonl`)."""


def _parse_line(piece: bytes, complete: bool, parse: Callable[[Any], T]) -> T:
    if not complete:
        raise _Damage("it has no line end (a write cut short)")
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _Damage(f"it is not UTF-8 text ({err.reason} at byte {err.start})") from err
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise _Damage(f"it is not valid JSON ({err.msg} at column {err.colno})") from err
    try:
        return parse(data)
    except MalformedRecordError as err:
        raise _Damage(str(err)) from err


def read_jsonl(path: str | os.PathLike[str], parse: Callable[[Any], T], *, repair: bool = False) -> list[T]:
    """The records of the JSONL file ``path`` (empty when it does not exist), ``parse`` applied to each.

    Args:
        path: the file.
        parse: turns one line's JSON value into a record; raises :class:`MalformedRecordError` for
            a value of the wrong shape (any other error propagates: a record from a newer envgym,
            say, must not be mistaken for damage and cut away).
        repair: cut a damaged last line off the file, so that appends start on a clean line.

    Blank lines are skipped. A damaged last line is dropped (see the module docstring); a damaged
    line before it raises :class:`DamagedFileError`.
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        return []
    # Split on b"\n" only: JSON escapes every control character, and a torn multibyte character
    # must stay inside its line.
    lines: list[tuple[int, int, bytes, bool]] = []  # (number, start offset, bytes, had its newline)
    offset = 0
    for number, piece in enumerate(raw.split(b"\n"), 1):
        start, offset = offset, offset + len(piece) + 1
        if piece.strip():
            lines.append((number, start, piece, offset <= len(raw)))
    records: list[T] = []
    for position, (number, start, piece, complete) in enumerate(lines):
        try:
            records.append(_parse_line(piece, complete, parse))
        except _Damage as damage:
            if position < len(lines) - 1:
                raise DamagedFileError(file, number, str(damage)) from damage.__cause__
            log.warning("%s: line %d is damaged (%s); dropped as the write a crash interrupted", file, number, damage)
            if repair:
                with file.open("r+b") as f:
                    f.truncate(start)
                    f.flush()
                    os.fsync(f.fileno())
    return records
