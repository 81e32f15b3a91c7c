"""The coopetition games behind standard interfaces: Gymnasium (joint action) and PettingZoo.

* :class:`CoopEnv` (``gymnasium.make("envgym/Coop-<Name>-v0")``): centralised joint control, as
  the reference's Gymnasium API: the action is every agent's contribution at once
  (``Box(0, max(e), (n,))``), the observation the reference's joint vector (actions, trust,
  reputation, ``D``, step). Gymnasium wants a scalar reward: ``reward="sum"`` (default: the
  team's, the reference's "episode return summed over agents"), ``"mean"`` or ``"agent_<i>"``;
  ``info["rewards"]`` always holds the per-agent vector the reference returns.
* :class:`CoopParallelEnv` (``envgym.make_parallel("envgym/Coop-<Name>-v0")``): PettingZoo
  Parallel, agents ``agent_0 .. agent_{n-1}``, each with ``Box(0, e_i, (1,))`` actions and an
  observation chosen by ``obs_config`` (information asymmetry; :class:`~.game.ObservationConfig`).
  ``envgym.make_aec`` gives the AEC form through PettingZoo's ``parallel_to_aec``: agents act in
  turn, their moves are buffered until the round is complete, then played at once.

Every view plays the same :class:`~.game.Game`, so rewards, terminations and the reference's info
numbers are the same in all three (the reference's own PettingZoo wrappers skip four games'
``reset``/``step``; envgym's do not).

Both keep envgym's ``info`` contract (per agent in the Parallel view): ``task``, ``action_valid``,
``reward_components`` (``payoff_reward``: what the reward would be in the private mode, the
agent's own payoff; ``social_reward``: the rest, 0 in the private mode), ``success``,
``termination_reason``, ``turn``, ``invalid_actions``; plus the reference's numbers (``mean_trust``,
``cooperation_rate``, ...) and ``rewards``/``payoffs`` per agent.

Malformed actions (not numbers, NaN, the wrong shape, a missing agent) are invalid: the round is
not played, nothing changes, every reward is 0 and ``info["invalid_reason"]`` says why; after
``invalid_limit`` invalid actions in a row from one agent the episode ends
(``invalid_limit``). Finite numbers outside ``[0, e_i]`` are clipped, as in the reference.

Splits: ``split="test"`` seeds the game as the reference does (``np.random.default_rng(seed)``:
envgym's numbers equal the reference's); ``split="train"`` (default) seeds it from
``(seed, 1)``, so games with hidden random parameters never share a draw with the test split.
"""

from __future__ import annotations

import inspect
import math
import random
import re
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium
import numpy as np
from envgym.environments.coopetition.catalog import game_class
from envgym.environments.coopetition.game import MECHANISMS, Game, ObservationConfig, StepResult
from envgym.environments.coopetition.pair import f32x2
from gymnasium import spaces
from pettingzoo import ParallelEnv

from envgym.core import SPLITS, TerminationReason
from envgym.errors import ConfigError, InvalidKwargsError, ResetNeededError, suggest
from envgym.multiagent.text import agent_info, unknown_agent

__all__ = ["COMPONENTS", "CoopEnv", "CoopParallelEnv", "build_game"]

#: The reward components of every coopetition view.
COMPONENTS: tuple[str, ...] = ("payoff_reward", "social_reward")
#: Keyword arguments every game takes (handled by :class:`~.game.Game` itself).
COMMON_KWARGS: tuple[str, ...] = ("reward_mode", "normalize", "reward_scale")
DEFAULT_INVALID_LIMIT = 3
_SUCCESS = TerminationReason.SUCCESS.value
#: Stands for a missing agent's action (``None`` is an action, an invalid one).
_NO_ACTION = object()
# bound once: the per-round code reads them without numpy's module lookup
_ndarray, _array, _FLOAT32 = np.ndarray, np.array, np.dtype(np.float32)
#: The keys of a Parallel ``info`` that differ between agents or hold containers of their own.
_PER_AGENT_KEYS = frozenset(
    ("task", "action_valid", "reward_components", "invalid_actions", "reward_basis", "rewards", "payoffs", "agent")
    + ("own_action", "invalid_reason")
)


