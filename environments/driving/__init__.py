"""Driving: highway-env scenarios as text for LLM agents and as numbers for classic RL.

Only specs live here (string entry points): registering the family imports no simulator code.
``envgym/Drive-<Scenario>-v0`` is the text view (scene description, numbered meta-actions) and
``envgym/Drive-<Scenario>-Kinematics-v0`` the numeric view (highway-env's Kinematics Box
observations, Discrete meta-actions) of the scenarios highway (highway-fast), merge, roundabout
and intersection. Both need ``pip install 'envgym[driving]'`` (highway-env). A CARLA adapter with
the same text interface lives in :mod:`envgym.environments.driving.carla_adapter` (needs the
``carla`` client and a running CARLA server; not registered).
"""

from __future__ import annotations

from envgym.registration import EnvSpec

FAMILY = "driving"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {"suite": "driving-v1", "perf": "benchmarks/perf/driving.py"}
_TEXT = "envgym.environments.driving.env:DriveEnv"
_NUMERIC = "envgym.environments.driving.env:DriveKinematicsEnv"

#: (id part, scenario kwarg, summary) of every scenario.
SCENARIOS = (
    ("Highway", "highway", "highway-env highway-fast: 3 lanes of traffic for 30 s"),
    ("Merge", "merge", "highway-env merge: pass an on-ramp merge within 20 s"),
    ("Roundabout", "roundabout", "highway-env roundabout: drive through a roundabout for 11 s"),
    ("Intersection", "intersection", "highway-env intersection: cross an unsignalised intersection (speed only)"),
)

SPECS: list[EnvSpec] = [
    spec
    for name, scenario, summary in SCENARIOS
    for spec in (
        EnvSpec(
            id=f"envgym/Drive-{name}-v0",
            entry_point=_TEXT,
            family=FAMILY,
            summary=f"Driving, text scene and numbered meta-actions: {summary} (needs envgym[driving])",
            kwargs={"scenario": scenario},
        ),
        EnvSpec(
            id=f"envgym/Drive-{name}-v1",
            entry_point=_TEXT,
            family=FAMILY,
            summary=f"Driving, text scene and meta-actions with fixed numbers: {summary} (needs envgym[driving])",
            kwargs={"scenario": scenario, "action_numbers": "fixed"},
        ),
        EnvSpec(
            id=f"envgym/Drive-{name}-Kinematics-v0",
            entry_point=_NUMERIC,
            family=FAMILY,
            summary=f"Driving, Kinematics Box observations and Discrete meta-actions: {summary} (needs envgym[driving])",
            kwargs={"scenario": scenario},
            variant_of=f"envgym/Drive-{name}-v0",
        ),
    )
]
