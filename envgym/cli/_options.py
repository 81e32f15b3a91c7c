"""The options several ``envgym`` commands share, each defined once.

Three rules, checked over the whole command tree by ``tests/cli/test_cli_options.py``:

* **One meaning per short flag** in every command: ``-a`` agent, ``-b`` backend, ``-f`` family,
  ``-g`` group size, ``-k`` environment kwargs, ``-n`` episodes, ``-o`` output path, ``-O`` agent
  option, ``-s`` seed, ``-w`` workers (and, in one command each: ``-c``, ``-e``, ``-m``, ``-t``,
  ``-u``).
* **One help text per long name**: a flag used by several commands is defined here, and a
  command that gives the same name another meaning says why in the test's allow-list.
* **Config flags document themselves**: the help of a flag that sets a :class:`RunConfig` or
  :class:`PromptConfig` field is that field's ``metadata["help"]`` (:func:`config_help`); the
  ``train`` flags read :class:`~envgym.trainer.config.TrainConfig` the same way.

Most options are ``Annotated`` aliases (``seed: SeedOption = 0``): the command keeps its default
in its own signature. ``--agent`` and ``--out`` are functions, because their type and default, or
their help, differ between commands.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated, Any

import typer

from envgym.rollout import PromptConfig, RunConfig

__all__ = [
    "AT_FILE",
    "KEY_VALUE",
    "AgentOptionsOption",
    "AgentTimeoutOption",
    "BackendOption",
    "DbOption",
    "EnvKwargsOption",
    "EpisodeTimeoutOption",
    "EpisodesOption",
    "FamilyOption",
    "GoalReminderOption",
    "GroupSizeOption",
    "HistoryOption",
    "JsonOption",
    "KindOption",
    "LastKOption",
    "LimitOption",
    "MaxRetriesOption",
    "MaxTurnsOption",
    "ModeOption",
    "NoProgressOption",
    "NumEnvsOption",
    "ReplyTokensOption",
    "SeedOption",
    "StepTimeoutOption",
    "StopAtActionOption",
    "SystemPromptOption",
    "TokenBudgetOption",
    "VariantsOption",
    "WorkersOption",
    "agent_option",
    "config_help",
    "entries_limit_option",
    "out_option",
]

#: How ``--system-prompt`` reads a file, and what it wins over (after the field's own help).
AT_FILE = "@FILE reads it from FILE. It wins over an adapter's recorded prompt (envgym run applies those; bench runs keep the suite's)."
#: How every ``key=value`` option is written (parsed by :func:`envgym.cli._common.parse_kwargs`).
KEY_VALUE = "KEY=VALUE, repeatable; values parse as JSON (6, true, [1, 2]), else stay text."


def config_help(config: type, name: str) -> str:
    """The ``metadata["help"]`` of the dataclass ``config``'s field ``name``: its flag's help.

    ``<`` is escaped: the CLI renders help as Markdown, which would drop ``</action>`` as HTML.

    Raises:
        KeyError: ``config`` has no field ``name``, or the field has no help (a flag must not go
            undocumented; this fails at import, so every test of the CLI catches it).
    """
    for f in dataclasses.fields(config):
        if f.name == name:
            if not f.metadata.get("help"):
                raise KeyError(f"{config.__name__}.{name} has no metadata['help'] to show as its flag's help")
            return str(f.metadata["help"]).replace("<", "\\<")
    raise KeyError(f"{config.__name__} has no field {name!r}")


def _run(name: str) -> str:
    return config_help(RunConfig, name)


def _prompt(name: str) -> str:
    return config_help(PromptConfig, name)


# -- what runs ------------------------------------------------------------------------------------
def agent_option(show_default: bool | str = True) -> Any:
    """``--agent/-a``: an agent spec. Commands differ in its type (one spec, or several) and in
    what leaving it out means, so each passes ``show_default``: the text shown as the default."""
    return typer.Option("--agent", "-a", help=_run("agent"), show_default=show_default)


AgentOptionsOption = Annotated[
    list[str] | None, typer.Option("--agent-option", "-O", help=f"{_run('agent_options')} {KEY_VALUE}")
]
EnvKwargsOption = Annotated[list[str] | None, typer.Option("--kwargs", "-k", help=f"{_run('env_kwargs')} {KEY_VALUE}")]
EpisodesOption = Annotated[int, typer.Option("--episodes", "-n", help=_run("episodes"))]
SeedOption = Annotated[int, typer.Option("--seed", "-s", help=_run("seed"))]
GroupSizeOption = Annotated[int, typer.Option("--group-size", "-g", help=_run("group_size"))]
MaxTurnsOption = Annotated[int | None, typer.Option("--max-turns", help=_run("max_turns"))]

# -- where and how it runs ------------------------------------------------------------------------
NumEnvsOption = Annotated[int | None, typer.Option("--num-envs", help=_run("num_envs"), show_default=False)]
WorkersOption = Annotated[int, typer.Option("--workers", "-w", help=_run("workers"))]
BackendOption = Annotated[str, typer.Option("--backend", "-b", help=_run("backend"))]
ModeOption = Annotated[str, typer.Option("--mode", help=_run("mode"))]
MaxRetriesOption = Annotated[int, typer.Option("--max-retries", help=_run("max_retries"))]
EpisodeTimeoutOption = Annotated[float | None, typer.Option("--episode-timeout", help=_run("episode_timeout_s"))]
StepTimeoutOption = Annotated[float | None, typer.Option("--step-timeout", help=_run("step_timeout_s"))]
AgentTimeoutOption = Annotated[float | None, typer.Option("--agent-timeout", help=_run("agent_timeout_s"))]

LimitOption = Annotated[
    int | None,
    typer.Option(
        "--limit",
        metavar="N",
        help="Play only the first N episodes of the run (in order). The others stay to play: the same command "
        "without --limit, with the same --out, plays them. With several ids: the first id's episodes first, and "
        "the run is those N (resume it with the same --limit).",
        show_default=False,
    ),
]


def entries_limit_option() -> Any:
    """``--limit N`` of ``bench run``: a prefix of the suite's entries."""
    return typer.Option(
        "--limit",
        metavar="N",
        help="Play only the first N entries of the suite (in its order); the others show as missing. The same "
        "command without --limit, with the same --out, plays them.",
        show_default=False,
    )


