"""Imports point one way (docs/architecture.md): a module never imports a higher layer, and
environments/agents use only envgym's public modules.

Checked statically with ``ast`` so a violation is caught before it becomes a cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Layer of each envgym module (lower imports nothing above it).
LAYERS: dict[str, int] = {
    "envgym.errors": 0,
    "envgym.progress": 0,  # the live progress line: a leaf that runner, bench, trainer and CLI all feed
    "envgym.spaces": 1,
    "envgym.vector": 1,  # vector envs' infos per sub-env: numpy only, beside spaces
    "envgym.sandbox": 1,  # SWE sandboxes: errors + stdlib (docker SDK lazily); under rewards' UnitTests
    "envgym.rubric": 1,
    "envgym.core": 2,
    "envgym.tools": 2,  # the function-calling dialect: parse calls, validate arguments, schemas (stdlib only)
    "envgym.rewards": 3,
    "envgym.browser": 3,  # the shared browser layer (Playwright + Chromium) of web and GUI envs
    "envgym.contrib": 4,
    "envgym.multiagent": 3,
    "envgym.registration": 4,
    "envgym.testing": 5,
    "envgym.families": 5,  # the family contract: reads the registry and the checkout, imports no env code
    "envgym.models": 5,
    "envgym.serve": 5,  # envgym serve: registered envs over WebSocket/HTTP (codec shared with remote)
    "envgym.mcp": 5,  # MCP both ways: MCP servers as envs (envgym/MCP-v0), envgym tool envs as MCP servers
    "envgym.remote": 5,  # the client of envgym serve: a gymnasium.Env / ParallelEnv over the wire
    "envgym.rollout": 6,
    "envgym.bench": 7,
    "envgym.trainer": 7,
    "envgym.leaderboard": 8,
    "envgym.integrations": 9,  # adapters for TRL, verifiers, SkyRL, verl, OpenEnv: may use everything below
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
    "envgym.browser",
    "envgym.rubric",
    "envgym.multiagent",
    "envgym.rollout",
    "envgym.testing",
    "envgym.models",
    "envgym.sandbox",
    "envgym.tools",  # the function-calling dialect every tool env and agent shares (docs/tools.md)
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


def _inner_imports(path: Path) -> list[tuple[str, tuple[str, ...], int]]:
    """(imported module, names taken from it, line) for every import made inside a function body."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[tuple[str, tuple[str, ...], int]] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                found |= {(alias.name, (), node.lineno) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add((node.module, tuple(alias.name for alias in node.names), node.lineno))
    return sorted(found)


def _top_level_imports(path: Path) -> list[str]:
    """Modules imported when ``path`` is imported: its top level (and the blocks and class bodies
    in it), not function bodies and not ``TYPE_CHECKING`` blocks."""
    found: list[str] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.extend([node.module] + [f"{node.module}.{alias.name}" for alias in node.names])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
                visit(node.orelse)
            else:
                for name in ("body", "orelse", "finalbody"):
                    visit(getattr(node, name, None) or [])
                for handler in getattr(node, "handlers", None) or []:
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
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


#: Sibling packages that must stay apart (docs/architecture.md): the trainer and the leaderboard never
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


#: Imports that stay inside functions although the module is light, with the reason.
DEFERRED_ON_PURPOSE: dict[tuple[str, str], str] = {
    ("envgym/_autoregister.py", "envgym.registration"): (
        "runs from envgym.pth in every interpreter: registering waits until gymnasium is imported"
    ),
    # envgym.registration runs inside `import gymnasium` (the hook above): whatever it imports at
    # load lands on that path, and gymnasium/pettingzoo imported from its top would call the hook
    # back while families are mid-import.
    ("envgym/registration.py", "gymnasium"): "imported by the gymnasium import hook: no import cycle through it",
    ("envgym/registration.py", "pettingzoo.utils.conversions"): "pettingzoo imports gymnasium (see above)",
    ("envgym/registration.py", "importlib.metadata"): "~40 ms; only plugin discovery needs it, not `import gymnasium`",
    ("envgym/registration.py", "envgym.rewards.wrappers.spec"): (
        "make(reward_wrappers=...): envgym.rewards imports gymnasium, so loading it from the hook's module is a cycle"
    ),
    ("envgym/rubric/spec.py", "yaml"): "17 ms on the first gymnasium.make path; only YAML rubric files need it",
    ("envgym/cli/_check.py", "envgym.testing"): (
        "PettingZoo's test module imports pytest: 0.25 s at the start of every other envgym command"
    ),
    ("envgym/models.py", "fcntl"): "POSIX only: the cache lock falls back to none elsewhere",
    ("envgym/rewards/verifiers/unit_tests.py", "resource"): "POSIX only: sandbox limits are set in the child",
}


