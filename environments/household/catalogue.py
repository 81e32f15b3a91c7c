"""Household catalogue: the six task types, object types and their affordances, room types.

Static data only (no randomness, no state). Object types carry affordances (cleanable, heatable,
coolable, sliceable, a light source, a slicing tool) and the receptacle types where they are found;
the same list is where a goal may ask to put them. Receptacle types are openable (cabinet, drawer,
fridge, microwave, safe) or open surfaces; some are appliances (microwave heats, fridge cools, sink
and bathtub basins clean). Lamps are ALFWorld's light sources: a ``desklamp`` stands on a desk, side
table or dresser, a ``floorlamp`` is a place of its own that you go to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "APPLIANCES",
    "CLEAN",
    "COOL",
    "HEAT",
    "LAMP_HOSTS",
    "LAMP_ROOMS",
    "LAMP_TYPES",
    "LOOK",
    "OBJECTS",
    "OPENABLE",
    "PICK",
    "ROOMS",
    "STATE_OF",
    "TASK_ALIASES",
    "TASK_TYPES",
    "TWO",
    "VERB_APPLIANCE",
    "ObjectType",
    "RoomType",
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

STATE_OF = {CLEAN: "clean", HEAT: "hot", COOL: "cool"}
APPLIANCES = {CLEAN: ("sinkbasin", "bathtubbasin"), HEAT: ("microwave",), COOL: ("fridge",)}
VERB_APPLIANCE = {"clean": ("sinkbasin", "bathtubbasin"), "heat": ("microwave",), "cool": ("fridge",)}


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
LAMP_HOSTS = ("desk", "sidetable", "dresser")


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
