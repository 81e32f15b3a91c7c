"""Every registered environment id passes the envgym contract checker.

New environments are picked up automatically: registering an id is enough to be checked here.
"""

from __future__ import annotations

import pytest

import envgym
from envgym.testing import check_aec_env, check_env

SPECS = envgym.list_envs()


@pytest.mark.parametrize("spec", SPECS, ids=[f"{s.kind}:{s.id}" for s in SPECS])
def test_registered_env_passes_contract(spec: envgym.EnvSpec) -> None:
    if spec.kind == "gymnasium":
        report = check_env(spec.id)
    elif spec.kind == "aec":
        report = check_aec_env(spec.id)
    else:
        report = envgym.check_parallel_env(spec.id)
    assert "seeded_determinism" in report.checks
