"""Connect four: a single-agent view against a built-in opponent, and a two-player AEC game.

The rules state lives in two Python-int bitboards (one per mark, 7 bits per column, bottom row
first, the 7th bit of each column always empty so that shifted lines never wrap) plus row
strings kept in step for the text board. Four in a row is four shift-and-mask
operations, so the random opponent costs microseconds; the medium and hard opponents run a small
negamax alpha-beta search with a threat-counting evaluation.
"""

from __future__ import annotations

import random
import re
from typing import Any, ClassVar

from envgym import InvalidAction, Task, TextEnv, Transition
from envgym.errors import InvalidKwargsError, check_choice
from envgym.multiagent import Played, TextAECEnv

__all__ = [
    "COLUMNS",
    "DIFFICULTIES",
    "OPPONENT_DEPTH",
    "ROWS",
    "ConnectFourAEC",
    "ConnectFourEnv",
    "best_moves",
    "has_four",
    "parse_column",
    "winning_cells",
]

DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")
ROWS = 6
COLUMNS = 7
_H1 = ROWS + 1
#: Search depth (plies) of the built-in opponent per difficulty; ``easy`` plays at random.
OPPONENT_DEPTH: dict[str, int] = {"easy": 0, "medium": 2, "hard": 4}
EMPTY = "."

_BOTTOM = sum(1 << (c * _H1) for c in range(COLUMNS))
_FULL = _BOTTOM * ((1 << ROWS) - 1)
_COLUMN_MASK = tuple(((1 << ROWS) - 1) << (c * _H1) for c in range(COLUMNS))
_CENTER_ORDER = (3, 2, 4, 1, 5, 0, 6)
_CENTER_WEIGHT = (
    _COLUMN_MASK[3],
    _COLUMN_MASK[2] | _COLUMN_MASK[4],
)
_WIN = 1_000
_NAMES = tuple(str(c + 1) for c in range(COLUMNS))
_HEADER = " " + " ".join(_NAMES)
_FOOTER = "+" + "-" * (2 * COLUMNS - 1) + "+"
_EMPTY_ROW = "|" + " ".join(EMPTY * COLUMNS) + "|"
FORMAT_HELP = (
    "Answer with the number of a column that is not full, 1 to 7 from the left, e.g. 4 for the centre; "
    "'drop 4' and 'column 4' also work."
)


def has_four(stones: int) -> bool:
    """True when the bitboard ``stones`` holds four in a row in any direction."""
    for s in (1, _H1, _H1 - 1, _H1 + 1):
        m = stones & (stones >> s)
        if m & (m >> (2 * s)):
            return True
    return False


def winning_cells(p: int, mask: int) -> int:
    """Empty cells that would complete four in a row for the stones ``p`` (``mask``: every stone),
    playable or not, on the bitboard of this module (bit ``col * 7 + row``, row 0 at the bottom).

    Vertical: three below. The other directions (shifts 7, 6 and 8: horizontal and the two
    diagonals) are written out, each shifted board computed once (the opponents' search calls this
    most): three stones on one side of the cell, or two on one side and one on the other.
    """
    r = (p << 1) & (p << 2) & (p << 3)
    up, down = p << 7, p >> 7
    t = up & (p << 14)
    r |= t & ((p << 21) | down)
    t = down & (p >> 14)
    r |= t & (up | (p >> 21))
    up, down = p << 6, p >> 6
    t = up & (p << 12)
    r |= t & ((p << 18) | down)
    t = down & (p >> 12)
    r |= t & (up | (p >> 18))
    up, down = p << 8, p >> 8
    t = up & (p << 16)
    r |= t & ((p << 24) | down)
    t = down & (p >> 16)
    r |= t & (up | (p >> 24))
    return r & (_FULL ^ mask)


