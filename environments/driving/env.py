"""Driving environments over highway-env: a text view for LLM agents and a numeric view for RL.

:class:`DriveEnv` (``envgym/Drive-<Scenario>-v0``) is a :class:`~envgym.core.TextEnv`: the agent
reads a scene description with the available meta-actions as a numbered list and answers with a
number or a name. :class:`DriveKinematicsEnv` (``envgym/Drive-<Scenario>-Kinematics-v0``) is a
plain Gymnasium env with highway-env's ``Kinematics`` Box observation and ``Discrete`` meta-action
space (what a standard PPO trains on) that keeps envgym's ``info`` contract. Both step the same
:class:`~envgym.environments.driving.sim.DriveSim`, so the same seed and split give the same
scene in both views.
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from envgym.environments.driving.scene import describe, describe_actions, parse_meta_action
from envgym.environments.driving.sim import DriveSim, simulator_seed

from envgym.core import RewardContext, Task, TerminationReason, TextEnv, Transition, basis_of, check_init_kwargs
from envgym.errors import InvalidKwargsError, ResetNeededError, check_choice
from envgym.rubric import Lexicographic, Rubric, Sum, Term

__all__ = ["REWARD_MODES", "DriveEnv", "DriveKinematicsEnv", "parse_meta_action", "reward_rubric"]

#: Reward modes: which components make the scalar reward (see :func:`reward_rubric`).
REWARD_MODES: tuple[str, ...] = ("highway", "carl", "preordered")
#: How the text view numbers the available actions: ``"list"`` from 1 in the list of the turn
#: (v0), ``"fixed"`` by highway-env's action index (v1: 0 LANE_LEFT, 1 IDLE, 2 LANE_RIGHT,
#: 3 FASTER, 4 SLOWER; at the intersection 0 SLOWER, 1 IDLE, 2 FASTER).
ACTION_NUMBERS: tuple[str, ...] = ("list", "fixed")
#: Name of the family in task ids and seeds (text and numeric views share seeds).
NAME = "driving"
#: Reward components of every scenario (each adds highway-env's own terms as ``highway_<term>``).
COMPONENTS: tuple[str, ...] = (
    "env_reward",
    "progress_reward",
    "speed_factor",
    "ttc_factor",
    "comfort_factor",
    "carl_reward",
    "safety_reward",
    "comfort_reward",
    "invalid_action_reward",
    "step_cost_reward",
)


def reward_rubric(mode: str) -> Rubric:
    """The rubric of a reward mode.

    * ``highway``: ``env_reward`` (highway-env's own scalar reward) + invalid-action and step costs.
    * ``carl``: ``carl_reward`` + invalid-action and step costs.
    * ``preordered``: lexicographic (``safety_reward``, ``progress_reward``, ``comfort_reward`` +
      invalid-action and step costs), scalarised as ``o_0 + 1e-3 o_1 + 1e-6 o_2``.
    """
    check_choice("reward_mode", mode, REWARD_MODES)
    costs = [Term("invalid_action_reward"), Term("step_cost_reward")]
    if mode == "highway":
        return Sum(Term("env_reward"), *costs)
    if mode == "carl":
        return Sum(Term("carl_reward"), *costs)
    return Lexicographic([Term("safety_reward"), Term("progress_reward"), Sum(Term("comfort_reward"), *costs)])


def _default_turns(sim: DriveSim) -> int:
    # Twice the decisions of the time limit: invalid answers cost turns but not simulated time.
    return 2 * math.ceil(sim.duration / sim.dt)


class DriveEnv(TextEnv):
    """Drive: steer a car through a highway-env scenario by choosing meta-actions in words.

    **Description.** A text view of the ``highway-env`` simulator (Leurent, 1.12) for LLM agents.
    Scenarios: ``highway`` (highway-fast: 3 lanes, 20 vehicles, 30 s), ``merge`` (a vehicle
    merges from an on-ramp; pass 370 m within 20 s), ``roundabout`` (11 s), ``intersection``
    (cross an unsignalised intersection, speed control only, 13 s). One decision per simulated
    second (highway-env's ``policy_frequency``); other vehicles follow IDM and MOBIL. Seeds of the
    ``train`` and ``test`` splits map to disjoint simulator seed ranges.

    **Observation.** At reset the goal and the answer format, then every turn: the time, the
    lanes and your lane (numbered from the left), your speed, target speed and the speed limit,
    route progress; for each of your lane and its neighbours the nearest vehicle ahead and
    behind (bumper-to-bumper gap, relative speed, time to collision); at a roundabout or an
    intersection instead the five nearest vehicles in your frame (ahead/behind, left/right,
    speed, heading, closing speed, time to collision). Then the available meta-actions as a
    numbered list (highway-env's ``get_available_actions`` masks lane changes at road edges and
    speed changes at the ends of the target speeds).

    **Actions.** A number of the list, or a name: ``LANE_LEFT``, ``IDLE``, ``LANE_RIGHT``,
    ``FASTER``, ``SLOWER`` (case-insensitive; ``left``, ``keep``, ``accelerate``, ``brake`` ...
    also work; ``<action>2</action>`` too). Anything else, or a masked action, is an invalid
    step: the simulation does not advance and the observation says what is allowed.

    **Reward components** (all in every ``info["reward_components"]``):

    * ``env_reward``: highway-env's own scalar reward of the step, and ``highway_<term>``: its
      reward terms (``info["rewards"]``, unweighted: ``highway_collision_reward`` is 1 on a crash).
    * ``progress_reward``: route completion added by the step (route: the distance covered at
      20 m/s in the time limit on the highway, 370 m on the merge road, the planned route at the
      roundabout and the intersection).
    * ``speed_factor``, ``ttc_factor``, ``comfort_factor``: CaRL's multiplicative factors, and
      ``carl_reward`` = progress x factors, ``-1`` on a collision, ``0`` off the road
      (:mod:`envgym.environments.driving.reward`).
    * ``safety_reward`` (``-1`` collision/off road, ``-0.1`` time to collision < 2 s) and
      ``comfort_reward`` (``-0.5`` per broken nuPlan comfort limit step, ``-0.1`` per lane change).
    * ``invalid_action_reward`` (``invalid_penalty``) and ``step_cost_reward`` (``step_cost``).

    The scalar reward follows ``reward_mode``: ``"highway"`` (default; ``env_reward``),
    ``"carl"`` (``carl_reward``) or ``"preordered"`` (safety, then progress, then comfort through
    :class:`envgym.rubric.Lexicographic`; the priority tuple is in ``info["reward_priorities"]``).
    ``reward=`` (any rubric) overrides it.

    **Reward basis.** Set by ``reward_mode`` (``info["reward_basis"]`` names the instance's):
    ``highway`` (default) ``env_reward``, ``invalid_action_reward`` and ``step_cost_reward``;
    ``carl`` ``carl_reward`` and the two costs; ``preordered`` ``safety_reward``,
    ``progress_reward``, ``comfort_reward`` and the two costs. The rest are diagnostic: the
    ``highway_<term>`` terms, ``speed_factor``, ``ttc_factor``, ``comfort_factor`` (and the
    components of the modes not chosen).

    **Episode end.** ``terminated`` on a collision or leaving the road (failure); on success:
    surviving the time limit (highway, roundabout), passing 370 m (merge), arriving (intersection);
    ``terminated`` with failure when time runs out first on merge and intersection; ``truncated``
    after ``max_turns`` turns (default: twice the decisions of the time limit). ``info`` adds
    ``progress``, ``collision``, ``speed`` and ``sim_time``.

    **Arguments.** ``scenario`` (``highway``, ``merge``, ``roundabout``, ``intersection``),
    ``action_numbers`` (``"list"``, v0's default, or ``"fixed"``, v1's: see the version history),
    ``reward_mode``, ``duration`` (time limit in s), ``config`` (highway-env config overrides,
    e.g. ``{"vehicles_count": 30}``), ``render_mode`` (``"ansi"``, ``"human"`` or
    ``"rgb_array"``: offscreen frames from highway-env's renderer), and the common
    :class:`~envgym.core.TextEnv` arguments. Needs ``pip install 'envgym[driving]'``.

    Parking (``parking-v0``) is not offered: it is goal-conditioned continuous control (steering
    and acceleration to a parking pose) with no lanes and no meta-actions to list.

    **Replay.** The simulator's numbers differ in the last bits between CPUs (numpy's float64
    kernels differ between AVX-512 and AVX2 machines) and the difference grows through the
    dynamics: ``progress_reward`` of roundabout seed 3 at turn 8 of the published random bundle
    replayed 2.8e-7 apart on another CPU. The leaderboard compares this env's rewards within
    ``replay_tolerance`` (1e-4) instead of 1e-9; observations still must match exactly.

    **Version history.** ``v0``: first release. ``v1``: ``action_numbers="fixed"``: the available
    actions keep highway-env's numbers (0 ``LANE_LEFT``, 1 ``IDLE``, 2 ``LANE_RIGHT``, 3
    ``FASTER``, 4 ``SLOWER``; at the intersection 0 ``SLOWER``, 1 ``IDLE``, 2 ``FASTER``) instead
    of being numbered from 1 in each turn's list, where "2" meant ``LANE_RIGHT`` in one lane and
    ``IDLE`` at the road's edge.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 1}
    name: ClassVar[str] = NAME
    #: The components of every scenario (an instance adds its scenario's ``highway_<term>`` terms).
    reward_components: ClassVar[tuple[str, ...]] = COMPONENTS
    #: The default ``reward_mode``'s (``highway``); an instance's is ``info["reward_basis"]``.
    reward_basis: ClassVar[tuple[str, ...]] = ("env_reward", "invalid_action_reward", "step_cost_reward")
    #: Float tolerance of a leaderboard replay (see **Replay** above).
    replay_tolerance: ClassVar[float] = 1e-4
    action_tags: ClassVar[tuple[str, ...]] = ("action", "answer")
    numbers_are_actions: ClassVar[bool] = True  # "2" is the action the observation numbers 2

    def __init__(
        self,
        *,
        scenario: str = "highway",
        reward_mode: str = "highway",
        duration: float | None = None,
        config: dict[str, Any] | None = None,
        reward: Any = None,
        max_turns: int | None = None,
        render_mode: str | None = None,
        action_numbers: str = "list",
        **kwargs: Any,
    ) -> None:
        check_choice("reward_mode", reward_mode, REWARD_MODES)
        check_choice("action_numbers", action_numbers, ACTION_NUMBERS)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise InvalidKwargsError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}."
            )
        self._sim = DriveSim(scenario, duration=duration, config=config, render=render_mode == "rgb_array")
        self.scenario = scenario
        self.reward_mode = reward_mode
        self.reward_components = (*self._sim.component_names(), "invalid_action_reward", "step_cost_reward")
        self.default_max_turns = _default_turns(self._sim)
        super().__init__(
            reward=reward if reward is not None else reward_rubric(reward_mode),
            max_turns=max_turns,
            render_mode=render_mode,
            **kwargs,
        )
        self._known = tuple(self._sim.names.values())
        self._available: list[str] = []
        self._ended = ""
        self.action_numbers = action_numbers

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        seed = simulator_seed(self.split, rng)
        self._sim.reset(seed)
        self._known = tuple(self._sim.names.values())
        self._available = [self._sim.names[a] for a in self._sim.available()]
        self._ended = ""
        sc = self._sim.scenario
        return Task(
            id=f"driving-{sc.name}-{seed:08x}",
            goal=sc.goal,
            difficulty=sc.name,
            extra={"scenario": sc.name, "sim_seed": seed, "duration": self._sim.duration},
        )

    def _intro(self) -> str:
        return (
            f"You drive the ego car in a traffic simulation (highway-env), one decision per "
            f"{self._sim.dt:g} s of simulated time.\nGoal: {self._sim.scenario.goal}\n"
            "Each turn answer with the number or the name of one available action, e.g. <action>2</action>."
        )

    def _observe(self) -> str:
        scene = describe(self._sim.scene())
        if self._ended:
            return f"{scene}\n{self._ended}"
        return f"{scene}\n" + describe_actions(self._available, self._numbers())

    def _parse(self, text: str) -> str:
        return parse_meta_action(text, self._available, self._known, self._numbers())

    def _numbers(self) -> dict[str, int] | None:
        """``"fixed"``: highway-env's action indices (known once the scenario is reset), so a number
        names one action all episode long; ``"list"``: ``None`` (numbered from 1 each turn)."""
        return dict(self._sim.ids) if self.action_numbers == "fixed" else None

    def _apply(self, action: str) -> Transition:
        outcome = self._sim.step(self._sim.ids[action])
        self._available = [self._sim.names[a] for a in self._sim.available()]
        line = f"You chose {action}."
        if outcome.collided:
            self._ended = "You collided with another vehicle. Episode over."
        elif outcome.offroad:
            self._ended = "You left the road. Episode over."
        elif outcome.success:
            self._ended = "You reached the goal. Episode over."
        elif outcome.ended:
            self._ended = "Time is up before you reached the goal. Episode over."
        return Transition(
            observation=f"{line}\n\n{self._observe()}",
            rewards=outcome.components,
            terminated=outcome.ended,
            success=outcome.success,
        )

    def admissible_actions(self) -> list[str]:
        return list(self._available)

    def progress(self) -> float | None:
        return self._sim.progress if self._task is not None else None

    def _info(self, components: dict[str, float], valid: bool, success: bool, reason: Any) -> dict[str, Any]:
        info = super()._info(components, valid, success, reason)
        _add_drive_info(info, self._sim, self._rubric, components)
        return info

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            if self._task is None:
                raise ResetNeededError("DriveEnv.render() called before reset(): call reset() first.")
            return self._sim.render()
        return super().render()

    def close(self) -> None:
        super().close()
        self._sim.close()


