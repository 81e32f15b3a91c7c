"""Bench runs end to end: real oracle and random runs, the folder layout, resume, refusals,
infrastructure errors, reports, comparisons, and the ``envgym bench`` commands."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import envgym
from envgym.bench.compare import compare_runs
from envgym.bench.metrics import pass_hat_curve
from envgym.bench.report import write_report
from envgym.bench.run import BenchRun, load_bench_run, run_suite
from envgym.bench.suite import load_suite
from envgym.cli import app
from envgym.errors import ConfigError, UnknownAgentError
from envgym.rollout import Agent, AgentInput, AgentOutput, load_trajectories, make_agent

DUEL = """\
name: duel
version: 1
description: entries where the oracle always wins and a random agent rarely does
defaults: {episodes: 5, seed: 20, split: test, max_turns: 12, trials: 1}
metrics: [success_rate, mean_reward, pass_hat_k, mean_turns]
entries:
  - {name: lake, env: envgym/FrozenLake-v0, kwargs: {difficulty: easy}}
  - {name: boxes, env: envgym/Sokoban-v0, kwargs: {difficulty: easy}, max_turns: 16}
  - {name: sums, env: envgym/Countdown-v0, kwargs: {difficulty: easy}, seeds: [4, 9, 2], max_turns: 3}
"""
BENCH_KEYS = {
    "format",
    "suite",
    "agent",
    "agent_options",
    "trials",
    "created",
    "envgym_version",
    "packages",
    "git_commit",
    "git_dirty",
    "entries",
    "wall_time_s",
}


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("suites") / "duel-v1.yaml"
    path.write_text(DUEL, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def oracle_run(suite_file: Path, tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    return run_suite(suite_file, "oracle", trials=2, out=tmp_path_factory.mktemp("runs") / "oracle")


@pytest.fixture(scope="module")
def random_run(suite_file: Path, tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    return run_suite(suite_file, "random", trials=2, out=tmp_path_factory.mktemp("runs") / "random")


def comparable(run: BenchRun) -> dict[str, list[dict[str, Any]]]:
    return {name: [t.comparable() for t in trajs] for name, trajs in run.per_entry().items()}


# ---------------------------------------------------------------- layout
def test_run_folder_layout(oracle_run: BenchRun, suite_file: Path) -> None:
    folder = oracle_run.path
    suite = load_suite(suite_file)
    meta = json.loads((folder / "bench.json").read_text())
    assert set(meta) == BENCH_KEYS
    assert meta["format"] == "envgym-bench-run/1"
    assert meta["suite"] == {"name": "duel", "version": 1, "id": "duel-v1", "sha256": suite.sha256}
    assert (meta["agent"], meta["agent_options"], meta["trials"]) == ("oracle", {}, 2)
    assert meta["entries"] == ["lake", "boxes", "sums"]
    assert meta["envgym_version"] == envgym.__version__ and "gymnasium" in meta["packages"]
    # suite.yaml is the resolved suite and hashes to what bench.json records
    resolved = yaml.safe_load((folder / "suite.yaml").read_text())
    assert resolved["entries"][0]["seeds"] == {"start": 20, "count": 5}
    assert resolved["entries"][0]["max_turns"] == 12 and resolved["entries"][2]["seeds"] == [4, 9, 2]
    assert oracle_run.suite.sha256 == suite.sha256
    for entry in suite.entries:
        entry_dir = folder / "entries" / entry.name
        assert {p.name for p in entry_dir.iterdir()} >= {"config.json", "meta.json", "episodes.jsonl", "summary.json"}
        config = json.loads((entry_dir / "config.json").read_text())
        assert config["env_id"] == entry.env and config["agent"] == "oracle"
        assert (config["episodes"], config["group_size"], config["seed"]) == (2 * entry.episodes, 2, entry.seeds[0])
        assert config["env_kwargs"] == {"difficulty": "easy", "split": "test"}
        assert config["max_turns"] == entry.max_turns
        trajs = load_trajectories(entry_dir)
        assert [(t.seed, t.member) for t in trajs] == [(s, m) for s in entry.seeds for m in (0, 1)]
    # the explicit seed list really plays those seeds, on the test split
    env = envgym.make("envgym/Countdown-v0", difficulty="easy", split="test")
    expected = [env.reset(seed=s)[1]["task"]["id"] for s in (4, 9, 2)]
    env.close()
    played = [t.task_id for t in oracle_run.trajectories("sums") if t.member == 0]
    assert played == expected
    results = json.loads((folder / "results.json").read_text())
    assert results["format"] == "envgym-bench-results/1" and results["complete"] is True
    assert [e["name"] for e in results["entries"]] == ["lake", "boxes", "sums"]
    for item in results["entries"]:
        assert item["success_rate"] == 1.0 and item["success_rate_ci"] == [1.0, 1.0]
        assert item["pass_hat_k"] == {"1": 1.0, "2": 1.0}
        assert item["episodes"] == item["expected_episodes"] == item["scored"]
    assert results["overall"]["success_rate"] == 1.0 and results["overall"]["episodes"] == 26


def test_random_results_match_the_recorded_episodes(random_run: BenchRun) -> None:
    results = random_run.results()
    for item in results["entries"]:
        lines = (random_run.path / "entries" / item["name"] / "episodes.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        by_seed: dict[int, list[bool]] = {}
        for r in records:
            by_seed.setdefault(r["seed"], []).append(bool(r["success"]))
        per_task = [sum(v) / len(v) for v in by_seed.values()]
        assert item["success_rate"] == pytest.approx(sum(per_task) / len(per_task))
        assert item["pass_hat_k"] == pytest.approx(pass_hat_curve(list(by_seed.values())))
        assert item["mean_turns"] == pytest.approx(sum(len(r["turns"]) for r in records) / len(records))
    entries = results["entries"]
    assert results["overall"]["success_rate"] == pytest.approx(sum(e["success_rate"] for e in entries) / 3)
    assert results["overall"]["success_rate"] < 0.5


# ---------------------------------------------------------------- resume and refusals
class Interrupt:
    """on_episode_end hook that interrupts the run after ``n`` episodes (Ctrl-C in a terminal)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = 0

    def __call__(self, _entry: str, _traj: Any) -> None:
        self.seen += 1
        if self.seen == self.n:
            raise KeyboardInterrupt


