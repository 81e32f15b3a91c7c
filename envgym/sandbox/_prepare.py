"""The grading copy of a workspace, and the file operations that touch agent-controlled folders.

Standard library only: the docker backend sends this file into the container and runs it there
(``python3 -I _prepare.py copy SPEC.json``), the bwrap backend calls it on the host.

Everything here works through directory file descriptors opened with ``O_NOFOLLOW``, one path
component at a time, never by path name inside a folder an agent could have changed: a symlink
swapped in for a folder is not followed, a FIFO is not opened for a blocking read, a tree 3,000
levels deep is neither recursed into nor followed below :data:`MAX_DEPTH`. Every walk is
iterative and bounded in depth, entries, bytes and seconds.

:func:`grading_copy` builds what SWE-bench-style grading runs over: a fresh tree holding the
agent's regular files and inside-pointing symlinks, *without* what Python or pytest would run
implicitly (``conftest.py``, ``sitecustomize.py``/``usercustomize.py``, ``*.pth``, pytest/tox
configs, ``*.dist-info``/``*.egg-info`` metadata that declares plugins, byte code, and any
``__init__.py`` the agent added to a test folder), then the pristine files of ``restore`` written
over it.
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
import sys
import time
from collections.abc import Mapping

__all__ = [
    "MAX_DEPTH",
    "CopyLimitError",
    "grading_copy",
    "read_regular",
    "remove_tree",
    "write_regular",
]

#: Deepest folder a grading copy descends into (what lies below is left out).
MAX_DEPTH = 64
MAX_ENTRIES = 200_000
MAX_BYTES = 1 << 30
MAX_SECONDS = 120.0
#: Files Python or pytest run or read for configuration without being asked (unless restored).
IMPLICIT_FILES = frozenset(
    {
        "conftest.py",
        "sitecustomize.py",
        "usercustomize.py",
        "pytest.ini",
        ".pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
    }
)
IMPLICIT_SUFFIXES = (".pth", ".pyc", ".pyo", ".egg-link")
#: Folders never copied: byte-code and tool caches, VCS data, installed-package metadata (a
#: ``*.dist-info`` on ``sys.path`` can declare a pytest plugin through an entry point).
SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".pytest_cache", ".tox", ".nox", ".mypy_cache"})
SKIPPED_DIR_SUFFIXES = (".dist-info", ".egg-info")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class CopyLimitError(OSError):
    """A walk went past one of its bounds (depth, entries, bytes, seconds)."""


def _open_dir(root_fd: int, parts: list[str] | tuple[str, ...]) -> int:
    """The folder ``parts`` below ``root_fd``, each component opened without following links."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _split(relpath: str) -> list[str]:
    parts = [p for p in relpath.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or relpath.startswith("/"):
        raise ValueError(f"not a relative path inside the workspace: {relpath!r}")
    return parts


def read_regular(root: str, relpath: str, max_bytes: int) -> bytes:
    """A regular file's bytes; ``IsADirectoryError``/``PermissionError`` for anything else (a FIFO,
    a device, a symlink anywhere on the way), ``OSError(EFBIG)`` past ``max_bytes``. Never blocks."""
    parts = _split(relpath)
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        try:
            parent = _open_dir(root_fd, parts[:-1])
        except NotADirectoryError as err:
            raise FileNotFoundError(f"{relpath!r}: a part of the path is not a folder") from err
        except OSError as err:
            if err.errno == 40:  # ELOOP: a symlink on the way
                raise PermissionError(f"{relpath!r} goes through a symbolic link") from err
            raise
        try:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
            except OSError as err:
                if err.errno == 40:
                    raise PermissionError(f"{relpath!r} is a symbolic link") from err
                raise
        finally:
            os.close(parent)
    finally:
        os.close(root_fd)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(f"{relpath!r} is a folder")
        if not stat.S_ISREG(info.st_mode):
            raise PermissionError(f"{relpath!r} is not a regular file (a FIFO, socket or device)")
        if info.st_size > max_bytes:
            raise OSError(27, f"{relpath!r} is {info.st_size} bytes, more than the {max_bytes} bytes read at most")
        chunks, total = [], 0
        while chunk := os.read(fd, min(_CHUNK, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise OSError(27, f"{relpath!r} grew past {max_bytes} bytes while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_regular(
    root: str, relpath: str, data: bytes, owner: tuple[int, int] | None = None, *, replace_folder: bool = False
) -> None:
    """Write ``data`` to ``relpath`` below ``root``, making missing folders; a symlink or a
    non-regular file in the way is replaced (never followed), and a folder too when
    ``replace_folder`` (else ``IsADirectoryError``)."""
    parts = _split(relpath)
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=fd)
                if owner is not None:
                    os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as err:  # a file or a symlink where a folder belongs
                if err.errno not in (20, 40):  # ENOTDIR, ELOOP
                    raise
                os.unlink(part, dir_fd=fd)
                os.mkdir(part, 0o755, dir_fd=fd)
                if owner is not None:
                    os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        name = parts[-1]
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            if not replace_folder:
                raise IsADirectoryError(f"{relpath!r} is a folder")
            remove_tree(f"/proc/self/fd/{fd}/{name}")
        elif info is not None and not stat.S_ISREG(info.st_mode):
            os.unlink(name, dir_fd=fd)
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        try:
            _write_all(out, data)
            if owner is not None:
                os.fchown(out, *owner)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def remove_tree(path: str, *, seconds: float = MAX_SECONDS) -> None:
    """Delete ``path`` and everything below it, however deep, without recursion and without
    following links: each sub-folder is first moved up to ``path`` itself (so no walk is ever
    deeper than two levels), then emptied and removed. Run with no process writing into it."""
    try:
        top = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError as err:
        if err.errno in (20, 40):  # a file or a symlink: remove the name only
            os.unlink(path)
            return
        raise
    deadline = time.monotonic() + seconds
    token, counter = os.urandom(6).hex(), 0
    try:
        pending = ["."]
        while pending:
            if time.monotonic() > deadline:
                raise CopyLimitError(f"removing {path!r} took longer than {seconds:g} s")
            name = pending.pop()
            fd = top if name == "." else os.open(name, _DIR_FLAGS, dir_fd=top)
            try:
                with os.scandir(fd) as entries:
                    items = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
                for child, is_dir in items:
                    if is_dir and fd == top:
                        pending.append(child)
                    elif is_dir:
                        counter += 1
                        flat = f".envgym-rm-{token}-{counter}"
                        os.rename(child, flat, src_dir_fd=fd, dst_dir_fd=top)
                        pending.append(flat)
                    else:
                        os.unlink(child, dir_fd=fd)
            finally:
                if fd != top:
                    os.close(fd)
            if name != ".":
                # its sub-folders were moved up and its files removed: it is empty now
                try:
                    os.rmdir(name, dir_fd=top)
                except OSError:
                    pending.insert(0, name)  # something appeared meanwhile: visit it again
    finally:
        os.close(top)
    os.rmdir(path)


def _is_test_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def grading_copy(
    src: str,
    dst: str,
    restore: Mapping[str, bytes],
    *,
    owner: tuple[int, int] | None = None,
    max_depth: int = MAX_DEPTH,
    max_entries: int = MAX_ENTRIES,
    max_bytes: int = MAX_BYTES,
    seconds: float = MAX_SECONDS,
) -> dict[str, object]:
    """Copy the workspace ``src`` into the new folder ``dst`` for grading (see the module
    docstring), then write ``restore``. Returns ``{"dropped": [...], "files": n, "bytes": n}``;
    raises :class:`CopyLimitError` past a bound (the workspace is then not gradable)."""
    deadline = time.monotonic() + seconds
    restore = {"/".join(_split(rel)): data for rel, data in restore.items()}
    test_dirs = {posixpath.dirname(rel) for rel in restore if _is_test_file(posixpath.basename(rel))}
    dropped: list[str] = []
    files = entries = copied = 0
    os.mkdir(dst, 0o755)
    if owner is not None:
        os.chown(dst, *owner)
    src_root = os.open(src, _DIR_FLAGS)
    dst_root = os.open(dst, _DIR_FLAGS)
    try:
        pending: list[tuple[str, ...]] = [()]
        while pending:
            parts = pending.pop()
            rel_dir = "/".join(parts)
            sfd = _open_dir(src_root, parts)
            try:
                dfd = _open_dir(dst_root, parts)
            except BaseException:
                os.close(sfd)
                raise
            try:
                with os.scandir(sfd) as listing:
                    for entry in listing:
                        entries += 1
                        if entries > max_entries:
                            raise CopyLimitError(f"the workspace holds more than {max_entries} files and folders")
                        if time.monotonic() > deadline:
                            raise CopyLimitError(f"copying the workspace took longer than {seconds:g} s")
                        name = entry.name
                        rel = f"{rel_dir}/{name}" if rel_dir else name
                        if rel in restore:
                            continue  # written from the pristine bytes below
                        info = entry.stat(follow_symlinks=False)
                        mode = info.st_mode
                        if stat.S_ISDIR(mode):
                            if name in SKIPPED_DIRS or name.endswith(SKIPPED_DIR_SUFFIXES):
                                dropped.append(rel + "/")
                                continue
                            if len(parts) + 1 > max_depth:  # nothing a test imports lives this deep
                                dropped.append(f"{rel[:200]}/... (deeper than {max_depth} folders)")
                                continue
                            os.mkdir(name, 0o755, dir_fd=dfd)
                            if owner is not None:
                                os.chown(name, *owner, dir_fd=dfd, follow_symlinks=False)
                            pending.append((*parts, name))
                        elif stat.S_ISREG(mode):
                            implicit = name in IMPLICIT_FILES or name.endswith(IMPLICIT_SUFFIXES)
                            planted_init = name == "__init__.py" and rel_dir in test_dirs
                            if implicit or planted_init:
                                dropped.append(rel)
                                continue
                            copied += _copy_file(sfd, dfd, name, info, max_bytes - copied, owner)
                            files += 1
                        elif stat.S_ISLNK(mode):
                            target = os.readlink(name, dir_fd=sfd)
                            resolved = posixpath.normpath(posixpath.join(rel_dir, target))
                            if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
                                dropped.append(rel)
                                continue
                            os.symlink(target, name, dir_fd=dfd)
                            if owner is not None:
                                os.chown(name, *owner, dir_fd=dfd, follow_symlinks=False)
                        else:  # FIFOs, sockets, devices
                            dropped.append(rel)
            finally:
                os.close(sfd)
                os.close(dfd)
    finally:
        os.close(src_root)
        os.close(dst_root)
    for rel, data in sorted(restore.items()):  # over whatever the agent's tree had at that name
        write_regular(dst, rel, data, owner, replace_folder=True)
    return {"dropped": sorted(dropped), "files": files, "bytes": copied}


def _copy_file(sfd: int, dfd: int, name: str, info: os.stat_result, budget: int, owner: tuple[int, int] | None) -> int:
    if info.st_size > budget:
        raise CopyLimitError(f"the workspace holds more bytes than grading copies ({name!r})")
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=sfd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the listing: skip it
            return 0
        mode = 0o755 if info.st_mode & 0o111 else 0o644
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        total = 0
        try:
            while chunk := os.read(fd, _CHUNK):
                total += len(chunk)
                if total > budget:
                    raise CopyLimitError(f"the workspace holds more bytes than grading copies ({name!r})")
                _write_all(out, chunk)
            if owner is not None:
                os.fchown(out, *owner)
        finally:
            os.close(out)
        return total
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    """``python3 -I _prepare.py copy SPEC.json``; SPEC: {"src", "dst", "restore": {relpath: file
    holding its bytes}, "owner": [uid, gid] or null}. Prints the result as JSON; exit 3 when the
    workspace is past a bound (the message on the JSON's "error")."""
    if len(argv) != 2 or argv[0] != "copy":
        print("usage: _prepare.py copy SPEC.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    restore = {}
    for rel, source in spec["restore"].items():
        with open(source, "rb") as handle:
            restore[rel] = handle.read()
    owner = tuple(spec["owner"]) if spec.get("owner") else None
    try:
        result = grading_copy(spec["src"], spec["dst"], restore, owner=owner)  # type: ignore[arg-type]
    except CopyLimitError as err:
        print(json.dumps({"error": str(err)}))
        return 3
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
