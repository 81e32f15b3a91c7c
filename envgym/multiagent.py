"""Multi-agent text environments: a base for turn-based games and the multi-agent checkers.

PettingZoo gives two multi-agent APIs: :class:`pettingzoo.AECEnv` (agents act one at a time) and
:class:`pettingzoo.ParallelEnv` (every live agent acts at once). envgym's multi-agent text
environments are real instances of those classes whose observations and actions are strings, and
they keep the single-agent contract of :class:`envgym.core.TextEnv` *per agent*:

* ``infos[agent]`` carries every key of :data:`envgym.core.INFO_KEYS` after ``reset`` and every
  ``step``; ``turn`` and ``invalid_actions`` count that agent's own actions;
* ``observation_space(agent)`` and ``action_space(agent)`` are :class:`envgym.spaces.Text` and the
  same object on every call (so seeding a space sticks), see :class:`TextSpaces`;
* any value is accepted as an action: a malformed or illegal one is an *invalid move*: the state
  is unchanged, the player is told why in its next observation and plays again;
* ``reset(seed=...)`` is deterministic.

:class:`TextAECEnv` implements all of that for turn-based win/lose/draw games (tic-tac-toe,
connect four): a game writes only its rules. :func:`check_aec_env` and :func:`check_parallel_env`
run PettingZoo's own API and seed tests plus the envgym contract; :mod:`envgym.testing` re-exports
them.

Conventions of :class:`TextAECEnv` (documented once here, referenced by the env cards):

* **Invalid moves.** The player keeps the turn and sees ``Invalid action ...: <why>``. After
  ``invalid_limit`` invalid moves *in a row* (default 3) the player **forfeits**: the game ends,
  the offender gets the loss (``loss_reward``, termination reason ``invalid_limit``) and every
  other player wins (``success_reward``, reason ``success``). Each invalid move also costs
  ``invalid_penalty`` in the ``invalid_action_reward`` component. Since every valid move fills
  the board and invalid runs are bounded, every game ends.
* **Rewards.** ``rewards[agent]`` is that agent's reward for the last step; ``last()`` returns the
  sum since the agent last acted (PettingZoo's cumulative reward), and
  ``infos[agent]["reward_components"]`` breaks down that same sum by component.
* **Dead agents.** After the game ends every agent is terminated; as PettingZoo requires, each one
  must then be stepped with ``None`` once, which removes it from ``agents``.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import math
import random
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from gymnasium.utils import seeding
from pettingzoo import AECEnv

from envgym.core import InvalidAction, Task, TerminationReason, check_init_kwargs, extract_action
from envgym.errors import InvalidKwargsError, ResetNeededError, UnknownAgentError, suggest
from envgym.spaces import MAX_TEXT_LENGTH, Text

if TYPE_CHECKING:  # pragma: no cover
    from envgym.testing import CheckReport

__all__ = [
    "DEFAULT_INVALID_LIMIT",
    "Played",
    "TextAECEnv",
    "TextObservation",
    "TextSpaces",
    "UnknownAgentError",
    "action_text",
    "agent_info",
    "check_aec_env",
    "check_parallel_env",
    "shown_action",
]

#: Invalid moves in a row after which a player of a :class:`TextAECEnv` forfeits.
DEFAULT_INVALID_LIMIT = 3


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def action_text(action: Any, tags: tuple[str, ...] = ("action",)) -> str:
    """The cleaned action text of any value an agent sent (see :func:`envgym.core.extract_action`).

    Bytes are decoded as UTF-8 (bad bytes replaced). Raises :class:`InvalidAction` for anything
    that is not text, so callers turn it into an invalid move.
    """
    if isinstance(action, str):
        text = action
    elif isinstance(action, (bytes, bytearray)):
        text = bytes(action).decode("utf-8", errors="replace")
    else:
        raise InvalidAction(f"expected the action as a string, got {type(action).__name__}.")
    return extract_action(text, tags)


def shown_action(action: Any) -> str:
    """A short printable form of an action for feedback messages."""
    if isinstance(action, str):
        return _clip(action)
    if isinstance(action, (bytes, bytearray)):
        return _clip(bytes(action).decode("utf-8", errors="replace"))
    return _clip(repr(action))


def agent_info(
    task: Mapping[str, Any],
    *,
    admissible_actions: list[str] | None,
    action_valid: bool,
    reward_components: Mapping[str, float],
    success: bool,
    termination_reason: TerminationReason | str | None,
    turn: int,
    invalid_actions: int,
    **extra: Any,
) -> dict[str, Any]:
    """Build one agent's ``info`` dict with every standard key (fresh objects, safe to mutate)."""
    reason = termination_reason.value if isinstance(termination_reason, TerminationReason) else termination_reason
    return {
        "task": dict(task),
        "admissible_actions": list(admissible_actions) if admissible_actions is not None else None,
        "action_valid": bool(action_valid),
        "reward_components": {k: float(v) for k, v in reward_components.items()},
        "success": bool(success),
        "termination_reason": reason,
        "turn": int(turn),
        "invalid_actions": int(invalid_actions),
        **extra,
    }


