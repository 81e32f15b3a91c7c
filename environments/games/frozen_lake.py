"""FrozenLake: walk across a frozen lake from the start to the goal without falling into a hole.

Maps are random (start, goal and holes), and every map has a safe path from the start to the goal,
checked by breadth-first search when it is generated. The slippery variant follows Gymnasium's
FrozenLake: the chosen move happens with probability 1/3, and each of the two perpendicular moves
with probability 1/3.
"""

from __future__ import annotations

import hashlib
import random
import zlib
from typing import Any, ClassVar

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import ConfigError, InvalidKwargsError, check_choice

__all__ = ["ACTIONS", "DIFFICULTIES", "LEGEND", "VIEWS", "FrozenLakeEnv", "distances_to", "in_split", "local_view", "parse_lake"]

#: Difficulty presets: (side of the square map, fraction of the cells that are holes).
DIFFICULTIES: dict[str, tuple[int, float]] = {"easy": (4, 0.15), "medium": (6, 0.2), "hard": (8, 0.25)}
#: Valid map sides.
SIZE_RANGE: tuple[int, int] = (3, 12)
#: Valid hole fractions (of the cells other than start and goal).
HOLE_FRACTION_RANGE: tuple[float, float] = (0.0, 0.5)

#: One generated map in ``TEST_MODULUS`` (chosen by a CRC-32 of its holes, start and goal)
#: belongs to the ``test`` split, the others to ``train``: the splits never share a map.
TEST_MODULUS = 5
#: Maps drawn at most per reset while looking for one of the episode's split (tiny maps may
#: have none; the last draw is then used).
SPLIT_TRIES = 64

#: Actions, in the order of the direction indices used everywhere in this module.
ACTIONS: tuple[str, ...] = ("up", "down", "left", "right")
# The two moves perpendicular to each direction (where a slippery step may send you instead).
_PERPENDICULAR = ((2, 3), (2, 3), (0, 1), (0, 1))

PLAYER, FROZEN, HOLE, GOAL, FALLEN = "P", "_", "O", "G", "X"
#: Glyph -> meaning, as stated in the intro.
LEGEND: dict[str, str] = {
    PLAYER: "you",
    FROZEN: "frozen ice (safe)",
    HOLE: "hole",
    GOAL: "goal",
    FALLEN: "you, in a hole",
}

_ALIASES: dict[str, int] = {}
for _i, _name in enumerate(ACTIONS):
    for _word in (_name, _name[0], ("north", "south", "west", "east")[_i]):
        _ALIASES[_word] = _i
        for _verb in ("move", "go", "walk", "step"):
            _ALIASES[_verb + _word] = _i
_STRIP = " .!;,:"

_INTRO = (
    "You are on a frozen lake, seen from above (row 1 is the top).\n"
    "Goal: walk to the goal G without falling into a hole O.\n"
    "Legend: " + ", ".join(f"{glyph} {meaning}" for glyph, meaning in LEGEND.items()) + ".\n"
    "Rules: each turn you move one cell up, down, left or right. Moving off the edge of the map "
    "leaves you where you are. Falling into a hole ends the game as a loss.{ice}\n"
    "Answer with one direction per turn: up, down, left or right, e.g. <action>down</action>."
)
_SLIPPERY = (
    " The ice is slippery: you move in the direction you chose only one time in three; otherwise "
    "you slide in one of the two perpendicular directions (one time in three each)."
)
_FIRM = " The ice is not slippery: you always move in the direction you chose."
#: Observation views: the whole map, or the player's surroundings and the goal's direction.
VIEWS: tuple[str, ...] = ("grid", "local")
_LOCAL_INTRO = (
    "Walk across a frozen lake to the goal without falling into a hole. Each turn you are told how far "
    "the goal is and what lies one step up, down, left and right of you. Answer up, down, left or right."
)


