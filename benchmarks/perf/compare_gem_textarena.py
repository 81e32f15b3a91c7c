"""envgym side by side with GEM and TextArena on the games they share, in one process.

Optional: needs ``pip install gem-llm textarena`` (``pip install 'envgym[bench]'``). A library
that is not importable is skipped with a message; the others are still measured.

For every game and library the script builds the environment once, times ``--resets`` resets
(seeds ``seed..seed+N-1``) and ``--steps`` steps with random *valid* actions, resetting when an
episode ends (those resets are not timed). Each step includes producing the text the agent reads
next, in each library's own way:

* envgym: ``env.step(action)`` through ``envgym.make`` (Gymnasium's wrappers included); random
  valid actions from ``env.unwrapped.sample_action(rng)``. Two-player games use the AEC id
  (``envgym.make_aec``): a step is ``env.step(action)`` + ``env.last()``.
* GEM (``gem.make("game:Sokoban-v0-easy")``): ``env.step("\\boxed{up}")`` returns the
  observation and ``info["suffix"]`` (the board). Valid actions are chosen by looking at the
  environment's state (moves that do not hit a wall, unrevealed cells, dictionary words).
* TextArena (``ta.make("Sokoban-v0")``, default wrappers): two-phase, ``done, info =
  env.step("[up]")`` then ``env.get_observation()`` for the next player; both are timed.
  Valid actions again come from the state (TextArena ends a game after two invalid moves).
  TextArena's default observation wrapper keeps the whole message history and does not clear it
  on ``reset``, so each game starts from a fresh ``ta.make`` (included in the reset time, as in
  TextArena's own game loops); within a game the observation is the full history, as designed.

Settings are matched where the libraries allow it (the table prints each one's id and
arguments): Sokoban 6x6 with 2 boxes, Minesweeper 5x5 with 5 mines, FrozenLake 4x4, 3x3
TicTacToe for two players, Wordle with 5-letter words.

Ratios are envgym time / other time: below 1 means envgym is faster.

Usage::

    python benchmarks/perf/compare_gem_textarena.py
    python benchmarks/perf/compare_gem_textarena.py --games Sokoban --steps 2000 --json

It measures and reports; it asserts nothing. Numbers measured on one machine (see README.md).
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import logging
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from typing import Any

LIBRARIES = ("envgym", "gem", "textarena")
_DIRS = ("up", "down", "left", "right")


# ---------------------------------------------------------------- adapters
class Adapter:
    """One library's environment behind ``reset(seed)``, ``action(rng)`` and ``step(action)``."""

    def reset(self, seed: int) -> None:
        raise NotImplementedError

    def action(self, rng: random.Random) -> str:
        raise NotImplementedError

    def step(self, action: str) -> bool:
        """Apply ``action`` and produce the next observation text; ``True`` when the episode ended."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the environment."""


class EnvgymSingle(Adapter):
    def __init__(self, env_id: str, kwargs: dict[str, Any]) -> None:
        import envgym

        self.env = envgym.make(env_id, **kwargs)
        self.sample = self.env.unwrapped.sample_action

    def reset(self, seed: int) -> None:
        self.env.reset(seed=seed)

    def action(self, rng: random.Random) -> str:
        return self.sample(rng)

    def step(self, action: str) -> bool:
        _, _, terminated, truncated, _ = self.env.step(action)
        return terminated or truncated

    def close(self) -> None:
        self.env.close()


class EnvgymAEC(Adapter):
    def __init__(self, env_id: str, kwargs: dict[str, Any]) -> None:
        import envgym

        self.env = envgym.make_aec(env_id, **kwargs)
        self.last: tuple[Any, ...] = ()

    def reset(self, seed: int) -> None:
        self.env.reset(seed=seed)
        self.last = self.env.last()

    def action(self, rng: random.Random) -> str:
        info = self.last[4]
        actions = info.get("admissible_actions") if isinstance(info, dict) else None
        if actions:
            return rng.choice(actions)
        sampler = getattr(self.env.unwrapped, "sample_action", None)
        if sampler is not None:
            return sampler(self.env.agent_selection, rng)
        return self.env.action_space(self.env.agent_selection).sample()

    def step(self, action: str) -> bool:
        self.env.step(action)
        if not self.env.agents:
            return True
        self.last = self.env.last()
        return bool(self.last[2] or self.last[3])

    def close(self) -> None:
        self.env.close()


