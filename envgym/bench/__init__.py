"""Benchmarks: versioned suites, suite runs through the rollout harness, metrics and reports.

A *suite* is a YAML file ``benchmarks/<name>-v<version>.yaml`` naming environment ids (with their
versions), keyword arguments, split, seeds, episodes and turn limits (:mod:`envgym.bench.suite`).
:func:`run_suite` plays every entry with one agent through :class:`envgym.rollout.Runner`, one run
folder per entry, and writes ``bench.json``, ``suite.yaml`` and ``results.json`` beside them
(:mod:`envgym.bench.run`). :mod:`envgym.bench.metrics` computes success rates, rewards, pass^k and
bootstrap confidence intervals; :mod:`envgym.bench.report` writes Markdown and HTML reports with
plots; :mod:`envgym.bench.compare` pairs the episodes of two runs and tests the differences.

Names load on first use: ``import envgym.bench`` imports neither numpy nor the runner.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports name the lazy exports for type checkers)
from __future__ import annotations

from typing import TYPE_CHECKING

from envgym._imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "suite": (
            "Suite",
            "SuiteEntry",
            "find_suite",
            "list_suites",
            "load_suite",
            "suites_dir",
        ),
        "run": (
            "BenchRun",
            "run_suite",
            "load_bench_run",
        ),
        "metrics": (
            "bootstrap_ci",
            "compute_results",
            "pass_hat",
            "pass_hat_k",
            "stratified_bootstrap_ci",
        ),
        "report": ("write_report",),
        "compare": (
            "compare_runs",
            "mcnemar_exact",
            "sign_flip_test",
        ),
    },
)

if TYPE_CHECKING:  # pragma: no cover
    from envgym.bench.compare import compare_runs, mcnemar_exact, sign_flip_test
    from envgym.bench.metrics import bootstrap_ci, compute_results, pass_hat, pass_hat_k, stratified_bootstrap_ci
    from envgym.bench.report import write_report
    from envgym.bench.run import BenchRun, load_bench_run, run_suite
    from envgym.bench.suite import Suite, SuiteEntry, find_suite, list_suites, load_suite, suites_dir
