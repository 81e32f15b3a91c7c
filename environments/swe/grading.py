"""SWE-bench's grading rules, applied to a sandbox's pytest run (shared by the env and the SWE-bench loader).

A FAIL_TO_PASS test succeeds only when it *passed* (a skipped or missing one failed); a
PASS_TO_PASS test succeeds when it passed or was skipped. An instance is resolved when every
FAIL_TO_PASS test succeeds and none of PASS_TO_PASS broke, *and* the JUnit report parsed and
pytest's exit code is 0: the cross-check (SWE-bench v5's) that a patch printing fake ``PASSED``
lines cannot pass, since outcomes come only from the report written out of the agent's reach.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["score"]


def score(run: Any, fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]) -> dict[str, Any]:
    """The grading report of ``run`` (an ``envgym.sandbox.PytestRun``).

    Returns ``resolved``, ``fail_to_pass`` (test -> outcome, ``"missing"`` when absent),
    ``f2p_fraction``, ``pass_to_pass_broken`` (sorted ids), ``report_ok``, ``exit_code`` and
    ``seconds``.
    """
    outcomes: Mapping[str, str] = run.outcomes if run.report_ok else {}
    f2p = {t: outcomes.get(t, "missing") for t in fail_to_pass}
    broken = sorted(t for t in pass_to_pass if outcomes.get(t) not in ("passed", "skipped"))
    f2p_ok = sum(o == "passed" for o in f2p.values())
    resolved = bool(run.report_ok and run.exit_code == 0 and f2p_ok == len(f2p) and not broken)
    return {
        "resolved": resolved,
        "fail_to_pass": f2p,
        "f2p_fraction": f2p_ok / len(f2p) if f2p else 1.0,
        "pass_to_pass_broken": broken,
        "report_ok": bool(run.report_ok),
        "exit_code": run.exit_code,
        "seconds": float(run.seconds),
    }
