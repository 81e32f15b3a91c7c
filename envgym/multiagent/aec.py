"""The base of turn-based text games: :class:`TextAECEnv` and what a move returns, :class:`Played`.

A game subclasses :class:`TextAECEnv` and writes only its rules; the base keeps the PettingZoo AEC
API and the envgym per-agent contract, with the conventions documented in :mod:`envgym.multiagent`
(invalid moves and forfeits, rewards, dead agents).
"""

from __future__ import annotations

import inspect
import math
import random
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from gymnasium.utils import seeding
from pettingzoo import AECEnv

from envgym.core import InvalidAction, Task, TerminationReason, check_init_kwargs
from envgym.errors import InvalidKwargsError, ResetNeededError
from envgym.multiagent.text import TextObservation, TextSpaces, action_text, shown_action, unknown_agent

__all__ = ["DEFAULT_INVALID_LIMIT", "Played", "TextAECEnv"]

#: Invalid moves in a row after which a player of a :class:`TextAECEnv` forfeits.
DEFAULT_INVALID_LIMIT = 3


@dataclass(frozen=True, slots=True)
class Played:
    """What :meth:`TextAECEnv._play` returns for a legal move.

    Attributes:
        text: the move told in the third person, shown to every player (``"X played b2."``).
        winner: the agent that won with this move, if any.
        draw: the game ended in a draw.
    """

    text: str
    winner: str | None = None
    draw: bool = False


