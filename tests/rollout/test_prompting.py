"""The prompting layer: system prompt, history policies, reply parsing, feedback, token budget, config."""

from __future__ import annotations

import json
import logging

import pytest

import envgym
from envgym.errors import ConfigError
from envgym.rollout import prompting
from envgym.rollout.prompting import (
    DEFAULT_SYSTEM_PROMPT,
    HISTORY_KINDS,
    Conversation,
    ParsedReply,
    PromptConfig,
    env_description,
)

FL = "envgym/FrozenLake-v0"
VALID = "\n\nValid actions: up, down, left, right"
FEEDBACK = (
    "Your last reply had no complete <action>...</action> block. Give exactly one action inside "
    "<action>...</action>.\n\n"
)
# Seed 1 puts the player at row 2, column 4 of a 4x4 map: left/right never end the episode.
GOOD_LEFT = "I should go left. <action>left</action>"
GOOD_RIGHT = "<action>right</action>"
BAD = "right"  # no tags: the env still accepts it, but the format note must follow
INVALID = "<action>fly</action>"  # well formed, but not a move: an invalid step


def play(config: PromptConfig, replies: list[str], *, seed: int = 1) -> tuple[Conversation, list[str]]:
    """Play ``replies`` on FrozenLake; return the conversation and every observation seen."""
    env = envgym.make(FL)
    obs, info = env.reset(seed=seed)
    conv = Conversation(config, FL, obs, info)
    observations = [obs]
    for reply in replies:
        parsed = conv.parse(reply)
        obs, _, terminated, truncated, info = env.step(parsed.action)
        assert not (terminated or truncated)
        conv.record(reply, parsed, obs, info, completion_tokens=7)
        observations.append(obs)
    env.close()
    return conv, observations


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def assert_alternates(messages: tuple[dict[str, str], ...]) -> None:
    assert messages[0]["role"] == "system"
    roles = [m["role"] for m in messages[1:]]
    assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"], roles
    assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in messages)


REPLIES = [GOOD_LEFT, BAD, INVALID, GOOD_RIGHT]


def test_full_history_exact() -> None:
    conv, obs = play(PromptConfig(history="full"), REPLIES)
    assert conv.turns == 4
    assert conv.messages() == (
        {"role": "system", "content": conv.system},
        user(obs[0] + VALID),
        assistant(GOOD_LEFT),
        user(obs[1] + VALID),
        assistant(BAD),
        user(FEEDBACK + obs[2] + VALID),
        assistant(INVALID),
        user(obs[3] + VALID),
        assistant(GOOD_RIGHT),
        user(obs[4] + VALID),
    )
    assert obs[3].startswith("Invalid action 'fly'")  # the env really saw the extracted action


def test_last_k_history_exact() -> None:
    conv, obs = play(PromptConfig(history="last_k", last_k=2), REPLIES)
    assert conv.messages() == (
        {"role": "system", "content": conv.system},
        user(FEEDBACK + obs[2] + VALID),
        assistant(INVALID),
        user(obs[3] + VALID),
        assistant(GOOD_RIGHT),
        user(obs[4] + VALID),
    )


def test_last_k_keeps_everything_while_shorter_than_k() -> None:
    short, _ = play(PromptConfig(history="last_k", last_k=4), REPLIES[:3])
    full, _ = play(PromptConfig(history="full"), REPLIES[:3])
    assert short.messages() == full.messages()
    assert len(short.messages()) == 1 + 2 * 3 + 1


def test_none_history_exact() -> None:
    conv, obs = play(PromptConfig(history="none"), REPLIES[:2])
    assert conv.messages() == ({"role": "system", "content": conv.system}, user(FEEDBACK + obs[2] + VALID))


def test_summary_history_builtin_exact() -> None:
    conv, obs = play(PromptConfig(history="summary", last_k=1), REPLIES)
    summary = "Summary of earlier turns: turn 1: 'left'; turn 2: 'right' (no <action> block); turn 3: 'fly' (invalid)."
    assert conv.messages() == (
        {"role": "system", "content": conv.system},
        user(summary + "\n\n" + obs[3] + VALID),
        assistant(GOOD_RIGHT),
        user(obs[4] + VALID),
    )
    # Before any turn is dropped it is the same as last_k.
    early, _ = play(PromptConfig(history="summary", last_k=2), REPLIES[:2])
    assert early.messages() == play(PromptConfig(history="last_k", last_k=2), REPLIES[:2])[0].messages()


