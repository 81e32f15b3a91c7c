"""Curricula: a growing turn limit, an adaptive difficulty ladder, and a filter of useless tasks.

Plain Python (no torch). Each class is deterministic and keeps its whole state in
``state_dict()`` (JSON-serialisable), which ``load_state_dict()`` restores when a run resumes.

- :class:`HorizonSchedule` lets the agent act for few turns first and more later (as in
  ScalingInter-RL): short episodes teach the basics cheaply, longer ones then allow planning.
- :class:`DifficultyController` moves one environment up and down an ordered ladder of levels
  so that the success rate stays in a target band (as in SCALER): tasks the policy always or
  never solves carry no group-relative learning signal.
- :class:`TaskFilter` stops sampling individual tasks that are always or never solved.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from envgym.errors import ConfigError

__all__ = ["DifficultyController", "HorizonSchedule", "TaskFilter"]


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

    Args:
        min_attempts: attempts before a task may be retired (>= 1).
    """

    def __init__(self, *, min_attempts: int = 4) -> None:
        self.min_attempts = _check_int("min_attempts", min_attempts, minimum=1)
        self._counts: dict[Hashable, list[int]] = {}

    def record(self, task_id: Hashable, successes: bool | Iterable[bool]) -> None:
        """Record one outcome (a bool) or several (an iterable of bools) of task ``task_id``."""
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

    def record_many(self, results: Iterable[tuple[Hashable, bool]]) -> None:
        """Record ``(task_id, success)`` pairs, e.g. one per finished episode."""
        for item in results:
            if not isinstance(item, Sequence) or isinstance(item, (str, bytes)) or len(item) != 2:
                raise ConfigError(f"results must be (task_id, success) pairs, got {item!r}.")
            self.record(item[0], item[1])

    def counts(self, task_id: Hashable) -> tuple[int, int]:
        """``(successes, attempts)`` of a task (``(0, 0)`` when never recorded)."""
        successes, attempts = self._counts.get(task_id, (0, 0))
        return successes, attempts

    def is_active(self, task_id: Hashable) -> bool:
        """False once the task has ``min_attempts`` attempts, all solved or all failed."""
        successes, attempts = self.counts(task_id)
        if attempts < self.min_attempts:
            return True
        return 0 < successes < attempts

    def active(self, task_ids: Iterable[Hashable]) -> list[Hashable]:
        """The active ones among ``task_ids``, in their order."""
        return [task_id for task_id in task_ids if self.is_active(task_id)]

    def stats(self) -> dict[str, float]:
        """Counts over the recorded tasks: ``tasks``, ``active``, ``always_solved``, ``never_solved``,
        ``attempts`` and ``success_rate`` (over all attempts; 0.0 before any)."""
        always = never = active = attempts = solved = 0
        for task_id, (s, a) in self._counts.items():
            attempts += a
            solved += s
            if self.is_active(task_id):
                active += 1
            elif s == a:
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
        """``{"min_attempts": n, "tasks": [[task_id, successes, attempts], ...]}`` (keeps int ids ints in JSON)."""
        return {
            "min_attempts": self.min_attempts,
            "tasks": [[task_id, s, a] for task_id, (s, a) in self._counts.items()],
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
            task_id = tuple(item[0]) if isinstance(item[0], list) else item[0]  # JSON turns tuples into lists
            counts[task_id] = [int(item[1]), int(item[2])]
        self.min_attempts = _check_int("saved min_attempts", state["min_attempts"], minimum=1)
        self._counts = counts

    def __repr__(self) -> str:
        stats = self.stats()
        return f"TaskFilter(min_attempts={self.min_attempts}, tasks={stats['tasks']}, active={stats['active']})"
