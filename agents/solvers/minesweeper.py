"""Minesweeper solver: logic first (single-cell, subset and global rules), exact enumeration next.

The solver parses the board from the observation text (the last block of numbered rows; board
size and mine count from ``info["task"]``) and reveals one cell per turn:

1. the first move reveals the centre (the first reveal is always safe);
2. it deduces with the single-cell rules (a number whose mines are all found clears its other
   hidden neighbours; a number that needs all its hidden neighbours makes them mines), the
   subset rule between two numbers and the global mine count, repeated to a fixpoint;
3. if that finds no safe cell, it enumerates every mine assignment of each frontier component
   (bounded) and reveals a cell that is safe in all of them;
4. only then does it guess, choosing the cell least likely to be a mine.

The environment only deals boards that step 2 clears, so steps 3 and 4 are a safety net. Mines
it has deduced are remembered between turns; it never needs to place flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "deduce", "parse_board"]

_ROW = re.compile(r"^\s*(\d+)  (.*\S)\s*$")
#: Assignments explored per frontier component before enumeration gives up.
MAX_ENUMERATION_NODES = 20_000


def parse_board(observation: str, rows: int, cols: int) -> list[list[str]] | None:
    """The last complete board in ``observation``: ``rows`` lists of ``cols`` symbols, or ``None``."""
    found: dict[int, list[str]] = {}
    board: list[list[str]] | None = None
    for line in observation.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        r = int(match[1])
        cells = match[2].split()
        if 1 <= r <= rows and len(cells) == cols:
            if r == 1:
                found = {}
            found[r] = cells
            if len(found) == rows:
                board = [found[i] for i in range(1, rows + 1)]
    return board


def _neighbours(r: int, c: int, rows: int, cols: int) -> Iterable[tuple[int, int]]:
    for rr in range(max(0, r - 1), min(rows, r + 2)):
        for cc in range(max(0, c - 1), min(cols, c + 2)):
            if (rr, cc) != (r, c):
                yield rr, cc


def deduce(
    board: list[list[str]], total_mines: int, known_mines: set[tuple[int, int]]
) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """Safe cells and mines that follow from the board by the single-cell, subset and global rules.

    ``known_mines`` (cells already proven to be mines) is extended in place. Returns
    ``(safe, mines)`` where ``safe`` are hidden cells proven safe.
    """
    rows, cols = len(board), len(board[0])
    hidden = {(r, c) for r in range(rows) for c in range(cols) if board[r][c] in ("#", "F")}
    numbers = {
        (r, c): (0 if board[r][c] == "." else int(board[r][c]))
        for r in range(rows)
        for c in range(cols)
        if board[r][c] == "." or board[r][c].isdigit()
    }
    safe: set[tuple[int, int]] = set()
    mines = known_mines
    while True:
        constraints = _constraints(numbers, hidden, safe, mines, rows, cols)
        progress = False
        for cells, need in constraints:
            if need == 0:
                safe |= cells
                progress = True
            elif need == len(cells):
                mines |= cells
                progress = True
        if progress:
            continue
        unknown = hidden - safe - mines
        if unknown and len(mines) == total_mines:
            safe |= unknown
            continue
        for a_cells, a_need in constraints:
            for b_cells, b_need in constraints:
                if len(b_cells) > len(a_cells) and a_cells <= b_cells:
                    extra = b_need - a_need
                    diff = b_cells - a_cells
                    if extra == 0:
                        safe |= diff
                        progress = True
                    elif extra == len(diff):
                        mines |= diff
                        progress = True
        if not progress:
            return safe, set(mines)


def _constraints(
    numbers: dict[tuple[int, int], int],
    hidden: set[tuple[int, int]],
    safe: set[tuple[int, int]],
    mines: set[tuple[int, int]],
    rows: int,
    cols: int,
) -> list[tuple[frozenset[tuple[int, int]], int]]:
    """(unknown neighbours, mines still needed) for every number next to an unknown cell."""
    result = []
    for (r, c), value in numbers.items():
        unknown = []
        found = 0
        for n in _neighbours(r, c, rows, cols):
            if n in mines:
                found += 1
            elif n in hidden and n not in safe:
                unknown.append(n)
        if unknown:
            result.append((frozenset(unknown), value - found))
    return result


def _enumerate(
    constraints: list[tuple[frozenset[tuple[int, int]], int]],
) -> dict[tuple[int, int], float] | None:
    """Mine probability of every frontier cell over all consistent assignments (unweighted).

    Returns ``None`` if a component is too large to enumerate within the node budget.
    """
    cells = sorted({cell for group, _ in constraints for cell in group})
    if not cells:
        return {}
    by_cell: dict[tuple[int, int], list[int]] = {cell: [] for cell in cells}
    for k, (group, _) in enumerate(constraints):
        for cell in group:
            by_cell[cell].append(k)
    # Connected components of cells sharing a constraint.
    probabilities: dict[tuple[int, int], float] = {}
    unvisited = set(cells)
    while unvisited:
        seed = min(unvisited)
        component = []
        stack = [seed]
        unvisited.discard(seed)
        while stack:
            cell = stack.pop()
            component.append(cell)
            for k in by_cell[cell]:
                for other in constraints[k][0]:
                    if other in unvisited:
                        unvisited.discard(other)
                        stack.append(other)
        component.sort()
        counts = _enumerate_component(component, constraints, by_cell)
        if counts is None:
            return None
        solutions, mine_counts = counts
        if solutions == 0:
            return None
        for cell in component:
            probabilities[cell] = mine_counts[cell] / solutions
    return probabilities


def _enumerate_component(
    component: list[tuple[int, int]],
    constraints: list[tuple[frozenset[tuple[int, int]], int]],
    by_cell: dict[tuple[int, int], list[int]],
) -> tuple[int, dict[tuple[int, int], int]] | None:
    need = [n for _, n in constraints]
    left = [len(group) for group, _ in constraints]
    assignment: dict[tuple[int, int], int] = {}
    mine_counts = dict.fromkeys(component, 0)
    solutions = 0
    nodes = 0

    def place(i: int) -> bool:
        nonlocal solutions, nodes
        nodes += 1
        if nodes > MAX_ENUMERATION_NODES:
            return False
        if i == len(component):
            solutions += 1
            for cell, value in assignment.items():
                mine_counts[cell] += value
            return True
        cell = component[i]
        for value in (0, 1):
            ok = True
            for k in by_cell[cell]:
                remaining = need[k] - value
                if remaining < 0 or remaining > left[k] - 1:
                    ok = False
                    break
            if not ok:
                continue
            for k in by_cell[cell]:
                need[k] -= value
                left[k] -= 1
            assignment[cell] = value
            finished = place(i + 1)
            del assignment[cell]
            for k in by_cell[cell]:
                need[k] += value
                left[k] += 1
            if not finished:
                return False
        return True

    if not place(0):
        return None
    return solutions, mine_counts


class Solver(Policy):
    """Logic-first Minesweeper player (see the module docstring)."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self.mines: set[tuple[int, int]] = set()
        self.queue: list[tuple[int, int]] = []

    def act(self, observation: str, info: dict[str, Any]) -> str:
        task = info.get("task", {})
        rows, cols = int(task.get("rows", 0)), int(task.get("cols", 0))
        total = int(task.get("mines", 0))
        board = parse_board(observation, rows, cols) if rows and cols else None
        if board is None:
            return "reveal 1 1"
        if all(cell in ("#", "F") for row in board for cell in row):
            self.mines.clear()
            self.queue.clear()
            return f"reveal {(rows + 1) // 2} {(cols + 1) // 2}"
        self.queue = [cell for cell in self.queue if board[cell[0]][cell[1]] in ("#", "F")]
        if not self.queue:
            safe, _ = deduce(board, total, self.mines)
            if not safe:
                safe = self._enumerated_safe(board, total)
            self.queue = sorted(safe, reverse=True)
        if self.queue:
            return self._reveal(board, self.queue.pop())
        return self._reveal(board, self._best_guess(board, total))

    def _reveal(self, board: list[list[str]], cell: tuple[int, int]) -> str:
        r, c = cell
        if board[r][c] == "F":  # our own flags never exist, but an earlier agent may have left some
            self.queue.append(cell)
            return f"unflag {r + 1} {c + 1}"
        return f"reveal {r + 1} {c + 1}"

    def _frontier(self, board: list[list[str]]) -> list[tuple[frozenset[tuple[int, int]], int]]:
        rows, cols = len(board), len(board[0])
        hidden = {(r, c) for r in range(rows) for c in range(cols) if board[r][c] in ("#", "F")}
        numbers = {
            (r, c): (0 if board[r][c] == "." else int(board[r][c]))
            for r in range(rows)
            for c in range(cols)
            if board[r][c] == "." or board[r][c].isdigit()
        }
        return _constraints(numbers, hidden, set(), self.mines, rows, cols)

    def _enumerated_safe(self, board: list[list[str]], total: int) -> set[tuple[int, int]]:
        probabilities = _enumerate(self._frontier(board))
        if not probabilities:
            return set()
        self.mines |= {cell for cell, p in probabilities.items() if p == 1.0}
        return {cell for cell, p in probabilities.items() if p == 0.0}

    def _best_guess(self, board: list[list[str]], total: int) -> tuple[int, int]:
        rows, cols = len(board), len(board[0])
        hidden = [(r, c) for r in range(rows) for c in range(cols) if board[r][c] in ("#", "F")]
        candidates = [cell for cell in hidden if cell not in self.mines] or hidden
        probabilities = _enumerate(self._frontier(board)) or {}
        frontier_mines = sum(probabilities.values())
        interior = [cell for cell in candidates if cell not in probabilities]
        interior_p = max(0.0, total - len(self.mines) - frontier_mines) / len(interior) if interior else 1.0
        return min(candidates, key=lambda cell: (probabilities.get(cell, interior_p), cell))
