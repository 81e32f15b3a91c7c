"""Native tool calls of the agents (issue 35, item 2) on a toy tool env (``tool_toy_envs``).

``openai``: against a real HTTP server on 127.0.0.1 (``openai_server.FakeOpenAIServer``, fake
model, tool-call mode): the request carries the env's tools, the reply's ``tool_calls`` become the
env's action, the history goes back as tool messages, and a server without tools falls back to
text. ``hf``: the tiny random model (``envgym.models.tiny_causal_lm``) renders the tools through
TRL's Qwen3 template (SmolLM2's own has none); replies are decoded among two ``<tool_call>``
blocks (``choices="admissible"``), so the random model still calls a tool, and the records are
token-exact. The trainer trains on such episodes with the tool results masked out of the loss.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tool_toy_envs  # registers envgymtest/ToolAdd-v0 and ToolAddParallel-v0
from envgym.agents.openai_api import OpenAIAgent
from openai_server import FakeOpenAIServer

from envgym.rollout.prompting import Conversation, PromptConfig
from envgym.rollout.records import Trajectory, Turn
from envgym.rollout.runner import RunConfig, Runner
from envgym.rollout.toolcalls import find_tool_calls, render_tool_calls, tool_action, tool_messages

ENV = "envgymtest/ToolAdd-v0"
PARALLEL_ENV = "envgymtest/ToolAddParallel-v0"


def _question(messages: list[dict[str, Any]]) -> tuple[int, int]:
    text = next(m["content"] for m in messages if m["role"] == "user")
    a, b = text.split("What is ")[1].split("?")[0].split(" + ")
    return int(a), int(b)


def add_then_answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fake model: ``add`` the question's numbers, then ``answer`` what the tool said."""
    if messages[-1]["role"] == "tool":
        return [{"name": "answer", "arguments": {"value": int(messages[-1]["content"].split(": ")[-1])}}]
    a, b = _question(messages)
    return [{"name": "add", "arguments": {"a": a, "b": b}}]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


@pytest.fixture
def fake(server: FakeOpenAIServer) -> FakeOpenAIServer:
    server.reset_stats()
    server.tool_calls = add_then_answer
    server.reject_tools = False
    server.action = "noop"
    return server


def run(agent: Any, env_id: str = ENV, **changes: Any) -> list[Trajectory]:
    values: dict[str, Any] = {"env_id": env_id, "episodes": 2, "seed": 3, "max_turns": 3}
    values.update(changes)
    return Runner(RunConfig(**values), agent).run().trajectories


# ------------------------------------------------------------------------------- the dialect pieces
def test_tool_call_blocks_parse_and_render_back() -> None:
    text = (
        'thinking <tool_call>\n{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}\n</tool_call>'
        '<tool_call>{"name": "add", "arguments": {"a": 3}, "id": "c7"}</tool_call><tool_call>not json</tool_call>'
        '<tool_call>{"arguments": {}}</tool_call>'
    )
    calls, broken = find_tool_calls(text)
    assert calls == [
        {"id": None, "name": "add", "arguments": {"a": 1, "b": 2}},  # OpenAI's JSON-string arguments decoded
        {"id": "c7", "name": "add", "arguments": {"a": 3}},
    ]
    assert broken == ["not json", '{"arguments": {}}']
    assert find_tool_calls(render_tool_calls(calls))[0] == calls
    assert tool_action(calls, parallel=False) == ('{"name": "add", "arguments": {"a": 1, "b": 2}}', 1)
    action, dropped = tool_action(calls, parallel=True)
    assert (
        json.loads(action)
        == [
            {"name": "add", "arguments": {"a": 1, "b": 2}},
            {"name": "add", "arguments": {"a": 3}},
        ]
        and dropped == 0
    )


def test_conversation_reads_tool_calls_only_for_envs_with_tools() -> None:
    config = PromptConfig()
    reply = 'I will add.\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 5}}\n</tool_call>'
    tools = {"tools": tool_toy_envs.TOOLS}
    parsed = Conversation(config, ENV, "What is 2 + 5?", tools).parse(reply)
    assert parsed.action == '{"name": "add", "arguments": {"a": 2, "b": 5}}' and parsed.format_ok
    assert parsed.tool_calls == ({"id": "call_0_0", "name": "add", "arguments": {"a": 2, "b": 5}},)
    # An env without tools: the markup is no action block (the old behaviour, unchanged).
    plain = Conversation(config, ENV, "What is 2 + 5?", {}).parse(reply)
    assert plain.tool_calls == () and not plain.format_ok
    # <action> blocks still work in a tool env; a broken block is sent as written (the env's error).
    conv = Conversation(config, ENV, "q", tools)
    assert conv.parse('<action>{"name": "answer", "arguments": {"value": 7}}</action>').action == (
        '{"name": "answer", "arguments": {"value": 7}}'
    )
    assert conv.parse("<tool_call>{oops</tool_call>").action == "{oops"


