"""Leaderboard scores, computed from replayed episodes (never from the claimed numbers).

Per entry (one environment of the suite), over **every** episode, as a bench run's
``results.json`` computes them (:mod:`envgym.bench.metrics`), with one difference: an
infrastructure failure (an unscored episode: ``env_error``, ``agent_error``, ``timeout``) counts
as a failed episode of its task (reward: what its replayed turns earned), and is also counted
apart in ``infra``. A bench run leaves them out (it re-runs them when it resumes); a bundle cannot
re-run them (it holds actions, not the agent), and leaving them out here would let a submitter
drop hard tasks by marking them so. For bundles without such episodes (every published one) the
numbers are the bench run's own. The numbers:

* ``success_rate``: the mean over tasks (seeds) of each task's fraction of successful episodes
  (with the same number of scored episodes per task: the fraction of successful episodes);
* ``mean_reward``: the mean over tasks of each task's mean episode return;
* ``ci_low``/``ci_high``: a 95 % percentile bootstrap interval of the success rate, resampling
  tasks (seeds) with their trials (tasks are the unit of sampling, trials are not independent);
* ``pass_k``: for ``k = 1..K``, the mean over tasks of ``C(c, k) / C(n, k)`` (``n`` scored trials,
  ``c`` successes): the chance that ``k`` trials drawn without replacement all succeed
  (pass^k, tau-bench); tasks with fewer than ``k`` scored trials are left out of that ``k``.

A multi-agent entry (a PettingZoo Parallel env) has one outcome per agent of each joint episode,
and each counts as one episode of its task, as in the bench: a task of an ``n``-agent game with
``K`` trials has ``n * K`` episodes (so ``pass_k`` runs to ``k = n * K``: pass^n of one trial is
the chance that every agent succeeded), and ``mean_reward`` is the mean return per agent.

Overall: the unweighted mean over entries of each number (every environment counts the same);
its interval resamples tasks within each entry (stratified bootstrap). The bootstrap is the bench
run's own (:mod:`envgym.bench.metrics`: fixed seed, 2000 draws), so the same episodes give the
same numbers here and in ``results.json``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from envgym.bench.metrics import pass_hat_curve, pass_hat_k, stratified_bootstrap_ci

__all__ = ["EntryScore", "EpisodeOutcome", "Scores", "compute_scores", "pass_hat_k"]


@dataclass(frozen=True, slots=True)
class EpisodeOutcome:
    """What the replay found for one episode."""

    entry: str
    seed: int
    trial: int
    scored: bool
    success: bool
    total_reward: float
    num_turns: int
    termination_reason: str
    reward_components: Mapping[str, float] = field(default_factory=dict)
    agent: str | None = None
    """The agent id of one agent's record of a multi-agent episode (``None``: single-agent)."""


@dataclass(frozen=True, slots=True)
class EntryScore:
    """Scores of one suite entry."""

    entry: str
    env_id: str
    episodes: int
    scored: int
    infra: int
    success_rate: float | None
    mean_reward: float | None
    ci_low: float | None
    ci_high: float | None
    mean_turns: float | None
    pass_k: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Scores:
    """Scores of a whole submission."""

    success_rate: float | None
    mean_reward: float | None
    ci_low: float | None
    ci_high: float | None
    pass_k: dict[str, float]
    episodes: int
    scored: int
    infra: int
    entries: tuple[EntryScore, ...]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["entries"] = [e.to_dict() for e in self.entries]
        return data


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _by_task(outcomes: Sequence[EpisodeOutcome]) -> dict[int, list[EpisodeOutcome]]:
    """Each task's episodes, infrastructure failures included (their ``success`` is ``False``)."""
    tasks: dict[int, list[EpisodeOutcome]] = defaultdict(list)
    for o in outcomes:
        tasks[o.seed].append(o)
    return dict(sorted(tasks.items()))


def _bootstrap(groups: Sequence[Sequence[Sequence[float]]]) -> tuple[float, float] | None:
    """95 % interval of the mean over groups (entries) of the mean over tasks of each task's
    success rate, resampling tasks with their trials within each group.

    The same computation, seed and number of draws as a bench run's ``results.json``
    (:func:`envgym.bench.metrics.stratified_bootstrap_ci`), so a run and its leaderboard entry
    show the same interval.
    """
    return stratified_bootstrap_ci(groups)


def _entry_score(entry: str, env_id: str, outcomes: Sequence[EpisodeOutcome]) -> EntryScore:
    scored = [o for o in outcomes if o.scored]
    tasks = _by_task(outcomes)
    # k = 1 .. the most scored episodes of a task: the trials, times the agents of a multi-agent game.
    pass_k = pass_hat_curve([[o.success and o.scored for o in ts] for ts in tasks.values()])
    ci = _bootstrap([[[float(o.success and o.scored) for o in ts] for ts in tasks.values()]])
    task_success = [_mean([float(o.success and o.scored) for o in ts]) for ts in tasks.values()]
    task_reward = [_mean([o.total_reward for o in ts]) for ts in tasks.values()]
    return EntryScore(
        entry=entry,
        env_id=env_id,
        episodes=len(outcomes),
        scored=len(scored),
        infra=len(outcomes) - len(scored),
        success_rate=_mean([v for v in task_success if v is not None]),
        mean_reward=_mean([v for v in task_reward if v is not None]),
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        mean_turns=_mean([float(o.num_turns) for o in scored]),
        pass_k=pass_k,
    )


def compute_scores(outcomes: Sequence[EpisodeOutcome], entries: Sequence[tuple[str, str]], *, trials: int) -> Scores:
    """Scores of a submission from its replayed episode outcomes.

    Args:
        outcomes: every episode's replayed outcome.
        entries: ``(entry name, env id)`` in suite order.
        trials: trials per task (kept for callers; pass^k runs to the most scored episodes of a
            task, which is ``trials`` for a single-agent entry without infrastructure failures).
    """
    per_entry: dict[str, list[EpisodeOutcome]] = defaultdict(list)
    for o in outcomes:
        per_entry[o.entry].append(o)
    scores = tuple(_entry_score(name, env_id, per_entry.get(name, [])) for name, env_id in entries)
    rated = [s for s in scores if s.success_rate is not None]
    ks = sorted({k for s in rated for k in s.pass_k}, key=int)
    pass_k = {k: math.fsum(s.pass_k[k] for s in rated if k in s.pass_k) / sum(k in s.pass_k for s in rated) for k in ks}
    groups = []
    for name, _ in entries:
        tasks = _by_task(per_entry.get(name, []))
        groups.append([[float(o.success and o.scored) for o in ts] for ts in tasks.values()])
    ci = _bootstrap(groups)
    return Scores(
        success_rate=_mean([s.success_rate for s in rated if s.success_rate is not None]),
        mean_reward=_mean([s.mean_reward for s in rated if s.mean_reward is not None]),
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        pass_k=pass_k,
        episodes=len(outcomes),
        scored=sum(s.scored for s in scores),
        infra=sum(s.infra for s in scores),
        entries=scores,
    )
