"""Curricula: horizon stages, the difficulty ladder, the task filter (all outcomes or a window of
recent groups) and the task pool, with checkpoint round trips."""

from __future__ import annotations

import json

import pytest

from envgym.errors import ConfigError
from envgym.trainer.curriculum import DifficultyController, HorizonSchedule, TaskFilter, TaskPool


def roundtrip(state: dict) -> dict:
    """What a checkpoint gives back: the state through JSON."""
    return json.loads(json.dumps(state))


# ---------------------------------------------------------------------------------- horizon
def test_horizon_stages() -> None:
    schedule = HorizonSchedule([(0, 2), (20, 4), (50, 8)])
    got = {update: schedule.max_turns(update) for update in (0, 19, 20, 49, 50, 10_000)}
    assert got == {0: 2, 19: 2, 20: 4, 49: 4, 50: 8, 10_000: 8}
    assert HorizonSchedule([[0, 3]]).max_turns(7) == 3  # lists from a config file work too
    assert HorizonSchedule([(0, 2), (5, 2)]).max_turns(9) == 2  # equal turn limits are allowed


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ([(1, 2)], "first stage must start at update 0"),
        ([(0, 2), (10, 4), (10, 6)], "first_update must strictly increase"),
        ([(0, 4), (10, 2)], "lowers max_turns from 4 to 2"),
        ([(0, 0)], "max_turns >= 1"),
        ([(0, 2, 3)], "pair of integers"),
        ([(0, True)], "pair of integers"),
        ([(0, 2.5)], "pair of integers"),
        ([], "at least one"),
        ("0,2", "list of"),
    ],
)
def test_horizon_rejects_bad_stages(stages, message) -> None:
    with pytest.raises(ConfigError, match=message):
        HorizonSchedule(stages)


def test_horizon_linear() -> None:
    # stage k at round(k * 100 / 4), turns round(2 + 6 * k / 3)
    assert HorizonSchedule.linear(2, 8, 100, 4).stages == ((0, 2), (25, 4), (50, 6), (75, 8))
    # 2, 2.33, 2.67, 3 round to 2, 2, 3, 3: equal neighbours merge -> (0, 2), (round(20 / 4) = 5, 3)
    assert HorizonSchedule.linear(2, 3, 10, 4).stages == ((0, 2), (5, 3))
    with pytest.raises(ConfigError, match="only grows"):
        HorizonSchedule.linear(8, 2, 100, 4)
    with pytest.raises(ConfigError, match="cannot exceed updates"):
        HorizonSchedule.linear(2, 8, 3, 4)
    with pytest.raises(ConfigError, match="stages must be an integer >= 2"):
        HorizonSchedule.linear(2, 8, 100, 1)


def test_horizon_state_roundtrip_and_bad_update() -> None:
    schedule = HorizonSchedule([(0, 2), (20, 4)])
    other = HorizonSchedule([(0, 9)])
    other.load_state_dict(roundtrip(schedule.state_dict()))
    assert other.stages == schedule.stages and other.max_turns(25) == 4
    with pytest.raises(ConfigError, match="update must be an integer >= 0"):
        schedule.max_turns(-1)
    with pytest.raises(ConfigError, match="load_state_dict expects"):
        other.load_state_dict({"turns": []})


# ---------------------------------------------------------------------------------- difficulty
LADDER = ["envgym/FrozenLake-Easy-v0", "envgym/FrozenLake-Medium-v0", "envgym/FrozenLake-Hard-v0"]


