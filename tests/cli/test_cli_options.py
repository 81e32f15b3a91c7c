"""The ``envgym`` options over the whole command tree (``envgym.cli._options``).

One meaning per short flag in every command, help on every option, one help per long name
(or a stated reason), and flags that set a config field showing that field's documentation.
The tree is walked from ``typer.main.get_command(app)``, so a new command is checked as it lands
(duck-typed: Typer ships its own copy of click, so ``click.Group`` is not its base class).
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from envgym.cli import app
from envgym.cli._options import (
    AT_FILE,
    BENCH_RUN_FLAGS,
    KEY_VALUE,
    PROMPT_FLAGS,
    RUN_FLAGS,
    FieldFlags,
    Flag,
    config_help,
    with_field_flags,
)
from envgym.cli._train import TRAIN_FLAGS
from envgym.rollout import PromptConfig, RunConfig
from envgym.rollout.config import DEFAULT_EPISODES
from envgym.trainer.config import TrainConfig, field_help

#: Every short flag and its one long name. A new short flag is a choice made on purpose: add it
#: here and to the README's list ("Command line").
SHORT_FLAGS = {
    "-a": "--agent",
    "-b": "--backend",
    "-c": "--config",
    "-e": "--env",
    "-f": "--family",
    "-g": "--group-size",
    "-h": "--help",
    "-k": "--kwargs",
    "-m": "--model",
    "-n": "--episodes",
    "-o": "--out",
    "-O": "--agent-option",
    "-s": "--seed",
    "-t": "--trials",
    "-u": "--updates",
    "-w": "--workers",
}

#: Long names whose help differs between commands, and why.
DIFFERENT_HELP = {
    "--out": "each command writes something else there: a run folder, a bench run, a report, a bundle, a site",
    "--seed": "run/run-all seed RunConfig's first group, play its one episode, train a training run (TrainConfig)",
    "--workers": "run/bench run: environment workers (RunConfig); leaderboard: processes replaying a bundle",
    "--kwargs": "train shows TrainConfig.env_kwargs, the rollout commands RunConfig.env_kwargs",
    "--group-size": "train shows TrainConfig.group_size, run RunConfig.group_size",
    "--max-turns": "train shows TrainConfig.max_turns, run RunConfig.max_turns",
    "--limit": "run plays the first N episodes, bench run the first N entries of its suite",
    "--reason": "leaderboard delete and rename each say which action the audit keeps the reason for",
    "--url": "run/bench run: the envgym serve server of --backend remote (RunConfig); leaderboard: its server",
    "--step-timeout": "run/bench run: a worker's call limit (RunConfig); serve: the server's limit per env call",
}

#: Flags of ``run`` (and ``bench run``) -> the RunConfig / PromptConfig field they set.
RUN_FIELDS = {
    "--agent": (RunConfig, "agent"),
    "--agent-option": (RunConfig, "agent_options"),
    "--agent-for": (RunConfig, "agents"),
    "--episodes": (RunConfig, "episodes"),
    "--seed": (RunConfig, "seed"),
    "--kwargs": (RunConfig, "env_kwargs"),
    "--num-envs": (RunConfig, "num_envs"),
    "--workers": (RunConfig, "workers"),
    "--backend": (RunConfig, "backend"),
    "--url": (RunConfig, "url"),
    "--mode": (RunConfig, "mode"),
    "--group-size": (RunConfig, "group_size"),
    "--max-turns": (RunConfig, "max_turns"),
    "--max-retries": (RunConfig, "max_retries"),
    "--episode-timeout": (RunConfig, "episode_timeout_s"),
    "--step-timeout": (RunConfig, "step_timeout_s"),
    "--agent-timeout": (RunConfig, "agent_timeout_s"),
    "--history": (PromptConfig, "history"),
    "--last-k": (PromptConfig, "last_k"),
    "--token-budget": (PromptConfig, "token_budget"),
    "--reply-tokens": (PromptConfig, "max_new_tokens"),
    "--stop-at-action": (PromptConfig, "stop_at_action"),
    "--goal-reminder": (PromptConfig, "goal_reminder"),
    "--system-prompt": (PromptConfig, "system_prompt"),
}
#: Flags of ``train`` -> the TrainConfig field they set.
TRAIN_FIELDS = {
    "--env": "env_id",
    "--algo": "algo",
    "--model": "model",
    "--updates": "updates",
    "--group-size": "group_size",
    "--groups": "groups_per_update",
    "--lr": "lr",
    "--max-turns": "max_turns",
    "--max-new-tokens": "max_new_tokens",
    "--eval-every": "eval_every",
    "--seed": "seed",
    "--device": "device",
    "--out": "out",
    "--task-pool": "task_pool",
    "--rollout-backend": "rollout_backend",
    "--rollout-workers": "rollout_workers",
    "--rollout-url": "rollout_url",
    "--kwargs": "env_kwargs",
}
#: key=value flags: the field's documentation, then how to write the values.
KEY_VALUE_FLAGS = {"--agent-option", "--kwargs", "--agent-for"}


@dataclasses.dataclass(frozen=True)
class Opt:
    command: str
    long: str
    shorts: tuple[str, ...]
    help: str


def _commands(command: Any, name: str, parent: typer.Context | None) -> Iterator[tuple[str, typer.Context]]:
    ctx = typer.Context(command, info_name=name, parent=parent, **(command.context_settings or {}))
    yield ctx.command_path, ctx
    for sub_name, sub in sorted(getattr(command, "commands", {}).items()):  # a group's subcommands
        yield from _commands(sub, sub_name, ctx)


COMMANDS = dict(_commands(typer.main.get_command(app), "envgym", None))


def _options() -> list[Opt]:
    found = []
    for path, ctx in COMMANDS.items():
        for param in ctx.command.get_params(ctx):  # the help option included
            if param.param_type_name == "option":
                names = [*param.opts, *param.secondary_opts]
                long = next(n for n in param.opts if n.startswith("--"))
                shorts = tuple(n for n in names if not n.startswith("--"))
                found.append(Opt(path, long, shorts, param.help or ""))
    return found


OPTIONS = _options()


def _by_command(path: str) -> dict[str, Opt]:
    return {o.long: o for o in OPTIONS if o.command == path}


def _field_doc(config: type, name: str) -> str:
    """The field's ``metadata["help"]`` as the Markdown-rendered CLI needs it (``<`` escaped)."""
    (f,) = [f for f in dataclasses.fields(config) if f.name == name]
    return f.metadata["help"].replace("<", "\\<")


