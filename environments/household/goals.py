"""Household goals: the six ALFWorld task types as goals, their texts and their success checks."""

from __future__ import annotations

from dataclasses import dataclass

from envgym.environments.household.catalogue import CLEAN, COOL, HEAT, LOOK, PICK, STATE_OF, TWO
from envgym.environments.household.simulator import World

__all__ = ["Goal"]

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
        state = STATE_OF[tt]
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
