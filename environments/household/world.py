"""Household worlds: the catalogue, the seeded generator, the state and the rules.

This module knows nothing about Gymnasium or envgym's base class: it is the simulator that
:class:`~envgym.environments.household.env.HouseholdEnv` drives, and it can be used on its own
(tests build worlds by hand with :meth:`World.build`).

Catalogue
    Object types carry affordances (cleanable, heatable, coolable, sliceable, a light source,
    a slicing tool) and the receptacle types where they are found; the same list is where a goal
    may ask to put them. Receptacle types are openable (cabinet, drawer, fridge, microwave, safe)
    or open surfaces; some are appliances (microwave heats, fridge cools, sink and bathtub basins
    clean). Lamps are ALFWorld's light sources: a ``desklamp`` stands on a desk, side table or
    dresser, a ``floorlamp`` is a place of its own that you go to.

Floor plans and splits
    Each room type (kitchen, living room, bedroom, bathroom, office, dining room) has
    :data:`VARIANTS` floor plans in each of three sizes, built once from a fixed seed. The last
    variant of every size is *unseen*: only ``valid_unseen`` houses use it. Goals name an
    (object type, receptacle or lamp type) pair; a fixed fifth of the pairs (chosen by a CRC32
    hash, so the partition never changes between processes) is unseen too. ``train`` and
    ``valid_seen`` draw only seen plans and pairs, ``valid_unseen`` only unseen ones.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "DIFFICULTIES",
    "FLOORPLANS",
    "OBJECTS",
    "ROOMS",
    "TASK_ALIASES",
    "TASK_TYPES",
    "Difficulty",
    "Floorplan",
    "Goal",
    "World",
    "generate",
    "goal_combos",
    "is_unseen_combo",
    "optimal_plan",
    "resolve_task_type",
]

# ----------------------------------------------------------------------------- task types
PICK = "pick_and_place_simple"
LOOK = "look_at_obj_in_light"
CLEAN = "pick_clean_then_place_in_recep"
HEAT = "pick_heat_then_place_in_recep"
COOL = "pick_cool_then_place_in_recep"
TWO = "pick_two_obj_and_place"

#: The six ALFWorld task types, in ALFWorld's numbering order (1..6).
TASK_TYPES: tuple[str, ...] = (PICK, LOOK, CLEAN, HEAT, COOL, TWO)

#: Short names accepted for ``task_type`` (besides the ALFWorld names and the numbers 1..6).
TASK_ALIASES: dict[str, str] = {
    "pick_and_place": PICK,
    "pick_place": PICK,
    "pickplace": PICK,
    "look": LOOK,
    "look_in_light": LOOK,
    "lookinlight": LOOK,
    "clean": CLEAN,
    "heat": HEAT,
    "cool": COOL,
    "pick_two": TWO,
    "picktwo": TWO,
    **{str(i + 1): t for i, t in enumerate(TASK_TYPES)},
    **{t: t for t in TASK_TYPES},
}

_STATE_OF = {CLEAN: "clean", HEAT: "hot", COOL: "cool"}
_APPLIANCES = {CLEAN: ("sinkbasin", "bathtubbasin"), HEAT: ("microwave",), COOL: ("fridge",)}
_VERB_APPLIANCE = {"clean": ("sinkbasin", "bathtubbasin"), "heat": ("microwave",), "cool": ("fridge",)}


def resolve_task_type(value: object) -> str | None:
    """The ALFWorld task type named by ``value`` (``None``/``"any"``: random per episode)."""
    if value is None:
        return None
    key = str(value).strip().lower().replace("-", "_").replace(" ", "_")
    if key in ("any", "random", ""):
        return None
    if key not in TASK_ALIASES:
        raise KeyError(value)
    return TASK_ALIASES[key]


# ----------------------------------------------------------------------------- catalogue
OPENABLE: frozenset[str] = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe"})
LAMP_TYPES: tuple[str, ...] = ("desklamp", "floorlamp")
_LAMP_HOSTS = ("desk", "sidetable", "dresser")


@dataclass(frozen=True, slots=True)
class ObjectType:
    """An object type: where it is found (and may be put by a goal) and what can be done to it."""

    name: str
    found_in: tuple[str, ...]
    cleanable: bool = False
    heatable: bool = False
    coolable: bool = False
    sliceable: bool = False
    slicer: bool = False
    lookable: bool = False


def _obj(name: str, found_in: str, flags: str = "", *, look: bool = False) -> ObjectType:
    return ObjectType(
        name,
        tuple(found_in.split()),
        cleanable="c" in flags,
        heatable="h" in flags,
        coolable="k" in flags,
        sliceable="s" in flags,
        slicer="x" in flags,
        lookable=look,
    )


#: Portable object types (flags: c cleanable, h heatable, k coolable, s sliceable, x slices).
OBJECTS: dict[str, ObjectType] = {
    o.name: o
    for o in (
        _obj("apple", "countertop diningtable fridge garbagecan sinkbasin", "chks"),
        _obj("bread", "countertop diningtable fridge cabinet", "hks"),
        _obj("egg", "countertop diningtable fridge garbagecan sinkbasin", "chk"),
        _obj("lettuce", "countertop diningtable fridge sinkbasin", "cks"),
        _obj("potato", "countertop diningtable fridge garbagecan sinkbasin", "chks"),
        _obj("tomato", "countertop diningtable fridge garbagecan sinkbasin", "chks"),
        _obj("mug", "countertop cabinet coffeemachine shelf diningtable sinkbasin desk", "chk", look=True),
        _obj("cup", "countertop cabinet diningtable shelf sinkbasin fridge", "chk", look=True),
        _obj("bowl", "countertop cabinet diningtable shelf fridge sinkbasin desk coffeetable", "ck", look=True),
        _obj("plate", "countertop cabinet diningtable shelf fridge sinkbasin coffeetable", "chk"),
        _obj("pan", "stoveburner countertop cabinet diningtable sinkbasin fridge", "ck"),
        _obj("pot", "stoveburner countertop cabinet diningtable sinkbasin fridge shelf", "ck"),
        _obj("kettle", "stoveburner countertop cabinet shelf", "c"),
        _obj("fork", "countertop drawer diningtable sinkbasin", "c"),
        _obj("spoon", "countertop drawer diningtable sinkbasin", "c"),
        _obj("knife", "countertop drawer diningtable sinkbasin", "cx"),
        _obj("butterknife", "countertop drawer diningtable sinkbasin", "cx"),
        _obj("spatula", "countertop drawer diningtable sinkbasin", "c"),
        _obj("ladle", "countertop drawer diningtable sinkbasin", "c"),
        _obj("dishsponge", "countertop sinkbasin cabinet bathtubbasin toilet shelf", "c"),
        _obj("soapbar", "countertop sinkbasin bathtubbasin toilet cabinet garbagecan", "c"),
        _obj("cloth", "countertop sinkbasin bathtubbasin cabinet drawer toilet", "c"),
        _obj("saltshaker", "countertop cabinet diningtable shelf drawer"),
        _obj("peppershaker", "countertop cabinet diningtable shelf drawer"),
        _obj("winebottle", "countertop cabinet diningtable fridge shelf", "k"),
        _obj("soapbottle", "countertop cabinet toilet shelf garbagecan"),
        _obj("spraybottle", "toilet cabinet countertop shelf garbagecan"),
        _obj("toiletpaper", "toilet cabinet countertop shelf toiletpaperhanger garbagecan drawer"),
        _obj("candle", "countertop cabinet toilet shelf drawer sidetable diningtable coffeetable"),
        _obj("towel", "towelholder countertop bathtubbasin cabinet"),
        _obj("handtowel", "handtowelholder countertop cabinet"),
        _obj("book", "bed desk shelf sidetable coffeetable sofa armchair dresser diningtable drawer", look=True),
        _obj("pen", "desk drawer shelf sidetable dresser diningtable coffeetable", look=True),
        _obj("pencil", "desk drawer shelf sidetable dresser diningtable coffeetable", look=True),
        _obj("cellphone", "bed desk drawer sidetable dresser sofa armchair shelf", look=True),
        _obj("creditcard", "desk drawer sidetable dresser shelf sofa armchair coffeetable countertop", look=True),
        _obj("keychain", "desk drawer sidetable dresser shelf sofa armchair coffeetable safe", look=True),
        _obj("remotecontrol", "sofa armchair coffeetable sidetable tvstand dresser drawer", look=True),
        _obj("watch", "desk drawer sidetable dresser shelf coffeetable safe", look=True),
        _obj("alarmclock", "desk sidetable dresser shelf", look=True),
        _obj("laptop", "bed desk sofa armchair coffeetable diningtable dresser", look=True),
        _obj("pillow", "bed sofa armchair", look=True),
        _obj("cd", "desk drawer shelf sidetable dresser safe garbagecan", look=True),
        _obj("statue", "shelf coffeetable sidetable dresser desk tvstand diningtable", look=True),
        _obj("vase", "shelf coffeetable sidetable dresser desk tvstand diningtable cabinet", look=True),
        _obj("box", "sofa armchair coffeetable sidetable dresser shelf desk diningtable", look=True),
        _obj("newspaper", "sofa armchair coffeetable sidetable diningtable garbagecan", look=True),
        _obj("tissuebox", "sidetable dresser coffeetable desk toilet shelf countertop"),
    )
}


@dataclass(frozen=True, slots=True)
class RoomType:
    """A room type: its display name, receptacles it always has, and optional ones (type, max count)."""

    key: str
    title: str
    core: tuple[str, ...]
    optional: tuple[tuple[str, int], ...]
    multi: Mapping[str, int]


def _room(key: str, title: str, core: str, optional: str, multi: str = "") -> RoomType:
    pairs: list[tuple[str, int]] = []
    for item in optional.split():
        name, _, text = item.partition(":")
        pairs.append((name, int(text or 1)))
    caps: dict[str, int] = {}
    for item in multi.split():
        name, _, text = item.partition(":")
        caps[name] = int(text)
    for name, cap in pairs:
        caps.setdefault(name, cap)
    return RoomType(key, title, tuple(core.split()), tuple(pairs), caps)


#: Room types and their receptacle catalogues (``type:max`` means up to ``max`` instances).
ROOMS: dict[str, RoomType] = {
    r.key: r
    for r in (
        _room(
            "kitchen",
            "kitchen",
            "countertop cabinet fridge microwave sinkbasin stoveburner",
            "drawer:4 coffeemachine toaster garbagecan diningtable shelf:2",
            "countertop:3 cabinet:6 stoveburner:4",
        ),
        _room(
            "livingroom",
            "living room",
            "sofa coffeetable",
            "armchair:2 sidetable:2 tvstand shelf:3 drawer:3 cabinet:3 dresser garbagecan floorlamp diningtable",
        ),
        _room(
            "bedroom",
            "bedroom",
            "bed dresser",
            "desk drawer:4 sidetable:2 shelf:3 safe laundryhamper garbagecan armchair floorlamp",
        ),
        _room(
            "bathroom",
            "bathroom",
            "sinkbasin toilet countertop",
            "bathtubbasin towelholder handtowelholder cabinet:4 drawer:3 garbagecan shelf:2 toiletpaperhanger",
        ),
        _room(
            "office",
            "office",
            "desk",
            "shelf:3 drawer:3 sidetable safe armchair garbagecan cabinet:2 floorlamp sofa",
        ),
        _room(
            "diningroom",
            "dining room",
            "diningtable",
            "sidetable:2 cabinet:3 shelf:2 drawer:2 garbagecan coffeemachine armchair",
        ),
    )
}

#: Room types whose floor plans always have a lamp (a desk lamp on a surface, or a floor lamp).
LAMP_ROOMS = frozenset({"livingroom", "bedroom", "office"})

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
        hosts = [t for t in _LAMP_HOSTS if t in counts]
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
    excluded = set(_APPLIANCES.get(task_type, ()))
    return tuple(r for r in obj.found_in if r not in excluded)


def goal_combos(task_type: str, unseen: bool) -> list[tuple[str, str]]:
    """Every (object type, target type) goal pair of ``task_type`` on one side of the split."""
    return [
        (name, target)
        for name, obj in OBJECTS.items()
        for target in _targets(task_type, obj)
        if is_unseen_combo(name, target) == unseen
    ]


_COMBOS: dict[tuple[str, bool], tuple[tuple[str, str, frozenset[str]], ...]] = {
    (t, unseen): tuple((o, r, frozenset(OBJECTS[o].found_in) - {r}) for o, r in goal_combos(t, unseen))
    for t in TASK_TYPES
    for unseen in (False, True)
}


# ----------------------------------------------------------------------------- difficulty
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

_PLANS: dict[tuple[bool, str], tuple[Floorplan, ...]] = {}
for _fp in FLOORPLANS.values():
    _PLANS.setdefault((_fp.unseen, _fp.size), ())
    _PLANS[(_fp.unseen, _fp.size)] += (_fp,)


# ----------------------------------------------------------------------------- state
class Receptacle:
    """A receptacle instance (or a floor lamp, which is a place without contents)."""

    __slots__ = ("contents", "idx", "is_lamp", "is_open", "name", "on", "openable", "room", "type")

    def __init__(self, idx: int, name: str, rtype: str, room: int, *, is_open: bool = True) -> None:
        self.idx = idx
        self.name = name
        self.type = rtype
        self.room = room
        self.openable = rtype in OPENABLE
        self.is_open = is_open or not self.openable
        self.contents: list[int] = []
        self.is_lamp = rtype == "floorlamp"
        self.on = False


class Item:
    """An object instance: portable objects, and desk lamps (fixed, toggleable)."""

    __slots__ = ("clean", "cool", "hot", "idx", "kind", "loc", "name", "on", "portable", "sliced", "type")

    def __init__(self, idx: int, name: str, otype: str, loc: int) -> None:
        self.idx = idx
        self.name = name
        self.type = otype
        self.kind: ObjectType | None = OBJECTS.get(otype)
        self.portable = self.kind is not None
        self.loc = loc
        self.clean = False
        self.hot = False
        self.cool = False
        self.sliced = False
        self.on = False


def _a(name: str) -> str:
    return ("an " if name[0] in "aeiou" else "a ") + name


def join_names(names: Sequence[str]) -> str:
    """``"a mug 1, an apple 2, and a pen 1"`` (``"nothing"`` when empty)."""
    items = [_a(n) for n in names]
    if not items:
        return "nothing"
    if len(items) == 1:
        return items[0]
    if len(items) == 2:
        return f"{items[0]} and {items[1]}"
    return ", ".join(items[:-1]) + ", and " + items[-1]


HELP_TEXT = (
    "Commands (use the exact names you see, with their numbers):\n"
    "  go to RECEPTACLE        walk to any receptacle in the house, in any room\n"
    "  open RECEPTACLE         open the receptacle you are at (close RECEPTACLE closes it)\n"
    "  take OBJECT from RECEPTACLE\n"
    "  move OBJECT to RECEPTACLE   (put OBJECT in/on RECEPTACLE works too)\n"
    "  heat OBJECT with microwave N, cool OBJECT with fridge N, clean OBJECT with sinkbasin N\n"
    "  use LAMP                turn a desklamp or floorlamp on or off\n"
    "  slice OBJECT with KNIFE\n"
    "  examine OBJECT|RECEPTACLE, inventory, look, help\n"
    "You carry one object at a time. Anything else: 'Nothing happens.'"
)


class World:
    """The full state of one household episode, with its rules.

    Attributes:
        rooms: room type keys, in house order.
        floorplans: floor plan id of each room ("" for hand-built rooms).
        recs: receptacles; ``recs[i].contents`` holds item indices.
        items: objects (portable objects and desk lamps).
        loc: index of the receptacle the agent is at, ``-1`` in the middle of ``room``.
        room: index of the room the agent is in.
        held: index of the held item, ``-1`` for none.
    """

    __slots__ = ("_go", "floorplans", "held", "items", "loc", "names", "recs", "room", "rooms")

    def __init__(self, rooms: list[str], floorplans: list[str]) -> None:
        self.rooms = rooms
        self.floorplans = floorplans
        self.recs: list[Receptacle] = []
        self.items: list[Item] = []
        self.loc = -1
        self.room = 0
        self.held = -1
        self.names: dict[str, tuple[str, int]] = {}
        self._go: dict[str, int] = {}

    # ------------------------------------------------------------------ building
    def _finish(self) -> None:
        self.names = {r.name: ("r", r.idx) for r in self.recs}
        self.names.update({o.name: ("o", o.idx) for o in self.items})
        self._go = {f"go to {r.name}": r.idx for r in self.recs}

    @classmethod
    def build(
        cls,
        rooms: Mapping[str, Iterable[str]],
        objects: Mapping[str, str] | None = None,
        *,
        closed: Iterable[str] = (),
        start_room: str | None = None,
    ) -> World:
        """Build a world by hand (tests, custom tasks).

        Args:
            rooms: room type key -> receptacle names such as ``"cabinet 1"`` (type, space, number).
            objects: object name (``"mug 1"``, ``"desklamp 1"``) -> the receptacle it is in.
            closed: openable receptacles that start closed.
            start_room: room the agent starts in (default: the first).
        """
        for key in rooms:
            if key not in ROOMS:
                raise ValueError(f"unknown room type {key!r}; expected one of {sorted(ROOMS)}.")
        world = cls(list(rooms), [""] * len(rooms))
        closed_set = set(closed)
        for room_index, names in enumerate(rooms.values()):
            for name in names:
                rtype = name.rsplit(" ", 1)[0]
                world.recs.append(Receptacle(len(world.recs), name, rtype, room_index, is_open=name not in closed_set))
        by_name = {r.name: r for r in world.recs}
        for name, where in (objects or {}).items():
            if where not in by_name:
                raise ValueError(f"object {name!r} is placed in {where!r}, which is not a receptacle of this world.")
            otype = name.rsplit(" ", 1)[0]
            if otype not in OBJECTS and otype != "desklamp":
                raise ValueError(f"unknown object type {otype!r} in {name!r}; expected one of {sorted(OBJECTS)}.")
            item = Item(len(world.items), name, otype, by_name[where].idx)
            world.items.append(item)
            by_name[where].contents.append(item.idx)
        if start_room is not None:
            if start_room not in rooms:
                raise ValueError(f"start_room {start_room!r} is not one of this world's rooms {list(rooms)}.")
            world.room = list(rooms).index(start_room)
        world._finish()
        return world

    def clone(self) -> World:
        """A deep copy (the planner check uses it for search)."""
        other = World(list(self.rooms), list(self.floorplans))
        for r in self.recs:
            c = Receptacle(r.idx, r.name, r.type, r.room, is_open=r.is_open)
            c.contents = list(r.contents)
            c.on = r.on
            other.recs.append(c)
        for o in self.items:
            c2 = Item(o.idx, o.name, o.type, o.loc)
            c2.clean, c2.hot, c2.cool, c2.sliced, c2.on = o.clean, o.hot, o.cool, o.sliced, o.on
            other.items.append(c2)
        other.loc, other.room, other.held = self.loc, self.room, self.held
        other.names = self.names
        other._go = self._go
        return other

    def fingerprint(self, salt: str = "") -> int:
        """CRC32 of the layout and the object placement: equal worlds give equal fingerprints."""
        parts = [salt, str(self.room), *self.floorplans]
        parts += [f"{r.name}:{int(r.is_open)}:{','.join(self.items[i].name for i in r.contents)}" for r in self.recs]
        return zlib.crc32("|".join(parts).encode())

    def state_key(self) -> tuple[object, ...]:
        """A hashable summary of everything that can change."""
        return (
            self.loc,
            self.room if self.loc < 0 else -1,
            self.held,
            tuple(r.is_open for r in self.recs),
            tuple(r.on for r in self.recs),
            tuple((o.loc, o.clean, o.hot, o.cool, o.sliced, o.on) for o in self.items),
        )

    # ------------------------------------------------------------------ descriptions
    def room_title(self, room: int) -> str:
        return ROOMS[self.rooms[room]].title

    def contents_text(self, rec: Receptacle) -> str:
        """What you see at ``rec`` (ALFWorld's wording)."""
        if rec.is_lamp:
            return f"The {rec.name} is {'on' if rec.on else 'off'}."
        names = [self.items[i].name for i in rec.contents]
        if rec.openable:
            if not rec.is_open:
                return f"The {rec.name} is closed."
            return f"The {rec.name} is open. In it, you see {join_names(names)}."
        return f"On the {rec.name}, you see {join_names(names)}."

    def overview(self, facing: str | None = None) -> str:
        """The room the agent is in, and what the other rooms hold."""
        here = [r.name for r in self.recs if r.room == self.room]
        title = self.room_title(self.room)
        if facing is None:
            head = f"You are in the middle of the {title}."
        else:
            head = f"You are facing the {facing}, in the {title}."
        lines = [f"{head} Looking quickly around you, you see {join_names(here)}."]
        others = []
        for index in range(len(self.rooms)):
            if index == self.room:
                continue
            names = [r.name for r in self.recs if r.room == index]
            others.append(f"the {self.room_title(index)} has {join_names(names)}")
        if others:
            lines.append("Elsewhere in the house, " + "; ".join(others) + ". You can go to any receptacle in any room.")
        return "\n".join(lines)

    def status(self) -> str:
        """Where the agent is and what it carries (empty at the very start)."""
        if self.loc < 0 and self.held < 0:
            return ""
        if self.loc < 0:
            where = f"You are in the middle of the {self.room_title(self.room)}"
        else:
            where = f"You are at {self.recs[self.loc].name}, in the {self.room_title(self.room)}"
        carrying = _a(self.items[self.held].name) if self.held >= 0 else "nothing"
        return f"{where}, carrying {carrying}."

    def describe_item(self, item: Item) -> str:
        if not item.portable:
            return f"This is {_a(item.name)}. It is {'on' if item.on else 'off'}."
        states = [
            s
            for s, flag in (("sliced", item.sliced), ("clean", item.clean), ("hot", item.hot), ("cool", item.cool))
            if flag
        ]
        adjectives = ", ".join(states)
        if adjectives:
            return f"This is {_a(adjectives)} {item.name}."
        return f"There's nothing special about {item.name}."

    # ------------------------------------------------------------------ commands
    def go_commands(self) -> dict[str, int]:
        """``"go to X"`` for every receptacle X (the env drops the current one)."""
        return self._go

    def local_commands(self) -> dict[str, tuple[str, ...]]:
        """Every valid command other than ``go to``, mapped to its parsed form, in listing order."""
        cmds: dict[str, tuple[str, ...]] = {}
        held = self.items[self.held] if self.held >= 0 else None
        if self.loc >= 0:
            rec = self.recs[self.loc]
            accessible = rec.is_open
            if rec.openable:
                if rec.is_open:
                    cmds[f"close {rec.name}"] = ("close", rec.name)
                else:
                    cmds[f"open {rec.name}"] = ("open", rec.name)
            if rec.is_lamp:
                cmds[f"use {rec.name}"] = ("use", rec.name)
            if accessible:
                for i in rec.contents:
                    item = self.items[i]
                    if item.portable:
                        if held is None:
                            cmds[f"take {item.name} from {rec.name}"] = ("take", item.name, rec.name)
                        elif (
                            held.kind is not None
                            and held.kind.slicer
                            and item.kind is not None
                            and item.kind.sliceable
                            and not item.sliced
                        ):
                            cmds[f"slice {item.name} with {held.name}"] = ("slice", item.name, held.name)
                    else:
                        cmds[f"use {item.name}"] = ("use", item.name)
            if held is not None:
                kind = held.kind
                assert kind is not None
                if accessible and not rec.is_lamp:
                    cmds[f"move {held.name} to {rec.name}"] = ("move", held.name, rec.name)
                if rec.type == "microwave" and kind.heatable:
                    cmds[f"heat {held.name} with {rec.name}"] = ("heat", held.name, rec.name)
                elif rec.type == "fridge" and kind.coolable:
                    cmds[f"cool {held.name} with {rec.name}"] = ("cool", held.name, rec.name)
                elif rec.type in ("sinkbasin", "bathtubbasin") and kind.cleanable:
                    cmds[f"clean {held.name} with {rec.name}"] = ("clean", held.name, rec.name)
            cmds[f"examine {rec.name}"] = ("examine", rec.name)
            if accessible:
                for i in rec.contents:
                    name = self.items[i].name
                    cmds[f"examine {name}"] = ("examine", name)
        if held is not None:
            cmds[f"examine {held.name}"] = ("examine", held.name)
        cmds["inventory"] = ("inventory",)
        cmds["look"] = ("look",)
        cmds["help"] = ("help",)
        return cmds

    def execute(self, action: tuple[str, ...]) -> str:
        """Apply a parsed command that is valid in the current state; return the feedback."""
        verb = action[0]
        if verb == "go":
            rec = self.recs[int(action[1])]
            prefix = ""
            if rec.room != self.room:
                self.room = rec.room
                prefix = f"You walk into the {self.room_title(rec.room)}. "
            self.loc = rec.idx
            return f"{prefix}You arrive at {rec.name}. {self.contents_text(rec)}"
        if verb == "open":
            rec = self.recs[self.loc]
            rec.is_open = True
            return f"You open the {rec.name}. {self.contents_text(rec)}"
        if verb == "close":
            rec = self.recs[self.loc]
            rec.is_open = False
            return f"You close the {rec.name}."
        if verb == "take":
            kind, idx = self.names[action[1]]
            rec = self.recs[self.loc]
            rec.contents.remove(idx)
            item = self.items[idx]
            item.loc = -1
            self.held = idx
            return f"You pick up the {item.name} from the {rec.name}."
        if verb == "move":
            rec = self.recs[self.loc]
            item = self.items[self.held]
            rec.contents.append(item.idx)
            item.loc = rec.idx
            self.held = -1
            return f"You move the {item.name} to the {rec.name}."
        if verb in ("heat", "cool", "clean"):
            item = self.items[self.held]
            rec = self.recs[self.loc]
            if verb == "heat":
                item.hot, item.cool = True, False
            elif verb == "cool":
                item.cool, item.hot = True, False
            else:
                item.clean = True
            return f"You {verb} the {item.name} using the {rec.name}."
        if verb == "use":
            kind, idx = self.names[action[1]]
            target: Receptacle | Item = self.recs[idx] if kind == "r" else self.items[idx]
            target.on = not target.on
            return f"You turn {'on' if target.on else 'off'} the {target.name}."
        if verb == "slice":
            item = self.items[self.names[action[1]][1]]
            item.sliced = True
            return f"You slice the {item.name} with the {action[2]}."
        if verb == "examine":
            kind, idx = self.names[action[1]]
            if kind == "r":
                return self.contents_text(self.recs[idx])
            return self.describe_item(self.items[idx])
        if verb == "inventory":
            if self.held < 0:
                return "You are not carrying anything."
            return f"You are carrying: {_a(self.items[self.held].name)}."
        if verb == "look":
            return self.overview(None if self.loc < 0 else self.recs[self.loc].name)
        if verb == "help":
            return HELP_TEXT
        raise ValueError(f"unknown verb {verb!r} in action {action!r}.")

    # ------------------------------------------------------------------ goal queries
    def lamp_here(self, lamp_type: str) -> tuple[bool, bool]:
        """(a lamp of ``lamp_type`` is at the agent's receptacle, one of them is on)."""
        if self.loc < 0:
            return False, False
        rec = self.recs[self.loc]
        if lamp_type == "floorlamp":
            return rec.is_lamp, rec.is_lamp and rec.on
        present = lit = False
        for i in rec.contents:
            item = self.items[i]
            if item.type == lamp_type:
                present = True
                lit = lit or item.on
        return present, lit


_MUTATING = frozenset({"go", "open", "close", "take", "move", "heat", "cool", "clean", "use", "slice"})


def is_mutating(action: tuple[str, ...]) -> bool:
    """Whether a parsed command can change the world state."""
    return action[0] in _MUTATING


# ----------------------------------------------------------------------------- goals
_TEMPLATES: dict[str, tuple[str, str]] = {
    PICK: ("put a {o} in {r}", "put some {o} on {r}"),
    LOOK: ("look at {o} under the {r}", "examine the {o} with the {r}"),
    CLEAN: ("put a clean {o} in {r}", "clean some {o} and put it in {r}"),
    HEAT: ("put a hot {o} in {r}", "heat some {o} and put it in {r}"),
    COOL: ("put a cool {o} in {r}", "cool some {o} and put it in {r}"),
    TWO: ("put two {o} in {r}", "find two {o} and put them in {r}"),
}


@dataclass(frozen=True, slots=True)
class Goal:
    """An ALFWorld goal: task type, object type and receptacle (or lamp) type.

    Success is read from the world state, never from text: for placement types, an object of
    type ``obj`` (two distinct ones in one receptacle for ``pick_two``) with the required state
    in a receptacle of type ``target``; for ``look_at_obj_in_light``, holding an ``obj`` where
    a lamp of type ``target`` is switched on.
    """

    task_type: str
    obj: str
    target: str
    template: int = 0

    @property
    def text(self) -> str:
        return _TEMPLATES[self.task_type][self.template].format(o=self.obj, r=self.target)

    def progress(self, world: World) -> float:
        """Sub-goal progress in [0, 1]; exactly 1.0 when (and only when) the goal holds.

        * pick and place: holding an ``obj`` 1/2;
        * clean/heat/cool: an ``obj`` held or in the required state 1/3, in the state 2/3;
        * look: holding an ``obj`` 1/3, standing at a ``target`` lamp 1/3;
        * pick two: 1/4 per object placed together in one ``target`` receptacle (2/4 each), plus
          1/4 while holding another ``obj``.
        """
        items = world.items
        held = items[world.held] if world.held >= 0 else None
        holding = held is not None and held.type == self.obj
        tt = self.task_type
        if tt == LOOK:
            at_lamp, lit = world.lamp_here(self.target)
            if holding and lit:
                return 1.0
            return (holding + at_lamp) / 3
        recs = world.recs
        if tt == TWO:
            best = 0
            for rec in recs:
                if rec.type == self.target:
                    n = sum(1 for i in rec.contents if items[i].type == self.obj)
                    best = max(best, n)
            if best >= 2:
                return 1.0
            return (2 * best + holding) / 4
        if tt == PICK:
            for item in items:
                if item.type == self.obj and item.loc >= 0 and recs[item.loc].type == self.target:
                    return 1.0
            return 0.5 if holding else 0.0
        state = _STATE_OF[tt]
        best = 0
        for item in items:
            if item.type != self.obj:
                continue
            has = getattr(item, state)
            if has and item.loc >= 0 and recs[item.loc].type == self.target:
                return 1.0
            score = int(has or item.loc < 0) + int(has)
            best = max(best, score)
        return best / 3

    def success(self, world: World) -> bool:
        return self.progress(world) >= 1.0


# ----------------------------------------------------------------------------- generator
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
    needs = _APPLIANCES.get(tt, LAMP_TYPES if tt == LOOK else ())
    for _ in range(200):
        plans = _draw_plans(rng, difficulty, unseen, needs)
        types: set[str] = set()
        for fp in plans:
            types |= fp.types
        options = [(o, r) for o, r, sources in _COMBOS[(tt, unseen)] if r in types and not sources.isdisjoint(types)]
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
    pool = [fp for size in difficulty.sizes for fp in _PLANS[(unseen, size)]]
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


# ----------------------------------------------------------------------------- optimal plans
def optimal_plan(world: World, goal: Goal) -> list[str]:
    """A shortest command sequence that reaches ``goal`` from the agent's current state.

    Privileged (it reads the true world state): for the perf report and tests, never for agents.
    It is exhaustive over the choices that matter (which goal object(s), which target receptacle,
    which appliance or lamp): every solution has to go to each receptacle it uses (one step
    each), open each closed receptacle it takes from or puts into (one step each), and spend
    one step per take, move, heat/cool/clean and use. It assumes the agent starts empty-handed.
    """
    if world.held >= 0:
        raise ValueError("optimal_plan expects an empty-handed agent (it plans from a fresh episode).")
    recs, items = world.recs, world.items
    objs = [o for o in items if o.type == goal.obj and o.loc >= 0]
    targets = [r for r in recs if r.type == goal.target and not r.is_lamp]
    tt = goal.task_type
    best: list[str] | None = None

    def better(plan: list[str]) -> None:
        nonlocal best
        if best is None or len(plan) < len(best):
            best = plan

    def fetch(o: Item, at: int, opened: set[int]) -> tuple[list[str], int]:
        rec = recs[o.loc]
        steps = [] if at == rec.idx else [f"go to {rec.name}"]
        if not rec.is_open and rec.idx not in opened:
            steps.append(f"open {rec.name}")
            opened.add(rec.idx)
        steps.append(f"take {o.name} from {rec.name}")
        return steps, rec.idx

    def put(o: Item, r: Receptacle, at: int, opened: set[int]) -> list[str]:
        steps = [] if at == r.idx else [f"go to {r.name}"]
        if not r.is_open and r.idx not in opened:
            steps.append(f"open {r.name}")
            opened.add(r.idx)
        steps.append(f"move {o.name} to {r.name}")
        return steps

    if tt == LOOK:
        lamps: list[tuple[int, str]] = []
        for r in recs:
            if goal.target == "floorlamp" and r.is_lamp:
                lamps.append((r.idx, r.name))
            for i in r.contents:
                if items[i].type == goal.target:
                    lamps.append((r.idx, items[i].name))
        for o in objs:
            for where, lamp in lamps:
                steps, at = fetch(o, world.loc, set())
                if at != where:
                    steps.append(f"go to {recs[where].name}")
                steps.append(f"use {lamp}")
                better(steps)
    elif tt == TWO:
        for o1 in objs:
            for o2 in objs:
                if o1 is o2:
                    continue
                for r in targets:
                    opened: set[int] = set()
                    steps, at = fetch(o1, world.loc, opened)
                    steps += put(o1, r, at, opened)
                    more, at = fetch(o2, r.idx, opened)
                    steps += more + put(o2, r, at, opened)
                    better(steps)
    else:
        verb = {CLEAN: "clean", HEAT: "heat", COOL: "cool"}.get(tt)
        appliances = [r for r in recs if verb is not None and r.type in _VERB_APPLIANCE[verb]]
        for o in objs:
            for r in targets:
                if verb is None:
                    opened = set()
                    steps, at = fetch(o, world.loc, opened)
                    better(steps + put(o, r, at, opened))
                    continue
                for app in appliances:
                    opened = set()
                    steps, at = fetch(o, world.loc, opened)
                    if at != app.idx:
                        steps.append(f"go to {app.name}")
                    steps.append(f"{verb} {o.name} with {app.name}")
                    better(steps + put(o, r, app.idx, opened))
    if best is None:
        raise ValueError(f"goal {goal.text!r} cannot be reached in this world.")
    return best
