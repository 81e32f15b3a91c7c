"""The LLM view of the coopetition games (``envgym/Coop-<Name>-Text-v0``): answers, messages,
invalid rounds, the words of the observation, and the numbers of the numeric Parallel view."""

from __future__ import annotations

import math

import numpy as np
import pytest
from envgym.environments.coopetition.catalog import GAMES
from envgym.environments.coopetition.text import CoopTextEnv, parse_answer, trust_words

import envgym
from envgym.core import InvalidAction
from envgym.errors import ConfigError, ResetNeededError, UnknownAgentError
from envgym.testing import check_parallel_env

ID = "envgym/Coop-TrustDilemma-Text-v0"


def make(**kwargs: object) -> CoopTextEnv:
    return envgym.make_parallel(ID, **kwargs)


# ----------------------------------------------------------------------------- answers
@pytest.mark.parametrize(
    ("answer", "contribution", "message"),
    [
        ("<action>40</action>", 40.0, None),
        ("contribute 40", 40.0, None),
        ("I contribute 40.5.", 40.5, None),
        ("Contribution: 0", 0.0, None),
        ("  '25'  ", 25.0, None),
        ("all", 100.0, None),
        ("contribute everything", 100.0, None),
        ("nothing", 0.0, None),
        ("<action>40 say: let's both cooperate</action>", 40.0, "let's both cooperate"),
        ("40 message: hi 20 times", 40.0, "hi 20 times"),  # numbers in the message do not count
        ("contribute 60 <message> be\x00 nice </message>", 60.0, "be nice"),
        (b"contribute 7", 7.0, None),
    ],
)
def test_accepted_answers(answer: object, contribution: float, message: str | None) -> None:
    assert parse_answer(answer, 100.0) == (contribution, message)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("", "no contribution found in an empty answer"),
        ("blah", "no contribution found in 'blah'"),
        ("40 or 50", "several numbers (40, 50)"),
        ("40%", "not a percentage"),
        ("150", "contribution 150 is outside your range"),
        ("-5", "contribution -5 is outside your range"),
        ("all or nothing", "no contribution found"),
        ("40 say: a <message>b</message>", "two messages"),
        (None, "expected the action as a string"),
        (40, "expected the action as a string"),
    ],
)
def test_rejected_answers_say_why(answer: object, why: str) -> None:
    with pytest.raises(InvalidAction, match=why.replace("(", r"\(").replace(")", r"\)")):
        parse_answer(answer, 100.0)


def test_trust_words_bands() -> None:
    assert [trust_words(t) for t in (0.0, 0.19, 0.2, 0.5, 0.79, 0.8, 1.0)] == [
        "very low",
        "very low",
        "low",
        "moderate",
        "high",
        "very high",
        "very high",
    ]


# ----------------------------------------------------------------------------- registry and checker
def test_every_game_has_a_text_view() -> None:
    ids = {s.id for s in envgym.list_envs(family="coopetition", kind="parallel")}
    assert {f"envgym/Coop-{g.name}-Text-v0" for g in GAMES} <= ids
    assert envgym.spec(ID).kind == "parallel"


@pytest.mark.parametrize("kwargs", [{}, {"messages": True}, {"messages": True, "reward_mode": "private"}])
def test_passes_the_parallel_checker(kwargs: dict[str, object]) -> None:
    report = check_parallel_env(ID, make_kwargs=kwargs, num_cycles=60)
    assert {"pettingzoo.parallel_api_test", "seeded_determinism", "bad_input_fuzz", "invalid_run_ends"} <= set(
        report.checks
    )


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="messages must be true or false"):
        make(messages="yes")
    with pytest.raises(ConfigError, match="history_rounds must be an integer >= 1"):
        make(history_rounds=0)
    env = make()
    with pytest.raises(ResetNeededError):
        env.step({"agent_0": "40", "agent_1": "40"})
    env.reset(seed=0)
    with pytest.raises(UnknownAgentError, match="agent_7"):
        env.step({"agent_7": "40"})
    with pytest.raises(ConfigError, match="takes a dict"):
        env.step("40")


# ----------------------------------------------------------------------------- same numbers as the numeric view
def test_rewards_equal_the_numeric_parallel_view() -> None:
    text = make(reward_mode="integrated")
    numeric = envgym.make_parallel("envgym/Coop-TrustDilemma-v0", reward_mode="integrated")
    text.reset(seed=5)
    numeric.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(6):
        a, b = (int(x) for x in rng.integers(0, 101, size=2))
        _, tr, tterm, ttrunc, tinfo = text.step({"agent_0": f"contribute {a}", "agent_1": f"<action>{b}</action>"})
        _, nr, nterm, ntrunc, ninfo = numeric.step({"agent_0": np.array([a]), "agent_1": np.array([b])})
        assert tr == nr and tterm == nterm and ttrunc == ntrunc
        for agent in ("agent_0", "agent_1"):
            assert tinfo[agent]["reward_components"] == ninfo[agent]["reward_components"]
            assert tinfo[agent]["mean_trust"] == ninfo[agent]["mean_trust"]
        assert text.state_text().startswith(numeric.state_text())
        if not text.agents:
            break


