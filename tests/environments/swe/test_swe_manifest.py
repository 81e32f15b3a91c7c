"""The shipped task manifest (environments/swe/data/tasks.json.gz): size, splits, and tasks that apply.

Pure data checks: they read the manifest and the fetched pristine trees, no sandbox.
"""

from __future__ import annotations

import collections
import re

import pytest
from envgym.environments.swe import libraries
from envgym.environments.swe.libraries import LIBRARIES, SetupMissingError, source_files, source_tree
from envgym.environments.swe.mutations import KINDS, apply_edit
from envgym.environments.swe.tasks import MANIFEST, load_manifest, select_tasks, task_by_id

from envgym.errors import InvalidKwargsError

META, TASKS = load_manifest()


def test_the_manifest_is_big_enough_and_spans_the_libraries() -> None:
    assert MANIFEST.is_file() and META["format"] == 1
    assert len(TASKS) >= 300
    per_library = collections.Counter(t.library for t in TASKS)
    assert len(per_library) >= 5 and set(per_library) <= {lib.name for lib in LIBRARIES}
    assert {t.version for t in TASKS} <= {lib.version for lib in LIBRARIES}
    assert {lib: META["libraries"][lib]["sha256"] for lib in per_library} == {
        lib.name: lib.sha256 for lib in LIBRARIES if lib.name in per_library
    }
    assert len({t.id for t in TASKS}) == len(TASKS)
    assert set(collections.Counter(t.mutation for t in TASKS)) <= set(KINDS)
    assert len({t.mutation for t in TASKS}) >= 6
    builder = META["builder"]
    assert builder["seconds"] > 0 and set(builder["per_library"]) == {lib.name for lib in LIBRARIES}
    assert sum(s["kept"] for s in builder["per_library"].values()) == len(TASKS)


def test_train_and_test_are_disjoint_by_library_file() -> None:
    train, test = select_tasks("train"), select_tasks("test")
    assert len(train) + len(test) == len(TASKS)
    assert len(test) >= 100 and len(train) >= 150
    train_files = {(t.library, t.file) for t in train}
    test_files_ = {(t.library, t.file) for t in test}
    assert train_files and test_files_ and not train_files & test_files_


def test_every_task_has_failing_and_passing_tests_and_an_honest_statement() -> None:
    for t in TASKS:
        assert t.fail_to_pass and t.pass_to_pass and not set(t.fail_to_pass) & set(t.pass_to_pass)
        assert len(t.pass_to_pass) <= 30 and len(t.fail_to_pass) <= 60
        for test_id in (*t.fail_to_pass, *t.pass_to_pass):
            assert re.match(r"^[A-Za-z0-9_./-]+\.py::", test_id), test_id
        statement = t.problem_statement
        assert t.fail_to_pass[0] in statement and t.library in statement
        # never the fix, the file or the line
        for text in (t.original.strip(), t.mutated.strip()):
            assert len(text) < 12 or text not in statement  # ("pass" is in "passes")
        assert not re.search(rf"(?<![\w/]){re.escape(t.file)}", statement) and f"line {t.line}" not in statement
        assert t.library in t.id and t.file not in t.id and t.mutation not in t.id


def test_every_task_applies_to_its_pristine_tree_and_reverses() -> None:
    try:
        roots = {lib.name: source_tree(lib) for lib in LIBRARIES}
    except SetupMissingError as err:
        pytest.skip(str(err))
    sources = {lib.name: set(source_files(lib)) for lib in LIBRARIES}
    tests = {lib.name: set(libraries.test_files(lib)) for lib in LIBRARIES}
    for t in TASKS:
        assert t.file in sources[t.library] and t.file not in tests[t.library]
        pristine = (roots[t.library] / t.file).read_bytes().decode("utf-8")
        buggy = t.mutated_source(roots[t.library]).decode("utf-8")
        assert buggy != pristine and apply_edit(buggy, t.line, t.mutated, t.original) == pristine
        for test_id in t.fail_to_pass:
            assert test_id.split("::")[0] in tests[t.library]


def test_tasks_are_found_by_id_and_unknown_ids_are_named() -> None:
    first = TASKS[0]
    assert task_by_id(first.id) is first
    with pytest.raises(InvalidKwargsError, match="unknown SWE task"):
        task_by_id(first.id + "x")
    assert {t.library for t in select_tasks("test", [TASKS[0].library])} <= {TASKS[0].library}