def local_view(player: int, goal: int, holes: bytes | bytearray, size: int) -> str:
    """What the player knows in the ``local`` view: the goal's offset and the four neighbours.

    >>> print(local_view(0, 5, bytes([0, 1, 0, 0, 0, 0, 0, 0, 0]), 3))
    Goal: 1 down, 2 right.
    up: edge, down: ice, left: edge, right: hole.
    """
    (pr, pc), (gr, gc) = divmod(player, size), divmod(goal, size)
    parts = []
    if gr != pr:
        parts.append(f"{abs(gr - pr)} {'down' if gr > pr else 'up'}")
    if gc != pc:
        parts.append(f"{abs(gc - pc)} {'right' if gc > pc else 'left'}")
    where = ", ".join(parts) if parts else "here"
    around = []
    for name, (dr, dc) in zip(ACTIONS, ((-1, 0), (1, 0), (0, -1), (0, 1)), strict=True):
        r, c = pr + dr, pc + dc
        if not (0 <= r < size and 0 <= c < size):
            what = "edge"
        else:
            cell = r * size + c
            what = "goal" if cell == goal else "hole" if holes[cell] else "ice"
        around.append(f"{name}: {what}")
    return f"Goal: {where}.\n{', '.join(around)}."


def _neighbours(size: int) -> list[tuple[int, ...]]:
    """The cells next to each cell of a ``size`` x ``size`` map (cached: maps share them)."""
    table = _NEIGHBOURS.get(size)
    if table is None:
        table = []
        for cell in range(size * size):
            r, c = divmod(cell, size)
            candidates = (
                (cell - size, r > 0),
                (cell + size, r < size - 1),
                (cell - 1, c > 0),
                (cell + 1, c < size - 1),
            )
            table.append(tuple(x for x, ok in candidates if ok))
        _NEIGHBOURS[size] = table
    return table


_NEIGHBOURS: dict[int, list[tuple[int, ...]]] = {}


def in_split(holes: bytes, start: int, goal: int, split: str) -> bool:
    """Whether the map with these holes, start and goal cells belongs to ``split``."""
    return (zlib.crc32(f"{start},{goal}".encode(), zlib.crc32(holes)) % TEST_MODULUS == 0) == (split == "test")


def distances_to(goal: int, holes: bytearray | bytes, size: int) -> list[int]:
    """Steps from every cell to ``goal`` on a ``size`` x ``size`` map avoiding holes (-1: cut off)."""
    neighbours = _neighbours(size)
    dist = [-1] * (size * size)
    dist[goal] = 0
    queue = [goal]
    for cell in queue:
        step = dist[cell] + 1
        for x in neighbours[cell]:
            if dist[x] < 0 and not holes[x]:
                dist[x] = step
                queue.append(x)
    return dist


