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
            action for the current state) when the env runs in this process; for envs in worker
            processes a callable returning an action the worker sampled; ``None`` when unknown.
            Baselines use it on envs whose action set is infinite; learning agents ignore it.
        max_new_tokens: the most completion tokens this turn may use (the prompt config's
            per-reply cap or what is left of the episode's token budget, whichever is smaller),
            or ``None`` for the agent's own limit. Agents never exceed their own limit either.
        stop: strings that end the reply (the harness sends ``("</action>",)`` for the default
            action tag, so a chat model stops as soon as its action is complete). The reply
            keeps the stop string where the agent can (a local model); an API that drops it may
            put the closing tag back. Non-chat agents ignore it.
    """

    episode_id: str
    env_id: str
    observation: str
    info: dict[str, Any]
    turn: int
    messages: tuple[dict[str, str], ...] = ()
    sample_action: Callable[[random.Random], str] | None = None
    max_new_tokens: int | None = None
    stop: tuple[str, ...] = ()

    @classmethod
    def for_turn(
        cls, episode_id: str, env_id: str, observation: str, info: Any, turn: int, conv: Any, sample_action: Any
    ) -> AgentInput:
        """The input of one turn of a live episode, with the chat fields from its ``Conversation``
        (``conv``; ``None`` for agents that are not chat agents)."""
        return cls(
            episode_id,
            env_id,
            observation,
            info,
            turn,
            conv.messages() if conv is not None else (),
            sample_action,
            conv.max_new_tokens if conv is not None else None,
            conv.stop if conv is not None else (),
        )


@dataclass(slots=True)
class AgentOutput:
    """What the agent said.

    Attributes:
        text: the completion (for a chat agent, the whole reply; the prompting layer extracts the
            action from it) or, for a non-chat agent, the action itself.
        token_ids: the completion's token ids exactly as sampled (no re-tokenisation), if known.
        logprobs: the model's log-probability of each of ``token_ids`` (same length), at
            temperature 1 without top-k/top-p truncation: what a trainer's teacher-forced forward
            pass recomputes. Agents that sample from a changed distribution may put those
            log-probs in ``extra["sampling_logprobs"]``.
        prompt_token_ids: the prompt's token ids exactly as fed to the model, if known.
        finish_reason: ``"stop"`` (end of message), ``"length"`` (token limit) or ``None``.
        extra: anything else worth keeping in the trajectory (JSON-serialisable).
    """

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Agent(abc.ABC):
    """Batched agent. ``act`` must return exactly one output per input, in order.

    Class attributes:
        name: shown in reports and recorded in trajectories.
        chat: ``True`` for agents that read ``AgentInput.messages`` (chat history built by the
            prompting layer) and whose ``text`` is a reply the action is extracted from;
            ``False`` (default) for agents whose ``text`` is the action (solvers, scripts, random).
        wants_sample_action: ``True`` for agents that use ``AgentInput.sample_action``; remote
            backends then sample an action in the worker at every step (it costs time there).
    """

    name: str = "agent"
    chat: bool = False
    wants_sample_action: bool = False

    @abc.abstractmethod
    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        """Choose the next action of every episode in ``batch``."""

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        """Called before an episode's first turn.

        ``seed`` is the environment seed; ``member`` tells apart the episodes of a group (group
        rollouts play the same seed ``k`` times), so sampling agents seed themselves from both.
        """

    def end_episode(self, episode_id: str) -> None:
        """Called after an episode ended (or was abandoned)."""

    def reset(self) -> None:
        """Forget every episode's state (a runner calls it before a run)."""

    def close(self) -> None:
        """Release resources (models, connections). Calling it twice is harmless."""


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

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        self._policies[episode_id] = self.factory(env_id, seed)

    def end_episode(self, episode_id: str) -> None:
        self._policies.pop(episode_id, None)

    def reset(self) -> None:
        self._policies.clear()

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
    the environment's own ``sample_action`` (passed in :class:`AgentInput` by the runners),
    else the empty action. Seeded per episode from (agent seed, episode seed, group member)."""

    name = "random"
    wants_sample_action = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rngs: dict[str, random.Random] = {}

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        self._rngs[episode_id] = random.Random(
            None if seed is None else (self.seed * 1_000_003 + seed) * 1_009 + member
        )

    def end_episode(self, episode_id: str) -> None:
        self._rngs.pop(episode_id, None)

    def reset(self) -> None:
        self._rngs.clear()

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
