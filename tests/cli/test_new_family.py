"""``envgym new-family NAME``: the stamped skeleton keeps the family contract and its own tests pass.

The skeleton is stamped into a temporary checkout; a fresh interpreter puts that checkout's
``environments/`` and ``agents/solvers/`` on the packages' search paths before anything registers
(as an editable install of the checkout would), runs the contract check on it, then the stamped
tests with pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envgym.cli import app

RUN_STAMPED = """
import json, sys
root = sys.argv[1]
import envgym.environments as families
families.__path__.append(root + "/environments")  # before anything registers the families
import envgym.agents.solvers as solvers
solvers.__path__.append(root + "/agents/solvers")
from envgym.families import check_family
problems = [str(p) for p in check_family(sys.argv[2], root=root)]
import pytest
code = pytest.main([root + "/tests", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", root])
print(json.dumps({"problems": problems, "pytest": int(code)}))
"""


@pytest.mark.slow
def test_a_stamped_family_keeps_the_contract_and_passes_its_tests(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["new-family", "dice_games", "--root", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    files = json.loads(result.stdout)["files"]
    assert files == [
        "environments/dice_games/__init__.py",
        "environments/dice_games/env.py",
        "agents/solvers/dice_games.py",
        "benchmarks/dice_games-v1.yaml",
        "benchmarks/perf/dice_games.py",
        "tests/environments/dice_games/test_dice_games.py",
    ]
    done = subprocess.run(
        [sys.executable, "-c", RUN_STAMPED, str(tmp_path), "dice_games"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["problems"] == []
    assert report["pytest"] == 0, done.stdout[-3000:]
    assert "9 passed" in done.stdout


def test_the_stamped_perf_script_runs(tmp_path: Path) -> None:
    CliRunner().invoke(app, ["new-family", "dice_games", "--root", str(tmp_path)])
    script = tmp_path / "benchmarks" / "perf" / "dice_games.py"
    code = (
        "import sys, runpy; import envgym.environments as f; f.__path__.append(sys.argv[1] + '/environments'); "
        "sys.argv = ['perf', '--resets', '5', '--steps', '200', '--json']; runpy.run_path(sys.argv_script, run_name='__main__')"
    ).replace("sys.argv_script", repr(str(script)))
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout)
    assert set(rows) == {"envgym/DiceGames-v0", "envgym/DiceGames-Easy-v0", "envgym/DiceGames-Hard-v0"}
    assert all(r["steps_per_s"] > 0 and r["reset_ms"] > 0 for r in rows.values())


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("DiceGames", "a family name is a lowercase Python identifier"),
        ("dice-games", "a family name is a lowercase Python identifier"),
        ("class", "a family name is a lowercase Python identifier"),
        ("games", "a family named 'games' exists already"),
    ],
)
def test_bad_or_taken_names_are_refused_before_anything_is_written(tmp_path: Path, name: str, message: str) -> None:
    (tmp_path / "environments" / "games").mkdir(parents=True)
    result = CliRunner().invoke(app, ["new-family", name, "--root", str(tmp_path)])
    assert result.exit_code == 2
    assert message in result.output
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "environments",
        "environments/games",
    ]


def test_existing_files_are_never_overwritten(tmp_path: Path) -> None:
    suite = tmp_path / "benchmarks" / "dice_games-v1.yaml"
    suite.parent.mkdir(parents=True)
    suite.write_text("mine\n")
    result = CliRunner().invoke(app, ["new-family", "dice_games", "--root", str(tmp_path)])
    assert result.exit_code == 2
    assert "these files exist already: benchmarks/dice_games-v1.yaml" in result.output
    assert suite.read_text() == "mine\n"
    assert not (tmp_path / "environments").exists()
