"""envgym/MCP-v0 against real MCP servers built with the SDK (tests/support/mcp_servers.py):
a calculator over stdio (a subprocess) and over streamable HTTP on 127.0.0.1, and a hand-written
hostile server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import jsonschema
import mcp_servers
import pytest

from envgym.errors import EnvContractError, InvalidKwargsError
from envgym.mcp import MCP_ID, MCPServerError
from envgym.mcp.server import HTTPServer

VERIFIER = "mcp_servers:verify_answer"

ORACLE = {
    "sum": ['{"name": "add", "arguments": {"a": 1234, "b": 4321}}', "5555"],
    "product": ['{"name": "multiply", "arguments": {"a": 37, "b": 91}}', "3367"],
    "note": [
        '{"name": "write_note", "arguments": {"key": "color", "text": "blue"}}',
        '{"name": "read_note", "arguments": {"key": "color"}}',
        "blue",
    ],
}


def submit(answer: str) -> str:
    return json.dumps({"name": "submit", "arguments": {"answer": answer}})


def make(server: Any, **kwargs: Any) -> gymnasium.Env:
    return gymnasium.make(MCP_ID, server=server, tasks=kwargs.pop("tasks", mcp_servers.CALC_TASKS), **kwargs)


@pytest.fixture(scope="module")
def stdio_env() -> Iterator[gymnasium.Env]:
    env = make(mcp_servers.stdio_command("calc"), verifier=VERIFIER)
    yield env
    env.close()


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    server = HTTPServer(mcp_servers.calc_server()).start()
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def hostile_env() -> Iterator[gymnasium.Env]:
    env = make(mcp_servers.stdio_command("hostile"), verifier=VERIFIER, timeout=1.5, max_result_chars=1000)
    yield env
    env.close()


def play(env: gymnasium.Env, task_id: str, actions: list[str]) -> tuple[list[str], list[float], dict[str, Any]]:
    obs, info = env.reset(seed=0, options={"task_id": task_id})
    observations, rewards = [obs], []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs)
        rewards.append(reward)
    assert terminated and not truncated
    return observations, rewards, info


@pytest.mark.parametrize("task_id", sorted(ORACLE))
def test_oracle_actions_over_stdio_score_one(stdio_env: gymnasium.Env, task_id: str) -> None:
    *calls, answer = ORACLE[task_id]
    observations, rewards, info = play(stdio_env, task_id, [*calls, submit(answer)])
    assert rewards == [0.0] * len(calls) + [1.0]
    assert info["success"] is True and info["termination_reason"] == "success"
    assert info["reward_components"]["success_reward"] == 1.0
    assert observations[len(calls)] == f"Tool result ({json.loads(calls[-1])['name']}): {answer}"
    assert observations[-1] == f"Answer submitted: {answer}"


def test_reset_lists_the_servers_tools_as_openai_schemas(stdio_env: gymnasium.Env) -> None:
    obs, info = stdio_env.reset(seed=0, options={"task_id": "sum"})
    names = [tool["function"]["name"] for tool in info["tools"]]
    assert names == ["add", "multiply", "write_note", "read_note", "echo", "submit"]
    add = info["tools"][0]
    assert add["type"] == "function" and add["function"]["description"] == "Add two numbers."
    assert add["function"]["parameters"]["required"] == ["a", "b"]
    assert add["function"]["parameters"]["properties"]["a"]["type"] == "number"
    for tool in info["tools"]:
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
    assert info["parallel_tool_calls"] is False
    assert "What is 1234 + 4321?" in obs and "- add(a, b): Add two numbers." in obs
    assert info["task"] == {"id": "mcp-sum", "goal": mcp_servers.CALC_TASKS[0]["goal"], "split": "train",
                            "difficulty": "", "seed": 0}  # fmt: skip
    assert "answer" not in json.dumps(info["task"])  # the expected answer is for the verifier only


def test_a_wrong_answer_scores_zero_and_fails(stdio_env: gymnasium.Env) -> None:
    _, rewards, info = play(stdio_env, "product", [submit("3366")])
    assert rewards == [0.0] and info["success"] is False and info["termination_reason"] == "failure"


def test_malformed_calls_are_invalid_steps_and_run_nothing(stdio_env: gymnasium.Env) -> None:
    stdio_env.reset(seed=0, options={"task_id": "note"})
    cases = {
        "not json": "Tool error: not valid JSON",
        '{"name": "ad", "arguments": {"a": 1, "b": 2}}': "Did you mean 'add'?",
        '{"name": "write_note", "arguments": {"key": "shade"}}': "Tool error (write_note): arguments: missing",
        '{"name": "add", "arguments": {"a": "one", "b": 2}}': "Tool error (add): arguments.a",
    }
    for action, expected in cases.items():
        obs, reward, terminated, _, info = stdio_env.step(action)
        assert expected in obs, (action, obs)
        assert info["action_valid"] is False and reward == -0.1 and not terminated
    # Nothing reached the server: the note was never written.
    obs, reward, _, _, info = stdio_env.step('{"name": "read_note", "arguments": {"key": "shade"}}')
    assert info["action_valid"] is True and reward == 0.0
    assert obs == "Tool error (read_note): Error executing tool read_note: no note 'shade'"
    assert info["invalid_actions"] == 4


def test_the_same_seed_serves_the_same_task(stdio_env: gymnasium.Env) -> None:
    ids = [stdio_env.reset(seed=seed)[1]["task"]["id"] for seed in (3, 4, 3, 4)]
    assert ids[:2] == ids[2:]
    assert {stdio_env.reset(seed=seed)[1]["task"]["id"] for seed in range(20)} == {"mcp-sum", "mcp-product", "mcp-note"}


def test_streamable_http_server_scores_as_over_stdio(http_url: str) -> None:
    env = make(http_url, verifier="mcp_servers:verify_with_cost", verifier_components=["tool_calls_reward"])
    try:
        _, rewards, info = play(env, "sum", [*ORACLE["sum"][:1], submit("5555")])
        assert info["reward_components"] == {
            "success_reward": 1.0,
            "invalid_action_reward": 0.0,
            "step_cost_reward": 0.0,
            "tool_calls_reward": -0.01,
        }
        assert rewards == [0.0, pytest.approx(0.99)] and info["success"] is True
        # The session is kept across episodes: the server's notes survive a reset...
        play(env, "note", [ORACLE["note"][0], submit("x")])
        obs, *_ = env.reset(seed=0, options={"task_id": "note"}), None
        obs, *_ = env.step(ORACLE["note"][1])
        assert obs == "Tool result (read_note): blue"
    finally:
        env.close()


def test_fresh_session_gives_each_episode_a_new_server(http_url: str) -> None:
    env = make(http_url, verifier=VERIFIER, fresh_session=True)
    try:
        play(env, "note", [ORACLE["note"][0], submit("x")])
        env.reset(seed=0, options={"task_id": "note"})
        # The HTTP server keeps one notebook for all sessions: a fresh session reads it too.
        obs, *_ = env.step(ORACLE["note"][1])
        assert obs == "Tool result (read_note): blue"
    finally:
        env.close()


def test_tasks_from_jsonl_with_splits(tmp_path: Path, http_url: str) -> None:
    path = tmp_path / "tasks.jsonl"
    rows = [dict(task, split="test" if task["id"] == "product" else "train") for task in mcp_servers.CALC_TASKS]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n\n", encoding="utf-8")
    env = make(http_url, tasks=str(path), verifier=VERIFIER, split="test")
    try:
        assert {env.reset(seed=seed)[1]["task"]["id"] for seed in range(5)} == {"mcp-product"}
        with pytest.raises(InvalidKwargsError, match="no task 'produkt' in split 'test'. Did you mean 'product'"):
            env.reset(seed=0, options={"task_id": "produkt"})
    finally:
        env.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"verifier": "mcp_servers:verify_answr"}, "has no function 'verify_answr'. Did you mean 'verify_answer'"),
        ({"verifier": "no_such_module:f"}, "cannot import 'no_such_module'"),
        ({"verifier": VERIFIER, "tasks": []}, "holds no task"),
        ({"verifier": VERIFIER, "tasks": [{"id": "a", "goal": "g"}, {"id": "a", "goal": "h"}]}, "appears twice"),
        ({"verifier": VERIFIER, "tasks": [{"goal": "g"}]}, "string 'id' and a string 'goal'"),
        ({"verifier": VERIFIER, "tasks": "/no/such/tasks.jsonl"}, "does not exist"),
        ({"verifier": VERIFIER, "timeout": 0}, "timeout must be a positive number"),
        ({"verifier": VERIFIER, "verifier_components": ["cost"]}, "ending in '_reward'"),
        ({"verifier": VERIFIER, "verifer": 1}, "Did you mean 'verifier'"),
        ({"verifier": VERIFIER, "max_result_chars": 10**9}, "max_result_chars must be an integer from 100"),
    ],
)
def test_bad_arguments_fail_at_make_before_any_server_starts(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidKwargsError, match=message):
        make(["/no/such/server"], **kwargs)


def test_an_undeclared_verifier_component_is_an_error_not_a_reward(http_url: str) -> None:
    env = make(http_url, verifier="mcp_servers:verify_with_cost")
    try:
        env.reset(seed=0, options={"task_id": "sum"})
        with pytest.raises(EnvContractError, match=r"verifier_components=\['tool_calls_reward'\]"):
            env.step(submit("5555"))
    finally:
        env.close()


def test_a_server_that_cannot_start_is_an_infrastructure_error() -> None:
    env = make(["/no/such/server-binary"], verifier=VERIFIER)
    with pytest.raises(MCPServerError, match="could not be started or reached: FileNotFoundError") as caught:
        env.reset(seed=0)
    assert caught.value.retryable is True
    env.close()


def test_an_unreachable_http_server_is_an_infrastructure_error() -> None:
    env = make("http://127.0.0.1:9/mcp", verifier=VERIFIER, connect_timeout=20)
    with pytest.raises(MCPServerError, match="could not be started or reached"):
        env.reset(seed=0)
    env.close()


def test_hostile_replies_are_capped_or_dropped(hostile_env: gymnasium.Env) -> None:
    _, info = hostile_env.reset(seed=0)
    tools = {tool["function"]["name"]: tool["function"] for tool in info["tools"]}
    # The 500-character name is dropped, the second 'flood' too; the 50,000-character description is cut.
    assert sorted(tools) == ["crash", "fail", "flood", "garbage", "hang", "submit"]
    assert len(tools["flood"]["description"]) == 2000
    obs, _, _, _, info = hostile_env.step('{"name": "flood", "arguments": {}}')
    assert info["action_valid"] is True
    assert obs.startswith("Tool result (flood): AAAA") and obs.endswith("[... 999000 more characters cut]")
    assert len(obs) < 1100
    obs, *_ = hostile_env.step('{"name": "fail", "arguments": {}}')
    assert obs == "Tool error (fail): disk on fire"


def test_a_reply_that_is_not_mcp_is_an_infrastructure_error(hostile_env: gymnasium.Env) -> None:
    hostile_env.reset(seed=0)
    with pytest.raises(MCPServerError, match="tools/call 'garbage' failed: ValidationError"):
        hostile_env.step('{"name": "garbage", "arguments": {}}')


def test_a_server_that_never_answers_times_out(hostile_env: gymnasium.Env) -> None:
    hostile_env.reset(seed=0)
    started = time.monotonic()
    with pytest.raises(MCPServerError, match="tools/call 'hang' got no answer within 1.5 s"):
        hostile_env.step('{"name": "hang", "arguments": {}}')
    assert time.monotonic() - started < 10
    # The session survives a slow call: the next one is answered.
    obs, *_ = hostile_env.step('{"name": "fail", "arguments": {}}')
    assert obs == "Tool error (fail): disk on fire"


def test_a_server_that_dies_mid_episode_is_an_infrastructure_error_then_restarts() -> None:
    env = make(mcp_servers.stdio_command("hostile"), verifier=VERIFIER, timeout=5)
    try:
        env.reset(seed=0)
        with pytest.raises(MCPServerError, match="tools/call 'crash' failed"):
            env.step('{"name": "crash", "arguments": {}}')
        # The next reset opens a new session with a new server process.
        _, info = env.reset(seed=1)
        assert "crash" in [tool["function"]["name"] for tool in info["tools"]]
    finally:
        env.close()


def test_schemas_that_are_not_mcp_are_refused_at_reset() -> None:
    env = make(mcp_servers.stdio_command("bad_schemas"), verifier=VERIFIER)
    try:
        with pytest.raises(MCPServerError, match=r"(?s)tools/list failed: ValidationError.*inputSchema"):
            env.reset(seed=0)
    finally:
        env.close()