def _evaluate(me: int, them: int, mask: int) -> int:
    """Static score for the player owning ``me``: threats (cells that would win) and centre control."""
    mine = winning_cells(me, mask)
    theirs = winning_cells(them, mask)
    return (
        4 * (mine.bit_count() - theirs.bit_count())
        + 2 * ((me & _CENTER_WEIGHT[0]).bit_count() - (them & _CENTER_WEIGHT[0]).bit_count())
        + ((me & _CENTER_WEIGHT[1]).bit_count() - (them & _CENTER_WEIGHT[1]).bit_count())
    )


def _negamax(me: int, mask: int, depth: int, alpha: int, beta: int) -> int:
    """Score for the player to move (stones ``me``) with ``depth`` plies left; the move was legal."""
    possible = (mask + _BOTTOM) & _FULL
    if winning_cells(me, mask) & possible:
        return _WIN + depth
    them = me ^ mask
    if not possible:
        return 0
    if depth == 0:
        return _evaluate(me, them, mask)
    threats = winning_cells(them, mask)
    forced = possible & threats
    if forced:
        if forced & (forced - 1):
            return -_WIN - depth + 1
        candidates = forced
    else:
        candidates = possible & ~(threats >> 1)
        if not candidates:
            return -_WIN - depth + 1
    best = -_WIN * 2
    for c in _CENTER_ORDER:
        move = candidates & _COLUMN_MASK[c]
        if not move:
            continue
        score = -_negamax(them, mask | move, depth - 1, -beta, -alpha)
        if score > best:
            best = score
            if score > alpha:
                alpha = score
                if alpha >= beta:
                    break
    return best


def best_moves(me: int, mask: int, depth: int) -> list[int]:
    """Every column whose ``depth``-ply negamax score is the best for the player to move."""
    possible = (mask + _BOTTOM) & _FULL
    cols = [c for c in _CENTER_ORDER if possible & _COLUMN_MASK[c]]
    wins = [c for c in cols if winning_cells(me, mask) & possible & _COLUMN_MASK[c]]
    if wins:
        return wins
    best = -_WIN * 3
    chosen: list[int] = []
    for c in cols:
        move = possible & _COLUMN_MASK[c]
        # A window just below the best so far: worse moves fail low, ties score exactly.
        score = -_negamax(me ^ mask, mask | move, depth - 1, -_WIN * 3, -(best - 1))
        if score > best:
            best, chosen = score, [c]
        elif score == best:
            chosen.append(c)
    return sorted(chosen)


class _Board:
    """Connect-four position: bitboards for the rules, cached row strings for the text."""

    __slots__ = ("heights", "mask", "moves", "open", "open_names", "open_text", "rows", "stones")

    def __init__(self) -> None:
        self.stones = {"X": 0, "O": 0}
        self.mask = 0
        self.heights = [0] * COLUMNS
        self.rows = [_EMPTY_ROW] * ROWS  # rows[0] is the top row
        self.moves = 0
        self.open = list(range(COLUMNS))
        self.open_names = list(_NAMES)
        self.open_text = ", ".join(_NAMES)

    def drop(self, col: int, mark: str) -> bool:
        """Drop ``mark`` in ``col`` (must not be full); True when it makes four in a row."""
        row = self.heights[col]
        bit = 1 << (col * _H1 + row)
        self.heights[col] = row + 1
        self.mask |= bit
        stones = self.stones[mark] | bit
        self.stones[mark] = stones
        r = ROWS - 1 - row
        line = self.rows[r]
        i = 2 * col + 1
        self.rows[r] = line[:i] + mark + line[i + 1 :]
        if row + 1 == ROWS:
            self.open.remove(col)
            self.open_names = [_NAMES[c] for c in self.open]
            self.open_text = ", ".join(self.open_names)
        self.moves += 1
        return self.moves >= 7 and has_four(stones)

    def full(self) -> bool:
        return self.moves == ROWS * COLUMNS

    def text(self) -> str:
        return "\n".join((_HEADER, *self.rows, _FOOTER, _HEADER))

    def check_open(self, col: int) -> None:
        if self.heights[col] >= ROWS:
            raise InvalidAction(f"column {col + 1} is full. Open columns: {self.open_text}.")


