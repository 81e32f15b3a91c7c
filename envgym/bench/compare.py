"""Compare two bench runs of the same suite, episode by episode, with paired significance tests.

Episodes are paired by ``(entry, seed, trial)``; a pair counts only when both episodes are scored
(infrastructure failures are listed as unpaired, never as a loss). Differences are ``B - A``.

Tests (two-sided, fixed seeds, so the same runs always give the same p-values):

* **success, per entry and pooled: exact McNemar test.** Over the paired episodes, ``a_only`` is
  the count where only A succeeded and ``b_only`` where only B did; under the null both are
  equally likely among the discordant pairs, so ``p = min(1, 2 * P(X <= min(a_only, b_only)))``
  with ``X ~ Binomial(a_only + b_only, 1/2)``. It treats the pairs as independent, which holds
  for one trial per seed; with several trials per seed prefer the sign-flip p-value below.
* **success and reward, per entry and overall: paired sign-flip (permutation) test on tasks.**
  The unit is the task (seed): its difference is the mean over its paired trials of ``B - A``.
  Under the null each task's difference is symmetric about 0, so flipping its sign gives an
  equally likely dataset. The statistic is the mean task difference (per entry) or the macro
  average over entries of the entries' mean task differences (overall, signs flipped within every
  entry). With at most 16 tasks all ``2^n`` sign patterns are enumerated (exact p-value); beyond,
  ``resamples`` random patterns from ``numpy.random.default_rng(seed)`` give
  ``p = (1 + #{|T*| >= |T|}) / (1 + resamples)``.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from envgym.bench.run import BenchRun, load_bench_run
from envgym.errors import ConfigError
from envgym.rollout.summary import defines_success

__all__ = ["COMPARE_FORMAT", "compare_runs", "mcnemar_exact", "sign_flip_test"]

COMPARE_FORMAT = "envgym-bench-compare/1"
EXACT_LIMIT = 16
SIGN_FLIP_RESAMPLES = 10_000
SIGN_FLIP_SEED = 0
ALPHA = 0.05


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts."""
    for name, value in (("a_only", a_only), ("b_only", b_only)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a count >= 0, got {value!r}.")
    n = a_only + b_only
    if n == 0:
        return 1.0
    tail = math.fsum(math.comb(n, i) for i in range(min(a_only, b_only) + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def sign_flip_test(
    groups: Sequence[Sequence[float]],
    *,
    resamples: int = SIGN_FLIP_RESAMPLES,
    seed: int = SIGN_FLIP_SEED,
) -> float | None:
    """Two-sided paired sign-flip p-value.

    Args:
        groups: per stratum (entry), the paired differences of its units (tasks). One group is
            the ordinary one-sample test. The statistic is the mean over non-empty groups of the
            group's mean difference.
        resamples: random sign patterns when there are more than 16 units in all.
        seed: seed of ``numpy.random.default_rng`` for the random patterns.

    Returns ``None`` when there is no difference at all to test.
    """
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not arrays:
        return None
    sizes = [a.size for a in arrays]
    flat = np.concatenate(arrays)
    # weight of each unit in the statistic: 1 / (groups * group size)
    weights = np.concatenate([np.full(a.size, 1.0 / (len(arrays) * a.size)) for a in arrays])
    observed = abs(float(np.dot(weights, flat)))
    if np.all(flat == 0):
        return 1.0
    tolerance = 1e-12 * max(1.0, observed)
    n = int(sum(sizes))
    if n <= EXACT_LIMIT:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        stats = np.abs(signs @ (weights * flat))
        return float(np.mean(stats >= observed - tolerance))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([1.0, -1.0]), size=(resamples, n))
    stats = np.abs(signs @ (weights * flat))
    return float((1 + np.count_nonzero(stats >= observed - tolerance)) / (1 + resamples))


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def compare_runs(
    run_a: str | os.PathLike[str] | Any,
    run_b: str | os.PathLike[str] | Any,
    *,
    resamples: int = SIGN_FLIP_RESAMPLES,
    seed: int = SIGN_FLIP_SEED,
) -> dict[str, Any]:
    """Pair the episodes of two bench runs of the same suite and test the differences (B - A).

    Raises:
        ConfigError: the runs are of different suites (by id or by content hash).
    """
    a = run_a if isinstance(run_a, BenchRun) else load_bench_run(run_a)
    b = run_b if isinstance(run_b, BenchRun) else load_bench_run(run_b)
    sa, sb = a.meta["suite"], b.meta["suite"]
    if sa.get("id") != sb.get("id"):
        raise ConfigError(
            f"cannot compare runs of different suites: {a.path} ran {sa.get('id')!r}, {b.path} ran {sb.get('id')!r}. "
            "Compare two runs of the same suite version."
        )
    if sa.get("sha256") != sb.get("sha256"):
        raise ConfigError(
            f"cannot compare: both runs name suite {sa.get('id')!r} but its content differs "
            f"({str(sa.get('sha256'))[:12]}... vs {str(sb.get('sha256'))[:12]}...): the suite file changed between "
            "the runs. Re-run one of them with the same suite file."
        )
    settings = {"resamples": resamples, "seed": seed}
    entries = []
    success_groups: list[list[float]] = []
    reward_groups: list[list[float]] = []
    total_a_only = total_b_only = 0
    macro_a: list[float] = []
    macro_b: list[float] = []
    macro_ra: list[float] = []
    macro_rb: list[float] = []
    for entry in a.suite.entries:
        eps_a = {(t.seed, t.member): t for t in a.trajectories(entry.name)}
        eps_b = {(t.seed, t.member): t for t in b.trajectories(entry.name)}
        keys = sorted(set(eps_a) | set(eps_b), key=lambda k: (k[0] is None, k[0], k[1]))
        pairs = [
            (eps_a[k], eps_b[k]) for k in keys if k in eps_a and k in eps_b and eps_a[k].scored and eps_b[k].scored
        ]
        unpaired = len(keys) - len(pairs)
        # success only where the task defines it (envgym.rollout.summary.SUCCESS_DEFINED)
        judged = [(x, y) for x, y in pairs if defines_success(x) and defines_success(y)]
        a_only = sum(1 for x, y in judged if x.success and not y.success)
        b_only = sum(1 for x, y in judged if y.success and not x.success)
        total_a_only += a_only
        total_b_only += b_only
        by_task: dict[Any, list[tuple[Any, Any]]] = {}
        for x, y in pairs:
            by_task.setdefault(x.seed, []).append((x, y))
        judged_by_task: dict[Any, list[tuple[Any, Any]]] = {}
        for x, y in judged:
            judged_by_task.setdefault(x.seed, []).append((x, y))
        task_success = [
            _mean([float(y.success) - float(x.success) for x, y in items]) or 0.0 for items in judged_by_task.values()
        ]
        task_reward = [
            _mean([float(y.total_reward) - float(x.total_reward) for x, y in items]) or 0.0
            for items in by_task.values()
        ]
        succ_a = _mean([float(x.success) for x, _ in judged])
        succ_b = _mean([float(y.success) for _, y in judged])
        rew_a = _mean([float(x.total_reward) for x, _ in pairs])
        rew_b = _mean([float(y.total_reward) for _, y in pairs])
        if judged:
            success_groups.append(task_success)
            macro_a.append(succ_a or 0.0)
            macro_b.append(succ_b or 0.0)
        if pairs:
            reward_groups.append(task_reward)
            macro_ra.append(rew_a or 0.0)
            macro_rb.append(rew_b or 0.0)
        entries.append(
            {
                "name": entry.name,
                "env": entry.env,
                "pairs": len(pairs),
                "tasks": len(by_task),
                "unpaired": unpaired,
                "success_a": succ_a,
                "success_b": succ_b,
                "success_diff": (succ_b - succ_a) if judged else None,
                "a_only": a_only,
                "b_only": b_only,
                "mcnemar_p": mcnemar_exact(a_only, b_only) if judged else None,
                "success_sign_flip_p": sign_flip_test([task_success], **settings) if judged else None,
                "reward_a": rew_a,
                "reward_b": rew_b,
                "reward_diff": (rew_b - rew_a) if pairs else None,
                "reward_p": sign_flip_test([task_reward], **settings) if pairs else None,
            }
        )
    overall_pairs = sum(e["pairs"] for e in entries)
    ma, mb, mra, mrb = _mean(macro_a), _mean(macro_b), _mean(macro_ra), _mean(macro_rb)
    overall = {
        "aggregation": "macro average over entries with pairs; sign flips within every entry",
        "pairs": overall_pairs,
        "tasks": sum(e["tasks"] for e in entries),
        "unpaired": sum(e["unpaired"] for e in entries),
        "success_a": ma,
        "success_b": mb,
        "success_diff": (mb - ma) if ma is not None and mb is not None else None,
        "a_only": total_a_only,
        "b_only": total_b_only,
        "mcnemar_p": mcnemar_exact(total_a_only, total_b_only) if success_groups else None,
        "success_sign_flip_p": sign_flip_test(success_groups, **settings) if success_groups else None,
        "reward_a": mra,
        "reward_b": mrb,
        "reward_diff": (mrb - mra) if mra is not None and mrb is not None else None,
        "reward_p": sign_flip_test(reward_groups, **settings),
    }
    return {
        "format": COMPARE_FORMAT,
        "suite": dict(sa),
        "a": {"path": str(a.path), "agent": a.agent, "trials": a.trials},
        "b": {"path": str(b.path), "agent": b.agent, "trials": b.trials},
        "difference": "B - A",
        "alpha": ALPHA,
        "tests": {
            "mcnemar_p": "exact McNemar test (two-sided binomial on discordant episode pairs) of success",
            "success_sign_flip_p": "paired sign-flip test on per-task success differences",
            "reward_p": "paired sign-flip test on per-task episode-return differences",
            "sign_flip": f"exact over all 2^n sign patterns up to {EXACT_LIMIT} tasks, else {resamples} random "
            f"patterns (seed {seed})",
        },
        "entries": entries,
        "overall": overall,
    }