class Gem(Adapter):
    def __init__(self, env_id: str, kwargs: dict[str, Any], chooser: Callable[[Any, random.Random], str]) -> None:
        import gem

        self.env = gem.make(env_id, **kwargs)
        self.chooser = chooser

    def reset(self, seed: int) -> None:
        self.env.reset(seed=seed)

    def action(self, rng: random.Random) -> str:
        return self.chooser(self.env, rng)

    def step(self, action: str) -> bool:
        _, _, terminated, truncated, _ = self.env.step(action)
        return bool(terminated or truncated)


def _gem_sokoban(env: Any, rng: random.Random) -> str:
    moves = [d for d in _DIRS if not env._would_collide_with_wall(d)] or list(_DIRS)
    return f"\\boxed{{{rng.choice(moves)}}}"


def _gem_minesweeper(env: Any, rng: random.Random) -> str:
    cells = [(r, c) for r in range(env.rows) for c in range(env.cols) if not env.revealed[r][c]]
    r, c = rng.choice(cells) if cells else (0, 0)
    return f"\\boxed{{reveal {r} {c}}}"


def _gem_wordle(env: Any, rng: random.Random) -> str:
    return f"\\boxed{{{rng.choice(env.available_words).upper()}}}"


class TextArena(Adapter):
    def __init__(
        self, env_id: str, kwargs: dict[str, Any], players: int, chooser: Callable[[Any, random.Random], str]
    ) -> None:
        import textarena as ta

        self.make = lambda: ta.make(env_id, **kwargs)
        self.env = self.make()
        self.players = players
        self.chooser = chooser

    def reset(self, seed: int) -> None:
        # TextArena's observation wrappers keep the message history across resets (the text
        # would grow without bound), so a game is a fresh ``ta.make``, as TextArena's own loops do.
        self.env = self.make()
        self.env.reset(num_players=self.players, seed=seed)
        self.env.get_observation()

    def action(self, rng: random.Random) -> str:
        return self.chooser(self.env, rng)

    def step(self, action: str) -> bool:
        done, _ = self.env.step(action)
        if done:
            self.env.close()
            return True
        self.env.get_observation()
        return False


def _ta_sokoban(env: Any, rng: random.Random) -> str:
    moves = [d for d in _DIRS if not env._would_collide_with_wall(d)] or list(_DIRS)
    return f"[{rng.choice(moves)}]"


def _ta_frozen_lake(env: Any, rng: random.Random) -> str:
    r, c = env.state.game_state["player_pos"]
    steps = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
    moves = [d for d, (dr, dc) in steps.items() if 0 <= r + dr < env.size and 0 <= c + dc < env.size]
    return f"[{rng.choice(moves)}]"


def _ta_minesweeper(env: Any, rng: random.Random) -> str:
    cells = [(r, c) for r in range(env.rows) for c in range(env.cols) if not env.revealed[r][c]]
    r, c = rng.choice(cells) if cells else (0, 0)
    return f"[{r} {c}]"


def _ta_tictactoe(env: Any, rng: random.Random) -> str:
    board = env.state.game_state["board"]
    cells = [r * 3 + c for r in range(3) for c in range(3) if board[r][c] == ""]
    return f"[{rng.choice(cells)}]"


def _ta_wordle(env: Any, rng: random.Random) -> str:
    return f"[{rng.choice(env.word_list)}]"


@dataclass(frozen=True)
class Entry:
    """How one library runs one game."""

    library: str
    env_id: str
    kwargs: dict[str, Any]
    build: Callable[[], Adapter]
    note: str = ""


@dataclass(frozen=True)
class Game:
    name: str
    entries: list[Entry] = field(default_factory=list)


