"""``envgym play``: a person plays an environment in the terminal.

The observation is printed, then the admissible actions (numbered, when the set is finite); the
player types an action, or its number (``#N``; a bare ``N`` too, unless the environment reads
numbers itself: TicTacToe's cells 1-9, ConnectFour's columns). Lines starting with ``:`` are commands (``:help``). End of
input (Ctrl-D) or ``:q`` ends the game cleanly. Everything reads stdin and writes stdout, so a
whole game can be scripted: ``printf 'up\\nleft\\n:q\\n' | envgym play envgym/Sokoban-v0``.

Multi-agent (AEC) ids: by default the person plays every seat in turn (hot-seat); with
``--seat NAME`` the person plays that seat and a seeded random agent plays the others.

GUI environments (made with ``render_mode="rgb_array"``, or whose observation holds an image):
the screen the person acts on is saved as a PNG after the reset and after every step
(``turn-<k>.png`` in ``--screenshots DIR``, default a new temporary folder) and its path printed;
a dict observation is printed part by part (goal, accessibility tree, ...; an image as its size),
and the element list an env gives in ``info["elements"]`` (id, role, name, box) is shown too.
"""

from __future__ import annotations

import random
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from envgym.cli._common import (
    EXIT_USAGE,
    fail,
    handle_errors,
    out_console,
    parse_kwargs,
    resolve_kind,
    select_spec,
)
from envgym.cli._options import EnvKwargsOption, KindOption
from envgym.errors import suggest
from envgym.registration import make, make_aec
from envgym.rollout.screenshots import encode_png

__all__ = ["HELP_TEXT", "play_command", "resolve_input"]

#: How many actions are listed before the list is cut (``:actions`` shows them all).
SHOWN_ACTIONS = 30

HELP_TEXT = """\
Type an action and press Enter.
  #N          play action number N of the list (N alone too, unless the environment reads
              numbers itself: then N goes to it as typed, e.g. TicTacToe's cell 5 = b2)
  :actions    list every admissible action          :obs   show the observation again
  :help       this help                             :q     quit (Ctrl-D works too)"""

_QUIT = {":q", ":quit", ":exit"}
_HELP = {":h", ":help", ":?"}
_ACTIONS = {":a", ":actions"}
_OBS = {":o", ":obs", ":look"}
_COMMANDS = sorted(_QUIT | _HELP | _ACTIONS | _OBS)


@dataclass
class _Resolved:
    """What one input line means: an action to send, a command, or a message to show."""

    action: str | None = None
    command: str | None = None
    message: str | None = None


def resolve_input(line: str, actions: Sequence[str] | None, *, numbers_are_actions: bool = False) -> _Resolved:
    """Interpret one typed line.

    ``:cmd`` is a command; ``#N`` picks action N; a bare number picks action N too unless the
    numbers mean something to the environment itself (``numbers_are_actions``, or admissible
    actions that are numbers): then it is sent as typed, as is anything else (the environment
    judges it, an unknown action is an invalid step).
    """
    text = line.strip()
    if not text:
        return _Resolved(message="Type an action, a number from the list, or :help.")
    if text.startswith(":"):
        word = text.split()[0].lower()
        for group, name in ((_QUIT, "quit"), (_HELP, "help"), (_ACTIONS, "actions"), (_OBS, "obs")):
            if word in group:
                return _Resolved(command=name)
        return _Resolved(message=f"Unknown command {word!r}.{suggest(word, _COMMANDS)} Type :help for the commands.")
    number: str | None = None
    if text.startswith("#") and text[1:].strip().isdigit():
        number = text[1:].strip()
    elif text.isdigit() and actions and not _env_numbers(actions, numbers_are_actions):
        number = text
    if number is not None:
        if not actions:
            return _Resolved(message="There is no numbered action list here: type the action itself.")
        index = int(number)
        if not 1 <= index <= len(actions):
            return _Resolved(message=f"There is no action number {index}: choose 1 to {len(actions)}.")
        return _Resolved(action=actions[index - 1])
    return _Resolved(action=text)


def _env_numbers(actions: Sequence[str] | None, numbers_are_actions: bool) -> bool:
    """Whether a bare number is the environment's to read (so the menu is picked with ``#N``)."""
    return numbers_are_actions or any(a.strip().isdigit() for a in actions or ())


