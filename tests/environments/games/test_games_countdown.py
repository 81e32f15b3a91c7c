"""Countdown: the expression parser, the rules, task generation, rewards, solver win rates."""

from __future__ import annotations

import builtins
import random
import time

import pytest

import envgym
from envgym.agents.oracle import OracleAgent
from envgym.agents.solvers.countdown import solve
from envgym.environments.games.countdown import (
    CLOSENESS_MAX,
    DIFFICULTIES,
    CountdownEnv,
    ExpressionError,
    evaluate_expression,
)
from envgym.errors import ConfigError, InvalidKwargsError
from envgym.rollout import run_episodes
from envgym.testing import check_env

IDS = ["envgym/Countdown-v0", "envgym/Countdown-Easy-v0", "envgym/Countdown-Medium-v0", "envgym/Countdown-Hard-v0"]
POOL = [25, 50, 100, 75, 3, 4, 2, 8, 10, 6, 1, 1, 5]


def value(text: str, numbers: list[int] = POOL) -> int:
    return evaluate_expression(text, numbers)[0]


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("env_id", IDS)
def test_contract(env_id: str) -> None:
    report = check_env(env_id)
    assert {"seeded_determinism", "bad_input_fuzz", "max_turns"} <= set(report.checks)


# ------------------------------------------------------------------ parser
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3 + 4 * 2", 11),  # * before +
        ("(3 + 4) * 2", 14),
        ("100 - 25 - 50", 25),  # left to right
        ("100 - (25 - 3)", 78),
        ("8 / 4 / 2", 1),
        ("10 / 5 * 2", 4),
        ("((((25))))", 25),
        ("25", 25),
        ("(25 + 3) * 4", 112),
        ("3 × 4 ÷ 2", 6),
        ("25 x 4", 100),
        ("1 + 1", 2),  # a number drawn twice may be used twice
        ("  ( 75+25 ) *  (10-2)  ", 800),
    ],
)
def test_precedence_and_parentheses(text: str, expected: int) -> None:
    assert value(text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("-3 + 4", "unary '-'"),
        ("+3", "unary '+'"),
        ("3 * -4", "unary '-'"),
        ("2**10", "powers are not allowed"),
        ("2^3", "powers are not allowed"),
        ("25 / 3", "not a whole number"),
        ("25 - 50", "not a positive whole number"),
        ("1 - 1", "1 - 1 = 0 is not a positive whole number"),
        ("(25", "never closed"),
        ("25)", "without a matching"),
        ("25 3", "operator missing"),
        ("25 +", "ends too early"),
        ("", "empty"),
        ("= 5", "empty"),
        ("()", "found ')'"),
        ("7 + 3", "7 is not one of your numbers"),
        ("25 + 25", "25 is used 2 times but you have it only once"),
        ("1 + 1 + 1", "1 is used 3 times but you have it only 2 times"),
        ("0 + 3", "0 is not one of your numbers"),
        ("3 + 4 = x", "after '='"),
        ("__import__('os').system('ls')", "unexpected character '_'"),
        ("abs(3)", "unexpected character 'a'"),
        ("3.5 + 1", "unexpected character '.'"),
        ("１２", "unexpected character"),
    ],
)
def test_rejected_expressions(text: str, needle: str) -> None:
    with pytest.raises(ExpressionError, match=None) as caught:
        evaluate_expression(text, POOL)
    assert needle in str(caught.value)


def test_division_by_zero_is_invalid() -> None:
    with pytest.raises(ExpressionError, match="0"):
        evaluate_expression("3 / (5 - 5)", [3, 5, 5])
    env = envgym.make("envgym/Countdown-v0")
    env.reset(seed=0, options={"numbers": [3, 5, 5], "target": 7})
    obs, reward, *_, info = env.step("3 / (5 - 5)")
    assert not info["action_valid"] and "5 - 5 = 0" in obs and reward == pytest.approx(-0.1)


def test_numbers_are_checked_before_arithmetic() -> None:
    with pytest.raises(ExpressionError, match="7 is not one of your numbers"):
        evaluate_expression("3 - 7", [3, 5])