def test_builtin_summary_lists_only_the_latest_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompting, "SUMMARY_MAX_TURNS", 2)
    conv, _ = play(PromptConfig(history="summary", last_k=1), REPLIES)
    assert conv.messages()[1]["content"].startswith(
        "Summary of earlier turns: 1 earlier turns not listed; turn 2: 'right' (no <action> block); "
        "turn 3: 'fly' (invalid).\n\n"
    )


HOOK_CALLS: list[list[dict[str, str]]] = []


def summarise_hook(dropped: list[dict[str, str]]) -> str:
    """Summary hook named by import path in the tests below."""
    HOOK_CALLS.append([dict(m) for m in dropped])
    return f"{len(dropped) // 2} turn(s) dropped, last reply {dropped[-1]['content']!r}"


def not_a_str(dropped: list[dict[str, str]]) -> int:
    return len(dropped)


def test_summary_hook_gets_dropped_messages_and_is_cached() -> None:
    HOOK_CALLS.clear()
    config = PromptConfig(history="summary", last_k=2, summarizer=f"{__name__}:summarise_hook")
    assert config.load_summarizer() is summarise_hook
    conv, obs = play(config, REPLIES)
    messages = conv.messages()
    assert conv.messages() is messages  # same turn: no rebuild
    assert len(HOOK_CALLS) == 1  # summarised once for 2 dropped turns, not once per call
    assert HOOK_CALLS[0] == [user(obs[0] + VALID), assistant(GOOD_LEFT), user(obs[1] + VALID), assistant(BAD)]
    assert messages[1] == user(
        "Summary of earlier turns: 2 turn(s) dropped, last reply 'right'\n\n" + FEEDBACK + obs[2] + VALID
    )
    assert messages[2:] == (assistant(INVALID), user(obs[3] + VALID), assistant(GOOD_RIGHT), user(obs[4] + VALID))


def test_summary_hook_must_return_text() -> None:
    conv, _ = play(PromptConfig(history="summary", last_k=1, summarizer=f"{__name__}:not_a_str"), REPLIES[:2])
    with pytest.raises(ConfigError, match="must return a str, got 2"):
        conv.messages()


@pytest.mark.parametrize("history", HISTORY_KINDS)
@pytest.mark.parametrize("last_k", [1, 3])
def test_roles_alternate_every_turn(history: str, last_k: int) -> None:
    env = envgym.make(FL)
    obs, info = env.reset(seed=1)
    conv = Conversation(PromptConfig(history=history, last_k=last_k), FL, obs, info)
    replies = [GOOD_LEFT, BAD, INVALID, "   ", GOOD_RIGHT, "<action>left", "", GOOD_RIGHT] * 2
    lengths = []
    for reply in replies:
        messages = conv.messages()
        assert_alternates(messages)
        lengths.append(len(messages))
        parsed = conv.parse(reply)
        obs, _, terminated, truncated, info = env.step(parsed.action)
        assert not (terminated or truncated)
        conv.record(reply, parsed, obs, info)
    assert_alternates(conv.messages())
    lengths.append(len(conv.messages()))
    kept = {"full": len(replies), "last_k": last_k, "summary": last_k, "none": 0}[history]
    # Grows by one turn each turn until the policy's window is full, then stays there.
    assert lengths == [2 + 2 * min(turn, kept) for turn in range(len(replies) + 1)]


def test_format_feedback_exactly_after_bad_reply() -> None:
    conv, _ = play(PromptConfig(), [GOOD_LEFT, BAD, GOOD_RIGHT, "<action>left", GOOD_RIGHT])
    users = [m["content"] for m in conv.messages() if m["role"] == "user"]
    assert [u.startswith(FEEDBACK) for u in users] == [False, False, True, False, True, False]
    assert sum("no complete" in u for u in users) == 2
    quiet, _ = play(PromptConfig(format_feedback=False), [BAD, BAD])
    assert not any("no complete" in m["content"] for m in quiet.messages())