_ALIASES: dict[str, int] = {}
for _c in range(COLUMNS):
    for _form in ("{}", "drop {}", "column {}", "col {}", "Drop {}", "Column {}", "drop in column {}"):
        _ALIASES[_form.format(_c + 1)] = _c
_FILLER = frozenset((
    "i", "drop", "play", "put", "place", "move", "insert", "column", "col", "c", "in", "into", "at", "on",
    "the", "a", "my", "piece", "disc", "disk", "token", "stone", "x", "o", "number", "no", "will", "now",
))  # fmt: skip
_SPLIT = re.compile(r"[\s()\[\],.;:!?=#_/]+")


def parse_column(text: str) -> int:
    """Parse a column ``1``-``7`` (``"4"``, ``"drop 4"``, ``"column 4"``); returns 0-6 or raises InvalidAction."""
    col = _ALIASES.get(text)
    if col is not None:
        return col
    words = [w for w in _SPLIT.split(text.lower()) if w and w not in _FILLER]
    if len(words) == 1:
        col = _ALIASES.get(words[0])
        if col is not None:
            return col
    raise InvalidAction("expected a column number from 1 to 7 (e.g. 4, or 'drop 4').")


def _opponent_move(board: _Board, mark: str, depth: int, rng: random.Random) -> int:
    if depth <= 0:
        return rng.choice(board.open)
    moves = best_moves(board.stones[mark], board.mask, depth)
    return moves[0] if len(moves) == 1 else rng.choice(moves)


