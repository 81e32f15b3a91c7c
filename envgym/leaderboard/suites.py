"""Benchmark suites as the leaderboard sees them: the *installed* suites of :mod:`envgym.bench`.

The leaderboard never trusts the copy of the suite a bundle carries. It finds the installed suite
with the bundle's suite id (``benchmarks/<name>-v<N>.yaml``, or the folder ``$ENVGYM_BENCHMARKS``
names; see :mod:`envgym.bench.suite`), checks that its sha256 (the canonical hash of the resolved
suite, :attr:`envgym.bench.suite.Suite.sha256`) equals the bundle's, and takes the episodes to
expect, the environment arguments and the turn limits from it.
"""

from __future__ import annotations

from typing import Any

from envgym.bench.suite import SUITE_ID, Suite, list_suites, load_suite, parse_suite
from envgym.errors import ConfigError, NotAvailableError

__all__ = [
    "MAX_TRIALS",
    "SANDBOXED_ENV_PREFIXES",
    "find_suite",
    "installed_suites",
    "max_trials",
    "parse_suite_copy",
    "suite_is_sandboxed",
]

#: Most trials (episodes per task) a bundle of any suite may hold, when the suite's own default is
#: lower: pass^k beyond this says nothing new, and every trial is replayed.
MAX_TRIALS = 16

#: Env id prefixes of the environments that run agent commands in a sandbox (shell, files, tests).
SANDBOXED_ENV_PREFIXES = ("envgym/SWE",)


def installed_suites() -> list[Suite]:
    """Every installed suite that loads (a broken file is skipped: it cannot be what a bundle ran)."""
    found = []
    for path in list_suites():
        try:
            found.append(load_suite(path, check_envs=False))
        except (ConfigError, NotAvailableError):
            continue
    return found


def find_suite(suite_id: str) -> Suite | None:
    """The installed suite with id ``suite_id`` (``core-v1``), or ``None``.

    Only ids are looked up, never paths: a bundle cannot point the verifier at a file of its choice.
    """
    if not isinstance(suite_id, str) or not SUITE_ID.match(suite_id):
        return None
    for path in list_suites():
        if path.stem == suite_id:
            try:
                return load_suite(path, check_envs=False)
            except (ConfigError, NotAvailableError):
                return None
    return None


def parse_suite_copy(data: Any) -> Suite:
    """Parse the resolved suite a bundle carries (its run's ``suite.yaml``).

    Raises:
        ConfigError: it is not a valid suite.
    """
    return parse_suite(data, source="the bundle's suite copy", check_envs=False)


def max_trials(suite: Suite) -> int:
    """The most trials a bundle of ``suite`` may hold: the suite's own ``trials`` or
    :data:`MAX_TRIALS`, whichever is larger (``envgym bench run --trials`` may raise the default)."""
    return max(suite.trials, MAX_TRIALS)


def suite_is_sandboxed(suite: Suite | str) -> bool:
    """Whether replaying ``suite`` (a suite or an installed suite's id) runs agent commands in a
    sandbox: an entry's env id starts with one of :data:`SANDBOXED_ENV_PREFIXES` (``envgym/SWE``).

    A server uses it to keep anonymous uploads of such suites off: each of their episodes may
    spend the sandbox's timeouts. An unknown suite id is ``False`` (its bundle is rejected anyway).
    """
    if isinstance(suite, str):
        found = find_suite(suite)
        if found is None:
            return False
        suite = found
    return any(entry.env.startswith(SANDBOXED_ENV_PREFIXES) for entry in suite.entries)