def test_difficulty_moves_up_and_down_within_the_band() -> None:
    ladder = DifficultyController(LADDER, target=(0.3, 0.7), window=4, min_episodes=4)
    assert ladder.current == LADDER[0]
    assert ladder.record([True, True, True]) == 0  # 3 < min_episodes: no decision yet
    assert ladder.record([True]) == 1  # window [T, T, T, T]: rate 1.0 > 0.7 -> up
    assert ladder.current == LADDER[1] and ladder.success_rate is None  # the window was reset
    assert ladder.record([False, True, False, False]) == -1  # rate 0.25 < 0.3 -> down
    assert ladder.current == LADDER[0]
    assert ladder.record([False] * 4) == 0  # already at the bottom: stays, window kept
    assert ladder.success_rate == 0.0
    assert ladder.record([True, True]) == 0  # window slides to [F, F, T, T]: rate 0.5 is in the band
    assert ladder.success_rate == 0.5
    assert ladder.history == [(0, 0), (4, 1), (8, 0)]


def test_difficulty_band_edges_top_and_one_move_per_call() -> None:
    # exactly at the top of the band (7 of 10 = 0.7) is not above it
    ladder = DifficultyController(LADDER, target=(0.3, 0.7), window=10, min_episodes=10)
    assert ladder.record([True] * 7 + [False] * 3) == 0
    # one call of 20 successes moves once (its episodes were all played at one level)
    ladder = DifficultyController(LADDER, window=32, min_episodes=4)
    assert ladder.record([True] * 20) == 1 and ladder.index == 1
    # at the top a high rate keeps the level
    ladder = DifficultyController(LADDER, window=4, min_episodes=2, start=2)
    assert ladder.record([True, True]) == 0 and ladder.current == LADDER[2]


def test_difficulty_single_target_never_moves_down() -> None:
    # the trainer config gives one number: the rate to beat; below it the level stays
    ladder = DifficultyController(["easy", "hard"], target=0.7, window=4, min_episodes=2)
    assert (ladder.low, ladder.high) == (0.0, 0.7)
    assert ladder.record([False, False]) == 0
    assert ladder.record([True, True, True, True]) == 1 and ladder.current == "hard"
    assert ladder.record([False] * 4) == 0 and ladder.current == "hard"


def test_difficulty_is_deterministic_and_resumes_from_state() -> None:
    # mostly solved, then mostly failed, then solved again: the ladder goes up, down and up
    outcomes = [[True, True, i % 2 == 0] for i in range(6)]
    outcomes += [[False, False, i % 3 == 0] for i in range(8)]
    outcomes += [[True, True, True]] * 8
    a = DifficultyController(LADDER, window=8, min_episodes=4)
    b = DifficultyController(LADDER, window=8, min_episodes=4)
    for batch in outcomes[:7]:
        a.record(batch)
        b.record(batch)
    # a checkpoint mid-window, restored into a fresh controller, goes on exactly like the original
    c = DifficultyController(LADDER, window=8, min_episodes=4)
    c.load_state_dict(roundtrip(b.state_dict()))
    moves_a = [a.record(batch) for batch in outcomes[7:]]
    moves_c = [c.record(batch) for batch in outcomes[7:]]
    assert moves_a == moves_c and a.history == c.history and a.state_dict() == c.state_dict()
    assert 1 in moves_a and -1 in moves_a  # the resumed part moves both ways
    assert c.state_dict()["outcomes"] != []  # and was checkpointed with a part-filled window


def test_difficulty_kwargs_levels_are_copies() -> None:
    levels = [{"size": 4}, {"size": 8}]
    ladder = DifficultyController(levels)
    current = ladder.current
    current["size"] = 99
    levels[0]["size"] = 77
    assert ladder.current == {"size": 4}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"levels": []}, "non-empty list"),
        ({"levels": "easy"}, "non-empty list"),
        ({"levels": [object()]}, "JSON-serialisable"),
        ({"levels": LADDER, "min_episodes": 10, "window": 4}, "cannot exceed window"),
        ({"levels": LADDER, "target": (0.8, 0.2)}, "low <= high"),
        ({"levels": LADDER, "target": 1.5}, r"in \[0, 1\]"),
        ({"levels": LADDER, "target": (0.1, 0.2, 0.3)}, "band"),
        ({"levels": LADDER, "start": 3}, "start must index a level"),
        ({"levels": LADDER, "window": 0}, "window must be an integer >= 1"),
    ],
)
def test_difficulty_rejects_bad_config(kwargs, message) -> None:
    levels = kwargs.pop("levels")
    with pytest.raises(ConfigError, match=message):
        DifficultyController(levels, **kwargs)


