"""Oracle for ``envgym/ConnectFour-*``: iterative-deepening negamax alpha-beta on bitboards.

The solver reads the last board printed in the observation (rows between ``|...|``, top row
first; the side to move follows from the piece counts) and searches deeper than the built-in
opponent (``DEPTH``: 3 plies against the random opponent, 7 against the 2- and 4-ply ones):

* a transposition table and iterative deepening (the previous best move is searched first);
* move ordering by the number of winning cells a move creates, centre first;
* forced moves: win now; lose to two threats at once; block a single threat *without spending
  depth* (forcing sequences are followed to their end); never play right under a cell where the
  opponent would win;
* at the horizon, a short search of our forcing threats (each move creates a playable winning
  cell) that ends in a double threat;
* an evaluation counting each side's winning cells, weighting those on the rows that zugzwang
  favours (odd rows for the first player, even for the second), and the centre columns;
* ties go to the most central column (random among equally central ones, seeded).

Measured over 100 seeds (agent first, the default): 100% wins against easy, 97% against medium
and 97% against hard, at about 0.1 s per move for the 7-ply searches.

Bitboard layout: the env's (its ``winning_cells`` is used here), bit ``col * 7 + row`` (row 0 at
the bottom); the 7th bit of each column stays empty so shifted patterns never wrap between columns.
"""

from __future__ import annotations

import random
import re
from typing import Any

from envgym.environments.games.connect_four import winning_cells as _winning_cells

from envgym.rollout import Policy

__all__ = ["Solver", "parse_board", "search"]

_ROWS, _COLS, _H1 = 6, 7, 7
_BOTTOM = sum(1 << (c * _H1) for c in range(_COLS))
_FULL = _BOTTOM * ((1 << _ROWS) - 1)
_COLUMN = tuple(((1 << _ROWS) - 1) << (c * _H1) for c in range(_COLS))
_ORDER = (3, 2, 4, 1, 5, 0, 6)
_ODD_ROWS = sum(1 << (c * _H1 + r) for c in range(_COLS) for r in (0, 2, 4))  # rows 1, 3, 5 from the bottom
_EVEN_ROWS = _FULL ^ _ODD_ROWS
_CENTRE = _COLUMN[3]
_NEAR_CENTRE = _COLUMN[2] | _COLUMN[4]
_WIN = 10_000
#: Longest sequence of forcing threats tried at the search horizon (our moves).
_QUIESCENCE = 4
_INF = 10 * _WIN
_ROW = re.compile(r"^\|((?:[XO.] ){6}[XO.])\|\s*$", re.MULTILINE)
#: Search depth (plies) per difficulty: deeper than the opponent (0/2/4 plies), and odd, so the
#: horizon ends on our own move (even depths measured clearly weaker against these opponents;
#: 5 plies against the 2-ply medium opponent drew a third of the games, 7 plies wins ~97%).
DEPTH = {"easy": 3, "medium": 7, "hard": 7}


def parse_board(observation: str) -> tuple[list[str], int, int]:
    """The last board in ``observation``: its 6 rows (top first) and the X and O bitboards."""
    rows = [m.group(1).replace(" ", "") for m in _ROW.finditer(observation)][-_ROWS:]
    if len(rows) != _ROWS:
        raise ValueError(f"no connect-four board found in the observation: {observation[-400:]!r}")
    x = o = 0
    for r, line in enumerate(rows):
        row = _ROWS - 1 - r
        for c, cell in enumerate(line):
            if cell == "X":
                x |= 1 << (c * _H1 + row)
            elif cell == "O":
                o |= 1 << (c * _H1 + row)
    return rows, x, o