def test_parse_rules() -> None:
    env = envgym.make(FL)
    obs, info = env.reset(seed=1)
    conv = Conversation(PromptConfig(), FL, obs, info)
    cases = {
        "<action>up</action> no wait <action>left</action>": ParsedReply("left", True),
        "< Action >  move \n  left  </ACTION >": ParsedReply("move left", True),
        "<action>'down'</action>": ParsedReply("down", True),
        "<action></action>": ParsedReply("", True),
        "<action>up</action> then <action>le": ParsedReply("up", True),  # the last complete block
        "thinking... <action>left": ParsedReply("left", False),  # cut off: forgiving, but flagged
        "<action>up</move>": ParsedReply("up</move>", False),
        "  Left.  ": ParsedReply("Left.", False),
        " \n\t ": ParsedReply("", False),
        "": ParsedReply("", False),
    }
    assert {reply: conv.parse(reply) for reply in cases} == cases


def test_custom_tags() -> None:
    env = envgym.make(FL)
    obs, info = env.reset(seed=1)
    move = Conversation(PromptConfig(action_tags=("move",)), FL, obs, info)
    assert move.parse("<move>left</move>") == ParsedReply("left", True)
    assert move.parse("<action>left</action>") == ParsedReply("<action>left</action>", False)
    assert "<move>...</move>" in move.system and "<action>" not in move.system.split("\n")[-1]
    parsed = move.parse("left")
    move.record("left", parsed, obs, info)
    assert move.messages()[-1]["content"].startswith(
        "Your last reply had no complete <move>...</move> block. Give exactly one action inside <move>...</move>."
    )
    both = Conversation(PromptConfig(action_tags=("action", "move")), FL, obs, info)
    assert both.parse("<move>up</move> <action>down</action> <MOVE>left</MOVE>") == ParsedReply("left", True)
    assert "<action>...</action> (or <move>...</move>)" in both.system


def test_no_tags_whole_reply_is_the_action() -> None:
    conv, obs = play(PromptConfig(action_tags=()), ["  left ", "<action>right</action>"])
    assert conv.parse("  go   left \n") == ParsedReply("go left", True)
    assert conv.parse("<action>up</action>") == ParsedReply("<action>up</action>", True)
    assert conv.parse("  ") == ParsedReply("", True)  # no format to break: the env reports the empty action
    assert "Reply with the action only, and nothing else." in conv.system
    assert not any("no complete" in m["content"] for m in conv.messages())
    assert obs[1].startswith("You moved left")


def test_token_budget_arithmetic() -> None:
    env = envgym.make(FL)
    obs, info = env.reset(seed=1)
    conv = Conversation(PromptConfig(token_budget=100), FL, obs, info)
    assert (conv.tokens_used, conv.remaining_tokens, conv.budget_exhausted) == (0, 100, False)
    for tokens, remaining in [(30, 70), (50, 20), (0, 20)]:
        conv.record(GOOD_LEFT, conv.parse(GOOD_LEFT), obs, info, completion_tokens=tokens)
        assert conv.remaining_tokens == remaining and not conv.budget_exhausted
    conv.record("x" * 81, conv.parse("x"), obs, info)  # no count given: ceil(81 / 4) = 21 estimated
    assert (conv.tokens_used, conv.estimated_tokens, conv.remaining_tokens, conv.budget_exhausted) == (101, 21, 0, True)
    conv.record("", conv.parse(""), obs, info)  # even an empty reply costs its end token
    assert (conv.tokens_used, conv.estimated_tokens, conv.turns) == (102, 22, 5)
    with pytest.raises(ConfigError, match="completion_tokens must be an integer >= 0 or None, got -1"):
        conv.record("a", conv.parse("a"), obs, info, completion_tokens=-1)
    unlimited = Conversation(PromptConfig(max_turns=2), FL, obs, info)
    unlimited.record("a", unlimited.parse("a"), obs, info, completion_tokens=10**9)
    assert (unlimited.remaining_tokens, unlimited.budget_exhausted, unlimited.turns_exhausted) == (None, False, False)
    unlimited.record("a", unlimited.parse("a"), obs, info)
    assert unlimited.turns_exhausted