def _add_drive_info(info: dict[str, Any], sim: DriveSim, rubric: Any, components: dict[str, float]) -> None:
    if sim.seed is None:
        return
    ego = sim.env.vehicle
    info["collision"] = bool(ego.crashed)
    info["speed"] = float(ego.speed)
    info["sim_time"] = float(sim.env.time)
    if isinstance(rubric, Lexicographic):
        context = RewardContext(action_text="", turn=0, action_valid=True, terminated=False, success=False, task={})
        info["reward_priorities"] = rubric.priorities(components, context)


def _observation_space(sim: DriveSim) -> gym.spaces.Box:
    """highway-env's Kinematics space, with the [-1, 1] bounds its normalised, clipped features
    keep (highway-env declares -inf..inf, which Gymnasium's checker flags)."""
    space = sim.env.observation_space
    obs_type = sim.env.observation_type
    if getattr(obs_type, "normalize", False) and getattr(obs_type, "clip", False):
        return gym.spaces.Box(-1.0, 1.0, shape=space.shape, dtype=np.float32)
    return space


class DriveKinematicsEnv(gym.Env[np.ndarray, int]):
    """Drive (numeric): highway-env's Kinematics observations and Discrete meta-actions for RL.

    **Description.** The same scenarios, seeds, splits, rewards and episode ends as
    :class:`DriveEnv` (``envgym/Drive-<Scenario>-v0``), as a plain Gymnasium env that a standard
    PPO (e.g. Stable-Baselines3's ``MlpPolicy``) trains on.

    **Observation.** highway-env's ``Kinematics`` array (``Box``, float32): one row per vehicle
    (the ego first), features ``presence, x, y, vx, vy`` (and ``cos_h, sin_h`` at the
    intersection), normalised as highway-env does; shape (5, 5), (15, 7) at the intersection.

    **Actions.** ``Discrete(5)``: 0 ``LANE_LEFT``, 1 ``IDLE``, 2 ``LANE_RIGHT``, 3 ``FASTER``,
    4 ``SLOWER`` (``Discrete(3)``: 0 ``SLOWER``, 1 ``IDLE``, 2 ``FASTER`` at the intersection);
    an action name string works too. Masked actions are passed to highway-env as it accepts them
    (a lane change at the road edge keeps the lane); ``info["action_mask"]`` gives the mask for
    maskable PPO. A value outside the space is an invalid step: the simulation does not advance,
    the observation repeats and ``invalid_action_reward`` is charged.

    **Reward components, reward modes.** As :class:`DriveEnv` (``reward_mode``: ``highway``,
    ``carl``, ``preordered``).

    **Reward basis.** Set by ``reward_mode`` (``info["reward_basis"]`` names the instance's):
    ``highway`` (default) ``env_reward``, ``invalid_action_reward`` and ``step_cost_reward``;
    ``carl`` ``carl_reward`` and the two costs; ``preordered`` ``safety_reward``,
    ``progress_reward``, ``comfort_reward`` and the two costs. The rest are diagnostic: the
    ``highway_<term>`` terms, ``speed_factor``, ``ttc_factor``, ``comfort_factor`` (and the
    components of the modes not chosen).

    **Episode end.** ``terminated`` on a collision, leaving the road or reaching the goal
    (surviving the time limit counts as reaching it on highway and roundabout); ``truncated``
    when time runs out first on merge and intersection, or after ``max_turns`` steps.

    **Arguments.** ``scenario``, ``reward_mode``, ``duration``, ``config``, ``split``,
    ``max_turns``, ``invalid_penalty``, ``step_cost``, ``render_mode`` (``"rgb_array"``).

    **Version history.** ``v0``: first release.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 1}
    name: ClassVar[str] = NAME
    #: The components of every scenario (an instance adds its scenario's ``highway_<term>`` terms).
    reward_components: ClassVar[tuple[str, ...]] = COMPONENTS
    #: The default ``reward_mode``'s (``highway``); an instance's is ``info["reward_basis"]``.
    reward_basis: ClassVar[tuple[str, ...]] = ("env_reward", "invalid_action_reward", "step_cost_reward")

    def __init__(
        self,
        *,
        scenario: str = "highway",
        reward_mode: str = "highway",
        duration: float | None = None,
        config: dict[str, Any] | None = None,
        split: str = "train",
        max_turns: int | None = None,
        invalid_penalty: float = -0.1,
        step_cost: float = 0.0,
        render_mode: str | None = None,
    ) -> None:
        check_choice("reward_mode", reward_mode, REWARD_MODES)
        check_choice("split", split, ("train", "test"))
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise InvalidKwargsError(f"render_mode must be None or 'rgb_array', got {render_mode!r}.")
        if max_turns is not None and (not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1):
            raise InvalidKwargsError(f"max_turns must be a positive integer or None, got {max_turns!r}.")
        for label, value in (("invalid_penalty", invalid_penalty), ("step_cost", step_cost)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise InvalidKwargsError(f"{label} must be a finite number, got {value!r}.")
        self._sim = DriveSim(scenario, duration=duration, config=config, render=render_mode == "rgb_array")
        self._sim.reset(simulator_seed(split, random.Random(0)))  # builds the spaces
        self.scenario = scenario
        self.reward_mode = reward_mode
        self.split = split
        self.render_mode = render_mode
        self.max_turns = max_turns if max_turns is not None else _default_turns(self._sim)
        self.invalid_penalty = float(invalid_penalty)
        self.step_cost = float(step_cost)
        self.reward_components = (*self._sim.component_names(), "invalid_action_reward", "step_cost_reward")
        self._rubric = reward_rubric(reward_mode)
        self._basis = basis_of(self._rubric, self.reward_components)
        self.observation_space = _observation_space(self._sim)
        self.action_space = gym.spaces.Discrete(int(self._sim.env.action_space.n))
        self._zero = dict.fromkeys(self.reward_components, 0.0)
        self._task: Task | None = None
        self._ready = False
        self._turn = 0
        self._invalid = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**62))
        # The same stream as DriveEnv: the same seed and split give the same scene in both views.
        rng = random.Random(f"{NAME}:{self.split}:{episode_seed}")
        sim_seed = simulator_seed(self.split, rng)
        self._sim.reset(sim_seed)
        sc = self._sim.scenario
        self._task = Task(
            id=f"driving-{sc.name}-{sim_seed:08x}",
            goal=sc.goal,
            split=self.split,
            difficulty=sc.name,
            seed=episode_seed,
            extra={"scenario": sc.name, "sim_seed": sim_seed, "duration": self._sim.duration},
        )
        self._turn = 0
        self._invalid = 0
        self._ready = True
        return self._obs(), self._info(dict(self._zero), True, False, None)

    def _obs(self) -> np.ndarray:
        return np.array(self._sim.observation, dtype=self.observation_space.dtype, copy=True)

    def _action_id(self, action: Any) -> int | None:
        if isinstance(action, (bool, np.bool_)):
            return None
        if isinstance(action, (int, np.integer)) and 0 <= int(action) < self.action_space.n:
            return int(action)
        if isinstance(action, np.ndarray) and action.shape == () and np.issubdtype(action.dtype, np.integer):
            return self._action_id(int(action))
        if isinstance(action, str):
            return self._sim.ids.get(action.strip().upper())
        return None

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self._ready:
            what = "before reset()" if self._task is None else "after the episode ended"
            raise ResetNeededError(f"DriveKinematicsEnv.step() called {what}: call reset() first.")
        self._turn += 1
        components = dict(self._zero)
        action_id = self._action_id(action)
        terminated = truncated = success = False
        if action_id is None:
            self._invalid += 1
            components["invalid_action_reward"] = self.invalid_penalty
        else:
            outcome = self._sim.step(action_id)
            components.update(outcome.components)
            success = outcome.success
            terminated = outcome.ended and not outcome.timed_out
            truncated = outcome.timed_out and not success
            terminated = terminated or (outcome.timed_out and success)
        if self.step_cost:
            components["step_cost_reward"] = self.step_cost
        if not (terminated or truncated) and self._turn >= self.max_turns:
            truncated = True
        reason: TerminationReason | None = None
        if terminated:
            reason = TerminationReason.SUCCESS if success else TerminationReason.FAILURE
        elif truncated:
            reason = TerminationReason.MAX_TURNS
        if reason is not None:
            self._ready = False
        info = self._info(components, action_id is not None, success, reason)
        context = RewardContext(
            action_text="" if action_id is None else self._sim.names[action_id],
            turn=self._turn,
            action_valid=action_id is not None,
            terminated=terminated,
            success=success,
            task=self._task.as_dict() if self._task else {},
            progress=self._sim.progress,
        )
        reward = float(self._rubric(components, context))
        return self._obs(), reward, terminated, truncated, info

    def _info(self, components: dict[str, float], valid: bool, success: bool, reason: Any) -> dict[str, Any]:
        available = self._sim.available() if reason is None else []
        mask = np.zeros(self.action_space.n, dtype=bool)
        mask[available] = True
        info: dict[str, Any] = {
            "task": self._task.as_dict() if self._task else {},
            "admissible_actions": [self._sim.names[a] for a in available],
            "action_valid": valid,
            "reward_components": components,
            "success": success,
            "termination_reason": reason.value if reason is not None else None,
            "turn": self._turn,
            "invalid_actions": self._invalid,
            "progress": self._sim.progress,
            "action_mask": mask,
            "reward_basis": list(self._basis),
        }
        _add_drive_info(info, self._sim, self._rubric, components)
        return info

    def sample_action(self, rng: random.Random) -> int:
        """A random available meta-action id."""
        return rng.choice(self._sim.available())

    def _observe(self) -> str:
        """The scene as text (the state the checkers compare around an invalid step)."""
        return describe(self._sim.scene())

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='rgb_array' to make().")
            return None
        if self._task is None:
            raise ResetNeededError("DriveKinematicsEnv.render() called before reset(): call reset() first.")
        return self._sim.render()

    def close(self) -> None:
        self._ready = False
        self._sim.close()

    @classmethod
    def env_card(cls, kwargs: Mapping[str, Any] | None = None) -> str:
        """The environment card: the class docstring."""
        return inspect.getdoc(cls) or cls.__name__


check_init_kwargs(DriveKinematicsEnv, DriveKinematicsEnv)
