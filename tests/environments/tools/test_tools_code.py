"""Tools-Code: the generated tasks and their answers, answer matching, the splits, the
run_python tool in a real bubblewrap sandbox (hostile code contained), rewards, the oracle."""

from __future__ import annotations

import contextlib
import io
import json
import math
import pickle
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from envgym.agents.solvers.tools_code import Solver, program_for
from envgym.environments.tools.code import EFFICIENCY_MAX, OUTPUT_CHARS, CodeEnv
from envgym.environments.tools.codetasks import (
    KINDS,
    ROUNDED_TOLERANCE,
    CodeTask,
    _count_digit_sum,
    answer_matches,
    draw_task,
)

from envgym.errors import InvalidKwargsError
from envgym.sandbox import sandbox_class
from envgym.testing import check_env


def _call(name: str, **arguments: object) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def _needs_bwrap() -> None:
    reason = sandbox_class("bwrap").unavailable_reason()
    if reason is not None:
        pytest.skip(f"bwrap sandbox unavailable here: {reason}")


@pytest.fixture(scope="module")
def env() -> Iterator[CodeEnv]:
    _needs_bwrap()
    made = CodeEnv(timeout=2.0, memory_mb=256)
    yield made
    made.close()


# ------------------------------------------------------------------ tasks (no sandbox)
def test_tasks_are_deterministic_and_every_kind_is_drawn() -> None:
    a = [draw_task(random.Random(f"x{i}")) for i in range(40)]
    b = [draw_task(random.Random(f"x{i}")) for i in range(40)]
    assert a == b
    rng = random.Random(0)
    assert {draw_task(rng).kind for _ in range(300)} == set(KINDS)


def test_closed_form_answers_equal_brute_force() -> None:
    for n, s in [(1000, 1), (9999, 18), (12345, 13), (54321, 30), (20000, 5)]:
        assert _count_digit_sum(n, s) == sum(1 for i in range(1, n + 1) if sum(map(int, str(i))) == s)
    rng = random.Random(1)
    for _ in range(10):
        task = draw_task(rng, kinds=("multiples",))
        a, b, n = task.params
        lcm = a * b // math.gcd(a, b)  # inclusion-exclusion by summing the ranges themselves
        assert task.answer == sum(range(a, n, a)) + sum(range(b, n, b)) - sum(range(lcm, n, lcm))
        task = draw_task(rng, kinds=("lattice",))
        x, y, px, py = task.params
        ways = {(0, 0): 1}  # paths counted cell by cell, the point blocked
        for i in range(x + 1):
            for j in range(y + 1):
                if (i, j) != (0, 0):
                    ways[i, j] = 0 if (i, j) == (px, py) else ways.get((i - 1, j), 0) + ways.get((i, j - 1), 0)
        assert task.answer == ways[x, y] > 0


def test_answers_match_numbers_exactly_words_loosely() -> None:
    whole = CodeTask("k", (), "q", 1234)
    assert answer_matches("1,234", whole) and answer_matches(1234, whole) and answer_matches(1234.0, whole)
    assert not answer_matches(1234.5, whole) and not answer_matches(True, whole) and not answer_matches("x", whole)
    huge = CodeTask("k", (), "q", math.comb(120, 60))
    assert answer_matches(str(math.comb(120, 60)), huge) and not answer_matches(str(math.comb(120, 60) + 1), huge)
    rounded = CodeTask("k", (), "q", 56.5, tolerance=ROUNDED_TOLERANCE)
    assert answer_matches("56.50", rounded) and answer_matches(56.504, rounded) and not answer_matches(56.51, rounded)
    word = CodeTask("k", (), "q", "West")
    assert answer_matches(" west ", word) and not answer_matches("Western", word) and not answer_matches(1, word)


def test_the_splits_share_no_task() -> None:
    rng = random.Random(2)
    train = {draw_task(rng, split="train").key for _ in range(60)}
    test = {draw_task(rng, split="test").key for _ in range(60)}
    assert train and test and not train & test


def test_the_oracles_programs_compute_the_gold_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rng = random.Random(3)
    for kind in KINDS:
        for _ in range(2):
            task = draw_task(rng, kinds=(kind,))
            for name, text in task.files.items():
                (tmp_path / name).write_text(text)
            program = program_for(task.question)
            assert program is not None, task.question
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(program, "<oracle>", "exec"), {})  # noqa: S102 - the oracle's program, run as the sandbox would
            assert answer_matches(out.getvalue().split()[-1], task), (kind, program)