def test_system_prompt_has_env_summary_and_goal() -> None:
    env = envgym.make(FL)
    obs, info = env.reset(seed=1)
    cls = envgym.registration.spec(FL).load()
    first_line = cls.__doc__.strip().splitlines()[0]
    assert env_description(FL) == ("FrozenLake", first_line)
    conv = Conversation(PromptConfig(), FL, obs, info)
    assert first_line in conv.system and first_line.startswith("FrozenLake: ")
    assert info["task"]["goal"] in conv.system
    assert conv.system.endswith("Think briefly, then give exactly one action as <action>...</action>.")
    assert conv.messages()[0] == {"role": "system", "content": conv.system}
    custom = Conversation(PromptConfig(system_prompt="{env_id} | {env_name} | {goal} {{literal}}"), FL, obs, info)
    assert custom.system == f"{FL} | FrozenLake | {info['task']['goal']} {{literal}}"


def test_empty_system_prompt_sends_no_system_message() -> None:
    conv, obs = play(PromptConfig(system_prompt="", history="last_k", last_k=1), [GOOD_LEFT, GOOD_RIGHT])
    assert conv.system == ""
    assert conv.messages() == (user(obs[1] + VALID), assistant(GOOD_RIGHT), user(obs[2] + VALID))
    only_goal = Conversation(PromptConfig(system_prompt="{goal}"), FL, "o", {})  # renders empty too
    assert only_goal.messages() == (user("o"),)


def test_lines_with_empty_placeholders_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    no_goal = Conversation(PromptConfig(), FL, "obs", {"task": {"id": "t"}})
    assert "Your goal" not in no_goal.system
    assert len(no_goal.system.splitlines()) == len(DEFAULT_SYSTEM_PROMPT.splitlines()) - 1
    with caplog.at_level(logging.WARNING, logger="envgym.rollout.prompting"):
        unknown = Conversation(PromptConfig(), "nowhere/Made-Up-v3", "obs", {})
    assert env_description("nowhere/Made-Up-v3") == ("Made-Up", "")
    assert "About the environment" not in unknown.system and "Made-Up" in unknown.system
    assert "no environment summary for 'nowhere/Made-Up-v3'" in caplog.text
    assert unknown.messages()[-1] == user("obs")  # no admissible list in info: none shown


def test_admissible_list_only_when_short() -> None:
    info = {"admissible_actions": ["a", "b", "c"]}
    assert Conversation(PromptConfig(), FL, "o", info).messages()[-1]["content"] == "o\n\nValid actions: a, b, c"
    assert Conversation(PromptConfig(max_admissible=3), FL, "o", info).messages()[-1]["content"].endswith("a, b, c")
    assert Conversation(PromptConfig(max_admissible=2), FL, "o", info).messages()[-1]["content"] == "o"
    assert Conversation(PromptConfig(show_admissible=False), FL, "o", info).messages()[-1]["content"] == "o"


def test_goal_reminder_ends_every_user_message() -> None:
    info = {"task": {"goal": "reach the gift"}, "admissible_actions": ["a", "b"]}
    config = PromptConfig(goal_reminder=True, history="full", action_tags=())
    chat = Conversation(config, FL, "o1", info)
    assert chat.messages()[-1]["content"] == "o1\n\nValid actions: a, b\n\nYour goal: reach the gift"
    # later infos may lack the task: the goal stays
    chat.record("a", chat.parse("a"), "o2", {"admissible_actions": ["c"]})
    assert [m["content"] for m in chat.messages() if m["role"] == "user"] == [
        "o1\n\nValid actions: a, b\n\nYour goal: reach the gift",
        "o2\n\nValid actions: c\n\nYour goal: reach the gift",
    ]
    assert Conversation(config, FL, "o", {}).messages()[-1]["content"] == "o"  # no goal, no reminder
    assert Conversation(PromptConfig(), FL, "o", info).messages()[-1]["content"] == "o\n\nValid actions: a, b"
    with pytest.raises(ConfigError, match="goal_reminder must be true or false"):
        PromptConfig(goal_reminder="yes")  # type: ignore[arg-type]


