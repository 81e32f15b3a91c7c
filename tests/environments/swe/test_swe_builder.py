"""The bug-injection builder (environments/swe/builder.py) on a tiny library made here, and the splits.

The builder runs the sandboxes' interpreter, Debian's /usr/bin/python3 with python3-pytest
(installed by scripts/setup.sh).
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

import pytest
from envgym.environments.swe import builder, libraries
from envgym.environments.swe.libraries import Library, SetupMissingError
from envgym.environments.swe.mutations import apply_edit

CORE = """\
def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def count_up(n):
    i = 0
    while i < n:
        i += 1
    return i
"""
TESTS = """\
from minilib.core import clamp, count_up


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_clamp_high():
    assert clamp(50, 0, 10) == 10


def test_clamp_mid():
    assert clamp(5, 0, 10) == 5


def test_count():
    assert count_up(3) == 3
"""


def _needs_debian_pytest() -> None:
    proc = subprocess.run([builder.PYTHON, "-c", "import pytest"], capture_output=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"{builder.PYTHON} with pytest is missing: apt-get install python3-pytest (scripts/setup.sh does)")


def _library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Library:
    monkeypatch.setenv(libraries.CACHE_ENV, str(tmp_path / "cache"))
    lib = Library("minilib", "0.1", "file:///none", "0" * 64, "minilib-0.1", ("",), ("tests",), ("minilib",), "MIT")
    tree = tmp_path / "cache" / "src" / lib.key
    (tree / "minilib").mkdir(parents=True)
    (tree / "tests").mkdir()
    (tree / "minilib" / "__init__.py").write_text("")
    (tree / "minilib" / "core.py").write_text(CORE)
    (tree / "tests" / "test_core.py").write_text(TESTS)
    (tree / ".envgym-complete").write_text(f"{lib.key} {lib.sha256}\n")
    return lib


def test_builder_keeps_mutants_that_fail_some_tests_and_drops_hanging_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_debian_pytest()
    lib = _library(tmp_path, monkeypatch)
    tasks, stats = builder.build_library(lib, target=50, max_tries=50, per_test_timeout=1.0)
    assert stats.baseline_tests == 4 and stats.files == 2  # __init__.py and core.py
    assert stats.hanging >= 1  # `i += 1` -> `i -= 1` loops forever: dropped by the per-test timeout
    assert (
        stats.kept == len(tasks) >= 4
        and stats.tried
        == stats.kept + stats.hanging + stats.no_failure + stats.too_broad + stats.unconfirmed + stats.unstable
    )
    all_tests = {
        f"tests/test_core.py::{n}" for n in ("test_clamp_low", "test_clamp_high", "test_clamp_mid", "test_count")
    }
    kinds = set()
    for task in tasks:
        f2p, p2p = set(task["FAIL_TO_PASS"]), set(task["PASS_TO_PASS"])
        assert f2p and p2p and not f2p & p2p and f2p | p2p <= all_tests
        assert (
            apply_edit(
                apply_edit(CORE, task["line"], task["original"], task["mutated"]),
                task["line"],
                task["mutated"],
                task["original"],
            )
            == CORE
        )
        statement = task["problem_statement"]
        assert all(t in statement for t in f2p) and task["original"].strip() not in statement
        assert "minilib/core.py" not in statement and f"line {task['line']}" not in statement
        kinds.add(task["mutation"])
        # a flipped `if x < lo` breaks the clamp tests, not test_count (a test that never runs the line)
        if task["mutated"].strip() == "if x >= lo:":
            assert "tests/test_core.py::test_count" in p2p
    assert {"flip_comparison", "dropped_return"} <= kinds
    assert len({t["id"] for t in tasks}) == len(tasks)
    # the same build again gives the same tasks (deterministic sampling, stable ids)
    again, _ = builder.build_library(lib, target=3, max_tries=50, per_test_timeout=1.0)
    assert [t["id"] for t in again] == [t["id"] for t in tasks[:3]]


def test_splits_are_disjoint_by_file_and_near_the_fraction() -> None:
    tasks = [{"library": f"lib{i % 3}", "file": f"f{i % 17}.py", "id": str(i)} for i in range(200)]
    builder.assign_splits(tasks, test_fraction=0.35)
    test_files = {(t["library"], t["file"]) for t in tasks if t["split"] == "test"}
    train_files = {(t["library"], t["file"]) for t in tasks if t["split"] == "train"}
    assert test_files and train_files and not test_files & train_files
    share = sum(t["split"] == "test" for t in tasks) / len(tasks)
    assert 0.25 <= share <= 0.45


def test_pins_are_well_formed_and_missing_trees_name_the_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(libraries.LIBRARIES) >= 5 and len({lib.name for lib in libraries.LIBRARIES}) == len(libraries.LIBRARIES)
    for lib in libraries.LIBRARIES:
        assert len(lib.sha256) == 64 and int(lib.sha256, 16) >= 0
        assert lib.sdist_url.startswith("https://files.pythonhosted.org/packages/")
        assert lib.sdist_url.endswith(f"/{lib.root}.tar.gz") and lib.root == lib.key
        assert lib.license in ("MIT", "BSD-3-Clause")
    monkeypatch.setenv(libraries.CACHE_ENV, str(tmp_path))
    with pytest.raises(SetupMissingError, match=r"libraries fetch \(scripts/setup.sh runs it\)"):
        libraries.source_tree("toolz")


def test_install_verifies_the_hash_and_unpacks_without_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (
            ("pkg-1.0/pkg.py", b"X = 1\n"),
            ("pkg-1.0/.git/HEAD", b"ref\n"),
            ("pkg-1.0/test_pkg.py", b""),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    sdist = tmp_path / "pkg-1.0.tar.gz"
    sdist.write_bytes(buf.getvalue())
    digest = hashlib.sha256(buf.getvalue()).hexdigest()
    monkeypatch.setenv(libraries.CACHE_ENV, str(tmp_path / "cache"))
    good = Library("pkg", "1.0", sdist.as_uri(), digest, "pkg-1.0", ("",), ("test_pkg.py",), ("pkg.py",), "MIT")
    tree = libraries.install(good)
    assert (tree / "pkg.py").read_bytes() == b"X = 1\n" and not (tree / ".git").exists()
    assert libraries.source_tree(good) == tree and libraries.install(good) == tree  # idempotent
    assert libraries.source_files(good) == ["pkg.py"] and libraries.test_files(good) == ["test_pkg.py"]
    bad = Library("pkg2", "1.0", sdist.as_uri(), "f" * 64, "pkg-1.0", ("",), (), ("pkg.py",), "MIT")
    with pytest.raises(libraries.NotAvailableError, match="SHA-256"):
        libraries.install(bad)
    assert not (tmp_path / "cache" / "src" / "pkg2-1.0").exists()
