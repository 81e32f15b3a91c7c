"""OpenEnv both ways (envgym.integrations.openenv).

Real parts: OpenEnv's own server (``create_app`` under uvicorn, on 127.0.0.1 and a free port) and
OpenEnv's own client (``GenericEnvClient``). The OpenEnv environment is OpenEnv's example, the echo
env its ``openenv init`` template writes (tests/support/openenv_echo): reward ``0.1 * len(message)``,
never done, so every episode here ends by ``max_turns``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lazy import installed
from openenv_echo import LoopbackServer, echo_app, echo_package
from typer.testing import CliRunner

import envgym
from envgym.cli import app as cli_app
from envgym.errors import InvalidKwargsError, ResetNeededError, UnknownEnvError
from envgym.integrations.openenv import OpenEnvEnv, OpenEnvError, _reward, openenv_app, serve_with_openenv
from envgym.rollout import EpisodeTask, RunConfig, Runner
from envgym.rollout.agent import Agent, AgentOutput
from envgym.serve import Server
from envgym.testing import check_env

# (not importorskip: importing openenv.core takes 8 s of CPU, gradio's, that a worker collecting
# this file without running it would pay: tests/support/lazy.py)
pytestmark = pytest.mark.skipif(
    not installed("openenv"), reason="openenv-core is not installed (pip install 'envgym[integrations]')"
)

ROOT = Path(__file__).resolve().parents[2]
ACTIONS = ["hi", "hello", "good day"]
WORDLE = "envgym/Wordle-v0"


@pytest.fixture(scope="module")
def echo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("openenv_echo")
    echo_package(folder)  # imported once; every app below builds on these classes
    return folder


@pytest.fixture(scope="module")
def echo(echo_dir: Path) -> Iterator[LoopbackServer]:
    with LoopbackServer(echo_app(echo_dir)) as server:
        yield server


@pytest.fixture(scope="module")
def wordle() -> Iterator[LoopbackServer]:
    with LoopbackServer(openenv_app(WORDLE, max_sessions=4)) as server:
        yield server


@pytest.fixture(scope="module")
def wordle_served() -> Iterator[str]:
    """``envgym serve``'s base URL of Wordle (OpenEnv's clients append /ws)."""
    with Server([WORDLE], max_sessions=4) as server:
        yield server.base_url(WORDLE)


def _echo_reward(action: str) -> float:
    return 0.1 * len(action)  # the template env's reward


# -- OpenEnv's echo env as an envgym env ------------------------------------------------------------
def test_echo_env_through_make(echo: LoopbackServer) -> None:
    env = envgym.make(f"openenv:{echo.url}", admissible_actions=ACTIONS, max_turns=3)
    try:
        assert env.action_field == "message"  # the one required field of GET /schema's action
        obs, info = env.reset(seed=4)
        assert json.loads(obs) == {"echoed_message": "Echo Env environment ready!", "message_length": 0}
        assert set(envgym.core.INFO_KEYS) <= set(info)
        assert info["admissible_actions"] == ACTIONS and info["task"]["seed"] == 4
        for turn, action in enumerate(["hello", "good day", "a"], start=1):
            obs, reward, terminated, truncated, info = env.step(action)
            assert json.loads(obs) == {"echoed_message": action, "message_length": len(action)}
            assert reward == pytest.approx(_echo_reward(action))
            assert info["reward_components"] == {"reward": pytest.approx(reward)}
            assert info["action_valid"] and info["turn"] == turn and not terminated
        assert truncated and info["termination_reason"] == "max_turns" and info["success"] is False
        with pytest.raises(ResetNeededError):
            env.step("again")
    finally:
        env.close()


def test_observation_field_and_json_actions(echo: LoopbackServer) -> None:
    env = OpenEnvEnv(echo.url, observation_field="echoed_message", json_actions=True)
    try:
        assert env.reset()[0] == "Echo Env environment ready!"
        obs, reward, _, _, info = env.step('{"message": "abcd"}')
        assert (obs, reward, info["action_valid"]) == ("abcd", pytest.approx(0.4), True)
        # refused by the server's schema, or not a JSON object: invalid steps, the session goes on
        for bad in ('{"mesage": "x"}', "[1, 2]", "not json"):
            obs, reward, terminated, truncated, info = env.step(bad)
            assert obs.startswith("abcd\n\nInvalid action:") and reward == 0.0
            assert not info["action_valid"] and not (terminated or truncated)
        assert info["invalid_actions"] == 3 and info["reward_components"] == {"reward": 0.0}
        assert env.step('{"message": "ok"}')[0] == "ok"
    finally:
        env.close()


def test_envgym_contract_checker_passes_on_openenv_echo(echo: LoopbackServer) -> None:
    kwargs = {"admissible_actions": ACTIONS, "max_turns": 4}
    report = check_env(f"openenv:{echo.url}", steps=8, make_kwargs=kwargs)
    assert "seeded_determinism" in report.checks and report.valid_steps == report.steps > 0


def test_bad_arguments_fail_before_any_session(echo: LoopbackServer) -> None:
    with pytest.raises(InvalidKwargsError, match="Did you mean 'message'"):
        OpenEnvEnv(echo.url, action_field="mesage")
    with pytest.raises(InvalidKwargsError, match="starting with http://"):
        envgym.make("openenv:ftp://127.0.0.1:1")
    with pytest.raises(InvalidKwargsError, match="Did you mean 'action_field'"):
        envgym.make(f"openenv:{echo.url}", action_fild="message")
    with pytest.raises(InvalidKwargsError, match="not both"):
        OpenEnvEnv(echo.url, action_field="message", json_actions=True)
    with pytest.raises(UnknownEnvError):
        envgym.registration.spec("nosuchscheme:http://127.0.0.1:1")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "1.0", [1]])
def test_a_reward_that_is_no_finite_number_is_the_servers_failure(value: Any) -> None:
    with pytest.raises(OpenEnvError, match="expected a finite number"):
        _reward(value, "http://127.0.0.1:1")
    assert _reward(None, "http://127.0.0.1:1") == 0.0 and _reward(2, "http://127.0.0.1:1") == 2.0


@pytest.mark.parametrize(
    "frame",
    [
        '{"type": "observation", "data": {"observation": {}, "reward": NaN, "done": false}}',
        '{"type": "observation", "data": "not a mapping"}',
        "not json at all",
        '{"type": "error", "data": {"message": "boom", "code": "EXECUTION_ERROR"}}',
    ],
    ids=["nan-reward", "data-not-mapping", "not-json", "server-error"],
)
def test_a_hostile_server_frame_is_an_infrastructure_error(frame: str) -> None:
    """A server that is no OpenEnv server (a raw WebSocket one answering every message with
    ``frame``): the env raises OpenEnvError (retried by the harness), never a crash or a score."""
    from websockets.sync.server import serve

    def handler(connection: Any) -> None:
        for _ in connection:
            connection.send(frame)

    with serve(handler, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        env = OpenEnvEnv(f"http://127.0.0.1:{server.socket.getsockname()[1]}", json_actions=True)
        try:
            with pytest.raises(OpenEnvError):
                env.reset(seed=0)
        finally:
            env.close()
            server.shutdown()
            thread.join(10)


def test_dead_server_is_an_infrastructure_error(echo_dir: Path) -> None:
    server = LoopbackServer(echo_app(echo_dir)).start()
    url = server.url
    env = OpenEnvEnv(url, max_turns=5)
    try:
        env.reset(seed=0)
        server.stop()  # OpenEnv's server goes away mid-episode: its sessions close (1012)
        with pytest.raises(OpenEnvError, match="failed during step"):
            env.step("hi")
        with pytest.raises(OpenEnvError, match="cannot open a session"):
            env.reset(seed=0)
        with pytest.raises(OpenEnvError, match="cannot reach"):
            OpenEnvEnv(url)
    finally:
        env.close()
        server.stop()


# -- through the harness and the bench ------------------------------------------------------------
def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli_app, [*args, "--no-progress"], env={"COLUMNS": "400"})


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _assert_echo_episodes(records: list[dict[str, Any]], count: int, turns: int) -> None:
    assert len(records) == count
    for record in records:
        assert record["termination_reason"] == "max_turns" and len(record["turns"]) == turns
        for turn in record["turns"]:
            assert turn["action"] in ACTIONS
            assert turn["reward"] == pytest.approx(_echo_reward(turn["action"]))
        assert record["total_reward"] == pytest.approx(sum(_echo_reward(t["action"]) for t in record["turns"]))


def test_envgym_run_plays_an_openenv_server(echo: LoopbackServer, tmp_path: Path) -> None:
    env_id = f"openenv:{echo.url}"
    kwargs = ["-k", f"admissible_actions={json.dumps(ACTIONS)}", "-k", "max_turns=3"]
    result = _cli("run", env_id, "--agent", "random", "-n", "3", *kwargs, "--out", str(tmp_path / "run"), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["env_id"] == env_id and summary["episodes"] == 3
    records = _records(tmp_path / "run" / "episodes.jsonl")
    _assert_echo_episodes(records, 3, 3)
    assert {r["env_id"] for r in records} == {env_id}
    assert summary["mean_return"] == pytest.approx(sum(r["total_reward"] for r in records) / 3)


def test_envgym_bench_runs_a_suite_naming_an_openenv_server(echo: LoopbackServer, tmp_path: Path) -> None:
    suite = tmp_path / "echo-v1.yaml"
    entry = {"name": "echo", "env": f"openenv:{echo.url}", "kwargs": {"admissible_actions": ACTIONS}}
    suite.write_text(
        json.dumps({"name": "echo", "version": 1, "defaults": {"episodes": 2, "max_turns": 2}, "entries": [entry]})
    )
    result = _cli("bench", "run", str(suite), "--agent", "random", "--out", str(tmp_path / "bench"), "--json")
    assert result.exit_code == 0, result.output
    _assert_echo_episodes(_records(tmp_path / "bench" / "entries" / "echo" / "episodes.jsonl"), 2, 2)


class _RestartsTheServer(Agent):
    """Says ``hello``; on its ``at``-th call it stops OpenEnv's server (and starts it again on the
    same port when ``back``), so the step it answers meets a closed session."""

    name = "restarts-the-server"

    def __init__(self, server: LoopbackServer, at: int, back: bool) -> None:
        self.server, self.at, self.back, self.calls = server, at, back, 0

    def act(self, batch: Any) -> list[AgentOutput]:
        self.calls += 1
        if self.calls == self.at:
            self.server.restart() if self.back else self.server.stop()
        return [AgentOutput("hello") for _ in batch]


@pytest.mark.parametrize("back", [True, False], ids=["server-back", "server-gone"])
def test_server_stopped_mid_run_is_retried_not_scored(echo_dir: Path, back: bool) -> None:
    server = LoopbackServer(echo_app(echo_dir)).start()
    try:
        tasks = [EpisodeTask(f"openenv:{server.url}", seed=s, env_kwargs={"max_turns": 3}) for s in (0, 1)]
        agent = _RestartsTheServer(server, at=2, back=back)
        result = Runner(RunConfig(agent="random", tasks=tasks, num_envs=1, max_retries=1), agent).run()
    finally:
        server.stop()
    first, second = result.trajectories
    assert first.errors and "OpenEnvError" in first.errors[0] and "env_error" in first.errors[0]
    if back:  # retried on a fresh session: both episodes played in full, nothing scored twice
        assert first.attempts == 2 and first.scored and second.scored and result.summary["retries"] == 1
        for traj in (first, second):
            assert [t.reward for t in traj.turns] == [pytest.approx(0.5)] * 3
    else:  # never scored as a zero: recorded as env_error and left out of the scores
        assert first.termination_reason == second.termination_reason == "env_error"
        assert not first.scored and not second.scored
        assert result.summary["scored"] == 0 and result.summary["mean_return"] is None
        assert result.summary["infra_errors"] == {"env_error": 2}


# -- envgym envs on OpenEnv's server --------------------------------------------------------------
def test_openenv_client_plays_envgym_wordle_with_in_process_rewards(wordle: LoopbackServer) -> None:
    from openenv.core import GenericEnvClient

    guesses = ["crane", "xx", "slate", "pious", "proud", "mount", "bliss", "shirt", "house"]  # 8 valid: the end
    local = envgym.make(WORDLE)
    obs, info = local.reset(seed=11)
    with GenericEnvClient(base_url=wordle.url).sync() as client:
        served = client.reset(seed=11)
        assert served.observation["obs"] == obs and served.observation["info"]["task"] == info["task"]
        for guess in guesses:
            obs, reward, terminated, truncated, info = local.step(guess)
            served = client.step({"action": guess})
            assert served.observation["obs"] == obs and served.reward == pytest.approx(reward)
            assert served.observation["info"]["reward_components"] == pytest.approx(info["reward_components"])
            assert served.observation["info"]["action_valid"] == info["action_valid"]
            assert served.done == (terminated or truncated)
            if served.done:
                break
    assert served.done and served.observation["terminated"] == terminated
    local.close()


@pytest.mark.parametrize("server", ["openenv_app", "envgym_serve"])
def test_envgym_env_round_trips_through_openenv(server: str, request: pytest.FixtureRequest) -> None:
    """envgym -> OpenEnv's server (or envgym serve) -> OpenEnv's client -> envgym: the same
    episode as in-process."""
    url = request.getfixturevalue("wordle").url if server == "openenv_app" else request.getfixturevalue("wordle_served")
    local, remote = envgym.make(WORDLE), envgym.make(f"openenv:{url}")
    try:
        assert remote.action_field == "action"
        assert remote.reset(seed=5) == local.reset(seed=5)
        for guess in ["adieu", "zz", "story", "lymph", "crwth", "fjord"]:
            mine, theirs = local.step(guess), remote.step(guess)
            assert theirs[:4] == mine[:4]
            assert theirs[4]["reward_components"] == mine[4]["reward_components"]
            assert theirs[4]["termination_reason"] == mine[4]["termination_reason"]
            if mine[2] or mine[3]:
                break
    finally:
        local.close()
        remote.close()


def test_openenv_app_refuses_what_it_cannot_serve() -> None:
    with pytest.raises(UnknownEnvError, match="Did you mean"):
        openenv_app("envgym/Wordel-v0")
    with pytest.raises(envgym.errors.ConfigError, match="max_sessions"):
        openenv_app(WORDLE, max_sessions=0)


@pytest.mark.slow
def test_serve_with_openenv_runs_openenv_server_in_a_subprocess() -> None:
    """The side-by-side baseline: OpenEnv's server for an envgym env, in its own process."""
    from openenv.core import GenericEnvClient

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    local = envgym.make(WORDLE, difficulty="easy")
    with serve_with_openenv(WORDLE, port, difficulty="easy") as server:
        assert server.url == f"http://127.0.0.1:{port}"
        with GenericEnvClient(base_url=server.url).sync() as client:
            assert client.reset(seed=2).observation["obs"] == local.reset(seed=2)[0]
            for guess in ("crane", "moist"):
                assert client.step({"action": guess}).reward == pytest.approx(local.step(guess)[1])
    assert server.process.poll() is not None  # stopped on leaving the block
    local.close()
    with pytest.raises(envgym.errors.ConfigError, match="port"):
        serve_with_openenv(WORDLE, 0)


# -- the example ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_example_openenv_client_smoke() -> None:
    """examples/openenv_client.py --smoke: OpenEnv's GenericEnvClient plays envgym serve's envs."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openenv_client.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    episodes = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [e["env_id"] for e in episodes] == ["envgym/Wordle-v0", "envgym/Sokoban-v0"]
    for episode in episodes:
        assert episode["same_as_in_process"] and episode["done"] and episode["success"]
        assert len(episode["rewards"]) == len(episode["actions"]) >= 1
        assert episode["return"] == pytest.approx(sum(episode["rewards"]))