class FrozenLakeEnv(TextEnv):
    """FrozenLake: cross a frozen lake from the start to the goal without falling into a hole.

    **Description.** A square map of frozen ice with holes. The start, the goal and the holes are
    random, and a safe path from the start to the goal always exists. Presets: ``easy`` 4x4 with
    15% holes, ``medium`` 6x6 with 20%, ``hard`` 8x8 with 25%. With ``slippery=True`` moves are
    stochastic as in Gymnasium's FrozenLake (the chosen direction with probability 1/3, each
    perpendicular direction with probability 1/3); randomness comes from the episode seed.

    **Observation.** At reset an introduction (goal, legend, rules, action format) followed by the
    map; after each step one line saying what happened (including a slip) and the map. Legend:
    ``P`` you, ``_`` frozen ice, ``O`` hole, ``G`` goal, ``X`` you, in a hole. Glyphs are
    separated by single spaces, one row per line.

    **Actions.** ``up``, ``down``, ``left``, ``right`` (case-insensitive; ``u/d/l/r``,
    ``north/south/west/east`` and ``move up``/``go left`` forms are accepted, as is
    ``<action>up</action>``). Anything else is an invalid step: the state is unchanged. Moving
    off the edge of the map is a valid step that leaves you in place (the observation says so).

    **Reward components.**

    * ``success_reward``: ``1.0`` on reaching the goal.
    * ``invalid_action_reward``: ``invalid_penalty`` (default ``-0.1``) on an invalid step.
    * ``step_cost_reward``: ``step_cost`` (default ``0``) on every step.

    **Reward basis.** The reward is the sum of every component (``success_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** ``terminated`` with success on the goal, ``terminated`` with failure in a
    hole, ``truncated`` after ``max_turns`` (default 100) turns.

    **Arguments.**

    * ``difficulty``: ``"easy"`` (default), ``"medium"`` or ``"hard"``.
    * ``size``: side of the map, 3 to 12 (overrides the preset).
    * ``hole_fraction``: fraction of the cells other than start and goal that are holes, 0 to 0.5
      (overrides the preset).
    * ``slippery``: stochastic moves as in Gymnasium's FrozenLake (default ``False``).
    * ``view``: ``"grid"`` (default) shows the whole map; ``"local"`` shows, instead of the map,
      the goal's offset and what lies one step in each direction (``Goal: 2 down, 1 right.`` /
      ``up: ice, down: hole, left: edge, right: ice.``): a short prompt for small models, on the
      same maps and with the same dynamics and rewards.
    * the common :class:`~envgym.core.TextEnv` arguments (``max_turns``, ``invalid_penalty``,
      ``step_cost``, ``reward``, ``split``, ...).

    The ``train`` and ``test`` splits hold disjoint maps: a fixed CRC-32 partition of the
    holes, start and goal puts about 1 map in 5 in ``test`` (maps of the other split are drawn
    again from the episode generator; a tiny configuration with no map of a split uses the last
    draw).

    ``reset(options={"map": text})`` plays a given square map written with the legend above (or
    Gymnasium's ``S``/``F``/``H``/``G`` letters) instead of a random one.

    **Version history.** ``v0``: first release.
    """

    name: ClassVar[str] = "frozen_lake"
    reward_components: ClassVar[tuple[str, ...]] = ("success_reward", "invalid_action_reward", "step_cost_reward")
    reward_basis = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 100

    def __init__(
        self,
        *,
        difficulty: str = "easy",
        size: int | None = None,
        hole_fraction: float | None = None,
        slippery: bool = False,
        view: str = "grid",
        **kwargs: Any,
    ) -> None:
        check_choice("difficulty", difficulty, DIFFICULTIES)
        check_choice("view", view, VIEWS)
        preset_size, preset_fraction = DIFFICULTIES[difficulty]
        lo, hi = SIZE_RANGE
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or not lo <= size <= hi):
            raise InvalidKwargsError(f"size must be an integer from {lo} to {hi}, got {size!r}.")
        flo, fhi = HOLE_FRACTION_RANGE
        if hole_fraction is not None and (
            not isinstance(hole_fraction, (int, float))
            or isinstance(hole_fraction, bool)
            or not flo <= hole_fraction <= fhi
        ):
            raise InvalidKwargsError(f"hole_fraction must be a number from {flo} to {fhi}, got {hole_fraction!r}.")
        if not isinstance(slippery, bool):
            raise InvalidKwargsError(f"slippery must be True or False, got {slippery!r}.")
        super().__init__(**kwargs)
        self.difficulty = difficulty
        self.size = preset_size if size is None else size
        self.hole_fraction = float(preset_fraction if hole_fraction is None else hole_fraction)
        self.slippery = slippery
        self.view = view
        if (self.size, self.hole_fraction) == (preset_size, preset_fraction):
            label = difficulty
        else:
            label = f"size={self.size},hole_fraction={self.hole_fraction:g}"
        self._label = f"{label},slippery" if slippery else label
        self._intro_text = _INTRO.format(ice=_SLIPPERY if slippery else _FIRM)
        if view == "local":
            self._intro_text = _LOCAL_INTRO
        self._size = self.size
        n = self.size * self.size
        self._holes = bytearray(n)
        self._goal = n - 1
        self._player = 0
        self._dist = [0] * n
        self._start_dist = 1
        self._cells: list[str] = []
        self._seps: list[str] = []
        self._fallen = False

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        custom = (options or {}).get("map")
        if custom is not None:
            size, holes, start, goal = parse_lake(custom)
            dist = distances_to(goal, holes, size)
            if dist[start] < 0:
                raise ConfigError("options['map'] has no safe path from the start to the goal: the task cannot be won.")
        else:
            size = self.size
            for _ in range(SPLIT_TRIES):
                holes, start, goal, dist = _generate_map(rng, size, round(self.hole_fraction * (size * size - 2)))
                if in_split(holes, start, goal, self.split):
                    break
        n = size * size
        self._size = size
        self._holes = holes
        self._goal = goal
        self._player = start
        self._dist = dist
        self._start_dist = dist[start]
        self._fallen = False
        self._seps = seps = ([" "] * (size - 1) + ["\n"]) * size
        seps[-1] = ""
        self._cells = [
            (PLAYER if i == start else GOAL if i == goal else HOLE if holes[i] else FROZEN) + seps[i] for i in range(n)
        ]
        layout = "".join(self._cells)
        digest = hashlib.blake2s(layout.encode(), digest_size=6).hexdigest()
        return Task(
            id=f"frozen_lake-{size}x{size}{'-slippery' if self.slippery else ''}-{digest}",
            goal="Walk from your position P to the goal G without falling into a hole O.",
            difficulty=self._label if custom is None else ("custom,slippery" if self.slippery else "custom"),
            extra={"size": size, "holes": sum(holes), "slippery": self.slippery, "shortest_path": self._start_dist},
        )

    def _intro(self) -> str:
        return self._intro_text

    def _observe(self) -> str:
        return self._render()

    def _render(self) -> str:
        """The map (``view="grid"``) or what is around the player and where the goal lies
        (``view="local"``)."""
        if self.view == "grid":
            return "".join(self._cells)
        if self._fallen:
            return "You are in a hole."
        return local_view(self._player, self._goal, self._holes, self._size)

    def _parse(self, text: str) -> int:
        key = text.lower().strip(_STRIP).replace(" ", "")
        direction = _ALIASES.get(key)
        if direction is None:
            raise InvalidAction("expected one direction: up, down, left or right (or u/d/l/r, 'move up', 'go left').")
        return direction

    def _apply(self, action: int) -> Transition:
        moved = action
        if self.slippery:
            roll = int(self.rng.random() * 3)
            if roll:
                moved = _PERPENDICULAR[action][roll - 1]
        size = self._size
        p = self._player
        r, c = divmod(p, size)
        if moved == 0:
            to = p - size if r > 0 else p
        elif moved == 1:
            to = p + size if r < size - 1 else p
        elif moved == 2:
            to = p - 1 if c > 0 else p
        else:
            to = p + 1 if c < size - 1 else p
        if moved == action:
            line = (
                f"You moved {ACTIONS[moved]}."
                if to != p
                else f"You cannot move {ACTIONS[moved]}: that is the edge of the lake."
            )
        elif to != p:
            line = f"You slipped: you tried to move {ACTIONS[action]} but slid {ACTIONS[moved]}."
        else:
            line = f"You slipped: you tried to move {ACTIONS[action]} but slid {ACTIONS[moved]} against the edge of the lake."
        if to == p:
            return Transition(f"{line}\n\n{self._render()}", _NO_REWARD)
        cells, seps = self._cells, self._seps
        cells[p] = FROZEN + seps[p]
        self._player = to
        if self._holes[to]:
            self._fallen = True
            cells[to] = FALLEN + seps[to]
            return Transition(f"{line} You fell into a hole: game over.\n\n{self._render()}", _NO_REWARD, terminated=True)
        cells[to] = PLAYER + seps[to]
        if to == self._goal:
            return Transition(
                f"{line} You reached the goal!\n\n{self._render()}",
                {"success_reward": 1.0},
                terminated=True,
                success=True,
            )
        return Transition(f"{line}\n\n{self._render()}", _NO_REWARD)

    def admissible_actions(self) -> list[str]:
        return list(ACTIONS)

    def sample_action(self, rng: random.Random) -> str:
        return ACTIONS[rng.getrandbits(2)]

    def progress(self) -> float:
        remaining = self._dist[self._player]
        if self._fallen or remaining < 0:  # in a hole, or on ice cut off from the goal
            return 0.0
        return min(1.0, max(0.0, 1.0 - remaining / self._start_dist))


