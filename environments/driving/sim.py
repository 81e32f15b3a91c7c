"""The highway-env simulation behind every ``envgym/Drive-*`` id: scenarios and one driving step.

:data:`SCENARIOS` names the highway-env environment class and the settings of each scenario;
:class:`DriveSim` owns one highway-env environment, resets it from a split-aware seed, steps it
with a meta-action and computes every reward component of the family (highway-env's own terms,
the CaRL-style reward and the preordered objectives) plus route progress, success and the
:class:`~envgym.environments.driving.scene.Scene`. Both the text and the numeric environments
(:mod:`envgym.environments.driving.env`) drive a :class:`DriveSim`.

This module imports ``highway_env`` at load: it is imported only when a ``Drive`` env is made,
and without the package it raises :class:`~envgym.errors.MissingDependencyError` naming
``pip install 'envgym[driving]'``.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envgym.errors import InvalidKwargsError, MissingDependencyError, check_choice, suggest

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
try:
    import highway_env  # noqa: F401  - registers highway-env's own ids (harmless) and loads its modules
    from highway_env import utils
    from highway_env.envs.common.graphics import EnvViewer
    from highway_env.envs.highway_env import HighwayEnvFast
    from highway_env.envs.intersection_env import IntersectionEnv
    from highway_env.envs.merge_env import MergeEnv
    from highway_env.envs.roundabout_env import RoundaboutEnv
    from highway_env.vehicle.behavior import IDMVehicle
except ImportError as err:  # pragma: no cover - exercised where the extra is missing
    raise MissingDependencyError("highway-env", "driving", "The envgym/Drive-* environments") from err

from envgym.environments.driving import reward as R
from envgym.environments.driving.scene import Scene, scene_from_road

#: IDM parameters that highway-env's IntersectionEnv overwrites *on the class* when it builds its
#: traffic (DISTANCE_WANTED 7, COMFORT_ACC_MAX 6, COMFORT_ACC_MIN -3): after an intersection
#: episode every other scenario in the process would drive differently. Each DriveSim puts the
#: values its own scenario uses back on the class before it resets and steps.
_IDM_ATTRS = ("DISTANCE_WANTED", "COMFORT_ACC_MAX", "COMFORT_ACC_MIN")


def _idm_class(env: Any) -> type:
    return utils.class_from_path(env.config["other_vehicles_type"])


def _get_idm(env: Any) -> dict[str, Any]:
    cls = _idm_class(env)
    return {name: getattr(cls, name) for name in _IDM_ATTRS if hasattr(cls, name)}


def _set_idm(env: Any, values: dict[str, Any]) -> None:
    cls = _idm_class(env)
    for name, value in values.items():
        setattr(cls, name, value)


__all__ = ["SCENARIOS", "SEED_SPACE", "DriveSim", "Scenario", "StepOutcome", "simulator_seed"]

#: highway-env's IDM class parameters as the package defines them (read at import, before any
#: IntersectionEnv has changed them).
_IDM_DEFAULTS: dict[str, Any] = {name: getattr(IDMVehicle, name) for name in _IDM_ATTRS}

#: Simulator seeds of the ``train`` split lie in ``[0, SEED_SPACE)``, those of ``test`` in
#: ``[SEED_SPACE, 2 * SEED_SPACE)``: the splits never share a scene.
SEED_SPACE = 2**31
_SPLIT_OFFSET = {"train": 0, "test": SEED_SPACE}


def simulator_seed(split: str, rng: random.Random) -> int:
    """The highway-env seed of an episode: 31 random bits from ``rng``, in ``split``'s range."""
    check_choice("split", split, tuple(_SPLIT_OFFSET))
    return _SPLIT_OFFSET[split] + rng.getrandbits(31)