class TextObservation(str):
    """A ``str`` that also carries the ``dtype`` of :class:`envgym.spaces.Text`.

    PettingZoo's ``api_test`` asserts ``observation_space(agent).dtype == observation.dtype``,
    which no plain ``str`` can pass (it has no ``dtype``). This subclass is a real string in
    every other respect (equality, hashing, JSON, pickling), so agents never notice it.
    """

    __slots__ = ()
    dtype: ClassVar[Any] = Text().dtype


class TextSpaces:
    """Mixin giving every agent a text observation space and a text action space.

    Call :meth:`_init_text_spaces` in ``__init__`` with ``possible_agents``. The spaces are built
    once, so ``observation_space(agent) is observation_space(agent)`` as PettingZoo requires.
    """

    observation_spaces: dict[str, Text]
    action_spaces: dict[str, Text]

    def _init_text_spaces(self, agents: Iterable[str], max_length: int = MAX_TEXT_LENGTH) -> None:
        self.observation_spaces = {agent: Text(max_length) for agent in agents}
        self.action_spaces = {agent: Text(max_length) for agent in agents}

    def observation_space(self, agent: str) -> Text:
        """The (cached) observation space of ``agent``."""
        try:
            return self.observation_spaces[agent]
        except KeyError:
            raise _unknown_agent(agent, self.observation_spaces) from None

    def action_space(self, agent: str) -> Text:
        """The (cached) action space of ``agent``."""
        try:
            return self.action_spaces[agent]
        except KeyError:
            raise _unknown_agent(agent, self.action_spaces) from None


def _unknown_agent(agent: Any, known: Iterable[str]) -> UnknownAgentError:
    names = list(known)
    return UnknownAgentError(f"unknown agent {agent!r}.{suggest(str(agent), names)} Agents: {', '.join(names)}.")


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
    #: Tags whose content is taken as the action (``<action>b2</action>``).
    action_tags: ClassVar[tuple[str, ...]] = ("action",)
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
    def env_card(cls) -> str:
        """The environment card: the class docstring."""
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
            raise _unknown_agent(agent, self.possible_agents)
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
        }


# ---------------------------------------------------------------------- checkers

#: Warnings of PettingZoo's API test that every text environment triggers by design.
_TEXT_ENV_WARNINGS: tuple[str, ...] = (
    "Observation is not a NumPy array",
    "Observation space for each agent probably should be",
    "Action space for each agent probably should be",
)


def _run_pettingzoo(check: str, env_id: str, fn: Callable[[], Any]) -> None:
    """Run a PettingZoo test quietly; its failures and unexpected warnings are contract errors."""
    from envgym.testing import _fail

    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        try:
            fn()
        except Exception as err:
            raise _fail(check, f"{env_id}: PettingZoo's {check} failed: {err!r}") from err
    unexpected = sorted({str(w.message) for w in caught if not any(s in str(w.message) for s in _TEXT_ENV_WARNINGS)})
    if unexpected:
        raise _fail(check, f"{env_id}: PettingZoo's {check} warned: {'; '.join(unexpected)}")


