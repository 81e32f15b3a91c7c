"""``environments/`` and ``agents/`` import under one name only: ``envgym.environments`` and
``envgym.agents`` (hatch_build.py maps them; no symlinks), in the dev install and in the wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_no_symlinks_in_the_library() -> None:
    links = [p for p in (ROOT / "envgym").rglob("*") if p.is_symlink()]
    assert not links, f"symlinks in envgym/: {links}"


@pytest.mark.parametrize("name", ["environments", "agents"])
def test_top_level_names_fail_from_the_repo_root(name: str) -> None:
    # From the repo root the folder is on sys.path ('' first): the import must still fail, with a
    # message that names the one right import.
    done = _python(f"import {name}", ROOT)
    assert done.returncode != 0
    assert f"envgym.{name}" in done.stderr, done.stderr


def test_envgym_names_work_and_name_each_module_once() -> None:
    code = (
        "import sys, envgym.environments.games as g, envgym.agents.solvers.sokoban as s\n"
        "import gymnasium as gym\n"
        "env = gym.make('envgym/Sokoban-v0'); env.reset(seed=1)\n"
        "clash = [m for m in sys.modules if m.split('.')[0] in ('environments', 'agents')]\n"
        "assert not clash, clash\n"
        "print(g.__file__); print(s.__file__)\n"
    )
    for cwd in (ROOT, ROOT.parent):
        done = _python(code, cwd)
        assert done.returncode == 0, done.stderr
        games, solver = done.stdout.split()
        assert Path(games) == ROOT / "environments" / "games" / "__init__.py"
        assert Path(solver) == ROOT / "agents" / "solvers" / "sokoban.py"


@pytest.mark.slow
def test_wheel_holds_each_module_once(tmp_path: Path) -> None:
    pytest.importorskip("hatchling", reason="building the wheel offline needs hatchling (the test extra)")
    pytest.importorskip("editables", reason="building the wheel offline needs editables (the test extra)")
    src = tmp_path / "src"
    # Build from a copy of the tracked files, so caches and local runs never reach the wheel.
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    # New, not yet tracked files of this checkout matter too (a developer runs this before commit).
    for folder in ("envgym", "environments", "agents", "benchmarks"):
        for path in (ROOT / folder).rglob("*"):
            rel = path.relative_to(ROOT)
            if path.is_file() and "__pycache__" not in rel.parts and not (src / rel).exists():
                (src / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, src / rel)
    for name in ("pyproject.toml", "hatch_build.py", "envgym.pth", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    out = tmp_path / "dist"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("envgym-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = [n for n in names if n.endswith(".py")]
    assert [n for n, c in Counter(modules).items() if c > 1] == []
    assert all(n.startswith(("envgym/", "envgym-")) or n == "envgym.pth" for n in names), names
    assert "envgym/environments/games/sokoban.py" in names
    assert "envgym/agents/solvers/sokoban.py" in names
    assert "envgym/benchmarks/core-v1.yaml" in names
    assert not [n for n in names if "__pycache__" in n or n.startswith("envgym/benchmarks/perf")]
    # Every module of the two folders is in the wheel exactly once, under the envgym name.
    for folder in ("environments", "agents"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            assert f"envgym/{rel}" in names, rel
