"""Core types: the text-environment base class, termination reasons, tasks and transitions.

:class:`TextEnv` is a real :class:`gymnasium.Env` whose observations and actions are strings. It
owns everything the envgym contract promises so that each environment only writes its rules:

* ``reset(seed=...)`` is fully deterministic: the same seed (and split) gives the same task and
  the same transitions;
* ``step`` accepts *any* value as an action. Text is cleaned by :func:`extract_action` (the last
  ``<action>...</action>`` block if there is one, surrounding quotes and extra whitespace
  removed); anything the environment cannot parse is an *invalid step*: the state is unchanged,
  the observation explains what was expected, ``info["action_valid"]`` is ``False`` and the
  ``invalid_action_reward`` component is charged. It never raises;
* the scalar reward is computed from named reward components by a rubric (by default the plain
  sum), and the components are always visible in ``info["reward_components"]``;
* ``info`` carries the standard keys listed in :data:`INFO_KEYS` on every reset and step;
* ``max_turns`` truncates and ``invalid_limit`` terminates with a :class:`TerminationReason`.

Subclasses implement :meth:`TextEnv._generate`, :meth:`TextEnv._observe`, :meth:`TextEnv._parse`
and :meth:`TextEnv._apply` (and :meth:`TextEnv.admissible_actions` when the action set is finite).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym

from envgym.errors import InvalidKwargsError, ResetNeededError, check_choice, suggest
from envgym.rubric import RewardContext, build_rubric, load_rubric
from envgym.spaces import MAX_TEXT_LENGTH, Text

__all__ = [
    "INFO_KEYS",
    "SPLITS",
    "InvalidAction",
    "RewardContext",
    "Task",
    "TerminationReason",
    "TextEnv",
    "Transition",
    "basis_of",
    "check_init_kwargs",
    "extract_action",
]

#: Keys present in ``info`` after every ``reset`` and ``step`` of every envgym environment.
INFO_KEYS: tuple[str, ...] = (
    "task",
    "admissible_actions",
    "action_valid",
    "reward_components",
    "success",
    "termination_reason",
    "turn",
    "invalid_actions",
)

#: Task splits every procedural environment understands.
SPLITS: tuple[str, ...] = ("train", "test")


class TerminationReason(enum.StrEnum):
    """Why an episode ended. Stored as its string value in ``info`` and in trajectories."""

    SUCCESS = "success"
    """The task was solved."""
    FAILURE = "failure"
    """The task can no longer be solved (lost game, fell in a hole, wrong final answer)."""
    MAX_TURNS = "max_turns"
    """The turn limit was reached (``truncated`` is ``True``)."""
    INVALID_LIMIT = "invalid_limit"
    """Too many invalid actions in one episode."""
    ENV_ERROR = "env_error"
    """The environment itself failed: infrastructure, never scored as a zero."""
    AGENT_ERROR = "agent_error"
    """The agent failed to produce an action (crash, garbage): infrastructure."""
    TIMEOUT = "timeout"
    """A wall-clock limit was hit: infrastructure."""

    @property
    def is_infrastructure(self) -> bool:
        """True for reasons that say nothing about the agent's skill and are reported apart."""
        return self in (TerminationReason.ENV_ERROR, TerminationReason.AGENT_ERROR, TerminationReason.TIMEOUT)


@dataclass(frozen=True, slots=True)
class Task:
    """What the agent is asked to do in one episode.

    Attributes:
        id: stable identifier (same seed, split and variant give the same id).
        goal: the goal in plain words, as shown to the agent.
        split: the task split (``"train"`` or ``"test"`` for procedural envs).
        difficulty: the difficulty preset or a short description of the generator settings.
        seed: the episode seed that generated the task.
        extra: environment specific, JSON-serialisable details.
    """

    id: str
    goal: str
    split: str = "train"
    difficulty: str = ""
    seed: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "goal": self.goal,
            "split": self.split,
            "difficulty": self.difficulty,
            "seed": self.seed,
            **dict(self.extra),
        }