def _game_params(cls: type) -> set[str]:
    params: set[str] = set()
    for klass in cls.__mro__:
        if klass is Game or klass is object:
            break
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self":
                params.add(p.name)
    return params | set(COMMON_KWARGS)


def build_game(name: str, kwargs: Mapping[str, Any]) -> Game:
    """The game ``name`` with its keyword arguments checked (unknown names get a did-you-mean)."""
    cls = game_class(name)
    allowed = _game_params(cls)
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        hints = "".join(suggest(k, sorted(allowed)) for k in unknown)
        raise InvalidKwargsError(
            f"Coop-{name}: unknown keyword arguments {unknown}.{hints} Accepted: {', '.join(sorted(allowed))}."
        )
    return cls(**kwargs)


def _check_split(split: Any) -> str:
    if split not in SPLITS:
        raise ConfigError(f"split must be one of {', '.join(SPLITS)}, got {split!r}.")
    return split


def _check_limit(invalid_limit: Any) -> int:
    if isinstance(invalid_limit, bool) or not isinstance(invalid_limit, int) or invalid_limit < 1:
        raise ConfigError(f"invalid_limit must be a positive int, got {invalid_limit!r}.")
    return invalid_limit


def _number(value: Any) -> float | str:
    """A finite contribution from one agent's action, or why it is not one."""
    if value.__class__ is _ndarray and value.size == 1 and value.dtype.kind == "f":  # the usual case, fast
        number = value.item()
        if number.__class__ is not float:  # float32/float64 give a Python float already; longdouble does not
            number = float(number)
        return number if math.isfinite(number) else f"expected a finite number, got {number!r}"
    if isinstance(value, (str, bytes, bytearray, Mapping)) or value is None or isinstance(value, bool):
        return f"expected a number (the contribution), got {type(value).__name__} {value!r:.60}"
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return f"expected a number (the contribution), got {value!r:.60}"
    if array.size != 1:
        return f"expected one number, got shape {array.shape}"
    number = float(array.reshape(()))
    if not math.isfinite(number):
        return f"expected a finite number, got {number!r}"
    return number


