"""The leaderboard: result bundles, verification by replay, a SQL store and a web app.

A bench run (``envgym bench run``) becomes a **bundle** (:mod:`~envgym.leaderboard.bundle`: one
gzip JSON Lines file with a manifest and every episode's actions and claimed rewards), which is
**verified by replay** (:mod:`~envgym.leaderboard.verify`: each episode is played again in the
same environment version and any mismatch rejects the bundle), **scored** from the replayed
values (:mod:`~envgym.leaderboard.scores`), **stored** (:mod:`~envgym.leaderboard.store`,
SQLAlchemy: SQLite by default, PostgreSQL by URL) and **shown** (:mod:`~envgym.leaderboard.app`,
FastAPI; also a static HTML export).

Names load on first use: ``import envgym.leaderboard`` imports neither SQLAlchemy nor FastAPI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "Bundle": "bundle",
    "BundleError": "bundle",
    "make_bundle": "bundle",
    "read_bundle": "bundle",
    "write_bundle": "bundle",
    "bundle_bytes": "bundle",
    "content_hash": "bundle",
    "VerificationError": "verify",
    "Verified": "verify",
    "VerifyConfig": "verify",
    "verify_bundle": "verify",
    "replay_episode": "verify",
    "Scores": "scores",
    "compute_scores": "scores",
    "pass_hat_k": "scores",
    "find_suite": "suites",
    "installed_suites": "suites",
    "Store": "store",
    "default_url": "store",
    "create_app": "app",
    "export_site": "pages",
}

__all__ = [
    "Bundle",
    "BundleError",
    "Scores",
    "Store",
    "VerificationError",
    "Verified",
    "VerifyConfig",
    "bundle_bytes",
    "compute_scores",
    "content_hash",
    "create_app",
    "default_url",
    "export_site",
    "find_suite",
    "installed_suites",
    "make_bundle",
    "pass_hat_k",
    "read_bundle",
    "replay_episode",
    "verify_bundle",
    "write_bundle",
]

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
    from envgym.leaderboard.pages import export_site
    from envgym.leaderboard.scores import Scores, compute_scores, pass_hat_k
    from envgym.leaderboard.store import Store, default_url
    from envgym.leaderboard.suites import find_suite, installed_suites
    from envgym.leaderboard.verify import (
        VerificationError,
        Verified,
        VerifyConfig,
        replay_episode,
        verify_bundle,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'envgym.leaderboard' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"envgym.leaderboard.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
