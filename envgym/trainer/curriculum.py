"""Curricula: a growing turn limit, an adaptive difficulty ladder, and a filter of useless tasks.

Plain Python (no torch). Each class is deterministic and keeps its whole state in
``state_dict()`` (JSON-serialisable), which ``load_state_dict()`` restores when a run resumes.

- :class:`HorizonSchedule` lets the agent act for few turns first and more later (as in
  ScalingInter-RL): short episodes teach the basics cheaply, longer ones then allow planning.
- :class:`DifficultyController` moves one environment up and down an ordered ladder of levels
  so that the success rate stays in a target band (as in SCALER): tasks the policy always or
  never solves carry no group-relative learning signal.
- :class:`TaskFilter` stops sampling individual tasks that are always or never solved, over all
  their outcomes or (``window``) over their last few groups only.
- :class:`TaskPool` is a finite set of task seeds played in a seeded random order, pass after
  pass, from which the trainer drops the tasks its :class:`TaskFilter` retires.
"""

from __future__ import annotations

import collections
import copy
import json
import random
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from envgym.errors import ConfigError

__all__ = ["DifficultyController", "HorizonSchedule", "TaskFilter", "TaskPool"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(name: str, value: Any, *, minimum: int) -> int:
    if not _is_int(value) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _success(value: Any, where: str) -> bool:
    """A recorded outcome as a bool: True/False or 1/0 (numpy bools too); anything else is refused."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, (str, bytes)) and (value == 1 or value == 0) and not isinstance(value, float):
        return bool(value)
    raise ConfigError(f"{where} must be True or False (did the episode succeed?), got {value!r}.")


def _state_mapping(state: Any, keys: Sequence[str], owner: str) -> Mapping[str, Any]:
    if not isinstance(state, Mapping) or any(key not in state for key in keys):
        raise ConfigError(
            f"{owner}.load_state_dict expects a mapping with keys {', '.join(keys)} (from state_dict()), got {state!r}."
        )
    return state


# ---------------------------------------------------------------------------------- horizon
class HorizonSchedule:
    """Turn limit per policy update, in stages (ScalingInter-RL style horizon curriculum).

    ``stages`` lists ``(first_update, max_turns)``: the stage applies from ``first_update`` until
    the next stage starts. The first stage starts at update 0, updates strictly increase and
    turn limits never decrease::

        HorizonSchedule([(0, 2), (20, 4), (50, 8)]).max_turns(30) == 4
    """

    def __init__(self, stages: Sequence[tuple[int, int]]) -> None:
        self._stages = self._validate(stages)

    @staticmethod
    def _validate(stages: Any) -> tuple[tuple[int, int], ...]:
        example = "[(0, 2), (20, 4), (50, 8)]"
        if isinstance(stages, (str, bytes, Mapping)) or not isinstance(stages, Iterable):
            raise ConfigError(
                f"stages must be a list of (first_update, max_turns) pairs such as {example}, got {stages!r}."
            )
        out: list[tuple[int, int]] = []
        for i, stage in enumerate(stages):
            if (
                isinstance(stage, (str, bytes))
                or not isinstance(stage, Sequence)
                or len(stage) != 2
                or not all(_is_int(v) for v in stage)
            ):
                raise ConfigError(f"stage {i} must be a pair of integers (first_update, max_turns), got {stage!r}.")
            first, turns = int(stage[0]), int(stage[1])
            if turns < 1:
                raise ConfigError(f"stage {i} allows max_turns={turns}; every stage needs max_turns >= 1.")
            if not out and first != 0:
                raise ConfigError(
                    f"the first stage must start at update 0, got {first}; add a stage (0, max_turns) in front."
                )
            if out and first <= out[-1][0]:
                raise ConfigError(
                    f"stage {i} starts at update {first}, not after the previous stage (update {out[-1][0]}); "
                    "first_update must strictly increase."
                )
            if out and turns < out[-1][1]:
                raise ConfigError(
                    f"stage {i} lowers max_turns from {out[-1][1]} to {turns}; the horizon may only stay or grow."
                )
            out.append((first, turns))
        if not out:
            raise ConfigError(f"stages must list at least one (first_update, max_turns) pair such as {example}.")
        return tuple(out)

    @classmethod
    def linear(cls, start: int, end: int, updates: int, stages: int) -> HorizonSchedule:
        """``stages`` evenly spaced stages over ``updates`` updates, turn limits from ``start`` to ``end``.

        Stage ``k`` (0-based) starts at update ``round(k * updates / stages)`` with
        ``round(start + (end - start) * k / (stages - 1))`` turns; ``linear(2, 8, 100, 4)`` is
        ``[(0, 2), (25, 4), (50, 6), (75, 8)]``. Neighbouring stages that round to the same
        turn limit are merged.
        """
        start = _check_int("start", start, minimum=1)
        end = _check_int("end", end, minimum=1)
        updates = _check_int("updates", updates, minimum=1)
        stages = _check_int("stages", stages, minimum=2)
        if end < start:
            raise ConfigError(f"end ({end}) must be >= start ({start}): the horizon only grows.")
        if stages > updates:
            raise ConfigError(f"stages ({stages}) cannot exceed updates ({updates}): each stage needs an update.")
        out: list[tuple[int, int]] = []
        for k in range(stages):
            first = round(k * updates / stages)
            turns = round(start + (end - start) * k / (stages - 1))
            if out and turns == out[-1][1]:
                continue
            out.append((first, turns))
        return cls(out)

    @property
    def stages(self) -> tuple[tuple[int, int], ...]:
        """The ``(first_update, max_turns)`` stages."""
        return self._stages

    def max_turns(self, update: int) -> int:
        """The turn limit of policy update ``update`` (0-based)."""
        if not _is_int(update) or update < 0:
            raise ConfigError(f"update must be an integer >= 0, got {update!r}.")
        turns = self._stages[0][1]
        for first, stage_turns in self._stages:
            if first > update:
                break
            turns = stage_turns
        return turns

    def state_dict(self) -> dict[str, Any]:
        return {"stages": [list(stage) for stage in self._stages]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = _state_mapping(state, ["stages"], "HorizonSchedule")
        self._stages = self._validate(state["stages"])

    def __repr__(self) -> str:
        return f"HorizonSchedule({list(self._stages)!r})"


# ---------------------------------------------------------------------------------- difficulty
class DifficultyController:
    """Adaptive difficulty for one environment (SCALER style): keep success inside a band.

    ``levels`` is an ordered ladder, easiest first: env ids (``"envgym/FrozenLake-Easy-v0"``, ...),
    values of one env argument (``"easy"``, ``3``) or kwargs mappings. :attr:`current` is the level
    to play. Episodes played at that level are recorded with :meth:`record`; the window holds the
    last ``window`` outcomes since the level last changed. Once it holds at least
    ``min_episodes`` outcomes, after a call to :meth:`record`::

        rate = successes / outcomes in the window
        rate > high  -> one level up   (if not at the top)
        rate < low   -> one level down (if not at the bottom)

    and a move empties the window (outcomes of the old level say nothing about the new one). At
    most one move happens per :meth:`record` call, since its outcomes were all played at one level.

    Args:
        levels: the ladder, easiest first (at least one level; levels must be JSON-serialisable).
        target: the band ``(low, high)`` with ``0 <= low <= high <= 1``; a single number ``t``
            means ``(0.0, t)``: move up above ``t``, never down.
        window: most recent outcomes the rate is computed over.
        min_episodes: outcomes needed at a level before it may change (<= window).
        start: index of the first level.
    """

    def __init__(
        self,
        levels: Sequence[str | Mapping[str, Any] | Any],
        *,
        target: tuple[float, float] | float = (0.3, 0.7),
        window: int = 32,
        min_episodes: int = 8,
        start: int = 0,
    ) -> None:
        if isinstance(levels, (str, bytes, Mapping)) or not isinstance(levels, Sequence) or not levels:
            raise ConfigError(
                "levels must be a non-empty list of levels, easiest first (env ids, argument values or kwargs "
                f"mappings), got {levels!r}."
            )
        try:
            json.dumps(list(levels))
        except (TypeError, ValueError) as err:
            raise ConfigError(
                f"levels must be JSON-serialisable (they are saved in checkpoints), got {levels!r}."
            ) from err
        self._levels = [copy.deepcopy(level) for level in levels]
        self.low, self.high = self._band(target)
        self.window = _check_int("window", window, minimum=1)
        self.min_episodes = _check_int("min_episodes", min_episodes, minimum=1)
        if self.min_episodes > self.window:
            raise ConfigError(
                f"min_episodes ({min_episodes}) cannot exceed window ({window}): the window would never hold "
                "enough episodes to decide."
            )
        self._index = _check_int("start", start, minimum=0)
        if self._index >= len(self._levels):
            raise ConfigError(f"start must index a level (0 to {len(self._levels) - 1}), got {start!r}.")
        self._outcomes: list[bool] = []
        self._history: list[tuple[int, int]] = [(0, self._index)]
        self._episodes = 0

    @staticmethod
    def _band(target: Any) -> tuple[float, float]:
        def number(value: Any) -> float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"target must be success rates in [0, 1], got {target!r}.")
            return float(value)

        if isinstance(target, (int, float)) and not isinstance(target, bool):
            return 0.0, number(target)
        if isinstance(target, (str, bytes)) or not isinstance(target, Sequence) or len(target) != 2:
            raise ConfigError(f"target must be a band (low, high) such as (0.3, 0.7), or one number, got {target!r}.")
        low, high = number(target[0]), number(target[1])
        if low > high:
            raise ConfigError(f"target band must have low <= high, got {target!r}.")
        return low, high

    @property
    def levels(self) -> list[Any]:
        """The ladder, easiest first (a copy)."""
        return copy.deepcopy(self._levels)

    @property
    def index(self) -> int:
        """Index of the current level in the ladder."""
        return self._index

    @property
    def current(self) -> Any:
        """The level to play now (a copy when it is a mapping)."""
        return copy.deepcopy(self._levels[self._index])

    @property
    def success_rate(self) -> float | None:
        """Success rate over the window, or None when it is empty."""
        return sum(self._outcomes) / len(self._outcomes) if self._outcomes else None

    @property
    def history(self) -> list[tuple[int, int]]:
        """``(episodes recorded so far, level index)`` at the start and after every move."""
        return list(self._history)

    def record(self, successes: Iterable[bool]) -> int:
        """Record outcomes played at the current level and move if the window says so.

        Returns:
            the move: +1 (up), -1 (down) or 0.
        """
        if isinstance(successes, (str, bytes, Mapping)) or not isinstance(successes, Iterable):
            raise ConfigError(f"successes must be an iterable of True/False outcomes, got {successes!r}.")
        outcomes = [_success(value, f"outcome {i}") for i, value in enumerate(successes)]
        self._episodes += len(outcomes)
        self._outcomes = (self._outcomes + outcomes)[-self.window :]
        if len(self._outcomes) < self.min_episodes:
            return 0
        rate = sum(self._outcomes) / len(self._outcomes)
        move = 0
        if rate > self.high and self._index + 1 < len(self._levels):
            move = 1
        elif rate < self.low and self._index > 0:
            move = -1
        if move:
            self._index += move
            self._outcomes = []
            self._history.append((self._episodes, self._index))
        return move

    def state_dict(self) -> dict[str, Any]:
        return {
            "levels": copy.deepcopy(self._levels),
            "index": self._index,
            "outcomes": list(self._outcomes),
            "episodes": self._episodes,
            "history": [list(item) for item in self._history],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output; the ladder must be the one this controller was made with."""
        state = _state_mapping(state, ["levels", "index", "outcomes", "episodes", "history"], "DifficultyController")
        if list(state["levels"]) != self._levels:
            raise ConfigError(
                f"the saved difficulty ladder {state['levels']!r} differs from this one {self._levels!r}; "
                "resume with the same levels."
            )
        index = state["index"]
        if not _is_int(index) or not 0 <= index < len(self._levels):
            raise ConfigError(f"saved level index must be in 0..{len(self._levels) - 1}, got {index!r}.")
        outcomes = [_success(value, "saved outcome") for value in state["outcomes"]]
        episodes = _check_int("saved episodes", state["episodes"], minimum=0)
        history = []
        for item in state["history"]:
            if not isinstance(item, Sequence) or len(item) != 2 or not all(_is_int(v) for v in item):
                raise ConfigError(f"saved history entries must be [episodes, level index] pairs, got {item!r}.")
            history.append((int(item[0]), int(item[1])))
        self._index, self._outcomes, self._episodes = index, outcomes[-self.window :], episodes
        self._history = history or [(0, index)]

    def __repr__(self) -> str:
        return (
            f"DifficultyController(level {self._index} of {len(self._levels)}: {self._levels[self._index]!r}, "
            f"band ({self.low:g}, {self.high:g}), window {len(self._outcomes)}/{self.window})"
        )


# ---------------------------------------------------------------------------------- task filter
class TaskFilter:
    """Per-task success counts; tasks always or never solved are retired.

    A task is *active* until it has ``min_attempts`` attempts; after that it stays active only
    while its outcomes are mixed (``0 < successes < attempts``). Unknown tasks are active. With
    group-relative methods a task whose group always gets the same reward yields zero advantages,
    so playing it again costs rollouts and teaches nothing.

    With ``window=K`` only the outcomes of a task's last ``K`` :meth:`record` calls (its last
    ``K`` groups, when each call records one group) count, and a task is judged only once it has
    ``K`` of them: a task solved early and failed lately is judged on what the policy does now
    (SCALER-style). Without a window every outcome since the start counts.

    Args:
        min_attempts: attempts (outcomes, inside the window when there is one) before a task
            may be retired (>= 1).
        window: judge tasks on their last ``window`` record() calls only; ``None``: on all.
    """

    def __init__(self, *, min_attempts: int = 4, window: int | None = None) -> None:
        self.min_attempts = _check_int("min_attempts", min_attempts, minimum=1)
        self.window = None if window is None else _check_int("window", window, minimum=1)
        self._counts: dict[Hashable, list[int]] = {}
        self._recent: dict[Hashable, deque[tuple[int, int]]] = {}

    def record(self, task_id: Hashable, successes: bool | Iterable[bool]) -> None:
        """Record one outcome (a bool) or several (an iterable of bools: one group) of task ``task_id``."""
        try:
            hash(task_id)
        except TypeError as err:
            raise ConfigError(f"task_id must be hashable (a string or number), got {task_id!r}.") from err
        if isinstance(successes, (str, bytes, Mapping)):
            raise ConfigError(f"successes must be True/False or an iterable of them, got {successes!r}.")
        if isinstance(successes, Iterable):
            outcomes = [_success(value, f"outcome {i} of task {task_id!r}") for i, value in enumerate(successes)]
        else:
            outcomes = [_success(successes, f"outcome of task {task_id!r}")]
        counts = self._counts.setdefault(task_id, [0, 0])
        counts[0] += sum(outcomes)
        counts[1] += len(outcomes)
        if self.window is not None:
            recent = self._recent.setdefault(task_id, deque(maxlen=self.window))
            recent.append((sum(outcomes), len(outcomes)))

    def record_many(self, results: Iterable[tuple[Hashable, bool]]) -> None:
        """Record ``(task_id, success)`` pairs, e.g. one per finished episode."""
        for item in results:
            if not isinstance(item, Sequence) or isinstance(item, (str, bytes)) or len(item) != 2:
                raise ConfigError(f"results must be (task_id, success) pairs, got {item!r}.")
            self.record(item[0], item[1])

    def counts(self, task_id: Hashable) -> tuple[int, int]:
        """``(successes, attempts)`` of a task (``(0, 0)`` when never recorded); inside the window
        when there is one."""
        if self.window is not None:
            recent = self._recent.get(task_id, ())
            return sum(s for s, _ in recent), sum(a for _, a in recent)
        successes, attempts = self._counts.get(task_id, (0, 0))
        return successes, attempts

    def is_active(self, task_id: Hashable) -> bool:
        """False once the task has ``min_attempts`` attempts (and, with a window, ``window``
        recorded groups), all solved or all failed."""
        if self.window is not None and len(self._recent.get(task_id, ())) < self.window:
            return True
        successes, attempts = self.counts(task_id)
        if attempts < self.min_attempts:
            return True
        return 0 < successes < attempts

    def active(self, task_ids: Iterable[Hashable]) -> list[Hashable]:
        """The active ones among ``task_ids``, in their order."""
        return [task_id for task_id in task_ids if self.is_active(task_id)]

    def stats(self) -> dict[str, float]:
        """Counts over the recorded tasks: ``tasks``, ``active``, ``always_solved``, ``never_solved``,
        ``attempts`` and ``success_rate`` (over all attempts, window or not; 0.0 before any)."""
        always = never = active = attempts = solved = 0
        for task_id, (s, a) in self._counts.items():
            attempts += a
            solved += s
            if self.is_active(task_id):
                active += 1
            elif self.counts(task_id)[0] > 0:
                always += 1
            else:
                never += 1
        return {
            "tasks": len(self._counts),
            "active": active,
            "always_solved": always,
            "never_solved": never,
            "attempts": attempts,
            "success_rate": solved / attempts if attempts else 0.0,
        }

    def state_dict(self) -> dict[str, Any]:
        """``{"min_attempts": n, "window": k, "tasks": [[task_id, successes, attempts], ...], "recent":
        [[task_id, [[successes, attempts], ...]], ...]}`` (keeps int ids ints in JSON)."""
        return {
            "min_attempts": self.min_attempts,
            "window": self.window,
            "tasks": [[task_id, s, a] for task_id, (s, a) in self._counts.items()],
            "recent": [[task_id, [list(item) for item in recent]] for task_id, recent in self._recent.items()],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = _state_mapping(state, ["min_attempts", "tasks"], "TaskFilter")
        counts: dict[Hashable, list[int]] = {}
        for item in state["tasks"]:
            if (
                not isinstance(item, Sequence)
                or len(item) != 3
                or not _is_int(item[1])
                or not _is_int(item[2])
                or not 0 <= item[1] <= item[2]
            ):
                raise ConfigError(
                    f"saved tasks must be [task_id, successes, attempts] with 0 <= successes <= attempts, got {item!r}."
                )
            counts[_task_key(item[0])] = [int(item[1]), int(item[2])]
        window = state.get("window")
        window = None if window is None else _check_int("saved window", window, minimum=1)
        recent: dict[Hashable, deque[tuple[int, int]]] = {}
        for item in state.get("recent") or ():
            if not isinstance(item, Sequence) or len(item) != 2 or window is None:
                raise ConfigError(
                    f"saved recent outcomes must be [task_id, [[successes, attempts], ...]], got {item!r}."
                )
            groups = deque(maxlen=window)
            for pair in item[1]:
                if not isinstance(pair, Sequence) or len(pair) != 2 or not all(_is_int(v) for v in pair):
                    raise ConfigError(f"saved recent outcomes must be [successes, attempts] pairs, got {pair!r}.")
                groups.append((int(pair[0]), int(pair[1])))
            recent[_task_key(item[0])] = groups
        self.min_attempts = _check_int("saved min_attempts", state["min_attempts"], minimum=1)
        self.window = window
        self._counts = counts
        self._recent = recent

    def __repr__(self) -> str:
        stats = self.stats()
        window = f", window={self.window}" if self.window is not None else ""
        return f"TaskFilter(min_attempts={self.min_attempts}{window}, tasks={stats['tasks']}, active={stats['active']})"


def _task_key(value: Any) -> Hashable:
    return tuple(value) if isinstance(value, list) else value  # JSON turns tuples into lists


# ---------------------------------------------------------------------------------- task pool
class TaskPool:
    """A finite set of task seeds, played in a seeded random order, one pass after another.

    Pass ``c`` plays the seeds in an order shuffled by ``random.Random`` seeded from
    ``(seed, c)``, so two pools with the same seeds and ``seed`` hand out the same sequence.
    :meth:`draw` takes the next seeds of that sequence, skipping dropped tasks; a seed it must
    not give now (``exclude``: already played in this update) keeps its place and comes first in
    the next draw. :meth:`drop` retires a task for good.

    Args:
        seeds: the task seeds (distinct integers, at least one).
        seed: the seed of the order.
    """

    def __init__(self, seeds: Sequence[int], *, seed: int = 0) -> None:
        if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
            raise ConfigError(f"seeds must be a non-empty list of task seeds, got {seeds!r}.")
        if not all(_is_int(s) for s in seeds) or len(set(seeds)) != len(seeds):
            raise ConfigError(f"seeds must be distinct integers, got {list(seeds)!r}.")
        if not _is_int(seed):
            raise ConfigError(f"seed must be an integer, got {seed!r}.")
        self._seeds = [int(s) for s in seeds]
        self.seed = int(seed)
        self._pass = 0
        self._position = 0
        self._order = self._shuffled(0)
        self._deferred: list[int] = []
        self._dropped: dict[int, int] = {}

    def _shuffled(self, number: int) -> list[int]:
        order = list(self._seeds)
        random.Random(f"envgym.taskpool:{self.seed}:{number}").shuffle(order)
        return order

    @property
    def seeds(self) -> list[int]:
        """Every seed of the pool, dropped ones included, in pool order."""
        return list(self._seeds)

    @property
    def active(self) -> list[int]:
        """The seeds not dropped, in pool order."""
        return [s for s in self._seeds if s not in self._dropped]

    @property
    def dropped(self) -> dict[int, int]:
        """Dropped seeds and the update that dropped each."""
        return dict(self._dropped)

    @property
    def passes(self) -> int:
        """Complete passes over the pool so far."""
        return self._pass + (1 if self._position >= len(self._order) else 0)

    def _next(self) -> int:
        if self._position >= len(self._order):
            self._pass += 1
            self._position = 0
            self._order = self._shuffled(self._pass)
        value = self._order[self._position]
        self._position += 1
        return value

    def draw(self, count: int, *, exclude: Iterable[int] = ()) -> list[int]:
        """The next ``count`` active seeds not in ``exclude`` (fewer when the pool has no more)."""
        count = _check_int("count", count, minimum=0)
        banned = set(exclude)
        active = set(self.active)
        out: list[int] = []
        if not (active - banned):
            return out
        old = collections.deque(self._deferred)
        later: list[int] = []  # seeds met now that must wait (they keep their turn)
        # Each active seed shows up in every pass, so two passes (plus the deferred ones) reach every
        # seed that can be given.
        budget = len(old) + 2 * len(self._seeds)
        while len(out) < count and budget > 0:
            budget -= 1
            value = old.popleft() if old else self._next()
            if value in self._dropped:
                continue
            if value in banned or value in out:
                if value not in later:
                    later.append(value)
                continue
            out.append(value)
        rest = [v for v in old if v not in self._dropped]
        self._deferred = rest + [v for v in later if v not in rest]
        return out

    def drop(self, task_seed: int, update: int) -> None:
        """Retire ``task_seed`` (dropped at ``update``): it is never drawn again."""
        if task_seed not in self._seeds:
            raise ConfigError(f"seed {task_seed!r} is not in the task pool.")
        self._dropped.setdefault(int(task_seed), int(update))

    def state_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self._seeds),
            "seed": self.seed,
            "pass": self._pass,
            "position": self._position,
            "deferred": list(self._deferred),
            "dropped": [[s, u] for s, u in self._dropped.items()],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output; the pool's seeds and order seed must be the same."""
        state = _state_mapping(state, ["seeds", "seed", "pass", "position", "deferred", "dropped"], "TaskPool")
        if list(state["seeds"]) != self._seeds or state["seed"] != self.seed:
            raise ConfigError("the saved task pool has other seeds than this one; resume with the same task_pool.")
        number = _check_int("saved pass", state["pass"], minimum=0)
        position = _check_int("saved position", state["position"], minimum=0)
        if position > len(self._seeds):
            raise ConfigError(f"saved position must be at most {len(self._seeds)}, got {position}.")
        known = set(self._seeds)
        deferred = [int(v) for v in state["deferred"] if _is_int(v) and v in known]
        dropped: dict[int, int] = {}
        for item in state["dropped"]:
            if (
                not isinstance(item, Sequence)
                or len(item) != 2
                or not all(_is_int(v) for v in item)
                or item[0] not in known
            ):
                raise ConfigError(f"saved dropped tasks must be [seed, update] pairs of pool seeds, got {item!r}.")
            dropped[int(item[0])] = int(item[1])
        self._pass, self._position, self._order = number, position, self._shuffled(number)
        self._deferred, self._dropped = deferred, dropped

    def __repr__(self) -> str:
        return f"TaskPool({len(self._seeds)} seeds, {len(self._dropped)} dropped, pass {self._pass})"