_NO_REWARD: dict[str, float] = {}


def _generate_map(rng: random.Random, size: int, count: int) -> tuple[bytearray, int, int, list[int]]:
    """Return ``(holes, start, goal, distances to the goal)`` of a random map with a safe path.

    Start and goal are random cells at least ``size - 1`` steps apart (Manhattan distance) and
    ``count`` of the other cells are holes. Maps whose start is cut off from the goal are drawn
    again from the same generator, so the result depends on the seed only.
    """
    n = size * size
    rand = rng.random
    for _attempt in range(1000):
        start = int(rand() * n)
        goal = int(rand() * n)
        (sr, sc), (gr, gc) = divmod(start, size), divmod(goal, size)
        if abs(sr - gr) + abs(sc - gc) < size - 1:
            continue
        holes = bytearray(n)
        others = list(range(n))
        others.remove(start)
        others.remove(goal)
        for cell in rng.sample(others, count):
            holes[cell] = 1
        dist = distances_to(goal, holes, size)
        if dist[start] > 0:
            return holes, start, goal, dist
    # Not reached with the allowed hole fractions: holes anywhere but on an L-shaped safe path.
    start, goal = 0, n - 1
    path = {*range(size), *range(2 * size - 1, n, size)}
    holes = bytearray(n)
    for cell in rng.sample([i for i in range(n) if i not in path], min(count, n - len(path))):
        holes[cell] = 1
    return holes, start, goal, distances_to(goal, holes, size)