def _factory(env: Any, kind: str, make_kwargs: Mapping[str, Any] | None) -> tuple[str, Callable[[], Any]]:
    from envgym.registration import make_aec, make_parallel

    if isinstance(env, str):
        env_id = env
        kwargs = dict(make_kwargs or {})
        maker = make_aec if kind == "aec" else make_parallel
        return env_id, lambda: maker(env_id, **kwargs)
    if isinstance(env, type) or (callable(env) and not hasattr(env, "possible_agents")):
        name = getattr(env, "__name__", type(env).__name__)
        return name, env
    base = env.unwrapped
    cls = type(base)
    kwargs = dict(getattr(base, "_init_kwargs", {}) or {})
    return str(base), lambda: cls(**kwargs)


def _check_reward(value: Any, where: str) -> None:
    from envgym.testing import _fail

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail("reward", f"{where}: reward must be a finite number, got {value!r}.")


def _check_agent_step(
    env: Any, agent: str, obs: Any, reward: Any, term: Any, trunc: Any, info: Any, where: str
) -> None:
    from envgym.testing import _check_info, _fail

    if not isinstance(obs, str) or not env.observation_space(agent).contains(obs):
        raise _fail("observe", f"{where}: observation {obs!r:.100} is not a str in the observation space.")
    _check_reward(reward, where)
    if not isinstance(term, bool) or not isinstance(trunc, bool):
        raise _fail("step", f"{where}: terminated/truncated must be bool, got {term!r}, {trunc!r}.")
    _check_info(info, where, getattr(env.unwrapped, "reward_components", None))
    if (term or trunc) and info["termination_reason"] is None:
        raise _fail("step", f"{where}: {agent} is done but info['termination_reason'] is None.")
    if not (term or trunc) and info["termination_reason"] is not None:
        raise _fail("step", f"{where}: termination_reason {info['termination_reason']!r} while {agent} is live.")
    if info["success"] and not term:
        raise _fail("step", f"{where}: success=True requires terminated=True.")


def _aec_action(env: Any, agent: str, info: Mapping[str, Any], rng: random.Random) -> Any:
    sampler = getattr(env.unwrapped, "sample_action", None)
    if sampler is not None:
        try:
            return sampler(agent, rng)
        except TypeError:
            pass
    actions = info.get("admissible_actions")
    if actions:
        return rng.choice(actions)
    return env.action_space(agent).sample()


def _aec_rollout(env: Any, seed: int, max_steps: int) -> list[tuple[Any, ...]]:
    """Reset with ``seed`` and play seeded random legal moves (``None`` for dead agents)."""
    rng = random.Random(seed)
    env.reset(seed=seed)
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed + i)
    record: list[tuple[Any, ...]] = []
    for agent in env.agent_iter(max_steps):
        obs, reward, term, trunc, info = env.last()
        action = None if (term or trunc) else _aec_action(env, agent, info, rng)
        record.append((agent, obs, reward, term, trunc, info, action))
        _safe_step(env, action, f"seed={seed} step {len(record) - 1} agent={agent}")
    record.append(("end", list(env.agents)))
    return record


def _safe_step(env: Any, action: Any, where: str) -> Any:
    """``env.step(action)``; an exception becomes a contract error naming the step."""
    from envgym.testing import _fail

    try:
        return env.step(action)
    except Exception as err:
        raise _fail("step", f"{env}: {where}: step({action!r:.80}) raised {err!r}.") from err


def _state_text(env: Any) -> str | None:
    for attr in ("state_text", "_observe"):
        fn = getattr(env.unwrapped, attr, None)
        if fn is not None:
            try:
                return str(fn())
            except Exception:  # noqa: BLE001 - an env without a renderable state is not checked here
                return None
    return None


