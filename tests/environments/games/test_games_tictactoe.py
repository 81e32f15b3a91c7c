"""Tic-tac-toe: rules, parsing, opponents, the single-agent views, the AEC game and the solver."""

from __future__ import annotations

import random
from collections import Counter

import pytest

import envgym
from envgym.agents.oracle import OracleAgent
from envgym.agents.solvers.tictactoe import Solver, parse_board, success_probability
from envgym.core import InvalidAction
from envgym.environments.games import tictactoe as ttt
from envgym.errors import InvalidKwargsError
from envgym.rollout import RandomAgent, run_episodes
from envgym.testing import check_aec_env, check_env

SINGLE_IDS = [
    "envgym/TicTacToe-v0",
    "envgym/TicTacToe-Easy-v0",
    "envgym/TicTacToe-Medium-v0",
    "envgym/TicTacToe-Hard-v0",
]
AEC_ID = "envgym/TicTacToe-v0"


def board(rows: str) -> list[str]:
    """``"XXO/.O./X.."`` -> a board list (rows 1-3 top down)."""
    cells = list(rows.replace("/", ""))
    assert len(cells) == 9
    return cells


@pytest.mark.parametrize("env_id", SINGLE_IDS)
def test_check_env_single_agent(env_id: str) -> None:
    report = check_env(env_id)
    assert "seeded_determinism" in report.checks and "bad_input_fuzz" in report.checks


def test_check_aec_env() -> None:
    report = check_aec_env(AEC_ID)
    assert report.checks[:2] == ["pettingzoo.api_test", "pettingzoo.seed_test"]
    assert "bad_input_fuzz" in report.checks and "invalid_run_ends" in report.checks


# ---------------------------------------------------------------------- rules
@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ("XXX/OO./...", "X"),  # top row
        ("OO./XXX/...", "X"),  # middle row
        ("XX./.../OOO", "O"),  # bottom row
        ("XO./XO./X..", "X"),  # column a
        ("XO./.OX/XO.", "O"),  # column b
        ("X.O/X.O/..O", "O"),  # column c
        ("X.O/OX./..X", "X"),  # main diagonal
        ("X.O/XO./O..", "O"),  # anti diagonal
        ("XOX/XOO/OXX", None),  # full board, no line: draw
        ("XX./OO./...", None),
        (".../.../...", None),
        ("XOX/OXO/OXO", None),
    ],
)
def test_winner_on_hand_made_positions(rows: str, expected: str | None) -> None:
    assert ttt.winner(board(rows)) == expected


def test_completes_line_checks_only_lines_through_the_cell() -> None:
    cells = board("XX./OO./...")
    cells[2] = "X"
    assert ttt.completes_line(cells, 2, "X")
    cells = board("XX./OO./...")
    cells[5] = "O"
    assert ttt.completes_line(cells, 5, "O") and not ttt.completes_line(cells, 5, "X")
    assert not ttt.completes_line(board("X../.X./..."), 8, "X")  # c3 still free


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("a1", "a1"), ("b2", "b2"), ("c3", "c3"), ("C1", "c1"), ("2b", "b2"), ("3A", "a3"),
        ("5", "b2"), ("1", "a1"), ("9", "c3"), ("3", "c1"),
        ("2 3", "c2"), ("1,2", "b1"), ("(3, 1)", "a3"), ("row 2 col 3", "c2"),
        ("place X at b2", "b2"), ("I play a3.", "a3"), ("Mark the cell C2!", "c2"), ("move: b1", "b1"),
        ("put a mark on b2", "b2"), ("A2", "a2"),
    ],
)  # fmt: skip
def test_parse_cell_aliases(text: str, cell: str) -> None:
    assert ttt.NAMES[ttt.parse_cell(text)] == cell


@pytest.mark.parametrize("text", ["", "d1", "a4", "0", "10", "12", "b", "centre", "a1 b2", "1 2 3", "x", "5 5"])
def test_parse_cell_rejects(text: str) -> None:
    with pytest.raises(InvalidAction, match="expected a cell like b2"):
        ttt.parse_cell(text)


# ---------------------------------------------------------------------- opponents
def test_perfect_opponent_takes_wins_blocks_and_never_loses() -> None:
    key = "".join(board("XX./OO./..."))  # X to move: wins at c1
    assert ttt.perfect_moves(key) == (2,)
    key = "".join(board("XX./.O./..."))  # O to move: only blocking c1 avoids the loss
    assert ttt.perfect_moves(key) == (2,)
    assert set(ttt.perfect_moves("X........")) == {4}  # only the centre answers a corner
    env = envgym.make("envgym/TicTacToe-Hard-v0")
    results = run_episodes("envgym/TicTacToe-Hard-v0", RandomAgent(seed=1), episodes=300, seed=0)
    assert not any(r.reward_components["success_reward"] > 0 for r in results)  # the agent never wins
    assert all(r.success == (r.reward_components["loss_reward"] == 0) for r in results)  # success = not losing
    env.close()