@dataclass(frozen=True)
class Scenario:
    """One driving scenario.

    Attributes:
        name: lower-case name (``highway``).
        env_class: the highway-env environment class.
        duration: time limit (s) of an episode.
        success: ``"survive"`` (no collision until the time limit), ``"pass"`` (reach the end of
            the road section) or ``"arrive"`` (reach the destination).
        junction: describe the scene with the junction view (vehicles around) instead of lanes.
        route: ``"straight"`` (progress along x) or ``"planned"`` (along the ego's planned route).
        route_end_x: x (m) where a ``pass`` route ends.
        reference_speed: for ``survive`` routes on a straight road: route length =
            ``duration * reference_speed`` (the lowest target speed of the meta-actions).
        goal: the goal shown to the agent.
        config: highway-env config overrides.
    """

    name: str
    env_class: type
    duration: float
    success: str
    goal: str
    junction: bool = False
    route: str = "straight"
    route_end_x: float | None = None
    reference_speed: float = 20.0
    speed_limit: float | None = None
    config: dict[str, Any] = field(default_factory=dict)


SCENARIOS: dict[str, Scenario] = {
    "highway": Scenario(
        name="highway",
        env_class=HighwayEnvFast,
        duration=30.0,
        success="survive",
        goal="Drive along the highway for 30 s without colliding; faster and in the right-hand lanes is better.",
    ),
    "merge": Scenario(
        name="merge",
        env_class=MergeEnv,
        duration=20.0,
        success="pass",
        route_end_x=370.0,
        # highway-env builds the merge road with its lane default of 20 m/s while its own reward
        # asks for 20-30 m/s and the ego starts at 30 m/s: the limit here is 30 m/s.
        speed_limit=30.0,
        goal="Drive past the on-ramp merge (370 m along the road) within 20 s without colliding; "
        "make room for the merging vehicle.",
    ),
    "roundabout": Scenario(
        name="roundabout",
        env_class=RoundaboutEnv,
        duration=11.0,
        success="survive",
        junction=True,
        route="planned",
        goal="Enter the roundabout and follow your route through it for 11 s without colliding.",
    ),
    "intersection": Scenario(
        name="intersection",
        env_class=IntersectionEnv,
        duration=13.0,
        success="arrive",
        junction=True,
        route="planned",
        goal="Cross the intersection along your route and leave it within 13 s without colliding "
        "(you control only your speed).",
    ),
}


@dataclass
class StepOutcome:
    """What one driving step did."""

    components: dict[str, float]
    collided: bool
    offroad: bool
    success: bool
    ended: bool
    timed_out: bool
    lane_changed: bool
    comfort_broken: list[str]


