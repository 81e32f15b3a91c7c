"""Benchmark suites as the leaderboard sees them: the *installed* suites of :mod:`envgym.bench`.

The leaderboard never trusts the copy of the suite a bundle carries. It finds the installed suite
with the bundle's suite id (``benchmarks/<name>-v<N>.yaml``, or the folder ``$ENVGYM_BENCHMARKS``
names; see :mod:`envgym.bench.suite`), checks that its sha256 (the canonical hash of the resolved
suite, :attr:`envgym.bench.suite.Suite.sha256`) equals the bundle's, and takes the episodes to
expect, the environment arguments and the turn limits from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envgym.errors import ConfigError, NotAvailableError

if TYPE_CHECKING:  # pragma: no cover
    from envgym.bench.suite import Suite

__all__ = ["find_suite", "installed_suites", "parse_suite_copy"]


def _bench_suite() -> Any:
    try:
        from envgym.bench import suite
    except ImportError as err:  # pragma: no cover - envgym.bench ships with envgym
        raise NotAvailableError(f"the leaderboard needs envgym.bench to read benchmark suites ({err}).") from err
    return suite


def installed_suites() -> list[Suite]:
    """Every installed suite that loads (a broken file is skipped: it cannot be what a bundle ran)."""
    module = _bench_suite()
    found = []
    for path in module.list_suites():
        try:
            found.append(module.load_suite(path, check_envs=False))
        except (ConfigError, NotAvailableError):
            continue
    return found


def find_suite(suite_id: str) -> Suite | None:
    """The installed suite with id ``suite_id`` (``core-v1``), or ``None``.

    Only ids are looked up, never paths: a bundle cannot point the verifier at a file of its choice.
    """
    module = _bench_suite()
    if not isinstance(suite_id, str) or not module.SUITE_ID.match(suite_id):
        return None
    for path in module.list_suites():
        if path.stem == suite_id:
            try:
                return module.load_suite(path, check_envs=False)
            except (ConfigError, NotAvailableError):
                return None
    return None


def parse_suite_copy(data: Any) -> Suite:
    """Parse the resolved suite a bundle carries (its run's ``suite.yaml``).

    Raises:
        ConfigError: it is not a valid suite.
    """
    return _bench_suite().parse_suite(data, source="the bundle's suite copy", check_envs=False)
