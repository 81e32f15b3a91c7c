"""``envgym mcp serve``: envgym envs as MCP servers, driven by the official SDK's real client over
streamable HTTP (a customer-service env: its tools) and stdio (a game through ``act``); every
reward and observation equals the same episode played in process."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from envgym.agents.solvers.service import Solver
from mcp.client.client import Client
from typer.testing import CliRunner

import envgym
from envgym.cli import app
from envgym.mcp import MCPConnection
from envgym.mcp.server import HTTPServer, build_server
from envgym.tools import parse_tool_calls

# asyncio.run in the main thread: no Playwright of an earlier test may hold it (conftest).
pytestmark = pytest.mark.usefixtures("no_thread_playwright")

SERVICE = "envgym/Service-Retail-v0"
GAME = "envgym/Wordle-v0"


@pytest.fixture(scope="module")
def service_url() -> Iterator[tuple[str, Any]]:
    server, sessions = build_server(SERVICE, transport="http", max_sessions=2)
    http = HTTPServer(server).start()
    yield http.url, sessions
    http.stop()
    sessions.close()


def in_process_oracle(seed: int) -> tuple[list[str], list[tuple[str, float, bool, bool]], list[dict]]:
    """The oracle's actions on ``SERVICE`` at ``seed`` and what each step gave in process."""
    env = envgym.make(SERVICE)
    obs, info = env.reset(seed=seed)
    solver = Solver(SERVICE, seed)
    actions, outcomes = [], []
    while True:
        action = solver.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(action)
        outcomes.append((obs, reward, terminated, truncated))
        if terminated or truncated:
            env.close()
            return actions, outcomes, info["tools"]


def as_mcp_call(action: str, tools: list[dict]) -> tuple[str, dict[str, Any]]:
    """An action as the MCP call that takes it: an env tool for a tool call, else ``act``."""
    if action.lstrip().startswith("{"):
        call = parse_tool_calls(action, tools, legacy=True)[0]
        return call.name, dict(call.arguments)
    return "act", {"action": action}


async def play_over_http(url: str, seed: int, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list, list]:
    async with Client(url) as client:
        listing = await client.list_tools()
        reset = await client.call_tool("reset", {"seed": seed})
        assert reset.structured_content["task"]["id"].startswith("service/retail/")
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return [tool.name for tool in listing.tools], results


def test_the_sdk_client_plays_a_service_episode_over_http_as_in_process(service_url: tuple[str, Any]) -> None:
    url, _ = service_url
    actions, expected, tools = in_process_oracle(seed=0)
    calls = [as_mcp_call(action, tools) for action in actions]
    assert {name for name, _ in calls} >= {"act", "find_user_id_by_email", "get_order_details"}
    names, results = asyncio.run(play_over_http(url, 0, calls))
    assert names[:2] == ["reset", "act"]
    assert names[2:] == [tool["function"]["name"] for tool in tools]
    got = [
        (r.content[0].text, r.structured_content["reward"], r.structured_content["terminated"],
         r.structured_content["truncated"])
        for r in results
    ]  # fmt: skip
    assert got == expected
    assert expected[-1][1] == 1.0 and results[-1].structured_content["success"] is True
    assert all(r.is_error is False for r in results)


async def two_sessions(url: str) -> tuple[str, str, str]:
    async with Client(url) as first, Client(url) as second:
        a = await first.call_tool("reset", {"seed": 0})
        b = await second.call_tool("reset", {"seed": 1})
        again = await first.call_tool("act", {"action": "Hello!"})
    return a.structured_content["task"]["id"], b.structured_content["task"]["id"], again.content[0].text


def test_each_mcp_session_has_its_own_env(service_url: tuple[str, Any]) -> None:
    url, sessions = service_url
    first_task, second_task, reply = asyncio.run(two_sessions(url))
    assert first_task != second_task
    env = envgym.make(SERVICE)
    env.reset(seed=0)
    assert reply == env.step("Hello!")[0]  # the first session's episode was not touched by the second
    env.close()
    assert len(sessions) <= 2  # max_sessions=2: older envs were closed


async def misuse(url: str) -> list[Any]:
    async with Client(url) as client:
        before = await client.call_tool("act", {"action": "hi"})
        unknown = await client.call_tool("teleport", {})
        await client.call_tool("reset", {"seed": 0})
        invalid = await client.call_tool("get_order_details", {"order": 5})
    async with Client(url, mode="2026-07-28") as modern:
        stateless = await modern.call_tool("reset", {"seed": 0})
    return [before, unknown, invalid, stateless]


def test_misuse_is_an_error_result_not_a_crash(service_url: tuple[str, Any]) -> None:
    url, _ = service_url
    before, unknown, invalid, stateless = asyncio.run(misuse(url))
    assert before.is_error and before.content[0].text == "No episode is running: call reset(seed) first."
    assert unknown.is_error and unknown.content[0].text == "Unknown tool 'teleport'."
    # A call that breaks the tool's schema is the env's invalid step, reported as an error result.
    assert invalid.is_error and invalid.structured_content["action_valid"] is False
    assert "Tool error (get_order_details)" in invalid.content[0].text
    env = envgym.make(SERVICE)
    env.reset(seed=0)
    obs, reward, *_ = env.step(json.dumps({"name": "get_order_details", "arguments": {"order": 5}}))
    env.close()
    assert (invalid.content[0].text, invalid.structured_content["reward"]) == (obs, reward)
    assert stateless.is_error and "one episode per MCP session" in stateless.content[0].text


@pytest.fixture(scope="module")
def game_over_stdio() -> Iterator[MCPConnection]:
    command = [sys.executable, "-m", "envgym", "mcp", "serve", GAME]
    with MCPConnection(command, timeout=60, connect_timeout=180) as connection:
        yield connection


def test_a_game_over_stdio_through_act_scores_as_in_process(game_over_stdio: MCPConnection) -> None:
    assert [tool.name for tool in game_over_stdio.list_tools()] == ["reset", "act"]
    env = envgym.make(GAME)
    obs, _ = env.reset(seed=7)
    reset = game_over_stdio.call_tool("reset", {"seed": 7})
    assert reset.text == obs
    rng = random.Random(0)
    for _ in range(8):
        action = env.unwrapped.sample_action(rng)
        obs, reward, terminated, truncated, info = env.step(action)
        result = game_over_stdio.call_tool("act", {"action": action})
        assert result.text == obs
        assert result.structured["reward"] == reward
        assert result.structured["reward_components"] == info["reward_components"]
        assert (result.structured["terminated"], result.structured["truncated"]) == (terminated, truncated)
        if terminated or truncated:
            break
    env.close()


def test_cli_usage_errors_exit_2() -> None:
    runner = CliRunner()
    unknown = runner.invoke(app, ["mcp", "serve", "envgym/Wordl-v0"])
    assert unknown.exit_code == 2 and "Wordle-v0" in unknown.output
    bad = runner.invoke(app, ["mcp", "serve", GAME, "--transport", "ws"])
    assert bad.exit_code == 2 and "--transport must be 'stdio' or 'http'" in bad.output


def test_served_results_are_json(service_url: tuple[str, Any]) -> None:
    """Structured content round-trips through JSON (numpy numbers and enums become plain values)."""

    async def one(url: str) -> Any:
        async with Client(url) as client:
            return await client.call_tool("reset", {"seed": 3})

    result = asyncio.run(one(service_url[0]))
    assert json.loads(json.dumps(result.structured_content)) == result.structured_content