class DriveSim:
    """One highway-env scenario, reset by split-aware seeds and stepped by meta-action ids.

    Args:
        scenario: a key of :data:`SCENARIOS`.
        duration: time limit in seconds (default: the scenario's).
        config: highway-env config overrides (keys of the highway-env class's ``default_config``).
        render: build the environment with ``render_mode="rgb_array"`` (offscreen frames).
    """

    def __init__(
        self,
        scenario: str,
        *,
        duration: float | None = None,
        config: dict[str, Any] | None = None,
        render: bool = False,
    ) -> None:
        check_choice("scenario", scenario, tuple(SCENARIOS))
        self.scenario = SCENARIOS[scenario]
        if duration is not None and (
            not isinstance(duration, (int, float)) or isinstance(duration, bool) or not 1 <= duration <= 600
        ):
            raise InvalidKwargsError(f"duration must be a number of seconds from 1 to 600, got {duration!r}.")
        self.duration = float(self.scenario.duration if duration is None else duration)
        cls = self.scenario.env_class
        defaults = cls.default_config()
        overrides = dict(config or {})
        if not isinstance(config, (dict, type(None))):
            raise InvalidKwargsError(f"config must be a dict of highway-env settings, got {type(config).__name__}.")
        for key in overrides:
            if key not in defaults:
                raise InvalidKwargsError(
                    f"config key {key!r} is not a highway-env setting of {cls.__name__}.{suggest(key, defaults)}"
                )
        for fixed in ("action", "controlled_vehicles"):
            if fixed in overrides:
                raise InvalidKwargsError(
                    f"config key {fixed!r} is fixed by envgym's Drive envs (discrete meta-actions, one ego vehicle)."
                )
        cfg = {**self.scenario.config, **overrides, "duration": self.duration}
        self.env = cls(config=cfg, render_mode="rgb_array" if render else None)
        self._idm_reset = {k: _IDM_DEFAULTS[k] for k in _get_idm(self.env)}  # before any reset of ours
        self._idm = dict(self._idm_reset)
        self.dt = 1.0 / float(self.env.config["policy_frequency"])
        self.names: dict[int, str] = {}
        self.ids: dict[str, int] = {}
        self.seed: int | None = None
        self.observation: np.ndarray | None = None
        self.progress = 0.0
        self._prev_accel: float | None = None
        self._x0 = 0.0
        self._route: list[tuple[str, str]] = []
        self._route_lengths: list[float] = []
        self._route_end: float | None = None
        self._route_start = 0.0
        self._scene: Scene | None = None

    # ------------------------------------------------------------------ episode
    def reset(self, sim_seed: int) -> None:
        self.seed = int(sim_seed)
        _set_idm(self.env, self._idm_reset)
        self.observation, _ = self.env.reset(seed=self.seed)
        self._idm = _get_idm(self.env)  # what this scenario's reset set (the intersection's values)
        actions = self.env.action_type.actions  # {id: name}
        self.names = {int(k): str(v) for k, v in actions.items()}
        self.ids = {v: k for k, v in self.names.items()}
        ego = self.env.vehicle
        self._x0 = float(ego.position[0])
        self._prev_accel = None
        self.progress = 0.0
        self._plan_route()
        self._scene = None

    def _plan_route(self) -> None:
        self._route, self._route_lengths, self._route_end, self._route_start = [], [], None, 0.0
        if self.scenario.route != "planned":
            return
        ego = self.env.vehicle
        network = self.env.road.network
        for index in ego.route or [ego.lane_index]:
            key = (index[0], index[1])
            self._route.append(key)
            self._route_lengths.append(float(network.get_lane((key[0], key[1], 0)).length))
        if self.scenario.success == "arrive":
            # highway-env's IntersectionEnv.has_arrived: 25 m into the exit lane.
            self._route_end = 25.0
        self._route_start = float(ego.lane.local_coordinates(ego.position)[0])

    def _measure_progress(self) -> float:
        ego = self.env.vehicle
        sc = self.scenario
        if sc.route == "straight":
            if sc.route_end_x is not None:
                total = sc.route_end_x - self._x0
            else:
                total = self.duration * sc.reference_speed
            return min(1.0, max(0.0, (float(ego.position[0]) - self._x0) / total))
        key = (ego.lane_index[0], ego.lane_index[1])
        if key not in self._route:
            return self.progress  # off the planned route: no progress (as CaRL)
        i = self._route.index(key)
        s = float(ego.lane.local_coordinates(ego.position)[0])
        return R.route_progress(self._route_lengths, i, s, self._route_end, self._route_start)

    def available(self) -> list[int]:
        """highway-env's available meta-action ids, ascending."""
        return sorted(int(a) for a in self.env.get_available_actions())

    def scene(self) -> Scene:
        if self._scene is None:
            self._scene = scene_from_road(
                self.env.road,
                self.env.vehicle,
                scenario=self.scenario.name,
                time=float(self.env.time),
                duration=self.duration,
                progress=self.progress,
                junction=self.scenario.junction,
                goal=self.scenario.goal,
                speed_limit=self.scenario.speed_limit,
            )
        return self._scene

    def arrived(self) -> bool:
        if self.scenario.success == "arrive":
            return bool(self.env.has_arrived(self.env.vehicle))
        if self.scenario.success == "pass":
            return float(self.env.vehicle.position[0]) > float(self.scenario.route_end_x or math.inf)
        return False

    def step(self, action: int) -> StepOutcome:
        """Advance one decision step with meta-action ``action`` (an id) and score it."""
        env = self.env
        ego = env.vehicle
        v0, h0 = float(ego.speed), float(ego.heading)
        _set_idm(env, self._idm)
        self.observation, env_reward, _, _, info = env.step(int(action))
        ego = env.vehicle
        motion = R.motion_between((v0, float(ego.speed)), (h0, float(ego.heading)), self.dt, self._prev_accel)
        self._prev_accel = motion.lon_accel
        collided = bool(ego.crashed)
        offroad = not bool(ego.on_road)
        previous = self.progress
        self.progress = max(previous, self._measure_progress())
        arrived = self.arrived() and not collided
        if arrived:
            self.progress = 1.0
        self._scene = None
        scene = self.scene()
        ttc = scene.min_ttc
        delta = self.progress - previous
        terms = info.get("rewards", {})
        name = self.names.get(int(action), "")
        lane_changed = name in ("LANE_LEFT", "LANE_RIGHT")
        broken = R.comfort_violations(motion)
        factors = {
            "speed_factor": R.speed_factor(float(ego.speed), scene.speed_limit),
            "ttc_factor": R.ttc_factor(ttc),
            "comfort_factor": R.comfort_factor(motion),
        }
        components = {
            "env_reward": float(env_reward),
            **{f"highway_{k}": float(terms.get(k, 0.0)) for k in _TERMS[type(env).__name__]},
            "progress_reward": delta,
            **factors,
            "carl_reward": R.carl_reward(
                delta,
                speed=factors["speed_factor"],
                ttc=factors["ttc_factor"],
                comfort=factors["comfort_factor"],
                collided=collided,
                offroad=offroad,
            ),
            "safety_reward": R.safety_reward(collided=collided, offroad=offroad, ttc=ttc),
            "comfort_reward": R.comfort_reward(motion, lane_changed=lane_changed),
        }
        timed_out = float(env.time) >= self.duration - 1e-9
        if collided or offroad:
            success, ended = False, True
        elif arrived:
            success, ended = True, True
        elif timed_out:
            success, ended = self.scenario.success == "survive", True
        else:
            success, ended = False, False
        return StepOutcome(
            components=components,
            collided=collided,
            offroad=offroad,
            success=success,
            ended=ended,
            timed_out=timed_out and not (collided or offroad or arrived),
            lane_changed=lane_changed,
            comfort_broken=broken,
        )

    def component_names(self) -> tuple[str, ...]:
        """Every component :meth:`step` emits for this scenario, in a fixed order."""
        terms = tuple(f"highway_{k}" for k in _TERMS[self.scenario.env_class.__name__])
        return (
            "env_reward",
            *terms,
            "progress_reward",
            "speed_factor",
            "ttc_factor",
            "comfort_factor",
            "carl_reward",
            "safety_reward",
            "comfort_reward",
        )

    # ------------------------------------------------------------------ rendering
    def render(self) -> np.ndarray:
        """An RGB frame (H, W, 3) drawn offscreen.

        highway-env's viewer draws nothing when ``SDL_VIDEODRIVER=dummy`` (its ``enabled`` flag
        turns off and frames come back black); offscreen drawing needs no video driver, so the
        viewer is switched back on here.
        """
        env = self.env
        if env.render_mode != "rgb_array":
            raise InvalidKwargsError(
                "this simulation was built without rendering: make the env with render_mode='rgb_array'."
            )
        if env.viewer is None:
            env.viewer = EnvViewer(env)
        env.viewer.enabled = True
        frame = env.render()
        return np.asarray(frame, dtype=np.uint8)

    def close(self) -> None:
        self.env.close()

    def __getstate__(self) -> dict[str, Any]:
        # The pygame viewer holds surfaces that do not pickle (and highway-env's observation and
        # action types point back at the env): drop it; the next render() draws a new one.
        self.env.viewer = None
        return self.__dict__.copy()


#: highway-env's reward terms (``info["rewards"]`` keys) per environment class.
_TERMS: dict[str, tuple[str, ...]] = {
    "HighwayEnvFast": ("collision_reward", "right_lane_reward", "high_speed_reward", "on_road_reward"),
    "MergeEnv": (
        "collision_reward",
        "right_lane_reward",
        "high_speed_reward",
        "lane_change_reward",
        "merging_speed_reward",
    ),
    "RoundaboutEnv": ("collision_reward", "high_speed_reward", "lane_change_reward", "on_road_reward"),
    "IntersectionEnv": ("collision_reward", "high_speed_reward", "arrived_reward", "on_road_reward"),
}
