"""Benchmark metrics: success, reward, pass^k, turns, tokens, time, format, with bootstrap CIs.

Definitions (one place; reports and ``results.json`` use these names):

* **task**: one seed of one entry. With ``trials = K`` a task has K episodes (the harness's
  ``group_size``), told apart by ``Trajectory.member``.
* **scored episodes only**: episodes that ended by an infrastructure failure (``env_error``,
  ``agent_error``, ``timeout``; ``Trajectory.scored`` is false) never count as failures or zero
  rewards; they are counted apart in ``infra_errors``. A task with no scored episode drops out.
* ``success_rate`` / ``mean_reward`` of an entry: the mean over tasks of the task's mean success
  (or episode return) over its scored trials. With one scored episode per task this is the plain
  mean over episodes.
* **95 % CI** (``*_ci``): percentile bootstrap, ``resamples`` draws (default 2000) from a
  ``numpy.random.default_rng(seed)`` with a fixed seed (default 0). The resampled unit is the
  **task**: a task's K trials are drawn together, so correlated trials do not narrow the interval.
  The interval is the (2.5, 97.5) percentiles of the resampled statistic (numpy's linear
  interpolation).
* ``pass_hat_k`` (pass^k, tau-bench): for each task with n scored trials of which c succeeded,
  ``C(c, k) / C(n, k)`` (the chance that k trials drawn without replacement all succeed), averaged
  over the tasks with ``n >= k``; reported for k = 1 .. the largest n. pass^1 equals the success
  rate when every task has the same number of trials.
* ``mean_turns``: mean turns per scored episode; ``prompt_tokens`` / ``completion_tokens``: totals
  over all episodes (as the agent reported them; 0 for agents without tokens), with per-episode
  means; ``wall_time_s`` of an entry: the sum of its episodes' wall times (episodes played at the
  same time overlap, so it exceeds the elapsed time; it measures cost per episode); ``format_ok_rate``: the share of
  chat replies that carried the action tags (``None`` for agents that are not chat agents).
* **multi-agent entries** (PettingZoo Parallel ids): every agent's record is one episode of the
  task (its seed), so a task with K trials of an n-agent game has ``n * K`` records; the entry
  adds ``multiagent`` (:func:`envgym.rollout.multiagent.summarize_multiagent`: joint return,
  return per agent and per policy, the game's own final numbers such as ``mean_trust``).
* **overall**: the **macro average over entries** (each entry weighs the same, whatever its size)
  of the entries that have scored episodes; its CI comes from a **stratified bootstrap** that
  resamples tasks within every entry independently and averages the entry statistics. Token
  totals are sums over entries; its ``wall_time_s`` is the run's elapsed time (the bench records
  it), not a sum: the entries of a run play in one batch, so their times overlap. Note that a macro-averaged reward mixes the reward scales
  of different environments; the success rate is the comparable headline number.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy

from envgym.rollout.summary import defines_success, summarize_multiagent

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "CONFIDENCE",
    "bootstrap_ci",
    "compute_results",
    "entry_metrics",
    "group_by_task",
    "overall_metrics",
    "pass_hat_curve",
    "pass_hat_k",
    "stratified_bootstrap_ci",
]

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


def _np() -> Any:
    return numpy


def _task_means(tasks: Sequence[Sequence[float]]) -> Any:
    np = _np()
    means = [float(np.mean(values)) for values in tasks if len(values)]
    return np.asarray(means, dtype=float)


def stratified_bootstrap_ci(
    strata: Sequence[Sequence[Sequence[float]]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the macro average over strata of the mean over tasks.

    Args:
        strata: one item per stratum (entry); each is a list of tasks; each task is the list of
            its episodes' values (its trials). Empty tasks and empty strata are left out.
        resamples: bootstrap draws.
        confidence: coverage of the interval (0.95: the 2.5 and 97.5 percentiles).
        seed: seed of ``numpy.random.default_rng``; the same inputs give the same interval.

    Within every stratum, tasks are drawn with replacement (as many as it has), a drawn task
    bringing all its trials; the statistic is the mean over strata of the mean over drawn tasks.
    Returns ``None`` when no stratum has a task.
    """
    if not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be an integer >= 1, got {resamples!r}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}.")
    np = _np()
    means = [m for m in (_task_means(tasks) for tasks in strata) if m.size]
    if not means:
        return None
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples, dtype=float)
    for task_means in means:
        draws = rng.integers(0, task_means.size, size=(resamples, task_means.size))
        total += task_means[draws].mean(axis=1)
    stats = total / len(means)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(stats, [100.0 * alpha, 100.0 * (1.0 - alpha)])
    return float(low), float(high)


