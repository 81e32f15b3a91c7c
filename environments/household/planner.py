"""Household planner: the privileged shortest plan (oracle) for a goal in a world."""

from __future__ import annotations

from envgym.environments.household.catalogue import CLEAN, COOL, HEAT, LOOK, TWO, VERB_APPLIANCE
from envgym.environments.household.goals import Goal
from envgym.environments.household.simulator import Item, Receptacle, World

__all__ = ["optimal_plan"]


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
        appliances = [r for r in recs if verb is not None and r.type in VERB_APPLIANCE[verb]]
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
