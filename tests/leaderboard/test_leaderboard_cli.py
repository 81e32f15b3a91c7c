"""``envgym leaderboard``: submit, verify, list and export through the real command line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import SUITE_ID, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures
from typer.testing import CliRunner

from envgym.cli import app
from envgym.leaderboard.bundle import Bundle, read_bundle, write_bundle

pytest.importorskip("sqlalchemy")


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["leaderboard", *args])


def test_submit_writes_a_bundle_that_verify_accepts(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "oracle.envgym.jsonl.gz"
    result = _invoke("submit", str(runs["oracle"]), "--name", "Oracle", "--meta", "model=solver", "--meta", "k=2",
                     "--out", str(out), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    bundle = read_bundle(out)
    assert document == {"bundle": str(out), "content_hash": bundle.content_hash}
    assert bundle.manifest["agent"]["name"] == "Oracle"
    assert bundle.manifest["agent"]["metadata"] == {"model": "solver", "k": 2}

    verified = _invoke("verify", str(out), "--json")
    assert verified.exit_code == 0, verified.output
    scores = json.loads(verified.stdout)["scores"]
    assert scores["success_rate"] == 1.0 and [e["entry"] for e in scores["entries"]] == ["frozenlake", "sokoban"]
    table = _invoke("verify", str(out))
    assert table.exit_code == 0 and "frozenlake" in table.stdout and "pass^2 1.000" in table.stdout


def test_verify_rejects_a_tampered_bundle_with_exit_1(bundles: dict[str, Bundle], tmp_path: Path) -> None:
    changed = Bundle(copy.deepcopy(bundles["random"].manifest), copy.deepcopy(bundles["random"].episodes))
    changed.episodes[2]["turns"][0]["action"] = "dance"
    path = write_bundle(changed.rehash(), tmp_path / "bad.envgym.jsonl.gz")
    result = _invoke("verify", str(path))
    assert result.exit_code == 1
    assert "entry 'frozenlake', seed 4, trial 0, turn 0" in result.output
    not_a_bundle = tmp_path / "x.gz"
    not_a_bundle.write_text("hello")
    result = _invoke("verify", str(not_a_bundle))
    assert result.exit_code == 1 and "gzip file" in result.output and "Traceback" not in result.output


def test_submit_to_a_database_then_list(runs: dict[str, Path], tmp_path: Path) -> None:
    db = tmp_path / "lb.db"
    for agent in ("random", "oracle"):
        result = _invoke("submit", str(runs[agent]), "--name", f"{agent} cli", "--db", str(db),
                         "--out", str(tmp_path / f"{agent}.gz"))  # fmt: skip
        assert result.exit_code == 0, result.output
    again = _invoke("submit", str(runs["oracle"]), "--name", "oracle cli", "--db", str(db),
                    "--out", str(tmp_path / "again.gz"), "--json")  # fmt: skip
    assert again.exit_code == 0 and json.loads(again.stdout)["status"] == "exists"
    listed = _invoke("list", "--db", str(db), "--json")
    board = json.loads(listed.stdout)[SUITE_ID]
    assert [(b["rank"], b["agent_name"]) for b in board] == [(1, "oracle cli"), (2, "random cli")]
    table = _invoke("list", "--db", str(db))
    assert table.exit_code == 0
    assert table.stdout.index("oracle cli") < table.stdout.index("random cli")
    # A bundle file is stored as it is (the database is rebuilt from published bundles this way).
    other = tmp_path / "other.db"
    stored = _invoke("submit", str(tmp_path / "random.gz"), "--db", str(other), "--json")
    assert stored.exit_code == 0 and json.loads(stored.stdout)["submission"]["agent_name"] == "random cli"
    renamed = _invoke("submit", str(tmp_path / "random.gz"), "--db", str(other), "--name", "x")
    assert renamed.exit_code == 2 and "run folder" in renamed.output
    missing = _invoke("list", "--db", str(db), "--suite", "core-v1")
    assert missing.exit_code == 1 and "no submissions for suite 'core-v1'" in missing.output


def test_usage_errors(runs: dict[str, Path], tmp_path: Path) -> None:
    both = _invoke("submit", str(runs["random"]), "--db", str(tmp_path / "a.db"), "--url", "http://127.0.0.1:1")
    assert both.exit_code == 2 and "not both" in both.output
    bad_meta = _invoke("submit", str(runs["random"]), "--meta", "no-equals-sign")
    assert bad_meta.exit_code == 2 and "key=value" in bad_meta.output
    not_a_run = _invoke("submit", str(tmp_path))
    assert not_a_run.exit_code == 1 and "is not a bench run folder (no bench.json)" in not_a_run.output
