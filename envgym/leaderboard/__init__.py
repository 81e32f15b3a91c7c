"""The leaderboard: result bundles, verification by replay, a SQL store and a web app.

A bench run (``envgym bench run``) becomes a **bundle** (:mod:`~envgym.leaderboard.bundle`: one
gzip JSON Lines file with a manifest and every episode's actions and claimed rewards), which is
**verified by replay** (:mod:`~envgym.leaderboard.verify`: each episode is played again in the
same environment version and any mismatch rejects the bundle), **scored** from the replayed
values (:mod:`~envgym.leaderboard.scores`), **stored** (:mod:`~envgym.leaderboard.store`,
SQLAlchemy: SQLite by default, PostgreSQL by URL) and **shown** (:mod:`~envgym.leaderboard.app`,
FastAPI; also a static HTML export). A server verifies uploads in a bounded pool of child
processes with a queue, a deadline and a memory limit each (:mod:`~envgym.leaderboard.intake`),
never in the threads that serve pages.

Names load on first use: ``import envgym.leaderboard`` imports neither SQLAlchemy nor FastAPI.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports name the lazy exports for type checkers)
from __future__ import annotations

from typing import TYPE_CHECKING

from envgym._imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "bundle": (
            "Bundle",
            "BundleError",
            "make_bundle",
            "read_bundle",
            "write_bundle",
            "bundle_bytes",
            "content_hash",
        ),
        "verify": (
            "VerificationError",
            "Verified",
            "VerifyConfig",
            "verify_bundle",
            "replay_episode",
        ),
        "scores": (
            "Scores",
            "compute_scores",
        ),
        "suites": (
            "find_suite",
            "installed_suites",
        ),
        "store": (
            "Store",
            "default_url",
        ),
        "intake": ("PoolConfig",),
        "app": ("create_app",),
        "pages": ("export_site", "plain"),
    },
)

if TYPE_CHECKING:  # pragma: no cover
    from envgym.leaderboard.app import create_app
    from envgym.leaderboard.bundle import (
        Bundle,
        BundleError,
        bundle_bytes,
        content_hash,
        make_bundle,
        read_bundle,
        write_bundle,
    )
    from envgym.leaderboard.intake import PoolConfig
    from envgym.leaderboard.pages import export_site, plain
    from envgym.leaderboard.scores import Scores, compute_scores
    from envgym.leaderboard.store import Store, default_url
    from envgym.leaderboard.suites import find_suite, installed_suites
    from envgym.leaderboard.verify import (
        VerificationError,
        Verified,
        VerifyConfig,
        replay_episode,
        verify_bundle,
    )
