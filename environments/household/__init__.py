"""Household: ALFWorld-style text worlds generated from a seed, and a TextWorld bridge.

Only specs live here (string entry points): registering the family imports no environment code.
``envgym/Household-v0`` is the ``medium`` preset with a task type drawn per seed; ``-Easy``,
``-Medium`` and ``-Hard`` set the difficulty; ``-PickPlace``, ``-LookInLight``, ``-Clean``,
``-Heat``, ``-Cool`` and ``-PickTwo`` fix one of ALFWorld's six task types.
``envgym/TextWorld-v0`` needs the optional ``textworld`` package (``pip install 'envgym[textworld]'``).
"""

from __future__ import annotations

from envgym.registration import EnvSpec

FAMILY = "household"
_ENTRY = "envgym.environments.household.env:HouseholdEnv"
_BASE = "envgym/Household-v0"
_SUMMARY = "ALFWorld-style household tasks in a generated house (six task types, seen/unseen splits)"

_TASK_VARIANTS = {
    "PickPlace": "pick_and_place_simple",
    "LookInLight": "look_at_obj_in_light",
    "Clean": "pick_clean_then_place_in_recep",
    "Heat": "pick_heat_then_place_in_recep",
    "Cool": "pick_cool_then_place_in_recep",
    "PickTwo": "pick_two_obj_and_place",
}

SPECS: list[EnvSpec] = [
    EnvSpec(id=_BASE, entry_point=_ENTRY, family=FAMILY, summary=f"{_SUMMARY} (medium)"),
    *(
        EnvSpec(
            id=f"envgym/Household-{level.capitalize()}-v0",
            entry_point=_ENTRY,
            family=FAMILY,
            summary=f"{_SUMMARY} ({level})",
            kwargs={"difficulty": level},
            variant_of=_BASE,
        )
        for level in ("easy", "medium", "hard")
    ),
    *(
        EnvSpec(
            id=f"envgym/Household-{variant}-v0",
            entry_point=_ENTRY,
            family=FAMILY,
            summary=f"Household, {task_type} tasks only (medium)",
            kwargs={"task_type": task_type},
            variant_of=_BASE,
        )
        for variant, task_type in _TASK_VARIANTS.items()
    ),
    EnvSpec(
        id="envgym/TextWorld-v0",
        entry_point="envgym.environments.household.textworld_env:TextWorldEnv",
        family=FAMILY,
        summary="TextWorld games generated per seed and compiled offline (needs envgym[textworld])",
    ),
]
