"""Minesweeper: reveal every safe cell of a no-guess board without touching a mine."""

from __future__ import annotations

import functools
import random
import re
import zlib
from collections.abc import Sequence
from itertools import compress
from typing import Any, ClassVar

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import InvalidKwargsError, check_choice

__all__ = ["DIFFICULTIES", "MinesweeperEnv", "in_split", "logic_solvable", "neighbours", "solvable_from"]

#: Difficulty presets: name -> (rows, columns, mines).
DIFFICULTIES: dict[str, tuple[int, int, int]] = {
    "easy": (5, 5, 3),
    "medium": (8, 8, 10),
    "hard": (10, 10, 16),
}
#: Sum of ``reveal_reward`` over an episode that reveals every safe cell.
REVEAL_REWARD_TOTAL = 0.2
#: Layout draws tried at the first reveal before accepting one that may need a guess. At the
#: density cap (a fifth of the cells) about 1 draw in 15 is no-guess, so the limit is never
#: reached in practice.
MAX_LAYOUT_ATTEMPTS = 5000
#: Most mines a board may hold, as a fraction of its cells (denser boards are rarely no-guess).
MAX_DENSITY_DIVISOR = 5
MIN_SIZE, MAX_SIZE = 3, 30
#: One mine layout in ``TEST_MODULUS`` (chosen by a CRC-32 of the board size and the mine cells)
#: belongs to the ``test`` split, the others to ``train``: the splits never share a board.
TEST_MODULUS = 5

HIDDEN, FLAG, MINE, BLAST = "#", "F", "*", "X"
_DIGITS = ".12345678"  # revealed cell with 0..8 adjacent mines
_ACTION = re.compile(
    r"(reveal|open|dig|click|flag|mark|unflag|unmark)\s*:?\s*\(?\s*(\d{1,4})\s*(?:,\s*|\s+)(\d{1,4})\s*\)?",
    re.IGNORECASE,
)
_VERBS = {
    "reveal": "reveal",
    "open": "reveal",
    "dig": "reveal",
    "click": "reveal",
    "flag": "flag",
    "mark": "flag",
    "unflag": "unflag",
    "unmark": "unflag",
}


@functools.cache
def neighbours(rows: int, cols: int) -> tuple[tuple[int, ...], ...]:
    """For each cell index ``r * cols + c``, the indices of its (up to 8) neighbours."""
    result = []
    for r in range(rows):
        for c in range(cols):
            result.append(
                tuple(
                    rr * cols + cc
                    for rr in range(max(0, r - 1), min(rows, r + 2))
                    for cc in range(max(0, c - 1), min(cols, c + 2))
                    if (rr, cc) != (r, c)
                )
            )
    return tuple(result)


class _Grid:
    """Bitboards of a ``rows x cols`` board padded by one cell on each side.

    Cell ``(r, c)`` is bit ``(r + 1) * (cols + 2) + c + 1``; the padding bits are never set, so
    shifting a mask by one row or column cannot wrap around an edge. Per-cell tables are lists
    indexed by ``bit.bit_length()`` (bit position + 1), cheaper than dicts keyed by big ints.
    """

    def __init__(self, rows: int, cols: int) -> None:
        self.stride = stride = cols + 2
        self.bit_of = [1 << ((r + 1) * stride + c + 1) for r in range(rows) for c in range(cols)]
        self.interior = sum(self.bit_of)
        self.shifts = (1, stride - 1, stride, stride + 1)
        slots = (rows + 2) * stride + 1
        self.around = [0] * slots  # bit_length -> mask of the cell's neighbours
        self.around_slots: list[tuple[int, ...]] = [()] * slots  # bit_length -> neighbours' bit_lengths
        for i, nbrs in enumerate(neighbours(rows, cols)):
            slot = self.bit_of[i].bit_length()
            self.around[slot] = sum(self.bit_of[n] for n in nbrs)
            self.around_slots[slot] = tuple(self.bit_of[n].bit_length() for n in nbrs)


@functools.cache
def _grid(rows: int, cols: int) -> _Grid:
    return _Grid(rows, cols)


def in_split(rows: int, cols: int, mine_cells: Sequence[int], split: str) -> bool:
    """Whether the layout with mines on ``mine_cells`` (any order) belongs to ``split``."""
    key = f"{rows}x{cols}:{','.join(map(str, sorted(mine_cells)))}".encode()
    return (zlib.crc32(key) % TEST_MODULUS == 0) == (split == "test")


