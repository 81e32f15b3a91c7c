"""Connect four: bitboard rules, parsing, opponents, the single-agent views, the AEC game and the solver."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from envgym.agents.oracle import OracleAgent
from envgym.agents.solvers.connect_four import Solver, parse_board, search
from envgym.environments.games import connect_four as c4

import envgym
from envgym.core import InvalidAction
from envgym.errors import InvalidKwargsError
from envgym.rollout import run_episodes
from envgym.testing import check_aec_env, check_env

SINGLE_IDS = [
    "envgym/ConnectFour-v0",
    "envgym/ConnectFour-Easy-v0",
    "envgym/ConnectFour-Medium-v0",
    "envgym/ConnectFour-Hard-v0",
]
AEC_ID = "envgym/ConnectFour-v0"
#: A full game (columns 1-7) that fills the board without four in a row.
DRAW_GAME = "421127327363224366417626743773654415515515"


def bit(col: int, row: int) -> int:
    """Bitboard bit of a cell: columns 0-6 from the left, rows 0-5 from the bottom."""
    return 1 << (col * 7 + row)


def stones(*cells: tuple[int, int]) -> int:
    return sum(bit(c, r) for c, r in cells)


def four_brute(p: int) -> bool:
    for c in range(7):
        for r in range(6):
            for dc, dr in ((1, 0), (0, 1), (1, 1), (1, -1)):
                cells = [(c + dc * k, r + dr * k) for k in range(4)]
                if all(0 <= x < 7 and 0 <= y < 6 and p & bit(x, y) for x, y in cells):
                    return True
    return False


def completes_four(p: int, col: int, row: int) -> bool:
    """True when a stone at (col, row) would give ``p`` four in a row through that cell."""
    for dc, dr in ((1, 0), (0, 1), (1, 1), (1, -1)):
        run = 1
        for sign in (1, -1):
            c, r = col + sign * dc, row + sign * dr
            while 0 <= c < 7 and 0 <= r < 6 and p & bit(c, r):
                run += 1
                c, r = c + sign * dc, r + sign * dr
        if run >= 4:
            return True
    return False


def board_from(columns: str) -> c4._Board:
    """Play the 1-based column sequence (X first) on a fresh board."""
    b = c4._Board()
    for i, col in enumerate(columns):
        b.drop(int(col) - 1, "XO"[i % 2])
    return b


def position(env: c4.ConnectFourEnv, columns: str) -> None:
    """Put the position after ``columns`` on a reset single-agent env (the agent is X)."""
    env.board = board_from(columns)


@pytest.mark.parametrize("env_id", SINGLE_IDS)
def test_check_env_single_agent(env_id: str) -> None:
    report = check_env(env_id)
    assert "seeded_determinism" in report.checks and "bad_input_fuzz" in report.checks


def test_check_aec_env() -> None:
    report = check_aec_env(AEC_ID)
    assert report.checks[:2] == ["pettingzoo.api_test", "pettingzoo.seed_test"]
    assert report.steps >= 3 * 7  # three seeded games, each at least 7 moves


# ---------------------------------------------------------------------- rules
@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ([(0, 0), (1, 0), (2, 0), (3, 0)], True),  # bottom row
        ([(3, 5), (4, 5), (5, 5), (6, 5)], True),  # top row, right edge
        ([(6, 2), (6, 3), (6, 4), (6, 5)], True),  # column 7
        ([(0, 0), (1, 1), (2, 2), (3, 3)], True),  # diagonal /
        ([(3, 2), (4, 3), (5, 4), (6, 5)], True),  # diagonal / at the corner
        ([(0, 5), (1, 4), (2, 3), (3, 2)], True),  # diagonal \
        ([(0, 0), (1, 0), (2, 0)], False),  # three only
        ([(0, 4), (0, 5), (1, 0), (1, 1)], False),  # no vertical wrap into the next column
        ([(0, 3), (1, 4), (2, 5), (3, 6 - 6)], False),  # a diagonal does not wrap over the top
        ([(6, 0), (0, 1), (1, 1), (2, 1)], False),  # nor a row into the next one
        ([(0, 0), (2, 0), (3, 0), (4, 0)], False),  # a gap
    ],
)
def test_has_four_on_hand_made_positions(cells: list[tuple[int, int]], expected: bool) -> None:
    assert c4.has_four(stones(*cells)) is expected
    assert four_brute(stones(*cells)) is expected


def test_bitboard_rules_match_brute_force_on_random_games() -> None:
    rng = random.Random(0)
    for _ in range(200):
        b = c4._Board()
        for ply in range(rng.randint(1, 40)):
            mark = "XO"[ply % 2]
            won = b.drop(rng.choice(b.open), mark)
            assert won == four_brute(b.stones[mark])
            if won or not b.open:
                break
            mask = b.mask
            brute = sum(
                bit(c, r)
                for c in range(7)
                for r in range(6)
                if not mask & bit(c, r) and completes_four(b.stones[mark], c, r)
            )
            assert c4.winning_cells(b.stones[mark], mask) == brute  # the opponents' and the oracle's
    assert board_from(DRAW_GAME).full()


@pytest.mark.parametrize(
    ("text", "col"),
    [
        ("4", 3), ("1", 0), ("7", 6), ("drop 4", 3), ("column 4", 3), ("Column 2", 1), ("col 5", 4),
        ("drop in column 6", 5), ("I drop my piece in column 3.", 2), ("Play 7!", 6), ("(4)", 3), ("  2 ", 1),
    ],
)  # fmt: skip
def test_parse_column_aliases(text: str, col: int) -> None:
    assert c4.parse_column(text.strip()) == col


@pytest.mark.parametrize("text", ["", "0", "8", "44", "4 5", "four", "d", "column", "drop -1", "3.5"])
def test_parse_column_rejects(text: str) -> None:
    with pytest.raises(InvalidAction, match="expected a column number from 1 to 7"):
        c4.parse_column(text)


def test_text_board_shows_pieces_where_they_fall() -> None:
    text = board_from("4435").text().splitlines()
    assert text[0] == text[-1] == " 1 2 3 4 5 6 7"
    assert text[6] == "|. . X X O . .|" and text[5] == "|. . . O . . .|" and text[1] == "|. . . . . . .|"
    assert text[7] == "+-------------+"


# ---------------------------------------------------------------------- AEC scripted games
@pytest.mark.parametrize(
    ("moves", "winner"),
    [
        ("1212121", "player_0"),  # column 1
        ("1122334", "player_0"),  # bottom row
        ("12233434344", "player_0"),  # diagonal /
        ("76655454544", "player_0"),  # the other diagonal (the mirror image)
        ("17271727", "player_1"),  # column 7 for O
        (DRAW_GAME, None),  # the board fills up without a line
    ],
)
def test_aec_games_end_with_the_right_outcome(moves: str, winner: str | None) -> None:
    env = envgym.make_aec(AEC_ID)
    env.reset(seed=0)
    for move in moves:
        assert not any(env.terminations.values())
        env.step(move)
    assert all(env.terminations.values())
    for agent in env.possible_agents:
        info = env.infos[agent]
        assert info["success"] is (agent == winner)
        assert info["termination_reason"] == ("success" if agent == winner else "failure")
        expected = 1.0 if agent == winner else (0.0 if winner is None else -1.0)
        assert env._cumulative_rewards[agent] == pytest.approx(expected)
    assert ("board is full: draw" in env.observe("player_0")) is (winner is None)


def test_full_column_is_an_invalid_move() -> None:
    env = envgym.make_aec(AEC_ID)
    env.reset(seed=0)
    for move in "444444":
        env.step(move)
    board = env.state_text()
    env.step("drop 4")
    assert env.agent_selection == "player_0" and env.state_text() == board
    assert "column 4 is full. Open columns: 1, 2, 3, 5, 6, 7." in env.observe("player_0")
    assert env.infos["player_0"]["admissible_actions"] == ["1", "2", "3", "5", "6", "7"]
    single = envgym.make("envgym/ConnectFour-Easy-v0")
    single.reset(seed=0)
    position(single.unwrapped, "444444")
    obs, reward, terminated, _, info = single.step("column 4")
    assert not terminated and reward == pytest.approx(-0.1) and info["action_valid"] is False
    assert "column 4 is full" in obs and "4" not in info["admissible_actions"]


# ---------------------------------------------------------------------- opponents
@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_search_opponents_win_block_and_avoid_traps(difficulty: str) -> None:
    depth = c4.OPPONENT_DEPTH[difficulty]
    b = board_from("121213")  # X to move with three stacked in column 1: it wins there
    assert c4.best_moves(b.stones["X"], b.mask, depth) == [0]
    b = board_from("12121")  # O to move: the only block is column 1
    assert c4.best_moves(b.stones["O"], b.mask, depth) == [0]
    # O to move; X would win on row 2 of column 4 once that cell is playable: O must not play
    # column 4 (the cell below), and nothing else is forced.
    b = board_from("746163551756142")
    threats = c4.winning_cells(b.stones["X"], b.mask)
    playable = (b.mask + c4._BOTTOM) & c4._FULL
    assert not threats & playable and (threats >> 1) & playable & c4._COLUMN_MASK[3]
    moves = c4.best_moves(b.stones["O"], b.mask, depth)
    assert moves and 3 not in moves


def test_medium_opponent_takes_the_win_it_is_offered() -> None:
    env = envgym.make("envgym/ConnectFour-Medium-v0").unwrapped
    env.reset(seed=0)
    position(env, "172737")  # O has three in column 7; X has 1-2-3 on the bottom row
    obs, reward, terminated, _, info = env.step("6")  # neither wins nor blocks
    assert terminated and reward == -1.0 and "four in a row, you lose" in obs
    assert info["termination_reason"] == "failure" and info["reward_components"]["loss_reward"] == -1.0


def test_easy_opponent_plays_every_column_and_seeds_vary_it() -> None:
    env = envgym.make("envgym/ConnectFour-Easy-v0")
    replies = Counter()
    for seed in range(350):
        env.reset(seed=seed)
        obs, *_ = env.step("4")
        replies[obs.split("The opponent dropped in column ")[1][0]] += 1
    assert set(replies) == set("1234567") and min(replies.values()) > 25  # 50 expected each


def test_opponent_depth_and_kwargs() -> None:
    env = envgym.make("envgym/ConnectFour-Hard-v0", opponent_depth=1)
    assert env.unwrapped.opponent_depth == 1
    _, info = env.reset(seed=0)
    assert info["task"]["opponent_depth"] == 1 and info["task"]["difficulty"] == "hard"
    with pytest.raises(InvalidKwargsError, match="opponent_depth"):
        envgym.make("envgym/ConnectFour-v0", opponent_depth=40)
    with pytest.raises(InvalidKwargsError, match="Did you mean 'hard'"):
        envgym.make("envgym/ConnectFour-v0", difficulty="hrad")
    env = envgym.make("envgym/ConnectFour-Medium-v0", agent_first=False)
    obs, info = env.reset(seed=0)
    assert "You are O" in obs and "The opponent (X) opened in column" in obs
    assert env.unwrapped.board.moves == 1 and info["task"]["agent_mark"] == "O"


# ---------------------------------------------------------------------- single agent env
def test_win_and_draw_on_hand_made_positions() -> None:
    env = envgym.make("envgym/ConnectFour-Medium-v0").unwrapped
    env.reset(seed=0)
    position(env, "172737")  # X to move completes the bottom row in column 4
    obs, reward, terminated, _, info = env.step("drop 4")
    assert terminated and info["success"] and reward == 1.0 and "you win" in obs
    assert info["termination_reason"] == "success" and info["admissible_actions"] == []
    env.reset(seed=0)
    position(env, DRAW_GAME[:-1])
    obs, reward, terminated, _, info = env.step(DRAW_GAME[-1])
    assert terminated and "draw" in obs and info["success"] is False
    assert reward == pytest.approx(0.5) and info["reward_components"]["draw_reward"] == pytest.approx(0.5)


def test_same_seed_same_game_hard() -> None:
    def game(seed: int) -> list[str]:
        env = envgym.make("envgym/ConnectFour-Hard-v0")
        obs, _ = env.reset(seed=seed)
        rng = random.Random(1)
        out = [obs]
        while True:
            obs, _, terminated, truncated, _ = env.step(env.unwrapped.sample_action(rng))
            out.append(obs)
            if terminated or truncated:
                return out

    assert game(5) == game(5)
    assert len({tuple(game(seed)) for seed in range(10)}) > 1  # ties are broken by the seed


# ---------------------------------------------------------------------- solver
def test_solver_reads_the_board_and_finds_wins_and_blocks() -> None:
    env = envgym.make("envgym/ConnectFour-Easy-v0")
    obs, _ = env.reset(seed=0)
    env.unwrapped.board = board_from("1213")  # X: 1 1, O: 2 3
    obs = env.unwrapped._observe()
    rows, x, o = parse_board(obs)
    assert (x, o) == (env.unwrapped.board.stones["X"], env.unwrapped.board.stones["O"])
    assert rows[-1] == "XOO...." and rows[-2] == "X......"
    b = board_from("121212")  # X to move: column 1 wins
    assert search(b.stones["X"], b.stones["O"], 4) == 0
    b = board_from("12121")  # O to move: must block column 1
    assert search(b.stones["X"], b.stones["O"], 4) == 0
    with pytest.raises(ValueError, match="no connect-four board"):
        parse_board("no board")
    assert Solver("envgym/ConnectFour-Hard-v0", 0).act(env.unwrapped._observe(), {"task": {}}) in "1234567"


def _success_rate(difficulty: str, episodes: int) -> float:
    env_id = f"envgym/ConnectFour-{difficulty.capitalize()}-v0"
    results = run_episodes(env_id, OracleAgent(), episodes=episodes, seed=0)
    assert all(r.invalid_actions == 0 for r in results)
    return sum(r.success for r in results) / episodes


def test_solver_beats_the_easy_opponent() -> None:
    assert _success_rate("easy", 100) == 1.0


@pytest.mark.slow
@pytest.mark.parametrize(("difficulty", "episodes"), [("medium", 8), ("hard", 6)])
def test_solver_beats_the_search_opponents(difficulty: str, episodes: int) -> None:
    # ~1.5 s per game: a few seeds here; 100 seeds measured 97% on medium and on hard.
    assert _success_rate(difficulty, episodes) >= 0.95
