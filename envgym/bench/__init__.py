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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "Suite": "suite",
    "SuiteEntry": "suite",
    "find_suite": "suite",
    "list_suites": "suite",
    "load_suite": "suite",
    "suites_dir": "suite",
    "BenchRun": "run",
    "run_suite": "run",
    "load_bench_run": "run",
    "bootstrap_ci": "metrics",
    "compute_results": "metrics",
    "pass_hat_k": "metrics",
    "stratified_bootstrap_ci": "metrics",
    "write_report": "report",
    "compare_runs": "compare",
    "mcnemar_exact": "compare",
    "sign_flip_test": "compare",
}

__all__ = [
    "BenchRun",
    "Suite",
    "SuiteEntry",
    "bootstrap_ci",
    "compare_runs",
    "compute_results",
    "find_suite",
    "list_suites",
    "load_bench_run",
    "load_suite",
    "mcnemar_exact",
    "pass_hat_k",
    "run_suite",
    "sign_flip_test",
    "stratified_bootstrap_ci",
    "suites_dir",
    "write_report",
]

if TYPE_CHECKING:  # pragma: no cover
    from envgym.bench.compare import compare_runs, mcnemar_exact, sign_flip_test
    from envgym.bench.metrics import bootstrap_ci, compute_results, pass_hat_k, stratified_bootstrap_ci
    from envgym.bench.report import write_report
    from envgym.bench.run import BenchRun, load_bench_run, run_suite
    from envgym.bench.suite import Suite, SuiteEntry, find_suite, list_suites, load_suite, suites_dir


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'envgym.bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"envgym.bench.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