@dataclass(slots=True)
class Transition:
    """What :meth:`TextEnv._apply` returns for a parsed action.

    Attributes:
        observation: the full observation text shown to the agent after this step.
        rewards: reward components produced by this step (missing declared ones count as 0).
        terminated: the episode reached a terminal state.
        success: the terminal state is a success.
    """

    observation: str
    rewards: dict[str, float] = field(default_factory=dict)
    terminated: bool = False
    success: bool = False


class InvalidAction(Exception):
    """Raised by :meth:`TextEnv._parse` or :meth:`TextEnv._apply` to reject an action.

    The message is shown to the agent, so it should say what was expected.
    """


Rubric = Callable[[Mapping[str, float], RewardContext], float]

_TAG_CACHE: dict[tuple[str, ...], re.Pattern[str]] = {}
_WS = re.compile(r"\s+")
_QUOTES = "\"'`"


def extract_action(text: str, tags: tuple[str, ...] = ("action",)) -> str:
    """Return the action written in ``text``.

    The content of the last ``<tag>...</tag>`` block (case-insensitive, any of ``tags``) if there
    is one, else the whole text; an opening tag without a closing one takes the rest of the text.
    Surrounding whitespace and quotes are stripped and inner whitespace runs become one space.
    """
    if "<" in text and tags:
        pattern = _TAG_CACHE.get(tags)
        if pattern is None:
            names = "|".join(re.escape(t) for t in tags)
            pattern = re.compile(rf"<\s*({names})\s*>(.*?)(?:<\s*/\s*\1\s*>|$)", re.IGNORECASE | re.DOTALL)
            _TAG_CACHE[tags] = pattern
        matches = pattern.findall(text)
        if matches:
            text = matches[-1][1]
    text = text.strip().strip(_QUOTES).strip()
    if "  " in text or "\n" in text or "\t" in text or "\r" in text:
        text = _WS.sub(" ", text)
    return text


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _WeightedComponents:
    """The default rubric: the sum of the components, each times its weight (default 1).

    A module-level class rather than a closure so environments pickle (worker pools send them
    between processes).
    """

    __slots__ = ("weights",)

    def __init__(self, weights: Mapping[str, float] | None) -> None:
        self.weights = dict(weights) if weights else None

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        if self.weights is None:
            return math.fsum(components.values())
        weights = self.weights
        return math.fsum(weights.get(k, 1.0) * v for k, v in components.items())

    def __repr__(self) -> str:
        return f"WeightedComponents({self.weights or 'all 1.0'})"


def basis_of(rubric: Any, components: tuple[str, ...]) -> tuple[str, ...]:
    """The components a rubric builds the scalar reward from, in ``components`` order: those of
    non-zero weight for component weights, those it reads for an ``envgym.rubric`` tree, and all
    of them for any other callable (it may read any)."""
    if isinstance(rubric, _WeightedComponents):
        weights = rubric.weights or {}
        return tuple(c for c in components if weights.get(c, 1.0) != 0)
    read = getattr(rubric, "components", None)
    if isinstance(read, (set, frozenset)):
        return tuple(c for c in components if c in read)
    return tuple(components)


