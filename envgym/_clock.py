"""The one clock helper: UTC wall-clock time as an aware ``datetime`` or an ISO-8601 string.

Every timestamp envgym writes (run records, run folders, bench runs, bundles, the leaderboard
store, training events) comes from here, so they all read the same way.
"""

from __future__ import annotations

import datetime as _dt

__all__ = ["utc_now", "utc_timestamp"]


def utc_now() -> _dt.datetime:
    """The current time in UTC (timezone-aware)."""
    return _dt.datetime.now(_dt.UTC)


def utc_timestamp(timespec: str = "milliseconds") -> str:
    """The current UTC time in ISO 8601 (``2026-11-24T23:58:47.123+00:00``); ``timespec`` as in
    :meth:`datetime.datetime.isoformat` (``"seconds"`` for human-facing records)."""
    return utc_now().isoformat(timespec=timespec)