def test_interrupted_run_resumes_into_the_same_folder(suite_file: Path, random_run: BenchRun, tmp_path: Path) -> None:
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        run_suite(suite_file, "random", trials=2, out=out, num_envs=2, on_episode_end=Interrupt(13))
    partial = load_bench_run(out)
    assert not (out / "results.json").exists()
    assert sum(len(t) for t in partial.per_entry().values()) >= 12
    assert partial.missing() and "sums" in partial.missing()
    played: list[str] = []
    done = run_suite(suite_file, "random", trials=2, out=out, on_episode_end=lambda e, t: played.append(e))
    assert len(played) == 26 - sum(len(t) for t in partial.per_entry().values())
    assert done.missing() == {}
    for name in ("lake", "boxes", "sums"):
        lines = (out / "entries" / name / "episodes.jsonl").read_text().splitlines()
        assert sorted(json.loads(line)["index"] for line in lines) == list(range(len(lines)))  # no duplicates
    # interrupted + resumed == one uninterrupted run, episode for episode
    assert comparable(done) == comparable(random_run)
    untimed = [{k: v for k, v in e.items() if k != "wall_time_s"} for e in done.results()["entries"]]
    assert untimed == [{k: v for k, v in e.items() if k != "wall_time_s"} for e in random_run.results()["entries"]]
    # a third run finds nothing to do
    again: list[str] = []
    run_suite(suite_file, "random", trials=2, out=out, on_episode_end=lambda e, t: again.append(e))
    assert again == []


