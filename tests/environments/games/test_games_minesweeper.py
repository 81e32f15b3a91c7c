"""Minesweeper: safe first reveal, no-guess boards, actions, rewards, solver win rates."""

from __future__ import annotations

import random

import pytest

import envgym
import envgym.agents.solvers.minesweeper as minesweeper_solver
from envgym.agents.oracle import OracleAgent
from envgym.agents.solvers.minesweeper import Solver, deduce, parse_board
from envgym.environments.games.minesweeper import (
    DIFFICULTIES,
    REVEAL_REWARD_TOTAL,
    MinesweeperEnv,
    logic_solvable,
    neighbours,
)
from envgym.errors import InvalidKwargsError
from envgym.rollout import run_episodes
from envgym.testing import check_env

IDS = [
    "envgym/Minesweeper-v0",
    "envgym/Minesweeper-Easy-v0",
    "envgym/Minesweeper-Medium-v0",
    "envgym/Minesweeper-Hard-v0",
]


def mine_cells(env) -> set[tuple[int, int]]:
    u = env.unwrapped
    return {(i // u.cols, i % u.cols) for i, m in enumerate(u._mine_at) if m}


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("env_id", IDS)
def test_contract(env_id: str) -> None:
    report = check_env(env_id)
    assert {"seeded_determinism", "bad_input_fuzz", "max_turns"} <= set(report.checks)


# ------------------------------------------------------------------ the board
@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_first_reveal_is_safe_and_opens_an_area(difficulty: str) -> None:
    rows, cols, mines = DIFFICULTIES[difficulty]
    env = envgym.make(f"envgym/Minesweeper-{difficulty.capitalize()}-v0")
    rng = random.Random(difficulty)
    for seed in range(60):
        env.reset(seed=seed)
        assert env.unwrapped._mine_at is None  # mines are placed at the first reveal
        r, c = rng.randrange(rows), rng.randrange(cols)
        *_, info = env.step(f"reveal {r + 1} {c + 1}")
        assert info["action_valid"] and info["reward_components"]["mine_reward"] == 0.0
        placed = mine_cells(env)
        assert len(placed) == mines
        assert (r, c) not in placed
        assert not {(n // cols, n % cols) for n in neighbours(rows, cols)[r * cols + c]} & placed
        assert info["progress"] > 1 / (rows * cols - mines)  # the opening revealed more than one cell


@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_boards_need_no_guess(difficulty: str) -> None:
    rows, cols, _ = DIFFICULTIES[difficulty]
    env = MinesweeperEnv(difficulty=difficulty)
    for seed in range(40):
        env.reset(seed=seed)
        start = (seed * 7) % (rows * cols)
        env.step(f"reveal {start // cols + 1} {start % cols + 1}")
        assert logic_solvable(rows, cols, env._mine_at, start)


def test_logic_solvable_detects_guesses() -> None:
    # 2 x 2, one mine, start in a corner: the "1" cannot tell which of three cells is the mine.
    assert not logic_solvable(2, 2, [False, True, False, False], 0)
    # 3 x 3 with a mine in a corner: the opening and the numbers clear the board.
    corner = [False] * 9
    corner[8] = True
    assert logic_solvable(3, 3, corner, 0)
    # Revealing a mine is never "solvable".
    assert not logic_solvable(3, 3, corner, 8)
    # The subset rule: on a 1 x 4 strip the "1" next to a single hidden cell pins the mine there,
    # then the global count clears the last cell.
    assert logic_solvable(1, 4, [False, False, True, False], 0)
    # A 2 x 3 board whose two right cells are a 50/50 (one mine, both next to the same numbers).
    assert not logic_solvable(2, 3, [False, False, True, False, False, False], 0)


def test_same_seed_and_actions_give_the_same_board() -> None:
    a, b, c = (MinesweeperEnv(difficulty="hard") for _ in range(3))
    layouts = set()
    for seed in range(8):
        for env in (a, b, c):
            env.reset(seed=seed)
        a.step("flag 1 1")
        b.step("flag 1 1")
        obs_a, obs_b = a.step("reveal 5 5")[0], b.step("reveal 5 5")[0]
        assert obs_a == obs_b and a._mine_at == b._mine_at
        c.step("reveal 5 5")
        assert c._mine_at == a._mine_at  # a flag before the first reveal does not change the draw
        layouts.add(tuple(a._mine_at))
    assert len(layouts) == 8


def test_splits_use_different_streams() -> None:
    train, test = MinesweeperEnv(split="train"), MinesweeperEnv(split="test")
    differ = 0
    for seed in range(10):
        train.reset(seed=seed)
        test.reset(seed=seed)
        train.step("reveal 3 3")
        test.step("reveal 3 3")
        differ += train._mine_at != test._mine_at
    assert differ >= 8


# ------------------------------------------------------------------ actions
@pytest.mark.parametrize("text", ["reveal 2 3", "reveal 2,3", "reveal (2, 3)", "REVEAL 2 3", "open 2 3", "reveal: 2 3"])
def test_action_spellings(text: str) -> None:
    env = envgym.make("envgym/Minesweeper-v0")
    env.reset(seed=0)
    *_, info = env.step(text)
    assert info["action_valid"]
    assert env.unwrapped._view[1 * 5 + 2].strip() != "#"  # row 2, column 3 is revealed


def test_board_text_has_headers_and_legend() -> None:
    env = envgym.make("envgym/Minesweeper-Hard-v0")
    obs, _ = env.reset(seed=0)
    assert "numbered from 1" in obs and "reveal R C" in obs and "Legend" in obs
    lines = obs.splitlines()
    header = next(line for line in lines if line.strip().startswith("1  2  3"))
    assert header.split() == [str(i) for i in range(1, 11)]
    rows = [line for line in lines if line[:2].strip().isdigit() and "#" in line]
    assert len(rows) == 10 and rows[9].startswith("10")
    assert all(len(line) == len(rows[0]) for line in rows)
    assert obs.rstrip().endswith("Mines: 16. Flags: 0. Safe cells still hidden: 84.")


def test_invalid_actions_keep_the_state() -> None:
    env = envgym.make("envgym/Minesweeper-v0", max_turns=100)
    env.reset(seed=3)
    env.step("reveal 3 3")
    view = env.unwrapped._view
    hidden = next(i for i, v in enumerate(view) if v == "#")
    shown = next(i for i, v in enumerate(view) if v not in ("#", "F"))
    env.step(f"flag {hidden // 5 + 1} {hidden % 5 + 1}")
    before = env.unwrapped._observe()
    f, s = f"{hidden // 5 + 1} {hidden % 5 + 1}", f"{shown // 5 + 1} {shown % 5 + 1}"
    for text, needle in [
        ("reveal 0 1", "off the board"),
        ("reveal 6 1", "off the board"),
        ("reveal 3", "expected"),
        ("dig", "expected"),
        ("explode 1 1", "expected"),
        (f"reveal {s}", "already revealed"),
        (f"flag {s}", "revealed"),
        (f"unflag {s}", "no flag"),
        (f"reveal {f}", "flagged"),
        (f"flag {f}", "already flagged"),
    ]:
        obs, reward, terminated, _, info = env.step(text)
        assert not info["action_valid"], text
        assert needle in obs, (text, obs)
        assert reward == pytest.approx(-0.1) and not terminated
        assert env.unwrapped._observe() == before


def test_flags_and_admissible_actions() -> None:
    env = envgym.make("envgym/Minesweeper-v0")
    _, info = env.reset(seed=0)
    assert len(info["admissible_actions"]) == 50  # reveal + flag for each of 25 cells
    _, _, _, _, info = env.step("flag 2 2")
    assert "unflag 2 2" in info["admissible_actions"] and "reveal 2 2" not in info["admissible_actions"]
    obs, *_, info = env.step("unflag 2 2")
    assert info["action_valid"] and "Flags: 0" in obs
    # Every admissible action is valid.
    rng = random.Random(1)
    _, info = env.reset(seed=1)
    for _ in range(300):
        action = rng.choice(info["admissible_actions"])
        _, _, terminated, truncated, info = env.step(action)
        assert info["action_valid"], action
        if terminated or truncated:
            _, info = env.reset(seed=rng.randrange(1000))


def test_revealing_a_mine_ends_the_episode() -> None:
    env = envgym.make("envgym/Minesweeper-Medium-v0")
    env.reset(seed=4)
    env.step("reveal 4 4")
    r, c = min(mine_cells(env))
    obs, reward, terminated, truncated, info = env.step(f"reveal {r + 1} {c + 1}")
    assert terminated and not truncated and not info["success"]
    assert info["termination_reason"] == "failure"
    assert info["reward_components"]["mine_reward"] == -1.0 and reward == pytest.approx(-1.0)
    assert "Boom" in obs and "X" in obs and obs.count("*") == 9


def test_rewards_over_a_won_episode() -> None:
    env = envgym.make("envgym/Minesweeper-Hard-v0")
    obs, info = env.reset(seed=5)
    solver = Solver("envgym/Minesweeper-Hard-v0", 5)
    totals: dict[str, float] = {}
    progress = []
    terminated = False
    while not terminated:
        obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
        assert not truncated
        progress.append(info["progress"])
        for key, value in info["reward_components"].items():
            totals[key] = totals.get(key, 0.0) + value
    assert info["success"] and info["termination_reason"] == "success"
    assert totals["success_reward"] == 1.0 and totals["mine_reward"] == 0.0
    assert totals["reveal_reward"] == pytest.approx(REVEAL_REWARD_TOTAL)
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert "You win" in obs


# ------------------------------------------------------------------ kwargs
def test_kwargs() -> None:
    with pytest.raises(InvalidKwargsError, match="Did you mean 'medium'"):
        MinesweeperEnv(difficulty="meduim")
    with pytest.raises(InvalidKwargsError, match="rows must be an integer from 3 to 30"):
        MinesweeperEnv(rows=2)
    with pytest.raises(InvalidKwargsError, match="mines must be an integer from 1 to 5"):
        MinesweeperEnv(mines=6)  # 5 x 5: a fifth of the cells at most
    with pytest.raises(InvalidKwargsError, match="holds at most"):
        MinesweeperEnv(rows=3, cols=3)  # the easy preset's 3 mines do not fit
    with pytest.raises(InvalidKwargsError, match="mine"):
        MinesweeperEnv(mine=3)
    env = MinesweeperEnv(rows=12, cols=16, mines=30)
    _, info = env.reset(seed=0)
    assert info["task"]["difficulty"] == "rows=12,cols=16,mines=30" and env.max_turns == 2 * 12 * 16
    env.step("reveal 6 8")
    assert sum(env._mine_at) == 30 and logic_solvable(12, 16, env._mine_at, 5 * 16 + 7)


# ------------------------------------------------------------------ solver
def test_parse_board_reads_the_last_board() -> None:
    env = envgym.make("envgym/Minesweeper-Hard-v0")
    env.reset(seed=2)
    obs, *_ = env.step("reveal 5 5")
    board = parse_board(obs, 10, 10)
    assert board is not None
    assert [cell for row in board for cell in row] == [v.strip() for v in env.unwrapped._view]
    known: set[tuple[int, int]] = set()
    safe, mines = deduce(board, 16, known)
    truth = mine_cells(env)
    assert safe and not safe & truth and mines <= truth


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_wins_without_guessing(env_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_guess(*args: object) -> None:
        raise AssertionError("the solver had to guess on a no-guess board")

    monkeypatch.setattr(minesweeper_solver.Solver, "_best_guess", no_guess)
    monkeypatch.setattr(minesweeper_solver.Solver, "_enumerated_safe", no_guess)
    results = run_episodes(env_id, OracleAgent(), episodes=100, seed=900)
    assert sum(r.success for r in results) == 100
    assert sum(r.invalid_actions for r in results) == 0


def test_solver_safety_net_enumerates_and_guesses() -> None:
    # A board the logic rules cannot finish: the solver must still answer with a hidden cell.
    solver = Solver("envgym/Minesweeper-v0")
    obs = "   1 2\n1  1 #\n2  # #\nMines: 1."
    action = solver.act(obs, {"task": {"rows": 2, "cols": 2, "mines": 1}})
    assert action in ("reveal 1 2", "reveal 2 1", "reveal 2 2")
    # Logic first: a "." next to a hidden cell makes it safe.
    obs = "   1 2 3 4\n1  1 # # .\nMines: 1."
    assert Solver("envgym/Minesweeper-v0").act(obs, {"task": {"rows": 1, "cols": 4, "mines": 1}}) == "reveal 1 3"


# ------------------------------------------------------------------ regressions (bug hunt)
def test_train_and_test_splits_never_share_a_board() -> None:
    from envgym.environments.games.minesweeper import in_split

    def boards(split: str, seeds: range) -> set[tuple[int, ...]]:
        env = MinesweeperEnv(split=split)
        found = set()
        for seed in seeds:
            env.reset(seed=seed)
            env.step("reveal 3 3")
            mines = tuple(i for i, m in enumerate(env._mine_at) if m)
            assert in_split(5, 5, mines, split) and not in_split(5, 5, mines, "test" if split == "train" else "train")
            found.add(mines)
        return found

    # easy 5x5 boards with 3 mines are few: before the partition every test board was a train board
    train, test = boards("train", range(1500)), boards("test", range(200))
    assert len(test) > 30 and not train & test