# ------------------------------------------------------------------ the env in a real sandbox
def test_code_runs_as_written_and_files_persist_within_an_episode_only(env: CodeEnv) -> None:
    obs, info = env.reset(seed=0)
    assert [t["function"]["name"] for t in info["tools"]] == ["run_python", "answer"]
    code = "def f(n):\n    if n:\n        return n * f(n - 1)\n    return 1\nopen('note.txt', 'w').write('kept')\nprint(f(10))"
    obs, reward, _, _, info = env.step(_call("run_python", code=code))  # nested indentation survives
    assert info["action_valid"] and obs == "Tool result (run_python): exit code 0\n3628800\n" and reward == 0.0
    obs, *_ = env.step(_call("run_python", code="print(open('note.txt').read())"))
    assert obs.endswith("\nkept\n")
    env.reset(seed=1)  # a fresh workspace
    obs, *_ = env.step(_call("run_python", code="import os\nprint(os.path.exists('note.txt'))"))
    assert obs.endswith("\nFalse\n")
    obs, *_, info = env.step(_call("run_python", code=123))
    assert not info["action_valid"] and "Tool error (run_python): arguments.code: expected string" in obs


def test_rewards_right_answers_and_fewer_runs(env: CodeEnv) -> None:
    env.reset(seed=4)
    gold = env.current.answer
    *_, reward, terminated, _, info = env.step(_call("answer", value=str(gold)))
    assert terminated and info["success"] and reward == pytest.approx(1.0 + EFFICIENCY_MAX)
    env.reset(seed=4)
    for _ in range(2):
        env.step(_call("run_python", code="print(1)"))
    *_, reward, _, _, info = env.step(_call("answer", value=gold))
    assert info["reward_components"] == {
        "correct_reward": 1.0,
        "efficiency_reward": pytest.approx(EFFICIENCY_MAX / 2),
        "invalid_action_reward": 0.0,
        "step_cost_reward": 0.0,
    }
    env.reset(seed=4)
    *_, reward, terminated, _, info = env.step(_call("answer", value="not it"))
    assert terminated and not info["success"] and reward == 0.0


def test_hostile_code_is_contained(env: CodeEnv) -> None:
    env.reset(seed=5)
    start = time.perf_counter()
    obs, *_, info = env.step(_call("run_python", code="while True:\n    pass"))
    assert info["action_valid"] and "killed" in obs and "timeout" in obs
    assert time.perf_counter() - start < 15
    obs, *_ = env.step(_call("run_python", code="import os\nwhile True:\n    os.fork()"))  # a fork bomb
    assert obs.startswith("Tool result (run_python):")
    obs, *_ = env.step(_call("run_python", code="import sys\nsys.stdout.write('x' * 50_000_000)"))
    assert "output truncated" in obs and len(obs) < OUTPUT_CHARS + 400
    spy = "import os\nprint(os.path.exists('/work'), os.path.exists('/root'), os.listdir('/home') if os.path.exists('/home') else [])"
    obs, *_ = env.step(_call("run_python", code=spy))  # the host's files are not there
    assert obs.endswith("\nFalse False []\n")
    net = "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), timeout=1)\n    print('online')\nexcept OSError:\n    print('offline')"
    obs, *_ = env.step(_call("run_python", code=net))
    assert obs.endswith("\noffline\n")
    obs, *_ = env.step(_call("run_python", code="print('still fine')"))  # nothing left running
    assert obs == "Tool result (run_python): exit code 0\nstill fine\n"


def test_the_env_keeps_the_contract_and_pickles_mid_episode(env: CodeEnv) -> None:
    report = check_env(CodeEnv(timeout=2.0), seeds=(0, 1, 2), steps=6)
    assert "pickle_roundtrip" in report.checks
    env.reset(seed=7)
    env.step(_call("run_python", code="print(6 * 7)"))
    clone = pickle.loads(pickle.dumps(env))
    action = _call(
        "run_python", code="print(open('data.csv').read()[:20] if __import__('os').path.exists('data.csv') else 0)"
    )
    assert clone.step(action)[0] == env.step(action)[0]
    clone.close()
    with pytest.raises(InvalidKwargsError, match="kinds must be"):
        CodeEnv(kinds=["nope"])
    with pytest.raises(InvalidKwargsError, match="timeout must be"):
        CodeEnv(timeout=0)


def test_the_oracle_answers_every_kind_with_one_run() -> None:
    _needs_bwrap()
    for i, kind in enumerate(KINDS):
        env = CodeEnv(kinds=[kind], split=("train", "test")[i % 2])
        try:
            obs, info = env.reset(seed=11)
            policy = Solver("envgym/Tools-Code-v0", 11)
            obs, *_, info = env.step(policy.act(obs, info))
            assert info["action_valid"] and "exit code 0" in obs
            *_, reward, terminated, _, info = env.step(policy.act(obs, info))
            assert terminated and info["success"], (kind, obs)
            assert reward == pytest.approx(1.0 + EFFICIENCY_MAX)
        finally:
            env.close()
