"""``envgym play`` on the registered games, driven by scripted stdin: a bare number means what the
environment's own text says, and the hot-seat summary adds every reward the game gave."""

from __future__ import annotations

import re

from typer.testing import CliRunner

import envgym
from envgym.cli import app
from envgym.cli._play import resolve_input

runner = CliRunner()


def test_resolve_input_leaves_numbers_to_an_env_that_reads_them() -> None:
    cells = ["a1", "b1", "c1"]
    assert resolve_input("2", cells).action == "b1"  # a menu index where numbers mean nothing else
    assert resolve_input("2", cells, numbers_are_actions=True).action == "2"  # the env's number
    assert resolve_input("#2", cells, numbers_are_actions=True).action == "b1"
    assert "no action number 4" in (resolve_input("#4", cells, numbers_are_actions=True).message or "")


def test_tictactoe_bare_number_is_the_cell_its_text_names() -> None:
    # "1 = a1 ... 9 = c3". #1 is the menu's first free cell (a1); the opponent answers b3, and
    # then 5 is the centre b2, not the menu's 5th free cell (c2).
    result = runner.invoke(app, ["play", "envgym/TicTacToe-v0", "--seed", "3"], input="#1\n5\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "Actions: #1 a1  #2 b1  #3 c1  #4 a2  #5 b2" in out  # the menu is picked with #N
    assert "You played a1. The opponent played b3." in out
    assert "Actions: #1 b1  #2 c1  #3 a2  #4 b2  #5 c2  #6 a3  #7 c3" in out
    assert "You played b2." in out and "You played c2." not in out
    assert "[invalid action]" not in out


def test_tictactoe_hot_seat_reads_cell_numbers_for_both_players() -> None:
    # X: 1 (a1), O: 4 (a2), X: 2 (b1), O: 5 (b2), X: 3 (c1) completes the top row.
    result = runner.invoke(app, ["play", "envgym/TicTacToe-v0", "--kind", "aec"], input="1\n4\n2\n5\n3\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "rewards player_0 +1.000, player_1 -1.000" in out
    assert re.search(r"player_0\s+│\s+\+1\.000\s+│\s+0\s+│", out)
    assert re.search(r"player_1\s+│\s+-1\.000\s+│\s+0\s+│", out)
    assert "5 turn(s), finished." in out


def test_hot_seat_summary_keeps_the_rewards_of_a_round_stopped_after() -> None:
    # One round of the trust dilemma (agent_0 40, agent_1 30), then the input ends at agent_0's
    # next turn: agent_1 has not been asked again, but its round-1 reward counts all the same.
    env_id = "envgym/Coop-TrustDilemma-Text-v0"
    result = runner.invoke(app, ["play", env_id, "--seed", "1"], input="40\n30\n")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    env = envgym.make_parallel(env_id)
    env.reset(seed=1)
    _, rewards, *_ = env.step({"agent_0": "40", "agent_1": "30"})
    env.close()
    assert all(r > 0 for r in rewards.values())
    shown = ", ".join(f"{a} {r:+.3f}" for a, r in rewards.items())
    assert f"rewards {shown}" in out
    for agent, reward in rewards.items():
        assert re.search(rf"{agent}\s+│\s+{re.escape(f'{reward:+.3f}')}\s+│\s+0\s+│", out), (agent, reward, out[-800:])
    assert "2 turn(s), stopped." in out
