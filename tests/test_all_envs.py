"""Every registered environment id passes the envgym contract checker.

New environments are picked up automatically: registering an id is enough to be checked here.
An id whose optional extra is not installed is skipped with the install command as the reason.
"""

from __future__ import annotations

import pytest

import envgym
from envgym.errors import MissingDependencyError
from envgym.testing import check_aec_env, check_env, check_parallel_env

SPECS = [s for s in envgym.list_envs() if s.family != "test"]
CHECKERS = {"gymnasium": check_env, "aec": check_aec_env, "parallel": check_parallel_env}
#: Ids whose check took 10 s or more in a full run (a browser, a server, an external engine, a long
#: episode): marked slow, so that parallel workers start them first (tests/conftest.py).
SLOW_IDS = {
    "gymnasium:envgym/WebShop-Browser-v0",
    "parallel:envgym/Coop-ApacheProject-v0",
    "parallel:envgym/Coop-ApacheProject-Text-v0",
    "parallel:envgym/Coop-GraduatedSanction-v0",
    "gymnasium:envgym/TextWorld-v0",
    "gymnasium:envgym/Drive-Intersection-v0",
    "gymnasium:envgym/Drive-Intersection-Kinematics-v0",
    "gymnasium:envgym/GUIGrounding-MiniWoB-Text-v0",
}


@pytest.mark.parametrize(
    "spec",
    [pytest.param(s, marks=[pytest.mark.slow] if f"{s.kind}:{s.id}" in SLOW_IDS else []) for s in SPECS],
    ids=[f"{s.kind}:{s.id}" for s in SPECS],
)
def test_registered_env_passes_contract(spec: envgym.EnvSpec) -> None:
    try:
        report = CHECKERS[spec.kind](spec.id)
    except MissingDependencyError as err:
        pytest.skip(str(err))
    assert "seeded_determinism" in report.checks
    # the determinism roll plays valid actions (admissible ones, or the env's own samples): a roll of
    # rejected guesses would leave the state untouched and could not see state leaking between episodes
    assert report.valid_steps * 2 >= report.steps, f"only {report.valid_steps} of {report.steps} roll steps were valid"


def test_the_registry_spans_the_families() -> None:
    families = {s.family for s in SPECS}
    assert {"games", "household", "webshop"} <= families
    assert len(SPECS) >= 40


def test_the_slow_ids_are_registered() -> None:
    # a renamed or removed id would silently lose its place at the front of a parallel run
    assert SLOW_IDS <= {f"{s.kind}:{s.id}" for s in SPECS}
