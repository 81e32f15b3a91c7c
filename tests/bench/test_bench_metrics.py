"""Bench metrics and paired tests against numbers computed by hand."""

from __future__ import annotations

import pytest

from envgym.bench.compare import mcnemar_exact, sign_flip_test
from envgym.bench.metrics import (
    bootstrap_ci,
    compute_results,
    entry_metrics,
    pass_hat_curve,
    pass_hat_k,
    stratified_bootstrap_ci,
)
from envgym.rollout.records import Trajectory, Turn


# ---------------------------------------------------------------- pass^k
def test_pass_hat_k_matches_the_tau_bench_formula_by_hand() -> None:
    # three tasks, four trials each: 3, 1 and 4 successes
    tasks = [[True, True, False, True], [False, False, True, False], [True] * 4]
    # pass^1 = (3/4 + 1/4 + 1) / 3; pass^2 = (C(3,2)/C(4,2) + 0 + 1) / 3 = (3/6 + 1) / 3
    # pass^3 = (C(3,3)/C(4,3) + 0 + 1) / 3 = (1/4 + 1) / 3; pass^4 = (0 + 0 + 1) / 3
    assert pass_hat_curve(tasks) == pytest.approx({"1": 2 / 3, "2": 0.5, "3": 1.25 / 3, "4": 1 / 3})
    assert pass_hat_k(tasks, 5) is None
    # tasks with fewer trials (an unscored episode dropped) only count for k up to their n
    assert pass_hat_k([[True, True], [True]], 2) == 1.0
    assert pass_hat_k([[True, False], [True]], 1) == pytest.approx((0.5 + 1.0) / 2)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        pass_hat_k(tasks, 0)


# ---------------------------------------------------------------- bootstrap
def test_bootstrap_quantiles_match_the_enumerated_distribution() -> None:
    # tasks 0, 1, 1: the resampled mean is (#ones)/3 with #ones ~ Binomial(3, 2/3):
    # P(0) = 1/27, P(1/3) = 6/27, P(2/3) = 12/27, P(1) = 8/27; cumulative .037, .259, .704, 1.
    # The 20th percentile is 1/3 and the 80th is 1 (60 % interval); the 2.5th is 0 and the 97.5th is 1.
    tasks = [[0.0], [1.0], [1.0]]
    low, high = bootstrap_ci(tasks, resamples=20000, confidence=0.6)
    assert low == pytest.approx(1 / 3) and high == pytest.approx(1.0)
    assert bootstrap_ci(tasks, resamples=20000) == pytest.approx((0.0, 1.0))
    # fixed seed: the same call gives the same interval; another seed may not
    assert bootstrap_ci(tasks, resamples=500, confidence=0.5) == bootstrap_ci(tasks, resamples=500, confidence=0.5)
    # no spread, no interval width
    assert bootstrap_ci([[0.5], [0.5, 0.5]]) == (0.5, 0.5)
    assert bootstrap_ci([]) is None
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_ci(tasks, resamples=0)


def test_bootstrap_resamples_a_seed_with_all_its_trials() -> None:
    # three tasks of four perfectly correlated trials: resampling tasks, all three draws are the
    # failing task with probability 1/27 > 2.5 %, so the lower bound is 0. Treating the twelve
    # episodes as independent units would give a far narrower interval (P(all 0) = (1/3)^12).
    grouped = [[1.0] * 4, [0.0] * 4, [1.0] * 4]
    assert bootstrap_ci(grouped, resamples=20000)[0] == 0.0  # type: ignore[index]
    flat = [[v] for task in grouped for v in task]
    assert bootstrap_ci(flat, resamples=20000)[0] > 0.3  # type: ignore[index]


def test_stratified_bootstrap_macro_average_by_hand() -> None:
    # entry A: tasks 0 and 1 (resampled mean 0, .5, 1 with prob 1/4, 1/2, 1/4); entry B: always 1.
    # overall = (mean_A + 1) / 2 in {.5, .75, 1} with prob 1/4, 1/2, 1/4.
    strata = [[[0.0], [1.0]], [[1.0], [1.0], [1.0]]]
    assert stratified_bootstrap_ci(strata, resamples=20000) == pytest.approx((0.5, 1.0))
    assert stratified_bootstrap_ci(strata, resamples=20000, confidence=0.4) == pytest.approx((0.75, 0.75))
    # a single stratum is the plain bootstrap
    assert stratified_bootstrap_ci([strata[0]], resamples=300) == bootstrap_ci(strata[0], resamples=300)
    assert stratified_bootstrap_ci([[], []]) is None


# ---------------------------------------------------------------- paired tests
def test_mcnemar_exact_by_hand() -> None:
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)  # 2 * P(X <= 0), X ~ Bin(5, 1/2)
    assert mcnemar_exact(6, 1) == pytest.approx(2 * (1 + 7) / 128)
    assert mcnemar_exact(1, 6) == mcnemar_exact(6, 1)
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(20, 0) == pytest.approx(2 / 2**20)
    with pytest.raises(ValueError, match="a_only"):
        mcnemar_exact(-1, 2)


def test_sign_flip_exact_and_monte_carlo_by_hand() -> None:
    # mean of [1, 2, 3] is 2; of the 8 sign patterns only all-plus and all-minus reach |mean| >= 2
    assert sign_flip_test([[1.0, 2.0, 3.0]]) == pytest.approx(2 / 8)
    assert sign_flip_test([[1.0, -1.0]]) == 1.0
    assert sign_flip_test([[0.0, 0.0]]) == 1.0
    assert sign_flip_test([]) is None
    # stratified: statistic (1 + (2 + 2) / 2) / 2 = 1.5, reached only when all three signs agree
    assert sign_flip_test([[1.0], [2.0, 2.0]]) == pytest.approx(2 / 8)
    # 20 units: Monte Carlo; the exact p (2 / 2^20) is far below 1 / (1 + B), so p = 1 / (1 + B)
    assert sign_flip_test([[1.0] * 20], resamples=999) == pytest.approx(1 / 1000)
    # 16 units are still enumerated exactly
    assert sign_flip_test([[1.0] * 16]) == pytest.approx(2 / 2**16)