def set_board(env: ttt.TicTacToeEnv, rows: str) -> None:
    """Put a hand-made position on a reset single-agent env."""
    env.board = board(rows)
    env.free = [name for name, cell in zip(ttt.NAMES, env.board) if cell == ttt.EMPTY]


@pytest.mark.parametrize(("difficulty", "low", "high"), [("medium", 95, 140), ("easy", 15, 55)])
def test_medium_opponent_blocks_half_the_time(difficulty: str, low: int, high: int) -> None:
    env = envgym.make(f"envgym/TicTacToe-{difficulty.capitalize()}-v0").unwrapped
    blocked = 0
    for seed in range(200):
        env.reset(seed=seed)
        set_board(env, "X../.O./...")
        env.step("c1")  # X threatens b1; O has no win of its own
        blocked += env.board[1] == "O"
    # medium: 1/2 + 1/2 * 1/6 = 58% block (117 of 200); easy: 1/6 (33 of 200).
    assert low <= blocked <= high


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_medium_and_hard_opponents_take_a_win(difficulty: str) -> None:
    env = envgym.make(f"envgym/TicTacToe-{difficulty.capitalize()}-v0").unwrapped
    for seed in range(20):
        env.reset(seed=seed)
        set_board(env, "X.X/OO./X..")
        obs, reward, terminated, _, info = env.step("b3")  # ignores O's threat at c2
        assert terminated and reward == -1.0 and "you lose" in obs
        assert info["reward_components"]["loss_reward"] == -1.0 and env.board[5] == "O"


def test_easy_opponent_is_uniform() -> None:
    env = envgym.make("envgym/TicTacToe-Easy-v0")
    replies = Counter()
    for seed in range(800):
        env.reset(seed=seed)
        env.step("b2")
        replies[tuple(env.unwrapped.board).index("O")] += 1
    assert set(replies) == {0, 1, 2, 3, 5, 6, 7, 8}
    assert min(replies.values()) > 60  # 100 expected each


# ---------------------------------------------------------------------- single agent env
def test_win_draw_loss_rewards_and_success_rules() -> None:
    env = envgym.make("envgym/TicTacToe-Hard-v0").unwrapped
    env.reset(seed=0)
    set_board(env, "XX./OO./...")
    obs, reward, terminated, _, info = env.step("c1")
    assert terminated and info["success"] and reward == 1.0 and "you win" in obs
    assert info["termination_reason"] == "success" and info["reward_components"]["success_reward"] == 1.0
    # A draw counts as success only on hard.
    for difficulty, success in (("hard", True), ("medium", False), ("easy", False)):
        env = envgym.make(f"envgym/TicTacToe-{difficulty.capitalize()}-v0").unwrapped
        env.reset(seed=0)
        set_board(env, "XOX/XOO/OX.")
        obs, reward, terminated, _, info = env.step("c3")
        assert terminated and "draw" in obs
        assert info["success"] is success and reward == pytest.approx(0.5)
        assert info["termination_reason"] == ("success" if success else "failure")


def test_invalid_moves_keep_the_state_and_explain() -> None:
    env = envgym.make("envgym/TicTacToe-Easy-v0")
    env.reset(seed=0)
    env.step("b2")
    before = list(env.unwrapped.board)
    taken = "b2"
    obs, reward, terminated, truncated, info = env.step(taken)
    assert not (terminated or truncated) and reward == pytest.approx(-0.1)
    assert "Invalid action 'b2': b2 is already taken by X" in obs
    assert env.unwrapped.board == before and info["action_valid"] is False
    obs, *_ = env.step("d4")
    assert "expected a cell like b2" in obs
    assert info["admissible_actions"] == [n for n, c in zip(ttt.NAMES, before) if c == ttt.EMPTY]


def test_agent_second_and_coin_flip() -> None:
    env = envgym.make("envgym/TicTacToe-Hard-v0", agent_first=False)
    obs, info = env.reset(seed=0)
    assert "You are O" in obs and "The opponent (X) opened at" in obs
    assert info["task"]["agent_mark"] == "O" and sum(c == "X" for c in env.unwrapped.board) == 1
    assert len(info["admissible_actions"]) == 8
    env = envgym.make("envgym/TicTacToe-v0", agent_first=None)
    marks = {env.reset(seed=s)[1]["task"]["agent_mark"] for s in range(20)}
    assert marks == {"X", "O"}
    with pytest.raises(InvalidKwargsError, match="Did you mean 'medium'"):
        envgym.make("envgym/TicTacToe-v0", difficulty="meduim")
    with pytest.raises(InvalidKwargsError, match="agent_first"):
        envgym.make("envgym/TicTacToe-v0", agent_first="yes")