def _joint_text(text: str, n: int) -> list[float] | str:
    """The contributions in a joint action written as text (``"12.5 30"``, ``"12.5, 30"`` or
    ``"[12.5, 30]"``: what a text agent such as ``envgym run``'s sends), or why it holds none."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    try:
        return [float(part) for part in re.split(r"[\s,]+", body) if part]
    except ValueError:
        example = " ".join(["10"] * n)
        return f"expected {n} numbers (one contribution per agent) such as {example!r}, got {text!r:.60}"


def env_card_of(view: type, kwargs: Mapping[str, Any] | None) -> str:
    """The card of the game named in ``kwargs["game"]``: the game's title, the view's card (its
    sections), then the game's docstring as the **Game.** section (last: its formulas may hold
    ``**`` powers)."""
    card = inspect.getdoc(view) or view.__name__
    name = (kwargs or {}).get("game")
    if not name:
        return card
    title, _, body = (inspect.getdoc(game_class(name)) or name).partition("\n\n")
    return f"{title}\n\n{card}\n\n**Game.** {body}" if body else f"{title}\n\n{card}"


class _Episode:
    """What both views share: the game, seeding and splits, invalid-action bookkeeping, the task."""

    def __init__(self, game_name: str, split: str, invalid_limit: int, kwargs: Mapping[str, Any]) -> None:
        self.name = game_name
        self.kwargs = dict(kwargs)
        self.game = build_game(game_name, kwargs)
        self.split = _check_split(split)
        self.invalid_limit = _check_limit(invalid_limit)
        self.seed: int | None = None
        self.started = False
        self.over = False
        self.reason: str | None = None
        self.invalid = [0] * self.game.n_agents
        self.streak = [0] * self.game.n_agents
        self.last: StepResult | None = None
        self._task: dict[str, Any] | None = None

    def reset(self, seed: int) -> None:
        self.seed = int(seed)
        self.game.reset(self.seed if self.split == "test" else [self.seed, 1])
        self.started, self.over, self.reason, self.last = True, False, None, None
        self.invalid = [0] * self.game.n_agents
        self.streak = [0] * self.game.n_agents
        self._task = self._make_task()

    def require_live(self, env: Any) -> None:
        if not self.started:
            raise ResetNeededError(f"{env}: call reset() before step().")

    def task(self) -> dict[str, Any]:
        """The episode's task: fresh containers on every call (built once per episode)."""
        if self._task is None:
            self._task = self._make_task()
        return {**self._task, "params": dict(self.kwargs)}

    def _make_task(self) -> dict[str, Any]:
        game = self.game
        goal = (
            f"{game.name} ({game.mechanism}: {MECHANISMS.get(game.mechanism, '')}): {game.n_agents} agents choose "
            f"a {game.contribution} each round for up to {game.max_steps} rounds; reward mode {game.reward_mode}."
        )
        return {
            "id": f"Coop-{self.name}/{self.split}/seed={self.seed}",
            "goal": goal,
            "split": self.split,
            "difficulty": game.mechanism,
            "seed": self.seed,
            "game": self.name,
            "reward_mode": game.reward_mode,
            "endowments": tuple(float(e) for e in game.endowments),
            # only a game whose early end counts as success can succeed; the others are scored by
            # their returns, and summaries show their success as not defined (envgym.rollout.summary)
            "success_defined": game.termination_outcome() == "success",
        }

    def invalid_round(self, problems: Mapping[int, str]) -> None:
        """Count an unplayed round; ends the episode when someone reaches ``invalid_limit`` in a row."""
        for i in range(self.game.n_agents):
            if i in problems:
                self.invalid[i] += 1
                self.streak[i] += 1
        if any(s >= self.invalid_limit for s in self.streak):
            self.over, self.reason = True, TerminationReason.INVALID_LIMIT.value

    def play(self, actions: np.ndarray | list[float]) -> StepResult:
        self.streak = [0] * self.game.n_agents
        result = self.game.step(actions)
        self.last = result
        if result.terminated:
            self.over, self.reason = True, self.game.termination_outcome()
        elif result.truncated:
            self.over, self.reason = True, TerminationReason.MAX_TURNS.value
        return result

    def numbers(self) -> dict[str, Any]:
        """The reference's info entries, JSON-friendly."""
        info = self.game.legacy_info() if self.last is None else self.last.info
        return {k: (v.tolist() if isinstance(v, _ndarray) else v) for k, v in info.items()}

    def state_text(self) -> str:
        """The whole game state as text (the checkers compare it around invalid actions)."""
        g = self.game
        return repr(
            (g.step_count, g.actions.tolist(), g.trust.tolist(), g.reputation.tolist(), [h.tolist() for h in g.history])
        )

    def render(self) -> str:
        game = self.game
        lines = [f"{game.name} round {game.step_count}/{game.max_steps}  mean trust {game.mean_trust():.3f}"]
        for i in range(game.n_agents):
            lines.append(
                f"  agent_{i}: contribution {float(game.actions[i]):7.2f} / {float(game.endowments[i]):.0f}   "
                f"trust row {np.array2string(game.trust[i], precision=2)}"
            )
        return "\n".join(lines)


class _View:
    """What every view of a game shares: its reward components, splits and card."""

    reward_components = COMPONENTS
    reward_basis = COMPONENTS  # their sum is the reward: none is diagnostic
    splits = SPLITS

    @classmethod
    def env_card(cls, kwargs: Mapping[str, Any] | None = None) -> str:
        """The card of the game named in ``kwargs["game"]`` (``envgym info`` passes the registered kwargs)."""
        return env_card_of(cls, kwargs)