def _read_line(console: Console, prompt: str) -> str | None:
    """One line from stdin, ``None`` at end of input. Typed lines are echoed when stdin is piped."""
    if sys.stdin.isatty():
        try:
            return input(prompt)
        except EOFError:
            return None
    console.print(prompt, end="", markup=False)
    line = sys.stdin.readline()
    if not line:
        console.print()
        return None
    line = line.rstrip("\r\n")
    console.print(Text(line))
    return line


def _show_actions(
    console: Console, actions: Sequence[str] | None, *, full: bool = False, numbers_are_actions: bool = False
) -> None:
    if not actions:
        if full:
            console.print("This environment has no finite action list here: type the action in words.")
        return
    shown = actions if full else actions[:SHOWN_ACTIONS]
    # "#N" when a bare number is the environment's own (a cell, a column), so the two never mix.
    mark = "#" if _env_numbers(actions, numbers_are_actions) else ""
    text = Text("Actions: ", style="bold")
    for i, action in enumerate(shown, start=1):
        if i > 1:
            text.append("  ")
        text.append(f"{mark}{i}", style="cyan")
        text.append(f" {action}")
    if len(shown) < len(actions):
        text.append(f"  ... {len(actions) - len(shown)} more (:actions lists all)", style="dim")
    console.print(text)


def _fmt_components(components: Mapping[str, float]) -> str:
    parts = [f"{k} {v:+.3f}" for k, v in components.items() if v]
    return f"  ({', '.join(parts)})" if parts else ""


@dataclass
class _Tally:
    turns: int = 0
    returns: dict[str, float] = field(default_factory=dict)
    components: dict[str, dict[str, float]] = field(default_factory=dict)
    invalid: dict[str, int] = field(default_factory=dict)

    def add(self, who: str, reward: float, components: Mapping[str, float] | None, valid: bool | None) -> None:
        self.returns[who] = self.returns.get(who, 0.0) + float(reward)
        mine = self.components.setdefault(who, {})
        for key, value in (components or {}).items():
            mine[key] = mine.get(key, 0.0) + float(value)
        if valid is False:
            self.invalid[who] = self.invalid.get(who, 0) + 1


def _ask(
    console: Console, prompt: str, observation: str, actions: Sequence[str] | None, numbers_are_actions: bool
) -> str | None:
    """Prompt until the person gives an action (returned) or quits (``None``)."""
    while True:
        line = _read_line(console, prompt)
        if line is None:
            console.print("End of input: leaving the game.")
            return None
        resolved = resolve_input(line, actions, numbers_are_actions=numbers_are_actions)
        if resolved.action is not None:
            return resolved.action
        if resolved.command == "quit":
            console.print("Quit.")
            return None
        if resolved.command == "help":
            console.print(Text(HELP_TEXT))
        elif resolved.command == "actions":
            _show_actions(console, actions, full=True, numbers_are_actions=numbers_are_actions)
        elif resolved.command == "obs":
            console.print(Text(observation), soft_wrap=True)
        elif resolved.message:
            console.print(Text(resolved.message, style="yellow"))


def _is_image(value: Any) -> bool:
    shape = getattr(value, "shape", None)
    return shape is not None and len(shape) == 3 and shape[2] == 3 and str(getattr(value, "dtype", "")) == "uint8"


def _observation_text(observation: Any, info: Mapping[str, Any]) -> str:
    """What the terminal shows of an observation: text as it is; a dict observation part by part
    (an image as its size); then the env's element list (``info["elements"]``), if it gives one."""
    if isinstance(observation, Mapping):
        parts = []
        for key, value in observation.items():
            if _is_image(value):
                parts.append(f"[{key}] image {value.shape[1]}x{value.shape[0]} (saved as a screenshot)")
            else:
                parts.append(f"[{key}]\n{value}")
        text = "\n".join(parts)
    else:
        text = str(observation)
    elements = info.get("elements")
    if isinstance(elements, list) and elements and isinstance(observation, Mapping):
        lines = [
            f'[{e.get("id")}] {e.get("role")} "{e.get("name")}" box={tuple(e.get("box") or ())}'
            for e in elements
            if isinstance(e, Mapping)
        ]
        text += "\n[elements]\n" + "\n".join(lines)
    return text