def test_huge_and_long_inputs_are_rejected_quickly() -> None:
    started = time.thread_time()  # CPU time: the work done, which other jobs on the machine do not inflate
    for text, needle in [
        ("9" * 50, "too long"),
        ("2**1000", "powers"),
        ("1+" * 5000 + "1", "characters long"),
        ("(" * 40 + "1" + ")" * 40, "nested more than"),
        ("x" * 100_000, "characters long"),
        ("(" * 150, "nested more than"),
    ]:
        with pytest.raises(ExpressionError) as caught:
            evaluate_expression(text, [1, 9])
        assert needle in str(caught.value), (text[:20], str(caught.value))
    # Results stay small: the largest product of six numbers of the game is exact and fast.
    assert value("100 * 75 * 50 * 25 * 10 * 8", [100, 75, 50, 25, 10, 8]) == 750_000_000
    assert time.thread_time() - started < 1.0


def test_no_python_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("user text reached eval/exec/compile")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, forbidden)
    assert value("(25 + 3) * 4 = 112") == 112
    env = envgym.make("envgym/Countdown-Hard-v0")
    env.reset(seed=0)
    rng = random.Random(0)
    for i in range(100):
        action = "__import__('os').system('echo pwned')" if i % 2 else env.unwrapped.sample_action(rng)
        *_, terminated, truncated, info = env.step(action)
        assert info["action_valid"] == (i % 2 == 0)
        if terminated or truncated:
            env.reset(seed=i)


def test_claimed_value_is_checked_but_not_scored() -> None:
    env = envgym.make("envgym/Countdown-v0")
    env.reset(seed=0, options={"numbers": [25, 3, 4], "target": 112})
    obs, reward, terminated, _, info = env.step("(25 + 3) * 4 = 100")
    assert terminated and info["success"] and reward == 1.0
    assert "you wrote = 100, but it equals 112" in obs


# ------------------------------------------------------------------ tasks
@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_generated_tasks_are_solvable_and_in_range(difficulty: str) -> None:
    preset = DIFFICULTIES[difficulty]
    env = CountdownEnv(difficulty=difficulty)
    targets = set()
    for seed in range(150):
        obs, info = env.reset(seed=seed)
        numbers, target = env.numbers, env.target
        assert len(numbers) == preset.count
        assert sum(n > 10 for n in numbers) <= preset.max_large
        assert preset.target_min <= target <= preset.target_max and target not in numbers
        assert evaluate_expression(env._solution, numbers)[0] == target  # the generating expression
        assert f"Numbers: {' '.join(map(str, numbers))}" in obs and f"Target: {target}" in obs
        assert info["task"]["numbers"] == list(numbers) and info["task"]["target"] == target
        targets.add(target)
    assert len(targets) > 40


def test_determinism_and_task_ids() -> None:
    a = CountdownEnv(difficulty="hard")
    b = CountdownEnv(difficulty="hard")
    for seed in range(5):
        obs_a, info_a = a.reset(seed=seed)
        obs_b, info_b = b.reset(seed=seed)
        assert obs_a == obs_b and info_a["task"] == info_b["task"]
        assert info_a["task"]["id"] == f"countdown-{'.'.join(map(str, a.numbers))}-{a.target}"
    test = CountdownEnv(difficulty="hard", split="test")
    differ = sum(test.reset(seed=s)[1]["task"]["id"] != a.reset(seed=s)[1]["task"]["id"] for s in range(10))
    assert differ >= 9


# ------------------------------------------------------------------ episodes and rewards
def test_attempts_closeness_reward_and_failure() -> None:
    env = envgym.make("envgym/Countdown-v0", max_attempts=3)
    env.reset(seed=0, options={"numbers": [1, 2, 3], "target": 10})
    total_closeness = 0.0
    # 1 + 2 = 3 (off by 7), an invalid step (uses no attempt), 2 * 3 = 6 (off by 4), 3 + 2 = 5.
    steps = [("1 + 2", True, False), ("4 + 6", False, False), ("2 * 3", True, False), ("3 + 2", True, True)]
    for text, valid, ends in steps:
        obs, _, terminated, truncated, info = env.step(text)
        assert info["action_valid"] == valid and terminated == ends and not truncated
        total_closeness += info["reward_components"]["closeness_reward"]
        if not ends:
            assert info["reward_components"]["closeness_reward"] == 0.0
    assert info["termination_reason"] == "failure" and not info["success"]
    assert "Out of attempts" in obs and "Your best was 6 (off by 4)" in obs
    assert total_closeness == pytest.approx(CLOSENESS_MAX * (1 - 4 / 10))
    assert info["progress"] == pytest.approx(0.6)