def test_the_walk_sees_every_command() -> None:
    for path in ("envgym", "envgym run", "envgym run-all", "envgym bench run", "envgym train", "envgym leaderboard"):
        assert path in COMMANDS
    assert "envgym leaderboard export" in COMMANDS and "envgym play" in COMMANDS
    assert len(OPTIONS) > 90


def test_every_short_flag_has_one_meaning() -> None:
    meanings: dict[str, set[str]] = defaultdict(set)
    where: dict[str, list[str]] = defaultdict(list)
    for o in OPTIONS:
        for short in o.shorts:
            meanings[short].add(o.long)
            where[short].append(f"{o.command} {o.long}")
    clashes = {s: sorted(where[s]) for s, longs in meanings.items() if len(longs) > 1}
    assert not clashes, f"short flags with several meanings: {clashes}"
    assert {s: longs.pop() for s, longs in meanings.items()} == SHORT_FLAGS


def test_every_option_has_help() -> None:
    missing = [f"{o.command} {o.long}" for o in OPTIONS if not o.help.strip()]
    assert not missing, f"options without help: {missing}"


def test_one_help_per_long_name() -> None:
    helps: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for o in OPTIONS:
        helps[o.long][o.help].append(o.command)
    differing = {long: dict(texts) for long, texts in helps.items() if len(texts) > 1}
    unexplained = {long: texts for long, texts in differing.items() if long not in DIFFERENT_HELP}
    assert not unexplained, f"one long name, several helps (define it once in envgym/cli/_options.py): {unexplained}"
    stale = sorted(set(DIFFERENT_HELP) - set(differing))
    assert not stale, f"DIFFERENT_HELP names that now share one help; drop them: {stale}"


