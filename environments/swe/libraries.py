"""The real code behind the SWE tasks: small pure-Python libraries from PyPI, pinned by version and hash.

Each :class:`Library` names a source distribution (sdist) on PyPI that carries the library's own
test suite, and whose tests pass with Debian bookworm's ``/usr/bin/python3`` (3.11), Debian's
``python3-pytest`` (7.2) and the standard library alone: the interpreter inside both sandboxes.
All of them are under permissive licences (MIT, BSD).

The sdists are downloaded at install time only, by ``python -m envgym.environments.swe.libraries
fetch`` (scripts/setup.sh runs it), verified against the pinned SHA-256 and unpacked into
:func:`cache_dir` ``/src/<name>-<version>``: the *pristine tree* that every episode's sandbox
copies (and the bug-injection builder mutates). Nothing here touches the network at run time:
:func:`source_tree` raises :class:`SetupMissingError` naming the setup command when a tree is
absent.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from envgym.errors import InvalidKwargsError, MissingDependencyError, NotAvailableError, suggest

__all__ = [
    "LIBRARIES",
    "Library",
    "SetupMissingError",
    "by_name",
    "cache_dir",
    "fetch",
    "install",
    "source_files",
    "source_tree",
    "test_files",
]

#: Setting that moves the cache (tests and CI may point it elsewhere).
CACHE_ENV = "ENVGYM_SWE_CACHE"
_SETUP_HINT = "python -m envgym.environments.swe.libraries fetch (scripts/setup.sh runs it)"


@dataclass(frozen=True)
class Library:
    """One pinned library.

    Attributes:
        name: the PyPI name.
        version: the pinned version.
        sdist_url: where its sdist lives on PyPI's file host.
        sha256: the sdist's SHA-256 as PyPI publishes it; a download that differs is rejected.
        root: the folder inside the sdist archive (``toolz-1.2.0``).
        pythonpath: entries, relative to the tree root, that make the library importable
            (``("src",)``, or ``("",)`` for the root itself).
        test_paths: what pytest collects (files or folders relative to the tree root).
        source_paths: the library's own code (files or folders) that bugs are injected into;
            test folders below them are excluded.
        license: the licence the sdist ships.
    """

    name: str
    version: str
    sdist_url: str
    sha256: str
    root: str
    pythonpath: tuple[str, ...]
    test_paths: tuple[str, ...]
    source_paths: tuple[str, ...]
    license: str

    @property
    def key(self) -> str:
        """``name-version``: the folder name of the pristine tree."""
        return f"{self.name}-{self.version}"


_HOST = "https://files.pythonhosted.org/packages"

LIBRARIES: tuple[Library, ...] = (
    Library(
        "toolz",
        "1.2.0",
        f"{_HOST}/31/6f/ae20c212a07aa2d156c787383d8088a5e045ee39628661edb190c97e1659/toolz-1.2.0.tar.gz",
        "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
        "toolz-1.2.0",
        ("",),
        ("toolz/tests",),
        ("toolz",),
        "BSD-3-Clause",
    ),
    Library(
        "inflection",
        "0.5.1",
        f"{_HOST}/e1/7e/691d061b7329bc8d54edbf0ec22fbfb2afe61facb681f9aaa9bff7a27d04/inflection-0.5.1.tar.gz",
        "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417",
        "inflection-0.5.1",
        ("",),
        ("test_inflection.py",),
        ("inflection",),
        "MIT",
    ),
    Library(
        "six",
        "1.17.0",
        f"{_HOST}/94/e7/b2c673351809dca68a0e064b6af791aa332cf192da575fd474ed7d6f16a2/six-1.17.0.tar.gz",
        "ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81",
        "six-1.17.0",
        ("",),
        ("test_six.py",),
        ("six.py",),
        "MIT",
    ),
    Library(
        "cachetools",
        "8.0.2",
        f"{_HOST}/75/28/eb1ac766e4c0c439506a654186de8e2cfcd99035218a9393986103a0fdf0/cachetools-8.0.2.tar.gz",
        "30ac523adfc118b51d2b2e7bad8a0ddb31370dfe2700c7f10ca224f36ccf81e0",
        "cachetools-8.0.2",
        ("src",),
        ("tests",),
        ("src/cachetools",),
        "MIT",
    ),
    Library(
        "boltons",
        "26.2.0",
        f"{_HOST}/71/56/14c4a4931910a81ddeccfbe227925ea738e3c445d3e2af960f0bcbba1616/boltons-26.2.0.tar.gz",
        "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
        "boltons-26.2.0",
        ("",),
        ("tests",),
        ("boltons",),
        "BSD-3-Clause",
    ),
    Library(
        "tabulate",
        "0.10.0",
        f"{_HOST}/46/58/8c37dea7bbf769b20d58e7ace7e5edfe65b849442b00ffcdd56be88697c6/tabulate-0.10.0.tar.gz",
        "e2cfde8f79420f6deeffdeda9aaec3b6bc5abce947655d17ac662b126e48a60d",
        "tabulate-0.10.0",
        ("",),
        ("test",),
        ("tabulate",),
        "MIT",
    ),
    Library(
        "isodate",
        "0.7.2",
        f"{_HOST}/54/4d/e940025e2ce31a8ce1202635910747e5a87cc3a6a6bb2d00973375014749/isodate-0.7.2.tar.gz",
        "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
        "isodate-0.7.2",
        ("src",),
        ("tests",),
        ("src/isodate",),
        "BSD-3-Clause",
    ),
    Library(
        "webcolors",
        "25.10.0",
        f"{_HOST}/1d/7a/eb316761ec35664ea5174709a68bbd3389de60d4a1ebab8808bfc264ed67/webcolors-25.10.0.tar.gz",
        "62abae86504f66d0f6364c2a8520de4a0c47b80c03fc3a5f1815fedbef7c19bf",
        "webcolors-25.10.0",
        ("src",),
        ("tests",),
        ("src/webcolors",),
        "BSD-3-Clause",
    ),
)


class SetupMissingError(MissingDependencyError):
    """Something the project's setup installs is missing (a library's tree, bubblewrap); the
    message names the command that installs it."""

    def __init__(self, message: str) -> None:
        NotAvailableError.__init__(self, message)
        self.package = "scripts/setup.sh"
        self.extra = "swe"


def by_name(name: str) -> Library:
    """The library called ``name``; an unknown name raises with the valid ones."""
    for lib in LIBRARIES:
        if lib.name == name:
            return lib
    names = [lib.name for lib in LIBRARIES]
    raise InvalidKwargsError(f"unknown SWE library {name!r}.{suggest(name, names)} Libraries: {', '.join(names)}.")


def cache_dir() -> Path:
    """``$ENVGYM_SWE_CACHE``, else ``~/.cache/envgym/swe``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "envgym" / "swe"


