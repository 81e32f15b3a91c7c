"""Tic-tac-toe: a single-agent view against a built-in opponent, and a two-player AEC game.

The board is a list of nine one-character strings (``"X"``, ``"O"`` or ``"."``), cell ``i`` at
row ``i // 3`` and column ``i % 3``, named column letter then row number (``"b2"`` is cell 4, the
centre). The opponents' choices are memoised per position, so even the perfect one costs a
dictionary lookup per move.
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any, ClassVar

from envgym import InvalidAction, Task, TextEnv, Transition
from envgym.errors import InvalidKwargsError, check_choice
from envgym.multiagent import Played, TextAECEnv

__all__ = [
    "DIFFICULTIES",
    "TicTacToeAEC",
    "TicTacToeEnv",
    "cell_name",
    "parse_cell",
    "perfect_moves",
    "render_board",
    "winner",
]

DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
EMPTY = "."
#: Cell names in index order: a1 b1 c1 / a2 b2 c2 / a3 b3 c3.
NAMES: tuple[str, ...] = tuple(f"{col}{row}" for row in "123" for col in "abc")
LINES: tuple[tuple[int, int, int], ...] = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8),  # rows
    (0, 3, 6), (1, 4, 7), (2, 5, 8),  # columns
    (0, 4, 8), (2, 4, 6),  # diagonals
)  # fmt: skip
_LINES_THROUGH: tuple[tuple[tuple[int, int, int], ...], ...] = tuple(
    tuple(line for line in LINES if i in line) for i in range(9)
)
_TEMPLATE = (
    "    a   b   c\n"
    "1   {} | {} | {}\n"
    "   ---+---+---\n"
    "2   {} | {} | {}\n"
    "   ---+---+---\n"
    "3   {} | {} | {}"
)  # fmt: skip
FORMAT_HELP = (
    "Answer with one free cell: column letter then row number, e.g. b2 for the centre. "
    "Also accepted: the cell number 1-9 (1 = a1 top left, 3 = c1, 9 = c3 bottom right), "
    "'row column' such as '2 3' (= c2), and wording like 'place X at b2'."
)


def cell_name(index: int) -> str:
    """``0 -> "a1"``, ``4 -> "b2"``, ``8 -> "c3"``."""
    return NAMES[index]


def render_board(board: list[str]) -> str:
    """The board as text, columns a-c across and rows 1-3 down, ``.`` for a free cell."""
    return _TEMPLATE.format(*board)


def completes_line(board: list[str] | str, index: int, mark: str) -> bool:
    """True when ``mark`` at ``index`` is part of a full line of ``mark`` on ``board``."""
    for a, b, c in _LINES_THROUGH[index]:
        if board[a] == mark and board[b] == mark and board[c] == mark:
            return True
    return False


def winner(board: list[str] | str) -> str | None:
    """``"X"`` or ``"O"`` when that mark has three in a row, else ``None``."""
    for a, b, c in LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return None


# ---------------------------------------------------------------------- parsing
_ALIASES: dict[str, int] = {}
for _i, _name in enumerate(NAMES):
    _row, _col = _i // 3 + 1, "abc"[_i % 3]
    for _alias in (
        _name, _name.upper(), f"{_row}{_col}", f"{_row}{_col.upper()}", str(_i + 1),
        f"{_row} {_i % 3 + 1}", f"{_row},{_i % 3 + 1}", f"{_row}, {_i % 3 + 1}", f"({_row}, {_i % 3 + 1})",
    ):  # fmt: skip
        _ALIASES[_alias] = _i
_FILLER = frozenset((
    "place", "play", "put", "mark", "move", "take", "choose", "select", "pick", "drop", "at", "on", "in",
    "into", "to", "the", "cell", "square", "position", "spot", "my", "i", "x", "o", "an", "row", "col",
    "column", "number",
))  # fmt: skip
_SPLIT = re.compile(r"[\s()\[\],.;:!?=\-_/]+")


def parse_cell(text: str) -> int:
    """Parse a cell written as ``b2`` (main form), ``B2``/``2b``, ``5`` (1-9) or ``row col`` (``2 2``).

    Filler words are ignored (``"place X at b2"``). Raises :class:`InvalidAction` otherwise.
    """
    index = _ALIASES.get(text)
    if index is not None:
        return index
    words = [w for w in _SPLIT.split(text.lower()) if w and w not in _FILLER]
    for candidate in (" ".join(words), "".join(words)):
        index = _ALIASES.get(candidate)
        if index is not None:
            return index
    cells = [_ALIASES[w] for w in words if w in _ALIASES]
    if len(cells) == 1:  # one cell among stray words ("put a mark on b2")
        return cells[0]
    raise InvalidAction(
        "expected a cell like b2 (column a-c, then row 1-3); a cell number 1-9 or 'row column' like '2 3' also work."
    )


# ---------------------------------------------------------------------- opponents
def _to_move(key: str) -> str:
    return "X" if key.count("X") == key.count("O") else "O"


@functools.cache
def _value(key: str) -> int:
    """Minimax value (+1 win, 0 draw, -1 loss) for the player to move in a non-final position."""
    mark = _to_move(key)
    best = -2
    for i, cell in enumerate(key):
        if cell != EMPTY:
            continue
        if completes_line(key[:i] + mark + key[i + 1 :], i, mark):
            return 1
        child = key[:i] + mark + key[i + 1 :]
        v = 0 if EMPTY not in child else -_value(child)
        best = max(best, v)
    return 0 if best == -2 else best


@functools.cache
def perfect_moves(key: str) -> tuple[int, ...]:
    """Every minimax-optimal move of the player to move in ``key`` (the board as a 9-char string)."""
    mark = _to_move(key)
    scored: list[tuple[int, int]] = []
    for i, cell in enumerate(key):
        if cell != EMPTY:
            continue
        child = key[:i] + mark + key[i + 1 :]
        if completes_line(child, i, mark):
            v = 1
        else:
            v = 0 if EMPTY not in child else -_value(child)
        scored.append((v, i))
    best = max(v for v, _ in scored)
    return tuple(i for v, i in scored if v == best)


#: Probability that the medium opponent blocks the agent's immediate win when it has no win itself.
MEDIUM_BLOCK_PROBABILITY = 0.5


@functools.cache
def heuristic_moves(key: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``(wins, blocks, free)`` for the player to move: its winning cells, the cells that stop
    the other's immediate win, and every free cell."""
    mark = _to_move(key)
    other = "O" if mark == "X" else "X"
    free = tuple(i for i, cell in enumerate(key) if cell == EMPTY)
    wins = tuple(i for i in free if completes_line(key[:i] + mark + key[i + 1 :], i, mark))
    blocks = tuple(i for i in free if completes_line(key[:i] + other + key[i + 1 :], i, other))
    return wins, blocks, free