class _Screens:
    """Saves the screen a person acts on as ``turn-<k>.png`` (GUI envs only)."""

    def __init__(self, env: Any, folder: str | None) -> None:
        self.env = env
        self.folder = Path(folder) if folder else None

    def frame(self, observation: Any) -> Any:
        if getattr(self.env, "render_mode", None) == "rgb_array":
            frame = self.env.render()
            if _is_image(frame):
                return frame
        if isinstance(observation, Mapping):
            return next((v for v in observation.values() if _is_image(v)), None)
        return None

    def save(self, console: Console, observation: Any, turn: int) -> None:
        frame = self.frame(observation)
        if frame is None:
            return
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="envgym-play-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"turn-{turn}.png"
        path.write_bytes(encode_png(frame))
        console.print(Text(f"screenshot: {path}", style="cyan"), soft_wrap=True)


def _play_single(
    console: Console, env_id: str, kwargs: dict[str, Any], seed: int | None, screenshots: str | None = None
) -> dict[str, Any]:
    env = make(env_id, **kwargs)
    numbers = bool(getattr(env.unwrapped, "numbers_are_actions", False))
    screens = _Screens(env, screenshots)
    tally = _Tally()
    outcome: dict[str, Any] = {"finished": False, "success": False, "termination_reason": None}
    try:
        observation, info = env.reset(seed=seed)
        task = info.get("task") or {}
        console.rule(Text(f"{env_id}  seed={task.get('seed', seed)}  task={task.get('id', '?')}", style="bold"))
        shown = _observation_text(observation, info)
        console.print(Text(shown), soft_wrap=True)
        screens.save(console, observation, 0)
        while True:
            actions = info.get("admissible_actions")
            _show_actions(console, actions, numbers_are_actions=numbers)
            action = _ask(console, f"[turn {tally.turns + 1}] > ", shown, actions, numbers)
            if action is None:
                break
            observation, reward, terminated, truncated, info = env.step(action)
            tally.turns += 1
            components = info.get("reward_components") or {}
            tally.add("player", reward, components, info.get("action_valid"))
            mark = "" if info.get("action_valid", True) else "  [invalid action]"
            console.print(
                Text(f"reward {reward:+.3f}{_fmt_components(components)}{mark}", style="green" if reward > 0 else "")
            )
            shown = _observation_text(observation, info)
            console.print(Text(shown), soft_wrap=True)
            screens.save(console, observation, tally.turns)
            if terminated or truncated:
                outcome = {
                    "finished": True,
                    "success": bool(info.get("success")),
                    "termination_reason": info.get("termination_reason"),
                }
                verdict = "solved" if outcome["success"] else f"over ({outcome['termination_reason']})"
                console.print(Text(f"Episode {verdict}.", style="bold green" if outcome["success"] else "bold"))
                break
    finally:
        env.close()
    return {"turns": tally.turns, **outcome, "tally": tally}


def _aec_actions(info: Mapping[str, Any] | None) -> list[str] | None:
    actions = (info or {}).get("admissible_actions")
    return list(actions) if actions else None