# ---------------------------------------------------------------- per-entry metrics from episodes
def traj(
    seed: int,
    member: int,
    *,
    success: bool,
    reward: float,
    turns: int = 2,
    reason: str | None = None,
    format_ok: bool | None = None,
    tokens: int = 0,
) -> Trajectory:
    t = Trajectory(episode_id=f"{seed}-{member}", index=0, env_id="envgym/X-v0", seed=seed, agent="a", member=member)
    t.turns = [
        Turn(
            index=i,
            observation="o",
            action="a",
            reward=0.0,
            reward_components={},
            action_valid=True,
            format_ok=format_ok,
        )
        for i in range(turns)
    ]
    t.success = success
    t.total_reward = reward
    t.termination_reason = reason or ("success" if success else "failure")
    t.prompt_tokens = tokens
    t.completion_tokens = tokens // 2
    t.wall_time_s = 0.5
    return t


def test_entry_metrics_leave_infrastructure_errors_out_of_the_score() -> None:
    episodes = [
        traj(0, 0, success=True, reward=1.0, format_ok=True, tokens=10),
        traj(0, 1, success=False, reward=0.0, format_ok=False, tokens=10),
        traj(1, 0, success=True, reward=2.0, format_ok=True, tokens=10),
        traj(1, 1, success=False, reward=0.0, turns=0, reason="env_error", tokens=4),  # unscored, not a failure
        traj(2, 0, success=False, reward=0.0, turns=0, reason="agent_error"),
        traj(2, 1, success=False, reward=0.0, turns=0, reason="timeout"),  # task 2 has no scored episode
    ]
    m = entry_metrics(episodes, resamples=200)
    assert (m["episodes"], m["scored"], m["tasks"], m["trials"]) == (6, 3, 2, 2)
    # task 0: 1/2, task 1: 1/1 (the env_error is not a zero)
    assert m["success_rate"] == pytest.approx(0.75)
    assert m["mean_reward"] == pytest.approx((0.5 + 2.0) / 2)
    assert m["pass_hat_k"] == pytest.approx({"1": 0.75, "2": 0.0})  # only task 0 has two scored trials
    assert m["infra_errors"] == {"env_error": 1, "agent_error": 1, "timeout": 1}
    assert m["infra_error_episodes"] == 3
    assert m["mean_turns"] == 2.0
    assert m["format_ok_rate"] == pytest.approx(4 / 6)  # turns of scored episodes: 2 + 2 ok of 6
    assert (m["prompt_tokens"], m["completion_tokens"]) == (34, 17)
    assert m["wall_time_s"] == pytest.approx(3.0)
    lo, hi = m["success_rate_ci"]
    assert 0.5 <= lo <= m["success_rate"] <= hi <= 1.0


def test_overall_is_the_macro_average_over_entries() -> None:
    small = [traj(0, 0, success=True, reward=1.0)]
    big = [traj(s, 0, success=False, reward=0.0) for s in range(9)]
    results = compute_results(
        {"small": small, "big": big, "broken": [traj(0, 0, success=False, reward=0.0, reason="env_error")]}
    )
    overall = results["overall"]
    assert [e["name"] for e in results["entries"]] == ["small", "big", "broken"]
    assert overall["success_rate"] == pytest.approx(0.5)  # (1 + 0) / 2, not 1/10: each entry weighs the same
    assert overall["entries_scored"] == 2 and overall["infra_errors"] == {"env_error": 1}
    assert overall["success_rate_ci"] == pytest.approx([0.5, 0.5])  # no spread within either entry
    assert results["bootstrap"]["unit"].startswith("task")
    assert overall["wall_time_s"] is None  # not the sum of the entries' episode times (5.5): they overlap


def test_overall_wall_time_is_the_elapsed_time_of_the_run() -> None:
    entries = {
        "a": [traj(s, 0, success=True, reward=1.0) for s in range(4)],
        "b": [traj(9, 0, success=False, reward=0.0)],
    }
    results = compute_results(entries, elapsed_s=0.75)
    assert [e["wall_time_s"] for e in results["entries"]] == [pytest.approx(2.0), pytest.approx(0.5)]
    assert results["overall"]["wall_time_s"] == 0.75


def test_entries_whose_tasks_define_no_success_show_none_not_zero() -> None:
    games = [traj(s, 0, success=False, reward=float(s)) for s in range(3)]
    for t in games:
        t.task = {"id": f"game/{t.seed}", "success_defined": False}
    wins = [traj(0, 0, success=True, reward=1.0), traj(1, 0, success=False, reward=0.0)]
    results = compute_results({"game": games, "wins": wins})
    game, win = results["entries"]
    assert game["success_rate"] is None and game["success_defined"] is False
    assert game["success_rate_ci"] is None and game["pass_hat_k"] == {}
    assert game["mean_reward"] == pytest.approx(1.0)  # its returns are still scored
    assert win["success_rate"] == pytest.approx(0.5) and win["success_defined"] is True
    overall = results["overall"]
    assert overall["success_rate"] == pytest.approx(0.5)  # the game entry is not averaged in as 0
    assert overall["entries_scored"] == 2 and overall["success_defined"] is True
    alone = compute_results({"game": games})["overall"]
    assert alone["success_rate"] is None and alone["success_rate_ci"] is None and alone["success_defined"] is False