def parse_lake(text: str) -> tuple[int, bytearray, int, int]:
    """Parse a square map written with :data:`LEGEND` glyphs (spaces between glyphs optional).

    Gymnasium's letters are accepted too (``S`` start, ``F`` frozen, ``H`` hole, ``G`` goal).
    Returns ``(size, holes, start, goal)``; raises :class:`~envgym.errors.ConfigError` when the
    map is malformed.
    """
    if not isinstance(text, str):
        raise ConfigError(f"options['map'] must be the map as text, got {type(text).__name__}.")
    rows = []
    for line in text.strip("\n").splitlines():
        cells = line.split() if " " in line.strip() else list(line.strip())
        if cells:
            rows.append(cells)
    size = len(rows)
    if not size or any(len(row) != size for row in rows):
        raise ConfigError(
            f"options['map'] must be a square grid of glyphs, got rows of lengths {[len(r) for r in rows]}."
        )
    holes = bytearray(size * size)
    starts, goals = [], []
    for r, row in enumerate(rows):
        for c, glyph in enumerate(row):
            i = r * size + c
            if glyph in (PLAYER, "S"):
                starts.append(i)
            elif glyph == GOAL:
                goals.append(i)
            elif glyph in (HOLE, "H"):
                holes[i] = 1
            elif glyph not in (FROZEN, "F"):
                raise ConfigError(
                    f"unknown glyph {glyph!r} at row {r + 1}, column {c + 1} of options['map']; use "
                    "P (start), _ (frozen), O (hole) and G (goal), or Gymnasium's S, F, H, G."
                )
    if len(starts) != 1 or len(goals) != 1:
        raise ConfigError(f"options['map'] needs exactly one start and one goal, got {len(starts)} and {len(goals)}.")
    return size, holes, starts[0], goals[0]