def _play_aec(
    console: Console, env_id: str, kwargs: dict[str, Any], seed: int | None, seat: str | None
) -> dict[str, Any]:
    env = make_aec(env_id, **kwargs)
    tally = _Tally()
    quit_early = False
    try:
        env.reset(seed=seed)
        numbers = bool(getattr(env.unwrapped, "numbers_are_actions", False))
        agents = list(env.possible_agents)
        if seat is not None and seat not in agents:
            fail(f"--seat must be one of {', '.join(agents)}, got {seat!r}.{suggest(seat, agents)}", EXIT_USAGE)
        people = set(agents) if seat is None else {seat}
        tally.returns = dict.fromkeys(agents, 0.0)
        rng = random.Random(seed)
        who = "every seat (hot-seat)" if seat is None else f"{seat}; the others play at random"
        console.rule(Text(f"{env_id}  seed={seed}  you play {who}", style="bold"))
        for agent in env.agent_iter():
            observation, _, termination, truncation, info = env.last()
            if termination or truncation:
                env.step(None)
                continue
            actions = _aec_actions(info)
            if agent in people:
                console.print(Text(f"--- {agent} to play ---", style="bold cyan"))
                console.print(Text(str(observation)), soft_wrap=True)
                _show_actions(console, actions, numbers_are_actions=numbers)
                action = _ask(console, f"[{agent}] > ", str(observation), actions, numbers)
                if action is None:
                    quit_early = True
                    break
            else:
                sampler = getattr(env.unwrapped, "sample_action", None)
                if actions:
                    action = rng.choice(actions)
                elif sampler is not None:
                    action = sampler(agent, rng)
                else:
                    action = env.action_space(agent).sample()
                console.print(Text(f"{agent} plays {action!r}", style="magenta"))
            env.step(action)
            tally.turns += 1
            step_info = env.infos.get(agent, {}) if hasattr(env, "infos") else {}
            if step_info.get("action_valid") is False:
                tally.invalid[agent] = tally.invalid.get(agent, 0) + 1
                console.print(Text(f"{agent}: invalid action", style="yellow"))
            # The tally adds each step's rewards as they are shown: an agent's reward waits in
            # last() until its next turn, which a game stopped mid-round never gives it.
            gained = {a: r for a, r in getattr(env, "rewards", {}).items() if r}
            for a, r in gained.items():
                tally.add(a, r, None, None)
            if gained:
                console.print(Text("rewards " + ", ".join(f"{a} {r:+.3f}" for a, r in gained.items())))
        if not quit_early:
            console.print(Text("Game over.", style="bold"))
    finally:
        env.close()
    return {
        "turns": tally.turns,
        "finished": not quit_early,
        "success": None,
        "termination_reason": None,
        "tally": tally,
    }


def _print_summary(console: Console, result: Mapping[str, Any]) -> None:
    tally: _Tally = result["tally"]
    table = Table(title="summary", title_justify="left", title_style="bold")
    table.add_column("player", no_wrap=True, style="cyan")
    table.add_column("return", justify="right")
    table.add_column("invalid", justify="right")
    table.add_column("reward components", overflow="fold")
    for who in tally.returns or {"player": 0.0}:
        comps = tally.components.get(who, {})
        table.add_row(
            who,
            f"{tally.returns.get(who, 0.0):+.3f}",
            str(tally.invalid.get(who, 0)),
            ", ".join(f"{k} {v:+.3f}" for k, v in comps.items() if v) or "-",
        )
    console.print(table)
    status = "finished" if result["finished"] else "stopped"
    extra = ""
    if result.get("termination_reason"):
        extra = f", {'success' if result['success'] else 'no success'} ({result['termination_reason']})"
    console.print(f"{result['turns']} turn(s), {status}{extra}.")


@handle_errors
def play_command(
    env_id: Annotated[str, typer.Argument(metavar="ID", help="Environment id, e.g. envgym/Sokoban-v0.")],
    seed: Annotated[
        int | None, typer.Option("--seed", "-s", help="Episode seed (same seed, same task); default: a random task.")
    ] = None,
    kwargs: EnvKwargsOption = None,
    kind: KindOption = None,
    seat: Annotated[
        str | None,
        typer.Option("--seat", help="Multi-agent ids: the seat you play; the others play at random. Default: all."),
    ] = None,
    screenshots: Annotated[
        str | None,
        typer.Option(
            "--screenshots",
            help="GUI envs: folder for the screen of every turn (turn-<k>.png); default: a new temporary folder.",
        ),
    ] = None,
) -> None:
    """Play an environment in the terminal.

    Shows the observation and the admissible actions, numbered; type an action, or its number
    (#N when the actions are numbers themselves). Commands: :help, :actions, :obs, :q (Ctrl-D
    ends the game too). Multi-agent ids: you play every seat in turn, or only --seat NAME while
    a random agent plays the others. Input may be piped, one action per line. GUI envs: the
    screen of every turn is saved as a PNG (its path printed) and the element list shown.
    """
    env_kwargs = parse_kwargs(kwargs)
    spec = select_spec(env_id, resolve_kind(kind))
    console = out_console()
    if spec.kind == "gymnasium":
        if seat is not None:
            fail("--seat is for multi-agent environments; this one has a single player.", EXIT_USAGE)
        result = _play_single(console, env_id, env_kwargs, seed, screenshots)
    else:
        result = _play_aec(console, env_id, env_kwargs, seed, seat)
    _print_summary(console, result)