class _Search:
    """One move's search state: the transposition table and the node budget."""

    def __init__(self, first_player_is_me: bool) -> None:
        self.table: dict[int, tuple[int, int, int, int]] = {}
        self.nodes = 0
        # Zugzwang: the first player profits from threats on odd rows, the second on even rows.
        self.my_rows = _ODD_ROWS if first_player_is_me else _EVEN_ROWS
        self.their_rows = _EVEN_ROWS if first_player_is_me else _ODD_ROWS

    def evaluate(self, me: int, them: int, mask: int, me_is_root: bool) -> int:
        mine = _winning_cells(me, mask)
        theirs = _winning_cells(them, mask)
        good_me, good_them = (self.my_rows, self.their_rows) if me_is_root else (self.their_rows, self.my_rows)
        return (
            8 * ((mine & good_me).bit_count() - (theirs & good_them).bit_count())
            + 5 * (mine.bit_count() - theirs.bit_count())
            + 3 * ((me & _CENTRE).bit_count() - (them & _CENTRE).bit_count())
            + ((me & _NEAR_CENTRE).bit_count() - (them & _NEAR_CENTRE).bit_count())
        )

    def negamax(self, me: int, mask: int, depth: int, alpha: int, beta: int, me_is_root: bool) -> int:
        self.nodes += 1
        possible = (mask + _BOTTOM) & _FULL
        if _winning_cells(me, mask) & possible:
            return _WIN + depth
        if not possible:
            return 0
        them = me ^ mask
        threats = _winning_cells(them, mask)
        forced = possible & threats
        if forced:
            if forced & (forced - 1):
                return -_WIN - depth + 1
            if forced & (threats >> 1):
                return -_WIN - depth + 1  # the only block lets the opponent win on top of it
            # A forced reply costs no depth: forcing sequences are searched to the end.
            return -self.negamax(them, mask | forced, depth, -beta, -alpha, not me_is_root)
        candidates = possible & ~(threats >> 1)
        if not candidates:
            return -_WIN - depth + 1
        if depth == 0:
            if self.threat_sequence_wins(me, mask, candidates, _QUIESCENCE):
                return _WIN // 2
            return self.evaluate(me, them, mask, me_is_root)
        key = me + mask
        entry = self.table.get(key)
        best_first = -1
        if entry is not None:
            e_depth, e_flag, e_value, best_first = entry
            if e_depth >= depth:
                if e_flag == 0:
                    return e_value
                if e_flag > 0 and e_value >= beta:
                    return e_value
                if e_flag < 0 and e_value <= alpha:
                    return e_value
        moves = self._ordered(me, mask, candidates, best_first, depth)
        alpha0 = alpha
        best, best_col = -_INF, -1
        for col, move in moves:
            score = -self.negamax(them, mask | move, depth - 1, -beta, -alpha, not me_is_root)
            if score > best:
                best, best_col = score, col
                if score > alpha:
                    alpha = score
                    if alpha >= beta:
                        break
        flag = 1 if best >= beta else (-1 if best <= alpha0 else 0)
        self.table[key] = (depth, flag, best, best_col)
        return best

    def threat_sequence_wins(self, me: int, mask: int, candidates: int, budget: int) -> bool:
        """True when ``me`` (to move, no immediate win either way) forces a win by threats alone.

        Each move must create a playable winning cell, so the opponent's reply is forced; the
        sequence wins when a move creates two such cells, or a cell right above the forced block.
        """
        them = me ^ mask
        for c in _ORDER:
            move = candidates & _COLUMN[c]
            if not move:
                continue
            self.nodes += 1
            new_me, new_mask = me | move, mask | move
            new_possible = (new_mask + _BOTTOM) & _FULL
            mine = _winning_cells(new_me, new_mask)
            playable = mine & new_possible
            if not playable or _winning_cells(them, new_mask) & new_possible:
                continue  # not forcing, or the opponent simply wins first
            if playable & (playable - 1) or (playable << 1) & mine:
                return True  # two threats at once, or one right above the forced block
            if budget > 1:
                block_mask = new_mask | playable
                theirs = _winning_cells(them | playable, block_mask)
                next_possible = (block_mask + _BOTTOM) & _FULL
                if theirs & next_possible:
                    continue  # the block made a threat of its own: no longer our initiative
                next_candidates = next_possible & ~(theirs >> 1)
                if next_candidates and self.threat_sequence_wins(new_me, block_mask, next_candidates, budget - 1):
                    return True
        return False

    def _ordered(self, me: int, mask: int, candidates: int, best_first: int, depth: int) -> list[tuple[int, int]]:
        moves = [(c, candidates & _COLUMN[c]) for c in _ORDER if candidates & _COLUMN[c]]
        if depth >= 3 and len(moves) > 1:
            moves.sort(key=lambda cm: -_winning_cells(me | cm[1], mask | cm[1]).bit_count())
        if best_first >= 0:
            moves.sort(key=lambda cm: cm[0] != best_first)
        return moves


def search(x: int, o: int, depth: int, rng: random.Random | None = None) -> int:
    """The column (0-6) to play for the side to move in the position ``x``/``o``, searching ``depth`` plies."""
    mask = x | o
    x_to_move = x.bit_count() == o.bit_count()
    me = x if x_to_move else o
    possible = (mask + _BOTTOM) & _FULL
    cols = [c for c in _ORDER if possible & _COLUMN[c]]
    if not cols:
        raise ValueError("the board is full: no move to search.")
    wins = [c for c in cols if _winning_cells(me, mask) & possible & _COLUMN[c]]
    if wins:
        return wins[0]
    state = _Search(first_player_is_me=x_to_move)
    them = me ^ mask
    scores: dict[int, int] = {}
    order = list(cols)
    for d in range(1, depth + 1):
        alpha = -_INF
        for c in order:
            move = possible & _COLUMN[c]
            # Window just below the best so far: worse moves fail low, ties are scored exactly.
            score = -state.negamax(them, mask | move, d - 1, -_INF, -(alpha - 1), False)
            scores[c] = score
            alpha = max(alpha, score)
        order.sort(key=lambda c: -scores[c])
        if scores[order[0]] >= _WIN:
            break  # a forced win found: no need to look deeper
    best = scores[order[0]]
    tied = [c for c in order if scores[c] == best]
    # Among equal scores the most central column: the evaluation is coarse early on, and the
    # centre takes part in the most lines.
    closest = min(abs(c - 3) for c in tied)
    central = sorted(c for c in tied if abs(c - 3) == closest)
    if rng is not None and len(central) > 1:
        return rng.choice(central)
    return central[0]


class Solver(Policy):
    """Searches ``DEPTH[difficulty]`` plies (deeper than the built-in opponent) and plays the best column."""

    def __init__(self, env_id: str, seed: int | None = None, *, depth: int | None = None) -> None:
        self.env_id = env_id
        self.depth = depth
        self.rng = random.Random(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        _, x, o = parse_board(observation)
        task = info.get("task", {})
        depth = self.depth
        if depth is None:
            depth = DEPTH.get(str(task.get("difficulty", "hard")), DEPTH["hard"])
            opponent = task.get("opponent_depth")
            if isinstance(opponent, int) and opponent + 3 > depth:
                depth = opponent + 3 | 1  # at least 3 plies deeper, odd
        return str(search(x, o, depth, self.rng) + 1)
