"""The final diff of an SWE episode (SWE-bench's ``model_patch``): the workspace against the task's start.

The start is the library's pristine tree with the bug written in (what ``reset`` lays out), read
on the host from the installed sources. The workspace is agent-controlled, so the host never walks
it by path: one command inside the sandbox lists the files whose content differs from the start
(the start's digests go in with the command), and the host reads only those, through the
sandbox's ``read_file`` (no link followed, size-capped). The diff is git's format (``diff --git``,
``new file mode``, ``deleted file mode``, symlinks as mode 120000, ``Binary files ... differ``),
so ``git apply`` on the start tree rebuilds the workspace. Python's byte-code caches
(``__pycache__``, ``*.pyc``, ``.pytest_cache``) are left out, as a ``.gitignore`` would.

Bounds, checked before the work they bound: at most :data:`MAX_PATCH_FILES` files are listed and
read, and the patch is cut at a file boundary past :data:`MAX_PATCH_CHARS` characters; what was
left out is said on a last line that ``git apply`` ignores.
"""

from __future__ import annotations

import base64
import difflib
import functools
import hashlib
import json
import os
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MAX_PATCH_CHARS", "MAX_PATCH_FILES", "changed_files", "git_diff", "model_patch", "start_digests"]

#: Most changed files a patch lists (a workspace with more is summarised past this many).
MAX_PATCH_FILES = 200
#: Longest patch kept, in characters (cut at a file boundary).
MAX_PATCH_CHARS = 1_000_000
#: Folders and suffixes that are build output, not the agent's change.
_SKIP_DIRS = ("__pycache__", ".pytest_cache")
_SKIP_SUFFIXES = (".pyc", ".pyo")

# Run inside the sandbox by the workspace's python3: prints one JSON line per path whose digest
# differs from the start's (status A/M/D, path, link target or null, size), at most LIMIT + 1 lines.
_LISTER = f"""
import base64, hashlib, json, os, stat, sys, zlib
start = json.loads(zlib.decompress(base64.b64decode(sys.argv[1])))
limit = int(sys.argv[2])
skip_dirs, skip_suffixes = {set(_SKIP_DIRS)!r}, {_SKIP_SUFFIXES!r}
seen, shown = set(), 0
def say(status, path, target, size):
    global shown
    shown += 1
    print(json.dumps([status, path, target, size]))
    if shown > limit:
        sys.exit(0)
def digest(path):
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return "l:" + hashlib.sha256(target.encode("utf-8", "surrogateescape")).hexdigest()[:32], target, 0
    if not stat.S_ISREG(st.st_mode):
        return None, None, 0
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return "f:" + h.hexdigest()[:32], None, st.st_size
for folder, dirs, files in os.walk("."):
    dirs[:] = sorted(d for d in dirs if d not in skip_dirs and not os.path.islink(os.path.join(folder, d)))
    links = [d for d in os.listdir(folder) if d not in files and os.path.islink(os.path.join(folder, d))]
    for name in sorted(files + links):
        if name.endswith(skip_suffixes):
            continue
        path = os.path.normpath(os.path.join(folder, name))
        try:
            value, target, size = digest(path)
        except OSError:
            continue
        if value is None:
            continue
        seen.add(path)
        if start.get(path) != value:
            say("M" if path in start else "A", path, target, size)
for path in sorted(set(start) - seen):
    say("D", path, None, 0)
"""


def _digest(data: bytes, link: bool = False) -> str:
    return ("l:" if link else "f:") + hashlib.sha256(data).hexdigest()[:32]