def check_init_kwargs(cls: type, base: type) -> None:
    """Make ``cls(**kwargs)`` reject unknown keyword arguments with a "did you mean" error.

    Called from ``__init_subclass__`` of :class:`TextEnv` and of the multi-agent base: the valid
    names are the keyword parameters of every ``__init__`` from ``cls`` up to ``base`` (so a
    subclass that forwards ``**kwargs`` to ``super().__init__`` still gets a precise message
    instead of a ``TypeError`` from deep inside). The kwargs of the outermost call are kept in
    ``self._init_kwargs`` so checkers can build a twin of the environment.
    """
    params: set[str] = set()
    for klass in cls.__mro__:
        klass_init = klass.__dict__.get("__init__")
        if klass_init is None or klass is object:
            continue
        for p in inspect.signature(klass_init).parameters.values():
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self":
                params.add(p.name)
        if klass is base:
            break
    allowed = frozenset(params)
    cls._init_params = allowed  # type: ignore[attr-defined]
    # A subclass without its own __init__ gets a checking wrapper around the inherited one too
    # (the parent's wrapper only checks instances of exactly the parent class).
    init = cls.__dict__.get("__init__") or cls.__init__

    @functools.wraps(init)
    def checked_init(self: Any, *args: Any, **kw: Any) -> None:
        if type(self) is cls:
            unknown = sorted(set(kw) - allowed)
            if unknown:
                raise InvalidKwargsError(
                    f"{cls.__name__} got unknown keyword argument(s) {', '.join(map(repr, unknown))}."
                    f"{suggest(unknown[0], allowed)} Valid arguments: {', '.join(sorted(allowed))}."
                )
            self._init_kwargs = dict(kw)
        init(self, *args, **kw)

    cls.__init__ = checked_init  # type: ignore[misc]