# ----------------------------------------------------------------------------- observations
def test_observation_words_and_numbers() -> None:
    env = make(history_rounds=2)
    obs, infos = env.reset(seed=1)
    first = obs["agent_0"]
    assert "You are agent_0 (partner A). The others: agent_1 (partner B)." in first
    assert "Your endowment is 100" in first and "at least 40 (your baseline)" in first
    assert "Round 1 of at most 100." in first and "No round has been played yet." in first
    assert "agent_1: trust 0.50 (moderate), reputation damage 0.00 (none)" in first
    assert "<action>40</action>" in first and "say:" not in first  # messages are off by default
    assert infos["agent_0"]["turn"] == 0 and infos["agent_0"]["task"]["view"] == "text"
    for a, b in ((50, 45), (60, 10), (70, 20)):
        obs, rewards, *_ = env.step({"agent_0": str(a), "agent_1": str(b)})
    text = obs["agent_1"]
    # The last two rounds only, the agent itself first.
    assert "round 1:" not in text
    assert "round 2: you 10, agent_0 60" in text and "round 3: you 20, agent_0 70" in text
    assert "Round 4 of at most 100." in text
    assert f"Last round: your reward {rewards['agent_1']:.2f}".rstrip("0").rstrip(".") in text
    trust = float(env.game.trust[1, 0])
    assert f"agent_0: trust {trust:.2f} ({trust_words(trust)})" in text


def test_the_final_observation_says_the_game_is_over() -> None:
    env = make(max_steps=2)
    env.reset(seed=0)
    env.step({"agent_0": "50", "agent_1": "50"})
    obs, _, terms, truncs, infos = env.step({"agent_0": "50", "agent_1": "50"})
    assert truncs == {"agent_0": True, "agent_1": True} and not any(terms.values())
    assert infos["agent_0"]["termination_reason"] == "max_turns" and env.agents == []
    assert "The game is over after 2 round(s) (max_turns)." in obs["agent_0"]
    assert "Answer with" not in obs["agent_0"]


# ----------------------------------------------------------------------------- invalid rounds
def test_an_invalid_answer_holds_the_round_and_says_why() -> None:
    env = make(invalid_limit=2)
    env.reset(seed=3)
    env.step({"agent_0": "40", "agent_1": "40"})
    before = env.state_text()
    obs, rewards, terms, _, infos = env.step({"agent_0": "forty", "agent_1": "55"})
    assert env.state_text() == before and env.game.step_count == 1
    assert rewards == {"agent_0": 0.0, "agent_1": 0.0} and not any(terms.values())
    assert infos["agent_0"]["action_valid"] is False and infos["agent_1"]["action_valid"] is True
    assert infos["agent_0"]["invalid_reason"] == {
        "agent_0": "no contribution found in 'forty'; answer with a number from 0 to 100, e.g. <action>40</action>."
    }
    assert infos["agent_0"]["invalid_actions"] == 1 and infos["agent_1"]["invalid_actions"] == 0
    assert infos["agent_0"]["turn"] == 2 and infos["agent_0"]["round"] == 1
    assert "Your last answer 'forty' was invalid: no contribution found" in obs["agent_0"]
    assert "The round was not played: the answer of agent_0 was invalid. Answer again." in obs["agent_1"]
    # A valid round clears the streak; two invalid answers in a row end the episode.
    env.step({"agent_0": "40", "agent_1": "40"})
    env.step({"agent_0": "?", "agent_1": "40"})
    _, _, terms, truncs, infos = env.step({"agent_0": "", "agent_1": "40"})
    assert terms == {"agent_0": True, "agent_1": True} and truncs == {"agent_0": False, "agent_1": False}
    assert infos["agent_1"]["termination_reason"] == "invalid_limit" and infos["agent_0"]["success"] is False
    assert env.agents == []


def test_a_missing_agent_is_an_invalid_answer() -> None:
    env = make()
    env.reset(seed=0)
    _, _, _, _, infos = env.step({"agent_0": "40"})
    assert infos["agent_1"]["invalid_reason"] == {"agent_1": "no answer"}


# ----------------------------------------------------------------------------- messages
def test_messages_reach_the_others_next_round_only_after_a_played_round() -> None:
    env = make(messages=True, max_message_chars=12)
    env.reset(seed=0)
    obs, *_, infos = env.step({"agent_0": "40 say: let's cooperate today", "agent_1": "40"})
    assert infos["agent_0"]["message_sent"] == "let's cooper"  # cut to 12 characters
    assert 'agent_0: "let\'s cooper"' in obs["agent_1"]
    assert "(Your message was cut to 12 characters.)" in obs["agent_0"]
    assert "Messages from the others" not in obs["agent_0"]  # nobody wrote to agent_0
    # An unplayed round delivers nothing and keeps last round's messages on show.
    obs, *_ = env.step({"agent_0": "40 say: new", "agent_1": "oops"})
    assert 'agent_0: "let\'s cooper"' in obs["agent_1"] and '"new"' not in obs["agent_1"]
    obs, *_ = env.step({"agent_0": "40", "agent_1": "30 say: ok"})
    assert "Messages from the others" not in obs["agent_1"] and 'agent_1: "ok"' in obs["agent_0"]


def test_messages_off_are_ignored_with_a_note() -> None:
    env = make()
    env.reset(seed=0)
    obs, *_, infos = env.step({"agent_0": "40 say: hello", "agent_1": "40"})
    assert infos["agent_0"]["action_valid"] is True and "message_sent" not in infos["agent_0"]
    assert "your message was not delivered" in obs["agent_0"] and "hello" not in obs["agent_1"]


def test_sample_action_is_always_legal_and_seeded() -> None:
    import random

    env = make(messages=True)
    env.reset(seed=0)
    rng = random.Random(4)
    answers = [env.sample_action("agent_0", rng) for _ in range(200)]
    for answer in answers:
        value, _ = parse_answer(answer, 100.0)
        assert 0 <= value <= 100 and value == math.floor(value)
    assert answers == [env.sample_action("agent_0", r) for r in [random.Random(4)] for _ in range(200)]
    assert any("say:" in a for a in answers) and any("<action>" in a for a in answers)
