"""What a run plays: one :class:`EpisodeTask` per episode.

A run's task list names, for every episode, the environment (id and keyword arguments), the
reset seed, the group and the member within it (GRPO groups, bench trials), and optionally its
own harness turn limit. The runner plays the list in lock-step: episodes of different
environments share one batch of agent calls (the pool remakes a slot's environment when the
next episode needs another one).

Every list is built by :func:`tasks_for` (``group_size`` episodes of each of a list of seeds): the
CLI, the bench and the trainer all call it. Without an explicit list a run plays
:func:`default_tasks`: episode ``i`` plays seed ``seed + i // group_size`` of ``env_id``, as
member ``i % group_size`` of group ``i // group_size``.

Example::

    from envgym.rollout import EpisodeTask, RunConfig, run

    tasks = [EpisodeTask("envgym/Sokoban-v0", seed=s) for s in (3, 17, 42)]
    tasks += [EpisodeTask("envgym/Wordle-v0", seed=s, member=m, group=s) for s in (1, 2) for m in range(2)]
    result = run(RunConfig(agent="random", tasks=tasks))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envgym.errors import ConfigError
from envgym.rollout.records import json_safe

__all__ = ["EpisodeTask", "default_tasks", "episode_id", "episode_numbers", "parse_tasks", "tasks_for"]


@dataclass(frozen=True)
class EpisodeTask:
    """One episode of a run.

    Attributes:
        env_id: registered single-agent environment id.
        seed: the ``env.reset`` seed (``None``: unseeded).
        env_kwargs: keyword arguments for ``envgym.make``.
        group: the episode's group (episodes of a group share a task: GRPO groups, bench seeds).
        member: its position in the group (the bench's trial number).
        max_turns: the harness turn limit of this episode (``None``: the run's ``max_turns``).
        index: the episode's number in its records (``Trajectory.index``, ``episode_id``);
            ``None``: its position in the list. Distinct within a run that writes a run folder.
        tag: the caller's label (a bench entry's name, a curriculum level): it prefixes the
            episode id (``lake/000003``) and comes back with the episode to
            ``Runner(on_task_end=...)``.
    """

    env_id: str
    seed: int | None = 0
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    group: int = 0
    member: int = 0
    max_turns: int | None = None
    index: int | None = None
    tag: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ConfigError(f"EpisodeTask.env_id must be a registered environment id, got {self.env_id!r}.")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ConfigError(f"EpisodeTask.seed must be an integer or None, got {self.seed!r}.")
        for name in ("group", "member"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"EpisodeTask.{name} must be an integer >= 0, got {value!r}.")
        if self.index is not None and (
            not isinstance(self.index, int) or isinstance(self.index, bool) or self.index < 0
        ):
            raise ConfigError(f"EpisodeTask.index must be an integer >= 0 or None, got {self.index!r}.")
        if self.max_turns is not None and (
            not isinstance(self.max_turns, int) or isinstance(self.max_turns, bool) or self.max_turns < 1
        ):
            raise ConfigError(f"EpisodeTask.max_turns must be an integer >= 1 or None, got {self.max_turns!r}.")
        if not isinstance(self.env_kwargs, Mapping):
            raise ConfigError(f"EpisodeTask.env_kwargs must be a mapping, got {type(self.env_kwargs).__name__}.")
        if not isinstance(self.tag, str):
            raise ConfigError(f"EpisodeTask.tag must be a string, got {self.tag!r}.")

    @property
    def env_key(self) -> tuple[str, str]:
        """``(env_id, kwargs as canonical JSON)``: episodes with the same key share an env kind."""
        return self.env_id, json.dumps(json_safe(dict(self.env_kwargs)), sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "seed": self.seed,
            "env_kwargs": json_safe(dict(self.env_kwargs)),
            "group": self.group,
            "member": self.member,
            "max_turns": self.max_turns,
            "index": self.index,
            "tag": self.tag,
        }


def tasks_for(
    env_id: str,
    seeds: Iterable[int | None],
    *,
    group_size: int = 1,
    env_kwargs: Mapping[str, Any] | None = None,
    max_turns: int | None = None,
    tag: str = "",
    first_index: int | None = None,
) -> tuple[EpisodeTask, ...]:
    """Which episodes a run plays: ``group_size`` episodes of each of ``seeds``, in order.

    Group ``g`` plays the ``g``-th seed; its members are ``0 .. group_size - 1``. Every run builds
    its list here: ``envgym run`` (:func:`default_tasks`, or one list per id of a multi-id run),
    a bench entry (its seeds, ``tag`` the entry's name) and a training update (its task seeds).

    Args:
        env_id: the environment id every episode plays.
        seeds: the reset seed of each group.
        group_size: episodes per seed (GRPO groups, bench trials).
        env_kwargs: keyword arguments for ``envgym.make``.
        max_turns: each episode's harness turn limit (``None``: the run's).
        tag: the label that prefixes the episode ids (``lake/000003``).
        first_index: number the episodes ``first_index, first_index + 1, ...`` (several lists in
            one run keep distinct numbers); ``None``: by their position in the run's list.
    """
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1:
        raise ConfigError(f"group_size must be an integer >= 1, got {group_size!r}.")
    kwargs = dict(env_kwargs or {})
    return tuple(
        EpisodeTask(
            env_id,
            seed,
            kwargs,
            group=group,
            member=member,
            max_turns=max_turns,
            index=None if first_index is None else first_index + group * group_size + member,
            tag=tag,
        )
        for group, seed in enumerate(seeds)
        for member in range(group_size)
    )


def default_tasks(
    env_id: str, *, episodes: int, seed: int = 0, group_size: int = 1, env_kwargs: Mapping[str, Any] | None = None
) -> tuple[EpisodeTask, ...]:
    """The tasks of a run without a list: episode ``i`` plays seed ``seed + i // group_size``
    (:func:`tasks_for` over the seeds from ``seed``, cut to ``episodes``)."""
    groups = -(-episodes // group_size)
    return tasks_for(env_id, range(seed, seed + groups), group_size=group_size, env_kwargs=env_kwargs)[:episodes]


def parse_tasks(value: Any) -> tuple[EpisodeTask, ...]:
    """A task list from :class:`EpisodeTask` objects or their ``to_dict`` mappings (config files)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ConfigError(f"tasks must be a list of EpisodeTask (or mappings of their fields), got {value!r:.200}.")
    tasks = []
    for i, item in enumerate(value):
        if isinstance(item, EpisodeTask):
            tasks.append(item)
        elif isinstance(item, Mapping):
            known = set(EpisodeTask.__dataclass_fields__)
            unknown = sorted(set(item) - known)
            if unknown:
                raise ConfigError(f"tasks[{i}]: unknown field {unknown[0]!r}; known: {', '.join(sorted(known))}.")
            if "env_id" not in item:
                raise ConfigError(f"tasks[{i}]: missing env_id.")
            tasks.append(EpisodeTask(**item))
        else:
            raise ConfigError(f"tasks[{i}] must be an EpisodeTask or a mapping, got {type(item).__name__}.")
    if not tasks:
        raise ConfigError("tasks must name at least one episode.")
    return tuple(tasks)


def episode_numbers(tasks: Sequence[EpisodeTask], *, distinct: bool) -> list[int]:
    """Each task's episode number (``index``, else its position).

    Episode ids (``tag/number``, or ``number`` without a tag) must be distinct: agents keep each
    live episode's state under its id. With ``distinct`` the numbers alone must be (a run folder
    files episodes by number). Either violation is a :class:`ConfigError`.
    """
    numbers = [t.index if t.index is not None else i for i, t in enumerate(tasks)]
    keys = [(t.tag, n) for t, n in zip(tasks, numbers, strict=True)] if not distinct else numbers
    if len(set(keys)) != len(keys):
        dupes = sorted({episode_id(*k) if isinstance(k, tuple) else k for k in keys if keys.count(k) > 1})[:5]
        where = (
            "written to one run folder must have distinct episode numbers (index)"
            if distinct
            else ("must have distinct episode ids (tag and index)")
        )
        raise ConfigError(f"tasks {where}, got {dupes} more than once.")
    return numbers


def episode_id(tag: str, number: int) -> str:
    """The id of episode ``number`` of a task tagged ``tag``: ``"000042"`` or ``"lake/000042"``."""
    return f"{tag}/{number:06d}" if tag else f"{number:06d}"
