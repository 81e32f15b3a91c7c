"""The agent protocol: batched, so one model call can serve many live episodes.

An :class:`Agent` receives a batch of :class:`AgentInput` (one per live episode) and returns one
:class:`AgentOutput` per input, in order. Agents that think one episode at a time (solvers,
scripted players, a person) subclass :class:`PolicyAgent` and write a per-episode
:class:`Policy` instead.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Agent", "AgentInput", "AgentOutput", "Policy", "PolicyAgent", "RandomAgent"]


@dataclass(frozen=True, slots=True)
class AgentInput:
    """One live episode's state, as the agent sees it.

    Attributes:
        episode_id: unique id of the episode within a run.
        env_id: the registered environment id.
        observation: the latest observation text.
        info: the latest ``info`` dict (``task``, ``admissible_actions``, ...).
        turn: number of actions taken so far in the episode.
        messages: chat history prepared by the prompting layer (empty when unused).
        sample_action: the environment's ``sample_action(rng)`` (a random, valid-when-possible
            action for the current state) when the env runs in this process, else ``None``.
            Baselines use it on envs whose action set is infinite; learning agents ignore it.
    """

    episode_id: str
    env_id: str
    observation: str
    info: dict[str, Any]
    turn: int
    messages: tuple[dict[str, str], ...] = ()
    sample_action: Callable[[random.Random], str] | None = None


@dataclass(slots=True)
class AgentOutput:
    """What the agent said. ``token_ids``/``logprobs`` are the exact sampled ones, if known."""

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Agent(abc.ABC):
    """Batched agent. ``act`` must return exactly one output per input, in order."""

    name: str = "agent"

    @abc.abstractmethod
    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        """Choose the next action of every episode in ``batch``."""

    def start_episode(self, episode_id: str, env_id: str, seed: int | None) -> None:  # noqa: B027 - optional hook
        """Called before an episode's first turn."""

    def end_episode(self, episode_id: str) -> None:  # noqa: B027 - optional hook
        """Called after an episode ended (or was abandoned)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (models, connections)."""


class Policy(abc.ABC):
    """Per-episode decision maker used by :class:`PolicyAgent`. May keep state between turns."""

    @abc.abstractmethod
    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Return the next action text."""


class PolicyAgent(Agent):
    """An agent that runs one :class:`Policy` per episode, created by ``factory(env_id, seed)``."""

    def __init__(self, factory: Callable[[str, int | None], Policy], name: str = "policy") -> None:
        self.factory = factory
        self.name = name
        self._policies: dict[str, Policy] = {}

    def start_episode(self, episode_id: str, env_id: str, seed: int | None) -> None:
        self._policies[episode_id] = self.factory(env_id, seed)

    def end_episode(self, episode_id: str) -> None:
        self._policies.pop(episode_id, None)

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        outputs = []
        for item in batch:
            policy = self._policies.get(item.episode_id)
            if policy is None:  # started without start_episode: create lazily
                policy = self._policies[item.episode_id] = self.factory(item.env_id, None)
            outputs.append(AgentOutput(policy.act(item.observation, item.info)))
        return outputs


class RandomAgent(Agent):
    """Uniform over ``info["admissible_actions"]``; where the action set is infinite (no list),
    the environment's own ``sample_action`` (passed in :class:`AgentInput` by in-process runners),
    else the empty action. Seeded per episode: ``seed * 1_000_003 + episode seed``."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rngs: dict[str, random.Random] = {}

    def start_episode(self, episode_id: str, env_id: str, seed: int | None) -> None:
        self._rngs[episode_id] = random.Random(None if seed is None else self.seed * 1_000_003 + seed)

    def end_episode(self, episode_id: str) -> None:
        self._rngs.pop(episode_id, None)

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        outputs = []
        for item in batch:
            rng = self._rngs.setdefault(item.episode_id, random.Random(self.seed))
            actions = item.info.get("admissible_actions")
            if actions:
                text = rng.choice(actions)
            elif item.sample_action is not None:
                text = item.sample_action(rng)
            else:
                text = ""
            outputs.append(AgentOutput(text))
        return outputs
