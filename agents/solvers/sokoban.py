"""Oracle solver for ``envgym/Sokoban-*``: reads the board from the observation and plans with A*.

The search runs over *push* states (box positions plus the player's cell right after a push):
between pushes the player walks along a shortest path, so the cost of a push is the walk to the
cell behind the box plus one move. The heuristic (sum over boxes of the pushes needed to bring each
one to its nearest target, ignoring the other boxes) never overestimates, so plans are shortest
in moves. Boxes are never pushed onto dead squares (cells from which no target can be reached).
The solver re-plans whenever the observed board differs from the one its plan expected.
"""

from __future__ import annotations

import heapq
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "parse_board", "solve"]

ACTIONS = ("up", "down", "left", "right")
# glyph -> (floor, target, box, player)
_GLYPHS: dict[str, tuple[int, int, int, int]] = {
    "#": (0, 0, 0, 0),
    "_": (1, 0, 0, 0),
    "O": (1, 1, 0, 0),
    "X": (1, 0, 1, 0),
    "*": (1, 1, 1, 0),
    "√": (1, 1, 1, 0),
    "P": (1, 0, 0, 1),
    "S": (1, 1, 0, 1),
}

Board = tuple[int, bytes, bytes, tuple[int, ...], int]
"""``(width, floor, targets, boxes, player)`` on flat cell indices ``row * width + col``."""


def parse_board(observation: str) -> Board | None:
    """Return the last board drawn in ``observation``, or ``None`` if there is none.

    A board line is a line whose space-separated tokens are all legend glyphs.
    """
    block: list[list[str]] = []
    last: list[list[str]] = []
    for line in observation.splitlines():
        tokens = line.split()
        if tokens and all(t in _GLYPHS for t in tokens):
            block.append(tokens)
        elif block:
            last, block = block, []
    if block:
        last = block
    if not last:
        return None
    width = max(len(row) for row in last)
    n = width * len(last)
    floor, targets = bytearray(n), bytearray(n)
    boxes: list[int] = []
    player = -1
    for r, row in enumerate(last):
        for c, glyph in enumerate(row):
            i = r * width + c
            f, t, b, p = _GLYPHS[glyph]
            floor[i], targets[i] = f, t
            if b:
                boxes.append(i)
            if p:
                player = i
    if player < 0:
        return None
    return width, bytes(floor), bytes(targets), tuple(sorted(boxes)), player


def _pull_distances(width: int, floor: bytes, targets: bytes) -> list[int]:
    """Pushes needed to bring a lone box from each cell to its nearest target (-1: never)."""
    offsets = (-width, width, -1, 1)
    n = len(floor)
    dist = [-1] * n
    frontier = [i for i in range(n) if targets[i]]
    for t in frontier:
        dist[t] = 0
    level = 0
    while frontier:
        level += 1
        nxt = []
        for b in frontier:
            for off in offsets:
                x = b - off
                if 0 <= x - off < n and floor[x] and dist[x] < 0 and floor[x - off]:
                    dist[x] = level
                    nxt.append(x)
        frontier = nxt
    return dist


def _walk(width: int, floor: bytes, occupied: set[int] | bytearray, start: int, goal: int) -> list[int] | None:
    """Directions of a shortest walk from ``start`` to ``goal`` avoiding walls and ``occupied``."""
    if start == goal:
        return []
    offsets = (-width, width, -1, 1)
    came: dict[int, tuple[int, int]] = {start: (-1, -1)}
    queue = [start]
    for cell in queue:
        for d, off in enumerate(offsets):
            x = cell + off
            if floor[x] and x not in came and x not in occupied:
                came[x] = (cell, d)
                if x == goal:
                    path = []
                    while x != start:
                        x, step = came[x]
                        path.append(step)
                    return path[::-1]
                queue.append(x)
    return None