def test_shared_options_are_shared() -> None:
    """The options several commands have read the same (one definition each)."""
    uses = defaultdict(set)
    for o in OPTIONS:
        uses[o.long].add(o.command)
    for long in (
        "--agent",
        "--agent-option",
        "--backend",
        "--episodes",
        "--family",
        "--json",
        "--kind",
        "--no-progress",
        "--variants",
    ):
        assert len(uses[long]) >= 2, long
        assert len({o.help for o in OPTIONS if o.long == long}) == 1, long
    assert len(uses["--json"]) >= 12


@pytest.mark.parametrize("path", ["envgym run", "envgym bench run"])
def test_run_flags_show_their_config_field_docs(path: str) -> None:
    options = _by_command(path)
    for long, opt in options.items():
        if long not in RUN_FIELDS:
            continue
        doc = _field_doc(*RUN_FIELDS[long])
        suffix = KEY_VALUE if long in KEY_VALUE_FLAGS else AT_FILE if long == "--system-prompt" else None
        assert opt.help == (f"{doc} {suffix}" if suffix else doc), (path, long)
    if path == "envgym run":  # every flag of run sets a field, but these six
        assert set(options) - set(RUN_FIELDS) == {
            "--out",
            "--limit",
            "--per-episode",
            "--json",
            "--no-progress",
            "--help",
        }


def test_train_flags_show_their_config_field_docs() -> None:
    options = _by_command("envgym train")
    for long, name in TRAIN_FIELDS.items():
        doc = field_help(name).replace("<", "\\<")
        assert options[long].help == (f"{doc} {KEY_VALUE}" if long in KEY_VALUE_FLAGS else doc), long
    assert set(options) - set(TRAIN_FIELDS) == {
        "--config",
        "--set",
        "--show-config",
        "--no-progress",
        "--json",
        "--help",
    }