class CoopEnv(_View, gymnasium.Env[np.ndarray, np.ndarray]):
    """Gymnasium joint-action view of a coopetition game, for centralised classic RL.

    **Description.** One action holds every agent's contribution (``Box(0, max e, (n,))``), the
    observation is the reference's joint vector, the reward the sum over agents (``reward=``
    picks another) with the per-agent rewards in ``info["rewards"]``.

    **Observation.** The reference's joint vector: actions, trust, reputation, ``D`` and the step.

    **Actions.** Every agent's contribution at once, ``Box(0, max e, (n,))``, as an array or as
    text (``"12.5 30"``, ``"[12.5, 30]"``: what ``envgym run``'s agents send); finite numbers
    outside ``[0, e_i]`` are clipped as in the reference; NaN or the wrong count is invalid.

    **Reward components.** ``payoff_reward``: the scalar (``reward=``) of the agents' own payoffs,
    what the reward would be in the private mode; ``social_reward``: what the reward mode adds
    (0 in the private mode).

    **Reward basis.** ``payoff_reward`` and ``social_reward``: the reward is their sum (in
    every reward mode), so none is diagnostic.

    **Episode end.** The game's own early termination, the horizon, or ``invalid_limit`` invalid
    actions in a row (see the module docstring).

    **Arguments.**

    * ``game``: the game's name (``TrustDilemma``; the registry passes it).
    * ``reward``: the scalar reward: ``sum`` (default), ``mean`` or ``agent_<i>``.
    * ``split``: ``train`` (default) or ``test`` (the reference's seeding).
    * ``invalid_limit``: invalid actions in a row that end the episode.
    * ``render_mode``: ``None`` or ``ansi``.
    * ``kwargs``: the game's own parameters and ``reward_mode`` / ``normalize`` / ``reward_scale``.

    **Version history.** ``v0``: first release.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}
    #: Its oracle: ``envgym.agents.solvers.coopetition_joint``.
    name: ClassVar[str] = "coopetition_joint"

    def __init__(
        self,
        game: str,
        *,
        reward: str = "sum",
        split: str = "train",
        invalid_limit: int = DEFAULT_INVALID_LIMIT,
        render_mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        self._episode = _Episode(game, split, invalid_limit, kwargs)
        n = self._episode.game.n_agents
        choices = ["sum", "mean", *(f"agent_{i}" for i in range(n))]
        if reward not in choices:
            raise ConfigError(
                f"reward must be one of {', '.join(choices)}, got {reward!r}.{suggest(str(reward), choices)}"
            )
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}.")
        self.reward = reward
        self.render_mode = render_mode
        g = self._episode.game
        g.reset(0)
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=g.legacy_observation().shape, dtype=np.float32)
        self.action_space = spaces.Box(0.0, float(np.max(g.endowments)), shape=(n,), dtype=np.float32)

    @property
    def game(self) -> Game:
        """The game being played."""
        return self._episode.game

    def _scalar(self, values: np.ndarray) -> float:
        if self.reward == "sum":
            return float(np.sum(values, dtype=np.float64))
        if self.reward == "mean":
            return float(np.mean(values, dtype=np.float64))
        return float(values[int(self.reward.removeprefix("agent_"))])

    def _info(self, *, valid: bool, rewards: np.ndarray, payoffs: np.ndarray, **extra: Any) -> dict[str, Any]:
        episode = self._episode
        payoff = self._scalar(payoffs)
        info = agent_info(
            episode.task(),
            admissible_actions=None,
            action_valid=valid,
            reward_components={"payoff_reward": payoff, "social_reward": self._scalar(rewards) - payoff},
            success=episode.reason == TerminationReason.SUCCESS.value,
            termination_reason=episode.reason,
            turn=episode.game.step_count,
            invalid_actions=sum(episode.invalid),
            reward_basis=list(COMPONENTS),
            rewards=[float(r) for r in rewards],
            payoffs=[float(p) for p in payoffs],
            **episode.numbers(),
        )
        info.update(extra)
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._episode.reset(seed if seed is not None else int(self.np_random.integers(2**31)))
        zeros = np.zeros(self.game.n_agents, dtype=np.float32)
        return self.game.legacy_observation(), self._info(valid=True, rewards=zeros, payoffs=zeros)

    def _parse(self, action: Any) -> np.ndarray | str:
        n = self.game.n_agents
        if isinstance(action, str):
            action = _joint_text(action, n)
            if isinstance(action, str):
                return action
        if isinstance(action, (bytes, bytearray, Mapping)) or action is None or isinstance(action, bool):
            return f"expected {n} numbers (one contribution per agent), got {type(action).__name__} {action!r:.60}"
        try:
            array = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            return f"expected {n} numbers (one contribution per agent), got {action!r:.60}"
        if array.shape != (n,):
            return f"expected {n} numbers (one contribution per agent), got {array.size}"
        if not np.all(np.isfinite(array)):
            return f"expected finite numbers, got {array.tolist()!r}"
        return array.astype(np.float32)

    def sample_action(self, rng: random.Random) -> str:
        """A random joint action as action text (each contribution uniform in ``[0, e_i]``, two
        decimals): what the random agent of ``envgym run`` sends."""
        return " ".join(f"{rng.uniform(0.0, float(e)):.2f}" for e in self.game.endowments)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        episode = self._episode
        episode.require_live(self)
        if episode.over:
            raise ResetNeededError(f"{self}: the episode is over ({episode.reason}); call reset().")
        parsed = self._parse(action)
        zeros = np.zeros(self.game.n_agents, dtype=np.float32)
        if isinstance(parsed, str):
            episode.invalid_round({0: parsed})  # one controller sends the joint action: one invalid action
            info = self._info(valid=False, rewards=zeros, payoffs=zeros, invalid_reason=parsed)
            terminated = episode.over
            return self.game.legacy_observation(), 0.0, terminated, False, info
        result = episode.play(parsed)
        info = self._info(valid=True, rewards=result.rewards, payoffs=result.payoffs)
        terminated = result.terminated
        truncated = result.truncated and not terminated
        return self.game.legacy_observation(), self._scalar(result.rewards), terminated, truncated, info

    def render(self) -> str | None:
        return self._episode.render() if self.render_mode == "ansi" else None

    def state_text(self) -> str:
        """The whole game state as text (see :meth:`_Episode.state_text`)."""
        return self._episode.state_text()


class CoopParallelEnv(_View, ParallelEnv[str, np.ndarray, np.ndarray]):
    """PettingZoo Parallel view of a coopetition game, for multi-agent classic RL.

    **Description.** Agents ``agent_0 ..`` each send a contribution and observe what
    ``obs_config`` shows them; ``envgym.make_aec`` of the same id gives the AEC form (moves
    buffered until the round is complete, then played at once).

    **Observation.** Per agent, the numbers ``obs_config`` shows it (information asymmetry;
    :class:`~.game.ObservationConfig`).

    **Actions.** Per agent, a contribution ``Box(0, e_i, (1,))``; finite numbers outside are
    clipped as in the reference; NaN, the wrong shape or a missing agent is invalid.

    **Reward components.** Per agent: ``payoff_reward`` (its own payoff, what its reward would be
    in the private mode) and ``social_reward`` (what the reward mode adds: 0 in the private mode).

    **Reward basis.** ``payoff_reward`` and ``social_reward``: each agent's reward is their sum (in
    every reward mode), so none is diagnostic.

    **Episode end.** The game's own early termination, the horizon, or ``invalid_limit`` invalid
    actions in a row from one agent (see the module docstring).

    **Arguments.**

    * ``game``: the game's name (the registry passes it).
    * ``obs_config``: what each agent observes: a preset name (``realistic_asymmetry`` default,
      ``full_observability``, ``minimal``), a dict of :class:`~.game.ObservationConfig` fields,
      or a config.
    * ``split``, ``invalid_limit``, ``render_mode``, ``kwargs``: as :class:`CoopEnv`.

    **Version history.** ``v0``: first release.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "name": "coopetition_v0", "is_parallelizable": True}

    def __init__(
        self,
        game: str,
        *,
        obs_config: Any = None,
        split: str = "train",
        invalid_limit: int = DEFAULT_INVALID_LIMIT,
        render_mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        self._episode = _Episode(game, split, invalid_limit, kwargs)
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}.")
        self.render_mode = render_mode
        self.obs_config = ObservationConfig.resolve(obs_config)
        g = self._episode.game
        self.possible_agents = [f"agent_{i}" for i in range(g.n_agents)]
        self.agents: list[str] = []
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self._all_valid = dict.fromkeys(range(g.n_agents), True)  # read only: every agent's action was valid
        g.reset(0)
        self.observation_spaces = {
            a: spaces.Box(-np.inf, np.inf, shape=g.observe(i, self.obs_config).shape, dtype=np.float32)
            for a, i in self._index.items()
        }
        self.action_spaces = {
            a: spaces.Box(0.0, float(g.endowments[i]), shape=(1,), dtype=np.float32) for a, i in self._index.items()
        }
        self._rng = np.random.default_rng()

    @property
    def game(self) -> Game:
        """The game being played."""
        return self._episode.game

    def observation_space(self, agent: str) -> spaces.Box:
        try:
            return self.observation_spaces[agent]
        except KeyError:
            raise unknown_agent(agent, self.possible_agents) from None

    def action_space(self, agent: str) -> spaces.Box:
        try:
            return self.action_spaces[agent]
        except KeyError:
            raise unknown_agent(agent, self.possible_agents) from None

    def _observations(self) -> dict[str, np.ndarray]:
        return dict(zip(self.possible_agents, self._episode.game.observe_all(self.obs_config)))  # one per agent

    def _infos(
        self, valid: Mapping[int, bool], rewards: np.ndarray, payoffs: np.ndarray, problems: Mapping[int, str]
    ) -> dict[str, dict[str, Any]]:
        """Every agent's ``info``: envgym's standard keys (what ``envgym.multiagent.agent_info``
        builds, written out: this runs every round) and the round's numbers; fresh containers."""
        episode = self._episode
        task = episode.task()
        numbers = episode.numbers()
        reward_list, payoff_list = rewards.tolist(), payoffs.tolist()
        if len(reward_list) == 2:  # float32 differences (as the text view reports them), in Python floats
            (r0, r1), (p0, p1) = reward_list, payoff_list
            social = f32x2(r0 - p0, r1 - p1)
        else:
            social = (rewards - payoffs).tolist()
        own = episode.game.actions.tolist()
        success = episode.reason == _SUCCESS
        reason = episode.reason
        turn = episode.game.step_count
        invalid = episode.invalid
        reasons = {self.possible_agents[j]: why for j, why in problems.items()} if problems else None
        # The first agent's info is written out; the others copy it and replace what is theirs
        # (the same keys in the same order), unless the round's numbers reuse one of those keys.
        first: dict[str, Any] | None = None
        patch = _PER_AGENT_KEYS.isdisjoint(numbers)
        infos = {}
        for agent, i in self._index.items():
            if first is None or not patch:
                info = {
                    "task": dict(task),
                    "admissible_actions": None,
                    "action_valid": valid.get(i, True),
                    "reward_components": {"payoff_reward": payoff_list[i], "social_reward": social[i]},
                    "success": success,
                    "termination_reason": reason,
                    "turn": turn,
                    "invalid_actions": invalid[i],
                    "reward_basis": list(COMPONENTS),
                    "rewards": list(reward_list),
                    "payoffs": list(payoff_list),
                    "agent": agent,
                    "own_action": own[i],
                    **numbers,
                }
                first = info
            else:
                info = first.copy()
                info["task"] = dict(task)
                info["action_valid"] = valid.get(i, True)
                info["reward_components"] = {"payoff_reward": payoff_list[i], "social_reward": social[i]}
                info["invalid_actions"] = invalid[i]
                info["reward_basis"] = list(COMPONENTS)
                info["rewards"] = list(reward_list)
                info["payoffs"] = list(payoff_list)
                info["agent"] = agent
                info["own_action"] = own[i]
            if reasons is not None:
                info["invalid_reason"] = dict(reasons)
            infos[agent] = info
        return infos

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._episode.reset(seed if seed is not None else int(self._rng.integers(2**31)))
        self.agents = list(self.possible_agents)
        zeros = np.zeros(self.game.n_agents, dtype=np.float32)
        return self._observations(), self._infos({}, zeros, zeros, {})

    def step(
        self, actions: Mapping[str, Any]
    ) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        episode = self._episode
        episode.require_live(self)
        if not self.agents:
            raise ResetNeededError(f"{self}: the episode is over ({episode.reason}); call reset().")
        if type(actions) is not dict and not isinstance(actions, Mapping):
            raise ConfigError(f"step() takes a dict {{agent: action}}, got {type(actions).__name__}.")
        index = self._index
        contributions: list[float] = []
        problems: dict[int, str] = {}
        if len(index) == 2 and type(actions) is dict and len(actions) == 2 and "agent_0" in actions:
            # the usual two-agent round (both agents, no other key): the loops below, written out
            x0, x1 = _number(actions["agent_0"]), _number(actions.get("agent_1", _NO_ACTION))
            if x0.__class__ is float and x1.__class__ is float:
                contributions = [x0, x1]
        if not contributions:
            for agent in actions:
                if agent not in index:
                    raise unknown_agent(agent, self.possible_agents)
            contributions = self._contributions(actions, problems)
        n = len(index)
        if problems:
            episode.invalid_round(problems)
            rewards = payoffs = np.zeros(n, dtype=np.float32)
            terminated, truncated = episode.over, False
            valid = {i: i not in problems for i in range(n)}
        else:
            # two agents: the floats themselves (the pair path rounds them to float32 as numpy would)
            result = episode.play(contributions if n == 2 else _array(contributions, _FLOAT32))
            rewards, payoffs = result.rewards, result.payoffs
            terminated = result.terminated
            truncated = result.truncated and not terminated
            valid = self._all_valid
        infos = self._infos(valid, rewards, payoffs, problems)
        observations = self._observations()
        possible = self.possible_agents
        reward_map = dict(zip(possible, rewards.tolist()))  # one reward per agent (float32 arrays of n)
        live = self.agents  # every agent until the episode ends (then all leave at once)
        if len(live) < len(possible):
            observations, reward_map, infos = ({a: d[a] for a in live} for d in (observations, reward_map, infos))
        terminations = dict.fromkeys(live, bool(terminated))
        truncations = dict.fromkeys(live, bool(truncated))
        if terminated or truncated:
            self.agents = []
        return observations, reward_map, terminations, truncations, infos

    def _contributions(self, actions: Mapping[str, Any], problems: dict[int, str]) -> list[float]:
        """Every agent's contribution in agent order; what is wrong with each invalid one goes to ``problems``."""
        contributions: list[float] = []
        for agent, i in self._index.items():
            if agent not in actions:
                problems[i] = "no action"
                continue
            number = _number(actions[agent])
            if number.__class__ is str:
                problems[i] = number
            else:
                contributions.append(number)
        return contributions

    def state(self) -> np.ndarray:
        """The joint observation (what :class:`CoopEnv` observes)."""
        return self.game.legacy_observation()

    def render(self) -> str | None:
        return self._episode.render() if self.render_mode == "ansi" else None

    def state_text(self) -> str:
        """The whole game state as text (see :meth:`_Episode.state_text`)."""
        return self._episode.state_text()

    def close(self) -> None:
        pass