class TextAECEnv(TextSpaces, AECEnv[str, str, str]):
    """Base class of turn-based text games between named players (see the module docstring).

    Subclasses set :attr:`name`, ``metadata["name"]`` and :attr:`players`, and implement
    :meth:`_new_game`, :meth:`_parse`, :meth:`_play`, :meth:`state_text`,
    :meth:`legal_actions` and :meth:`role`; :meth:`_intro` and :meth:`_status` have defaults.

    Common keyword arguments of every subclass:

    Args:
        invalid_limit: invalid moves in a row after which a player forfeits (a positive integer).
        invalid_penalty: value of the ``invalid_action_reward`` component for each invalid move.
        draw_reward: value of the ``draw_reward`` component every player gets on a draw.
        render_mode: ``"ansi"`` (``render()`` returns the board text) or ``"human"`` (prints it).
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "human"],
        "name": "text_aec_v0",
        "is_parallelizable": False,
        "render_fps": 4,
    }
    #: Game name used in task ids.
    name: ClassVar[str] = "text_aec"
    #: The players, in turn order (``player_0`` moves first).
    players: ClassVar[tuple[str, ...]] = ("player_0", "player_1")
    #: Reward components every agent's info carries.
    reward_components: ClassVar[tuple[str, ...]] = (
        "success_reward",
        "loss_reward",
        "draw_reward",
        "invalid_action_reward",
    )
    #: The components every agent's reward is built from (their sum; none is diagnostic).
    reward_basis: ClassVar[tuple[str, ...]] = (
        "success_reward",
        "loss_reward",
        "draw_reward",
        "invalid_action_reward",
    )
    #: Tags whose content is taken as the action (``<action>b2</action>``).
    action_tags: ClassVar[tuple[str, ...]] = ("action",)
    #: True when a bare number is an action in the game's own words (as ``TextEnv``'s).
    numbers_are_actions: ClassVar[bool] = False
    #: Reward component values of a win and of a loss.
    win_value: ClassVar[float] = 1.0
    loss_value: ClassVar[float] = -1.0

    _init_params: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_init_kwargs(cls, TextAECEnv)

    def __init__(
        self,
        *,
        invalid_limit: int = DEFAULT_INVALID_LIMIT,
        invalid_penalty: float = -0.1,
        draw_reward: float = 0.0,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        if isinstance(invalid_limit, bool) or not isinstance(invalid_limit, int) or invalid_limit < 1:
            raise InvalidKwargsError(
                f"invalid_limit must be a positive integer (invalid moves in a row before a forfeit), "
                f"got {invalid_limit!r}."
            )
        for label, value in (("invalid_penalty", invalid_penalty), ("draw_reward", draw_reward)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidKwargsError(f"{label} must be a finite number, got {value!r}.")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise InvalidKwargsError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}."
            )
        if not hasattr(self, "_init_kwargs"):
            self._init_kwargs: dict[str, Any] = {}
        self.invalid_limit = invalid_limit
        self.invalid_penalty = float(invalid_penalty)
        self.draw_reward = float(draw_reward)
        self.render_mode = render_mode
        self.possible_agents = list(self.players)
        self._init_text_spaces(self.possible_agents)
        self.agents: list[str] = []
        self.rewards: dict[str, float] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.infos: dict[str, dict[str, Any]] = {}
        self.agent_selection = self.possible_agents[0]
        self.rng = random.Random(0)
        self._np_random: Any = None
        self._zero = dict.fromkeys(self.reward_components, 0.0)
        self._task: Task | None = None
        self._task_dict: dict[str, Any] = {}
        self._ready = False
        self._over = False
        self._winner: str | None = None
        self._turns: dict[str, int] = {}
        self._invalid: dict[str, int] = {}
        self._streak: dict[str, int] = {}
        self._valid: dict[str, bool] = {}
        self._success: dict[str, bool] = {}
        self._reasons: dict[str, TerminationReason | None] = {}
        self._components: dict[str, dict[str, float]] = {}
        self._notes: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ subclass hooks
    def _new_game(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        """Set up a new game from ``rng`` and return its task."""
        raise NotImplementedError

    def _parse(self, agent: str, text: str) -> Any:
        """Turn cleaned action text into a move, or raise :class:`InvalidAction` saying what was expected."""
        raise NotImplementedError

    def _play(self, agent: str, move: Any) -> Played:
        """Apply ``agent``'s move (raise :class:`InvalidAction` when illegal) and say what happened."""
        raise NotImplementedError

    def state_text(self) -> str:
        """The whole game state as text (the board), as shown to every player."""
        raise NotImplementedError

    def legal_actions(self, agent: str) -> list[str]:
        """The moves ``agent`` may play now, in the main action format."""
        raise NotImplementedError

    def role(self, agent: str) -> str:
        """The agent's side in words (``"X"``, ``"red"``)."""
        return agent

    def _intro(self, agent: str) -> str:
        """Rules and action format, shown to ``agent`` until it has acted once."""
        return self._task.goal if self._task is not None else ""

    def _status(self, agent: str) -> str:
        """Last line of ``agent``'s observation: whose turn it is, or how the game ended."""
        me = f"You are {agent} ({self.role(agent)})."
        if self._over:
            if self._winner is None:
                return f"{me} Game over: draw."
            if self._winner == agent:
                return f"{me} Game over: you won."
            return f"{me} Game over: {self._winner} ({self.role(self._winner)}) won."
        if agent == self.agent_selection:
            return f"{me} Your move: one of {', '.join(self.legal_actions(agent))}."
        return f"{me} Waiting for {self.agent_selection} ({self.role(self.agent_selection)}) to move."

    def sample_action(self, agent: str, rng: random.Random) -> str:
        """A random legal move of ``agent`` (used by checkers and benchmarks)."""
        actions = self.legal_actions(agent)
        if actions:
            return rng.choice(actions)
        return self.action_space(agent).sample()

    # ------------------------------------------------------------------ PettingZoo API
    @property
    def task(self) -> Task:
        if self._task is None:
            raise ResetNeededError(f"{type(self).__name__} has no task yet: call reset() first.")
        return self._task

    @classmethod
    def env_card(cls, kwargs: Mapping[str, Any] | None = None) -> str:
        """The environment card: the class docstring (``kwargs``: the registered kwargs of an id)."""
        return inspect.getdoc(cls) or cls.__name__

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._np_random, _ = seeding.np_random(int(seed))
            episode_seed = int(seed)
        else:
            if self._np_random is None:
                self._np_random, _ = seeding.np_random()
            episode_seed = int(self._np_random.integers(0, 2**62))
        # A string seed is hashed with SHA-512: stable across processes, unlike hash().
        self.rng = random.Random(f"{self.name}:{episode_seed}")
        self.agents = list(self.possible_agents)
        self.agent_selection = self.agents[0]
        task = self._new_game(self.rng, options)
        if task.seed is None:
            task = Task(task.id, task.goal, task.split, task.difficulty, episode_seed, task.extra)
        self._task = task
        self._task_dict = task.as_dict()
        self._ready = True
        self._over = False
        self._winner = None
        self._skip_agent_selection = None
        agents = self.agents
        self.rewards = dict.fromkeys(agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(agents, 0.0)
        self.terminations = dict.fromkeys(agents, False)
        self.truncations = dict.fromkeys(agents, False)
        self._turns = dict.fromkeys(agents, 0)
        self._invalid = dict.fromkeys(agents, 0)
        self._streak = dict.fromkeys(agents, 0)
        self._valid = dict.fromkeys(agents, True)
        self._success = dict.fromkeys(agents, False)
        self._reasons = dict.fromkeys(agents, None)
        self._components = {a: dict(self._zero) for a in agents}
        self._notes = {a: [] for a in agents}
        self.infos = {a: self._info(a) for a in agents}

    def observe(self, agent: str) -> str:
        if self._task is None:
            raise ResetNeededError(f"{type(self).__name__}.observe() called before reset(): call reset() first.")
        if agent not in self._notes:
            raise unknown_agent(agent, self.possible_agents)
        parts = []
        if self._turns.get(agent, 0) == 0:
            parts.append(self._intro(agent))
        notes = self._notes[agent]
        if notes:
            parts.append("\n".join(notes))
        parts.append(self.state_text())
        parts.append(self._status(agent))
        return TextObservation("\n\n".join(p for p in parts if p))

    def step(self, action: Any) -> None:
        if not self._ready:
            raise ResetNeededError(
                f"{type(self).__name__}.step() called before reset() (or after close()): call reset() first."
            )
        if not self.agents:
            raise ResetNeededError(
                f"{type(self).__name__}.step() called after every agent finished: call reset() to start a new game."
            )
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._components[agent] = dict(self._zero)
        self._notes[agent] = []
        self._clear_rewards()
        self._turns[agent] += 1
        played: Played | None = None
        try:
            move = self._parse(agent, action_text(action, self.action_tags))
            played = self._play(agent, move)
        except InvalidAction as err:
            self._invalid_move(agent, action, err)
        else:
            self._valid[agent] = True
            self._streak[agent] = 0
            for other in self.agents:
                self._notes[other].append(played.text)
            if played.winner is not None or played.draw:
                self._finish(played.winner)
            else:
                self.agent_selection = self._next_agent(agent)
        if self._over:
            self.agent_selection = self._next_agent(agent)
        self._accumulate_rewards()
        for a in self.agents:
            self.infos[a] = self._info(a)

    def render(self) -> str | None:
        if self.render_mode is None:
            warnings.warn("render() called without a render_mode; pass render_mode='ansi'.", stacklevel=2)
            return None
        text = self.state_text() if self._task is not None else ""
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        self._ready = False

    # ------------------------------------------------------------------ helpers
    def _next_agent(self, agent: str) -> str:
        order = self.possible_agents
        i = order.index(agent)
        for k in range(1, len(order) + 1):
            candidate = order[(i + k) % len(order)]
            if candidate in self.terminations:
                return candidate
        return agent

    def _give(self, agent: str, component: str, value: float) -> None:
        self._components[agent][component] += value
        self.rewards[agent] += value

    def _invalid_move(self, agent: str, action: Any, err: InvalidAction) -> None:
        self._valid[agent] = False
        self._invalid[agent] += 1
        self._streak[agent] += 1
        self._give(agent, "invalid_action_reward", self.invalid_penalty)
        streak, limit = self._streak[agent], self.invalid_limit
        if streak >= limit:
            self._notes[agent].append(
                f"Invalid action {shown_action(action)!r}: {err} That was {streak} invalid moves in a row: you forfeit."
            )
            others = [a for a in self.agents if a != agent]
            for other in others:
                self._notes[other].append(f"{agent} ({self.role(agent)}) forfeited after {streak} invalid moves.")
            self._finish(others[0] if len(others) == 1 else None, forfeit_by=agent)
        else:
            self._notes[agent].append(
                f"Invalid action {shown_action(action)!r}: {err} Try again "
                f"({streak} of {limit} invalid moves in a row allowed before you forfeit)."
            )

    def _finish(self, winner: str | None, *, forfeit_by: str | None = None) -> None:
        """End the game: ``winner`` wins (``None``: a draw, or a forfeit with several others)."""
        self._over = True
        self._winner = winner
        for a in self.agents:
            if forfeit_by is not None and a == forfeit_by:
                self._give(a, "loss_reward", self.loss_value)
                self._reasons[a] = TerminationReason.INVALID_LIMIT
            elif winner is None and forfeit_by is None:
                self._give(a, "draw_reward", self.draw_reward)
                self._reasons[a] = TerminationReason.FAILURE
            elif a == winner or (winner is None and forfeit_by is not None):
                self._give(a, "success_reward", self.win_value)
                self._success[a] = True
                self._reasons[a] = TerminationReason.SUCCESS
            else:
                self._give(a, "loss_reward", self.loss_value)
                self._reasons[a] = TerminationReason.FAILURE
            self.terminations[a] = True

    def _info(self, agent: str) -> dict[str, Any]:
        reason = self._reasons[agent]
        to_move = not self._over and agent == self.agent_selection
        return {
            "task": dict(self._task_dict),
            "admissible_actions": self.legal_actions(agent) if to_move else [],
            "action_valid": self._valid[agent],
            "reward_components": dict(self._components[agent]),
            "success": self._success[agent],
            "termination_reason": reason.value if reason is not None else None,
            "turn": self._turns[agent],
            "invalid_actions": self._invalid[agent],
            "reward_basis": list(self.reward_basis),
        }
