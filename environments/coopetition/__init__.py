"""Coopetition: the 20 mixed-motive multi-agent games of Coopetition-Gym v1 (Pant & Yu).

Only specs live here (string entry points): registering the family imports no game code.
Every game ``<Name>`` of :data:`.catalog.GAMES` is registered twice under one id:

* ``gymnasium.make("envgym/Coop-<Name>-v0")``: the Gymnasium joint-action view
  (:class:`.api.CoopEnv`);
* ``envgym.make_parallel("envgym/Coop-<Name>-v0")``: PettingZoo Parallel
  (:class:`.api.CoopParallelEnv`), and ``envgym.make_aec`` of the same id its AEC form.

Reward modes (``reward_mode="private" | "integrated" | "cooperative"``), ``normalize`` and
``reward_scale`` are constructor arguments of every view. The engine is :mod:`.game`.
"""

from __future__ import annotations

from envgym.environments.coopetition.catalog import GAMES

from envgym.registration import EnvSpec

FAMILY = "coopetition"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {
    "suite": "coopetition-v1",
    "perf": "benchmarks/perf/coopetition.py",
    "oracle_waivers": {
        "envgym.environments.coopetition.api:CoopParallelEnv": (
            "the numeric PettingZoo view is for classic multi-agent RL; the oracle plays the text view "
            "(envgym.agents.solvers.coopetition), which coopetition-v1 runs"
        ),
    },
}

SPECS: list[EnvSpec] = [
    spec
    for g in GAMES
    for spec in (
        EnvSpec(
            id=f"envgym/Coop-{g.name}-v0",
            entry_point="envgym.environments.coopetition.api:CoopEnv",
            family=FAMILY,
            summary=f"{g.summary} ({g.mechanism}; joint action)",
            kwargs={"game": g.name},
        ),
        EnvSpec(
            id=f"envgym/Coop-{g.name}-v0",
            entry_point="envgym.environments.coopetition.api:CoopParallelEnv",
            family=FAMILY,
            summary=f"{g.summary} ({g.mechanism}; PettingZoo Parallel)",
            kwargs={"game": g.name},
            kind="parallel",
        ),
    )
]

# The LLM view of every game (``envgym.make_parallel("envgym/Coop-<Name>-Text-v0")``):
# observations and answers in words, optional messages between agents (:class:`.text.CoopTextEnv`).
SPECS += [
    EnvSpec(
        id=f"envgym/Coop-{g.name}-Text-v0",
        entry_point="envgym.environments.coopetition.text:CoopTextEnv",
        family=FAMILY,
        summary=f"{g.summary} ({g.mechanism}; LLM text view, PettingZoo Parallel)",
        kwargs={"game": g.name},
        kind="parallel",
    )
    for g in GAMES
]