# -- prompting (chat agents) ----------------------------------------------------------------------
SystemPromptOption = Annotated[
    str | None,
    typer.Option(
        "--system-prompt",
        metavar="TEXT|@FILE",
        help=f"{_prompt('system_prompt')} {AT_FILE}",
        show_default=False,
    ),
]
HistoryOption = Annotated[str, typer.Option("--history", help=_prompt("history"))]
LastKOption = Annotated[int, typer.Option("--last-k", help=_prompt("last_k"))]
TokenBudgetOption = Annotated[int | None, typer.Option("--token-budget", help=_prompt("token_budget"))]
ReplyTokensOption = Annotated[int | None, typer.Option("--reply-tokens", help=_prompt("max_new_tokens"))]
GoalReminderOption = Annotated[bool, typer.Option("--goal-reminder/--no-goal-reminder", help=_prompt("goal_reminder"))]
StopAtActionOption = Annotated[
    bool, typer.Option("--stop-at-action/--no-stop-at-action", help=_prompt("stop_at_action"))
]

# -- which environments ---------------------------------------------------------------------------
FamilyOption = Annotated[
    str | None,
    typer.Option("--family", "-f", help="Only environments of this family (games, household, ...; see envgym list)."),
]
KindOption = Annotated[
    str | None,
    typer.Option(
        "--kind", help="Only registrations of this kind: single, aec or parallel (an id may be registered as several)."
    ),
]
VariantsOption = Annotated[
    bool, typer.Option("--variants/--no-variants", help="Include the difficulty presets, not only the base ids.")
]

# -- the leaderboard database ----------------------------------------------------------------------
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database: a SQLAlchemy URL (sqlite:///x.db, postgresql+psycopg://...) or a SQLite file path. "
        "Default: $ENVGYM_LEADERBOARD_URL, else ~/.local/share/envgym/leaderboard.db.",
    ),
]

# -- output ---------------------------------------------------------------------------------------
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as one JSON document on stdout.")]
NoProgressOption = Annotated[
    bool,
    typer.Option(
        "--no-progress",
        help="No live progress on stderr (by default: episodes, live episodes, turns, tokens/s and ETA, one line "
        "rewritten on a terminal, a plain line every 10 s otherwise). ENVGYM_PROGRESS=0 does the same.",
    ),
]


#: An agent option as ``-o`` used to take it in ``run`` and ``bench run`` (``temperature=0.7``).
_KEY_VALUE_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[^/]*\Z")


def _not_an_agent_option(value: str | None) -> str | None:
    if value is not None and _KEY_VALUE_LIKE.match(value):
        raise typer.BadParameter(
            f"{value!r} looks like an agent option, not a folder; agent options are -O (--agent-option) "
            f"{value}. To name a folder so, write ./{value}.",
            param_hint="'--out' / '-o'",
        )
    return value


def out_option(help: str, *, was_agent_option: bool = False) -> Any:
    """``--out/-o``: where a command writes; ``help`` says what it writes there.

    ``was_agent_option=True`` (``run``, ``bench run``, where ``-o`` used to be ``--agent-option``,
    now ``-O``): a value shaped like ``key=value`` is refused with a pointer to ``-O``, so an old
    ``-o temperature=0.7`` fails loudly instead of naming the run folder.
    """
    if was_agent_option:
        return typer.Option("--out", "-o", help=help, callback=_not_an_agent_option)
    return typer.Option("--out", "-o", help=help)
