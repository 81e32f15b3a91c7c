"""The shipped SWE task manifest: one injected bug per task, versioned with the package.

``data/tasks.json.gz`` is written by :mod:`.builder` (``python -m envgym.environments.swe.builder``)
and read here. Each task names the library (and version), the mutated file and line, the mutation
(kind and the line edit that injects it), the tests that fail because of it (``FAIL_TO_PASS``),
the tests that must keep passing (``PASS_TO_PASS``), the problem statement shown to the agent and
the split. Train and test are disjoint by library file: every file's tasks share one split.

The manifest holds the fix (the original lines). The environment reads it on the host; no
sandbox ever sees it.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgym.environments.swe.libraries import Library, by_name, source_tree
from envgym.environments.swe.mutations import apply_edit

from envgym.errors import InvalidKwargsError, suggest

__all__ = ["MANIFEST", "SWETask", "load_manifest", "select_tasks", "task_by_id"]

#: The shipped manifest.
MANIFEST = Path(__file__).with_name("data") / "tasks.json.gz"


@dataclass(frozen=True)
class SWETask:
    """One bug-fixing task (see the module docstring)."""

    id: str
    library: str
    version: str
    file: str
    line: int
    mutation: str
    original: str
    mutated: str
    function: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    problem_statement: str
    split: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def lib(self) -> Library:
        return by_name(self.library)

    def mutated_source(self, root: Path | None = None) -> bytes:
        """The buggy module's bytes, made from the library's pristine tree."""
        root = root or source_tree(self.lib)
        text = (root / self.file).read_bytes().decode("utf-8")
        return apply_edit(text, self.line, self.original, self.mutated).encode("utf-8")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SWETask:
        return cls(
            id=data["id"],
            library=data["library"],
            version=data["version"],
            file=data["file"],
            line=int(data["line"]),
            mutation=data["mutation"],
            original=data["original"],
            mutated=data["mutated"],
            function=data.get("function", ""),
            fail_to_pass=tuple(data["FAIL_TO_PASS"]),
            pass_to_pass=tuple(data["PASS_TO_PASS"]),
            problem_statement=data["problem_statement"],
            split=data["split"],
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "library": self.library,
            "version": self.version,
            "file": self.file,
            "line": self.line,
            "mutation": self.mutation,
            "original": self.original,
            "mutated": self.mutated,
            "function": self.function,
            "FAIL_TO_PASS": list(self.fail_to_pass),
            "PASS_TO_PASS": list(self.pass_to_pass),
            "problem_statement": self.problem_statement,
            "split": self.split,
        }


@functools.lru_cache(maxsize=4)
def _load(path: str) -> tuple[dict[str, Any], tuple[SWETask, ...]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    tasks = tuple(SWETask.from_dict(t) for t in data["tasks"])
    meta = {k: v for k, v in data.items() if k != "tasks"}
    return meta, tasks


def load_manifest(path: str | Path | None = None) -> tuple[dict[str, Any], tuple[SWETask, ...]]:
    """(metadata, tasks) of the manifest at ``path`` (default: the shipped one)."""
    return _load(str(path or MANIFEST))


@functools.lru_cache(maxsize=4)
def _index(path: str) -> dict[str, SWETask]:
    return {t.id: t for t in _load(path)[1]}


def task_by_id(task_id: str, path: str | Path | None = None) -> SWETask:
    """The task called ``task_id``; unknown ids raise with a suggestion."""
    index = _index(str(path or MANIFEST))
    try:
        return index[task_id]
    except KeyError:
        raise InvalidKwargsError(f"unknown SWE task {task_id!r}.{suggest(task_id, index)}") from None


def select_tasks(
    split: str, libraries: Iterable[str] | None = None, path: str | Path | None = None
) -> tuple[SWETask, ...]:
    """The tasks of ``split``, optionally only those of ``libraries``, in manifest order."""
    tasks = load_manifest(path)[1]
    wanted = None if libraries is None else {by_name(n).name for n in libraries}
    return tuple(t for t in tasks if t.split == split and (wanted is None or t.library in wanted))
