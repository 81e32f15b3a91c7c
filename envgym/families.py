"""The family contract: what every environment family ships, as data and as checks.

An environment family is a package under ``envgym.environments`` (``games``, ``household``, ...).
Besides its environment code it holds two pieces of plain data in its ``__init__`` (no imports of
environment code, so registering stays cheap):

* ``SPECS``: its :class:`~envgym.registration.EnvSpec` list (string entry points);
* ``CONTRACT``: where the rest of the family lives and what it waives, a dict with the keys of
  :data:`CONTRACT_KEYS` (``suite`` and ``perf`` required).

:data:`CHECKS` is the contract, one :class:`Check` per requirement, in order; ``check_family``
runs them and returns every problem found (an empty list: the family keeps the contract).
``tests/test_family_contract.py`` runs it over every family, ``envgym new-family NAME`` stamps a
skeleton that keeps it, and ``docs/family-contract.md`` lists exactly these checks
(:func:`contract_table` writes its table; a test compares them).

Checks that need the checkout (suite files, published bundles, perf scripts, tests) read them
under ``root``: the checkout this package runs from, or a folder given to :func:`check_family`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envgym.errors import EnvgymError, suggest
from envgym.registration import FAMILIES_PACKAGE, EnvSpec, list_envs

__all__ = [
    "CARD_SECTIONS",
    "CHECKS",
    "CONTRACT_KEYS",
    "Check",
    "Family",
    "Problem",
    "card_sections",
    "check_family",
    "checkout_root",
    "contract_table",
    "family_names",
    "load_family",
]

#: Sections every env card has, each a paragraph opening with ``**<Section>.**`` (the text of a
#: section may go on after the bold title: ``**Reward components** (all on the last step):``).
CARD_SECTIONS: tuple[str, ...] = (
    "Description",
    "Observation",
    "Actions",
    "Reward components",
    "Reward basis",
    "Episode end",
    "Arguments",
    "Version history",
)

#: Keys of a family's ``CONTRACT`` dict: what each one means.
CONTRACT_KEYS: dict[str, str] = {
    "suite": "the id of the family's benchmark suite, `benchmarks/<suite>.yaml` (required)",
    "perf": "the family's performance script, a path under `benchmarks/perf/` (required)",
    "tests": "the folder of the family's tests (default `tests/environments/<family>`)",
    "baselines_waiver": "why the suite publishes no oracle and random bundles yet (default: none, they are required)",
    "oracle_waivers": "`{'module:Class': reason}` for entry points that have no oracle solver",
}

_SECTION = re.compile(r"^\*\*(?P<title>[^*]+?)\.?\*\*")
#: What a card's Reward basis section says when every component is in the basis.
NONE_DIAGNOSTIC = "none is diagnostic"
#: What a perf script measures, each as any of a few phrasings (its docstring says so).
_PERF_WORDS: tuple[tuple[str, ...], ...] = (("reset",), ("steps/s", "steps per second", "latency"))


@dataclass(frozen=True)
class Problem:
    """One way a family breaks the contract: the check's name and what is wrong."""

    check: str
    message: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.message}"


@dataclass(frozen=True, kw_only=True)
class Family:
    """A family as the contract sees it: its package, specs and ``CONTRACT`` data, and the
    checkout its files are looked up in."""

    name: str
    module: Any
    specs: tuple[EnvSpec, ...]
    suite: str
    perf: str
    tests: str
    baselines_waiver: str | None = None
    oracle_waivers: Mapping[str, str] = field(default_factory=dict)
    root: Path

    def classes(self) -> dict[str, Any]:
        """Every entry point of the family's specs, loaded: ``{"module:Class": class}``."""
        return {s.entry_point: s.load() for s in self.specs}


@dataclass(frozen=True)
class Check:
    """One requirement of the contract: a name, the sentence ``docs/family-contract.md`` shows,
    and the function that finds the ways a family breaks it."""

    name: str
    requires: str
    run: Callable[[Family], Iterator[str]]