def test_history_becomes_tool_messages() -> None:
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}, "id": "call_x"}\n</tool_call>'
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "What is 1 + 2?"},
        {"role": "assistant", "content": "Sure.\n" + call},
        {"role": "user", "content": "Result of add: 3"},
        {"role": "assistant", "content": "no call"},
        {"role": "user", "content": "next"},
    ]
    structured = tool_messages(messages)
    assert structured[2] == {
        "role": "assistant",
        "content": "Sure.",
        "tool_calls": [
            {"id": "call_x", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
        ],
    }
    assert structured[3] == {"role": "tool", "tool_call_id": "call_x", "content": "Result of add: 3"}
    assert structured[4:] == messages[4:]  # a turn without a call stays a plain turn
    kept = tool_messages(messages, structured_calls=False)
    assert kept[2] == messages[2] and kept[3]["role"] == "tool"  # a local model's reply stays word for word


def test_old_records_load_and_new_fields_round_trip() -> None:
    old = {"index": 0, "observation": "o", "action": "a", "reward": 0.0, "reward_components": {}, "action_valid": True}
    turn = Turn.from_dict(old)
    assert turn.tool_calls is None and turn.tool_results is None
    assert "tool_calls" not in turn.to_dict() and "tool_results" not in turn.to_dict()  # old records unchanged
    turn.tool_calls = [{"id": "c", "name": "add", "arguments": {"a": 1}}]
    turn.tool_results = [{"tool_call_id": "c", "name": "add", "content": "1", "is_error": False}]
    again = Turn.from_dict(json.loads(json.dumps(turn.to_dict())))
    assert again.tool_calls == turn.tool_calls and again.tool_results == turn.tool_results


# ------------------------------------------------------------------------------------------ openai
def test_openai_sends_tools_and_plays_through_tool_calls(fake: FakeOpenAIServer) -> None:
    agent = OpenAIAgent("fake-model", fake.url, seed=0)
    try:
        trajectories = run(agent)
        fake.reset_stats()
        again = run(agent)  # the server's request counter (and so its call ids) moved on
    finally:
        agent.close()
    assert [t.comparable() for t in again] == [t.comparable() for t in trajectories]  # reruns record the same
    assert agent.tool_mode == "native"
    assert [t.success for t in trajectories] == [True, True]
    assert all(r["tools"] == tool_toy_envs.TOOLS and r["tool_choice"] == "auto" for r in fake.requests)
    assert all(r["parallel_tool_calls"] is False for r in fake.requests)
    # The second request of an episode carries the first call and its result as tool messages.
    second = next(r for r in fake.requests if len(r["messages"]) > 2)
    assistant, tool = second["messages"][-2:]
    (call,) = assistant["tool_calls"]
    assert assistant["role"] == "assistant" and assistant["content"] is None and call["function"]["name"] == "add"
    a, b = _question(second["messages"])
    assert json.loads(call["function"]["arguments"]) == {"a": a, "b": b}
    assert tool == {"role": "tool", "tool_call_id": call["id"], "content": f"Result of add: {a + b}"}
    # Records: the calls and results structured, the server's ids kept, the action in the dialect.
    first, last = trajectories[0].turns
    a, b = (first.tool_calls[0]["arguments"][k] for k in "ab")
    assert json.loads(first.action) == {"name": "add", "arguments": {"a": a, "b": b}}
    assert (
        call["id"] == "call_0_0" and first.tool_calls[0]["id"] == "call_0_0" and last.tool_calls[0]["id"] == "call_1_0"
    )
    assert first.extra["tool_mode"] == "native"
    assert first.tool_results == [
        {
            "tool_call_id": first.tool_calls[0]["id"],
            "name": "add",
            "content": f"Result of add: {a + b}",
            "is_error": False,
        }
    ]
    assert first.extra["tool_calls"] == first.tool_calls
    assert last.tool_calls[0]["name"] == "answer" and last.tool_results[0]["content"] == "Right."
    assert (
        Trajectory.from_dict(json.loads(json.dumps(trajectories[0].to_dict()))).turns[0].tool_calls == first.tool_calls
    )


def _two_adds(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    a, b = _question(messages)
    return [{"name": "add", "arguments": {"a": a, "b": b}}, {"name": "add", "arguments": {"a": b, "b": b}}]


def test_openai_several_calls_run_together_only_where_the_env_allows(fake: FakeOpenAIServer) -> None:
    fake.tool_calls = _two_adds
    agent = OpenAIAgent("fake-model", fake.url, seed=0)
    try:
        (together,) = run(agent, PARALLEL_ENV, episodes=1, max_turns=1)
        (alone,) = run(agent, ENV, episodes=1, max_turns=1)
    finally:
        agent.close()
    turn = together.turns[0]
    a, b = _question(turn.messages)
    assert json.loads(turn.action) == [
        {"name": "add", "arguments": {"a": a, "b": b}},
        {"name": "add", "arguments": {"a": b, "b": b}},
    ]
    assert turn.action_valid and [r["content"] for r in turn.tool_results] == [
        f"Result of add: {a + b}\nResult of add: {2 * b}",
        "(the result of this call is in the first tool message of this turn)",
    ]
    first = alone.turns[0]
    assert json.loads(first.action)["name"] == "add" and len(first.tool_calls) == 1
    assert first.extra["tool_calls_dropped"] == 1 and first.action_valid
    # The next prompt tells the model so, in the tool result.
    agent = OpenAIAgent("fake-model", fake.url, seed=0)
    try:
        run(agent, ENV, episodes=1, max_turns=2)
    finally:
        agent.close()
    tool = fake.requests[-1]["messages"][-2:]
    assert [m["role"] for m in tool] == ["tool", "tool"]
    assert tool[0]["content"].startswith("Only one tool call runs per turn: the first of 2 ran.\n\nResult of add: ")


def test_openai_falls_back_to_text_on_a_server_without_tools(
    fake: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake.reject_tools = True

    def text_reply(messages: list[dict[str, Any]]) -> str:
        a, b = _question(messages)
        return json.dumps({"name": "answer", "arguments": {"value": a + b}})

    fake.action = text_reply
    agent = OpenAIAgent("fake-model", fake.url, seed=0, max_retries=0)
    try:
        trajectories = run(agent)
    finally:
        agent.close()
    assert agent.tool_mode == "text"
    assert [t.success for t in trajectories] == [True, True]
    # The two first turns went out together with tools; each was asked again without, and so was
    # nothing else: the server's answer is taken once for the whole run (one warning).
    assert ["tools" in r for r in fake.requests].count(True) == 2 and len(fake.requests) == 4
    assert all("tool_calls" not in m for r in fake.requests for m in r["messages"])
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert "refused a request with tools" in caplog.records[0].getMessage() and len(caplog.records) == 1
    assert all(t.turns[0].extra["tool_mode"] == "text" and t.turns[0].tool_calls is None for t in trajectories)


def test_openai_reply_without_tool_calls_is_read_as_text(fake: FakeOpenAIServer) -> None:
    fake.tool_calls = lambda messages, tools: None  # accepts tools=, answers in text

    def text_reply(messages: list[dict[str, Any]]) -> str:
        a, b = _question(messages)
        return json.dumps({"name": "answer", "arguments": {"value": a + b}})

    fake.action = text_reply
    agent = OpenAIAgent("fake-model", fake.url, seed=0)
    try:
        (trajectory,) = run(agent, episodes=1)
    finally:
        agent.close()
    assert trajectory.success and trajectory.turns[0].tool_calls is None
    assert "tools" in fake.requests[0] and agent.tool_mode == "native"


# ---------------------------------------------------------------------------------------------- hf
HF_PROMPT = PromptConfig(system_prompt="", action_tags=(), show_admissible=False, format_feedback=False)


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("trl")
    from envgym.models import tiny_causal_lm

    return tiny_causal_lm(seed=0)


@pytest.fixture(scope="module")
def hf_run(tiny: tuple[Any, Any]) -> list[Trajectory]:
    from envgym.agents.hf import HFAgent

    model, tokenizer = tiny
    agent = HFAgent(model_obj=model, tokenizer=tokenizer, choices="admissible", max_new_tokens=40, seed=0)
    return run(agent, env_kwargs={"choices": True}, prompt=HF_PROMPT, max_turns=2, episodes=2, group_size=2)


def test_hf_renders_tools_with_a_tool_template(tiny: tuple[Any, Any]) -> None:
    from trl.chat_template_utils import qwen3_chat_template

    from envgym.rollout.toolcalls import renders_tools, tool_chat_template

    _, tokenizer = tiny
    assert tokenizer.chat_template and not renders_tools(tokenizer)  # SmolLM2's template ignores tools
    assert tool_chat_template(tokenizer) == qwen3_chat_template
    assert renders_tools(tokenizer, qwen3_chat_template)


def test_hf_tool_calls_parse_into_actions_and_records_are_token_exact(
    tiny: tuple[Any, Any], hf_run: list[Trajectory]
) -> None:
    from envgym.rollout.agent import AgentInput
    from envgym.rollout.lm import chat_prompt_text

    _, tokenizer = tiny
    for trajectory in hf_run:
        a, b = (int(x) for x in trajectory.task["id"].split("-")[1:])
        for turn in trajectory.turns:
            assert turn.completion.startswith("<tool_call>\n{") and turn.completion.endswith("</tool_call>")
            # The completion ids are what the model produced; they spell the recorded reply.
            assert tokenizer.decode(turn.token_ids, skip_special_tokens=True) == turn.completion
            (call,) = turn.tool_calls
            assert call["name"] == "add" and json.loads(turn.action) == {"name": "add", "arguments": call["arguments"]}
            assert call["arguments"] in ({"a": a, "b": b}, {"a": b, "b": a + 1})
            assert (
                turn.action_valid
                and turn.tool_results[0]["content"] == f"Result of add: {sum(call['arguments'].values())}"
            )
            # The prompt ids are the recorded messages and the env's tools through the tool template.
            info = {"tools": tool_toy_envs.TOOLS}
            item = AgentInput("e", ENV, turn.observation, info, turn.index, tuple(turn.messages))
            text = chat_prompt_text(tokenizer, item)
            assert "<tools>" in text and '"name": "add"' in text
            assert turn.prompt_token_ids == tokenizer(text, add_special_tokens=False)["input_ids"]
        second = tokenizer.decode(trajectory.turns[1].prompt_token_ids)
        first_result = trajectory.turns[0].tool_results[0]["content"]
        assert f"<|im_start|>assistant\n{trajectory.turns[0].completion}<|im_end|>" in second
        assert f"<tool_response>\n{first_result}\n</tool_response>" in second


# ----------------------------------------------------------------------------------------- trainer
def test_trainer_masks_tool_results_and_updates(
    tiny: tuple[Any, Any], hf_run: list[Trajectory], tmp_path: Path
) -> None:
    import torch

    from envgym.trainer import TrainConfig, Trainer
    from envgym.trainer.batch import build_batch, collect

    model, tokenizer = tiny
    collected = collect(hf_run)
    batch = build_batch(collected.samples, [1.0] * len(collected.samples), pad_id=tokenizer.pad_token_id or 0)
    response = tokenizer("<tool_response>", add_special_tokens=False)["input_ids"]
    checked = 0
    for row, sample in enumerate(batch.rows):
        ids = batch.input_ids[row].tolist()
        mask = batch.loss_mask[row]
        prompt = len(sample.prompt_ids)
        assert mask[:prompt].sum() == 0 and mask[prompt:].sum() > 0  # tool results are prompt tokens
        if sample.turn == 1:  # the second turn's prompt holds the first call's result
            start = next(i for i in range(prompt) if ids[i : i + len(response)] == response)
            result = tokenizer(trajectory_result(collected, sample), add_special_tokens=False)["input_ids"]
            assert ids[start + len(response) + 1 : start + len(response) + 1 + len(result)] == result
            assert mask[start : start + len(response) + 1 + len(result)].sum() == 0
            checked += 1
    assert checked == 2

    config = TrainConfig(
        env_id=ENV,
        env_kwargs={"choices": True},
        model="tiny",
        device="cpu",
        algo="grpo",
        group_size=4,
        groups_per_update=2,
        temperature=4.0,  # the random tiny model prefers one call by far; hotter, a group's replies differ
        updates=1,
        lr=3e-2,
        ppo_epochs=1,
        max_new_tokens=40,
        max_turns=2,
        choices="admissible",
        checkpoint_every=0,
        tensorboard=False,
        prompt=HF_PROMPT,
        out=str(tmp_path / "run"),
    )
    trainer = Trainer(config, model=copy.deepcopy(model), tokenizer=tokenizer)
    trainer._check_envs()
    trainer._open_folder()
    trainer._build()
    before = {name: p.detach().clone() for name, p in trainer.policy.named_trainable_parameters().items()}
    row = trainer._update(1)
    after = trainer.policy.named_trainable_parameters()
    moved = [name for name, value in before.items() if not torch.equal(value, after[name].detach())]
    assert row["tokens"] > 0 and moved, row


def trajectory_result(collected: Any, sample: Any) -> str:
    """The tool result the turn before ``sample`` got (what its prompt shows)."""
    return collected.trajectories[sample.episode].turns[sample.turn - 1].tool_results[0]["content"]