def games() -> list[Game]:
    """The shared games with each library's closest settings."""

    def envgym_single(env_id: str, **kw: Any) -> Entry:
        return Entry("envgym", env_id, kw, lambda: EnvgymSingle(env_id, kw))

    def envgym_aec(env_id: str, **kw: Any) -> Entry:
        return Entry("envgym", env_id, kw, lambda: EnvgymAEC(env_id, kw), note="AEC, two players")

    def gem_entry(env_id: str, chooser: Callable[[Any, random.Random], str], note: str = "", **kw: Any) -> Entry:
        return Entry("gem", env_id, kw, lambda: Gem(env_id, kw, chooser), note=note)

    def ta_entry(
        env_id: str, chooser: Callable[[Any, random.Random], str], players: int = 1, note: str = "", **kw: Any
    ) -> Entry:
        return Entry("textarena", env_id, kw, lambda: TextArena(env_id, kw, players, chooser), note=note)

    return [
        Game(
            "Sokoban",
            [
                envgym_single("envgym/Sokoban-v0", size=6, boxes=2),
                gem_entry("game:Sokoban-v0-easy", _gem_sokoban, note="6x6, 2 boxes"),
                ta_entry("Sokoban-v0", _ta_sokoban, num_boxes=2, note="6x6"),
            ],
        ),
        Game(
            "FrozenLake",
            [
                envgym_single("envgym/FrozenLake-v0", size=4),
                ta_entry("FrozenLake-v0", _ta_frozen_lake, note="4x4, 3 holes"),
            ],
        ),
        Game(
            "Minesweeper",
            [
                envgym_single("envgym/Minesweeper-v0", rows=5, cols=5, mines=5),
                gem_entry("game:Minesweeper-v0-easy", _gem_minesweeper, note="5x5, 5 mines"),
                ta_entry("Minesweeper-v0-small", _ta_minesweeper, note="5x5, 5 mines"),
            ],
        ),
        Game(
            "TicTacToe",
            [
                envgym_aec("envgym/TicTacToe-v0"),
                ta_entry("TicTacToe-v0", _ta_tictactoe, players=2, note="two players"),
            ],
        ),
        Game(
            "Wordle",
            [
                envgym_single("envgym/Wordle-v0", max_guesses=6),
                gem_entry("game:Wordle-v0-hard", _gem_wordle, note="5 letters, 25 turns"),
                ta_entry("Wordle-v0", _ta_wordle, note="5 letters, 6 guesses"),
            ],
        ),
    ]


# ---------------------------------------------------------------- measurement
def availability() -> dict[str, str | None]:
    """``None`` for each importable library, else the reason it is skipped (import time too)."""
    status: dict[str, str | None] = {}
    for name, pip in (("envgym", "envgym"), ("gem", "gem-llm"), ("textarena", "textarena")):
        try:
            with redirect_stdout(io.StringIO()):  # some libraries print banners on import
                importlib.import_module(name)
        except Exception as err:  # noqa: BLE001 - any import failure means "skip this library"
            status[name] = f"not importable ({type(err).__name__}: {err}); install it with: pip install {pip}"
        else:
            status[name] = None
    logging.getLogger().setLevel(logging.WARNING)  # gem configures INFO logging on import
    return status


def measure(entry: Entry, *, resets: int, steps: int, seed: int) -> dict[str, Any]:
    """Time one library on one game; errors become a row with ``error`` set."""
    row: dict[str, Any] = {"library": entry.library, "id": entry.env_id, "kwargs": entry.kwargs, "note": entry.note}
    sink = io.StringIO()
    try:
        with redirect_stdout(sink):  # keep stdout for the report (some games print)
            t0 = time.perf_counter()
            adapter = entry.build()
            row["make_ms"] = 1e3 * (time.perf_counter() - t0)
            reset_times = []
            for i in range(resets):
                t0 = time.perf_counter()
                adapter.reset(seed + i)
                reset_times.append(time.perf_counter() - t0)
            rng = random.Random(seed)
            adapter.reset(seed)
            episodes = 1
            step_time = 0.0
            perf = time.perf_counter
            for _ in range(steps):
                action = adapter.action(rng)
                t0 = perf()
                done = adapter.step(action)
                step_time += perf() - t0
                if done:
                    episodes += 1
                    adapter.reset(seed + resets + episodes)
            adapter.close()
    except Exception as err:  # noqa: BLE001 - one failing library/game must not stop the others
        message = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(err)).replace("*", " ").split())
        row["error"] = f"{type(err).__name__}: {message}"[:300]
        return row
    row.update(
        reset_ms=1e3 * statistics.fmean(reset_times),
        reset_ms_median=1e3 * statistics.median(reset_times),
        step_us=1e6 * step_time / steps,
        steps_per_s=steps / step_time if step_time > 0 else None,
        episodes=episodes,
        error=None,
    )
    return row