# ---------------------------------------------------------------------- single agent
class ConnectFourEnv(TextEnv):
    """Connect four against a built-in opponent.

    **Description.**
    Players take turns dropping a piece into one of 7 columns of a 6-row board; it falls to
    the lowest free cell. Four of one's pieces in a row, column or diagonal wins; a full
    board is a draw. ``X`` always moves first. The opponent's move is part of each step and
    its randomness (ties, random moves) comes from the episode seed.

    Opponents by ``difficulty`` (``opponent_depth`` overrides the search depth):

    * ``easy``: uniformly random open column;
    * ``medium``: 2-ply negamax search: wins at once when it can, blocks an immediate win,
      never plays under a cell where the agent would win, else the best move by a
      threat-and-centre evaluation (random among equals);
    * ``hard``: the same search 4 plies deep (alpha-beta), random among equal best moves.

    **Success** is a win at every difficulty.

    **Observation.**
    The rules and action format at reset, then after each step both sides' moves, the
    board (columns ``1``-``7`` labelled above and below, top row first, ``.`` empty) and a
    status line ``You are X. Open columns: 1, 2, ...``. Invalid moves are explained.

    **Actions.**
    A column number ``1``-``7`` (``4`` is the centre). Aliases: ``drop 4``, ``column 4``,
    ``col 4``, ``drop in column 4`` and filler words. ``info["admissible_actions"]`` lists
    the open columns. A full column or unparseable text is an invalid step.

    **Reward components.**
    ``success_reward`` +1 on a win; ``loss_reward`` -1 on a loss; ``draw_reward`` on a
    full-board draw (``draw_reward`` argument, default +0.5); ``invalid_action_reward``
    (``invalid_penalty``, default -0.1) per invalid step; ``step_cost_reward``
    (``step_cost``, default 0) per step.

    **Reward basis.** The reward is the sum of every component (``success_reward``, ``loss_reward``, ``draw_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.**
    Terminated on a win (reason ``success``), a loss or a draw (``failure``), or after
    ``invalid_limit`` invalid steps if set; truncated after ``max_turns`` steps (default 60).

    **Arguments.**
    difficulty: ``"easy"`` (default), ``"medium"`` or ``"hard"``, see above.
    agent_first: ``True`` (default) the agent plays X and moves first; ``False`` the
        opponent opens as X; ``None`` a coin flip from the seed.
    opponent_depth: search depth of the opponent in plies (``None``: 0/2/4 by difficulty,
        0 means random).
    draw_reward: value of the ``draw_reward`` component on a draw.
    Plus the common :class:`envgym.TextEnv` arguments (``max_turns``, ``invalid_limit``,
    ``invalid_penalty``, ``step_cost``, ``reward``, ``split``, ``render_mode``).

    **Version history.**
    v0: first version.
    """

    name = "connect_four"
    reward_components = ("success_reward", "loss_reward", "draw_reward", "invalid_action_reward", "step_cost_reward")
    reward_basis = reward_components  # their sum: none is diagnostic
    default_max_turns = 60

    def __init__(
        self,
        *,
        difficulty: str = "easy",
        agent_first: bool | None = True,
        opponent_depth: int | None = None,
        draw_reward: float = 0.5,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_choice("difficulty", difficulty, DIFFICULTIES)
        if agent_first not in (True, False, None):
            raise InvalidKwargsError(f"agent_first must be True, False or None (coin flip), got {agent_first!r}.")
        if opponent_depth is not None and (
            isinstance(opponent_depth, bool) or not isinstance(opponent_depth, int) or not 0 <= opponent_depth <= 12
        ):
            raise InvalidKwargsError(
                f"opponent_depth must be None or an integer from 0 (random) to 12, got {opponent_depth!r}."
            )
        if isinstance(draw_reward, bool) or not isinstance(draw_reward, (int, float)):
            raise InvalidKwargsError(f"draw_reward must be a number, got {draw_reward!r}.")
        self.difficulty = difficulty
        self.agent_first = agent_first
        self.opponent_depth = OPPONENT_DEPTH[difficulty] if opponent_depth is None else opponent_depth
        self.draw_reward = float(draw_reward)
        self.board = _Board()
        self.me = "X"
        self.them = "O"
        self._opening = ""

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        first = self.agent_first if self.agent_first is not None else rng.random() < 0.5
        self.me, self.them = ("X", "O") if first else ("O", "X")
        self.board = _Board()
        self._opening = ""
        if not first:
            c = _opponent_move(self.board, self.them, self.opponent_depth, rng)
            self.board.drop(c, self.them)
            self._opening = f"The opponent (X) opened in column {c + 1}."
        return Task(
            id=f"connect_four/{self.difficulty}/{'first' if first else 'second'}/{rng.getrandbits(40):010x}",
            goal=f"Win a game of connect four as {self.me} against a {self.difficulty} opponent.",
            difficulty=self.difficulty,
            extra={"agent_mark": self.me, "agent_first": first, "opponent_depth": self.opponent_depth},
        )

    def _intro(self) -> str:
        order = "You move first." if self.me == "X" else "The opponent moved first."
        text = (
            f"Connect four on a board of 6 rows and 7 columns. You play {self.me}, the {self.difficulty} opponent "
            f"plays {self.them}. {order} Players take turns dropping a piece into a column; it falls to the lowest "
            f"free cell. Four in a row, column or diagonal wins; a full board is a draw. You succeed by winning.\n"
            f"{FORMAT_HELP}"
        )
        return f"{text}\n{self._opening}" if self._opening else text

    def _observe(self) -> str:
        return f"{self.board.text()}\nYou are {self.me}. Open columns: {self.board.open_text}."

    def _parse(self, text: str) -> int:
        return parse_column(text)

    def _apply(self, col: int) -> Transition:
        board = self.board
        board.check_open(col)
        mine = f"You dropped in column {col + 1}"
        if board.drop(col, self.me):
            return self._end(f"{mine}: four in a row, you win!", "success_reward", 1.0, True)
        if board.full():
            return self._end(f"{mine}. The board is full: draw.", "draw_reward", self.draw_reward, False)
        reply = _opponent_move(board, self.them, self.opponent_depth, self.rng)
        theirs = f"{mine}. The opponent dropped in column {reply + 1}"
        if board.drop(reply, self.them):
            return self._end(f"{theirs}: four in a row, you lose.", "loss_reward", -1.0, False)
        if board.full():
            return self._end(f"{theirs}. The board is full: draw.", "draw_reward", self.draw_reward, False)
        return Transition(f"{theirs}.\n\n{self._observe()}")

    def _end(self, message: str, component: str, value: float, success: bool) -> Transition:
        text = f"{message}\n\n{self.board.text()}\nYou are {self.me}. Game over."
        return Transition(text, {component: value}, terminated=True, success=success)

    def admissible_actions(self) -> list[str]:
        return list(self.board.open_names)

    def sample_action(self, rng: random.Random) -> str:
        return rng.choice(self.board.open_names)


# ---------------------------------------------------------------------- two agents
class ConnectFourAEC(TextAECEnv):
    """Connect four for two agents (PettingZoo AEC).

    **Description.**
    ``player_0`` plays X and moves first, ``player_1`` plays O. Players alternate dropping a
    piece into one of 7 columns of a 6-row board; four in a row, column or diagonal wins; a
    full board is a draw. The game has no randomness: the seed only names the task.

    **Observation.**
    Per agent: the rules and action format until the agent's first move, what happened
    since its last move, the board (columns ``1``-``7``, top row first, ``.`` empty) and a
    status line saying whose turn it is, with the open columns when it is the agent's own.

    **Actions.**
    As in :class:`ConnectFourEnv`: a column ``1``-``7``, or ``drop 4`` / ``column 4``.
    ``infos[agent]["admissible_actions"]`` lists the open columns for the player to move
    and is empty for the other.

    **Reward components.**
    ``success_reward`` +1 to the winner, ``loss_reward`` -1 to the loser, ``draw_reward``
    (``draw_reward`` argument, default 0: zero-sum) to both on a draw,
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

    metadata: ClassVar[dict[str, Any]] = {**TextAECEnv.metadata, "name": "connect_four_v0"}
    name = "connect_four"
    _marks: ClassVar[dict[str, str]] = {"player_0": "X", "player_1": "O"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.board = _Board()

    def _new_game(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self.board = _Board()
        return Task(
            id=f"connect_four-2p/{rng.getrandbits(40):010x}",
            goal="Get four of your pieces in a row, column or diagonal before the other player.",
            difficulty="two-player",
        )

    def role(self, agent: str) -> str:
        return self._marks[agent]

    def _intro(self, agent: str) -> str:
        mark = self._marks[agent]
        other = "O" if mark == "X" else "X"
        order = "You move first." if mark == "X" else "The other player moves first."
        return (
            f"Connect four on a board of 6 rows and 7 columns against another player. You are {agent} and play "
            f"{mark}; the other player plays {other}. {order} A piece falls to the lowest free cell of its column. "
            f"Four in a row, column or diagonal wins; a full board is a draw. After {self.invalid_limit} invalid "
            f"moves in a row you forfeit.\n{FORMAT_HELP}"
        )

    def state_text(self) -> str:
        return self.board.text()

    def legal_actions(self, agent: str) -> list[str]:
        return list(self.board.open_names)

    def _parse(self, agent: str, text: str) -> int:
        return parse_column(text)

    def _play(self, agent: str, col: int) -> Played:
        board = self.board
        board.check_open(col)
        mark = self._marks[agent]
        text = f"{agent} ({mark}) dropped in column {col + 1}."
        if board.drop(col, mark):
            return Played(f"{text} Four in a row: {agent} wins.", winner=agent)
        if board.full():
            return Played(f"{text} The board is full: draw.", draw=True)
        return Played(text)

    def sample_action(self, agent: str, rng: random.Random) -> str:
        return rng.choice(self.board.open_names)