def logic_solvable(rows: int, cols: int, mines: Sequence[bool], start: int) -> bool:
    """True if revealing ``start`` and then reasoning alone uncovers every safe cell.

    ``mines`` holds one bool per cell (index ``r * cols + c``). See :func:`solvable_from` for
    the rules.
    """
    return solvable_from(rows, cols, [i for i, is_mine in enumerate(mines) if is_mine], start)


def solvable_from(rows: int, cols: int, mine_cells: Sequence[int], start: int) -> bool:
    """True if revealing ``start`` and then reasoning alone uncovers every safe cell.

    Reasoning means: single-cell rules (a number whose mines are all known makes its other hidden
    neighbours safe; a number that needs every hidden neighbour makes them all mines), the
    subset rule between two numbers (if one's hidden neighbours are a subset of the other's, the
    difference holds exactly the difference of their counts) and the global mine count (once every
    mine is known, every other hidden cell is safe). The oracle solver knows all of these rules,
    so a board accepted here never forces it to guess. Runs on bitboards (see :class:`_Grid`); it
    is the hot path of the first reveal, hence the inlined code.
    """
    if start in mine_cells:
        return False
    grid = _grid(rows, cols)
    bit_of, around, around_slots, interior = grid.bit_of, grid.around, grid.around_slots, grid.interior
    s1, s2, s3, s4 = grid.shifts

    def dilate(m: int) -> int:
        return (m | m << s1 | m >> s1 | m << s2 | m >> s2 | m << s3 | m >> s3 | m << s4 | m >> s4) & interior

    need = [0] * len(around)  # mines around each cell that are not known yet
    mine_mask = 0
    for i in mine_cells:
        bit = bit_of[i]
        mine_mask |= bit
        for slot in around_slots[bit.bit_length()]:
            need[slot] += 1
    numbered = dilate(mine_mask) & ~mine_mask  # safe cells with a number
    zero = interior & ~mine_mask & ~numbered
    safe = interior & ~mine_mask
    unknown = interior
    revealed = 0
    work = 0  # revealed numbers to look at again

    def reveal(cells: int) -> None:
        nonlocal unknown, revealed, work
        region = frontier = cells & zero
        if region:  # flood through hidden cells with no adjacent mine, then open their borders
            while frontier:
                frontier = dilate(frontier) & zero & unknown & ~region
                region |= frontier
            new = (cells | dilate(region)) & unknown
        else:
            new = cells & unknown
        revealed |= new
        unknown &= ~new
        work |= dilate(new) & revealed & numbered

    def mark(cells: int) -> None:
        nonlocal unknown, work
        unknown &= ~cells
        work |= dilate(cells) & revealed & numbered
        while cells:
            bit = cells & -cells
            cells ^= bit
            for slot in around_slots[bit.bit_length()]:
                need[slot] -= 1

    reveal(bit_of[start])
    while unknown & safe:
        while work:
            bit = work & -work
            work ^= bit
            slot = bit.bit_length()
            hidden = around[slot] & unknown
            if hidden:
                n = need[slot]
                if n == 0:
                    reveal(hidden)
                elif n == hidden.bit_count():
                    mark(hidden)
        if not unknown & safe:
            break
        if not unknown & ~safe or not any(need):  # every mine found: the rest is safe
            reveal(unknown & safe)
            continue
        # Subset rule between two numbers on the frontier; apply the first deduction found.
        constraints = []
        frontier = dilate(unknown) & revealed & numbered
        while frontier:
            bit = frontier & -frontier
            frontier ^= bit
            slot = bit.bit_length()
            hidden = around[slot] & unknown
            constraints.append((hidden, hidden.bit_count(), need[slot]))
        deduction = 0
        extra = 0
        for a_bits, a_size, a_need in constraints:
            for b_bits, b_size, b_need in constraints:
                if b_size > a_size and not a_bits & ~b_bits:
                    extra = b_need - a_need
                    if extra == 0 or extra == b_size - a_size:
                        deduction = b_bits & ~a_bits
                        break
            if deduction:
                break
        if not deduction:
            return False
        if extra:
            mark(deduction)
        else:
            reveal(deduction)
    return True