def test_config_help_reads_field_metadata() -> None:
    assert config_help(RunConfig, "seed") == _field_doc(RunConfig, "seed")
    assert "group g plays seed + g" in config_help(RunConfig, "seed")
    assert config_help(TrainConfig, "groups_per_update") == field_help("groups_per_update")
    assert config_help(PromptConfig, "stop_at_action").count("\\</action>") == 1
    every_field = [f.name for f in dataclasses.fields(RunConfig)]
    assert all(config_help(RunConfig, name) for name in every_field)  # RunConfig documents every field
    assert f"  seed: {_field_doc(RunConfig, 'seed')}" in (RunConfig.__doc__ or "")

    @dataclasses.dataclass
    class Undocumented:
        x: int = 0

    with pytest.raises(KeyError, match="no field 'nope'"):
        config_help(RunConfig, "nope")
    with pytest.raises(KeyError, match="no metadata"):
        config_help(Undocumented, "x")


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_help_page_renders(path: str) -> None:
    result = CliRunner().invoke(app, [*path.split()[1:], "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    if path == "envgym run":
        assert "(</action>)" in result.output  # Markdown did not swallow the tag


# ---------------------------------------------------------------- the short flags that changed
def _parse(path: str, *args: str) -> dict[str, Any]:
    ctx = COMMANDS[path]
    return ctx.command.make_context(ctx.info_name, list(args), parent=ctx.parent).params


@pytest.mark.parametrize(
    ("path", "args", "param", "value"),
    [
        ("envgym run", ["ID", "-O", "temperature=0.7"], "agent_options", ["temperature=0.7"]),
        ("envgym run", ["ID", "-k", "size=6", "-n", "4", "-g", "2"], "kwargs", ["size=6"]),
        ("envgym bench run", ["core-v1", "-O", "max_new_tokens=8"], "agent_options", ["max_new_tokens=8"]),
        ("envgym bench run", ["core-v1", "-t", "3"], "trials", 3),
        ("envgym bench report", ["RUN", "-o", "report"], "out", "report"),
        ("envgym run", ["ID", "-o", "runs/x"], "out", "runs/x"),
        ("envgym bench run", ["core-v1", "-o", "runs/b"], "out", "runs/b"),
        ("envgym train", ["-u", "5"], "updates", 5),
        ("envgym train", ["-g", "4"], "group_size", 4),
        ("envgym train", ["-o", "runs/t"], "out", "runs/t"),
        ("envgym leaderboard export", ["-o", "site"], "out", Path("site")),
    ],
)
def test_changed_short_flags(path: str, args: list[str], param: str, value: Any) -> None:
    assert _parse(path, *args)[param] == value


@pytest.mark.parametrize(
    ("path", "args"),
    [
        ("envgym bench run", ["core-v1", "-k", "3"]),  # was --trials
        ("envgym train", ["-n", "5"]),  # was --updates
        ("envgym train", ["-k", "4"]),  # was --group-size
    ],
)
def test_old_short_flags_fail_loudly(path: str, args: list[str]) -> None:
    result = CliRunner().invoke(app, [*path.split()[1:], *args])
    assert result.exit_code == 2 and "No such option" in result.output


@pytest.mark.parametrize(
    ("path", "args"),
    [
        ("envgym run", ["ID", "-o", "temperature=0.7"]),  # -o was --agent-option; must not name the folder
        ("envgym bench run", ["core-v1", "-o", "max_new_tokens=8"]),
    ],
)
def test_an_old_agent_option_after_dash_o_points_to_dash_capital_o(path: str, args: list[str]) -> None:
    result = CliRunner().invoke(app, [*path.split()[1:], *args], env={"COLUMNS": "400"})
    assert result.exit_code == 2 and "looks like an agent option" in result.output and "-O" in result.output


# ---------------------------------------------------------------- flags generated from the fields
#: Every generated table, and the commands that take it.
GENERATED = [
    ("envgym run", RUN_FLAGS),
    ("envgym run", PROMPT_FLAGS),
    ("envgym bench run", BENCH_RUN_FLAGS),
    ("envgym bench run", PROMPT_FLAGS.only("system_prompt")),
    ("envgym train", FieldFlags(TrainConfig, tuple(Flag(*f) for f in TRAIN_FLAGS), unset=True)),
]


def _field(config: type, name: str) -> dataclasses.Field[Any]:
    (f,) = [f for f in dataclasses.fields(config) if f.name == name]
    return f


def test_the_generated_run_flags_are_the_ones_this_file_lists() -> None:
    generated = {f.long: (table.config, f.field) for table in (RUN_FLAGS, PROMPT_FLAGS) for f in table.flags}
    assert generated == {long: where for long, where in RUN_FIELDS.items() if long != "--agent"}  # --agent: by hand


@pytest.mark.parametrize(("path", "table"), GENERATED, ids=[f"{p}-{t.config.__name__}" for p, t in GENERATED])
def test_every_generated_flag_shows_its_fields_help_type_and_default(path: str, table: FieldFlags) -> None:
    ctx = COMMANDS[path]
    params = {p.name: p for p in ctx.command.get_params(ctx)}
    for flag in table.flags:
        param = params[flag.name]
        field = _field(table.config, flag.field)
        mapping = flag.long in KEY_VALUE_FLAGS
        suffix = KEY_VALUE if mapping else AT_FILE if flag.field == "system_prompt" else None
        doc = _field_doc(table.config, flag.field)
        assert param.help == (f"{doc} {suffix}" if suffix else doc), (path, flag.long)
        assert param.opts[0] == flag.long and (flag.short is None or flag.short in param.opts), flag
        if table.unset or mapping:
            assert param.default is None, flag  # train: the file's value stays; KEY=VALUE: nothing given
        elif flag.field == "episodes":
            assert param.default == DEFAULT_EPISODES  # the field's None means DEFAULT_EPISODES
        else:
            assert param.default == field.default, flag
        if field.type in ("bool", bool):
            assert param.secondary_opts == [f"--no-{flag.long[2:]}"], flag


def _tiny(table: FieldFlags, build: Any) -> typer.Typer:
    """A command like ``envgym run``: a hand-written --agent, the table's flags, ``build``."""

    @with_field_flags(table, after="agent")
    def command(agent: Annotated[str, typer.Option("--agent", help="Agent spec.")] = "random", **fields: Any) -> None:
        build(agent, table.values(fields))

    tiny = typer.Typer(rich_markup_mode="markdown")
    tiny.command()(command)
    return tiny


def test_a_new_run_config_field_gets_its_flag_and_reaches_the_config() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Extended(RunConfig):
        retry_backoff_s: float = dataclasses.field(
            default=0.5, metadata={"help": "Seconds to wait before retrying an episode (<retry>)."}
        )

    table = dataclasses.replace(
        RUN_FLAGS, config=Extended, flags=(*RUN_FLAGS.flags, Flag("retry_backoff_s", "--retry-backoff"))
    )
    built: list[Extended] = []
    tiny = _tiny(
        table, lambda agent, values: built.append(Extended(env_id="envgym/FrozenLake-v0", agent=agent, **values))
    )
    result = CliRunner().invoke(tiny, ["--retry-backoff", "2", "-n", "4", "-k", "size=6", "-O", "temperature=0.5"])
    assert result.exit_code == 0, result.output
    config = built.pop()
    assert (config.retry_backoff_s, config.episodes, config.seed) == (2.0, 4, 0)
    assert dict(config.env_kwargs) == {"size": 6} and dict(config.agent_options) == {"temperature": 0.5}
    assert config.agents is None  # a KEY=VALUE flag left out leaves the field's default
    assert CliRunner().invoke(tiny, []).exit_code == 0
    assert (built[-1].retry_backoff_s, built[-1].episodes) == (0.5, DEFAULT_EPISODES)
    help_text = " ".join(CliRunner().invoke(tiny, ["--help"], env={"COLUMNS": "300"}).output.replace("│", " ").split())
    shown = help_text[help_text.index("--retry-backoff") :]
    assert shown.startswith("--retry-backoff <float> Seconds to wait before retrying an episode (<retry>).")
    assert "[default: 0.5]" in shown.split("--", 2)[1]  # its own default, before the next flag
    bad = CliRunner().invoke(tiny, ["--retry-backoff", "soon"])
    assert bad.exit_code == 2 and "Invalid value for '--retry-backoff'" in bad.output


def test_a_new_prompt_config_field_gets_its_flag_and_reaches_the_config() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Extended(PromptConfig):
        echo_goal: bool = dataclasses.field(default=True, metadata={"help": "Repeat the goal in the system prompt."})

    table = dataclasses.replace(
        PROMPT_FLAGS, config=Extended, flags=(*PROMPT_FLAGS.flags, Flag("echo_goal", "--echo-goal"))
    )
    built: list[Extended] = []
    tiny = _tiny(table, lambda _agent, values: built.append(Extended(**values)))
    assert CliRunner().invoke(tiny, ["--no-echo-goal", "--last-k", "2", "--reply-tokens", "9"]).exit_code == 0
    assert (built[-1].echo_goal, built[-1].last_k, built[-1].max_new_tokens) == (False, 2, 9)
    assert CliRunner().invoke(tiny, ["--system-prompt", "Play {env_name}."]).exit_code == 0
    assert (built[-1].echo_goal, built[-1].system_prompt, built[-1].history) == (True, "Play {env_name}.", "full")
    assert table.fields_by_param()["reply_tokens"] == "max_new_tokens"


def test_a_flag_must_name_a_documented_field() -> None:
    with pytest.raises(KeyError, match="no field 'nope'"):
        FieldFlags(RunConfig, (Flag("nope", "--nope"),))
    with pytest.raises(TypeError, match="tasks"):
        FieldFlags(RunConfig, (Flag("tasks", "--tasks"),))  # no command-line type
    with pytest.raises(ValueError, match="twice"):
        FieldFlags(RunConfig, (Flag("seed", "--seed"), Flag("group_size", "--group-size", param="seed")))


def test_run_flags_reach_the_recorded_config() -> None:
    args = ["run", "envgym/FrozenLake-v0", "-n", "2", "--max-retries", "5", "--episode-timeout", "30"]
    args += ["--history", "last_k", "--last-k", "2", "--reply-tokens", "7", "--no-stop-at-action", "--json"]
    result = CliRunner().invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)["config"]
    assert (config["episodes"], config["max_retries"], config["episode_timeout_s"]) == (2, 5, 30.0)
    assert config.get("agents") is None and config["env_kwargs"] == {}
    prompt = config["prompt"]
    assert (prompt["history"], prompt["last_k"], prompt["max_new_tokens"], prompt["stop_at_action"]) == (
        "last_k",
        2,
        7,
        False,
    )
