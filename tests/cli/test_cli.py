"""The ``envgym`` command line, driven through Typer's CliRunner (stdin fed as text).

Most tests use the toy ids of ``cli_toy_envs`` (registered for this module only) so that they
test the CLI's mechanics with known numbers; ``test_real_ids`` runs the commands over the
registered game ids.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import cli_toy_envs as toys

import envgym
from envgym.cli import app
from envgym.cli._common import parse_kwargs
from envgym.cli._play import resolve_input
from envgym.cli.agents import AGENT_KINDS, parse_agent_spec

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _toys() -> Iterator[None]:
    toys.register_toys()
    yield
    toys.unregister_toys()


def invoke(*args: str, input: str | None = None) -> Any:
    return runner.invoke(app, list(args), input=input)


def as_json(result: Any) -> Any:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def targets(env_id: str, seeds: range, **kwargs: Any) -> list[int]:
    """The targets the toy line env draws for ``seeds`` (what an oracle needs in turns)."""
    env = envgym.make(env_id, **kwargs)
    found = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        found.append(int(re.search(r"Target: (\d+)\.", obs)[1]))  # type: ignore[index]
    env.close()
    return found


# ---------------------------------------------------------------- global options
def test_help_and_version() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("list", "info", "play", "check", "run", "run-all"):
        assert command in result.stdout
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"envgym {envgym.__version__}"


def test_unknown_command_is_a_usage_error() -> None:
    assert invoke("lst").exit_code == 2


def test_each_subcommand_alone_is_the_full_apps() -> None:
    """``main`` builds the app with only the subcommand it runs: every subcommand's help (and so
    its options and arguments) is the full app's, and the full app has no command outside COMMANDS."""
    from envgym.cli import COMMANDS, build_app

    full = [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]
    assert sorted(full) == sorted(COMMANDS)
    for name in COMMANDS:
        alone = runner.invoke(build_app([name]), [name, "--help"])
        assert alone.exit_code == 0 and alone.stdout == invoke(name, "--help").stdout, name
    assert runner.invoke(build_app([]), ["--version"]).stdout == invoke("--version").stdout


def test_main_imports_only_the_subcommand_it_runs() -> None:
    import subprocess

    script = (
        "import json, sys\n"
        "from envgym.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit as stop:\n"
        "    code = stop.code\n"
        "print('\\n' + json.dumps([code, sorted(m for m in sys.modules if m.startswith('envgym.cli._'))]))\n"
    )

    def run(*args: str) -> tuple[int, list[str]]:
        proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr  # main's exit is caught: the script itself ends normally
        code, modules = json.loads(proc.stdout.strip().rsplit("\n", 1)[-1])
        return code, modules

    code, modules = run("list", "--family", "games", "--json")
    assert code == 0 and "envgym.cli._catalog" in modules
    assert not {"envgym.cli._train", "envgym.cli._bench", "envgym.cli._leaderboard", "envgym.cli._run"} & set(modules)
    code, modules = run("--version")
    assert code == 0 and modules == []
    code, modules = run("lst")  # a misspelt command: the full app, to suggest among them all
    assert code == 2 and {"envgym.cli._train", "envgym.cli._catalog"} <= set(modules)


# ---------------------------------------------------------------- parsing helpers
def test_parse_kwargs_json_values_else_strings() -> None:
    parsed = parse_kwargs(["size=6", "slippery=true", "difficulty=hard", "xs=[1, 2]", "none=null", 'text="6"', "e="])
    assert parsed == {
        "size": 6,
        "slippery": True,
        "difficulty": "hard",
        "xs": [1, 2],
        "none": None,
        "text": "6",
        "e": "",
    }
    assert isinstance(parsed["size"], int)


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["size"], "expected key=value"),
        (["=6"], "must be a Python identifier"),
        (["1x=2"], "must be a Python identifier"),
        (["a=1", "a=2"], "given twice"),
    ],
)
def test_parse_kwargs_rejects_bad_items(items: list[str], message: str) -> None:
    import typer

    with pytest.raises(typer.BadParameter, match=message):
        parse_kwargs(items)


