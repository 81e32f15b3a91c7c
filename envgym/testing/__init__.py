"""Checkers that every envgym environment passes, shipped for outside authors too.

:func:`check_env` runs Gymnasium's own ``check_env`` and then the envgym text-environment
contract: the ``info`` keys, seeded determinism over a scripted rollout of valid actions
(:func:`~envgym.testing.common.roll_action`: admissible ones, the env's own samples or action-space
samples; ``CheckReport.valid_steps`` counts them), bad-input fuzzing (no
string, and no non-string either, may make ``step`` raise), step-before-reset, truncation at
``max_turns`` and ``close()`` twice. :func:`check_aec_env` and :func:`check_parallel_env` run
PettingZoo's API tests plus the same text contract for multi-agent environments.

Each failure raises :class:`envgym.errors.EnvContractError` naming the check, the seed and the
value that broke it.

Modules: :mod:`~envgym.testing.common` (what every checker shares), :mod:`~envgym.testing.single_agent`
(:func:`check_env` and its named checks), :mod:`~envgym.testing.multi_agent` (the AEC and Parallel
checkers and theirs).
"""

from __future__ import annotations

from envgym.testing.common import BAD_ACTIONS, CheckReport, check_close_twice
from envgym.testing.multi_agent import check_aec_env, check_parallel_env
from envgym.testing.single_agent import check_env, scripted_rollout

__all__ = [
    "BAD_ACTIONS",
    "CheckReport",
    "check_aec_env",
    "check_close_twice",
    "check_env",
    "check_parallel_env",
    "scripted_rollout",
]