def check_aec_env(
    env: Any,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    max_steps: int = 2_000,
    num_cycles: int = 200,
    fuzz: bool = True,
    pettingzoo_checks: bool = True,
    make_kwargs: Mapping[str, Any] | None = None,
) -> CheckReport:
    """Check a PettingZoo AEC text environment against PettingZoo's tests and the envgym contract.

    Args:
        env: an ``AECEnv``, a zero-argument constructor, or an id for :func:`envgym.make_aec`.
        seeds: reset seeds of the determinism checks (at least two).
        max_steps: agent steps per scripted rollout (and bound of the invalid-run check).
        num_cycles: cycles of PettingZoo's ``api_test`` and ``seed_test``.
        fuzz: also play every value of :data:`envgym.testing.BAD_ACTIONS` as a move.
        pettingzoo_checks: run ``pettingzoo.test.api_test`` and ``seed_test`` first.
        make_kwargs: kwargs for ``make_aec`` when ``env`` is an id.

    Returns:
        A :class:`envgym.testing.CheckReport`; raises :class:`envgym.errors.EnvContractError`.
    """
    from pettingzoo.test import api_test, seed_test

    from envgym.testing import BAD_ACTIONS, CheckReport, _fail, check_close_twice

    env_id, factory = _factory(env, "aec", make_kwargs)
    if len(seeds) < 2:
        raise ValueError(f"check_aec_env needs at least two seeds to compare games, got {list(seeds)!r}.")
    report = CheckReport(env_id)

    # 1. PettingZoo's own tests (text-specific warnings aside, any warning is a failure).
    if pettingzoo_checks:
        fresh = factory()
        try:
            _run_pettingzoo("api_test", env_id, lambda: api_test(fresh, num_cycles=num_cycles))
        finally:
            fresh.close()
        report.passed("pettingzoo.api_test")
        _run_pettingzoo("seed_test", env_id, lambda: seed_test(factory, num_cycles=num_cycles))
        report.passed("pettingzoo.seed_test")

    # 2. step before reset is a clear error.
    fresh = factory()
    try:
        fresh.step("look")
    except ResetNeededError:
        report.passed("step_before_reset")
    except Exception as err:
        raise _fail("step_before_reset", f"{env_id}: expected ResetNeededError, got {err!r}.") from err
    else:
        raise _fail("step_before_reset", f"{env_id}: step() before reset() did not raise.")
    finally:
        fresh.close()

    # 3. the spaces and the info contract of every agent after reset.
    env = factory()
    env.reset(seed=seeds[0])
    for agent in env.agents:
        if env.observation_space(agent) is not env.observation_space(agent) or env.action_space(
            agent
        ) is not env.action_space(agent):
            raise _fail("spaces", f"{env_id}: the spaces of {agent} are not the same object on every call.")
        obs = env.observe(agent)
        _check_agent_step(
            env,
            agent,
            obs,
            env.unwrapped._cumulative_rewards[agent],
            env.terminations[agent],
            env.truncations[agent],
            env.infos[agent],
            f"{env_id} reset(seed={seeds[0]}) {agent}",
        )
    report.passed("reset_info")

    # 4. seeded determinism over scripted rollouts, with the contract checked at every step.
    first = []
    for seed in seeds:
        a = _aec_rollout(env, seed, max_steps)
        b = _aec_rollout(factory(), seed, max_steps)
        if len(a) != len(b):
            raise _fail("determinism", f"{env_id} seed={seed}: rollouts had {len(a)} and {len(b)} steps.")
        for i, (x, y) in enumerate(zip(a, b)):
            if repr(x) != repr(y):
                raise _fail("determinism", f"{env_id} seed={seed}: step {i} differs:\n{x!r:.400}\n{y!r:.400}")
        for i, (agent, obs, reward, term, trunc, info, _action) in enumerate(a[:-1]):
            where = f"{env_id} seed={seed} step {i} agent={agent}"
            _check_agent_step(env, agent, obs, reward, term, trunc, info, where)
            report.steps += 1
        if a[-1][1]:
            raise _fail("termination", f"{env_id} seed={seed}: {max_steps} random legal moves did not finish the game.")
        first.append((a[0][1], a[0][5]["task"]["id"]))
    if len(set(first)) < 2 and len(seeds) >= 3:
        raise _fail("determinism", f"{env_id}: seeds {list(seeds)} all gave the same task and first observation.")
    report.passed("seeded_determinism")

    # 5. fuzzing: no value may make step raise; an invalid move keeps the state.
    if fuzz:
        for i, bad in enumerate(BAD_ACTIONS):
            env.reset(seed=seeds[0])
            agent = env.agent_selection
            before = _state_text(env)
            try:
                env.step(bad)
            except Exception as err:
                raise _fail(
                    "fuzz", f"{env_id}: step({bad!r:.60}) raised {err!r}; bad actions must be invalid moves."
                ) from err
            if agent not in env.infos:
                raise _fail("fuzz", f"{env_id}: {agent} vanished from infos after the move {bad!r:.60}.")
            info = env.infos[agent]
            where = f"{env_id} fuzz #{i} action={bad!r:.60}"
            _check_agent_step(
                env,
                agent,
                env.observe(agent),
                env.unwrapped._cumulative_rewards[agent],
                env.terminations[agent],
                env.truncations[agent],
                info,
                where,
            )
            if not info["action_valid"] and before is not None and _state_text(env) != before:
                raise _fail("fuzz", f"{env_id}: the invalid move {bad!r:.60} changed the state.")
        report.passed("bad_input_fuzz")

    # 6. a run of invalid moves ends the game (invalid_limit or max_turns), never runs forever.
    env.reset(seed=seeds[0])
    reasons: dict[str, Any] = {}
    for agent in env.agent_iter(max_steps):
        _, _, term, trunc, info = env.last()
        if term or trunc:
            reasons[agent] = info["termination_reason"]
        env.step(None if (term or trunc) else "")
    if env.agents:
        raise _fail("invalid_run", f"{env_id}: {max_steps} invalid moves did not end the game.")
    expected = {TerminationReason.INVALID_LIMIT.value, TerminationReason.MAX_TURNS.value}
    if not expected & set(reasons.values()):
        raise _fail("invalid_run", f"{env_id}: a run of invalid moves ended with reasons {reasons!r}.")
    report.passed("invalid_run_ends")

    # 7. close twice.
    check_close_twice(env, env_id, report)
    return report