def test_resolve_input_numbers_commands_and_text() -> None:
    words = ["up", "down", "left"]
    assert resolve_input("2", words).action == "down"
    assert resolve_input("#3", words).action == "left"
    assert resolve_input(" push up ", words).action == "push up"
    assert "no action number 4" in (resolve_input("4", words).message or "")
    assert "no action number 0" in (resolve_input("#0", words).message or "")
    # Numeric actions: a bare number is the action itself, #N still picks by position.
    cells = ["3", "5", "7"]
    assert resolve_input("5", cells).action == "5"
    assert resolve_input("1", cells).action == "1"  # sent as typed: the env judges it
    assert resolve_input("#1", cells).action == "3"
    # No finite action list: numbers are text; #N explains.
    assert resolve_input("12", None).action == "12"
    assert "no numbered action list" in (resolve_input("#2", None).message or "")
    assert resolve_input(":q", words).command == "quit"
    assert resolve_input(":HELP", words).command == "help"
    assert resolve_input(":actions", words).command == "actions"
    unknown = resolve_input(":quti", words).message or ""
    assert "Unknown command ':quti'" in unknown and "':quit'" in unknown
    assert resolve_input("   ", words).message


def test_agent_specs() -> None:
    from envgym.agents.oracle import OracleAgent

    from envgym.rollout import RandomAgent

    assert isinstance(parse_agent_spec("random", seed=3), RandomAgent)
    assert isinstance(parse_agent_spec("random:7"), RandomAgent)
    assert isinstance(parse_agent_spec(" Oracle "), OracleAgent)
    import typer

    with pytest.raises(typer.BadParameter, match=r"Did you mean 'oracle'\? Known agents: random\[:SEED\], oracle"):
        parse_agent_spec("orcale")
    with pytest.raises(typer.BadParameter, match="integer seed"):
        parse_agent_spec("random:abc")
    with pytest.raises(typer.BadParameter, match="takes no argument"):
        parse_agent_spec("oracle:x")
    with pytest.raises(typer.BadParameter, match="needs an argument: openai:MODEL@URL"):
        parse_agent_spec("openai")
    assert set(AGENT_KINDS) == {"random", "oracle", "hf", "openai", "human"}


# ---------------------------------------------------------------- list
def test_list_json_and_filters() -> None:
    rows = as_json(invoke("list", "--json", "--family", "clitoy"))
    by_id = {(r["id"], r["kind"]): r for r in rows}
    assert set(by_id) == {
        (toys.LINE_ID, "single"),
        (toys.LINE_LONG_ID, "single"),
        (toys.SEEDLESS_ID, "single"),
        (toys.NIM_ID, "aec"),
    }
    assert by_id[(toys.LINE_LONG_ID, "single")]["variant_of"] == toys.LINE_ID
    assert by_id[(toys.LINE_LONG_ID, "single")]["kwargs"] == {"length": 9}
    base_only = as_json(invoke("list", "--json", "--family", "clitoy", "--no-variants"))
    assert toys.LINE_LONG_ID not in {r["id"] for r in base_only}
    assert len(base_only) == 3
    aec_only = as_json(invoke("list", "--json", "--kind", "aec", "--family", "clitoy"))
    assert [r["id"] for r in aec_only] == [toys.NIM_ID]
    everything = as_json(invoke("list", "--json"))
    assert len(everything) == len(envgym.list_envs())


def test_list_tables_grouped_by_family() -> None:
    result = invoke("list")
    assert result.exit_code == 0
    assert "clitoy (4)" in result.stdout
    for env_id in (toys.LINE_ID, toys.LINE_LONG_ID, toys.NIM_ID):
        assert env_id in result.stdout
    line = next(line for line in result.stdout.splitlines() if toys.LINE_LONG_ID in line)
    assert "single" in line and toys.LINE_ID in line.split(toys.LINE_LONG_ID, 1)[1]
    assert result.stderr == ""


def test_list_unknown_family_and_kind() -> None:
    result = invoke("list", "--family", "clitoi")
    assert result.exit_code == 2
    assert "unknown family 'clitoi'. Did you mean 'clitoy'?" in result.stderr
    result = invoke("list", "--kind", "singel")
    assert result.exit_code == 2
    assert "Did you mean 'single'?" in result.stderr


# ---------------------------------------------------------------- info
def test_info_json_single() -> None:
    (info,) = as_json(invoke("info", toys.LINE_LONG_ID, "--json"))
    assert info["id"] == toys.LINE_LONG_ID
    assert info["kind"] == "single"
    assert info["variant_of"] == toys.LINE_ID
    assert info["kwargs"] == {"length": 9}
    assert info["env_card"].startswith("Walk from 0 to the target")
    assert info["reward_components"] == ["success_reward", "invalid_action_reward", "step_cost_reward"]
    assert info["max_turns"] == 20 and info["default_max_turns"] == 20
    assert info["splits"] == ["train", "test"]
    args = {a["name"]: a for a in info["arguments"]}
    assert args["length"]["default"] == 5 and args["max_turns"]["default"] is None
    assert [v["id"] for v in info["variants"]] == [toys.LINE_ID, toys.LINE_LONG_ID]
    assert "Text" in info["observation_space"] and info["agents"] is None


