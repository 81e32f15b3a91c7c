"""``envgym list`` and ``envgym info``: what is registered, and what one environment is."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from envgym.cli._common import (
    EXIT_USAGE,
    KIND_LABELS,
    echo_json,
    fail,
    handle_errors,
    jsonable,
    out_console,
    resolve_kind,
    specs_for,
)
from envgym.cli._options import FamilyOption, JsonOption, KindOption, VariantsOption
from envgym.cli._rst import render_rst
from envgym.core import TextEnv
from envgym.errors import EnvgymError, suggest
from envgym.registration import list_envs, make, make_aec

__all__ = ["describe_spec", "info_command", "list_command", "load_entry_point"]


def load_entry_point(spec: Any) -> Any:
    """``spec.load()``, with an import failure turned into an :class:`EnvgymError` naming the id."""
    try:
        return spec.load()
    except (ImportError, AttributeError) as err:
        raise EnvgymError(f"could not load {spec.id!r} from {spec.entry_point!r}: {err}") from err


def _spec_row(spec: Any) -> dict[str, Any]:
    return {
        "id": spec.id,
        "family": spec.family,
        "kind": KIND_LABELS.get(spec.kind, spec.kind),
        "summary": spec.summary,
        "variant_of": spec.variant_of,
        "kwargs": jsonable(dict(spec.kwargs)),
        "entry_point": spec.entry_point,
    }


@handle_errors
def list_command(
    family: FamilyOption = None,
    kind: KindOption = None,
    variants: VariantsOption = True,
    as_json: JsonOption = False,
) -> None:
    """List every registered environment, grouped by family (--json: a list of specs)."""
    registry_kind = resolve_kind(kind)
    everything = list_envs()
    families = sorted({s.family for s in everything})
    if family is not None and family not in families:
        fail(
            f"unknown family {family!r}.{suggest(family, families)} Families: {', '.join(families) or '(none)'}.",
            EXIT_USAGE,
        )
    specs = list_envs(family=family, kind=registry_kind, variants=variants)  # type: ignore[arg-type]
    if as_json:
        echo_json([_spec_row(s) for s in specs])
        return
    console = out_console()
    if not specs:
        console.print("No environment matches.")
        return
    for fam in sorted({s.family for s in specs}):
        # Each base id, then its presets; a single-agent registration before a multi-agent one.
        rows = sorted(
            (s for s in specs if s.family == fam),
            key=lambda s: (s.variant_of or s.id, s.variant_of is not None, s.id, s.kind != "gymnasium"),
        )
        table = Table(title=Text(f"{fam} ({len(rows)})"), title_justify="left", title_style="bold")
        table.add_column("id", no_wrap=True, style="cyan")
        table.add_column("kind", no_wrap=True)
        table.add_column("summary", overflow="fold")
        table.add_column("variant of", no_wrap=True, style="dim")
        for s in rows:
            table.add_row(s.id, KIND_LABELS.get(s.kind, s.kind), Text(s.summary), s.variant_of or "")
        console.print(table)
    console.print(f"{len(specs)} environment(s) in {len({s.family for s in specs})} family(ies).")


def _arguments(cls: type) -> list[dict[str, Any]]:
    """Constructor keyword arguments of an environment class (own ones first, then TextEnv's)."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return []
    args = []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        args.append(
            {
                "name": p.name,
                "default": None if p.default is p.empty else jsonable(p.default),
                "required": p.default is p.empty,
                "annotation": "" if p.annotation is p.empty else str(p.annotation),
            }
        )
    seen = {a["name"] for a in args}
    # TextEnv subclasses forward **kwargs to TextEnv.__init__: list the common arguments too.
    if isinstance(cls, type) and issubclass(cls, TextEnv) and cls is not TextEnv:
        for p in inspect.signature(TextEnv.__init__).parameters.values():
            if p.name == "self" or p.name in seen or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            args.append(
                {
                    "name": p.name,
                    "default": None if p.default is p.empty else jsonable(p.default),
                    "required": False,
                    "annotation": str(p.annotation),
                }
            )
    return args


def _card(cls: Any, spec: Any) -> str:
    """The env card: ``cls.env_card(kwargs)`` with the registered kwargs (one signature for every
    family: the family contract, :mod:`envgym.families`), else the class docstring."""
    getter = getattr(cls, "env_card", None)
    if getter is None:
        return inspect.getdoc(cls) or cls.__name__
    return getter(dict(spec.kwargs))


def describe_spec(spec: Any) -> dict[str, Any]:
    """Everything ``envgym info`` shows about one registration, as JSON-ready data.

    Builds the environment once (with its registered kwargs) to read its spaces and turn limit.
    """
    cls = load_entry_point(spec)
    card = _card(cls, spec)
    base = spec.variant_of or spec.id
    family_specs = [s for s in list_envs() if s.kind == spec.kind]
    variants = [
        {"id": s.id, "kwargs": jsonable(dict(s.kwargs)), "summary": s.summary, "is_base": s.variant_of is None}
        for s in sorted(family_specs, key=lambda s: (s.variant_of is not None, s.id))
        if s.id == base or s.variant_of == base
    ]
    info: dict[str, Any] = {
        **_spec_row(spec),
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "env_card": card,
        "reward_components": list(getattr(cls, "reward_components", ()) or ()),
        "splits": list(getattr(cls, "splits", ()) or ()),
        "default_max_turns": getattr(cls, "default_max_turns", None),
        "arguments": _arguments(cls),
        "variants": variants,
    }
    if spec.kind == "gymnasium":
        env = make(spec.id)
        try:
            unwrapped = env.unwrapped
            info["max_turns"] = getattr(unwrapped, "max_turns", None)
            info["observation_space"] = repr(env.observation_space)
            info["action_space"] = repr(env.action_space)
            info["agents"] = None
        finally:
            env.close()
    else:
        env = make_aec(spec.id)
        try:
            agents = list(env.possible_agents)
            info["agents"] = agents
            info["max_turns"] = getattr(env.unwrapped, "max_turns", None)
            info["observation_space"] = {a: repr(env.observation_space(a)) for a in agents}
            info["action_space"] = {a: repr(env.action_space(a)) for a in agents}
        finally:
            env.close()
    return info


def _fmt_mapping(value: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in value.items()) if value else "(none)"


def _print_info(info: Mapping[str, Any]) -> None:
    console = out_console()
    console.rule(Text(f"{info['id']}  [{info['kind']}]", style="bold cyan"))
    console.print(render_rst(info["env_card"]))
    console.print()
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")

    def spaces(value: Any) -> str:
        if isinstance(value, Mapping):
            return "; ".join(f"{k}: {v}" for k, v in value.items())
        return str(value)

    rows: list[tuple[str, str]] = [
        ("family", info["family"]),
        ("kind", info["kind"]),
        ("summary", info["summary"]),
        ("class", info["class"]),
        ("variant of", info["variant_of"] or "(base id)"),
        ("registered kwargs", _fmt_mapping(info["kwargs"])),
    ]
    if info.get("agents"):
        rows.append(("agents", ", ".join(info["agents"])))
    rows += [
        ("observation space", spaces(info["observation_space"])),
        ("action space", spaces(info["action_space"])),
        ("reward components", ", ".join(info["reward_components"]) or "(not declared)"),
        ("max turns", str(info["max_turns"])),
        ("splits", ", ".join(info["splits"]) or "-"),
    ]
    for key, value in rows:
        table.add_row(key, Text(str(value)))
    console.print(table)
    if info["arguments"]:
        args = Table(title="arguments", title_justify="left", title_style="bold")
        args.add_column("name", no_wrap=True, style="cyan")
        args.add_column("default", overflow="fold")
        for arg in info["arguments"]:
            args.add_row(arg["name"], "(required)" if arg["required"] else repr(arg["default"]))
        console.print(args)
    if len(info["variants"]) > 1:
        variants = Table(title="variants", title_justify="left", title_style="bold")
        variants.add_column("id", no_wrap=True, style="cyan")
        variants.add_column("kwargs", overflow="fold")
        variants.add_column("summary", overflow="fold")
        for v in info["variants"]:
            marker = " (base)" if v["is_base"] else ""
            variants.add_row(v["id"] + marker, _fmt_mapping(v["kwargs"]), Text(v["summary"]))
        console.print(variants)


@handle_errors
def info_command(
    env_id: Annotated[str, typer.Argument(metavar="ID", help="Environment id, e.g. envgym/Sokoban-v0.")],
    kind: KindOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show an environment's card, spaces, arguments, variants and reward components.

    With --json, prints a list with one object per registration of the id.
    """
    registry_kind = resolve_kind(kind)
    specs = [s for s in specs_for(env_id) if registry_kind is None or s.kind == registry_kind]
    if not specs:
        fail(f"{env_id!r} is not registered as {kind!r}.", EXIT_USAGE)
    infos = [describe_spec(s) for s in specs]
    if as_json:
        echo_json(infos)
        return
    for info in infos:
        _print_info(info)