def test_difficulty_rejects_bad_outcomes_and_other_ladders() -> None:
    ladder = DifficultyController(LADDER, window=4, min_episodes=2)
    for bad in ([None], ["yes"], [0.5], "TTF"):
        with pytest.raises(ConfigError, match="True or False|iterable"):
            ladder.record(bad)
    assert ladder.record([1, 0]) == 0  # 1/0 are accepted as outcomes
    other = DifficultyController(["a", "b"])
    with pytest.raises(ConfigError, match="resume with the same levels"):
        other.load_state_dict(ladder.state_dict())


# ---------------------------------------------------------------------------------- task filter
def test_task_filter_retires_always_and_never_solved_tasks() -> None:
    tasks = TaskFilter(min_attempts=3)
    tasks.record("a", [True, True])
    assert tasks.is_active("a")  # 2 < min_attempts
    tasks.record("a", True)
    assert not tasks.is_active("a")  # 3 of 3 solved
    tasks.record("b", [False, False, False])
    tasks.record_many([("c", True), ("c", False), ("c", True)])
    assert not tasks.is_active("b") and tasks.is_active("c") and tasks.is_active("unseen")
    assert tasks.active(["d", "a", "c", "b"]) == ["d", "c"]
    assert tasks.counts("c") == (2, 3) and tasks.counts("unseen") == (0, 0)
    # 9 attempts, 3 + 0 + 2 = 5 successes
    assert tasks.stats() == {
        "tasks": 3,
        "active": 1,
        "always_solved": 1,
        "never_solved": 1,
        "attempts": 9,
        "success_rate": pytest.approx(5 / 9),
    }
    # a retired task that fails later is active again
    tasks.record("a", False)
    assert tasks.is_active("a")


def test_task_filter_state_roundtrip_keeps_id_types() -> None:
    tasks = TaskFilter(min_attempts=2)
    tasks.record(7, [True, True])
    tasks.record(("grid", 3), [False, False])
    tasks.record("s", [True, False])
    restored = TaskFilter()
    restored.load_state_dict(roundtrip(tasks.state_dict()))
    assert restored.min_attempts == 2
    assert restored.counts(7) == (2, 2) and restored.counts("7") == (0, 0)
    assert restored.counts(("grid", 3)) == (0, 2)
    assert restored.stats() == tasks.stats()
    with pytest.raises(ConfigError, match=r"\[task_id, successes, attempts\]"):
        restored.load_state_dict({"min_attempts": 2, "tasks": [["x", 3, 2]]})


def test_task_filter_rejects_bad_input() -> None:
    with pytest.raises(ConfigError, match="min_attempts must be an integer >= 1"):
        TaskFilter(min_attempts=0)
    tasks = TaskFilter()
    with pytest.raises(ConfigError, match="hashable"):
        tasks.record(["a"], True)
    with pytest.raises(ConfigError, match="True or False"):
        tasks.record("a", None)
    with pytest.raises(ConfigError, match="pairs"):
        tasks.record_many(["a"])
    assert tasks.stats()["tasks"] == 0  # nothing half-recorded


