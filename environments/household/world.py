"""Household worlds: one import point for the catalogue, floor plans, simulator, goals, generator and planner.

The household simulator is split by what each part owns; this module re-exports their public names so
that ``from envgym.environments.household.world import ...`` keeps working:

* :mod:`~envgym.environments.household.catalogue`: task types, object types and their affordances, room types;
* :mod:`~envgym.environments.household.floorplans`: floor plans and the seen/unseen split of plans and goal pairs;
* :mod:`~envgym.environments.household.simulator`: :class:`World`, the state of an episode and its rules;
* :mod:`~envgym.environments.household.goals`: :class:`Goal`, goal texts and success checks;
* :mod:`~envgym.environments.household.generator`: difficulty presets and :func:`generate`;
* :mod:`~envgym.environments.household.planner`: the privileged shortest plan :func:`optimal_plan`.

It imports no Gymnasium or envgym base class code: :class:`World` is what
:class:`~envgym.environments.household.env.HouseholdEnv` drives, and it can be used on its own.
"""

from __future__ import annotations

from envgym.environments.household.catalogue import (
    CLEAN,
    COOL,
    HEAT,
    LAMP_ROOMS,
    LAMP_TYPES,
    LOOK,
    OBJECTS,
    OPENABLE,
    PICK,
    ROOMS,
    TASK_ALIASES,
    TASK_TYPES,
    TWO,
    ObjectType,
    RoomType,
    resolve_task_type,
)
from envgym.environments.household.floorplans import (
    FLOORPLANS,
    SIZES,
    VARIANTS,
    Floorplan,
    goal_combos,
    is_unseen_combo,
)
from envgym.environments.household.generator import DIFFICULTIES, Difficulty, generate
from envgym.environments.household.goals import Goal
from envgym.environments.household.planner import optimal_plan
from envgym.environments.household.simulator import HELP_TEXT, Item, Receptacle, World, is_mutating, join_names

__all__ = [
    "CLEAN",
    "COOL",
    "DIFFICULTIES",
    "FLOORPLANS",
    "HEAT",
    "HELP_TEXT",
    "LAMP_ROOMS",
    "LAMP_TYPES",
    "LOOK",
    "OBJECTS",
    "OPENABLE",
    "PICK",
    "ROOMS",
    "SIZES",
    "TASK_ALIASES",
    "TASK_TYPES",
    "TWO",
    "VARIANTS",
    "Difficulty",
    "Floorplan",
    "Goal",
    "Item",
    "ObjectType",
    "Receptacle",
    "RoomType",
    "World",
    "generate",
    "goal_combos",
    "is_mutating",
    "is_unseen_combo",
    "join_names",
    "optimal_plan",
    "resolve_task_type",
]
