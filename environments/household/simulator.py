"""Household simulator: the state of one episode (receptacles, objects, the agent) and its rules.

It knows nothing about Gymnasium or envgym's base class: :class:`World` is what
:class:`~envgym.environments.household.env.HouseholdEnv` drives, and it can be used on its own
(tests build worlds by hand with :meth:`World.build`). It owns the descriptions the agent reads,
the commands valid in each state and what each command does.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence

from envgym.environments.household.catalogue import OBJECTS, OPENABLE, ROOMS, ObjectType

__all__ = ["HELP_TEXT", "Item", "Receptacle", "World", "is_mutating", "join_names"]


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
