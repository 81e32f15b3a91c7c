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


@pytest.mark.parametrize("spec", SPECS, ids=[f"{s.kind}:{s.id}" for s in SPECS])
def test_registered_env_passes_contract(spec: envgym.EnvSpec) -> None:
    try:
        report = CHECKERS[spec.kind](spec.id)
    except MissingDependencyError as err:
        pytest.skip(str(err))
    assert "seeded_determinism" in report.checks


def test_the_registry_spans_the_families() -> None:
    families = {s.family for s in SPECS}
    assert {"games", "household", "webshop"} <= families
    assert len(SPECS) >= 40
