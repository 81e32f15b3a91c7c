"""HumanAgent driven through StringIO streams (what a person would type, line by line)."""

from __future__ import annotations

import io
import sys

import pytest
from envgym.agents.human import HumanAgent, HumanQuit

import envgym
from envgym.errors import EnvgymError
from envgym.rollout import AgentInput


def _item(episode_id="e0", observation="You see a door.", actions=("open door", "go north"), turn=0):
    info = {"admissible_actions": list(actions)} if actions is not None else {}
    return AgentInput(episode_id=episode_id, env_id="envgym/Test-v0", observation=observation, info=info, turn=turn)


def _agent(typed: str) -> tuple[HumanAgent, io.StringIO]:
    out = io.StringIO()
    return HumanAgent(io.StringIO(typed), out), out


def test_one_turn_shows_observation_and_actions():
    agent, out = _agent("  open door  \n")
    outputs = agent.act([_item(turn=2)])
    assert [o.text for o in outputs] == ["open door"]  # surrounding whitespace stripped
    shown = out.getvalue()
    assert "--- turn 3 ---" in shown
    assert "You see a door." in shown
    assert "Actions: open door, go north" in shown
    assert shown.rstrip().endswith(">")  # the prompt
    assert "episode" not in shown  # a single episode is not labelled
    assert agent.chat is False and agent.name == "human"


def test_long_action_lists_are_shown_only_on_help():
    actions = [f"take item {i}" for i in range(30)]
    agent, out = _agent(":help\ntake item 29\n")
    assert agent.act([_item(actions=actions)])[0].text == "take item 29"
    before_help, after_help = out.getvalue().split("> ", 1)
    assert "take item 0" not in before_help
    assert "Admissible actions (30): take item 0, take item 1" in after_help
    assert "':quit' stops" in after_help
    assert after_help.count("> ") == 1  # asked again after help


def test_help_without_a_list_and_blank_lines_ask_again():
    agent, out = _agent("\n   \n:HELP\n2 + 3 * 4\n")
    assert agent.act([_item(actions=None)])[0].text == "2 + 3 * 4"
    shown = out.getvalue()
    assert shown.count("Type an action") == 2
    assert "free text" in shown
    assert shown.count("> ") == 4  # two blanks, help, then the answer


def test_batch_is_played_in_order_with_labels():
    agent, out = _agent("go north\nopen door\n")
    outputs = agent.act([_item("alpha", "first room"), _item("beta", "second room")])
    assert [o.text for o in outputs] == ["go north", "open door"]
    shown = out.getvalue()
    assert "episode alpha" in shown and "episode beta" in shown
    assert "[alpha] > " in shown and "[beta] > " in shown
    assert shown.index("first room") < shown.index("[alpha] > ") < shown.index("second room")


def test_quit_and_end_of_input_stop_cleanly():
    agent, _ = _agent(":quit\n")
    with pytest.raises(HumanQuit, match="':quit'") as info:
        agent.act([_item()])
    assert isinstance(info.value, EnvgymError)
    agent, _ = _agent("")
    with pytest.raises(HumanQuit, match="input ended"):
        agent.act([_item()])
    # EOF in the middle of a batch: the first answer was read, the second episode stops the batch.
    agent, _ = _agent("go north\n")
    with pytest.raises(HumanQuit, match="'beta'"):
        agent.act([_item("alpha"), _item("beta")])


def test_defaults_to_the_process_streams(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO("go north\n"))
    monkeypatch.setattr(sys, "stdout", out)
    assert HumanAgent().act([_item()])[0].text == "go north"
    assert "You see a door." in out.getvalue()


def test_plays_frozen_lake():
    env = envgym.make("envgym/FrozenLake-v0")
    obs, info = env.reset(seed=1)  # down, down, left reaches the goal
    agent, out = _agent("down\n:help\ndown\nleft\n")
    agent.start_episode("e0", "envgym/FrozenLake-v0", 1)
    total, turn, terminated = 0.0, 0, False
    while not terminated and turn < 5:
        action = agent.act([AgentInput("e0", "envgym/FrozenLake-v0", obs, info, turn)])[0].text
        obs, reward, terminated, _, info = env.step(action)
        total += reward
        turn += 1
    env.close()
    assert turn == 3 and terminated and info["success"] is True and total > 0
    assert out.getvalue().count("Actions: up, down, left, right") == 3