def test_same_seed_same_game_and_seeds_vary_the_opponent() -> None:
    def game(seed: int) -> list[str]:
        env = envgym.make("envgym/TicTacToe-Medium-v0")
        obs, _ = env.reset(seed=seed)
        rng = random.Random(0)
        out = [obs]
        while True:
            obs, _, terminated, truncated, _ = env.step(env.unwrapped.sample_action(rng))
            out.append(obs)
            if terminated or truncated:
                return out

    assert game(3) == game(3)
    assert len({tuple(game(s)) for s in range(10)}) > 5


# ---------------------------------------------------------------------- AEC scripted games
@pytest.mark.parametrize(
    ("moves", "winner"),
    [
        (["a1", "a2", "b1", "b2", "c1"], "player_0"),  # row 1
        (["a1", "b1", "a2", "b2", "c3", "b3"], "player_1"),  # column b
        (["a1", "b1", "b2", "c1", "c3"], "player_0"),  # diagonal
        (["a1", "c1", "a2", "b2", "c3", "a3"], "player_1"),  # anti-diagonal
        (["a1", "b1", "c1", "b2", "a2", "a3", "c2", "c3", "b3"], None),  # full board
    ],
)
def test_aec_games_end_with_the_right_outcome(moves: list[str], winner: str | None) -> None:
    env = envgym.make_aec(AEC_ID)
    env.reset(seed=0)
    for move in moves:
        assert not any(env.terminations.values())
        env.step(move)
    assert all(env.terminations.values())
    for agent in env.possible_agents:
        info = env.infos[agent]
        won = agent == winner
        assert info["success"] is won
        assert info["termination_reason"] == ("success" if won else "failure")
        expected = 1.0 if won else (0.0 if winner is None else -1.0)
        assert env._cumulative_rewards[agent] == pytest.approx(expected)
    assert ("draw" in env.observe("player_0")) is (winner is None)


# ---------------------------------------------------------------------- solver
def test_solver_parses_the_board_from_any_observation() -> None:
    env = envgym.make("envgym/TicTacToe-Easy-v0")
    obs, _ = env.reset(seed=0)
    assert parse_board(obs) == "." * 9
    obs, *_ = env.step("b2")
    assert parse_board(obs) == "".join(env.unwrapped.board)
    aec = envgym.make_aec(AEC_ID)
    aec.reset(seed=0)
    aec.step("a1")
    assert parse_board(aec.observe("player_1")) == "X........"
    with pytest.raises(ValueError, match="no tic-tac-toe board"):
        parse_board("nothing here")


def test_exact_success_probabilities() -> None:
    assert success_probability("hard") == pytest.approx(1.0)
    assert success_probability("easy") > 0.99
    assert 0.95 < success_probability("medium") < 0.97


@pytest.mark.parametrize(("difficulty", "floor"), [("easy", 0.97), ("medium", 0.95), ("hard", 1.0)])
def test_solver_success_rate(difficulty: str, floor: float) -> None:
    env_id = f"envgym/TicTacToe-{difficulty.capitalize()}-v0"
    results = run_episodes(env_id, OracleAgent(), episodes=300, seed=0)
    rate = sum(r.success for r in results) / len(results)
    assert rate >= floor
    assert abs(rate - success_probability(difficulty)) < 0.035  # within ~3 standard errors
    assert all(r.invalid_actions == 0 for r in results)


def test_solver_plays_second_and_never_loses_to_perfect_play() -> None:
    results = run_episodes(
        "envgym/TicTacToe-Hard-v0", OracleAgent(), episodes=50, seed=100, env_kwargs={"agent_first": False}
    )
    assert all(r.success for r in results)
    position = "    a   b   c\n1   X | X | .\n   ---+---+---\n2   O | . | .\n   ---+---+---\n3   O | . | ."
    assert Solver("envgym/TicTacToe-Hard-v0", 0).act(position, {"task": {}}) == "c1"  # X to move wins at once
    position = position.replace("2   O | . | .", "2   . | O | .").replace("3   O | . | .", "3   . | . | .")
    assert Solver("envgym/TicTacToe-Hard-v0", 0).act(position, {"task": {}}) == "c1"  # O to move must block
