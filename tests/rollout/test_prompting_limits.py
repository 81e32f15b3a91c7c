"""Reply limits in the prompt config: ``stop_at_action`` (stop strings) and ``max_new_tokens`` (per-reply cap)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import envgym
from envgym.cli import app
from envgym.errors import ConfigError
from envgym.rollout.prompting import Conversation, PromptConfig

FL = "envgym/FrozenLake-v0"


def conversation(config: PromptConfig) -> Conversation:
    env = envgym.make(FL)
    obs, info = env.reset(seed=1)
    return Conversation(config, FL, obs, info)


def test_defaults_stop_at_the_closing_action_tag_without_a_cap() -> None:
    config = PromptConfig()
    assert config.stop_at_action is True and config.max_new_tokens is None
    conv = conversation(config)
    assert conv.stop == ("</action>",) and conv.max_new_tokens is None


def test_stop_strings_follow_the_tags_as_written() -> None:
    assert conversation(PromptConfig(action_tags=("Move", "say"))).stop == ("</Move>", "</say>")
    assert conversation(PromptConfig(action_tags=("Move",), stop_at_action=False)).stop == ()
    assert conversation(PromptConfig(action_tags=())).stop == ()  # the whole reply is the action


def test_turn_cap_is_the_smaller_of_the_cap_and_the_budget_left() -> None:
    conv = conversation(PromptConfig(max_new_tokens=16, token_budget=40))
    parsed = conv.parse("<action>left</action>")
    caps = []
    for used in (10, 10, 10, 6):
        caps.append(conv.max_new_tokens)
        conv.record("<action>left</action>", parsed, "obs", {}, completion_tokens=used)
    assert caps == [16, 16, 16, 10]
    assert conv.max_new_tokens == 4 and conv.remaining_tokens == 4

    conv = conversation(PromptConfig(token_budget=5))
    conv.record("x", conv.parse("x"), "obs", {}, completion_tokens=9)
    assert conv.max_new_tokens == 0 and conv.budget_exhausted  # never negative
    conv = conversation(PromptConfig(max_new_tokens=3))
    conv.record("x", conv.parse("x"), "obs", {}, completion_tokens=300)
    assert conv.max_new_tokens == 3  # no budget: the cap every turn


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens must be an integer >= 1 or None, got 0"),
        ({"max_new_tokens": True}, "max_new_tokens"),
        ({"max_new_tokens": 2.5}, "max_new_tokens"),
        ({"stop_at_action": "yes"}, "stop_at_action must be true or false, got 'yes'"),
        ({"stop_at_action": 1}, "stop_at_action"),
    ],
)
def test_bad_values_are_refused(kwargs: dict[str, object], word: str) -> None:
    with pytest.raises(ConfigError, match=word):
        PromptConfig(**kwargs)


def test_round_trip_and_did_you_mean() -> None:
    config = PromptConfig(max_new_tokens=48, stop_at_action=False, history="last_k", last_k=2)
    data = config.to_dict()
    assert data["max_new_tokens"] == 48 and data["stop_at_action"] is False
    assert PromptConfig.from_dict(json.loads(json.dumps(data))) == config
    with pytest.raises(ConfigError, match="unknown prompt config key 'max_new_token'.*max_new_tokens"):
        PromptConfig.from_dict({"max_new_token": 4})
    doc = PromptConfig.__doc__ or ""
    assert "max_new_tokens: Most completion tokens of one reply" in doc and "stop_at_action: With action tags" in doc


def test_run_command_flags_reach_the_run_config(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", FL, "-n", "2", "--max-turns", "2", "--reply-tokens", "24", "--no-stop-at-action", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    prompt = json.loads((out / "config.json").read_text())["prompt"]
    assert prompt["max_new_tokens"] == 24 and prompt["stop_at_action"] is False

    result = CliRunner().invoke(app, ["run", FL, "-n", "1", "--reply-tokens", "0"])
    assert result.exit_code == 2 and "max_new_tokens must be an integer >= 1" in result.output