def run(
    selected: Sequence[str] | None, libraries: Sequence[str], *, resets: int, steps: int, seed: int
) -> dict[str, Any]:
    status = availability()
    for name, reason in status.items():
        if reason is not None and name in libraries:
            print(f"skipping {name}: {reason}", file=sys.stderr, flush=True)
    results = []
    wanted = {g.lower() for g in selected} if selected else None
    for game in games():
        if wanted is not None and game.name.lower() not in wanted:
            continue
        rows = []
        for entry in game.entries:
            if entry.library not in libraries or status.get(entry.library) is not None:
                continue
            print(f"measuring {game.name} with {entry.library} ...", file=sys.stderr, flush=True)
            rows.append(measure(entry, resets=resets, steps=steps, seed=seed))
        base = next((r for r in rows if r["library"] == "envgym" and not r.get("error")), None)
        for r in rows:
            if base is not None and r is not base and not r.get("error"):
                r["reset_ratio_envgym_over_other"] = base["reset_ms"] / r["reset_ms"] if r["reset_ms"] else None
                r["step_ratio_envgym_over_other"] = base["step_us"] / r["step_us"] if r["step_us"] else None
        results.append({"game": game.name, "rows": rows})
    import envgym

    versions = {}
    for dist in ("envgym", "gem-llm", "textarena", "gymnasium"):
        try:
            from importlib.metadata import version

            versions[dist] = version(dist)
        except Exception:  # noqa: BLE001 - not installed
            versions[dist] = None
    return {
        "benchmark": "compare_gem_textarena",
        "envgym_version": envgym.__version__,
        "versions": versions,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "resets": resets,
        "steps": steps,
        "seed": seed,
        "skipped": {k: v for k, v in status.items() if v is not None},
        "results": results,
    }


def _fmt(value: Any, spec: str) -> str:
    digits = re.match(r"\d*", spec)
    width = int(digits[0]) if digits and digits[0] else 0
    return f"{'-':>{width}}" if value is None else format(value, spec)


def print_table(report: dict[str, Any]) -> None:
    print(f"envgym {report['envgym_version']} | Python {report['python']} | {report['platform']}")
    print("versions: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in report["versions"].items()))
    print(
        f"{report['resets']} timed resets and {report['steps']} timed random valid steps per row; "
        "ratios are envgym time / other time (below 1: envgym faster)"
    )
    for name, reason in report["skipped"].items():
        print(f"skipped {name}: {reason}")
    header = (
        f"{'game':<12} {'library':<10} {'id':<24} {'reset ms':>9} {'step us':>9} {'steps/s':>10} "
        f"{'reset ratio':>11} {'step ratio':>10}  settings"
    )
    print(header)
    print("-" * len(header))
    for game in report["results"]:
        for r in game["rows"]:
            settings = ", ".join(f"{k}={v}" for k, v in r["kwargs"].items())
            settings = "; ".join(x for x in (settings, r.get("note", "")) if x)
            if r.get("error"):
                print(f"{game['game']:<12} {r['library']:<10} {r['id']:<24} ERROR: {r['error'][:100]}")
                continue
            print(
                f"{game['game']:<12} {r['library']:<10} {r['id']:<24} {_fmt(r['reset_ms'], '9.3f')} "
                f"{_fmt(r['step_us'], '9.1f')} {_fmt(r['steps_per_s'], '10,.0f')} "
                f"{_fmt(r.get('reset_ratio_envgym_over_other'), '11.4f')} "
                f"{_fmt(r.get('step_ratio_envgym_over_other'), '10.3f')}  {settings}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--games",
        nargs="+",
        metavar="GAME",
        help="Games to compare (default: all): " + ", ".join(g.name for g in games()),
    )
    parser.add_argument(
        "--libraries",
        nargs="+",
        choices=LIBRARIES,
        default=list(LIBRARIES),
        help="Libraries to measure (default: all three).",
    )
    parser.add_argument("--resets", type=int, default=50, help="Timed resets per row (default 50).")
    parser.add_argument("--steps", type=int, default=5_000, help="Timed steps per row (default 5000).")
    parser.add_argument("--seed", type=int, default=0, help="First seed (default 0).")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON instead of a table.")
    args = parser.parse_args(argv)
    if args.resets < 1 or args.steps < 1:
        parser.error(f"--resets and --steps must be at least 1, got {args.resets} and {args.steps}.")
    known = {g.name.lower() for g in games()}
    unknown = [g for g in args.games or () if g.lower() not in known]
    if unknown:
        parser.error(f"unknown game(s) {unknown}; choose from {', '.join(g.name for g in games())}.")
    report = run(args.games, args.libraries, resets=args.resets, steps=args.steps, seed=args.seed)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
