"""OpenAIAgent against a real HTTP server on 127.0.0.1 (``openai_server.FakeOpenAIServer``).

The model is fake (no model can be downloaded here); the HTTP, concurrency, retries and parsing
are real.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
import time

import pytest
from envgym.agents.openai_api import AgentRequestError, OpenAIAgent, parse_openai_spec
from openai_server import FakeOpenAIServer, openai_server  # noqa: F401 - fixture

import envgym
from envgym.core import extract_action
from envgym.errors import ConfigError, EnvgymError
from envgym.rollout import AgentInput


def _inputs(n: int, *, turn: int = 0, max_new_tokens: int | None = None) -> list[AgentInput]:
    return [
        AgentInput(
            episode_id=f"ep{i}",
            env_id="envgym/FrozenLake-v0",
            observation=f"obs {i}",
            info={},
            turn=turn,
            messages=({"role": "user", "content": f"question {i}"},),
            max_new_tokens=max_new_tokens,
        )
        for i in range(n)
    ]


@pytest.fixture
def agent_for(openai_server):  # noqa: F811 - the fixture imported above
    """Build agents against the fixture server with fast backoff; close them after the test."""
    agents = []

    def make(**kwargs):
        kwargs.setdefault("backoff_s", 0.01)
        kwargs.setdefault("timeout_s", 5.0)
        agent = OpenAIAgent("fake-model", openai_server.url, **kwargs)
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        agent.close()


# -- concurrency and order --------------------------------------------------------------------


def test_concurrency_is_capped_and_used(openai_server, agent_for):  # noqa: F811
    openai_server.action = lambda messages: messages[-1]["content"].split()[-1]
    openai_server.delay_s = 0.2
    agent = agent_for(concurrency=4)
    start = time.perf_counter()
    outputs = agent.act(_inputs(16))
    elapsed = time.perf_counter() - start
    assert openai_server.request_count == 16
    assert openai_server.max_in_flight == 4
    # 16 requests, 4 at a time, 0.2 s each: ~0.8 s. One at a time they cannot take less than 3.2 s,
    # however idle the machine: that, not a guess at a busy machine's overhead, is the upper bound.
    assert 0.75 < elapsed < 16 * 0.2
    # Replies come back in input order even though they finished in any order.
    assert [extract_action(o.text) for o in outputs] == [str(i) for i in range(16)]
    assert all(o.finish_reason == "stop" and o.extra["attempts"] == 1 for o in outputs)


def test_order_preserved_with_uneven_delays(openai_server, agent_for):  # noqa: F811
    def slow_first(messages):
        index = int(messages[-1]["content"].split()[-1])
        time.sleep(0.05 * (5 - index))  # earlier inputs answer later
        return f"a{index}"

    openai_server.action = slow_first
    outputs = agent_for(concurrency=6).act(_inputs(6))
    assert [o.text for o in outputs] == [f"<action>a{i}</action>" for i in range(6)]


def test_empty_messages_send_the_observation(openai_server, agent_for):  # noqa: F811
    item = AgentInput(episode_id="e", env_id="x", observation="the board", info={}, turn=0)
    assert agent_for().act([item])[0].text == "<action>noop</action>"
    assert openai_server.requests[0]["messages"] == [{"role": "user", "content": "the board"}]
    assert agent_for().act([]) == []


def test_works_inside_a_running_event_loop(openai_server, agent_for):  # noqa: F811
    agent = agent_for(concurrency=2)

    async def main():
        return agent.act(_inputs(3))  # blocking call from a coroutine: must not need the loop

    # The loop runs in a thread of its own: a test worker's main thread may still hold the loop of
    # Playwright's sync API (a browser an earlier test of the worker left lingering), where
    # asyncio.run refuses to start.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        outputs = pool.submit(asyncio.run, main()).result(timeout=60)
    assert [o.text for o in outputs] == ["<action>noop</action>"] * 3


def test_works_from_a_plain_thread(openai_server, agent_for):  # noqa: F811
    agent = agent_for(concurrency=2)
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("out", agent.act(_inputs(3))))
    thread.start()
    thread.join(10)
    assert [o.text for o in result["out"]] == ["<action>noop</action>"] * 3


# -- request body -----------------------------------------------------------------------------


def test_request_body_and_max_tokens(openai_server, agent_for):  # noqa: F811
    openai_server.action = "down"  # "<action>down</action>" is 21 bytes = 21 fake tokens
    agent = agent_for(max_tokens=100, temperature=0.7, top_p=0.9, extra_body={"top_k": 5})
    full = agent.act(_inputs(1))[0]
    cut = agent.act(_inputs(1, max_new_tokens=8))[0]
    loose = agent.act(_inputs(1, max_new_tokens=1000))[0]
    bodies = openai_server.requests
    assert [b["max_tokens"] for b in bodies] == [100, 8, 100]
    assert bodies[0]["model"] == "fake-model"
    assert bodies[0]["temperature"] == 0.7 and bodies[0]["top_p"] == 0.9 and bodies[0]["top_k"] == 5
    assert "seed" not in bodies[0] and "logprobs" not in bodies[0]
    assert full.text == "<action>down</action>" and full.finish_reason == "stop"
    assert full.extra["usage"] == {"prompt_tokens": len("question 0"), "completion_tokens": 21}
    assert cut.text == "<action>" and cut.finish_reason == "length"
    assert cut.extra["usage"]["completion_tokens"] == 8
    assert loose.text == full.text
    assert full.token_ids is None and full.logprobs is None and full.prompt_token_ids is None


def test_api_key_header(openai_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert OpenAIAgent("m", openai_server.url).api_key == "sk-from-env"
    assert OpenAIAgent("m", openai_server.url, api_key="sk-explicit").api_key == "sk-explicit"
    monkeypatch.delenv("OPENAI_API_KEY")
    agent = OpenAIAgent("m", openai_server.url)
    assert agent.api_key == "EMPTY"
    client, _ = agent._ensure_started()
    assert client.headers["authorization"] == "Bearer EMPTY"
    agent.close()


def test_seeds_deterministic_distinct_across_members_and_turns(openai_server, agent_for):  # noqa: F811
    def seeds(agent_seed, member, turn=0, env_seed=7):
        agent = agent_for(seed=agent_seed)
        agent.start_episode("ep0", "envgym/FrozenLake-v0", env_seed, member=member)
        agent.act(_inputs(1, turn=turn))
        return openai_server.requests[-1]["seed"]

    a = seeds(1, member=0)
    assert a == seeds(1, member=0)  # same agent seed, episode seed, member, turn: same request seed
    assert isinstance(a, int) and 0 <= a < 2**31
    distinct = {
        a,
        seeds(1, member=1),
        seeds(1, member=2),
        seeds(1, member=0, turn=1),
        seeds(2, member=0),
        seeds(1, member=0, env_seed=8),
    }
    assert len(distinct) == 6
    # Without an agent seed, no seed is sent.
    agent_for().act(_inputs(1))
    assert "seed" not in openai_server.requests[-1]


def test_logprobs_and_token_ids(openai_server, agent_for):  # noqa: F811
    openai_server.action = "up"
    out = agent_for(logprobs=True, extra_body={"return_token_ids": True}).act(_inputs(1))[0]
    body = openai_server.requests[-1]
    assert body["logprobs"] is True and body["return_token_ids"] is True
    text = "<action>up</action>"
    assert out.text == text
    assert out.token_ids == list(text.encode())
    assert out.logprobs == [-(i % 7) / 10 for i in range(len(text))]
    assert out.prompt_token_ids == list(b"question 0")
    # logprobs without token ids (OpenAI proper): logprobs filled, ids unknown.
    out = agent_for(logprobs=True).act(_inputs(1))[0]
    assert len(out.logprobs) == len(text) and out.token_ids is None


def test_null_content_is_empty_text(openai_server, agent_for):  # noqa: F811
    openai_server.action = lambda messages: None
    out = agent_for().act(_inputs(1))[0]
    assert out.text == "" and out.finish_reason == "stop"


# -- retries ----------------------------------------------------------------------------------


def test_500_twice_then_ok(openai_server, agent_for):  # noqa: F811
    openai_server.fail_next(2, status=500)
    out = agent_for(max_retries=4).act(_inputs(1))[0]
    assert out.text == "<action>noop</action>"
    assert out.extra["attempts"] == 3
    assert openai_server.request_count == 3


def test_429_retry_after_is_honoured(openai_server, agent_for):  # noqa: F811
    openai_server.fail_next(1, status=429, retry_after=0.6)
    start = time.perf_counter()
    out = agent_for(backoff_s=0.001).act(_inputs(1))[0]
    elapsed = time.perf_counter() - start
    assert out.extra["attempts"] == 2 and openai_server.request_count == 2
    assert elapsed >= 0.6  # the backoff alone would be ~1 ms


def test_400_is_not_retried(openai_server, agent_for):  # noqa: F811
    openai_server.fail_next(1, status=400)
    with pytest.raises(AgentRequestError, match="HTTP 400") as info:
        agent_for(max_retries=4).act(_inputs(1))
    assert isinstance(info.value, EnvgymError)
    assert info.value.status == 400 and "injected failure 400" in str(info.value)
    assert openai_server.request_count == 1


def test_always_500_gives_up_after_max_retries(openai_server, agent_for):  # noqa: F811
    openai_server.fail_next(100, status=503)
    with pytest.raises(AgentRequestError, match="failed after 4 attempts") as info:
        agent_for(max_retries=3).act(_inputs(1))
    assert info.value.status == 503 and info.value.attempts == 4
    assert "HTTP 503" in str(info.value)
    assert openai_server.request_count == 4


def test_timeout_is_retried(openai_server, agent_for):  # noqa: F811
    openai_server.delay_s = 0.5
    agent = agent_for(timeout_s=0.2, max_retries=1)
    with pytest.raises(AgentRequestError, match="Timeout") as info:
        agent.act(_inputs(1))
    assert info.value.status is None
    assert openai_server.request_count == 2  # first try + 1 retry, both timed out
    openai_server.delay_s = 0.0
    assert agent.act(_inputs(1))[0].text == "<action>noop</action>"


def test_connection_refused_is_retried_then_fails():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    agent = OpenAIAgent("m", f"http://127.0.0.1:{port}/v1", max_retries=2, backoff_s=0.01, timeout_s=2)
    try:
        with pytest.raises(AgentRequestError, match="3 attempts.*Connect"):
            agent.act(_inputs(1))
    finally:
        agent.close()


def test_malformed_json_once_is_retried_always_fails(openai_server, agent_for):  # noqa: F811
    openai_server.malformed_next(1)
    out = agent_for().act(_inputs(1))[0]
    assert out.text == "<action>noop</action>" and out.extra["attempts"] == 2
    openai_server.reset_stats()
    openai_server.malformed_next(10)
    with pytest.raises(AgentRequestError, match="unreadable JSON"):
        agent_for(max_retries=2).act(_inputs(1))
    assert openai_server.request_count == 3


def test_one_failure_fails_the_batch(openai_server, agent_for):  # noqa: F811
    openai_server.fail_next(1, status=404)
    with pytest.raises(AgentRequestError, match="HTTP 404"):
        agent_for(concurrency=1).act(_inputs(3))


# -- lifecycle and configuration --------------------------------------------------------------


def test_close_is_idempotent_and_reopens(openai_server):  # noqa: F811
    agent = OpenAIAgent("fake-model", openai_server.url)
    agent.close()  # never opened
    assert agent.act(_inputs(1))[0].text == "<action>noop</action>"
    agent.close()
    agent.close()
    assert agent._client is None and agent._pool is None
    assert agent.act(_inputs(1))[0].text == "<action>noop</action>"
    agent.close()
    assert agent.chat is True and agent.name == "openai:fake-model"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"concurrency": 0}, "concurrency must be an integer >= 1, got 0"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout_s": 0}, "timeout_s must be a number > 0"),
        ({"backoff_s": -1.0}, "backoff_s"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"seed": "7"}, "seed must be an integer"),
        ({"extra_body": [1]}, "extra_body"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        OpenAIAgent("m", "http://127.0.0.1:1/v1", **kwargs)


def test_bad_base_url_and_model():
    with pytest.raises(ConfigError, match="base_url must start with http"):
        OpenAIAgent("m", "127.0.0.1:8000/v1")
    with pytest.raises(ConfigError, match="model must be a non-empty string"):
        OpenAIAgent("", "http://127.0.0.1:8000/v1")


def test_missing_httpx_names_the_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_httpx(name, *args, **kwargs):
        if name == "httpx":
            raise ImportError("No module named 'httpx'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_httpx)
    from envgym.errors import MissingDependencyError

    with pytest.raises(MissingDependencyError, match="pip install httpx"):
        OpenAIAgent("m", "http://127.0.0.1:8000/v1")


# -- the CLI spec -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "model", "url"),
    [
        ("Qwen/Qwen2.5-7B@http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-7B", "http://127.0.0.1:8000/v1"),
        ("openai:gpt-4o-mini@https://api.openai.com/v1", "gpt-4o-mini", "https://api.openai.com/v1"),
        ("org/model:q4@name@http://host:1/v1", "org/model:q4@name", "http://host:1/v1"),  # last '@' splits
        ("  m @ http://h/v1 ", "m", "http://h/v1"),
    ],
)
def test_parse_openai_spec(arg, model, url):
    assert parse_openai_spec(arg) == {"model": model, "base_url": url}


@pytest.mark.parametrize(
    ("arg", "match"),
    [
        ("Qwen/Qwen2.5-7B", "no '@'"),
        ("@http://127.0.0.1:8000/v1", "names no model"),
        ("model@127.0.0.1:8000/v1", "must start with http:// or https://, got '127.0.0.1:8000/v1'"),
        ("model@", "must start with http"),
        ("model@ftp://x", "got 'ftp://x'"),
    ],
)
def test_parse_openai_spec_rejects(arg, match):
    with pytest.raises(ConfigError, match=match) as info:
        parse_openai_spec(arg)
    assert "Example: 'openai:" in str(info.value)


# -- end to end -------------------------------------------------------------------------------


def test_plays_frozen_lake_end_to_end(openai_server, agent_for):  # noqa: F811
    # Seed 1 puts P at row 2, column 4 and G at row 4, column 3: down, down, left wins (3 moves).
    plan = ["down", "down", "left"]
    openai_server.action = lambda messages: plan[sum(m["role"] == "user" for m in messages) - 1]
    agent = agent_for(seed=3)
    env = envgym.make("envgym/FrozenLake-v0")
    obs, info = env.reset(seed=1)
    agent.start_episode("e0", "envgym/FrozenLake-v0", 1)
    messages: list[dict[str, str]] = []
    total, turn, played = 0.0, 0, []
    terminated = truncated = False
    while not (terminated or truncated) and turn < 10:
        messages.append({"role": "user", "content": obs})
        item = AgentInput("e0", "envgym/FrozenLake-v0", obs, info, turn, messages=tuple(messages))
        reply = agent.act([item])[0].text
        messages.append({"role": "assistant", "content": reply})
        action = extract_action(reply)
        played.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        turn += 1
    agent.end_episode("e0")
    env.close()
    assert played == plan
    assert terminated and info["success"] is True and total > 0
    assert openai_server.request_count == 3
    # The server saw the growing chat history: 1, 3 and 5 messages.
    assert [len(b["messages"]) for b in openai_server.requests] == [1, 3, 5]
    assert len({b["seed"] for b in openai_server.requests}) == 3
