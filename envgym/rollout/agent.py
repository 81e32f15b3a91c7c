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
    """

    episode_id: str
    env_id: str
    observation: str
    info: dict[str, Any]
    turn: int
    messages: tuple[dict[str, str], ...] = ()


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


class _RandomPolicy(Policy):
    def __init__(self, seed: int | None) -> None:
        self.rng = random.Random(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        actions = info.get("admissible_actions")
        if actions:
            return self.rng.choice(actions)
        return "look"


class RandomAgent(PolicyAgent):
    """Uniform over ``info["admissible_actions"]`` (seeded per episode); ``"look"`` when unknown."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(lambda env_id, s: _RandomPolicy(None if s is None else seed * 1_000_003 + s), name="random")