def test_no_closeness_reward_far_from_the_target() -> None:
    env = envgym.make("envgym/Countdown-v0", max_attempts=1)
    env.reset(seed=0, options={"numbers": [1, 2], "target": 500})
    *_, terminated, _, info = env.step("1 + 2")
    assert terminated and info["reward_components"]["closeness_reward"] == 0.0


def test_success_and_progress() -> None:
    env = envgym.make("envgym/Countdown-v0")
    _, info = env.reset(seed=0, options={"numbers": [25, 50, 3], "target": 78})
    assert info["progress"] == 0.0
    obs, reward, terminated, _, info = env.step("50 + 25 + 3")
    assert terminated and info["success"] and reward == 1.0 and info["termination_reason"] == "success"
    assert info["progress"] == 1.0 and "solved" in obs


def test_sample_action_is_always_valid() -> None:
    for env_id in IDS[1:]:
        env = envgym.make(env_id)
        rng = random.Random(1)
        env.reset(seed=0)
        for step in range(400):
            *_, terminated, truncated, info = env.step(env.unwrapped.sample_action(rng))
            assert info["action_valid"]
            if terminated or truncated:
                env.reset(seed=step)


# ------------------------------------------------------------------ kwargs and options
def test_kwargs_and_options_errors() -> None:
    with pytest.raises(InvalidKwargsError, match="Did you mean 'easy'"):
        CountdownEnv(difficulty="eazy")
    with pytest.raises(InvalidKwargsError, match="max_attempts"):
        CountdownEnv(max_attempts=0)
    with pytest.raises(InvalidKwargsError, match="max_attempt"):
        CountdownEnv(max_attempt=3)
    with pytest.raises(ConfigError, match="options\\['numbers'\\]"):
        CountdownEnv().reset(seed=0, options={"numbers": [1], "target": 5})
    with pytest.raises(ConfigError, match="options\\['target'\\]"):
        CountdownEnv().reset(seed=0, options={"numbers": [1, 2], "target": -5})


# ------------------------------------------------------------------ solver
def test_solver_finds_exact_and_closest_answers() -> None:
    expression, found = solve([25, 50, 75, 100, 3, 6], 952)
    assert found == 952 and evaluate_expression(expression, [25, 50, 75, 100, 3, 6])[0] == 952
    expression, found = solve([1, 1], 50)  # unreachable: the closest value instead
    assert found == 2 and evaluate_expression(expression, [1, 1])[0] == 2
    assert solve([7, 3], 7) == ("7", 7)


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_win_rate(env_id: str) -> None:
    results = run_episodes(env_id, OracleAgent(), episodes=100, seed=300)
    assert sum(r.success for r in results) >= 95
    assert all(r.num_turns == 1 for r in results)  # the exact answer at the first attempt


# ------------------------------------------------------------------ regressions (bug hunt)
def test_train_and_test_splits_never_share_a_task() -> None:
    from envgym.environments.games.countdown import in_split

    def tasks(split: str, seeds: range) -> set[tuple[tuple[int, ...], int]]:
        env = CountdownEnv(split=split)
        found = set()
        for seed in seeds:
            env.reset(seed=seed)
            assert in_split(env.numbers, env.target, split)
            assert not in_split(env.numbers, env.target, "test" if split == "train" else "train")
            found.add((tuple(sorted(env.numbers)), env.target))
        return found

    # easy tasks (3 small numbers) are few: before the partition ~40% of test tasks were train tasks
    train, test = tasks("train", range(3000)), tasks("test", range(300))
    assert len(test) > 150 and not train & test


def test_many_attempts_fit_in_the_default_turn_limit() -> None:
    env = envgym.make("envgym/Countdown-v0", max_attempts=20)
    assert env.unwrapped.max_turns == 60
    assert envgym.make("envgym/Countdown-v0").unwrapped.max_turns == 15
    assert envgym.make("envgym/Countdown-v0", max_attempts=20, max_turns=7).unwrapped.max_turns == 7
    env.reset(seed=0, options={"numbers": [1, 2], "target": 50})
    for turn in range(1, 21):
        obs, _, terminated, truncated, info = env.step("1 + 2")
        assert not truncated
        assert terminated == (turn == 20)
    assert "Out of attempts" in obs and info["termination_reason"] == "failure"
