"""Games: Sokoban, FrozenLake, Wordle, Minesweeper, Countdown, TicTacToe, ConnectFour.

Only specs live here (string entry points): registering the family imports no game code. Every
game has a base id (``difficulty="easy"`` unless stated) and ``-Easy``/``-Medium``/``-Hard``
presets; explicit kwargs (``size``, ``boxes``, ...) override a preset.
"""

from __future__ import annotations

from typing import Any

from envgym.registration import EnvSpec

FAMILY = "games"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {"suite": "games-v1", "perf": "benchmarks/perf/envs.py"}
DIFFICULTIES = ("easy", "medium", "hard")


def _game(name: str, module: str, cls: str, summary: str, **extra: dict[str, Any]) -> list[EnvSpec]:
    entry = f"envgym.environments.games.{module}:{cls}"
    base = f"envgym/{name}-v0"
    specs = [EnvSpec(id=base, entry_point=entry, family=FAMILY, summary=summary)]
    for level in DIFFICULTIES:
        specs.append(
            EnvSpec(
                id=f"envgym/{name}-{level.capitalize()}-v0",
                entry_point=entry,
                family=FAMILY,
                summary=f"{summary} ({level})",
                kwargs={"difficulty": level},
                variant_of=base,
            )
        )
    for variant, kwargs in extra.items():
        specs.append(
            EnvSpec(
                id=f"envgym/{name}-{variant}-v0",
                entry_point=entry,
                family=FAMILY,
                summary=f"{summary} ({variant.lower()})",
                kwargs=kwargs,
                variant_of=base,
            )
        )
    return specs


SPECS: list[EnvSpec] = [
    *_game(
        "Sokoban", "sokoban", "SokobanEnv", "Push every box onto a target on a procedurally generated, solvable level"
    ),
    *_game(
        "FrozenLake",
        "frozen_lake",
        "FrozenLakeEnv",
        "Walk from start to goal across a frozen lake without falling into a hole",
        Slippery={"slippery": True},
    ),
    *_game("Wordle", "wordle", "WordleEnv", "Guess the hidden five-letter word with colour feedback"),
    *_game("Minesweeper", "minesweeper", "MinesweeperEnv", "Reveal every safe cell without hitting a mine"),
    *_game("Countdown", "countdown", "CountdownEnv", "Combine the given numbers with + - * / to reach the target"),
    *_game("TicTacToe", "tictactoe", "TicTacToeEnv", "Tic-tac-toe against a built-in opponent"),
    *_game("ConnectFour", "connect_four", "ConnectFourEnv", "Connect four against a built-in opponent"),
    EnvSpec(
        id="envgym/TicTacToe-v0",
        entry_point="envgym.environments.games.tictactoe:TicTacToeAEC",
        family=FAMILY,
        summary="Tic-tac-toe for two agents (PettingZoo AEC)",
        kind="aec",
    ),
    EnvSpec(
        id="envgym/ConnectFour-v0",
        entry_point="envgym.environments.games.connect_four:ConnectFourAEC",
        family=FAMILY,
        summary="Connect four for two agents (PettingZoo AEC)",
        kind="aec",
    ),
]