def checkout_root() -> Path:
    """The checkout envgym runs from (holding ``environments/``, ``benchmarks/``, ``tests/``)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "environments").is_dir():
        raise EnvgymError(
            f"the family contract reads a source checkout (environments/, benchmarks/, tests/), and {root} is not "
            "one: run it from a clone of the repository (pip install -e .), or pass root=."
        )
    return root


def family_names() -> list[str]:
    """Every built-in family: the packages under ``envgym.environments``, sorted."""
    package = importlib.import_module(FAMILIES_PACKAGE)
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.ispkg and not m.name.startswith("_"))


def load_family(name: str, *, root: Path | str | None = None) -> Family:
    """The family ``name`` with its ``CONTRACT`` data checked for shape (unknown keys, wrong types)."""
    names = family_names()
    if name not in names:
        raise EnvgymError(f"unknown family {name!r}.{suggest(name, names)} Families: {', '.join(names)}.")
    module = importlib.import_module(f"{FAMILIES_PACKAGE}.{name}")
    data = getattr(module, "CONTRACT", None)
    where = f"{FAMILIES_PACKAGE}.{name}.CONTRACT"
    if not isinstance(data, Mapping):
        raise EnvgymError(
            f"{where} is missing: a family's __init__ declares CONTRACT = {{'suite': ..., 'perf': ...}} "
            f"(keys: {', '.join(CONTRACT_KEYS)})."
        )
    for key in data:
        if key not in CONTRACT_KEYS:
            raise EnvgymError(f"{where} has an unknown key {key!r}.{suggest(key, CONTRACT_KEYS)}")
    for key in ("suite", "perf"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise EnvgymError(
                f"{where}[{key!r}] must be a non-empty string ({CONTRACT_KEYS[key]}), got {data.get(key)!r}."
            )
    waiver = data.get("baselines_waiver")
    if waiver is not None and (not isinstance(waiver, str) or not waiver.strip()):
        raise EnvgymError(f"{where}['baselines_waiver'] must be a written reason, got {waiver!r}.")
    oracle_waivers = data.get("oracle_waivers", {})
    if not isinstance(oracle_waivers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in oracle_waivers.items()
    ):
        raise EnvgymError(
            f"{where}['oracle_waivers'] must map 'module:Class' to a written reason, got {oracle_waivers!r}."
        )
    specs = getattr(module, "SPECS", None)
    return Family(
        name=name,
        module=module,
        specs=tuple(specs) if isinstance(specs, (list, tuple)) else (),
        suite=data["suite"],
        perf=data["perf"],
        tests=data.get("tests", f"tests/environments/{name}"),
        baselines_waiver=waiver,
        oracle_waivers=dict(oracle_waivers),
        root=Path(root) if root is not None else checkout_root(),
    )


def card_sections(card: str) -> dict[str, str]:
    """The sections of an env card: ``{title: text}`` for every paragraph opening with ``**Title.**``
    (a section runs to the next one)."""
    sections: dict[str, str] = {}
    title: str | None = None
    for line in card.splitlines():
        match = _SECTION.match(line.strip())
        if match:
            title = match["title"].strip()
            sections[title] = line.strip()[match.end() :]
        elif title is not None:
            sections[title] += "\n" + line
    return sections


def _section(sections: Mapping[str, str], wanted: str) -> str | None:
    for title, text in sections.items():
        if title == wanted or title.startswith((f"{wanted},", f"{wanted} ")):
            return text
    return None


# ---------------------------------------------------------------------------------- the checks
def _check_specs(family: Family) -> Iterator[str]:
    if not family.specs:
        yield f"{FAMILIES_PACKAGE}.{family.name} has no SPECS list of EnvSpec"
        return
    prefix = f"{FAMILIES_PACKAGE}.{family.name}."
    for s in family.specs:
        if not isinstance(s, EnvSpec):
            yield f"SPECS holds {s!r}, not an EnvSpec"
            continue
        if s.family != family.name:
            yield f"{s.id} ({s.kind}) says family={s.family!r}, not {family.name!r}"
        if not s.entry_point.startswith(prefix):
            yield f"{s.id} ({s.kind}) has the entry point {s.entry_point!r}, outside {prefix[:-1]}"
        if not s.id.startswith("envgym/"):
            yield f"{s.id} is not in the envgym/ namespace"
    registered = {(s.id, s.kind): s for s in list_envs(family=family.name)}
    for s in family.specs:
        if isinstance(s, EnvSpec) and registered.get((s.id, s.kind)) != s:
            yield f"{s.id} ({s.kind}) is in SPECS but not registered as such (envgym.register_envs)"


def _check_env_card(family: Family) -> Iterator[str]:
    for entry, cls in family.classes().items():
        getter = getattr(cls, "env_card", None)
        if getter is None:
            yield f"{entry} has no env_card classmethod"
            continue
        params = list(inspect.signature(getter).parameters.values())
        if len(params) != 1 or params[0].name != "kwargs" or params[0].default is not None:
            yield f"{entry}.env_card{inspect.signature(getter)} is not env_card(cls, kwargs=None)"


def _check_card_sections(family: Family) -> Iterator[str]:
    lacking: dict[tuple[str, tuple[str, ...]], list[str]] = {}  # one line per class and gap, not per id
    for s in family.specs:
        getter = getattr(s.load(), "env_card", None)
        if getter is None:
            continue  # reported by env_card
        card = getter(dict(s.kwargs))
        sections = card_sections(card if isinstance(card, str) else "")
        missing = tuple(name for name in CARD_SECTIONS if _section(sections, name) is None)
        if missing:
            lacking.setdefault((s.entry_point, missing), []).append(f"{s.id} ({s.kind})")
    for (entry, missing), ids in lacking.items():
        more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
        yield f"the card of {ids[0]}{more} ({entry}) lacks the section(s) {', '.join(missing)} (**<Section>.** paragraphs)"


def _check_reward_basis(family: Family) -> Iterator[str]:
    for entry, cls in family.classes().items():
        components = tuple(getattr(cls, "reward_components", None) or ())
        basis = getattr(cls, "reward_basis", None)
        if not components:
            yield f"{entry} declares no reward_components"
            continue
        if not isinstance(basis, tuple) or not basis:
            yield f"{entry} declares no reward_basis (the components its default reward is built from)"
            continue
        outside = [c for c in basis if c not in components]
        if outside:
            yield f"{entry}.reward_basis names {outside}, which are not in its reward_components"
        # Whoever (re)declares the components declares the basis too: an inherited basis of
        # other components would be silently wrong.
        owner_components = next(k for k in cls.__mro__ if "reward_components" in vars(k))
        owner_basis = next(k for k in cls.__mro__ if "reward_basis" in vars(k))
        if not issubclass(owner_basis, owner_components):
            yield (
                f"{entry} inherits reward_basis from {owner_basis.__name__} but its reward_components from "
                f"{owner_components.__name__}: declare reward_basis beside reward_components"
            )
        getter = getattr(cls, "env_card", None)
        if getter is None:
            continue
        text = _section(card_sections(getter(None)), "Reward basis")
        if text is None:
            continue  # reported by card_sections
        unnamed = [c for c in components if f"``{c}``" not in text and c not in text]
        if unnamed:
            yield f"the Reward basis section of {entry}'s card does not name {', '.join(unnamed)}"
        # The marking: "none is diagnostic" exactly when every component is in the basis.
        diagnostic = [c for c in components if c not in basis]
        says_none = NONE_DIAGNOSTIC in " ".join(text.split())
        if diagnostic and (says_none or "diagnostic" not in text.lower()):
            yield f"the Reward basis section of {entry}'s card does not mark {', '.join(diagnostic)} as diagnostic"
        if not diagnostic and not says_none:
            yield f"the Reward basis section of {entry}'s card does not say {NONE_DIAGNOSTIC!r} (every component is in the basis)"


def _check_oracle(family: Family) -> Iterator[str]:
    for entry, cls in family.classes().items():
        if entry in family.oracle_waivers:
            continue
        name = getattr(cls, "name", None)
        if not isinstance(name, str):
            yield f"{entry} has no class attribute `name` naming its oracle (envgym.agents.solvers.<name>), no waiver"
            continue
        try:
            module = importlib.import_module(f"envgym.agents.solvers.{name}")
        except ModuleNotFoundError:
            yield f"{entry}: no oracle solver envgym.agents.solvers.{name} (agents/solvers/{name}.py), no waiver"
            continue
        if not inspect.isclass(getattr(module, "Solver", None)):
            yield f"agents/solvers/{name}.py defines no Solver class (the oracle of {entry})"


def _suite_path(family: Family) -> Path:
    return family.root / "benchmarks" / f"{family.suite}.yaml"


def _check_suite(family: Family) -> Iterator[str]:
    path = _suite_path(family)
    if not path.is_file():
        yield f"no suite file {path.relative_to(family.root)} (CONTRACT['suite'] = {family.suite!r})"
        return
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    name, _, version = family.suite.rpartition("-v")
    if data.get("name") != name or str(data.get("version")) != version:
        yield f"{path.name} says name={data.get('name')!r}, version={data.get('version')!r}; its file name says {family.suite}"
    ids = {s.id for s in family.specs}
    entries = data.get("entries") or []
    if not entries:
        yield f"{path.name} has no entries"
    for entry in entries:
        env = entry.get("env") if isinstance(entry, Mapping) else None
        if env not in ids:
            yield f"{path.name}: entry {entry!r:.80} plays {env!r}, not an id of the family"


def _check_baselines(family: Family) -> Iterator[str]:
    if family.baselines_waiver is not None:
        return
    folder = family.root / "leaderboards" / family.suite
    for agent in ("oracle", "random"):
        if not list(folder.glob(f"*_{agent}.envgym.jsonl.gz")):
            yield (
                f"no published {agent} bundle in leaderboards/{family.suite}/ "
                f"(ENVGYM_SUITE={family.suite} bash scripts/publish_baselines.sh), and no baselines_waiver"
            )


def _check_perf(family: Family) -> Iterator[str]:
    path = family.root / family.perf
    if Path(family.perf).parent.as_posix() != "benchmarks/perf":
        yield f"CONTRACT['perf'] = {family.perf!r} is not a script under benchmarks/perf/"
    if not path.is_file():
        yield f"no perf script {family.perf}"
        return
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    missing = [" or ".join(words) for words in _PERF_WORDS if not any(w in doc for w in words)]
    if missing:
        yield f"{family.perf}'s docstring does not say it measures {' and '.join(missing)}"


def _check_tests(family: Family) -> Iterator[str]:
    folder = family.root / family.tests
    if not sorted(folder.glob("test_*.py")):
        yield f"no tests: {family.tests}/test_*.py"


#: The contract, in order.
CHECKS: tuple[Check, ...] = (
    Check(
        "specs",
        "`SPECS` in the family's `__init__`: `EnvSpec`s with string entry points inside the family's package, "
        "`family` set to the family, ids in the `envgym/` namespace, every one registered.",
        _check_specs,
    ),
    Check(
        "env_card",
        "Every entry point has one card method, `env_card(cls, kwargs=None)` (`kwargs`: the id's registered kwargs).",
        _check_env_card,
    ),
    Check(
        "card_sections",
        "Every id's card has the sections " + ", ".join(CARD_SECTIONS) + " (paragraphs opening `**<Section>.**`).",
        _check_card_sections,
    ),
    Check(
        "reward_basis",
        "Every entry point declares `reward_components` and `reward_basis` (the components its default reward "
        "is built from; the rest are diagnostic), and its card's Reward basis section names every component "
        'and marks the diagnostic ones (or says "none is diagnostic").',
        _check_reward_basis,
    ),
    Check(
        "oracle",
        "Every entry point has an oracle, `agents/solvers/<name>.py` with a `Solver` (`name`: the class's `name`), "
        "or a written waiver in `CONTRACT['oracle_waivers']`.",
        _check_oracle,
    ),
    Check(
        "suite",
        "A versioned suite `benchmarks/<suite>.yaml` whose name and version match its file name and whose "
        "entries play ids of the family.",
        _check_suite,
    ),
    Check(
        "baselines",
        "Oracle and random bundles published in `leaderboards/<suite>/`, or a written `CONTRACT['baselines_waiver']`.",
        _check_baselines,
    ),
    Check(
        "perf",
        "A perf script under `benchmarks/perf/` whose docstring says it measures reset time and step throughput "
        "(`steps/s`, steps per second or step latency).",
        _check_perf,
    ),
    Check("tests", "A tests folder (`tests/environments/<family>/`) with `test_*.py` files.", _check_tests),
)


def check_family(name: str, *, root: Path | str | None = None) -> list[Problem]:
    """Every way the family ``name`` breaks the contract (empty: it keeps it).

    Raises:
        EnvgymError: ``name`` is no family, or its ``CONTRACT`` data is malformed.
    """
    family = load_family(name, root=root)
    problems: list[Problem] = []
    for check in CHECKS:
        try:
            problems += [Problem(check.name, message) for message in check.run(family)]
        except Exception as err:  # noqa: BLE001 - a broken family is a finding, not a crash of the check
            problems.append(Problem(check.name, f"the check failed: {err!r}"))
    return problems


def contract_table() -> str:
    """The contract as the Markdown table of ``docs/family-contract.md``."""
    rows = ["| check | a family must have |", "|---|---|"]
    rows += [f"| `{c.name}` | {c.requires} |" for c in CHECKS]
    return "\n".join(rows)
