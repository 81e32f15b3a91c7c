"""Imports point one way (ARCHITECTURE.md): a module never imports a higher layer, and
environments/agents use only envgym's public modules.

Checked statically with ``ast`` so a violation is caught before it becomes a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Layer of each envgym module (lower imports nothing above it).
LAYERS: dict[str, int] = {
    "envgym.errors": 0,
    "envgym.spaces": 1,
    "envgym.rubric": 1,
    "envgym.core": 2,
    "envgym.rewards": 3,
    "envgym.contrib": 4,
    "envgym.multiagent": 3,
    "envgym.registration": 4,
    "envgym.testing": 5,
    "envgym.models": 5,
    "envgym.rollout": 6,
    "envgym.bench": 7,
    "envgym.trainer": 7,
    "envgym.leaderboard": 8,
    "envgym.cli": 9,
}
#: Deliberate upward imports, made lazily inside a function, with the reason.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}
#: Modules environments and agents may import.
PUBLIC = {
    "envgym",
    "envgym.core",
    "envgym.errors",
    "envgym.spaces",
    "envgym.registration",
    "envgym.rewards",
    "envgym.rubric",
    "envgym.multiagent",
    "envgym.rollout",
    "envgym.testing",
    "envgym.models",
}


def _layer(module: str) -> tuple[str, int] | None:
    parts = module.split(".")
    for i in range(len(parts), 1, -1):
        prefix = ".".join(parts[:i])
        if prefix in LAYERS:
            return prefix, LAYERS[prefix]
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] in ("environments", "agents"):
        parts.insert(0, "envgym")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, at top level?) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = set(map(id, tree.body))
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, id(node) in top))
    return found


def _py_files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", _py_files("envgym"), ids=lambda p: str(p.relative_to(ROOT)))
def test_library_imports_point_down(path: Path) -> None:
    me = _layer(_module_name(path))
    if me is None:
        return
    for target, _ in _imports(path):
        assert not target.startswith(("envgym.environments", "envgym.agents")), (
            f"{path}: the library must reach environments/agents only by string entry point, not import {target}"
        )
        other = _layer(target)
        if other is None or other[0] == me[0]:
            continue
        if other[1] > me[1]:
            assert (me[0], other[0]) in ALLOWED_UPWARD, (
                f"{path}: {me[0]} (layer {me[1]}) imports {target} (layer {other[1]})"
            )


@pytest.mark.parametrize(
    "path", _py_files("environments") + _py_files("agents"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_environments_and_agents_use_the_public_api(path: Path) -> None:
    for target, _ in _imports(path):
        if target == "envgym" or not target.startswith("envgym."):
            continue
        if target.startswith(("envgym.environments", "envgym.agents")):
            continue
        assert _layer(target) is not None and _layer(target)[0] in PUBLIC, f"{path} imports non-public {target}"
        assert not target.split(".")[-1].startswith("_"), f"{path} imports private module {target}"


def test_environments_do_not_import_agents() -> None:
    for path in _py_files("environments"):
        for target, _ in _imports(path):
            assert not target.startswith("envgym.agents"), f"{path} imports {target}: environments never import agents"


#: Sibling packages that must stay apart (ARCHITECTURE.md): the trainer and the leaderboard never
#: import each other, and the trainer does not depend on the benchmark layer either.
APART = {
    "envgym.trainer": ("envgym.leaderboard", "envgym.bench"),
    "envgym.leaderboard": ("envgym.trainer",),
    "envgym.bench": ("envgym.trainer", "envgym.leaderboard"),
}


@pytest.mark.parametrize("package", sorted(APART))
def test_trainer_bench_and_leaderboard_stay_apart(package: str) -> None:
    files = _py_files(package.replace(".", "/"))
    assert files, f"no files under {package}"
    for path in files:
        for target, _ in _imports(path):
            assert not target.startswith(APART[package]), f"{path} imports {target}"