def _opponent_move(board: list[str], difficulty: str, rng: random.Random) -> int:
    if difficulty == "easy":
        return rng.choice([i for i in range(9) if board[i] == EMPTY])
    key = "".join(board)
    if difficulty == "hard":
        moves = perfect_moves(key)
    else:
        wins, blocks, moves = heuristic_moves(key)
        if wins:
            moves = wins
        elif blocks and rng.random() < MEDIUM_BLOCK_PROBABILITY:
            moves = blocks
    return moves[0] if len(moves) == 1 else rng.choice(moves)


def _free_names(board: list[str]) -> list[str]:
    return [NAMES[i] for i in range(9) if board[i] == EMPTY]


# ---------------------------------------------------------------------- single agent
class TicTacToeEnv(TextEnv):
    """Tic-tac-toe against a built-in opponent.

    **Description.**
    The classic 3x3 game. The agent and the opponent take turns marking a free cell; the
    first with three marks in a row, column or diagonal wins; a full board without a line
    is a draw. ``X`` always moves first. The opponent's move is part of each step, and its
    randomness comes from the episode seed (same seed, same game for the same moves).

    Opponents by ``difficulty``:

    * ``easy``: uniformly random free cell;
    * ``medium``: takes an immediate win when it has one; otherwise blocks the agent's
      immediate win with probability 1/2 (it "sees" half of the threats), else plays a
      random free cell;
    * ``hard``: perfect minimax play (random among the optimal moves). It never loses, so
      against it a draw is the best possible result.

    **Success** is a win on ``easy`` and ``medium``, and a win *or a draw* on ``hard``
    (perfect play cannot be beaten, so not losing is the task). The best achievable success
    rates when the agent moves first (exact, from the oracle's expectimax) are about 99.5%
    (easy), 96.3% (medium) and 100% (hard); moving second, 93.9%, 67.5% and 100%.

    **Observation.**
    The rules and action format at reset, then after each step what both sides played, the
    board (columns ``a``-``c`` across, rows ``1``-``3`` down, ``.`` free) and a status line
    ``You are X. Free cells: a1, b1, ...``. Invalid moves are explained above the board.

    **Actions.**
    One free cell written column letter then row number: ``b2`` is the centre. Accepted
    aliases: ``B2``, ``2b``, the cell number ``1``-``9`` (row by row from the top left:
    ``1`` = a1, ``3`` = c1, ``9`` = c3), ``row column`` such as ``2 3`` or ``(2, 3)``
    (= c2), and filler words (``place X at b2``). ``info["admissible_actions"]`` lists the
    free cells in the main form. A taken cell or unparseable text is an invalid step.

    **Reward components.**
    ``success_reward`` +1 on a win; ``loss_reward`` -1 on a loss; ``draw_reward`` on a
    draw (``draw_reward`` argument, default +0.5: better than a loss, and the best result
    against the hard opponent); ``invalid_action_reward`` (``invalid_penalty``, default
    -0.1) per invalid step; ``step_cost_reward`` (``step_cost``, default 0) per step.

    **Reward basis.** The reward is the sum of every component (``success_reward``, ``loss_reward``, ``draw_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.**
    Terminated on a win, a loss or a draw (termination reason ``success`` or ``failure``
    following the success rule above), or after ``invalid_limit`` invalid steps if set;
    truncated after ``max_turns`` steps (default 20).

    **Arguments.**
    difficulty: ``"easy"`` (default), ``"medium"`` or ``"hard"``, see above.
    agent_first: ``True`` (default) the agent plays X and moves first; ``False`` the
        opponent opens as X and the agent plays O; ``None`` a coin flip from the seed.
    draw_reward: value of the ``draw_reward`` component on a draw.
    Plus the common :class:`envgym.TextEnv` arguments (``max_turns``, ``invalid_limit``,
    ``invalid_penalty``, ``step_cost``, ``reward``, ``split``, ``render_mode``).

    **Version history.**
    v0: first version.
    """

    name = "tictactoe"
    reward_components = ("success_reward", "loss_reward", "draw_reward", "invalid_action_reward", "step_cost_reward")
    reward_basis = reward_components  # their sum: none is diagnostic
    default_max_turns = 20
    numbers_are_actions = True  # 1-9 name the cells (1 = a1 ... 9 = c3)

    def __init__(
        self,
        *,
        difficulty: str = "easy",
        agent_first: bool | None = True,
        draw_reward: float = 0.5,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_choice("difficulty", difficulty, DIFFICULTIES)
        if agent_first not in (True, False, None):
            raise InvalidKwargsError(f"agent_first must be True, False or None (coin flip), got {agent_first!r}.")
        if isinstance(draw_reward, bool) or not isinstance(draw_reward, (int, float)):
            raise InvalidKwargsError(f"draw_reward must be a number, got {draw_reward!r}.")
        self.difficulty = difficulty
        self.agent_first = agent_first
        self.draw_reward = float(draw_reward)
        self.board: list[str] = [EMPTY] * 9
        self.free: list[str] = list(NAMES)
        self._free_text = ", ".join(NAMES)
        self.me = "X"
        self.them = "O"

    def _mark(self, index: int, mark: str) -> None:
        self.board[index] = mark
        self.free.remove(NAMES[index])
        self._free_text = ", ".join(self.free)

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        first = self.agent_first if self.agent_first is not None else rng.random() < 0.5
        self.me, self.them = ("X", "O") if first else ("O", "X")
        self.board = [EMPTY] * 9
        self.free = list(NAMES)
        self._free_text = ", ".join(NAMES)
        self._opening = ""
        if not first:
            i = _opponent_move(self.board, self.difficulty, rng)
            self._mark(i, self.them)
            self._opening = f"The opponent (X) opened at {NAMES[i]}."
        goal = "Win" if self.difficulty != "hard" else "Win or draw"
        return Task(
            id=f"tictactoe/{self.difficulty}/{'first' if first else 'second'}/{rng.getrandbits(40):010x}",
            goal=f"{goal} a game of tic-tac-toe as {self.me} against a {self.difficulty} opponent.",
            difficulty=self.difficulty,
            extra={"agent_mark": self.me, "agent_first": first},
        )

    def _intro(self) -> str:
        order = "You move first." if self.me == "X" else "The opponent moved first."
        if self.difficulty == "hard":
            success = "The opponent plays perfectly: you succeed by winning or drawing (not losing)."
        else:
            success = "You succeed only by winning; a draw is not a success."
        text = (
            f"Tic-tac-toe on a 3x3 board. You play {self.me}, the {self.difficulty} opponent plays {self.them}. "
            f"{order} Players take turns marking a free cell; three in a row, column or diagonal wins, "
            f"a full board without a line is a draw. {success}\n{FORMAT_HELP}"
        )
        return f"{text}\n{self._opening}" if self._opening else text

    def _observe(self) -> str:
        return f"{_TEMPLATE.format(*self.board)}\nYou are {self.me}. Free cells: {self._free_text}."

    def _parse(self, text: str) -> int:
        return parse_cell(text)

    def _apply(self, index: int) -> Transition:
        board = self.board
        if board[index] != EMPTY:
            raise InvalidAction(f"{NAMES[index]} is already taken by {board[index]}. Free cells: {self._free_text}.")
        self._mark(index, self.me)
        mine = NAMES[index]
        if completes_line(board, index, self.me):
            return self._end(f"You played {mine}: three in a row, you win!", "success_reward", 1.0, True)
        if EMPTY not in board:
            return self._draw(f"You played {mine}. The board is full: draw.")
        j = _opponent_move(board, self.difficulty, self.rng)
        self._mark(j, self.them)
        theirs = f"You played {mine}. The opponent played {NAMES[j]}"
        if completes_line(board, j, self.them):
            return self._end(f"{theirs}: three in a row, you lose.", "loss_reward", -1.0, False)
        if EMPTY not in board:
            return self._draw(f"{theirs}. The board is full: draw.")
        return Transition(f"{theirs}.\n\n{self._observe()}")

    def _end(self, message: str, component: str, value: float, success: bool) -> Transition:
        text = f"{message}\n\n{_TEMPLATE.format(*self.board)}\nYou are {self.me}. Game over."
        return Transition(text, {component: value}, terminated=True, success=success)

    def _draw(self, message: str) -> Transition:
        return self._end(message, "draw_reward", self.draw_reward, self.difficulty == "hard")

    def admissible_actions(self) -> list[str]:
        return list(self.free)

    def sample_action(self, rng: random.Random) -> str:
        return rng.choice(self.free)


# ---------------------------------------------------------------------- two agents
class TicTacToeAEC(TextAECEnv):
    """Tic-tac-toe for two agents (PettingZoo AEC).

    **Description.**
    ``player_0`` plays X and moves first, ``player_1`` plays O. Players alternate marking a
    free cell; three in a row, column or diagonal wins; a full board is a draw. The game has
    no randomness: the seed only names the task.

    **Observation.**
    Per agent: the rules and action format until the agent's first move, what happened
    since its last move (the other's move, or why its own move was invalid), the board
    (columns ``a``-``c``, rows ``1``-``3``, ``.`` free) and a status line saying whose turn it
    is, with the free cells when it is the agent's own.

    **Actions.**
    As in :class:`TicTacToeEnv`: ``b2`` (column letter, row number), or ``1``-``9``,
    ``row column`` (``2 3``) and filler words. ``infos[agent]["admissible_actions"]`` lists
    the free cells for the player to move and is empty for the other.

    **Reward components.**
    ``success_reward`` +1 to the winner, ``loss_reward`` -1 to the loser, ``draw_reward``
    (``draw_reward`` argument, default 0: the game is zero-sum) to both on a draw,
    ``invalid_action_reward`` (``invalid_penalty``, default -0.1) per invalid move.

    **Reward basis.** Each agent's reward is the sum of its components (``success_reward``, ``loss_reward``, ``draw_reward``, ``invalid_action_reward``): none is diagnostic.

    **Episode end.**
    Both agents terminate on a win, a draw, or a forfeit: after ``invalid_limit``
    (default 3) invalid moves *in a row* the offender loses (reason ``invalid_limit``) and
    the other wins. Then each agent must be stepped with ``None`` once (PettingZoo rule).
    See :mod:`envgym.multiagent` for the shared conventions.

    **Arguments.**
    ``invalid_limit``, ``invalid_penalty``, ``draw_reward``, ``render_mode`` (see
    :class:`envgym.multiagent.TextAECEnv`).

    **Version history.**
    v0: first version.
    """

    metadata: ClassVar[dict[str, Any]] = {**TextAECEnv.metadata, "name": "tictactoe_v0"}
    name = "tictactoe"
    numbers_are_actions = True  # 1-9 name the cells (1 = a1 ... 9 = c3)
    _marks: ClassVar[dict[str, str]] = {"player_0": "X", "player_1": "O"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.board: list[str] = [EMPTY] * 9

    def _new_game(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self.board = [EMPTY] * 9
        return Task(
            id=f"tictactoe-2p/{rng.getrandbits(40):010x}",
            goal="Get three of your marks in a row, column or diagonal before the other player.",
            difficulty="two-player",
        )

    def role(self, agent: str) -> str:
        return self._marks[agent]

    def _intro(self, agent: str) -> str:
        mark = self._marks[agent]
        other = "O" if mark == "X" else "X"
        order = "You move first." if mark == "X" else "The other player moves first."
        return (
            f"Tic-tac-toe on a 3x3 board against another player. You are {agent} and play {mark}; "
            f"the other player plays {other}. {order} Three in a row, column or diagonal wins; a full board "
            f"is a draw. After {self.invalid_limit} invalid moves in a row you forfeit.\n{FORMAT_HELP}"
        )

    def state_text(self) -> str:
        return _TEMPLATE.format(*self.board)

    def legal_actions(self, agent: str) -> list[str]:
        return _free_names(self.board)

    def _parse(self, agent: str, text: str) -> int:
        return parse_cell(text)

    def _play(self, agent: str, index: int) -> Played:
        board = self.board
        if board[index] != EMPTY:
            raise InvalidAction(
                f"{NAMES[index]} is already taken by {board[index]}. Free cells: {', '.join(_free_names(board))}."
            )
        mark = self._marks[agent]
        board[index] = mark
        text = f"{agent} ({mark}) played {NAMES[index]}."
        if completes_line(board, index, mark):
            return Played(f"{text} Three in a row: {agent} wins.", winner=agent)
        if EMPTY not in board:
            return Played(f"{text} The board is full: draw.", draw=True)
        return Played(text)

    def sample_action(self, agent: str, rng: random.Random) -> str:
        return NAMES[rng.choice([i for i in range(9) if self.board[i] == EMPTY])]
