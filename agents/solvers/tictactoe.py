"""Oracle for ``envgym/TicTacToe-*``: exact expectimax against the documented opponent.

The solver reads the board from the observation text (the last board printed) and the
difficulty from ``info["task"]["difficulty"]``. Perfect minimax alone is not enough to *win*
reliably: against the random and the win-or-block opponents many moves are equally safe but not
equally promising. So the solver models the opponent exactly as its env card documents it
(easy: uniform over free cells; medium: a win if it has one, else a block half of the time,
else uniform; hard: uniform over the minimax-optimal moves) and picks the move with the highest probability of success, where success
is a win on easy/medium and a win or a draw on hard. Every position has at most 9 free cells, so
the whole game tree is searched (and memoised) in milliseconds.
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "parse_board", "success_probability"]

_EMPTY = "."
_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
_NAMES = tuple(f"{col}{row}" for row in "123" for col in "abc")
_ROW = re.compile(r"^\s*([123])\s+([XO.])\s*\|\s*([XO.])\s*\|\s*([XO.])\s*$", re.MULTILINE)
#: Utility of a draw when only wins count: far below a win, above a loss.
_DRAW_TIEBREAK = 1e-6


def parse_board(observation: str) -> str:
    """The last board in ``observation`` as a 9-character string (rows 1-3, columns a-c)."""
    rows: dict[str, str] = {}
    for match in _ROW.finditer(observation):
        if match.group(1) == "1":
            rows = {}
        rows[match.group(1)] = "".join(match.group(2, 3, 4))
    if sorted(rows) != ["1", "2", "3"]:
        raise ValueError(f"no tic-tac-toe board found in the observation: {observation[-300:]!r}")
    return rows["1"] + rows["2"] + rows["3"]


def _winner(board: str) -> str | None:
    for a, b, c in _LINES:
        if board[a] != _EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return None


def _to_move(board: str) -> str:
    return "X" if board.count("X") == board.count("O") else "O"


def _play(board: str, i: int, mark: str) -> str:
    return board[:i] + mark + board[i + 1 :]


@functools.cache
def _minimax(board: str) -> int:
    """Game value for the player to move: +1 win, 0 draw, -1 loss."""
    won = _winner(board)
    if won is not None:
        return 1 if won == _to_move(board) else -1
    free = [i for i, c in enumerate(board) if c == _EMPTY]
    if not free:
        return 0
    mark = _to_move(board)
    return max(-_minimax(_play(board, i, mark)) for i in free)


def _opponent_model(board: str, difficulty: str) -> dict[int, float]:
    """Probability of each move of the documented opponent in ``board``."""
    mark = _to_move(board)
    free = [i for i, c in enumerate(board) if c == _EMPTY]
    if difficulty == "hard":
        best = max(-_minimax(_play(board, i, mark)) for i in free)
        moves = [i for i in free if -_minimax(_play(board, i, mark)) == best]
        return {i: 1 / len(moves) for i in moves}
    if difficulty == "medium":
        other = "O" if mark == "X" else "X"
        wins = [i for i in free if _winner(_play(board, i, mark)) == mark]
        if wins:
            return {i: 1 / len(wins) for i in wins}
        blocks = [i for i in free if _winner(_play(board, i, other)) == other]
        if blocks:  # blocks half of the time, else plays at random
            dist = {i: 0.5 / len(free) for i in free}
            for i in blocks:
                dist[i] += 0.5 / len(blocks)
            return dist
    return {i: 1 / len(free) for i in free}


def _terminal_utility(board: str, me: str, difficulty: str) -> float | None:
    won = _winner(board)
    if won is not None:
        return 1.0 if won == me else 0.0
    if _EMPTY not in board:
        return 1.0 if difficulty == "hard" else _DRAW_TIEBREAK
    return None


@functools.cache
def _my_value(board: str, me: str, difficulty: str) -> float:
    """Best expected utility for ``me`` to move in ``board``."""
    return max(_after_my_move(_play(board, i, me), me, difficulty) for i, c in enumerate(board) if c == _EMPTY)


@functools.cache
def _after_my_move(board: str, me: str, difficulty: str) -> float:
    """Expected utility once ``me`` has moved, averaging over the opponent's documented choice."""
    done = _terminal_utility(board, me, difficulty)
    if done is not None:
        return done
    them = "O" if me == "X" else "X"
    total = 0.0
    for j, p in _opponent_model(board, difficulty).items():
        child = _play(board, j, them)
        done = _terminal_utility(child, me, difficulty)
        total += p * (done if done is not None else _my_value(child, me, difficulty))
    return total


def success_probability(difficulty: str, *, agent_first: bool = True) -> float:
    """Exact success probability of this solver from the start of a game (draw tie-break removed)."""
    if agent_first:
        return _round_success(_my_value(_EMPTY * 9, "X", difficulty), difficulty)
    first = _opponent_model(_EMPTY * 9, difficulty)
    total = sum(p * _my_value(_play(_EMPTY * 9, j, "X"), "O", difficulty) for j, p in first.items())
    return _round_success(total, difficulty)


def _round_success(value: float, difficulty: str) -> float:
    # With the tie-break the value is P(win) + 1e-6 * P(draw); P(draw) <= 1 bounds the error.
    return value if difficulty == "hard" else value - _DRAW_TIEBREAK * max(0.0, min(1.0, value))


class Solver(Policy):
    """Plays the move with the highest success probability against the env's documented opponent."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self.rng = random.Random(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        board = parse_board(observation)
        difficulty = str(info.get("task", {}).get("difficulty", "easy"))
        if difficulty not in ("easy", "medium", "hard"):
            difficulty = "hard"  # an unknown opponent: assume the strongest
        me = _to_move(board)
        free = [i for i, c in enumerate(board) if c == _EMPTY]
        if not free:
            return "a1"
        wins = [i for i in free if _winner(_play(board, i, me)) == me]
        if wins:  # as good as any other winning line, and quicker
            return _NAMES[wins[0]]
        scored = [(_after_my_move(_play(board, i, me), me, difficulty), i) for i in free]
        best = max(v for v, _ in scored)
        choices = [i for v, i in scored if v >= best - 1e-12]
        return _NAMES[self.rng.choice(choices)]