def _tree_path(lib: Library) -> Path:
    return cache_dir() / "src" / lib.key


def source_tree(lib: Library | str) -> Path:
    """The unpacked pristine tree of ``lib``; raises :class:`SetupMissingError` when absent."""
    lib = by_name(lib) if isinstance(lib, str) else lib
    path = _tree_path(lib)
    if not (path / ".envgym-complete").is_file():
        raise SetupMissingError(
            f"The SWE environments need the source of {lib.key} in {path}, which is missing. "
            f"Fetch it at install time with: {_SETUP_HINT}."
        )
    return path


def _walk_py(root: Path, rel: str) -> list[str]:
    target = root / rel
    if target.is_file():
        return [rel]
    found = []
    for path in sorted(target.rglob("*.py")):
        found.append(path.relative_to(root).as_posix())
    return found


def source_files(lib: Library, root: Path | None = None) -> list[str]:
    """The library's own ``.py`` files (relative paths), test files excluded."""
    root = root or source_tree(lib)
    files = []
    for rel in lib.source_paths:
        for path in _walk_py(root, rel):
            parts = path.split("/")
            if any(p in ("tests", "test") for p in parts[:-1]) or parts[-1].startswith("test_"):
                continue
            files.append(path)
    return files


def test_files(lib: Library, root: Path | None = None) -> list[str]:
    """Everything grading restores: the test files, every ``conftest.py`` and the pytest configuration.

    These are the files a patch may not change (SWE-bench resets the test files before it runs
    them): relative paths under the tree root.
    """
    root = root or source_tree(lib)
    files: set[str] = set()
    for rel in lib.test_paths:
        target = root / rel
        if target.is_file():
            files.add(rel)
        elif target.is_dir():
            files.update(p.relative_to(root).as_posix() for p in target.rglob("*") if p.is_file())
    files.update(p.relative_to(root).as_posix() for p in root.rglob("conftest.py"))
    for name in ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"):
        if (root / name).is_file():
            files.add(name)
    return sorted(f for f in files if "__pycache__" not in f)


def _download(url: str, expected: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        data = response.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise NotAvailableError(f"{url} has SHA-256 {digest}, expected {expected}: refusing to unpack it.")
    return data


def _unpack(lib: Library, data: bytes, dest: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{lib.key}-", dir=dest.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            archive.extractall(tmp, filter="data")
        tree = tmp / lib.root
        if not tree.is_dir():
            raise NotAvailableError(f"{lib.sdist_url} has no folder {lib.root!r}.")
        # The pristine tree carries no history and no byte code (nothing that could hold a fix).
        for junk in [*tree.rglob("__pycache__"), *tree.rglob(".git")]:
            shutil.rmtree(junk, ignore_errors=True)
        (tree / ".envgym-complete").write_text(f"{lib.key} {lib.sha256}\n")
        if dest.exists():
            shutil.rmtree(dest)
        tree.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install(lib: Library, *, quiet: bool = True) -> Path:
    """Download (unless already there), verify and unpack one library's sdist; returns its tree."""
    dest = _tree_path(lib)
    marker = dest / ".envgym-complete"
    if marker.is_file() and marker.read_text().split()[-1:] == [lib.sha256]:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not quiet:
        print(f"fetching {lib.key} from PyPI", file=sys.stderr)
    _unpack(lib, _download(lib.sdist_url, lib.sha256), dest)
    return dest


def fetch(names: Iterable[str] | None = None, *, quiet: bool = False) -> list[Path]:
    """Download, verify and unpack the sdists of ``names`` (default: all); idempotent.

    Install time only (the network is used here and nowhere else). Returns the tree paths.
    """
    selected = LIBRARIES if names is None else tuple(by_name(n) for n in names)
    return [install(lib, quiet=quiet) for lib in selected]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m envgym.environments.swe.libraries",
        description="Fetch the pinned SWE libraries (install time only) or list them.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("fetch", help="download, verify and unpack the sdists into the cache (idempotent)")
    get.add_argument("--library", action="append", help="only this library (repeatable)")
    sub.add_parser("list", help="the pinned libraries and whether their trees are present")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        try:
            for path in fetch(args.library):
                print(path)
        except (OSError, NotAvailableError, InvalidKwargsError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return 0
    for lib in LIBRARIES:
        present = (_tree_path(lib) / ".envgym-complete").is_file()
        print(f"{lib.key:24} {lib.license:14} {'present' if present else 'missing'}  {_tree_path(lib)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