def bootstrap_ci(
    tasks: Sequence[Sequence[float]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the mean over tasks of the per-task mean.

    ``tasks`` holds, per task, the values of its episodes (one per trial); tasks are resampled
    with their trials. Same as :func:`stratified_bootstrap_ci` with one stratum.
    """
    return stratified_bootstrap_ci([tasks], resamples=resamples, confidence=confidence, seed=seed)


def pass_hat(n: int, c: int, k: int) -> float:
    """``C(c, k) / C(n, k)``: the chance that ``k`` of one task's ``n`` trials, ``c`` of them
    successful, drawn without replacement, all succeed (the unbiased estimate of pass^k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}.")
    return math.comb(c, k) / math.comb(n, k)


def pass_hat_k(tasks: Sequence[Sequence[bool]], k: int) -> float | None:
    """pass^k: the mean over tasks with ``n >= k`` trials of :func:`pass_hat` ``(n, c, k)`` (``c``
    successes). The bench results and the leaderboard's replayed scores both use it.

    Returns ``None`` when no task has ``k`` trials.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}.")
    values = [pass_hat(len(trials), sum(1 for ok in trials if ok), k) for trials in tasks if len(trials) >= k]
    return math.fsum(values) / len(values) if values else None


def pass_hat_curve(tasks: Sequence[Sequence[bool]]) -> dict[str, float]:
    """``{"1": pass^1, ..., "K": pass^K}`` for K the most trials any task has."""
    most = max((len(t) for t in tasks), default=0)
    curve = {}
    for k in range(1, most + 1):
        value = pass_hat_k(tasks, k)
        if value is not None:
            curve[str(k)] = value
    return curve


def group_by_task(trajectories: Iterable[Any]) -> dict[Any, list[Any]]:
    """Scored episodes grouped by seed (the task), in seed order, each group in trial order."""
    groups: dict[Any, list[Any]] = defaultdict(list)
    for t in trajectories:
        if t.scored:
            groups[t.seed].append(t)
    return {seed: sorted(groups[seed], key=lambda t: t.member) for seed in sorted(groups, key=lambda s: (s is None, s))}


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _ci(value: tuple[float, float] | None) -> list[float] | None:
    return [value[0], value[1]] if value is not None else None


def entry_metrics(
    trajectories: Sequence[Any],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Every metric of one entry from its episodes (:class:`~envgym.rollout.records.Trajectory`)."""
    tasks = group_by_task(trajectories)
    # Tasks that define no success (envgym.rollout.summary.SUCCESS_DEFINED) are left out of the
    # success numbers, which are then None ("—"), never a 0 % the environment cannot score.
    judged = {seed: g for seed, g in tasks.items() if all(defines_success(t) for t in g)}
    success = [[1.0 if t.success else 0.0 for t in group] for group in judged.values()]
    reward = [[float(t.total_reward) for t in group] for group in tasks.values()]
    scored = [t for t in trajectories if t.scored]
    formats = [turn.format_ok for t in scored for turn in t.turns if turn.format_ok is not None]
    infra = Counter(t.termination_reason for t in trajectories if not t.scored)
    n_all = len(trajectories)
    settings = {"resamples": resamples, "confidence": confidence, "seed": seed}
    prompt_tokens = sum(int(t.prompt_tokens or 0) for t in trajectories)
    completion_tokens = sum(int(t.completion_tokens or 0) for t in trajectories)
    extra: dict[str, Any] = {}
    multi = summarize_multiagent(trajectories)
    if multi is not None:  # a PettingZoo Parallel entry: one record per agent, and the episode's numbers
        extra["multiagent"] = multi
    return {
        "episodes": n_all,
        "scored": len(scored),
        "tasks": len(tasks),
        "trials": max((len(g) for g in tasks.values()), default=0),
        "success_rate": _mean([_mean(s) for s in success]),  # type: ignore[misc]
        "success_rate_ci": _ci(bootstrap_ci(success, **settings)),
        "mean_reward": _mean([_mean(r) for r in reward]),  # type: ignore[misc]
        "mean_reward_ci": _ci(bootstrap_ci(reward, **settings)),
        "success_defined": bool(judged) or not tasks,
        "pass_hat_k": pass_hat_curve([[t.success for t in group] for group in judged.values()]),
        "mean_turns": _mean([float(t.num_turns) for t in scored]),
        "invalid_per_episode": _mean([float(t.invalid_actions) for t in scored]),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "mean_prompt_tokens": prompt_tokens / n_all if n_all else None,
        "mean_completion_tokens": completion_tokens / n_all if n_all else None,
        "wall_time_s": math.fsum(float(t.wall_time_s) for t in trajectories),
        "format_ok_rate": (sum(1 for ok in formats if ok) / len(formats)) if formats else None,
        "termination_reasons": dict(Counter(t.termination_reason for t in trajectories)),
        "infra_errors": dict(infra),
        "infra_error_episodes": sum(infra.values()),
        **extra,
    }


def overall_metrics(
    per_entry: Mapping[str, Sequence[Any]],
    entry_results: Mapping[str, Mapping[str, Any]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
    elapsed_s: float | None = None,
) -> dict[str, Any]:
    """Macro average over entries (see the module docstring), CIs by stratified bootstrap;
    ``elapsed_s`` is the run's elapsed time (``None`` when unknown)."""
    settings = {"resamples": resamples, "confidence": confidence, "seed": seed}
    success_strata, reward_strata = [], []
    for trajectories in per_entry.values():
        tasks = group_by_task(trajectories)
        if tasks:
            judged = [g for g in tasks.values() if all(defines_success(t) for t in g)]
            if judged:
                success_strata.append([[1.0 if t.success else 0.0 for t in g] for g in judged])
            reward_strata.append([[float(t.total_reward) for t in g] for g in tasks.values()])
    results = list(entry_results.values())
    with_scores = [r for r in results if r["scored"]]
    with_success = [r for r in results if r["success_rate"] is not None]

    def macro(key: str) -> float | None:
        return _mean([float(r[key]) for r in results if r.get(key) is not None])

    pass_keys = sorted({k for r in with_success for k in r["pass_hat_k"]}, key=int)
    infra: Counter[str] = Counter()
    for r in results:
        infra.update(r["infra_errors"])
    return {
        "aggregation": "macro average over entries with scored episodes (each entry weighs the same)",
        "entries": len(results),
        "entries_scored": len(with_scores),
        "episodes": sum(r["episodes"] for r in results),
        "scored": sum(r["scored"] for r in results),
        "tasks": sum(r["tasks"] for r in results),
        "success_rate": macro("success_rate"),
        "success_rate_ci": _ci(stratified_bootstrap_ci(success_strata, **settings)) if success_strata else None,
        "success_defined": bool(with_success) or not with_scores,
        "mean_reward": macro("mean_reward"),
        "mean_reward_ci": _ci(stratified_bootstrap_ci(reward_strata, **settings)),
        "pass_hat_k": {
            k: _mean([float(r["pass_hat_k"][k]) for r in with_success if k in r["pass_hat_k"]]) for k in pass_keys
        },
        "mean_turns": macro("mean_turns"),
        "invalid_per_episode": macro("invalid_per_episode"),
        "prompt_tokens": sum(r["prompt_tokens"] for r in results),
        "completion_tokens": sum(r["completion_tokens"] for r in results),
        "wall_time_s": elapsed_s,
        "format_ok_rate": macro("format_ok_rate"),
        "infra_errors": dict(infra),
        "infra_error_episodes": sum(infra.values()),
    }


def compute_results(
    per_entry: Mapping[str, Sequence[Any]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
    elapsed_s: float | None = None,
) -> dict[str, Any]:
    """Metrics of every entry and overall.

    Args:
        per_entry: entry name -> its episodes (:class:`~envgym.rollout.records.Trajectory`), in
            suite order.
        elapsed_s: the run's elapsed time, the overall ``wall_time_s`` (``None``: unknown).

    Returns ``{"bootstrap": {...}, "entries": [{"name": ..., metrics}], "overall": {...}}``.
    """
    settings = {"resamples": resamples, "confidence": confidence, "seed": seed}
    entry_results = {name: entry_metrics(trajs, **settings) for name, trajs in per_entry.items()}
    return {
        "bootstrap": {
            "method": "percentile",
            "unit": "task (one seed of one entry; its K trials are resampled together)",
            "overall": "stratified by entry, macro average",
            **settings,
        },
        "entries": [{"name": name, **metrics} for name, metrics in entry_results.items()],
        "overall": overall_metrics(per_entry, entry_results, elapsed_s=elapsed_s, **settings),
    }