def test_resume_refuses_a_changed_setup(suite_file: Path, oracle_run: BenchRun, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"agent: 'oracle' -> 'random'"):
        run_suite(suite_file, "random", trials=2, out=oracle_run.path)
    with pytest.raises(ConfigError, match=r"trials: 2 -> 3"):
        run_suite(suite_file, "oracle", trials=3, out=oracle_run.path)
    with pytest.raises(ConfigError, match=r"agent_options: \{\} -> \{'temperature': 0.5\}"):
        run_suite(suite_file, "oracle", trials=2, out=oracle_run.path, agent_options={"temperature": 0.5})
    changed = tmp_path / "duel-v1.yaml"
    changed.write_text(DUEL.replace("seed: 20", "seed: 21"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"different setup \(suite: .*sha256"):
        run_suite(changed, "oracle", trials=2, out=oracle_run.path)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a bench run folder"):
        run_suite(suite_file, "oracle", out=tmp_path / "other")
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    with pytest.raises(UnknownAgentError, match="unknown agent 'oracel'"):
        run_suite(suite_file, "oracel", out=tmp_path / "typo")
    assert not (tmp_path / "typo").exists()
    with pytest.raises(ConfigError, match="trials must be an integer >= 1"):
        run_suite(suite_file, "oracle", trials=0, out=tmp_path / "zero")


def test_tampered_run_folders_are_refused(oracle_run: BenchRun, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(oracle_run.path, copy)
    suite_yaml = copy / "suite.yaml"
    suite_yaml.write_text(suite_yaml.read_text().replace("max_turns: 16", "max_turns: 60"))
    with pytest.raises(ConfigError, match="the resolved suite was edited after the run"):
        load_bench_run(copy)
    (copy / "bench.json").write_text("{ not json")
    with pytest.raises(ConfigError, match="bench.json cannot be read as JSON"):
        load_bench_run(copy)
    with pytest.raises(ConfigError, match="not a bench run folder"):
        load_bench_run(tmp_path)


# ---------------------------------------------------------------- infrastructure errors
class FlakyOracle(Agent):
    """The oracle, except that it raises on every turn of the tasks whose seed is in ``bad``."""

    name = "flaky"

    def __init__(self, bad: set[int]) -> None:
        self.inner = make_agent("oracle")
        self.bad = bad
        self.seeds: dict[str, int | None] = {}

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        self.seeds[episode_id] = seed
        self.inner.start_episode(episode_id, env_id, seed, member=member)

    def end_episode(self, episode_id: str) -> None:
        self.inner.end_episode(episode_id)

    def reset(self) -> None:
        self.inner.reset()

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        if any(self.seeds.get(item.episode_id) in self.bad for item in batch):
            raise RuntimeError("model server went away")
        return self.inner.act(batch)


def test_infrastructure_errors_are_reported_apart_and_rerun(suite_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "flaky"
    run = run_suite(suite_file, "oracle", out=out, max_retries=0, agent_object=FlakyOracle({20, 21, 9}))
    results = run.results()
    lake, _boxes, sums = results["entries"]
    assert lake["infra_errors"] == {"agent_error": 2} and lake["scored"] == 3
    assert lake["success_rate"] == 1.0  # the two failed episodes are not counted as failures
    assert sums["infra_errors"] == {"agent_error": 1} and sums["tasks"] == 2
    assert results["overall"]["infra_error_episodes"] == 5 and results["overall"]["success_rate"] == 1.0
    assert any("model server went away" in (t.error or "") for t in run.trajectories("lake"))
    # resuming with a working agent re-runs exactly the failed episodes
    replayed: list[tuple[str, int]] = []
    fixed = run_suite(suite_file, "oracle", out=out, on_episode_end=lambda e, t: replayed.append((e, t.seed)))
    assert sorted(replayed) == [("boxes", 20), ("boxes", 21), ("lake", 20), ("lake", 21), ("sums", 9)]
    assert fixed.results()["overall"]["infra_error_episodes"] == 0


# ---------------------------------------------------------------- report and compare
def test_report_files(random_run: BenchRun, tmp_path: Path) -> None:
    paths = write_report(random_run.path, tmp_path / "report")
    assert {p.name for p in (tmp_path / "report").iterdir()} == {"report.md", "report.html", "success.png", "turns.png"}
    for key in ("success_png", "turns_png"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = paths["html"].read_text()
    assert '<table id="results">' in html and html.count("data:image/png;base64,") == 2
    assert 'src="success.png"' not in html  # self-contained
    results = random_run.results()
    for item in results["entries"]:
        assert f"<td>{item['name']}</td>" in html
        assert f"| {item['name']} | {item['env']} |" in paths["md"].read_text()
    overall = f"{results['overall']['success_rate']:.3f} [{results['overall']['success_rate_ci'][0]:.2f}"
    assert overall in html
    assert "duel-v1" in html and "stratified by entry" in html


def test_compare_oracle_and_random(oracle_run: BenchRun, random_run: BenchRun, tmp_path: Path) -> None:
    result = compare_runs(oracle_run.path, random_run.path)
    overall = result["overall"]
    assert overall["pairs"] == 26 and overall["unpaired"] == 0
    assert overall["success_a"] == 1.0 and overall["success_diff"] < -0.5
    assert overall["b_only"] == 0 and overall["a_only"] >= 15
    assert overall["mcnemar_p"] < 1e-3 and overall["success_sign_flip_p"] < 0.01
    lake = result["entries"][0]
    assert lake["pairs"] == 10 and lake["tasks"] == 5
    # the same run against itself: no difference, nothing significant
    same = compare_runs(oracle_run.path, oracle_run.path)["overall"]
    assert same["success_diff"] == 0.0 and same["mcnemar_p"] == 1.0 and same["success_sign_flip_p"] == 1.0


def test_compare_refuses_different_suites(oracle_run: BenchRun, tmp_path: Path) -> None:
    other_suite = tmp_path / "solo-v1.yaml"
    other_suite.write_text(
        textwrap.dedent("""\
        name: solo
        version: 1
        entries: [{name: lake, env: envgym/FrozenLake-v0, episodes: 2, max_turns: 12}]
        """)
    )
    solo = run_suite(other_suite, "oracle", out=tmp_path / "solo")
    with pytest.raises(ConfigError, match=r"different suites: .* ran 'duel-v1', .* ran 'solo-v1'"):
        compare_runs(oracle_run.path, solo.path)
    edited = tmp_path / "edited" / "duel-v1.yaml"
    edited.parent.mkdir()
    edited.write_text(DUEL.replace("episodes: 5", "episodes: 2"))
    small = run_suite(edited, "oracle", out=tmp_path / "small")
    with pytest.raises(ConfigError, match="suite 'duel-v1' but its content differs"):
        compare_runs(oracle_run.path, small.path)


# ---------------------------------------------------------------- the command line, on core-v1
cli = CliRunner()


def invoke(*args: str) -> Any:
    return cli.invoke(app, list(args))


def test_cli_on_core_v1(tmp_path: Path, oracle_run: BenchRun) -> None:
    listed = invoke("bench", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    assert "core-v1" in [s["id"] for s in json.loads(listed.stdout)["suites"]]

    result = invoke("bench", "run", "core-v1", "--agent", "oracle", "--out", str(tmp_path / "o"), "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["suite"]["id"] == "core-v1" and len(data["entries"]) == 8
    assert all(e["success_rate"] == 1.0 and e["infra_error_episodes"] == 0 for e in data["entries"])
    assert {e["env"] for e in data["entries"]} >= {"envgym/Household-v0", "envgym/ConnectFour-v0"}

    table = invoke("bench", "run", "core-v1", "--agent", "random", "--out", str(tmp_path / "r"))
    assert table.exit_code == 0, table.stderr
    assert "household" in table.stdout and "overall" in table.stdout

    report = invoke("bench", "report", str(tmp_path / "r"), "--json")
    assert report.exit_code == 0, report.stderr
    assert Path(json.loads(report.stdout)["files"]["html"]).is_file()

    compared = invoke("bench", "compare", str(tmp_path / "o"), str(tmp_path / "r"), "--json")
    assert compared.exit_code == 0, compared.stderr
    overall = json.loads(compared.stdout)["overall"]
    assert overall["success_diff"] < 0 and overall["mcnemar_p"] < 0.01
    shown = invoke("bench", "compare", str(tmp_path / "o"), str(tmp_path / "r"))
    assert shown.exit_code == 0 and "McNemar" in shown.stdout and "overall" in shown.stdout

    refused = invoke("bench", "compare", str(tmp_path / "o"), str(oracle_run.path))
    assert refused.exit_code == 2 and "different suites" in refused.stderr
    unknown = invoke("bench", "run", "core-v2", "--agent", "oracle", "--out", str(tmp_path / "x"))
    assert unknown.exit_code == 2 and "Did you mean 'core-v1'" in unknown.stderr
    bad_agent = invoke("bench", "run", "core-v1", "--agent", "orcale", "--out", str(tmp_path / "x"))
    assert bad_agent.exit_code == 2 and "unknown agent" in bad_agent.stderr
    assert not (tmp_path / "x").exists()
    resumed_other_agent = invoke("bench", "run", "core-v1", "--agent", "random", "--out", str(tmp_path / "o"))
    assert resumed_other_agent.exit_code == 2 and "different setup" in resumed_other_agent.stderr
