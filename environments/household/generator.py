"""Household generator: difficulty presets and the seeded sampling of a house and its goal."""

from __future__ import annotations

import random
from dataclasses import dataclass

from envgym.environments.household.catalogue import (
    APPLIANCES,
    LAMP_TYPES,
    LOOK,
    OBJECTS,
    OPENABLE,
    ROOMS,
    TASK_TYPES,
    TWO,
)
from envgym.environments.household.floorplans import COMBOS, PLANS, Floorplan
from envgym.environments.household.goals import Goal
from envgym.environments.household.simulator import Item, Receptacle, World

__all__ = ["DIFFICULTIES", "Difficulty", "generate"]


@dataclass(frozen=True, slots=True)
class Difficulty:
    """Generator settings of a difficulty preset.

    Attributes:
        rooms: number of rooms in the house.
        sizes: floor plan sizes drawn for the rooms.
        distractors: (min, max) objects besides the goal objects.
        closed_fraction: chance that each openable receptacle starts closed.
        extra_targets: (min, max) goal-type objects beyond the one (two) the goal needs.
    """

    rooms: int
    sizes: tuple[str, ...]
    distractors: tuple[int, int]
    closed_fraction: float
    extra_targets: tuple[int, int]


DIFFICULTIES: dict[str, Difficulty] = {
    "easy": Difficulty(1, ("small", "medium"), (2, 4), 0.5, (0, 0)),
    "medium": Difficulty(2, ("small", "medium"), (5, 8), 0.8, (0, 1)),
    "hard": Difficulty(3, ("small", "medium", "large"), (9, 14), 1.0, (0, 1)),
}


def generate(
    rng: random.Random,
    *,
    task_type: str | None,
    difficulty: Difficulty,
    unseen: bool,
) -> tuple[World, Goal]:
    """Generate a house and a goal from ``rng``.

    The task type is always drawn first (then replaced by ``task_type`` if given), so a fixed
    task type and a random one that happens to draw it build the same world from the same seed.
    """
    drawn = TASK_TYPES[rng.randrange(len(TASK_TYPES))]
    tt = task_type or drawn
    template = rng.randrange(2)
    needs = APPLIANCES.get(tt, LAMP_TYPES if tt == LOOK else ())
    for _ in range(200):
        plans = _draw_plans(rng, difficulty, unseen, needs)
        types: set[str] = set()
        for fp in plans:
            types |= fp.types
        options = [(o, r) for o, r, sources in COMBOS[(tt, unseen)] if r in types and not sources.isdisjoint(types)]
        if options:
            break
    else:  # pragma: no cover - the catalogue makes this unreachable (checked by the tests)
        raise RuntimeError(f"could not generate a {tt} task after 200 attempts (unseen={unseen}).")
    obj, target = options[rng.randrange(len(options))]
    goal = Goal(tt, obj, target, template)
    world = _populate(rng, plans, goal, difficulty)
    return world, goal


def _draw_plans(rng: random.Random, difficulty: Difficulty, unseen: bool, needs: tuple[str, ...]) -> list[Floorplan]:
    """One floor plan per room; the first one has an appliance or lamp of ``needs`` (if any)."""
    n = difficulty.rooms
    pool = [fp for size in difficulty.sizes for fp in PLANS[(unseen, size)]]
    if needs:
        first_pool = [fp for fp in pool if not fp.types.isdisjoint(needs)]
    else:
        first_pool = pool
    first = first_pool[rng.randrange(len(first_pool))]
    plans = [first]
    used = {first.room}
    rooms_left = [r for r in ROOMS if r not in used]
    rng.shuffle(rooms_left)
    for room in rooms_left[: n - 1]:
        candidates = [fp for fp in pool if fp.room == room]
        plans.append(candidates[rng.randrange(len(candidates))])
    rng.shuffle(plans)
    return plans


def _populate(rng: random.Random, plans: list[Floorplan], goal: Goal, difficulty: Difficulty) -> World:
    world = World([fp.room for fp in plans], [fp.id for fp in plans])
    counters: dict[str, int] = {}
    lamp_hosts: list[int] = []
    for room_index, fp in enumerate(plans):
        for k, rtype in enumerate(fp.receptacles):
            counters[rtype] = counters.get(rtype, 0) + 1
            is_open = not (rtype in OPENABLE and rng.random() < difficulty.closed_fraction)
            rec = Receptacle(len(world.recs), f"{rtype} {counters[rtype]}", rtype, room_index, is_open=is_open)
            world.recs.append(rec)
            if fp.desklamp_host == k:
                lamp_hosts.append(rec.idx)
    by_type: dict[str, list[int]] = {}
    for rec in world.recs:
        if not rec.is_lamp:
            by_type.setdefault(rec.type, []).append(rec.idx)

    placements: list[tuple[str, int]] = []
    # Goal objects: never in a receptacle of the target type, so no goal holds at the start.
    sources = [i for t in OBJECTS[goal.obj].found_in if t != goal.target for i in by_type.get(t, ())]
    needed = 2 if goal.task_type == TWO else 1
    needed += rng.randint(*difficulty.extra_targets)
    for _ in range(needed):
        placements.append((goal.obj, sources[rng.randrange(len(sources))]))
    # Distractors: other types, wherever they are found in this house.
    candidates = [
        (name, spots)
        for name, obj in OBJECTS.items()
        if name != goal.obj
        for spots in ([i for t in obj.found_in for i in by_type.get(t, ())],)
        if spots
    ]
    for _ in range(rng.randint(*difficulty.distractors)):
        name, spots = candidates[rng.randrange(len(candidates))]
        placements.append((name, spots[rng.randrange(len(spots))]))
    # Number instances in a random order so that "mug 1" is not always the goal object.
    rng.shuffle(placements)
    numbers: dict[str, int] = {}
    for otype, where in placements:
        numbers[otype] = numbers.get(otype, 0) + 1
        item = Item(len(world.items), f"{otype} {numbers[otype]}", otype, where)
        world.items.append(item)
        world.recs[where].contents.append(item.idx)
    for n, host in enumerate(lamp_hosts, start=1):
        item = Item(len(world.items), f"desklamp {n}", "desklamp", host)
        world.items.append(item)
        world.recs[host].contents.append(item.idx)
    # Contents listed in a shuffled order, as a person would find them.
    for rec in world.recs:
        if len(rec.contents) > 1:
            rng.shuffle(rec.contents)
    world.room = rng.randrange(len(plans))
    world._finish()
    return world
