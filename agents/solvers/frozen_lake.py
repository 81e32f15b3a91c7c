"""Oracle solver for ``envgym/FrozenLake-*``: reads the map from the observation text.

On firm ice it walks a shortest safe path (breadth-first search from the goal). On slippery ice
(the introduction says so) it runs value iteration on the parsed map, with the slip model of the
environment (the chosen direction or either perpendicular one, 1/3 each), and picks the action
that maximises the discounted probability of reaching the goal; the small discount breaks ties
in favour of getting there sooner.
"""

from __future__ import annotations

from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "parse_map", "shortest_path_action", "slippery_values"]

ACTIONS = ("up", "down", "left", "right")
_PERPENDICULAR = ((2, 3), (2, 3), (0, 1), (0, 1))
_GLYPHS = frozenset("P_OGX")

LakeMap = tuple[int, bytes, int, int]
"""``(size, holes, goal, player)`` on flat cell indices ``row * size + col``."""


def parse_map(observation: str) -> LakeMap | None:
    """Return the last map drawn in ``observation`` (``None`` if there is none or no player)."""
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
    size = len(last)
    if not size or any(len(row) != size for row in last):
        return None
    holes = bytearray(size * size)
    goal = player = -1
    for r, row in enumerate(last):
        for c, glyph in enumerate(row):
            i = r * size + c
            if glyph == "O":
                holes[i] = 1
            elif glyph == "G":
                goal = i
            elif glyph == "P":
                player = i
    if player < 0 or goal < 0:
        return None
    return size, bytes(holes), goal, player


def _neighbour(cell: int, d: int, size: int) -> int:
    r, c = divmod(cell, size)
    if d == 0:
        return cell - size if r > 0 else cell
    if d == 1:
        return cell + size if r < size - 1 else cell
    if d == 2:
        return cell - 1 if c > 0 else cell
    return cell + 1 if c < size - 1 else cell


def shortest_path_action(lake: LakeMap) -> int:
    """First direction of a shortest safe path to the goal (``0`` if the goal is cut off)."""
    size, holes, goal, player = lake
    dist = {goal: 0}
    queue = [goal]
    for cell in queue:
        for d in range(4):
            x = _neighbour(cell, d, size)
            if x not in dist and not holes[x]:
                dist[x] = dist[cell] + 1
                queue.append(x)
    here = dist.get(player)
    if here is None:
        return 0
    for d in range(4):
        x = _neighbour(player, d, size)
        if dist.get(x, here) == here - 1:
            return d
    return 0


def slippery_values(size: int, holes: bytes, goal: int, *, gamma: float = 0.99, tol: float = 1e-8) -> list[float]:
    """Value iteration: discounted probability of reaching ``goal`` from each cell, acting optimally."""
    n = size * size
    moves = [[_neighbour(cell, d, size) for d in range(4)] for cell in range(n)]
    outcomes = [[(moves[cell][d], *(moves[cell][p] for p in _PERPENDICULAR[d])) for d in range(4)] for cell in range(n)]
    values = [0.0] * n
    values[goal] = 1.0
    live = [cell for cell in range(n) if cell != goal and not holes[cell]]
    scale = gamma / 3.0
    for _ in range(10_000):
        delta = 0.0
        for cell in live:
            best = max(values[a] + values[b] + values[c] for a, b, c in outcomes[cell]) * scale
            change = best - values[cell]
            delta = max(delta, change)
            values[cell] = best
        if delta < tol:
            break
    return values


class Solver(Policy):
    """Shortest path on firm ice; value-iteration policy on slippery ice."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self.seed = seed
        self._slippery: bool | None = None
        self._values: tuple[tuple[int, bytes, int], list[float]] | None = None

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self._slippery is None:
            self._slippery = "The ice is slippery" in observation
        elif "You slipped" in observation:
            self._slippery = True
        lake = parse_map(observation)
        if lake is None:
            return ACTIONS[0]
        if not self._slippery:
            return ACTIONS[shortest_path_action(lake)]
        size, holes, goal, player = lake
        key = (size, holes, goal)
        if self._values is None or self._values[0] != key:
            self._values = (key, slippery_values(size, holes, goal))
        values = self._values[1]
        scores = [
            values[_neighbour(player, d, size)] + sum(values[_neighbour(player, p, size)] for p in _PERPENDICULAR[d])
            for d in range(4)
        ]
        return ACTIONS[max(range(4), key=scores.__getitem__)]
