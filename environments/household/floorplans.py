"""Household floor plans and the seen/unseen split.

Each room type (kitchen, living room, bedroom, bathroom, office, dining room) has :data:`VARIANTS`
floor plans in each of three sizes, built once from a fixed seed. The last variant of every size is
*unseen*: only ``valid_unseen`` houses use it. Goals name an (object type, receptacle or lamp type)
pair; a fixed fifth of the pairs (chosen by a CRC32 hash, so the partition never changes between
processes) is unseen too. ``train`` and ``valid_seen`` draw only seen plans and pairs,
``valid_unseen`` only unseen ones.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

from envgym.environments.household.catalogue import (
    APPLIANCES,
    CLEAN,
    COOL,
    HEAT,
    LAMP_HOSTS,
    LAMP_ROOMS,
    LAMP_TYPES,
    LOOK,
    OBJECTS,
    ROOMS,
    TASK_TYPES,
    ObjectType,
    RoomType,
)

__all__ = [
    "COMBOS",
    "FLOORPLANS",
    "PLANS",
    "SIZES",
    "VARIANTS",
    "Floorplan",
    "goal_combos",
    "is_unseen_combo",
]

SIZES: dict[str, tuple[int, int]] = {"small": (5, 7), "medium": (8, 10), "large": (11, 13)}
#: Floor plan variants per room type and size; the last one of each is unseen.
VARIANTS = 5


@dataclass(frozen=True, slots=True)
class Floorplan:
    """One room layout: the receptacle types (repeated per instance) and its lamps.

    Attributes:
        id: ``"<room>-<size>-<variant>"``, unique.
        room: room type key.
        size: ``small``, ``medium`` or ``large``.
        unseen: only ``valid_unseen`` houses use it.
        receptacles: receptacle types in listing order, one entry per instance.
        desklamp_host: index into ``receptacles`` of the surface with a desk lamp, or ``None``.
    """

    id: str
    room: str
    size: str
    unseen: bool
    receptacles: tuple[str, ...]
    desklamp_host: int | None

    @property
    def types(self) -> frozenset[str]:
        """Receptacle types present, plus ``desklamp`` when the plan has one."""
        extra = {"desklamp"} if self.desklamp_host is not None else set()
        return frozenset(self.receptacles) | extra


def _make_floorplan(room: RoomType, size: str, variant: int) -> Floorplan:
    rng = random.Random(f"household-floorplan-v0:{room.key}:{size}:{variant}")
    lo, hi = SIZES[size]
    target = rng.randint(lo, hi)
    counts: dict[str, int] = dict.fromkeys(room.core, 1)
    optional = [name for name, _ in room.optional]
    rng.shuffle(optional)
    # Add optional types first (variety), then more instances of multi-instance types.
    while sum(counts.values()) < target and optional:
        counts[optional.pop()] = 1
    growable = [t for t in counts if room.multi.get(t, 1) > 1]
    while sum(counts.values()) < target and growable:
        t = rng.choice(growable)
        counts[t] += 1
        if counts[t] >= room.multi[t]:
            growable.remove(t)
    desklamp_host: int | None = None
    if room.key in LAMP_ROOMS:
        hosts = [t for t in LAMP_HOSTS if t in counts]
        if hosts and (rng.random() < 0.7 or "floorlamp" not in counts):
            host_type = rng.choice(hosts)
        else:
            host_type = None
        if host_type is None and "floorlamp" not in counts:
            counts["floorlamp"] = 1
    else:
        host_type = None
    order = [t for t in room.core] + sorted(t for t in counts if t not in room.core)
    receptacles = tuple(t for t in order for _ in range(counts[t]))
    if host_type is not None:
        desklamp_host = receptacles.index(host_type)
    return Floorplan(
        id=f"{room.key}-{size}-{variant}",
        room=room.key,
        size=size,
        unseen=variant == VARIANTS - 1,
        receptacles=receptacles,
        desklamp_host=desklamp_host,
    )


#: Every floor plan, by id.
FLOORPLANS: dict[str, Floorplan] = {
    fp.id: fp
    for room in ROOMS.values()
    for size in SIZES
    for variant in range(VARIANTS)
    for fp in (_make_floorplan(room, size, variant),)
}


def is_unseen_combo(obj: str, target: str) -> bool:
    """Whether the goal pair (object type, receptacle or lamp type) belongs to ``valid_unseen``."""
    return zlib.crc32(f"household-v0:{obj}|{target}".encode()) % 5 == 0


def _targets(task_type: str, obj: ObjectType) -> tuple[str, ...]:
    if task_type == LOOK:
        return LAMP_TYPES if obj.lookable else ()
    if task_type == CLEAN and not obj.cleanable:
        return ()
    if task_type == HEAT and not obj.heatable:
        return ()
    if task_type == COOL and not obj.coolable:
        return ()
    excluded = set(APPLIANCES.get(task_type, ()))
    return tuple(r for r in obj.found_in if r not in excluded)


def goal_combos(task_type: str, unseen: bool) -> list[tuple[str, str]]:
    """Every (object type, target type) goal pair of ``task_type`` on one side of the split."""
    return [
        (name, target)
        for name, obj in OBJECTS.items()
        for target in _targets(task_type, obj)
        if is_unseen_combo(name, target) == unseen
    ]


COMBOS: dict[tuple[str, bool], tuple[tuple[str, str, frozenset[str]], ...]] = {
    (t, unseen): tuple((o, r, frozenset(OBJECTS[o].found_in) - {r}) for o, r in goal_combos(t, unseen))
    for t in TASK_TYPES
    for unseen in (False, True)
}


#: Floor plans by (unseen, size), in :data:`FLOORPLANS` order.
PLANS: dict[tuple[bool, str], tuple[Floorplan, ...]] = {}
for _fp in FLOORPLANS.values():
    PLANS.setdefault((_fp.unseen, _fp.size), ())
    PLANS[(_fp.unseen, _fp.size)] += (_fp,)
