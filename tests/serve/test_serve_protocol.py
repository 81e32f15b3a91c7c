"""``envgym serve`` over a real socket: every message and error code of docs/serving.md, the limits,
env closing, and hostile frames. Raw frames go through the ``websockets`` client."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from serve_toy_envs import BOX_ID, DUO_ID, PROBE_ID, RELEASE, Probe, register_serve_toys
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from envgym.errors import ConfigError, UnknownEnvError
from envgym.serve import Server
from envgym.serve.codec import decode_obs, encode_action

register_serve_toys()
WORDLE = "envgym/Wordle-v0"
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server([PROBE_ID, BOX_ID, DUO_ID, WORDLE], max_message_bytes=LIMIT, step_timeout=30) as running:
        yield running


@pytest.fixture(scope="module")
def small() -> Iterator[Server]:
    """Two sessions at most."""
    with Server([PROBE_ID], max_sessions=2) as running:
        yield running


@pytest.fixture(scope="module")
def tight() -> Iterator[Server]:
    """Short idle and step limits."""
    with Server([PROBE_ID], idle_timeout=0.5, step_timeout=0.3) as running:
        yield running


def _open(server: Server, env_id: str | None = PROBE_ID) -> ClientConnection:
    return connect(server.ws_url(env_id), max_size=None, open_timeout=30)


def _ask(ws: ClientConnection, message: Any) -> dict[str, Any]:
    ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(ws.recv(timeout=30))


def _error(reply: dict[str, Any], code: str) -> str:
    assert reply["type"] == "error", reply
    assert reply["data"]["code"] == code, reply
    return reply["data"]["message"]


def _alive(ws: ClientConnection) -> None:
    """The session still answers."""
    assert _ask(ws, {"type": "state"})["type"] == "state"


def _closed_with(ws: ClientConnection) -> int | None:
    """The close code the server sent (waits for the close)."""
    with pytest.raises(ConnectionClosed):
        ws.recv(timeout=30)
    assert ws.close_code is not None or ws.protocol.close_rcvd is not None
    return ws.protocol.close_rcvd.code if ws.protocol.close_rcvd else None


def _until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


# -- a whole episode ------------------------------------------------------------------------------------
def test_an_episode_matches_in_process_play(server: Server) -> None:
    import envgym

    local = envgym.make(WORDLE)
    obs, info = local.reset(seed=11)
    with _open(server, WORDLE) as ws:
        reply = _ask(ws, {"type": "reset", "data": {"seed": 11}})
        assert reply["type"] == "observation" and reply["data"]["reward"] is None and reply["data"]["done"] is False
        remote = reply["data"]["observation"]
        assert remote["obs"] == obs and remote["info"]["task"] == info["task"] and remote["step"] == 0
        episode = remote["episode_id"]
        for guess in ["crane", "zzzzz", "slate", "pious", "dying", "mound", "wreck", "fjord", "blimp", "gusty"]:
            obs, reward, terminated, truncated, info = local.step(guess)
            reply = _ask(ws, {"type": "step", "data": {"action": guess}})["data"]
            assert reply["observation"]["obs"] == obs
            assert reply["reward"] == reward and reply["done"] == (terminated or truncated)
            assert reply["observation"]["info"]["reward_components"] == info["reward_components"]
            assert reply["observation"]["episode_id"] == episode
            if terminated or truncated:
                break
        state = _ask(ws, {"type": "state"})["data"]
        assert state == {
            "env_id": WORDLE,
            "episode_id": episode,
            "step_count": state["step_count"],
            "seed": 11,
            "done": True,
        }
        assert state["step_count"] >= 1
        _error(_ask(ws, {"type": "step", "data": {"action": "crane"}}), "NOT_RESET")
    local.close()


def test_ws_without_an_id_plays_the_first_or_the_one_reset_names(server: Server) -> None:
    with _open(server, None) as ws:
        assert _ask(ws, {"type": "reset"})["data"]["observation"]["env_id"] == PROBE_ID
        reply = _ask(ws, {"type": "reset", "data": {"env_id": WORDLE, "seed": 1}})
        assert reply["data"]["observation"]["env_id"] == WORDLE
        message = _error(_ask(ws, {"type": "reset", "data": {"env_id": "envgym/Wordel-v0"}}), "UNKNOWN_ENV")
        assert "Did you mean 'envgym/Wordle-v0'" in message
        _alive(ws)


def test_env_kwargs_rebuild_and_are_checked_before_any_build(server: Server) -> None:
    with _open(server) as ws:
        made = Probe.live
        reply = _ask(ws, {"type": "reset", "data": {"env_kwargs": {"size": 5, "tag": "x"}}})
        assert reply["data"]["observation"]["obs"] == "size=5 tag=x ticks=0"
        message = _error(_ask(ws, {"type": "reset", "data": {"env_kwargs": {"siz": 2}}}), "BAD_KWARGS")
        assert "Did you mean 'size'" in message
        assert Probe.live == made + 1  # refused before a second env was made
        message = _error(_ask(ws, {"type": "reset", "data": {"env_kwargs": {"size": 0}}}), "BAD_KWARGS")
        assert "size must be at least 1" in message
        assert _ask(ws, {"type": "reset"})["data"]["observation"]["obs"].startswith("size=3")


def test_render_and_array_actions(server: Server) -> None:
    with _open(server, BOX_ID) as ws:
        first = _ask(ws, {"type": "reset", "data": {"seed": 0}})["data"]["observation"]
        assert decode_obs(first["obs"]).tolist() == [0.0, 0.0, 0.0]
        action = np.array([0.25, 0.5], np.float32)
        reply = _ask(ws, {"type": "step", "data": {"action": encode_action(action)}})["data"]
        obs = decode_obs(reply["observation"]["obs"])
        assert obs.dtype == np.float32 and obs[:2].tolist() == [0.25, 0.5] and obs[2] == -np.inf
        assert reply["reward"] == 0.75
        reply = _ask(ws, {"type": "step", "data": {"action": [1, 0]}})["data"]  # a plain list works too
        assert reply["done"] is True and reply["reward"] == 1.0
        assert "cannot decode the action" in _error(
            _ask(ws, {"type": "reset"}) and _ask(ws, {"type": "step", "data": {"action": [1, 2, 3]}}), "BAD_ACTION"
        )
    with _open(server) as ws:
        _error(_ask(ws, {"type": "render"}), "NOT_RESET")
        _ask(ws, {"type": "reset"})
        assert _ask(ws, {"type": "render"}) == {"type": "render", "data": {"render": "[size=3 tag= ticks=0]"}}


def test_a_parallel_env_end_to_end(server: Server) -> None:
    with _open(server, DUO_ID) as ws:
        reply = _ask(ws, {"type": "reset", "data": {"seed": 4}})["data"]
        observation = reply["observation"]
        assert observation["agents"] == ["talker", "counter"] and observation["rewards"] is None
        assert observation["obs"]["talker"] == "round 0" and decode_obs(observation["obs"]["counter"]).tolist() == [0]
        assert observation["infos"]["counter"] == {"seed": 4}
        message = _error(_ask(ws, {"type": "step", "data": {"actions": {"talker": "hi"}}}), "BAD_ACTION")
        assert "missing counter" in message
        message = _error(_ask(ws, {"type": "step", "data": {"actions": {"talker": "hi", "countr": 1}}}), "BAD_ACTION")
        assert "Did you mean 'counter'" in message
        _error(_ask(ws, {"type": "step", "data": {"actions": {"talker": "hi", "counter": "two"}}}), "BAD_ACTION")
        reply = _ask(ws, {"type": "step", "data": {"actions": {"talker": "hi", "counter": 2}}})["data"]
        assert reply["observation"]["rewards"] == {"talker": 1.0, "counter": 2.0} and reply["done"] is False
        reply = _ask(ws, {"type": "step", "data": {"actions": {"talker": "yo", "counter": 1}}})["data"]
        assert reply["done"] is True and reply["observation"]["agents"] == []
        assert reply["observation"]["terminations"] == {"talker": True, "counter": True}
        _error(_ask(ws, {"type": "step", "data": {"actions": {}}}), "NOT_RESET")


# -- error codes that keep the session --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("frame", "code", "needle"),
    [
        ("not json", "INVALID_JSON", "not JSON"),
        ("[" * 30_000 + "]" * 30_000, "INVALID_JSON", "not JSON"),
        ('{"type": "stpe"}', "UNKNOWN_TYPE", "Did you mean 'step'"),
        ('{"type": 5}', "VALIDATION_ERROR", "string 'type'"),
        ("[1, 2]", "VALIDATION_ERROR", "JSON object"),
        ('{"type": "reset", "data": [1]}', "VALIDATION_ERROR", "'data' must be an object"),
        ('{"type": "reset", "data": {"sed": 1}}', "VALIDATION_ERROR", "Did you mean 'seed'"),
        ('{"type": "reset", "data": {"seed": -1}}', "VALIDATION_ERROR", "non-negative integer"),
        ('{"type": "reset", "data": {"seed": true}}', "VALIDATION_ERROR", "non-negative integer"),
        ('{"type": "reset", "data": {"options": "x"}}', "VALIDATION_ERROR", "'options' must be an object"),
        ('{"type": "reset", "data": {"env_kwargs": [1]}}', "VALIDATION_ERROR", "'env_kwargs' must be an object"),
        ('{"type": "reset", "data": {"env_id": "envgym/Wordle-v0"}}', "VALIDATION_ERROR", "its address names it"),
        ('{"type": "reset", "extra": 1}', "VALIDATION_ERROR", "unknown field"),
        ('{"type": "step", "data": {"action": "tick"}}', "NOT_RESET", "send a 'reset' first"),
        (b'{"type": "step"', "INVALID_JSON", "not JSON"),
    ],
)
def test_bad_frames_get_typed_errors_and_keep_the_session(server: Server, frame: str, code: str, needle: str) -> None:
    with _open(server) as ws:
        assert needle in _error(_ask(ws, frame), code)
        _alive(ws)
        assert _ask(ws, {"type": "reset"})["type"] == "observation"


def test_a_step_with_wrong_fields_is_a_validation_error(server: Server) -> None:
    with _open(server) as ws:
        _ask(ws, {"type": "reset"})
        assert "takes {'action': ...}" in _error(
            _ask(ws, {"type": "step", "data": {"act": "tick"}}), "VALIDATION_ERROR"
        )
        # a malformed *text* action is an invalid step, as in-process, not an error
        reply = _ask(ws, {"type": "step", "data": {"action": {"nested": [1, 2]}}})["data"]
        assert reply["reward"] == -1.0 and reply["observation"]["info"]["action_valid"] is False


def test_an_env_crash_is_retryable_and_the_next_reset_rebuilds(server: Server) -> None:
    with _open(server) as ws, _open(server) as other:
        _ask(other, {"type": "reset"})
        _ask(ws, {"type": "reset"})
        closes = Probe.closes
        reply = _ask(ws, {"type": "step", "data": {"action": "crash"}})
        assert "step crashed on purpose" in _error(reply, "ENV_CRASHED") and reply["data"]["retryable"] is True
        _until(lambda: Probe.closes == closes + 1)  # the crashed env was closed
        _error(_ask(ws, {"type": "step", "data": {"action": "tick"}}), "NOT_RESET")
        assert "reset crashed" in _error(
            _ask(ws, {"type": "reset", "data": {"options": {"crash": True}}}), "ENV_CRASHED"
        )
        assert _ask(ws, {"type": "reset"})["type"] == "observation"
        assert _ask(other, {"type": "step", "data": {"action": "tick"}})["data"]["reward"] == 0.5  # others unharmed


def test_unknown_ids_in_the_address(server: Server) -> None:
    with connect(f"{server.url.replace('http', 'ws')}/envgym/Wordel-v0/ws", open_timeout=30) as ws:
        assert "Did you mean 'envgym/Wordle-v0'" in _error(json.loads(ws.recv(timeout=30)), "UNKNOWN_ENV")
        assert _closed_with(ws) == 1008


# -- limits ---------------------------------------------------------------------------------------------
def test_a_frame_over_the_limit_closes_the_session(server: Server) -> None:
    with _open(server) as ws:
        ws.send(json.dumps({"type": "step", "data": {"action": "x" * LIMIT}}))
        assert "over the server's limit" in _error(json.loads(ws.recv(timeout=30)), "MESSAGE_TOO_BIG")
        assert _closed_with(ws) == 1009
    with _open(server) as ws:  # far over: cut by the protocol layer before it is read whole
        ws.send("x" * (16 * LIMIT))
        assert _closed_with(ws) == 1009
    with _open(server) as ws:
        _alive(ws)


def test_the_session_limit(small: Server) -> None:
    with _open(small) as first, _open(small) as second:
        _ask(first, {"type": "reset"})
        _alive(second)
        with _open(small) as third:
            reply = json.loads(third.recv(timeout=30))
            assert "limit of 2 sessions" in _error(reply, "CAPACITY_REACHED") and reply["data"]["retryable"] is True
            assert _closed_with(third) == 1013
        response = httpx.post(f"{small.url}/reset", json={}, timeout=30)
        assert response.status_code == 503 and response.json()["data"]["code"] == "CAPACITY_REACHED"
    _until(lambda: small.active_sessions == 0)
    with _open(small) as again:
        _alive(again)


def test_an_idle_session_is_closed_with_its_env(tight: Server) -> None:
    with _open(tight) as ws:
        _ask(ws, {"type": "reset"})
        live = Probe.live
        started = time.monotonic()
        assert "idle limit" in _error(json.loads(ws.recv(timeout=30)), "IDLE_TIMEOUT")
        assert time.monotonic() - started >= 0.4
        _closed_with(ws)
    _until(lambda: Probe.live == live - 1)


def test_a_step_past_the_limit_closes_the_session_and_then_its_env(tight: Server) -> None:
    RELEASE.clear()
    try:
        with _open(tight) as ws, _open(tight) as other:
            _ask(ws, {"type": "reset"})
            _ask(other, {"type": "reset"})
            live, closes = Probe.live, Probe.closes
            reply = _ask(ws, {"type": "step", "data": {"action": "block"}})
            assert "past the server's limit of 0.3 s" in _error(reply, "STEP_TIMEOUT") and reply["data"]["retryable"]
            assert _closed_with(ws) == 1011
            assert _ask(other, {"type": "step", "data": {"action": "tick"}})["type"] == "observation"
            assert Probe.live == live  # still stepping in its thread: closed once the step returns
            RELEASE.set()
            _until(lambda: Probe.closes == closes + 1)
    finally:
        RELEASE.set()


def test_a_build_past_the_limit_is_closed_once_it_is_made(tight: Server) -> None:
    live, closes = Probe.live, Probe.closes
    with _open(tight) as ws:
        reply = _ask(ws, {"type": "reset", "data": {"env_kwargs": {"build_delay": 0.6}}})
        assert "building the env ran past" in _error(reply, "STEP_TIMEOUT")
    _until(lambda: Probe.closes == closes + 1)
    assert Probe.live == live


def test_the_server_stopping_closes_every_session_and_env() -> None:
    live = Probe.live
    running = Server([PROBE_ID]).start()
    try:
        with _open(running) as ws:
            _ask(ws, {"type": "reset"})
            assert Probe.live == live + 1
            running.stop()
            reply = json.loads(ws.recv(timeout=30))
            assert _error(reply, "SERVER_STOPPING") and reply["data"]["retryable"] is True
            assert _closed_with(ws) == 1012
    finally:
        running.stop()
    assert Probe.live == live


def test_connect_disconnect_cycles_leave_no_env(server: Server) -> None:
    live = Probe.live
    for i in range(100):
        with _open(server) as ws:
            if i % 2:
                _ask(ws, {"type": "reset"})
            if i % 3 == 0:
                ws.send(json.dumps({"type": "close"}))
    _until(lambda: Probe.live == live and server.active_sessions == 0)


def test_hostile_frames_leave_the_server_serving(server: Server) -> None:
    frames = [
        "\x00" * 100,
        '{"type": "step", "data": {"action": ' + "[" * 20_000 + "]" * 20_000 + "}}",
        '{"type": "reset", "data": {"seed": 1' + "0" * 5000 + "}}",
        '{"type": "reset", "data": {"seed": 1e400}}',
        '{"type": "reset", "data": {"episode_id": "' + "e" * 300 + '"}}',
        '{"type": "render", "data": null}',
        '{"type": "reset", "data": {"options": {"crash": NaN}}}',
        b"\xff\xfe",
    ]
    with _open(server, BOX_ID) as ws:
        _ask(ws, {"type": "reset"})
        for frame in frames:
            assert _ask(ws, frame)["type"] in ("error", "render", "observation")
        _alive(ws)
    assert httpx.get(f"{server.url}/health", timeout=30).json()["status"] == "healthy"


# -- HTTP -----------------------------------------------------------------------------------------------
def test_http_endpoints(server: Server) -> None:
    health = httpx.get(f"{server.url}/{WORDLE}/health", timeout=30).json()
    assert health["status"] == "healthy" and health["max_sessions"] == 256
    assert httpx.get(f"{server.url}/envs", timeout=30).json()["envs"] == [
        {"id": PROBE_ID, "kind": "single"},
        {"id": BOX_ID, "kind": "single"},
        {"id": DUO_ID, "kind": "parallel"},
        {"id": WORDLE, "kind": "single"},
    ]
    spec = httpx.get(f"{server.url}/{DUO_ID}/spec", timeout=30).json()
    assert spec["possible_agents"] == ["talker", "counter"] and spec["action_spaces"]["counter"]["type"] == "Discrete"
    wordle = httpx.get(f"{server.url}/{WORDLE}/spec", timeout=30).json()
    assert "success_reward" in wordle["reward_components"] and wordle["card"]
    schema = httpx.get(f"{server.url}/{WORDLE}/schema", timeout=30).json()
    assert schema["action"]["properties"]["action"]["type"] == "string" and set(schema) == {
        "action",
        "observation",
        "state",
    }
    assert httpx.get(f"{server.url}/{WORDLE}/metadata", timeout=30).json()["name"] == WORDLE
    reset = httpx.post(f"{server.url}/{WORDLE}/reset", json={"seed": 3}, timeout=30).json()
    assert reset["reward"] is None and reset["done"] is False and reset["observation"]["info"]["task"]["seed"] == 3
    step = httpx.post(f"{server.url}/{WORDLE}/step", json={"action": {"action": "crane"}, "seed": 3}, timeout=30)
    assert step.status_code == 200 and step.json()["observation"]["step"] == 1
    missing = httpx.get(f"{server.url}/envgym/Nope-v0/health", timeout=30)
    assert missing.status_code == 404 and missing.json()["data"]["code"] == "UNKNOWN_ENV"
    big = httpx.post(f"{server.url}/reset", content=b"{" + b" " * LIMIT + b"}", timeout=30)
    assert big.status_code == 413 and big.json()["data"]["code"] == "MESSAGE_TOO_BIG"
    bad = httpx.post(f"{server.url}/reset", content=b"nope", timeout=30)
    assert bad.status_code == 400 and bad.json()["data"]["code"] == "INVALID_JSON"
    assert httpx.get(f"{server.url}/reset", timeout=30).status_code == 405
    _until(lambda: server.active_sessions == 0)


def test_bad_server_options_fail_before_binding() -> None:
    with pytest.raises(UnknownEnvError, match="Did you mean 'envgym/Wordle-v0'"):
        Server(["envgym/Wordel-v0"])
    with pytest.raises(ConfigError, match="Did you mean 'size'"):
        Server([PROBE_ID], env_kwargs={PROBE_ID: {"siz": 3}})
    with pytest.raises(ConfigError, match="max_sessions"):
        Server([PROBE_ID], max_sessions=0)
    with pytest.raises(ConfigError, match="not registered as 'parallel'; it is registered as: aec, gymnasium"):
        Server(["envgym/TicTacToe-v0"], kinds={"envgym/TicTacToe-v0": "parallel"})


def test_locked_kwargs_refuse_client_kwargs() -> None:
    with Server([PROBE_ID], env_kwargs={PROBE_ID: {"size": 6}}, lock_kwargs=True) as running, _open(running) as ws:
        assert "--lock-kwargs" in _error(_ask(ws, {"type": "reset", "data": {"env_kwargs": {"size": 2}}}), "BAD_KWARGS")
        assert _ask(ws, {"type": "reset"})["data"]["observation"]["obs"].startswith("size=6")


def test_a_real_parallel_registration_plays_as_in_process() -> None:
    import envgym

    coop = "envgym/Coop-GiftExchange-v0"  # registered as single-agent and as Parallel
    local = envgym.make_parallel(coop)
    local.reset(seed=1)
    actions = {"agent_0": np.array([30.0], np.float32), "agent_1": np.array([20.0], np.float32)}
    _, rewards, *_ = local.step(actions)
    local.close()
    with Server([coop], kinds={coop: "parallel"}) as running, _open(running, coop) as ws:
        assert httpx.get(f"{running.url}/envs", timeout=30).json()["envs"] == [{"id": coop, "kind": "parallel"}]
        assert _ask(ws, {"type": "reset", "data": {"seed": 1}})["data"]["observation"]["agents"] == [
            "agent_0",
            "agent_1",
        ]
        wire = {agent: encode_action(action) for agent, action in actions.items()}
        reply = _ask(ws, {"type": "step", "data": {"actions": wire}})["data"]["observation"]
        assert reply["rewards"] == pytest.approx({a: float(r) for a, r in rewards.items()}, abs=0)
