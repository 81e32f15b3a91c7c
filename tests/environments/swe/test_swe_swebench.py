"""The SWE-bench / SWE-Gym loader (environments/swe/swebench.py) on a small fixture git repository.

The fixture is a real git repository made here: a base commit with a bug, a later commit holding
the fix (which must never reach the workspace), an instance whose ``test_patch`` adds the test
that catches the bug. Graded in the bwrap sandbox (the fixture is pure Python) and, where an
engine answers, in Docker.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from envgym.environments.swe.swebench import SWEBenchInstance, evaluate, load_instances, patch_paths, prepare

from envgym.errors import ConfigError

BUGGY = "def add(a, b):\n    if b < 0:\n        return a - b\n    return a + b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
NEW_TEST = "\n\ndef test_add_negative():\n    assert add(2, -3) == -1\n"


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    import os

    proc = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True, env={**os.environ, **env}
    )
    return proc.stdout


def _diff(repo: Path, old: str, new: str) -> str:
    return _git(repo, "diff", old, new)


@pytest.fixture(scope="module")
def fixture_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed (apt-get install git)")
    repo = tmp_path_factory.mktemp("calc-repo")
    _git(repo, "init", "-q")
    (repo / "calc.py").write_text(BUGGY)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    # the gold patch and the test patch, as two commits on top of base
    (repo / "calc.py").write_text(FIXED)
    _git(repo, "commit", "-q", "-am", "fix")
    fix = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "tests" / "test_calc.py").write_text(TESTS + NEW_TEST)
    _git(repo, "commit", "-q", "-am", "test")
    head = _git(repo, "rev-parse", "HEAD").strip()
    row = {
        "instance_id": "calc__calc-1",
        "repo": "example/calc",
        "base_commit": base,
        "problem_statement": "add(2, -3) returns 5 instead of -1.",
        "patch": _diff(repo, base, fix),
        "test_patch": _diff(repo, fix, head),
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add_negative"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
        "version": "1.0",
        "created_at": "2024-01-01",
    }
    return repo, row


def test_instances_load_from_jsonl_json_and_rows(fixture_repo: tuple[Path, dict], tmp_path: Path) -> None:
    _repo, row = fixture_repo
    (tmp_path / "a.jsonl").write_text(json.dumps(row) + "\n\n" + json.dumps({**row, "instance_id": "x-2"}) + "\n")
    (tmp_path / "a.json").write_text(json.dumps([row]))
    from_jsonl = load_instances(tmp_path / "a.jsonl")
    assert [i.instance_id for i in from_jsonl] == ["calc__calc-1", "x-2"]
    inst = load_instances(tmp_path / "a.json")[0]
    assert inst == load_instances([row])[0]
    assert inst.fail_to_pass == ("tests/test_calc.py::test_add_negative",)
    assert inst.pass_to_pass == ("tests/test_calc.py::test_add",) and inst.extra == {"created_at": "2024-01-01"}
    assert patch_paths(inst.test_patch) == ["tests/test_calc.py"] and patch_paths(inst.patch) == ["calc.py"]
    # lists instead of JSON strings are accepted; malformed rows say what is wrong
    assert SWEBenchInstance.from_dict({**row, "FAIL_TO_PASS": ["a.py::t"]}).fail_to_pass == ("a.py::t",)
    with pytest.raises(ConfigError, match="FAIL_TO_PASS is not a JSON list"):
        SWEBenchInstance.from_dict({**row, "FAIL_TO_PASS": "[oops"})
    with pytest.raises(ConfigError, match="needs base_commit"):
        SWEBenchInstance.from_dict({k: v for k, v in row.items() if k != "base_commit"})


def test_the_workspace_is_the_base_commit_without_history_and_without_the_new_tests(
    fixture_repo: tuple[Path, dict], tmp_path: Path
) -> None:
    repo, row = fixture_repo
    ws = prepare(SWEBenchInstance.from_dict(row), repo, tmp_path)
    assert (ws.tree / "calc.py").read_text() == BUGGY
    assert not (ws.tree / ".git").exists()
    assert "test_add_negative" not in (ws.tree / "tests" / "test_calc.py").read_text()
    assert ws.restore == {"tests/test_calc.py": (TESTS + NEW_TEST).encode()}
    bad = SWEBenchInstance.from_dict(
        {**row, "test_patch": "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"}
    )
    with pytest.raises(ConfigError, match="test_patch does not apply"):
        prepare(bad, repo, tmp_path / "other")


def _graded(row: dict, repo: Path, patch: str | None, sandbox: str) -> dict:
    return evaluate(SWEBenchInstance.from_dict(row), repo, patch, sandbox=sandbox, timeout=120)


@pytest.mark.parametrize("sandbox", ["bwrap", "docker"])
def test_gold_patch_resolves_and_no_patch_or_a_test_edit_does_not(
    fixture_repo: tuple[Path, dict], sandbox: str
) -> None:
    from envgym.sandbox import sandbox_class

    reason = sandbox_class(sandbox).unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    repo, row = fixture_repo
    gold = _graded(row, repo, row["patch"], sandbox)
    assert gold["resolved"] and gold["patch_applied"] is True and gold["f2p_fraction"] == 1.0
    nothing = _graded(row, repo, None, sandbox)
    assert not nothing["resolved"] and nothing["patch_applied"] is None
    assert nothing["fail_to_pass"] == {"tests/test_calc.py::test_add_negative": "failed"}
    assert nothing["pass_to_pass_broken"] == []
    # a "fix" that rewrites the test file is undone by the restore step
    cheat = (
        "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n"
        "@@ -1,5 +1,9 @@\n from calc import add\n \n \n def test_add():\n     assert add(2, 3) == 5\n+\n+\n"
        "+def test_add_negative():\n+    assert True\n"
    )
    cheated = _graded(row, repo, cheat, sandbox)
    assert cheated["patch_applied"] is True and not cheated["resolved"]
    garbage = _graded(row, repo, "this is not a diff\n", sandbox)
    assert garbage["patch_applied"] is False and not garbage["resolved"]
