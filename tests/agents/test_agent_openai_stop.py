"""OpenAIAgent and stop strings, against a real HTTP server on 127.0.0.1.

``StopServer`` is the tests' fake OpenAI-compatible server (``openai_server.FakeOpenAIServer``)
taught to honour ``stop`` the way OpenAI and vLLM do: the reply is cut before the first stop
string, which is dropped, and ``finish_reason`` is ``"stop"`` (vLLM also names the matched
string in ``stop_reason``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from envgym.agents.openai_api import OpenAIAgent
from openai_server import FakeOpenAIServer

from envgym.errors import ConfigError
from envgym.rollout import AgentInput, PromptConfig, RunConfig, Runner
from envgym.rollout.prompting import Conversation


class StopServer(FakeOpenAIServer):
    """The fake server with ``stop`` support; ``content`` (when set) replaces the usual
    ``<action>X</action>`` reply, and ``stop_reason`` adds vLLM's field."""

    content: str | None = None
    stop_reason = False  # name the matched stop string in choices[0].stop_reason (vLLM)
    null_stop_reason = False  # send stop_reason: null (vLLM, when the model itself ended the reply)

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = super()._reply(body)
        choice = reply["choices"][0]
        if self.content is not None:
            choice["message"]["content"] = self.content
        text = choice["message"]["content"] or ""
        if self.null_stop_reason:
            choice["stop_reason"] = None
        hits = [(text.find(s), s) for s in body.get("stop") or () if s in text]
        if hits:
            at, matched = min(hits)
            choice["message"]["content"] = text[:at]
            choice["finish_reason"] = "stop"
            if self.stop_reason:
                choice["stop_reason"] = matched
        return reply


@pytest.fixture
def server() -> Iterator[StopServer]:
    with StopServer(action="up") as running:
        yield running


def _item(stop: tuple[str, ...] = ("</action>",)) -> AgentInput:
    return AgentInput("e0", "envgym/FrozenLake-v0", "obs", {}, 0, ({"role": "user", "content": "go"},), stop=stop)


def _agent(server: StopServer) -> OpenAIAgent:
    return OpenAIAgent("fake-model", server.url, backoff_s=0.01, timeout_s=5.0)


def test_stop_goes_out_and_the_closing_tag_comes_back(server: StopServer) -> None:
    agent = _agent(server)
    try:
        out = agent.act([_item()])[0]
        assert server.requests[-1]["stop"] == ["</action>"]
        # The server dropped "</action>"; the agent put it back so the action parses.
        assert out.text == "<action>up</action>" and out.finish_reason == "stop"
        assert out.extra["stop_appended"] == "</action>"

        out = agent.act([_item(stop=())])[0]
        assert "stop" not in server.requests[-1] and out.text == "<action>up</action>"
        assert "stop_appended" not in out.extra

        # Text after the action is cut by the server; the action block is complete again.
        server.content = "Thinking. <action>left</action> and then <action>down</action>"
        out = agent.act([_item()])[0]
        assert out.text == "Thinking. <action>left</action>"
    finally:
        agent.close()


def test_only_an_unclosed_tag_named_by_a_stop_string_is_closed(server: StopServer) -> None:
    agent = _agent(server)
    try:
        cases = [
            # (server text before stopping, stop strings, expected text)
            ("no tags at all</action>", ("</action>",), "no tags at all"),
            ("<action>up</action> done. END", ("END",), "<action>up</action> done. "),
            # two tags open, no stop_reason: the one opened last is what the reply stopped in
            ("<answer>7 <action>up", ("</answer>", "</action>"), "<answer>7 <action>up</action>"),
            ("<Action>up", ("</Action>",), "<Action>up</Action>"),
            # a closing tag in another case does not stop the server; the later open block is closed
            ("<action>up</ACTION> <action>down", ("</action>",), "<action>up</ACTION> <action>down</action>"),
        ]
        for content, stop, expected in cases:
            server.content = content if content.endswith(stop) else content + stop[0]
            out = agent.act([_item(stop)])[0]
            assert out.text == expected, content
        # A reply cut by the token limit is not a stop: nothing is appended.
        server.content = "<action>upupupupupupup"
        out = agent.act([AgentInput("e", "x", "o", {}, 0, (), max_new_tokens=5, stop=("</action>",))])[0]
        assert out.finish_reason == "length" and "stop_appended" not in out.extra
    finally:
        agent.close()


def test_vllm_stop_reason_decides_which_tag_closes(server: StopServer) -> None:
    server.stop_reason = True
    agent = _agent(server)
    try:
        # Both tags are open; the server says it stopped at </think>, which closes the one it names.
        server.content = "<action>up <think>hmm</think>"
        out = agent.act([_item(("</action>", "</think>"))])[0]
        assert out.text == "<action>up <think>hmm</think>"
        server.content = "<think>plan <action>up</action>"
        out = agent.act([_item(("</think>", "</action>"))])[0]
        assert out.text == "<think>plan <action>up</action>"
        # The server matched a stop string that closes nothing open: nothing is appended.
        server.content = "<action>up STOP"
        out = agent.act([_item(("</action>", "STOP"))])[0]
        assert out.text == "<action>up " and "stop_appended" not in out.extra
        # stop_reason null: the model ended the reply itself (end-of-text), leaving its tag open;
        # the reply is passed on as written (no complete action block: a format error).
        server.content = "<action>up"
        server.stop_reason = False
        server.null_stop_reason = True
        out = agent.act([_item()])[0]
        assert (out.text, out.finish_reason) == ("<action>up", "stop") and "stop_appended" not in out.extra
    finally:
        agent.close()


def test_a_bad_stop_value_is_refused(server: StopServer) -> None:
    agent = _agent(server)
    try:
        with pytest.raises(ConfigError, match="AgentInput.stop must be a tuple of strings"):
            agent.build_request(_item(stop="</action>"))  # type: ignore[arg-type]
    finally:
        agent.close()


def test_runner_episodes_parse_their_actions_with_stop(server: StopServer) -> None:
    """Through the harness: the server stops at </action>, the agent restores it, the reply parses."""
    server.content = "I go right. <action>right</action> (then maybe down)"
    agent = _agent(server)
    config = RunConfig(env_id="envgym/FrozenLake-v0", episodes=2, seed=1, max_turns=2)
    try:
        result = Runner(config, agent).run()
    finally:
        agent.close()
    turns = [t for traj in result.trajectories for t in traj.turns]
    assert turns and all(t.completion == "I go right. <action>right</action>" for t in turns)
    assert all(t.format_ok and t.action == "right" for t in turns)
    assert all(r["stop"] == ["</action>"] for r in server.requests)
    # What a conversation would send as history is the restored reply.
    conv = Conversation(PromptConfig(), "envgym/FrozenLake-v0", "obs", {})
    assert conv.parse(turns[0].completion).format_ok
