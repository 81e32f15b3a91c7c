"""envgym.remote against a live envgym serve on loopback: the contract checkers, in-process
equality, typed errors (unknown id, refused kwargs, step before reset, a killed server)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import gymnasium
import pytest

import envgym
from envgym import remote
from envgym.errors import ConfigError, InvalidKwargsError, ResetNeededError, UnknownEnvError
from envgym.registration import make_parallel
from envgym.serve import Server
from envgym.testing import check_env
from envgym.testing.common import BAD_ACTIONS, CheckReport, check_close_twice
from envgym.testing.multi_agent import (
    check_parallel_bad_inputs,
    check_parallel_determinism,
    check_parallel_invalid_run,
    check_parallel_pettingzoo,
    check_parallel_reset_info,
    check_parallel_step_before_reset,
)

SOKOBAN = "envgym/Sokoban-v0"
WORDLE = "envgym/Wordle-v0"
PARALLEL = "envgym/Coop-TrustDilemma-v0"
PARALLEL_TEXT = "envgym/Coop-TrustDilemma-Text-v0"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    # The coopetition ids are registered both ways: served here as PettingZoo Parallel envs.
    kinds = {PARALLEL: "parallel", PARALLEL_TEXT: "parallel"}
    with Server([SOKOBAN, WORDLE, PARALLEL, PARALLEL_TEXT], idle_timeout=60.0, kinds=kinds) as live:
        yield live


def _transitions(env: object, seed: int, actions: list[object]) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = [env.reset(seed=seed)]  # type: ignore[attr-defined]
    for action in actions:
        out.append(env.step(action))  # type: ignore[attr-defined]
    return out


def test_make_builds_the_kind_the_server_names(server: Server) -> None:
    with remote.make(server.url, SOKOBAN) as env:
        assert isinstance(env, remote.RemoteEnv) and isinstance(env, gymnasium.Env)
        local = envgym.make(SOKOBAN)
        assert env.observation_space == local.observation_space and env.action_space == local.action_space
        assert env.reward_components == local.unwrapped.reward_components
        assert env.metadata["picklable"] is False and env.metadata["render_modes"] == local.metadata["render_modes"]
        assert env.spec is not None and env.spec.id == remote.REMOTE_ID
        assert env.spec.kwargs["env_id"] == SOKOBAN
        local.close()
    parallel = remote.make(server.url, PARALLEL)
    try:
        assert isinstance(parallel, remote.RemoteParallelEnv)
        local = make_parallel(PARALLEL)
        assert parallel.possible_agents == list(local.possible_agents)
        agent = parallel.possible_agents[0]
        assert parallel.observation_space(agent) is parallel.observation_space(agent)
        assert parallel.action_space(agent) == local.action_space(agent)
        local.close()
    finally:
        parallel.close()


def test_the_envgym_and_gymnasium_checkers_pass_on_a_served_text_game(server: Server) -> None:
    env = remote.make(server.url, SOKOBAN)
    report = check_env(env)  # gymnasium's check_env included; twins come from env.spec
    assert {"gymnasium.check_env", "step_before_reset", "reset_info", "seeded_determinism", "bad_input_fuzz"} <= set(
        report.checks
    )
    assert "pickle_roundtrip" not in report.checks  # a live connection opts out (metadata["picklable"])
    assert report.valid_steps > 0


def test_the_parallel_checks_pass_on_a_served_multi_agent_env(server: Server) -> None:
    """Every check of check_parallel_env, split over the two views of one game: the numeric view's
    rollouts sample its Box action spaces (a text view's rollouts need the env's own
    sample_action, which does not travel), and the text view takes any value as an invalid move
    (a value that is no Box action is the protocol's BAD_ACTION on the numeric view)."""
    factory = lambda: remote.make(server.url, PARALLEL)
    report = CheckReport(PARALLEL)
    check_parallel_pettingzoo(factory, PARALLEL, 50, report)
    check_parallel_step_before_reset(factory, PARALLEL, report)
    with factory() as env:
        check_parallel_reset_info(env, PARALLEL, 0, report)
        check_parallel_determinism(env, factory, PARALLEL, (0, 1, 2), 200, report)
        check_close_twice(env, PARALLEL, report)
    assert report.valid_steps > 0
    with remote.make(server.url, PARALLEL_TEXT) as env:
        check_parallel_bad_inputs(env, PARALLEL_TEXT, 0, report)
        check_parallel_invalid_run(env, PARALLEL_TEXT, 0, 200, report)
    assert set(report.checks) == {
        "pettingzoo.parallel_api_test",
        "pettingzoo.parallel_seed_test",
        "step_before_reset",
        "reset_info",
        "seeded_determinism",
        "close_twice",
        "bad_input_fuzz",
        "invalid_run_ends",
    }
    with factory() as env:
        env.reset(seed=0)
        with pytest.raises(remote.RemoteError, match="BAD_ACTION") as caught:
            env.step(dict.fromkeys(env.agents, "ten"))
        assert caught.value.code == "BAD_ACTION" and not caught.value.retryable
        _, rewards, *_ = env.step({agent: [5.0] for agent in env.agents})  # the session survives a bad action
        assert set(rewards) == set(env.possible_agents)


@pytest.mark.parametrize("env_id", [SOKOBAN, WORDLE])
def test_a_seed_plays_the_same_episode_as_in_process(server: Server, env_id: str) -> None:
    local = envgym.make(env_id, max_turns=12)
    served = remote.make(server.url, env_id, max_turns=12)  # kwargs travel with the first reset
    try:
        _, info = local.reset(seed=5)
        actions = list((info["admissible_actions"] or ["crane", "slate", "pious"])[:3]) + [
            "nonsense",
            "",
            "push up",
        ]
        a = _transitions(local, 5, actions)
        b = _transitions(served, 5, actions)
        assert a == b  # observations, rewards, flags and infos (reward components, task, seed) equal
        assert b[-1][4]["reward_components"] == a[-1][4]["reward_components"]
        assert b[0][1]["task"] == a[0][1]["task"]
    finally:
        local.close()
        served.close()


def test_gymnasium_make_builds_the_client(server: Server) -> None:
    env = gymnasium.make(remote.REMOTE_ID, url=server.url, env_id=WORDLE, max_turns=3)
    local = envgym.make(WORDLE, max_turns=3)
    try:
        assert isinstance(env.unwrapped, remote.RemoteEnv)
        assert env.reset(seed=2) == local.reset(seed=2)
        assert env.step("crane") == local.step("crane")
    finally:
        env.close()
        local.close()


def test_every_bad_action_is_an_invalid_step_not_an_exception(server: Server) -> None:
    with remote.make(server.url, SOKOBAN) as env:
        for bad in BAD_ACTIONS:
            env.reset(seed=0)
            *_, info = env.step(bad)
            assert info["action_valid"] is False, bad


def test_an_unknown_id_says_which_ids_are_served(server: Server) -> None:
    with pytest.raises(remote.UnknownRemoteEnvError, match=r"Did you mean 'envgym/Sokoban-v0'\?") as caught:
        remote.make(server.url, "envgym/Sokobn-v0")
    assert isinstance(caught.value, UnknownEnvError) and caught.value.code == "UNKNOWN_ENV"
    assert not caught.value.retryable and "It serves: envgym/Coop" in str(caught.value)


def test_refused_kwargs_and_a_step_before_reset_are_typed_errors(server: Server) -> None:
    with remote.make(server.url, SOKOBAN, sizee=6) as env:
        with pytest.raises(remote.RemoteKwargsError, match="sizee") as caught:
            env.reset(seed=0)
        assert isinstance(caught.value, InvalidKwargsError) and caught.value.code == "BAD_KWARGS"
    with remote.make(server.url, SOKOBAN) as env, pytest.raises(ResetNeededError):
        env.step("up")
    with pytest.raises(ConfigError, match="travel as JSON"):
        remote.make(server.url, SOKOBAN, reward=lambda x: x)
    with pytest.raises(ConfigError, match="ws://HOST:PORT"):
        remote.make("ftp://127.0.0.1:1", SOKOBAN)


def test_close_is_idempotent_and_ends_the_servers_session(server: Server) -> None:
    before = server.active_sessions
    env = remote.make(server.url, WORDLE)
    env.reset(seed=0)
    assert server.active_sessions == before + 1
    env.close()
    env.close()
    deadline = time.monotonic() + 10
    while server.active_sessions != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.active_sessions == before
    with pytest.raises(TypeError, match="does not pickle"):
        pickle.dumps(remote.make(server.url, WORDLE))


def test_nothing_listening_is_a_retryable_connection_error() -> None:
    with Server([WORDLE]) as gone:
        url = gone.url
    with pytest.raises(remote.ServerLostError) as caught:
        remote.make(url, WORDLE)
    assert caught.value.retryable and caught.value.code == "CONNECT_FAILED"
    assert isinstance(caught.value, ConnectionError)


def _serve_in_subprocess(env_id: str) -> tuple[subprocess.Popen[str], str]:
    code = (
        "import sys\n"
        "from envgym.serve import Server\n"
        f"server = Server([{env_id!r}]).start()\n"
        "print(server.url, flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return proc, url


def test_a_server_killed_mid_episode_is_a_retryable_infrastructure_error() -> None:
    proc, url = _serve_in_subprocess(SOKOBAN)
    try:
        env = remote.make(url, SOKOBAN)
        env.reset(seed=1)
        env.step("up")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        with pytest.raises(remote.ServerLostError) as caught:
            env.step("down")
        assert caught.value.retryable and caught.value.code == "CONNECTION_LOST"
        with pytest.raises(remote.ServerLostError):  # the session is gone; the next reset reconnects (and fails)
            env.reset(seed=1)
        env.close()
        env.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
