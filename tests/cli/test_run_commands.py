"""``envgym run`` and ``envgym bench run`` as a new user meets them (issue 37, "Commands"):
what a failed start leaves behind, unwritable ``--out`` folders, dead endpoints, the flags a
newcomer reaches for, and the numbers the tables show."""

from __future__ import annotations

import gc
import http.server
import json
import runpy
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envgym._folderlock import FolderLock
from envgym.cli import app
from envgym.errors import ConfigError
from envgym.rollout import load_trajectories
from envgym.rollout.records import Trajectory
from envgym.rollout.summary import summarize

runner = CliRunner()

LAKE = "envgym/FrozenLake-v0"
SUITE = """\
name: mini
version: 1
description: two tiny entries
defaults: {episodes: 2, seed: 3, split: test, max_turns: 6, trials: 1}
metrics: [success_rate, mean_reward, mean_turns, wall_time]
entries:
  - {name: lake, env: envgym/FrozenLake-v0, kwargs: {difficulty: easy}}
  - {name: sums, env: envgym/Countdown-v0, kwargs: {difficulty: easy}, max_turns: 3}
"""


def invoke(*args: str) -> Any:
    return runner.invoke(app, [*args, "--no-progress"], env={"COLUMNS": "400"})  # messages on one line


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("suites") / "mini-v1.yaml"
    path.write_text(SUITE, encoding="utf-8")
    return path


def files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


# ---------------------------------------------------------------- 1. a failed start leaves nothing
@pytest.mark.parametrize("where", ["new", "existing empty"])
def test_run_with_a_typo_in_an_agent_option_leaves_no_folder(tmp_path: Path, where: str) -> None:
    out = tmp_path / "run"
    if where == "existing empty":
        out.mkdir()
    typo = invoke("run", LAKE, "-n", "2", "-O", "temprature=1", "--out", str(out))
    assert typo.exit_code == 2, typo.output
    assert "temprature" in typo.stderr
    assert files(out) == set()
    assert out.exists() == (where == "existing empty")  # a folder the user made stays
    fixed = invoke("run", LAKE, "-n", "2", "--out", str(out), "--json")
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout)["episodes"] == 2
    assert {"config.json", "meta.json", "episodes.jsonl", "summary.json", ".lock"} <= files(out)


def test_bench_run_with_a_typo_in_an_agent_option_leaves_no_folder(tmp_path: Path, suite_file: Path) -> None:
    out = tmp_path / "bench"
    typo = invoke("bench", "run", str(suite_file), "-O", "temprature=1", "--out", str(out))
    assert typo.exit_code == 2, typo.output
    assert "temprature" in typo.stderr
    assert not out.exists()
    fixed = invoke("bench", "run", str(suite_file), "--out", str(out), "--json")
    assert fixed.exit_code == 0, fixed.output
    assert json.loads(fixed.stdout)["overall"]["episodes"] == 4
    assert {"bench.json", "suite.yaml", "entries/lake/episodes.jsonl", "entries/sums/episodes.jsonl"} <= files(out)


def test_a_failed_resume_keeps_the_recorded_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert invoke("run", LAKE, "-n", "2", "--out", str(out)).exit_code == 0
    before = {name: (out / name).read_bytes() for name in ("config.json", "episodes.jsonl", "summary.json")}
    again = invoke("run", LAKE, "-n", "3", "-a", "random", "-O", "temprature=1", "--out", str(out))
    assert again.exit_code == 2
    assert {name: (out / name).read_bytes() for name in before} == before