class MinesweeperEnv(TextEnv):
    """Minesweeper on a no-guess board: reveal every safe cell without revealing a mine.

    **Description.** Mines are placed at the first reveal, never on the revealed cell nor its
    neighbours (so the first reveal opens an area). The layout is then redrawn from the episode
    generator until the board can be cleared by logic alone from that first reveal (single-cell
    rules, the subset rule and the global mine count, see :func:`logic_solvable`): no
    guessing is ever needed (should 5,000 draws fail, which the density cap makes vanishingly
    unlikely, the last one is used). The same seed and the same actions give the same board. The
    ``train`` and ``test`` splits hold disjoint boards: a fixed CRC-32 partition of the mine
    cells puts about 1 layout in 5 in ``test`` (layouts of the other split are drawn again).

    **Observation.** At reset: the rules, the coordinate convention and the action format.
    Then, after every step: what happened, the board with 1-based row and column numbers, and a
    status line (mines, flags placed, safe cells still hidden). Legend: ``#`` hidden, ``F``
    flag, ``.`` revealed with no adjacent mine, ``1``-``8`` revealed with that many adjacent
    mines; once lost, ``*`` mine and ``X`` the mine that was revealed.

    **Actions.** ``reveal R C``, ``flag R C`` or ``unflag R C`` with 1-based row ``R`` (top to
    bottom) and column ``C`` (left to right); ``R,C`` and ``(R, C)`` work too, and ``open``,
    ``dig``, ``click`` / ``mark`` / ``unmark`` are synonyms. Revealing a cell with no adjacent
    mine also reveals its neighbours, recursively. Invalid: bad format, out of the board,
    revealing a revealed or flagged cell, flagging a revealed or flagged cell, unflagging a
    cell without a flag. ``admissible_actions`` lists ``reveal``/``flag`` for each hidden cell
    and ``unflag`` for each flag.

    **Reward components.**
    ``success_reward``: 1.0 when every safe cell is revealed.
    ``reveal_reward``: 0.2 / (number of safe cells) per newly revealed safe cell (0.2 in total).
    ``mine_reward``: -1.0 when a mine is revealed.
    ``invalid_action_reward``: ``invalid_penalty`` (default -0.1) on an invalid step.
    ``step_cost_reward``: ``step_cost`` (default 0) on every step.

    **Reward basis.** The reward is the sum of every component (``success_reward``, ``reveal_reward``, ``mine_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** Terminated with success when every safe cell is revealed (flags are not
    required), terminated with failure when a mine is revealed, truncated at ``max_turns``
    (default: twice the number of cells). ``progress`` is revealed safe cells / safe cells.

    **Arguments.**
    ``difficulty``: ``"easy"`` (5 x 5, 3 mines), ``"medium"`` (8 x 8, 10 mines) or ``"hard"``
    (10 x 10, 16 mines). ``rows``, ``cols`` (3-30) and ``mines`` (1 to a fifth of the cells,
    keeping 9 cells free for the opening) override the preset. Plus the common
    :class:`envgym.core.TextEnv` arguments.

    **Version history.** v0: initial version.
    """

    name: ClassVar[str] = "minesweeper"
    reward_components: ClassVar[tuple[str, ...]] = (
        "success_reward",
        "reveal_reward",
        "mine_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 200

    def __init__(
        self,
        *,
        difficulty: str = "easy",
        rows: int | None = None,
        cols: int | None = None,
        mines: int | None = None,
        **kwargs: Any,
    ) -> None:
        check_choice("difficulty", difficulty, DIFFICULTIES)
        preset_rows, preset_cols, preset_mines = DIFFICULTIES[difficulty]
        for label, value in (("rows", rows), ("cols", cols)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not MIN_SIZE <= value <= MAX_SIZE
            ):
                raise InvalidKwargsError(
                    f"{label} must be an integer from {MIN_SIZE} to {MAX_SIZE} or None (use the preset), got {value!r}."
                )
        self.rows = preset_rows if rows is None else rows
        self.cols = preset_cols if cols is None else cols
        cells = self.rows * self.cols
        limit = max(1, min(cells // MAX_DENSITY_DIVISOR, cells - 9))
        if mines is not None and (isinstance(mines, bool) or not isinstance(mines, int) or not 1 <= mines <= limit):
            raise InvalidKwargsError(
                f"mines must be an integer from 1 to {limit} on a {self.rows} x {self.cols} board "
                f"(at most a fifth of the cells, leaving room for the opening), got {mines!r}."
            )
        self.mines = preset_mines if mines is None else mines
        if self.mines > limit:
            raise InvalidKwargsError(
                f"a {self.rows} x {self.cols} board holds at most {limit} mines, but the {difficulty!r} preset "
                f"has {self.mines}: pass mines=<1..{limit}>."
            )
        if kwargs.get("max_turns") is None:
            kwargs["max_turns"] = 2 * cells
        super().__init__(**kwargs)
        self.difficulty = difficulty
        if (self.rows, self.cols, self.mines) == (preset_rows, preset_cols, preset_mines):
            self._label = difficulty
        else:
            self._label = f"rows={self.rows},cols={self.cols},mines={self.mines}"
        self._size = cells
        self._safe_total = cells - self.mines
        self._nbrs = neighbours(self.rows, self.cols)
        width = len(str(self.cols))
        # Every cell symbol is padded to the width of the column numbers, so columns line up.
        self._hidden, self._flag, self._mine, self._blast = (x.rjust(width) for x in (HIDDEN, FLAG, MINE, BLAST))
        self._digits = [d.rjust(width) for d in _DIGITS]
        label = len(str(self.rows))
        self._row_labels = [str(r + 1).rjust(label) + "  " for r in range(self.rows)]
        self._header = " " * (label + 2) + " ".join(str(c + 1).rjust(width) for c in range(self.cols))
        self._coords = [f"{i // self.cols + 1} {i % self.cols + 1}" for i in range(cells)]
        self._reveal_text = ["reveal " + xy for xy in self._coords]
        self._flag_text = ["flag " + xy for xy in self._coords]
        self._unflag_text = ["unflag " + xy for xy in self._coords]
        self._cell_reward = REVEAL_REWARD_TOTAL / self._safe_total
        self._new_board()
        self._intro_text = self._build_intro()

    def _new_board(self) -> None:
        self._mine_at: list[bool] | None = None
        self._counts: list[int] = []
        self._view = [self._hidden] * self._size  # what the player sees, one symbol per cell
        self._row_text = [""] * self.rows  # rendered rows, rebuilt when marked stale
        self._stale = bytearray(b"\x01" * self.rows)
        self._is_hidden = bytearray(b"\x01" * self._size)  # hidden and not flagged
        self._is_flag = bytearray(self._size)
        self._revealed = 0
        self._flags = 0
        self._actions: list[str] | None = None

    # ------------------------------------------------------------------ episode
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        token = rng.getrandbits(32)
        self._new_board()
        return Task(
            id=f"minesweeper-{self.rows}x{self.cols}-{self.mines}m-{token:08x}",
            goal=(
                f"Reveal every safe cell of the {self.rows} x {self.cols} Minesweeper board "
                f"({self.mines} mines) without revealing a mine."
            ),
            split=self.split,
            difficulty=self._label,
            extra={"rows": self.rows, "cols": self.cols, "mines": self.mines},
        )

    def _place_mines(self, start: int) -> None:
        """Draw a no-guess layout for a first reveal at ``start`` (uses only ``self.rng``)."""
        keep_clear = {start, *self._nbrs[start]}
        if self._size - len(keep_clear) < self.mines:
            keep_clear = {start}
        spots = [i for i in range(self._size) if i not in keep_clear]
        chosen: list[int] = []
        for _ in range(MAX_LAYOUT_ATTEMPTS):
            chosen = self.rng.sample(spots, self.mines)
            if in_split(self.rows, self.cols, chosen, self.split) and solvable_from(
                self.rows, self.cols, chosen, start
            ):
                break
        layout = [False] * self._size
        counts = [0] * self._size
        nbrs = self._nbrs
        for i in chosen:
            layout[i] = True
            for n in nbrs[i]:
                counts[n] += 1
        self._mine_at = layout
        self._counts = counts

    def _intro(self) -> str:
        return self._intro_text

    def _build_intro(self) -> str:
        return (
            f"Minesweeper: a {self.rows} x {self.cols} board with {self.mines} hidden mines. "
            "Reveal every cell that is not a mine. A revealed number tells how many of the up to 8 neighbouring "
            "cells hold a mine; revealing a cell with no neighbouring mine opens its neighbours too. The first "
            "reveal is always safe and the board never needs a guess.\n"
            "Legend: # hidden, F flag, . no adjacent mine, 1-8 adjacent mines.\n"
            f"Rows and columns are numbered from 1 (row 1 is the top, column 1 the left). Actions: 'reveal R C', "
            f"'flag R C', 'unflag R C', e.g. <action>reveal {(self.rows + 1) // 2} {(self.cols + 1) // 2}</action>."
        )

    def _observe(self) -> str:
        rows, stale = self._row_text, self._stale
        if any(stale):
            view, cols, labels = self._view, self.cols, self._row_labels
            for r in range(self.rows):
                if stale[r]:
                    rows[r] = labels[r] + " ".join(view[r * cols : (r + 1) * cols])
                    stale[r] = 0
        lines = [self._header, *rows]
        lines.append(
            f"Mines: {self.mines}. Flags: {self._flags}. Safe cells still hidden: {self._safe_total - self._revealed}."
        )
        return "\n".join(lines)

    # ------------------------------------------------------------------ actions
    def _parse(self, text: str) -> tuple[str, int]:
        match = _ACTION.fullmatch(text)
        if match is None:
            shown = text if len(text) <= 40 else text[:37] + "..."
            raise InvalidAction(
                f"expected 'reveal R C', 'flag R C' or 'unflag R C' with 1-based row and column numbers, got {shown!r}."
            )
        verb = _VERBS[match[1].lower()]
        row, col = int(match[2]), int(match[3])
        if not (1 <= row <= self.rows and 1 <= col <= self.cols):
            raise InvalidAction(
                f"row {row}, column {col} is off the board: rows go from 1 to {self.rows} and columns from 1 to "
                f"{self.cols}."
            )
        return verb, (row - 1) * self.cols + (col - 1)

    def _apply(self, action: tuple[str, int]) -> Transition:
        verb, cell = action
        view = self._view
        where = self._coords[cell]
        symbol = view[cell]
        hidden, flag = self._hidden, self._flag
        if verb == "flag":
            if symbol != hidden:
                state = "already flagged" if symbol == flag else "revealed"
                raise InvalidAction(f"cannot flag {where}: it is {state}.")
            view[cell] = flag
            self._stale[cell // self.cols] = 1
            self._is_hidden[cell] = 0
            self._is_flag[cell] = 1
            self._flags += 1
            self._actions = None
            return Transition(f"Flagged {where}.\n\n{self._observe()}")
        if verb == "unflag":
            if symbol != flag:
                raise InvalidAction(f"cannot unflag {where}: there is no flag there.")
            view[cell] = hidden
            self._stale[cell // self.cols] = 1
            self._is_hidden[cell] = 1
            self._is_flag[cell] = 0
            self._flags -= 1
            self._actions = None
            return Transition(f"Removed the flag at {where}.\n\n{self._observe()}")
        if symbol == flag:
            raise InvalidAction(f"{where} is flagged: unflag it first ('unflag {where}') to reveal it.")
        if symbol != hidden:
            raise InvalidAction(f"{where} is already revealed; reveal a hidden (#) cell.")
        if self._mine_at is None:
            self._place_mines(cell)
        assert self._mine_at is not None
        self._actions = None
        if self._mine_at[cell]:
            for i, is_mine in enumerate(self._mine_at):
                if is_mine and view[i] != flag:
                    view[i] = self._mine
            view[cell] = self._blast
            self._stale[:] = b"\x01" * self.rows
            return Transition(
                f"Boom: {where} was a mine. Game over.\n\n{self._observe()}",
                {"mine_reward": -1.0},
                terminated=True,
            )
        opened = self._open(cell)
        rewards = {"reveal_reward": self._cell_reward * opened}
        if self._revealed == self._safe_total:
            rewards["success_reward"] = 1.0
            return Transition(
                f"Revealed {where}: every safe cell is revealed. You win!\n\n{self._observe()}",
                rewards,
                terminated=True,
                success=True,
            )
        more = f" and {opened - 1} more cell{'s' if opened > 2 else ''}" if opened > 1 else ""
        return Transition(f"Revealed {where}{more}.\n\n{self._observe()}", rewards)

    def _open(self, cell: int) -> int:
        """Reveal ``cell`` and, through cells with no adjacent mine, its neighbours; count them."""
        view, counts, nbrs, digits, is_hidden = self._view, self._counts, self._nbrs, self._digits, self._is_hidden
        stale, cols = self._stale, self.cols
        view[cell] = digits[counts[cell]]
        is_hidden[cell] = 0
        stale[cell // cols] = 1
        opened = 1
        stack = [cell] if counts[cell] == 0 else []
        while stack:
            for n in nbrs[stack.pop()]:
                if is_hidden[n]:
                    view[n] = digits[counts[n]]
                    is_hidden[n] = 0
                    stale[n // cols] = 1
                    opened += 1
                    if counts[n] == 0:
                        stack.append(n)
        self._revealed += opened
        return opened

    def _action_list(self) -> list[str]:
        actions = self._actions
        if actions is None:
            actions = list(compress(self._reveal_text, self._is_hidden))
            actions += compress(self._flag_text, self._is_hidden)
            if self._flags:
                actions += compress(self._unflag_text, self._is_flag)
            self._actions = actions
        return actions

    def admissible_actions(self) -> list[str]:
        return list(self._action_list())

    def sample_action(self, rng: random.Random) -> str:
        """A uniformly random admissible action."""
        return rng.choice(self._action_list())

    def progress(self) -> float:
        return self._revealed / self._safe_total