@functools.lru_cache(maxsize=16)
def _tree_digests(root: str) -> tuple[tuple[str, str], ...]:
    """(relative path, digest) of every file and link of a trusted host tree (build output left out)."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not os.path.islink(os.path.join(folder, d))]
        links = [d for d in os.listdir(folder) if d not in files and os.path.islink(os.path.join(folder, d))]
        for name in files + links:
            if name.endswith(_SKIP_SUFFIXES):
                continue
            full = os.path.join(folder, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                out.append((rel, _digest(os.readlink(full).encode("utf-8", "surrogateescape"), link=True)))
            elif os.path.isfile(full):
                out.append((rel, _digest(Path(full).read_bytes())))
    return tuple(sorted(out))


def start_digests(root: Path, overlay: Mapping[str, bytes]) -> dict[str, str]:
    """Digests of the start tree: ``root`` with ``overlay`` (relative path -> bytes) written over it."""
    digests = dict(_tree_digests(str(root)))
    digests.update({rel: _digest(data) for rel, data in overlay.items()})
    return digests


def changed_files(
    box: Any, start: Mapping[str, str], limit: int = MAX_PATCH_FILES
) -> tuple[list[tuple[str, str, str | None, int]], bool]:
    """``([(status, path, link target, size), ...], complete)``: what differs between the workspace and ``start``.

    One command in the sandbox; ``complete`` is False when more than ``limit`` paths differ (or
    the listing was cut), and then only the first ``limit`` are returned.
    """
    packed = base64.b64encode(zlib.compress(json.dumps(dict(start), sort_keys=True).encode(), 9)).decode()
    program = base64.b64encode(_LISTER.encode()).decode()
    result = box.run(f"python3 -c \"import base64; exec(base64.b64decode('{program}'))\" {packed} {int(limit)}")
    rows: list[tuple[str, str, str | None, int]] = []
    complete = result.exit_code == 0 and not getattr(result, "truncated", False)
    for line in result.output.splitlines():
        try:
            status, path, target, size = json.loads(line)
        except (ValueError, TypeError):
            complete = False  # a cut last line, or noise the agent cannot inject into this program's stdout
            continue
        if status in ("A", "M", "D") and isinstance(path, str) and isinstance(size, int):
            rows.append((status, path, target if isinstance(target, str) else None, size))
    if len(rows) > limit:
        rows, complete = rows[:limit], False
    return rows, complete


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def git_diff(path: str, old: bytes | None, new: bytes | None, *, old_link: bool = False, new_link: bool = False) -> str:
    """One file's section of a git patch: ``old`` (None: absent) to ``new`` (None: deleted).

    A link's bytes are its target (git's mode 120000); bytes that are not UTF-8 read as a binary change.
    """
    mode_old = "120000" if old_link else "100644"
    mode_new = "120000" if new_link else "100644"
    head = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        head.append(f"new file mode {mode_new}\n")
    elif new is None:
        head.append(f"deleted file mode {mode_old}\n")
    elif mode_old != mode_new:
        head += [f"old mode {mode_old}\n", f"new mode {mode_new}\n"]
    try:
        old_text = None if old is None else old.decode("utf-8")
        new_text = None if new is None else new.decode("utf-8")
    except UnicodeDecodeError:
        return (
            "".join(head)
            + f"Binary files {'/dev/null' if old is None else 'a/' + path} and "
            + (f"{'/dev/null' if new is None else 'b/' + path} differ\n")
        )
    body = difflib.unified_diff(
        _lines(old_text or ""),
        _lines(new_text or ""),
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}",
        n=3,
    )
    text = "".join(body)
    if not text:  # same text, different kind (a link replaced by a file with its target as content)
        return "".join(head)
    return "".join(head) + text


def model_patch(box: Any, root: Path, overlay: Mapping[str, bytes]) -> str:
    """The workspace of ``box`` against ``root`` + ``overlay``, as a git patch ('' when unchanged)."""
    start = start_digests(root, overlay)
    rows, complete = changed_files(box, start)
    parts: list[str] = []
    size = 0
    left_out = 0
    for status, path, target, file_size in sorted(rows, key=lambda row: row[1]):
        if size + file_size > MAX_PATCH_CHARS:  # checked before the file is read
            left_out += 1
            continue
        old_link = start.get(path, "").startswith("l:")
        old: bytes | None = None
        if status != "A":
            if path in overlay:
                old = bytes(overlay[path])
            elif old_link:
                old = os.readlink(root / path).encode("utf-8", "surrogateescape")
            else:
                old = (root / path).read_bytes()
        new: bytes | None = None
        if status != "D":
            if target is not None:
                new = target.encode("utf-8", "surrogateescape")
            else:
                try:
                    new = box.read_file(path)
                except (OSError, ValueError) as err:  # gone since the listing, or past the size cap
                    parts.append(f"# envgym: {path} could not be read ({type(err).__name__}); left out\n")
                    continue
        section = git_diff(path, old, new, old_link=old_link, new_link=target is not None)
        parts.append(section)
        size += len(section)
    if left_out or not complete:
        parts.append(
            f"# envgym: the patch is incomplete: {left_out} more changed files past {MAX_PATCH_CHARS} characters"
            + ("" if complete else f", and the workspace has more than {MAX_PATCH_FILES} changed paths")
            + "\n"
        )
    return "".join(parts)