# ---------------------------------------------------------------- 2. --out that cannot be made
@pytest.mark.parametrize("command", ["run", "bench"])
def test_out_under_a_file_is_one_line_and_exit_2(tmp_path: Path, suite_file: Path, command: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    out = blocker / "run"
    args = ["run", LAKE, "-n", "1"] if command == "run" else ["bench", "run", str(suite_file)]
    result = invoke(*args, "--out", str(out))
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert f"{blocker} is a file, not a folder" in lines[0] and "--out" in lines[0]
    assert "Traceback" not in result.output


def test_out_under_proc_is_one_line_and_exit_2() -> None:
    result = invoke("run", LAKE, "-n", "1", "--out", "/proc/envgym-test/run")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot create the run folder /proc/envgym-test/run")


def test_a_lock_that_was_never_taken_is_collected_quietly(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    raised: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, raised.append
    try:
        with pytest.raises(ConfigError, match="is a file, not a folder"):
            FolderLock(tmp_path / "file" / "out")
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert raised == []


# ---------------------------------------------------------------- 3. a dead or broken agent server
@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def broken_server() -> Iterator[str]:
    """A real HTTP server on loopback that answers every chat completion with HTTP 500."""

    class Broken(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = b'{"error": "overloaded"}'
            self.send_response(500)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_refused_connection_fails_before_the_run(
    tmp_path: Path, suite_file: Path, closed_port: int, command: str
) -> None:
    agent = f"openai:some-model@http://127.0.0.1:{closed_port}/v1"
    args = ["run", LAKE, "-n", "2"] if command == "run" else ["bench", "run", str(suite_file)]
    result = invoke(*args, "-a", agent, "--out", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert f"127.0.0.1:{closed_port}" in result.stderr and "cannot be reached" in result.stderr
    assert not (tmp_path / "out").exists()  # no episode ran (each would spend the agent's retries)


def test_a_host_that_does_not_resolve_fails_before_the_run(tmp_path: Path) -> None:
    result = invoke("run", LAKE, "-n", "1", "-a", "openai:m@http://no-such-host.invalid:8000/v1")
    assert result.exit_code == 1, result.output
    assert "does not resolve" in result.stderr


@pytest.mark.parametrize("command", ["run", "bench"])
def test_a_run_whose_every_episode_is_an_infrastructure_error_exits_1(
    tmp_path: Path, suite_file: Path, broken_server: str, command: str
) -> None:
    agent = f"openai:some-model@{broken_server}"
    quick = ["-O", "max_retries=0", "--max-retries", "0"]
    args = ["run", LAKE, "-n", "2"] if command == "run" else ["bench", "run", str(suite_file)]
    result = invoke(*args, "-a", agent, *quick, "--out", str(tmp_path / "out"), "--json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)  # the results are still printed
    numbers = document if command == "run" else document["overall"]
    assert numbers["scored"] == 0 and numbers["episodes"] == (2 if command == "run" else 4)
    assert "every episode (" in result.stderr and "agent_error" in result.stderr


# ---------------------------------------------------------------- 4. the flags a newcomer reaches for
def test_python_dash_m_envgym_is_the_envgym_command(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setattr(sys, "argv", ["envgym", "run", "--help"])
    with pytest.raises(SystemExit) as ended:
        runpy.run_module("envgym", run_name="__main__", alter_sys=True)
    assert ended.value.code == 0
    shown = capsys.readouterr().out
    assert "Usage: envgym run" in shown and "--limit" in shown


def test_run_limit_plays_the_first_episodes_and_the_full_command_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = invoke("run", LAKE, "-n", "6", "--limit", "2", "-o", str(out), "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["episodes"] == 2
    played = load_trajectories(out)
    assert [t.seed for t in played] == [0, 1]
    full = invoke("run", LAKE, "-n", "6", "-o", str(out), "--json")
    assert full.exit_code == 0, full.output
    assert json.loads(full.stdout)["episodes"] == 6
    assert [t.seed for t in load_trajectories(out)] == [0, 1, 2, 3, 4, 5]
    assert load_trajectories(out)[:2] == played  # the first session's episodes were kept, not replayed


def test_run_limit_over_several_ids_counts_the_whole_list(tmp_path: Path) -> None:
    result = invoke("run", LAKE, "envgym/Sokoban-v0", "-n", "3", "--limit", "4", "-o", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    played = load_trajectories(tmp_path / "r")
    assert [(t.env_id, t.seed) for t in played] == [(LAKE, 0), (LAKE, 1), (LAKE, 2), ("envgym/Sokoban-v0", 0)]


def test_run_limit_must_keep_groups_whole() -> None:
    result = invoke("run", LAKE, "-n", "4", "-g", "2", "--limit", "3")
    assert result.exit_code == 2 and "multiple of --group-size" in result.stderr


def test_bench_limit_plays_the_first_entries_and_the_full_command_completes(tmp_path: Path, suite_file: Path) -> None:
    out = tmp_path / "bench"
    first = invoke("bench", "run", str(suite_file), "--limit", "1", "-o", str(out), "--json")
    assert first.exit_code == 0, first.output
    results = json.loads(first.stdout)
    assert results["complete"] is False and results["missing"] == {"sums": 2}
    assert [e["episodes"] for e in results["entries"]] == [2, 0]
    full = invoke("bench", "run", str(suite_file), "-o", str(out), "--json")
    assert full.exit_code == 0, full.output
    assert json.loads(full.stdout)["complete"] is True
    assert [t.seed for t in load_trajectories(out / "entries" / "lake")] == [3, 4]


@pytest.mark.parametrize("command", ["run", "bench"])
def test_dash_o_is_out_and_an_old_agent_option_after_it_is_refused(
    tmp_path: Path, suite_file: Path, command: str
) -> None:
    args = ["run", LAKE, "-n", "1"] if command == "run" else ["bench", "run", str(suite_file)]
    result = invoke(*args, "-o", "temperature=0.7")
    assert result.exit_code == 2
    assert "looks like an agent option" in result.stderr and "-O" in result.stderr


def test_kwargs_apply_to_every_id_of_a_several_id_run(tmp_path: Path) -> None:
    ids = [LAKE, "envgym/Sokoban-v0"]
    result = invoke("run", *ids, "-n", "1", "-k", "difficulty=easy", "-o", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    played = load_trajectories(tmp_path / "r")
    assert sorted(t.env_id for t in played) == sorted(ids)
    assert all(t.env_kwargs == {"difficulty": "easy"} for t in played)
    assert all(t.task.get("difficulty") == "easy" for t in played)


SYSTEM = "You play {env_name}. Answer with one action."


@pytest.mark.parametrize("given", ["text", "file"])
def test_system_prompt_sets_the_prompt_of_run(tmp_path: Path, given: str) -> None:
    value = SYSTEM
    if given == "file":
        (tmp_path / "prompt.txt").write_text(SYSTEM, encoding="utf-8")
        value = f"@{tmp_path / 'prompt.txt'}"
    result = invoke("run", LAKE, "-n", "1", "--system-prompt", value, "-o", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["prompt"]["system_prompt"] == SYSTEM


def test_system_prompt_errors_are_usage_errors(tmp_path: Path) -> None:
    missing = invoke("run", LAKE, "-n", "1", "--system-prompt", f"@{tmp_path / 'nope.txt'}")
    assert missing.exit_code == 2 and "nope.txt" in missing.stderr
    bad = invoke("run", LAKE, "-n", "1", "--system-prompt", "You play {game}.")
    assert bad.exit_code == 2 and "placeholder" in bad.stderr


def test_system_prompt_of_bench_run_reaches_every_entry_and_is_part_of_the_run(
    tmp_path: Path, suite_file: Path
) -> None:
    out = tmp_path / "bench"
    result = invoke("bench", "run", str(suite_file), "--system-prompt", SYSTEM, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads((out / "bench.json").read_text())["system_prompt"] == SYSTEM
    for entry in ("lake", "sums"):
        assert json.loads((out / "entries" / entry / "config.json").read_text())["prompt"]["system_prompt"] == SYSTEM
    other = invoke("bench", "run", str(suite_file), "--system-prompt", "Play {env_name}.", "-o", str(out))
    assert other.exit_code == 2 and "system_prompt" in other.stderr


# ---------------------------------------------------------------- 5. the numbers the tables show
def test_a_resumed_run_reports_the_speed_of_the_episodes_it_played(tmp_path: Path) -> None:
    ids = [LAKE, "envgym/Sokoban-v0"]
    out = tmp_path / "r"
    assert invoke("run", *ids, "-n", "4", "-o", str(out)).exit_code == 0
    lines = (out / "episodes.jsonl").read_text().splitlines(keepends=True)
    (out / "episodes.jsonl").write_text("".join(lines[:5]))  # as if killed after 5 of 8 episodes
    resumed = invoke("run", *ids, "-n", "4", "-o", str(out), "--json")
    assert resumed.exit_code == 0, resumed.output
    kept = {json.loads(line)["index"] for line in lines[:5]}
    again = [t for t in load_trajectories(out) if t.index not in kept]
    assert len(again) == 3
    for summary in json.loads(resumed.stdout)["runs"]:
        new = [t for t in again if t.env_id == summary["env_id"]]
        assert summary["episodes"] == 4
        assert summary["steps_played"] == sum(t.num_turns for t in new)  # this session's only
        if new:
            assert summary["steps_per_s"] == pytest.approx(summary["steps_played"] / summary["wall_time_s"], rel=0.02)
        else:
            assert summary["steps_per_s"] is None  # nothing played: no speed, not 4 episodes over no time


def test_a_resumed_one_id_run_reports_the_speed_of_its_new_episodes(tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert invoke("run", "envgym/Sokoban-v0", "-n", "2", "-o", str(out)).exit_code == 0
    resumed = invoke("run", "envgym/Sokoban-v0", "-n", "4", "-o", str(out), "--json")
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads(resumed.stdout)
    records = load_trajectories(out)
    assert summary["steps"] == sum(t.num_turns for t in records)
    assert summary["steps_played"] == sum(t.num_turns for t in records if t.seed >= 2)
    # (both rounded: wall_time_s to 0.1 ms, steps/s to 0.1)
    assert summary["steps_per_s"] == pytest.approx(summary["steps_played"] / summary["wall_time_s"], rel=0.02)
    assert json.loads((out / "summary.json").read_text())["steps_per_s"] == summary["steps_per_s"]


def test_bench_overall_wall_time_is_the_elapsed_time_not_the_sum_of_entries(tmp_path: Path, suite_file: Path) -> None:
    out = tmp_path / "bench"
    first = invoke("bench", "run", str(suite_file), "--limit", "1", "-o", str(out), "--json")
    assert first.exit_code == 0, first.output
    spent = json.loads((out / "bench.json").read_text())["wall_time_s"]
    assert json.loads(first.stdout)["overall"]["wall_time_s"] == spent > 0
    full = invoke("bench", "run", str(suite_file), "-o", str(out), "--json")
    results = json.loads(full.stdout)
    total = json.loads((out / "bench.json").read_text())["wall_time_s"]
    assert results["overall"]["wall_time_s"] == total > spent  # the sessions' elapsed times add up
    entries = [e["wall_time_s"] for e in results["entries"]]
    assert results["overall"]["wall_time_s"] != pytest.approx(sum(entries))
    summary = json.loads((out / "entries" / "sums" / "summary.json").read_text())
    assert summary["steps_played"] == sum(t.num_turns for t in load_trajectories(out / "entries" / "sums"))


# ---------------------------------------------------------------- 6. hints that name flags the command has
def test_run_on_an_id_registered_twice_does_not_point_to_a_flag_it_lacks() -> None:
    result = invoke("run", "envgym/Coop-GiftExchange-v0", "-n", "1")
    assert result.exit_code == 0, result.output
    note = next(line for line in result.stderr.splitlines() if line.startswith("note:"))
    assert "--kind to choose" not in note
    assert "`envgym run` plays its single-agent registration" in note
    assert "envgym play --kind parallel envgym/Coop-GiftExchange-v0" in note
    assert "--kind" not in invoke("run", "--help").output  # so the note must not ask for it
    played = runner.invoke(app, ["play", "--kind", "parallel", "envgym/Coop-GiftExchange-v0", "--help"])
    assert played.exit_code == 0  # the command the note names takes that flag


def test_summaries_leave_episodes_without_success_out_of_the_rate() -> None:
    def episode(seed: int, success: bool, defined: bool | None) -> Trajectory:
        t = Trajectory(episode_id=str(seed), index=seed, env_id="x", seed=seed, agent="a", success=success)
        t.termination_reason = "success" if success else "max_turns"
        t.task = {} if defined is None else {"success_defined": defined}
        return t

    mixed = summarize([episode(0, True, None), episode(1, False, True), episode(2, False, False)], 1.0)
    assert mixed["success_rate"] == 0.5 and mixed["success_defined"] is True
    games = summarize([episode(0, False, False), episode(1, False, False)], 1.0)
    assert games["success_rate"] is None and games["success_defined"] is False


def test_a_game_without_success_shows_it_as_not_defined_not_zero() -> None:
    game = "envgym/Coop-GiftExchange-v0"
    table = invoke("run", game, "-n", "2")
    assert table.exit_code == 0, table.output
    row = next(line for line in table.stdout.splitlines() if "success rate" in line)
    assert "—" in row and "0.000" not in row
    summary = json.loads(invoke("run", game, "-n", "2", "--json").stdout)
    assert summary["success_rate"] is None and summary["success_defined"] is False
    assert summary["scored"] == 2  # scored by its returns all the same
    race = json.loads(invoke("run", "envgym/Coop-RecoveryRace-v0", "-n", "1", "--json").stdout)
    assert race["success_defined"] is True and race["success_rate"] in (0.0, 1.0)  # this game can be won


def test_bench_table_shows_undefined_success_as_a_dash(tmp_path: Path) -> None:
    suite = tmp_path / "games-v1.yaml"
    suite.write_text(
        "name: games\nversion: 1\ndescription: one game without success, one with\n"
        "defaults: {episodes: 1, seed: 0, split: test, max_turns: 4, trials: 1}\n"
        "metrics: [success_rate, mean_reward]\n"
        "entries:\n  - {name: gift, env: envgym/Coop-GiftExchange-v0}\n  - {name: lake, env: envgym/FrozenLake-v0}\n",
        encoding="utf-8",
    )
    result = invoke("bench", "run", str(suite), "-a", "random", "-o", str(tmp_path / "b"))
    assert result.exit_code == 0, result.output
    gift = next(line for line in result.stdout.splitlines() if line.strip("│ ").startswith("gift"))
    assert "—" in gift and "0.000" not in gift
    report = (tmp_path / "b" / "results.json").read_text()
    assert json.loads(report)["entries"][0]["success_defined"] is False