class TextEnv(gym.Env[str, str]):
    """Base class of single-agent text environments (see the module docstring).

    Common keyword arguments of every subclass:

    Args:
        max_turns: turns before the episode is truncated (``None``: the class default).
        invalid_limit: invalid actions after which the episode terminates (``None``: no limit).
        invalid_penalty: value of the ``invalid_action_reward`` component on an invalid step.
        step_cost: value of the ``step_cost_reward`` component on every step (use a negative number).
        reward: how components become the scalar reward: ``None`` (their sum), a mapping of
            component name to weight (unlisted components keep weight 1), or a rubric callable
            ``(components, context) -> float`` such as those built by ``envgym.rewards``, or a
            rubric spec as YAML text (read by ``envgym.rewards.load_rubric``).
        split: task split, one of :data:`SPLITS` (``"train"`` or ``"test"``).
        render_mode: ``"ansi"`` (``render()`` returns the text) or ``"human"`` (prints it).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    #: Environment name used in task ids, e.g. ``"sokoban"``.
    name: ClassVar[str] = "text"
    #: Every reward component this environment can emit; all appear in every ``info``.
    reward_components: ClassVar[tuple[str, ...]] = ("success_reward", "invalid_action_reward", "step_cost_reward")
    #: The components the default scalar reward is built from (the rest are diagnostic); every
    #: class that declares ``reward_components`` declares this too (the family contract checks
    #: it). An instance's own basis, under its ``reward=``, is ``info["reward_basis"]``.
    reward_basis: ClassVar[tuple[str, ...]] = ("success_reward", "invalid_action_reward", "step_cost_reward")
    #: Turn limit when ``max_turns`` is not given.
    default_max_turns: ClassVar[int] = 100
    #: Tags whose content is taken as the action (``<action>up</action>``).
    action_tags: ClassVar[tuple[str, ...]] = ("action",)
    #: True when a bare number is an action in the environment's own words (TicTacToe's cells
    #: 1-9): front ends such as ``envgym play`` then send a typed number as it is, not as the
    #: index of their own menu of ``admissible_actions``.
    numbers_are_actions: ClassVar[bool] = False
    #: Splits this environment accepts.
    splits: ClassVar[tuple[str, ...]] = SPLITS

    _init_params: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_init_kwargs(cls, TextEnv)

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        invalid_limit: int | None = None,
        invalid_penalty: float = -0.1,
        step_cost: float = 0.0,
        reward: Mapping[str, float] | Rubric | str | None = None,
        split: str = "train",
        render_mode: str | None = None,
    ) -> None:
        if max_turns is not None and (not isinstance(max_turns, int) or max_turns < 1):
            raise InvalidKwargsError(f"max_turns must be a positive integer or None, got {max_turns!r}.")
        if invalid_limit is not None and (not isinstance(invalid_limit, int) or invalid_limit < 1):
            raise InvalidKwargsError(f"invalid_limit must be a positive integer or None, got {invalid_limit!r}.")
        for label, value in (("invalid_penalty", invalid_penalty), ("step_cost", step_cost)):
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidKwargsError(f"{label} must be a finite number, got {value!r}.")
        check_choice("split", split, self.splits)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise InvalidKwargsError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}."
            )
        self.max_turns = max_turns if max_turns is not None else self.default_max_turns
        self.invalid_limit = invalid_limit
        self.invalid_penalty = float(invalid_penalty)
        self.step_cost = float(step_cost)
        self.split = split
        self.render_mode = render_mode
        self._rubric = self._resolve_reward(reward)
        self.observation_space = Text(MAX_TEXT_LENGTH)
        self.action_space = Text(MAX_TEXT_LENGTH)
        self._zero_components = dict.fromkeys(self.reward_components, 0.0)
        self._basis = basis_of(self._rubric, self.reward_components)
        self._task: Task | None = None
        self._task_dict: dict[str, Any] = {}
        self._observation = ""
        self._ready = False
        self._turn = 0
        self._invalid = 0
        self.rng = random.Random(0)

    # ------------------------------------------------------------------ subclass hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        """Build a new episode's state from ``rng`` and return its task."""
        raise NotImplementedError

    def _observe(self) -> str:
        """Text of the current state (board, room description) shown after invalid steps too."""
        raise NotImplementedError

    def _intro(self) -> str:
        """Text shown once at reset, before the first observation (goal, rules, action format)."""
        return self._task.goal if self._task is not None else ""

    def _parse(self, text: str) -> Any:
        """Turn cleaned action text into an action the env understands, or raise InvalidAction."""
        raise NotImplementedError

    def _apply(self, action: Any) -> Transition:
        """Apply a parsed action (may raise InvalidAction when illegal in the current state)."""
        raise NotImplementedError

    def admissible_actions(self) -> list[str] | None:
        """The valid actions in the current state when the set is finite, else ``None``."""
        return None

    def sample_action(self, rng: random.Random) -> str:
        """A random action, valid in the current state whenever the environment can tell.

        Used by the random agent, the checkers and the throughput benchmarks. Environments with
        an infinite action set (arithmetic expressions, words) override it to propose plausible
        valid actions.
        """
        actions = self.admissible_actions()
        if actions:
            return rng.choice(actions)
        return self.action_space.sample()

    def progress(self) -> float | None:
        """Progress towards the goal in [0, 1] when the environment can tell, else ``None``."""
        return None

    # ------------------------------------------------------------------ public API
    @property
    def task(self) -> Task:
        if self._task is None:
            raise ResetNeededError(f"{type(self).__name__} has no task yet: call reset() first.")
        return self._task

    @property
    def turn(self) -> int:
        return self._turn

    @classmethod
    def env_card(cls, kwargs: Mapping[str, Any] | None = None) -> str:
        """The environment card: the class docstring (``kwargs``: the registered kwargs of an id,
        for classes whose card depends on them)."""
        return inspect.getdoc(cls) or cls.__name__

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**62))
        # Seeding Random with a string hashes it with SHA-512: stable across processes and
        # Python versions, unlike hash(), and different splits never share a stream.
        self.rng = random.Random(f"{self.name}:{self.split}:{episode_seed}")
        task = self._generate(self.rng, options)
        if task.seed is None or task.split != self.split:
            task = dataclasses.replace(task, seed=episode_seed, split=self.split)
        self._task = task
        self._task_dict = task.as_dict()
        self._turn = 0
        self._invalid = 0
        self._ready = True
        intro = self._intro()
        board = self._observe()
        self._observation = f"{intro}\n\n{board}" if intro else board
        info = self._info(dict(self._zero_components), True, False, None)
        return self._observation, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._ready:
            if self._task is None:
                raise ResetNeededError(f"{type(self).__name__}.step() called before reset(): call reset() first.")
            raise ResetNeededError(
                f"{type(self).__name__}.step() called after the episode ended: call reset() to start a new one."
            )
        self._turn += 1
        if isinstance(action, str):
            text = action
        elif isinstance(action, (bytes, bytearray)):
            text = bytes(action).decode("utf-8", errors="replace")
        else:
            text = None
        components = dict(self._zero_components)
        valid = True
        terminated = False
        success = False
        try:
            if text is None:
                raise InvalidAction(f"expected the action as a string, got {type(action).__name__}.")
            cleaned = extract_action(text, self.action_tags)
            transition = self._apply(self._parse(cleaned))
        except InvalidAction as err:
            valid = False
            self._invalid += 1
            components["invalid_action_reward"] = self.invalid_penalty
            shown = _clip(text if text is not None else repr(action))
            self._observation = f"Invalid action {shown!r}: {err}\n\n{self._observe()}"
        else:
            for key, value in transition.rewards.items():
                components[key] = components.get(key, 0.0) + value
            terminated = transition.terminated
            success = transition.success
            self._observation = transition.observation
        if self.step_cost:
            components["step_cost_reward"] = self.step_cost
        reason: TerminationReason | None = None
        truncated = False
        if terminated:
            reason = TerminationReason.SUCCESS if success else TerminationReason.FAILURE
        elif self.invalid_limit is not None and self._invalid >= self.invalid_limit:
            terminated = True
            reason = TerminationReason.INVALID_LIMIT
        elif self._turn >= self.max_turns:
            truncated = True
            reason = TerminationReason.MAX_TURNS
        if reason is not None:
            self._ready = False
        info = self._info(components, valid, success, reason)
        context = RewardContext(
            action_text=text if text is not None else "",
            turn=self._turn,
            action_valid=valid,
            terminated=terminated,
            success=success,
            task=self._task_dict,
            progress=info.get("progress"),
        )
        reward = float(self._rubric(components, context))
        return self._observation, reward, terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='ansi' to make().")
            return None
        text = self._observe() if self._task is not None else ""
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        self._ready = False

    # ------------------------------------------------------------------ helpers
    def _info(
        self,
        components: dict[str, float],
        valid: bool,
        success: bool,
        reason: TerminationReason | None,
    ) -> dict[str, Any]:
        info: dict[str, Any] = {
            "task": dict(self._task_dict),  # a copy: callers keep and mutate infos
            "admissible_actions": self.admissible_actions() if reason is None else [],
            "action_valid": valid,
            "reward_components": components,
            "success": success,
            "termination_reason": reason.value if reason is not None else None,
            "turn": self._turn,
            "invalid_actions": self._invalid,
            "reward_basis": list(self._basis),
        }
        progress = self.progress()
        if progress is not None:
            info["progress"] = progress
        return info

    def _resolve_reward(self, reward: Mapping[str, float] | Rubric | str | None) -> Rubric:
        if reward is None:
            return _WeightedComponents(None)
        if callable(reward):
            # Rubrics of envgym.rewards check, before any episode runs, that they read only
            # components this environment emits and context fields it passes.
            validate = getattr(reward, "validate_components", None)
            if callable(validate):
                validate(self.reward_components, owner=type(self).__name__)
            return reward
        if isinstance(reward, Mapping):
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in reward.values()):
                for key, value in reward.items():
                    if key not in self.reward_components:
                        raise InvalidKwargsError(
                            f"reward weights name the component {key!r}, which {type(self).__name__} does not emit."
                            f"{suggest(key, self.reward_components)} Components: {', '.join(self.reward_components)}."
                        )
                    if not math.isfinite(value):
                        raise InvalidKwargsError(f"reward weight for {key!r} must be a finite number, got {value!r}.")
                return _WeightedComponents(reward)
            # A structured rubric spec (gate, product, ...) is built by the reward layer.
            return build_rubric(reward, components=self.reward_components, owner=type(self).__name__)
        if isinstance(reward, str):
            # A rubric spec as YAML text (or a *.yaml file name, or one component's name).
            return load_rubric(reward, components=self.reward_components, owner=type(self).__name__)
        raise InvalidKwargsError(
            "reward must be None, a mapping of component weights, a rubric spec as YAML text or a rubric "
            f"callable, got {type(reward).__name__}."
        )