def test_info_text_and_aec() -> None:
    result = invoke("info", toys.LINE_ID)
    assert result.exit_code == 0
    for text in ("Walk from 0 to the target", "reward components", "success_reward", "variants", toys.LINE_LONG_ID):
        assert text in result.stdout
    (info,) = as_json(invoke("info", toys.NIM_ID, "--json"))
    assert info["kind"] == "aec"
    assert info["agents"] == ["player_0", "player_1"]
    assert set(info["action_space"]) == {"player_0", "player_1"}


def test_info_unknown_id_suggests() -> None:
    result = invoke("info", "clitoy/Lien-v0")
    assert result.exit_code == 2
    assert "Did you mean 'clitoy/Line-v0'?" in result.stderr
    assert result.stdout == ""
    result = invoke("info", "clitoy/Line-v7")
    assert result.exit_code == 2
    assert "registered versions: clitoy/Line-v0" in result.stderr


# ---------------------------------------------------------------- play
def test_play_quit_help_actions_and_numbers() -> None:
    result = invoke("play", toys.LINE_ID, "--seed", "4", input="right\n:help\n:actions\n#1\n1\n:obs\n:q\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "Actions: 1 right" in out and "Actions: 1 left  2 right" in out
    assert ":actions" in out and "quit" in out  # the help text
    assert out.count("reward +0.000") == 3  # right, #1 (left), 1 (right)
    assert "Quit." in out
    assert "3 turn(s), stopped." in out
    assert re.search(r"player\s+│\s+\+0\.000\s+│\s+0\s+│", out)


def test_play_to_success_prints_rewards_and_summary() -> None:
    (target,) = targets(toys.LINE_ID, range(9, 10))
    result = invoke("play", toys.LINE_ID, "--seed", "9", input="right\n" * target)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert f"Position: 0. Target: {target}." in out
    assert "reward +1.000  (success_reward +1.000)" in out
    assert "Episode solved." in out
    assert f"{target} turn(s), finished, success (success)." in out


def test_play_invalid_action_and_eof() -> None:
    result = invoke("play", toys.LINE_ID, "--seed", "1", input="jump\nleft\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.count("[invalid action]") == 2
    assert "reward -0.100  (invalid_action_reward -0.100)" in out
    assert "End of input" in out
    assert re.search(r"player\s+│\s+-0\.200\s+│\s+2\s+│\s+invalid_action_reward -0\.200", out)
    assert "2 turn(s), stopped." in out


def test_play_empty_input_ends_cleanly() -> None:
    result = invoke("play", toys.LINE_ID, input="")
    assert result.exit_code == 0
    assert "End of input" in result.stdout and "0 turn(s), stopped." in result.stdout


def test_play_kwargs_are_parsed_and_validated() -> None:
    result = invoke("play", toys.LINE_ID, "--seed", "2", "-k", "max_turns=1", input="right\n")
    assert result.exit_code == 0
    # max_turns=1 was parsed as an int: the first step truncates unless it reached the target.
    assert "1 turn(s), finished" in result.stdout
    result = invoke("play", toys.LINE_ID, "--kwargs", "length")
    assert result.exit_code == 2 and "expected key=value" in result.stderr
    result = invoke("play", toys.LINE_ID, "--kwargs", "lenght=3")
    assert result.exit_code == 2
    assert "unknown keyword argument(s) 'lenght'. Did you mean 'length'?" in result.stderr
    result = invoke("play", toys.LINE_ID, "--kwargs", "length=1")
    assert result.exit_code == 2 and "length must be an integer >= 2, got 1." in result.stderr
    result = invoke("play", "clitoy/Lin-v0")
    assert result.exit_code == 2 and "Did you mean 'clitoy/Line-v0'?" in result.stderr


def test_play_aec_hot_seat_and_seat() -> None:
    # stones=4: player_0 takes 1, player_1 takes 1, player_0 takes 2 (the last): player_0 wins.
    result = invoke("play", toys.NIM_ID, "-k", "stones=4", input="take 1\n1\n#2\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "--- player_0 to play ---" in out and "--- player_1 to play ---" in out
    assert "rewards player_0 +1.000, player_1 -1.000" in out
    assert re.search(r"player_0\s+│\s+\+1\.000", out) and re.search(r"player_1\s+│\s+-1\.000", out)
    assert "3 turn(s), finished." in out
    result = invoke("play", toys.NIM_ID, "--seed", "3", "--seat", "player_1", input="1\n" * 10)
    assert result.exit_code == 0, result.stderr
    assert "player_0 plays 'take" in result.stdout
    assert "--- player_0 to play ---" not in result.stdout
    assert "Game over." in result.stdout
    result = invoke("play", toys.NIM_ID, "--seat", "player_2")
    assert result.exit_code == 2 and "Did you mean 'player_0'" in result.stderr.replace("one of ", "")
    result = invoke("play", toys.LINE_ID, "--seat", "player_0")
    assert result.exit_code == 2 and "single player" in result.stderr


def test_play_aec_eof_midgame() -> None:
    result = invoke("play", toys.NIM_ID, "-k", "stones=5", input="take 2\n")
    assert result.exit_code == 0
    assert "End of input" in result.stdout and "1 turn(s), stopped." in result.stdout


# ---------------------------------------------------------------- check
def test_check_passes_and_fails() -> None:
    doc = as_json(invoke("check", toys.LINE_ID, "--json"))
    assert doc["passed"] == 1 and doc["failed"] == 0
    (record,) = doc["results"]
    assert record["passed"] and record["error"] is None
    assert {"gymnasium.check_env", "seeded_determinism", "bad_input_fuzz", "max_turns"} <= set(record["checks"])
    assert record["steps"] > 0
    result = invoke("check", toys.SEEDLESS_ID, "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["failed"] == 1 and "EnvContractError" in doc["results"][0]["error"]
    result = invoke("check", toys.SEEDLESS_ID)
    assert result.exit_code == 1
    assert "FAIL" in result.stdout and "0 passed, 1 failed." in result.stdout


def test_check_all_with_filters() -> None:
    result = invoke("check", "all", "--family", "clitoy", "--kind", "single", "--json")
    assert result.exit_code == 1  # the seedless env fails
    doc = json.loads(result.stdout)
    outcome = {r["id"]: r["passed"] for r in doc["results"]}
    assert outcome == {toys.LINE_ID: True, toys.LINE_LONG_ID: True, toys.SEEDLESS_ID: False}
    result = invoke("check", "all", "--family", "clitoy", "--kind", "single", "--no-variants", "--json")
    assert {r["id"] for r in json.loads(result.stdout)["results"]} == {toys.LINE_ID, toys.SEEDLESS_ID}
    result = invoke("check", "nope/Nothing-v0")
    assert result.exit_code == 2 and "unknown" in result.stderr
    result = invoke("check", "all", "--family", "clitoys")
    assert result.exit_code == 2 and "Did you mean 'clitoy'?" in result.stderr


# ---------------------------------------------------------------- run
def test_run_oracle_json_numbers() -> None:
    doc = as_json(invoke("run", toys.LINE_ID, "--agent", "oracle", "--episodes", "4", "--seed", "10", "--json"))
    expected = targets(toys.LINE_ID, range(10, 14))
    assert doc["episodes"] == 4 and doc["agent"] == "oracle" and doc["seed"] == 10
    assert doc["success_rate"] == 1.0
    assert doc["mean_turns"] == pytest.approx(sum(expected) / 4)
    assert doc["steps"] == sum(expected)
    assert doc["mean_return"] == pytest.approx(1.0)
    assert doc["mean_reward_components"] == {
        "success_reward": 1.0,
        "invalid_action_reward": 0.0,
        "step_cost_reward": 0.0,
    }
    assert doc["termination_reasons"] == {"success": 4}
    assert doc["invalid_actions"] == 0 and doc["wall_time_s"] >= 0
    assert "per_episode" not in doc


def test_run_random_with_kwargs_and_per_episode() -> None:
    args = ("run", toys.LINE_ID, "-a", "random", "-n", "6", "-s", "3", "-k", "length=2", "--per-episode", "--json")
    doc = as_json(invoke(*args))
    assert doc["kwargs"] == {"length": 2}
    episodes = doc["per_episode"]
    assert [e["seed"] for e in episodes] == list(range(3, 9))
    # length=2: the target is always 2, and random play over admissible actions never errs.
    assert all(e["invalid_actions"] == 0 for e in episodes)
    assert doc["success_rate"] == pytest.approx(sum(e["success"] for e in episodes) / 6)
    assert doc["mean_turns"] == pytest.approx(sum(e["num_turns"] for e in episodes) / 6)
    assert all(e["num_turns"] >= 2 for e in episodes if e["success"])
    # Same seed, same results.
    again = as_json(invoke(*args))["per_episode"]
    assert [(e["num_turns"], e["total_reward"]) for e in again] == [(e["num_turns"], e["total_reward"]) for e in episodes]


def test_run_table_output() -> None:
    result = invoke("run", toys.LINE_ID, "--agent", "oracle", "-n", "2")
    assert result.exit_code == 0, result.stderr
    for text in ("agent=oracle", "success rate", "1.000", "mean turns", "mean success_reward", "wall time (s)"):
        assert text in result.stdout


def test_run_usage_errors() -> None:
    result = invoke("run", toys.LINE_ID, "--agent", "orcale")
    assert result.exit_code == 2
    assert (
        "Did you mean 'oracle'? Known agents: random[:SEED], oracle, hf[:MODEL], openai:MODEL@URL, human, "
        "module:Class | path/to/file.py:Class." in result.stderr
    )
    result = invoke("run", toys.LINE_ID, "--agent", "openai:gpt-4o")  # no @URL
    assert result.exit_code == 2 and "http" in result.stderr and "@" in result.stderr
    result = invoke("run", toys.LINE_ID, "--agent", "random", "--backend", "docker")
    assert result.exit_code == 2 and "backend must be one of 'inproc', 'process', 'ray'" in result.stderr
    result = invoke("run", toys.LINE_ID, "--episodes", "0")
    assert result.exit_code == 2 and "--episodes must be at least 1, got 0." in result.stderr
    result = invoke("run", toys.NIM_ID)
    assert result.exit_code == 2 and "multi-agent" in result.stderr
    result = invoke("run", toys.LINE_ID, "-k", "lenght=3")
    assert result.exit_code == 2 and "Did you mean 'length'?" in result.stderr
    result = invoke("run", "clitoy/Lne-v0")
    assert result.exit_code == 2 and "Did you mean 'clitoy/Line-v0'?" in result.stderr
    result = invoke("run", "all", "-k", "a=1")
    assert result.exit_code == 2


def test_run_oracle_without_solver_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, toys.SOLVER_MODULE, None)  # type: ignore[arg-type]
    result = invoke("run", toys.LINE_ID, "--agent", "oracle", "-n", "1")
    assert result.exit_code == 1
    assert "no oracle solver for 'clitoy/Line-v0'" in result.stderr


# ---------------------------------------------------------------- run-all
def test_run_all_json() -> None:
    doc = as_json(invoke("run-all", "--family", "clitoy", "--episodes", "3", "--json"))
    rows = {(r["env_id"], r["agent"]): r for r in doc["results"]}
    assert set(rows) == {(e, a) for e in (toys.LINE_ID, toys.SEEDLESS_ID) for a in ("oracle", "random")}
    assert doc["errors"] == 0 and doc["agents"] == ["oracle", "random"]
    oracle = rows[(toys.LINE_ID, "oracle")]
    assert oracle["success_rate"] == 1.0 and oracle["episodes"] == 3
    assert oracle["mean_turns"] == pytest.approx(sum(targets(toys.LINE_ID, range(3))) / 3)
    assert rows[(toys.LINE_ID, "random")]["mean_turns"] >= oracle["mean_turns"]
    with_variants = as_json(invoke("run-all", "-f", "clitoy", "-n", "1", "-a", "random", "--variants", "--json"))
    assert {r["env_id"] for r in with_variants["results"]} == {toys.LINE_ID, toys.LINE_LONG_ID, toys.SEEDLESS_ID}
    assert {r["agent"] for r in with_variants["results"]} == {"random"}


def test_run_all_table_skips_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke("run-all", "--family", "clitoy", "-n", "2")
    assert result.exit_code == 0, result.stderr
    assert "4 run(s), 0 error(s), 0 skipped" in result.stdout
    # No solver for the env: the oracle rows are skipped with the reason, and the run still passes.
    monkeypatch.setitem(sys.modules, toys.SOLVER_MODULE, None)  # type: ignore[arg-type]
    result = invoke("run-all", "--family", "clitoy", "-n", "2", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["errors"], doc["skipped"]) == (0, 2)
    skipped = [r for r in doc["results"] if r.get("skipped")]
    assert {r["env_id"] for r in skipped} == {toys.LINE_ID, toys.SEEDLESS_ID}
    assert all("no oracle solver" in r["skipped"] and r["agent"] == "oracle" for r in skipped)
    # An env that crashes is an error row; the others still run and the exit code is 1.
    import envgym.cli._run as run_module

    real_run_one = run_module.run_one

    def flaky(env_id: str, *args: object, **kwargs: object) -> object:
        if env_id == toys.SEEDLESS_ID:
            raise RuntimeError("boom")
        return real_run_one(env_id, *args, **kwargs)

    monkeypatch.setattr(run_module, "run_one", flaky)
    result = invoke("run-all", "--family", "clitoy", "-n", "2", "--json", "--agent", "random")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["errors"] == 1
    assert [r["env_id"] for r in doc["results"] if r["error"]] == [toys.SEEDLESS_ID]
    assert [r["episodes"] for r in doc["results"] if not r["error"]] == [2]
    result = invoke("run-all", "--agent", "nobody")
    assert result.exit_code == 2 and "Known agents" in result.stderr


def test_run_all_crash_message_with_markup_prints_literally(monkeypatch: pytest.MonkeyPatch) -> None:
    # An exception text such as "[/]" or "[red]" must not be read as rich markup (MarkupError).
    import envgym.cli._run as run_module

    def crash(env_id: str, *args: object, **kwargs: object) -> object:
        raise RuntimeError("bad [/] state [red]x")

    monkeypatch.setattr(run_module, "run_one", crash)
    result = invoke("run-all", "--family", "clitoy", "-n", "1", "--agent", "random")
    assert result.exit_code == 1, result.stderr
    assert "crashed: RuntimeError: bad [/] state [red]x" in result.stderr
    assert "2 run(s), 2 error(s)" in result.stdout


def test_list_family_name_with_brackets_prints_literally() -> None:
    from envgym import registration

    spec = envgym.EnvSpec(
        id="clitoy/Bracket-v0", entry_point="cli_toy_envs:LineEnv", family="odd[/]family", summary="[red]x"
    )
    envgym.register(spec)
    try:
        result = invoke("list", "--family", "odd[/]family")
        assert result.exit_code == 0, result.stderr
        assert "odd[/]family (1)" in result.stdout and "[red]x" in result.stdout
    finally:
        registration._single.pop(spec.id, None)
        import gymnasium

        gymnasium.registry.pop(spec.id, None)


def test_run_truncated_by_max_episode_steps_reports_max_turns() -> None:
    # gymnasium.make(..., max_episode_steps=N) truncates from outside (TimeLimit): the env's
    # info["termination_reason"] is None there, and the runner must still report max_turns.
    doc = as_json(invoke("run", toys.LINE_LONG_ID, "-n", "6", "-k", "max_episode_steps=1", "--json"))
    assert doc["termination_reasons"] == {"max_turns": 6}
    assert doc["mean_turns"] == 1.0


# ---------------------------------------------------------------- the real environments
def test_real_ids() -> None:
    """The commands over the registered game ids (every base single-agent id, once)."""
    rows = as_json(invoke("list", "--json", "--family", "games"))
    base = sorted({r["id"] for r in rows if r["kind"] == "single" and r["variant_of"] is None})
    assert "envgym/Sokoban-v0" in base and len(base) >= 7
    for env_id in base:
        (info,) = as_json(invoke("info", env_id, "--json", "--kind", "single"))
        assert info["reward_components"] and info["max_turns"] >= 1
        doc = as_json(invoke("run", env_id, "--agent", "random", "-n", "2", "--json"))
        assert doc["episodes"] == 2 and doc["steps"] >= 2
        result = invoke("play", env_id, "--seed", "0", input="1\n:q\n")
        assert result.exit_code == 0 and "1 turn(s), stopped." in result.stdout, (env_id, result.stderr)
    doc = as_json(invoke("run", "envgym/Sokoban-v0", "--agent", "oracle", "-n", "3", "--json"))
    assert doc["success_rate"] == 1.0
    assert as_json(invoke("check", "envgym/Sokoban-v0", "--json"))["failed"] == 0
    # An id registered twice: the note on stderr, and --kind picks the multi-agent one.
    result = invoke("info", "envgym/TicTacToe-v0", "--json")
    assert {i["kind"] for i in json.loads(result.stdout)} == {"single", "aec"}
    (aec,) = as_json(invoke("info", "envgym/TicTacToe-v0", "--kind", "aec", "--json"))
    assert len(aec["agents"]) == 2