def test_task_filter_window_judges_the_last_groups_only() -> None:
    tasks = TaskFilter(min_attempts=1, window=2)
    tasks.record("a", [True, False])  # mixed
    tasks.record("a", [True, True])
    assert tasks.is_active("a") and tasks.counts("a") == (3, 4)  # the window still holds the mixed group
    tasks.record("a", [True, True, True])
    assert not tasks.is_active("a") and tasks.counts("a") == (5, 5)  # the last two groups: all solved
    tasks.record("b", [False, False])
    assert tasks.is_active("b")  # one group < window
    tasks.record("b", [])  # a group whose episodes all failed to run counts as a group without outcomes
    tasks.record("b", [False])
    assert not tasks.is_active("b") and tasks.counts("b") == (0, 1)
    # Without a window the mixed first group would keep "a" active for ever.
    cumulative = TaskFilter(min_attempts=1)
    for group in ([True, False], [True, True], [True, True, True]):
        cumulative.record("a", group)
    assert cumulative.is_active("a")
    stats = tasks.stats()
    assert (stats["always_solved"], stats["never_solved"], stats["attempts"]) == (1, 1, 10)
    restored = TaskFilter()
    restored.load_state_dict(roundtrip(tasks.state_dict()))
    assert restored.window == 2 and restored.counts("a") == (5, 5) and not restored.is_active("b")
    restored.record("a", [False])  # the window slides exactly as in the original
    tasks.record("a", [False])
    assert restored.is_active("a") == tasks.is_active("a") is True
    with pytest.raises(ConfigError, match="window must be an integer >= 1"):
        TaskFilter(window=0)


# ---------------------------------------------------------------------------------- task pool
def test_task_pool_plays_every_task_once_per_pass_in_a_seeded_order() -> None:
    pool = TaskPool(list(range(10, 16)), seed=3)
    first, second = pool.draw(6), pool.draw(6)
    assert sorted(first) == sorted(second) == list(range(10, 16))
    assert first != second  # a new order every pass (fixed by the seed)
    assert pool.passes == 2
    again = TaskPool(list(range(10, 16)), seed=3)
    assert again.draw(4) + again.draw(2) + again.draw(6) == first + second  # however a pass is cut
    other = TaskPool(list(range(10, 16)), seed=4).draw(6)
    assert sorted(other) == sorted(first) and other != first


def test_task_pool_exclude_defers_and_drop_retires() -> None:
    pool = TaskPool([0, 1, 2, 3], seed=0)
    order = TaskPool([0, 1, 2, 3], seed=0).draw(4)
    got = pool.draw(2, exclude={order[0]})
    assert got == order[1:3]  # the excluded seed keeps its turn...
    assert pool.draw(1) == [order[0]]  # ...and comes first next time
    pool.drop(order[3], update=5)
    assert pool.dropped == {order[3]: 5} and order[3] not in pool.active
    assert all(order[3] not in pool.draw(3) for _ in range(4))  # never drawn again
    assert len(pool.draw(10)) == 3
    assert pool.draw(2, exclude=set(pool.active)) == []  # nothing left to give
    with pytest.raises(ConfigError, match="not in the task pool"):
        pool.drop(99, update=1)


def test_task_pool_state_roundtrip_continues_the_same_sequence() -> None:
    pool = TaskPool(list(range(7)), seed=1)
    pool.draw(5)
    pool.draw(2, exclude={pool.draw(1)[0]})
    pool.drop(4, update=2)
    restored = TaskPool(list(range(7)), seed=1)
    restored.load_state_dict(roundtrip(pool.state_dict()))
    assert restored.dropped == {4: 2} and restored.passes == pool.passes
    assert [restored.draw(3) for _ in range(5)] == [pool.draw(3) for _ in range(5)]
    with pytest.raises(ConfigError, match="resume with the same task_pool"):
        TaskPool(list(range(8)), seed=1).load_state_dict(pool.state_dict())


@pytest.mark.parametrize(
    ("seeds", "message"),
    [([], "non-empty list"), ([1, 1], "distinct integers"), (["a"], "distinct integers"), ("12", "non-empty list")],
)
def test_task_pool_rejects_bad_seeds(seeds: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TaskPool(seeds)  # type: ignore[arg-type]


def test_curriculum_module_does_not_import_torch() -> None:
    # the curricula are plain Python: a controller process (or the CLI) can use them without torch
    import subprocess
    import sys

    code = "import sys, envgym.trainer.curriculum; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
