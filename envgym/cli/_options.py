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

The flags that set a config field are declared once each, as a :class:`Flag` in a
:class:`FieldFlags` table (:data:`RUN_FLAGS`, :data:`PROMPT_FLAGS`; ``train``'s ``TRAIN_FLAGS``):
the flag's type, default and help come from the field, :meth:`FieldFlags.parameters` declares them
on a command (:func:`with_field_flags`) and :meth:`FieldFlags.values` maps the parsed flags back to
the fields. A new field needs one new ``Flag`` line, and no change to the commands.

The other options are ``Annotated`` aliases (``as_json: JsonOption = False``): the command keeps its
default in its own signature. ``--agent`` and ``--out`` are functions, because their type and
default, or their help, differ between commands.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, NamedTuple

import typer

from envgym.cli._common import parse_kwargs, read_system_prompt
from envgym.rollout import PromptConfig, RunConfig
from envgym.rollout.config import DEFAULT_EPISODES

__all__ = [
    "AT_FILE",
    "BENCH_RUN_FLAGS",
    "KEY_VALUE",
    "PROMPT_FLAGS",
    "RUN_FLAGS",
    "DbOption",
    "EnvKwargsOption",
    "EpisodesOption",
    "FamilyOption",
    "FieldFlags",
    "Flag",
    "JsonOption",
    "KindOption",
    "LimitOption",
    "NoProgressOption",
    "SeedOption",
    "VariantsOption",
    "agent_option",
    "config_help",
    "entries_limit_option",
    "field_options",
    "flag_type",
    "out_option",
    "with_field_flags",
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


def flag_type(config: type, name: str) -> type:
    """The command-line type of ``config``'s field ``name``: its annotation without ``None``, and
    without ``str`` where ``str`` only spells ``auto`` (``int | str``: an int flag).

    Raises:
        TypeError: the field has no such type (a mapping, a list of tasks): it gets no generated
            flag (mappings do, as ``KEY=VALUE`` flags: :meth:`FieldFlags.parameters`).
    """
    options = _field_types(config, name)
    for kind in (bool, int, float, str):
        if kind in options:
            return kind
    raise TypeError(f"{config.__name__}.{name} ({typing.get_type_hints(config)[name]}) has no command-line type")


def _field_types(config: type, name: str) -> list[Any]:
    hint = typing.get_type_hints(config)[name]
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return [t for t in (typing.get_args(hint) if union else (hint,)) if t is not type(None)]


def _is_mapping(config: type, name: str) -> bool:
    """Whether ``config``'s field ``name`` is a mapping (its flag takes ``KEY=VALUE`` items)."""
    return any(
        isinstance(typing.get_origin(t) or t, type) and issubclass(typing.get_origin(t) or t, Mapping)
        for t in _field_types(config, name)
    )


class Flag(NamedTuple):
    """One flag that sets one config field. Only what the field cannot say is written here."""

    #: The config field it sets.
    field: str
    #: Its long name (``--episodes``); a bool field also gets ``--no-...``.
    long: str
    #: Its short name (``-n``), if any: one meaning per short flag in every command.
    short: str | None = None
    #: The command's parameter name (``ctx.params``); default the field's name.
    param: str | None = None
    #: The flag's default where it is not the field's (a field whose ``None`` the config resolves).
    default: Any = dataclasses.MISSING
    #: How the value is written (``TEXT|@FILE``), where the type's name is not enough.
    metavar: str | None = None
    #: Help after the field's own: how the flag reads its value (``@FILE``).
    more_help: str = ""
    #: The parsed value -> the field's value (``--system-prompt @FILE`` -> the file's text).
    convert: Callable[[Any], Any] | None = None

    @property
    def name(self) -> str:
        """The command's parameter name."""
        return self.param or self.field


@dataclasses.dataclass(frozen=True)
class FieldFlags:
    """The flags that set fields of the dataclass ``config``, each declared once as a :class:`Flag`.

    Each flag's type is its field's (:func:`flag_type`; a mapping field takes repeatable
    ``KEY=VALUE`` items, :data:`KEY_VALUE`), its help the field's ``metadata["help"]``
    (:func:`config_help`) and its default the field's. With ``unset=True`` every default is
    ``None`` instead (not shown): a flag left out leaves the value from elsewhere (``train``'s
    ``--config`` file) in place.
    """

    config: type
    flags: tuple[Flag, ...]
    unset: bool = False

    def __post_init__(self) -> None:
        names = [f.name for f in self.flags]
        if len(set(names)) < len(names):
            raise ValueError(f"{self.config.__name__} flags: a parameter name twice in {names}")
        for flag in self.flags:
            self.option(flag.field)  # every flag's field exists, is documented and has a type: fails at import

    def only(self, *fields: str) -> FieldFlags:
        """The same table with only the flags of ``fields`` (a command that takes some of them)."""
        by_field = {f.field: f for f in self.flags}
        return dataclasses.replace(self, flags=tuple(by_field[name] for name in fields))

    def flag(self, field: str) -> Flag:
        """The flag that sets ``field``."""
        for flag in self.flags:
            if flag.field == field:
                return flag
        raise KeyError(f"no flag sets {self.config.__name__}.{field}")

    def option(self, field: str) -> Any:
        """The ``Annotated`` type of the flag that sets ``field``, for a command that takes it as a
        plain parameter and keeps its default in its own signature (``seed: SeedOption = 0``)."""
        annotation, _ = self._declare(self.flag(field))
        return annotation

    def parameters(self) -> list[inspect.Parameter]:
        """One keyword parameter per flag, for a command's signature (:func:`with_field_flags`)."""
        params = []
        for flag in self.flags:
            annotation, default = self._declare(flag)
            params.append(
                inspect.Parameter(flag.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
            )
        return params

    def _declare(self, flag: Flag) -> tuple[Any, Any]:
        help_text = config_help(self.config, flag.field)  # first: a field that is not there, or undocumented
        names = [flag.long, *([flag.short] if flag.short else [])]
        if _is_mapping(self.config, flag.field):
            kind: Any = list[str]
            default = None
            help_text = f"{help_text} {KEY_VALUE}"
        else:
            kind = flag_type(self.config, flag.field)
            default = None if self.unset else self._default(flag)
            if kind is bool:
                names[0] = f"{flag.long}/--no-{flag.long.removeprefix('--')}"  # --goal-reminder/--no-goal-reminder
        if flag.more_help:
            help_text = f"{help_text} {flag.more_help}"
        extra: dict[str, Any] = {"metavar": flag.metavar} if flag.metavar else {}
        option = typer.Option(*names, help=help_text, show_default=default is not None, **extra)
        return Annotated[kind | None if default is None else kind, option], default

    def _default(self, flag: Flag) -> Any:
        if flag.default is not dataclasses.MISSING:
            return flag.default
        (f,) = [f for f in dataclasses.fields(self.config) if f.name == flag.field]
        return None if f.default is dataclasses.MISSING else f.default

    def values(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The fields the parsed flags in ``params`` (by parameter name) set: ``KEY=VALUE`` items
        parsed (one left out sets nothing: the field's default stays), values converted.

        Raises:
            typer.BadParameter: a bad ``KEY=VALUE`` item, or a conversion's error.
        """
        found: dict[str, Any] = {}
        for flag in self.flags:
            if flag.name not in params:
                continue
            value = params[flag.name]
            if _is_mapping(self.config, flag.field):
                if not value:
                    continue
                value = parse_kwargs(value, flag=flag.long)
            if flag.convert is not None:
                value = flag.convert(value)
            found[flag.field] = value
        return found

    def fields_by_param(self) -> dict[str, str]:
        """Command parameter name -> the field its flag sets."""
        return {flag.name: flag.field for flag in self.flags}


def field_options(config: type, flags: Iterable[Flag | tuple[Any, ...]]) -> list[inspect.Parameter]:
    """The parameters of ``flags`` (``Flag`` objects or ``(field, long, short)`` tuples) that set
    ``config``'s fields, each default ``None`` (unset: the value from elsewhere stays)."""
    table = tuple(f if isinstance(f, Flag) else Flag(*f) for f in flags)
    return FieldFlags(config, table, unset=True).parameters()


def with_field_flags(*tables: FieldFlags, after: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the flags of ``tables`` on a command that takes them as ``**fields``, in its
    signature after its parameter ``after`` (the order of ``--help``)."""

    def declare(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        fixed = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        generated = [p for table in tables for p in table.parameters()]
        at = [p.name for p in fixed].index(after) + 1
        clash = {p.name for p in fixed} & {p.name for p in generated}
        if clash:
            raise ValueError(f"{command.__name__}: generated flags clash with its parameters {sorted(clash)}")
        # generated parameters are keyword-only: the hand-written ones after them become so too
        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in fixed[at:]]
        command.__signature__ = signature.replace(parameters=[*fixed[:at], *generated, *rest])  # type: ignore[attr-defined]
        return command

    return declare


#: The flags of ``envgym run`` that set a :class:`RunConfig` field (``bench run`` takes some).
RUN_FLAGS = FieldFlags(
    RunConfig,
    (
        Flag("episodes", "--episodes", "-n", default=DEFAULT_EPISODES),
        Flag("seed", "--seed", "-s"),
        Flag("env_kwargs", "--kwargs", "-k", param="kwargs"),
        Flag("num_envs", "--num-envs"),
        Flag("workers", "--workers", "-w"),
        Flag("backend", "--backend", "-b"),
        Flag("url", "--url", metavar="WS_URL"),
        Flag("mode", "--mode"),
        Flag("group_size", "--group-size", "-g"),
        Flag("max_turns", "--max-turns"),
        Flag("max_retries", "--max-retries"),
        Flag("episode_timeout_s", "--episode-timeout"),
        Flag("step_timeout_s", "--step-timeout"),
        Flag("agent_timeout_s", "--agent-timeout"),
        Flag("agent_options", "--agent-option", "-O"),
        Flag("agents", "--agent-for", metavar="AGENT=SPEC"),
    ),
)
#: The flags of ``envgym run`` that set a :class:`PromptConfig` field (``bench run``: the system prompt).
PROMPT_FLAGS = FieldFlags(
    PromptConfig,
    (
        Flag("history", "--history"),
        Flag("last_k", "--last-k"),
        Flag("token_budget", "--token-budget"),
        Flag("max_new_tokens", "--reply-tokens", param="reply_tokens"),
        Flag("stop_at_action", "--stop-at-action"),
        Flag("goal_reminder", "--goal-reminder"),
        Flag("system_prompt", "--system-prompt", metavar="TEXT|@FILE", more_help=AT_FILE, convert=read_system_prompt),
    ),
)
#: The RunConfig flags of ``envgym bench run``: where and how the suite runs (its episodes are the suite's).
BENCH_RUN_FLAGS = RUN_FLAGS.only(
    "agent_options",
    "num_envs",
    "workers",
    "backend",
    "url",
    "mode",
    "max_retries",
    "episode_timeout_s",
    "step_timeout_s",
    "agent_timeout_s",
)


# -- what runs ------------------------------------------------------------------------------------
def agent_option(show_default: bool | str = True) -> Any:
    """``--agent/-a``: an agent spec. Commands differ in its type (one spec, or several) and in
    what leaving it out means, so each passes ``show_default``: the text shown as the default."""
    return typer.Option("--agent", "-a", help=config_help(RunConfig, "agent"), show_default=show_default)


#: The RunConfig flags other commands take too (run-all, play).
EnvKwargsOption = RUN_FLAGS.option("env_kwargs")
EpisodesOption = RUN_FLAGS.option("episodes")
SeedOption = RUN_FLAGS.option("seed")

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
