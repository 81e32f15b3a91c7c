"""Toy environments for the ``envgym serve`` tests (registered by :func:`register_serve_toys`).

* ``servetoy/Probe-v0``: a text env that counts its live instances (``Probe.live``) and its closes
  (a second ``close`` raises); ``build_delay`` makes its constructor slow;
  actions ``tick``, ``done`` (ends), ``crash`` (raises), ``block`` (waits until
  :data:`RELEASE` is set, at most 30 s); reset with ``options={"crash": True}`` raises.
* ``servetoy/Box-v0``: a Box action (2 floats in [0, 1]) and an array observation.
* ``servetoy/Duo-v0``: a PettingZoo ParallelEnv with agents ``talker`` (text) and ``counter``
  (Discrete(3)), two rounds.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from envgym import EnvSpec
from envgym.registration import register
from envgym.spaces import Text

PROBE_ID = "servetoy/Probe-v0"
BOX_ID = "servetoy/Box-v0"
DUO_ID = "servetoy/Duo-v0"
#: Set it to let ``block`` steps return.
RELEASE = threading.Event()
_LOCK = threading.Lock()


class Probe(gym.Env[str, str]):
    """Count ticks up to ``size``; a class-wide count of live instances, for leak checks."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}
    live = 0
    closes = 0

    def __init__(self, size: int = 3, *, tag: str = "", build_delay: float = 0.0) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        time.sleep(build_delay)  # a slow constructor (a browser launch, a container start)
        self.size = size
        self.tag = tag
        self.ticks = 0
        self.observation_space = Text()
        self.action_space = Text()
        self._closed = False
        with _LOCK:
            Probe.live += 1

    def _obs(self) -> str:
        return f"size={self.size} tag={self.tag} ticks={self.ticks}"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if options and options.get("crash"):
            raise RuntimeError("reset crashed on purpose")
        self.ticks = 0
        return self._obs(), {"seed": seed, "task": {"id": f"probe-{seed}"}, "components": {"tick_reward": 0.0}}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if action == "crash":
            raise RuntimeError("step crashed on purpose")
        if action == "block":
            RELEASE.wait(30)
        valid = isinstance(action, str) and action in ("tick", "done", "block")
        if valid:
            self.ticks += 1
        terminated = action == "done" or self.ticks >= self.size
        reward = 0.5 if valid else -1.0
        return self._obs(), reward, terminated, False, {"action_valid": valid, "tick_reward": reward}

    def render(self) -> str:
        return f"[{self._obs()}]"

    def close(self) -> None:
        with _LOCK:
            if self._closed:
                raise AssertionError("closed twice")
            self._closed = True
            Probe.live -= 1
            Probe.closes += 1


class BoxToy(gym.Env[np.ndarray, np.ndarray]):
    """The observation is the last action and its sum; an episode is two steps."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        assert isinstance(action, np.ndarray) and action.dtype == np.float32, action
        self.t += 1
        obs = np.array([action[0], action[1], -np.inf], np.float32)
        return obs, float(action.sum()), self.t >= 2, False, {"array": action}


class Duo(ParallelEnv):
    """Two agents, two rounds: ``talker`` earns 1 for saying ``hi``; ``counter`` earns its number."""

    metadata: ClassVar[dict[str, Any]] = {"name": "duo", "is_parallelizable": True}

    def __init__(self, rounds: int = 2) -> None:
        self.rounds = rounds
        self.possible_agents = ["talker", "counter"]
        self.agents: list[str] = []
        self._obs_spaces = {"talker": Text(), "counter": spaces.Box(0, 10, (1,), np.int64)}
        self._act_spaces = {"talker": Text(), "counter": spaces.Discrete(3)}
        self.t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_spaces[agent]

    def _obs(self) -> dict[str, Any]:
        return {"talker": f"round {self.t}", "counter": np.array([self.t], np.int64)}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {"seed": seed} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        assert type(actions["counter"]) is int, actions
        self.t += 1
        rewards = {"talker": 1.0 if actions["talker"] == "hi" else 0.0, "counter": float(actions["counter"])}
        over = self.t >= self.rounds
        terminations = {a: over for a in self.agents}
        truncations = {a: False for a in self.agents}
        infos = {a: {"round": self.t} for a in self.agents}
        obs = self._obs()
        if over:
            self.agents = []
        return obs, rewards, terminations, truncations, infos


def register_serve_toys() -> None:
    """Register the toy ids (idempotent)."""
    register(EnvSpec(id=PROBE_ID, entry_point="serve_toy_envs:Probe", family="test", summary="serve test env"))
    register(EnvSpec(id=BOX_ID, entry_point="serve_toy_envs:BoxToy", family="test", summary="serve test env"))
    register(
        EnvSpec(id=DUO_ID, entry_point="serve_toy_envs:Duo", family="test", summary="serve test env", kind="parallel")
    )