def solve(board: Board, *, max_expansions: int = 200_000) -> list[int] | None:
    """Shortest (in moves) list of direction indices solving ``board``, or ``None`` if none found."""
    width, floor, targets, boxes, player = board
    n = len(floor)
    offsets = (-width, width, -1, 1)
    dist = _pull_distances(width, floor, targets)
    if any(dist[b] < 0 for b in boxes):
        return None
    goal_count = sum(1 for b in boxes if targets[b])
    if goal_count == len(boxes):
        return []
    start = (boxes, player)
    best: dict[tuple[tuple[int, ...], int], int] = {start: 0}
    parent: dict[tuple[tuple[int, ...], int], tuple[tuple[tuple[int, ...], int], int, int] | None] = {start: None}
    heap = [(sum(dist[b] for b in boxes), 0, 0, boxes, player)]
    counter = 0
    expansions = 0
    while heap:
        _, neg_g, _, bx, pl = heapq.heappop(heap)
        g = -neg_g
        key = (bx, pl)
        if g > best[key]:
            continue
        if all(targets[b] for b in bx):
            return _reconstruct(width, floor, parent, key)
        expansions += 1
        if expansions > max_expansions:
            return None
        occupied = set(bx)
        # Player walking distances from its cell.
        walk = {pl: 0}
        queue = [pl]
        for cell in queue:
            step = walk[cell] + 1
            for off in offsets:
                x = cell + off
                if floor[x] and x not in walk and x not in occupied:
                    walk[x] = step
                    queue.append(x)
        h_base = sum(dist[b] for b in bx)
        for i, b in enumerate(bx):
            for d, off in enumerate(offsets):
                stand = walk.get(b - off)
                if stand is None:
                    continue
                dest = b + off
                if not floor[dest] or dest in occupied or dist[dest] < 0:
                    continue
                nb = tuple(sorted(bx[:i] + (dest,) + bx[i + 1 :]))
                ng = g + stand + 1
                nk = (nb, b)
                old = best.get(nk)
                if old is None or ng < old:
                    best[nk] = ng
                    parent[nk] = (key, b, d)
                    counter += 1
                    heapq.heappush(heap, (ng + h_base - dist[b] + dist[dest], -ng, counter, nb, b))
    return None


def _reconstruct(
    width: int,
    floor: bytes,
    parent: dict[tuple[tuple[int, ...], int], tuple[tuple[tuple[int, ...], int], int, int] | None],
    key: tuple[tuple[int, ...], int],
) -> list[int]:
    pushes = []
    link = parent[key]
    while link is not None:
        prev, box, d = link
        pushes.append((prev, box, d))
        link = parent[prev]
    offsets = (-width, width, -1, 1)
    moves: list[int] = []
    for (bx, pl), box, d in reversed(pushes):
        path = _walk(width, floor, set(bx), pl, box - offsets[d])
        assert path is not None  # the search only pushes from reachable cells
        moves.extend(path)
        moves.append(d)
    return moves


def _predict(board: Board, d: int) -> Board:
    """The board after moving in direction ``d`` (same rules as the environment)."""
    width, floor, targets, boxes, player = board
    off = (-width, width, -1, 1)[d]
    to = player + off
    if not floor[to]:
        return board
    if to in boxes:
        beyond = to + off
        if not floor[beyond] or beyond in boxes:
            return board
        boxes = tuple(sorted(beyond if b == to else b for b in boxes))
    return width, floor, targets, boxes, to


class Solver(Policy):
    """Plays Sokoban optimally (in moves) from the observation text, re-planning on surprises."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self.seed = seed
        self._plan: list[int] = []
        self._expected: Board | None = None

    def act(self, observation: str, info: dict[str, Any]) -> str:
        board = parse_board(observation)
        if board is None:
            return ACTIONS[0]
        if self._expected is None or board != self._expected or not self._plan:
            self._plan = solve(board) or []
            self._plan.reverse()  # pop from the end
        if not self._plan:
            self._expected = None
            return ACTIONS[0]
        d = self._plan.pop()
        self._expected = _predict(board, d)
        return ACTIONS[d]