def _parallel_actions(env: Any, infos: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    actions = {}
    sampler = getattr(env.unwrapped, "sample_action", None)
    for agent in env.agents:
        if sampler is not None:
            actions[agent] = sampler(agent, rng)
        elif infos.get(agent, {}).get("admissible_actions"):
            actions[agent] = rng.choice(infos[agent]["admissible_actions"])
        else:
            actions[agent] = env.action_space(agent).sample()
    return actions


def _parallel_rollout(env: Any, seed: int, max_steps: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    obs, infos = env.reset(seed=seed)
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed + i)
    record: list[tuple[Any, ...]] = [("reset", obs, infos)]
    for _ in range(max_steps):
        if not env.agents:
            break
        actions = _parallel_actions(env, infos, rng)
        obs, rewards, terms, truncs, infos = _safe_step(env, actions, f"seed={seed} step {len(record)}")
        record.append((actions, obs, rewards, terms, truncs, infos))
    record.append(("end", list(env.agents)))
    return record


def _check_parallel_result(env: Any, live: Sequence[str], result: Any, where: str) -> None:
    from envgym.testing import _fail

    if not (isinstance(result, tuple) and len(result) == 5 and all(isinstance(d, dict) for d in result)):
        raise _fail("step", f"{where}: step must return five dicts, got {result!r:.200}.")
    obs, rewards, terms, truncs, infos = result
    for agent in live:
        for label, d in (
            ("observations", obs),
            ("rewards", rewards),
            ("terminations", terms),
            ("truncations", truncs),
            ("infos", infos),
        ):
            if agent not in d:
                raise _fail("step", f"{where}: {label} lacks the live agent {agent!r}.")
        _check_agent_step(
            env, agent, obs[agent], rewards[agent], terms[agent], truncs[agent], infos[agent], f"{where} agent={agent}"
        )


def check_parallel_env(
    env: Any,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    max_steps: int = 1_000,
    num_cycles: int = 200,
    fuzz: bool = True,
    pettingzoo_checks: bool = True,
    make_kwargs: Mapping[str, Any] | None = None,
) -> CheckReport:
    """Check a PettingZoo Parallel text environment against PettingZoo's tests and the envgym contract.

    Same arguments and checks as :func:`check_aec_env`, with ``parallel_api_test`` and
    ``parallel_seed_test``; every live agent sends a bad action at once in the fuzzing step.
    """
    from pettingzoo.test import parallel_api_test, parallel_seed_test

    from envgym.testing import BAD_ACTIONS, CheckReport, _fail, check_close_twice

    env_id, factory = _factory(env, "parallel", make_kwargs)
    if len(seeds) < 2:
        raise ValueError(f"check_parallel_env needs at least two seeds to compare games, got {list(seeds)!r}.")
    report = CheckReport(env_id)

    if pettingzoo_checks:
        fresh = factory()
        try:
            _run_pettingzoo("parallel_api_test", env_id, lambda: parallel_api_test(fresh, num_cycles=num_cycles))
        finally:
            fresh.close()
        report.passed("pettingzoo.parallel_api_test")
        _run_pettingzoo("parallel_seed_test", env_id, lambda: parallel_seed_test(factory, num_cycles=num_cycles))
        report.passed("pettingzoo.parallel_seed_test")

    fresh = factory()
    try:
        fresh.step(dict.fromkeys(fresh.possible_agents, "look"))
    except ResetNeededError:
        report.passed("step_before_reset")
    except Exception as err:
        raise _fail("step_before_reset", f"{env_id}: expected ResetNeededError, got {err!r}.") from err
    else:
        raise _fail("step_before_reset", f"{env_id}: step() before reset() did not raise.")
    finally:
        fresh.close()

    env = factory()
    obs, infos = env.reset(seed=seeds[0])
    for agent in env.agents:
        if env.observation_space(agent) is not env.observation_space(agent) or env.action_space(
            agent
        ) is not env.action_space(agent):
            raise _fail("spaces", f"{env_id}: the spaces of {agent} are not the same object on every call.")
        if agent not in obs or agent not in infos:
            raise _fail("reset", f"{env_id}: reset() gave no observation or info for {agent!r}.")
        _check_agent_step(env, agent, obs[agent], 0.0, False, False, infos[agent], f"{env_id} reset {agent}")
    report.passed("reset_info")

    first = []
    for seed in seeds:
        a = _parallel_rollout(env, seed, max_steps)
        b = _parallel_rollout(factory(), seed, max_steps)
        if len(a) != len(b):
            raise _fail("determinism", f"{env_id} seed={seed}: rollouts had {len(a)} and {len(b)} steps.")
        for i, (x, y) in enumerate(zip(a, b)):
            if repr(x) != repr(y):
                raise _fail("determinism", f"{env_id} seed={seed}: step {i} differs:\n{x!r:.400}\n{y!r:.400}")
        for i, item in enumerate(a[1:-1], start=1):
            actions = item[0]
            _check_parallel_result(env, list(actions), item[1:], f"{env_id} seed={seed} step {i}")
            report.steps += 1
        if a[-1][1]:
            raise _fail("termination", f"{env_id} seed={seed}: {max_steps} random legal steps did not end the game.")
        first.append((repr(a[0][1]), a[0][2][env.possible_agents[0]]["task"]["id"]))
    if len(set(first)) < 2 and len(seeds) >= 3:
        raise _fail("determinism", f"{env_id}: seeds {list(seeds)} all gave the same task and first observation.")
    report.passed("seeded_determinism")

    if fuzz:
        for i, bad in enumerate(BAD_ACTIONS):
            env.reset(seed=seeds[0])
            live = list(env.agents)
            before = _state_text(env)
            try:
                result = env.step(dict.fromkeys(live, bad))
            except Exception as err:
                raise _fail(
                    "fuzz", f"{env_id}: step with {bad!r:.60} raised {err!r}; bad actions must be invalid."
                ) from err
            _check_parallel_result(env, live, result, f"{env_id} fuzz #{i} action={bad!r:.60}")
            infos = result[4]
            if all(not infos[a]["action_valid"] for a in live) and before is not None and _state_text(env) != before:
                raise _fail("fuzz", f"{env_id}: the invalid action {bad!r:.60} changed the state.")
        report.passed("bad_input_fuzz")

    env.reset(seed=seeds[0])
    reasons: dict[str, Any] = {}
    for _ in range(max_steps):
        if not env.agents:
            break
        *_, terms, truncs, infos = env.step(dict.fromkeys(env.agents, ""))
        for agent in terms:
            if terms[agent] or truncs[agent]:
                reasons[agent] = infos[agent]["termination_reason"]
    if env.agents:
        raise _fail("invalid_run", f"{env_id}: {max_steps} rounds of invalid actions did not end the game.")
    expected = {TerminationReason.INVALID_LIMIT.value, TerminationReason.MAX_TURNS.value}
    if not expected & set(reasons.values()):
        raise _fail("invalid_run", f"{env_id}: a run of invalid actions ended with reasons {reasons!r}.")
    report.passed("invalid_run_ends")

    check_close_twice(env, env_id, report)
    return report