UNKNOWN_GAOL = r"unknown placeholder '\{gaol\}'; known placeholders: \{env_name\}, .*Did you mean 'goal'\?"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"history": "last-k"}, "history must be one of .* got 'last-k'. Did you mean 'last_k'"),
        ({"history": "summery"}, "Did you mean 'summary'"),
        ({"system_prompt": "Goal: {gaol}"}, UNKNOWN_GAOL),
        ({"system_prompt": "{}"}, r"unknown placeholder '\{\}'"),
        ({"system_prompt": "a { b"}, "not a valid template"),
        ({"system_prompt": "{goal:d}"}, "does not format"),
        ({"action_tags": ("<action>",)}, "simple name .* got '<action>'"),
        ({"action_tags": ("my tag",)}, "got 'my tag'"),
        ({"action_tags": "action"}, r"got the string 'action'; write \('action',\)"),
        ({"action_tags": ("act", "ACT")}, "must not repeat"),
        ({"last_k": 0}, "last_k must be an integer >= 1, got 0"),
        ({"max_admissible": True}, "max_admissible must be an integer >= 1, got True"),
        ({"max_turns": 0}, "max_turns must be an integer >= 1 or None, got 0"),
        ({"token_budget": 2.5}, "token_budget must be an integer >= 1 or None, got 2.5"),
        ({"format_feedback": "yes"}, "format_feedback must be true or false"),
        ({"history": "summary", "summarizer": "tests.summaries"}, "'package.module:function'"),
    ],
)
def test_validation_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PromptConfig(**kwargs)


def test_summarizer_hook_errors() -> None:
    with pytest.warns(UserWarning, match="only used with history='summary'"):
        PromptConfig(summarizer=f"{__name__}:summarise_hook")
    with pytest.raises(ConfigError, match="cannot import module 'no_such_module_xyz'"):
        PromptConfig(history="summary", summarizer="no_such_module_xyz:f").load_summarizer()
    with pytest.raises(ConfigError, match="has no attribute 'summarise_hok'.*Did you mean 'summarise_hook'"):
        PromptConfig(history="summary", summarizer=f"{__name__}:summarise_hok").load_summarizer()
    with pytest.raises(ConfigError, match="must name a function"):
        PromptConfig(history="summary", summarizer=f"{__name__}:FL").load_summarizer()


def test_dict_round_trip() -> None:
    config = PromptConfig(
        system_prompt="{env_name}: {action_format}", history="summary", last_k=2,
        summarizer=f"{__name__}:summarise_hook", action_tags=("move", "action"), format_feedback=False,
        show_admissible=False, max_admissible=5, max_turns=9, token_budget=512,
    )  # fmt: skip
    data = json.loads(json.dumps(config.to_dict()))
    assert data["action_tags"] == ["move", "action"]
    assert PromptConfig.from_dict(data) == config
    assert PromptConfig.from_dict({}) == PromptConfig()
    assert PromptConfig.from_dict(PromptConfig().to_dict()) == PromptConfig()
    assert hash(PromptConfig.from_dict({"action_tags": ["x"]})) == hash(PromptConfig(action_tags=("x",)))
    with pytest.raises(ConfigError, match="unknown prompt config key 'histroy'.*Did you mean 'history'"):
        PromptConfig.from_dict({"histroy": "full"})
    with pytest.raises(ConfigError, match="must be a mapping"):
        PromptConfig.from_dict(["history"])  # type: ignore[arg-type]


def test_field_help_is_documented() -> None:
    for f in PromptConfig.__dataclass_fields__.values():
        assert len(f.metadata["help"]) > 20, f.name
        assert f"        {f.name}: {f.metadata['help']}" in PromptConfig.__doc__


def test_messages_cached_until_record() -> None:
    env = envgym.make(FL)
    obs, info = env.reset(seed=1)
    conv = Conversation(PromptConfig(history="last_k", last_k=1), FL, obs, info)
    first = conv.messages()
    assert conv.messages() is first
    conv.record(GOOD_LEFT, conv.parse(GOOD_LEFT), obs, info)
    second = conv.messages()
    assert second is not first and second[1] is first[1]  # the same dicts, not copies
    assert len(second) == 4