def _heavy_modules() -> set[str]:
    """envgym modules whose import pulls a heavy dependency (:data:`envgym._imports.HEAVY`) at
    their top level, directly or through other envgym modules: importing them is importing it."""
    from envgym._imports import HEAVY

    files = {_module_name(p): p for folder in ("envgym", "environments", "agents") for p in _py_files(folder)}
    graph = {name: _top_level_imports(path) for name, path in files.items()}
    heavy: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, targets in graph.items():
            if name in heavy:
                continue
            for target in targets:
                parts = target.split(".")
                prefixes = {".".join(parts[: i + 1]) for i in range(len(parts))}
                if parts[0] in HEAVY or prefixes & heavy:
                    heavy.add(name)
                    changed = True
                    break
    return heavy


@pytest.fixture(scope="module")
def heavy_modules() -> set[str]:
    return _heavy_modules()


@pytest.mark.parametrize(
    "path",
    _py_files("envgym") + _py_files("environments") + _py_files("agents"),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_only_heavy_imports_are_deferred(path: Path, heavy_modules: set[str]) -> None:
    """Light imports sit at the top of the file, where the layering checks above see them; only
    the heavy optional dependencies (or envgym modules that import one at load) wait for a call."""
    from envgym._imports import HEAVY

    rel = str(path.relative_to(ROOT))
    for target, names, line in _inner_imports(path):
        parts = target.split(".")
        loaded = {".".join(parts[: i + 1]) for i in range(len(parts))} | {f"{target}.{name}" for name in names}
        if parts[0] in HEAVY or loaded & heavy_modules:
            continue
        assert (rel, target) in DEFERRED_ON_PURPOSE, (
            f"{rel}:{line} imports {target} inside a function; move it to the top of the module "
            "(only the heavy optional dependencies in envgym._imports.HEAVY are deferred)"
        )


def test_heavy_modules_are_the_expected_few(heavy_modules: set[str]) -> None:
    """The modules that cost a heavy import at load: a new one here is a slow `import` somewhere."""
    assert heavy_modules == {
        # verifiers' classes are subclassed at load: importing the adapter is opting into verifiers.
        "envgym.integrations.verifiers",
        "envgym.integrations.verifiers_plugin.envgym_verifiers",
        "envgym.leaderboard.app",
        "envgym.leaderboard.store",
        "envgym.trainer.advantages",
        "envgym.trainer.losses",
    }


#: ``obj._name`` reaches into envgym/rollout may still make into another module's objects, with the reason.
PRIVATE_REACH_ALLOWED: dict[str, str] = {
    "os._exit": "the standard library's documented way to end a forked worker without running its parent's cleanup",
}


def _private_reaches(source: str) -> list[str]:
    """Where ``source`` reaches a private name of another module: ``obj._name`` for a ``_name``
    the module does not define itself (``self._x``, ``cls._x`` and the module's own classes'
    private fields are its own business), and ``from module import _name``."""
    tree = ast.parse(source)
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            own.add(node.value)  # __slots__ entries
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = node.attr
            if not name.startswith("_") or name.startswith("__") or name in own:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            text = ast.unparse(node)
            if text not in PRIVATE_REACH_ALLOWED:
                found.append(f"{node.lineno}: {text}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("envgym"):
            found += [
                f"{node.lineno}: from {node.module} import {alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
    return found


def test_private_reach_check_catches_another_modules_private_names() -> None:
    source = (
        "from envgym.rollout.runner import _Failure\n"
        "class Seat:\n"
        "    __slots__ = ('_turn',)\n"
        "    def __init__(self, runner):\n"
        "        self._mine = runner._kinds\n"
        "    def copy(self, other):\n"
        "        return other._mine, other._turn, self._theirs, os._exit, runner.__dict__\n"
    )
    assert _private_reaches(source) == ["1: from envgym.rollout.runner import _Failure", "5: runner._kinds"]


@pytest.mark.parametrize("path", _py_files("envgym/rollout"), ids=lambda p: str(p.relative_to(ROOT)))
def test_rollout_modules_reach_no_private_names_of_other_modules(path: Path) -> None:
    """The lock-step, async and Parallel players share the public RunSession
    (envgym.rollout.session); no rollout module reaches another module's private attributes."""
    assert _private_reaches(path.read_text(encoding="utf-8")) == [], f"{path.relative_to(ROOT)}"


#: Library modules nothing imports, with the reason (each one else is dead code: give it its caller or remove it).
NO_IMPORTER_NEEDED: dict[str, str] = {
    "envgym.__main__": "`python -m envgym`",
    "envgym.cli.__main__": "`python -m envgym.cli`",
    "envgym.rewards.rubrics": "the older import path of envgym.rubric, kept for users' code",
    "envgym.integrations.verifiers_plugin.envgym_verifiers": "loaded by verifiers as the top-level module "
    "envgym_verifiers (plugin_dir() on PYTHONPATH), never imported by envgym",
}


_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)", re.MULTILINE)
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE)
_NAMED = re.compile(r"[\"'](envgym(?:\.\w+)+)(?::\w+)?[\"']")  # "envgym.x.y" or an entry point "envgym.x:Name"
_LAZY_KEY = re.compile(r"^[ \t]*[\"']([\w.]+)[\"']:[ \t]*[(_A-Z]", re.MULTILINE)  # lazy_exports({"sub": (...)})


def _referenced_modules(path: Path) -> set[str]:
    """The modules ``path`` imports (relative imports resolved), names by string entry point or
    import string (``"envgym.x.y"``, ``"envgym.x:Name"``), and loads lazily (``lazy_exports``).
    Regular expressions, not ``ast``: this reads every file of the repository, and must be quick."""
    me = _module_name(path)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    text = path.read_text(encoding="utf-8")
    found: set[str] = set()
    for match in _IMPORT.finditer(text):
        found |= {name.strip() for name in match[1].split(",")}
    for match in _FROM.finditer(text):
        base = match[1]
        level = len(base) - len(base.lstrip("."))
        if level:
            rest = base[level:]
            base = ".".join(package[: len(package) - level + 1] + ([rest] if rest else []))
        names = re.findall(r"\w+", match[2].split("#")[0] if not match[2].startswith("(") else match[2])
        found |= {base} | {f"{base}.{name}" for name in names}
    found |= set(_NAMED.findall(text))
    if path.name == "__init__.py" and "lazy_exports(" in text:
        found |= {key if key.startswith("envgym") else f"{me}.{key}" for key in _LAZY_KEY.findall(text)}
    return found


def test_every_library_module_has_an_importer() -> None:
    """A module of ``envgym/`` that no library, environment, agent, benchmark or script file
    imports (or names by entry point) is dead code; tests alone do not keep it alive."""
    importers: dict[str, set[str]] = {}
    for folder in ("envgym", "environments", "agents", "benchmarks", "scripts", "examples"):
        for path in _py_files(folder) if (ROOT / folder).is_dir() else []:
            me = _module_name(path)
            for target in _referenced_modules(path):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    importers.setdefault(".".join(parts[:i]), set()).add(me)
    dead = sorted(
        name
        for name in map(_module_name, _py_files("envgym"))
        if not importers.get(name, set()) - {name} and name not in NO_IMPORTER_NEEDED
    )
    assert dead == [], f"library modules nothing imports (give each its caller or remove it): {dead}"
