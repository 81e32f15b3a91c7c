"""OpenEnv's own clients, unchanged, against ``envgym serve``: a whole Wordle episode through
``GenericEnvClient`` (async and ``.sync()``) and OpenEnv's HTTP endpoints, equal to in-process play."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from lazy import installed

import envgym
from envgym.serve import Server

#: openenv.core.generic_client.GenericEnvClient, imported when the module's first test runs
#: (:func:`_openenv`): importing OpenEnv (gradio, fastmcp) takes ~8 s of CPU, which a worker
#: collecting this file without running it would pay (tests/support/lazy.py).
GenericEnvClient: Any = None

# asyncio.run in the main thread needs no Playwright of an earlier test holding it (conftest).
pytestmark = [
    pytest.mark.skipif(not installed("openenv"), reason="OpenEnv: pip install 'envgym[integrations]'"),
    pytest.mark.slow,
    pytest.mark.usefixtures("no_thread_playwright"),
]
WORDLE = "envgym/Wordle-v0"
GUESSES = ["crane", "zzzzz", "slate", "pious", "dying", "mound", "wreck", "fjord", "blimp", "gusty"]


@pytest.fixture(scope="module", autouse=True)
def _openenv() -> None:
    global GenericEnvClient
    from openenv.core.generic_client import GenericEnvClient


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server([WORDLE, "envgym/Sokoban-v0"]) as running:
        yield running


def _in_process(seed: int) -> list[tuple[str, float, bool, dict]]:
    """(obs, reward, done, reward components) of each step of the episode played here."""
    env = envgym.make(WORDLE)
    obs, _ = env.reset(seed=seed)
    out = [(obs, None, False, {})]
    for guess in GUESSES:
        obs, reward, terminated, truncated, info = env.step(guess)
        out.append((obs, reward, terminated or truncated, info["reward_components"]))
        if terminated or truncated:
            break
    env.close()
    return out


def test_generic_env_client_sync_plays_an_episode(server: Server) -> None:
    expected = _in_process(seed=5)
    with GenericEnvClient(base_url=server.base_url(WORDLE)).sync() as client:
        result = client.reset(seed=5)
        assert result.observation["obs"] == expected[0][0] and result.reward is None and result.done is False
        assert result.observation["info"]["task"]["seed"] == 5
        for guess, (obs, reward, done, components) in zip(GUESSES, expected[1:], strict=False):
            result = client.step({"action": guess})
            assert result.observation["obs"] == obs and result.reward == reward and result.done == done
            assert result.observation["info"]["reward_components"] == components
        assert result.done is True
        state = client.state()
        assert state["env_id"] == WORDLE and state["step_count"] == len(expected) - 1 and state["done"] is True
    # the default address (the first served id) works too
    with GenericEnvClient(base_url=server.url).sync() as client:
        assert client.reset(seed=5).observation["obs"] == expected[0][0]


def test_generic_env_client_async(server: Server) -> None:
    expected = _in_process(seed=9)

    async def play() -> list[float | None]:
        async with GenericEnvClient(base_url=server.base_url(WORDLE)) as client:
            rewards = [(await client.reset(seed=9)).reward]
            for guess in GUESSES[: len(expected) - 1]:
                rewards.append((await client.step({"action": guess})).reward)
            return rewards

    assert asyncio.run(play()) == [r for _, r, _, _ in expected]


def test_server_errors_reach_openenv_clients(server: Server) -> None:
    with GenericEnvClient(base_url=server.base_url(WORDLE)).sync() as client:
        with pytest.raises(RuntimeError, match="NOT_RESET"):
            client.step({"action": "crane"})
        assert client.reset(seed=1).done is False  # the session is still there


def test_openenv_http_endpoints(server: Server) -> None:
    base = server.base_url("envgym/Sokoban-v0")
    assert httpx.get(f"{base}/health", timeout=30).json()["status"] == "healthy"
    schema = httpx.get(f"{base}/schema", timeout=30).json()
    assert schema["action"]["required"] == ["action"] and "step_count" in schema["state"]["properties"]
    metadata = httpx.get(f"{base}/metadata", timeout=30).json()
    assert metadata["name"] == "envgym/Sokoban-v0" and metadata["readme_content"]
    env = envgym.make("envgym/Sokoban-v0")
    obs, _ = env.reset(seed=2)
    step_obs, reward, *_ = env.step("push up")
    env.close()
    reset = httpx.post(f"{base}/reset", json={"seed": 2}, timeout=30).json()
    assert reset["observation"]["obs"] == obs and reset["done"] is False
    step = httpx.post(f"{base}/step", json={"action": {"action": "push up"}, "seed": 2}, timeout=30).json()
    assert step["observation"]["obs"] == step_obs and step["reward"] == reward
