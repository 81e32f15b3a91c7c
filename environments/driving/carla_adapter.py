"""The driving text interface over a CARLA server (optional; not registered as an id).

:class:`CarlaDriveEnv` shows the same scene text and numbered meta-actions as
``envgym/Drive-*-v0`` (:func:`envgym.environments.driving.scene.describe`), but the world is a
CARLA town: the ego follows its lane at a target speed (:data:`~.carla_scene.TARGET_SPEEDS`),
``LANE_LEFT``/``LANE_RIGHT`` steer to the neighbouring lane's waypoint, traffic is driven by
CARLA's Traffic Manager, and the server runs in synchronous mode (20 ticks of 0.05 s per
decision). Rewards: ``progress_reward`` (metres driven along the lane / ``route_length``),
CaRL-style ``carl_reward`` (progress times the speeding and TTC factors; -1 on a collision,
which ends the episode) and ``safety_reward``.

Start a server first (CARLA 0.9.15, Linux)::

    ./CarlaUE4.sh -RenderOffScreen -carla-rpc-port=2000        # in the CARLA folder
    pip install 'envgym[carla]'                                 # the matching client (carla==0.9.15)

then ``CarlaDriveEnv(host="localhost", port=2000, town="Town04")``. Without the ``carla``
package importing this module raises :class:`~envgym.errors.MissingDependencyError`.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from envgym.environments.driving import reward as R
from envgym.environments.driving.carla_scene import (
    TARGET_SPEEDS,
    ActorState,
    available_actions,
    scene_from_actors,
    speed_control,
    steer_towards,
)
from envgym.environments.driving.scene import describe, describe_actions, parse_meta_action

from envgym.core import Task, TextEnv, Transition
from envgym.errors import EnvgymError, MissingDependencyError

try:
    import carla
except ImportError as err:
    raise MissingDependencyError("carla", "carla", "envgym's CARLA driving adapter") from err

__all__ = ["CarlaDriveEnv"]

TICK = 0.05
TICKS_PER_DECISION = 20


def _state(actor: Any, world_map: Any) -> ActorState:
    t = actor.get_transform()
    v = actor.get_velocity()
    wp = world_map.get_waypoint(t.location)
    return ActorState(
        x=t.location.x,
        y=t.location.y,
        yaw=t.rotation.yaw,
        vx=v.x,
        vy=v.y,
        road_id=wp.road_id,
        lane_id=wp.lane_id,
        length=2.0 * actor.bounding_box.extent.x,
    )


class CarlaDriveEnv(TextEnv):
    """Drive in CARLA: the ``envgym/Drive-*`` text interface over a running CARLA server.

    **Observation / actions.** As ``envgym/Drive-Highway-v0`` (lane view; numbered meta-actions).
    **Reward components.** ``progress_reward``, ``carl_reward``, ``safety_reward``,
    ``invalid_action_reward``, ``step_cost_reward`` (scalar: ``carl_reward`` by default).
    **Episode end.** Collision (failure), ``route_length`` metres driven (success), ``duration``.
    **Arguments.** ``host``, ``port``, ``town``, ``vehicles`` (Traffic Manager cars),
    ``duration`` (s), ``route_length`` (m), and the :class:`~envgym.core.TextEnv` arguments.
    """

    name: ClassVar[str] = "driving_carla"
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 1, "picklable": False}
    reward_components: ClassVar[tuple[str, ...]] = (
        "progress_reward",
        "carl_reward",
        "safety_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )

    def __init__(
        self,
        *,
        host: str = "localhost",
        port: int = 2000,
        town: str = "Town04",
        vehicles: int = 30,
        duration: float = 60.0,
        route_length: float = 500.0,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("reward", {"progress_reward": 0.0, "safety_reward": 0.0})
        kwargs.setdefault("max_turns", int(2 * duration))
        super().__init__(**kwargs)
        self.duration = float(duration)
        self.route_length = float(route_length)
        self.vehicles = int(vehicles)
        try:
            self._client = carla.Client(host, int(port))
            self._client.set_timeout(20.0)
            self._world = self._client.load_world(town)
        except RuntimeError as err:
            raise EnvgymError(
                f"could not reach a CARLA server at {host}:{port} ({err}); start one with "
                "`./CarlaUE4.sh -RenderOffScreen -carla-rpc-port=2000`."
            ) from err
        settings = self._world.get_settings()
        settings.synchronous_mode = True
        settings.fixed_delta_seconds = TICK
        self._world.apply_settings(settings)
        self._tm = self._client.get_trafficmanager()
        self._tm.set_synchronous_mode(True)
        self._map = self._world.get_map()
        self._actors: list[Any] = []
        self._ego: Any = None
        self._collided = False
        self._speed_index = 1
        self._target_lane: Any = None
        self._time = 0.0
        self._driven = 0.0
        self._available: list[str] = []
        self._ended = ""

    # ------------------------------------------------------------------ world
    def _clear(self) -> None:
        for actor in self._actors:
            if actor.is_alive:
                actor.destroy()
        self._actors = []

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self._clear()
        self._tm.set_random_device_seed(rng.getrandbits(31))
        library = self._world.get_blueprint_library()
        spawn = self._map.get_spawn_points()
        rng.shuffle(spawn)
        ego_bp = library.find("vehicle.tesla.model3")
        self._ego = self._world.spawn_actor(ego_bp, spawn[0])
        self._actors.append(self._ego)
        sensor = self._world.spawn_actor(library.find("sensor.other.collision"), carla.Transform(), attach_to=self._ego)
        sensor.listen(lambda _event: setattr(self, "_collided", True))
        self._actors.append(sensor)
        cars = [bp for bp in library.filter("vehicle.*") if int(bp.get_attribute("number_of_wheels")) == 4]
        for point in spawn[1 : 1 + self.vehicles]:
            car = self._world.try_spawn_actor(rng.choice(cars), point)
            if car is not None:
                car.set_autopilot(True, self._tm.get_port())
                self._actors.append(car)
        self._world.tick()
        self._collided = False
        self._speed_index = 1
        self._target_lane = None
        self._time = 0.0
        self._driven = 0.0
        self._ended = ""
        self._update_available()
        return Task(id=f"carla-{self._map.name.split('/')[-1]}-{rng.getrandbits(32):08x}", goal=self._goal())

    def _goal(self) -> str:
        return f"Drive {self.route_length:.0f} m along the road within {self.duration:.0f} s without colliding."

    def _lanes(self) -> int:
        wp = self._map.get_waypoint(self._ego.get_location())
        count, left = 1, wp.get_left_lane()
        while left is not None and left.lane_type == carla.LaneType.Driving and (left.lane_id > 0) == (wp.lane_id > 0):
            count, left = count + 1, left.get_left_lane()
        right = wp.get_right_lane()
        while right is not None and right.lane_type == carla.LaneType.Driving:
            count, right = count + 1, right.get_right_lane()
        return count

    def _update_available(self) -> None:
        wp = self._map.get_waypoint(self._ego.get_location())
        self._available = available_actions(wp.lane_id, self._lanes(), self._speed_index)

    def _scene(self) -> Any:
        ego = _state(self._ego, self._map)
        others = [_state(a, self._map) for a in self._actors[2:] if a.is_alive]
        return scene_from_actors(
            ego,
            others,
            lanes=self._lanes(),
            target_speed=TARGET_SPEEDS[self._speed_index],
            speed_limit=self._ego.get_speed_limit() / 3.6,
            time=self._time,
            duration=self.duration,
            progress=min(1.0, self._driven / self.route_length),
            goal=self._goal(),
        )

    # ------------------------------------------------------------------ TextEnv hooks
    def _observe(self) -> str:
        text = describe(self._scene())
        return f"{text}\n{self._ended}" if self._ended else f"{text}\n{describe_actions(self._available)}"

    def _parse(self, text: str) -> str:
        return parse_meta_action(text, self._available, tuple(self._available))

    def _apply(self, action: str) -> Transition:
        if action == "FASTER":
            self._speed_index += 1
        elif action == "SLOWER":
            self._speed_index -= 1
        wp = self._map.get_waypoint(self._ego.get_location())
        if action == "LANE_LEFT":
            self._target_lane = wp.get_left_lane()
        elif action == "LANE_RIGHT":
            self._target_lane = wp.get_right_lane()
        before = self._driven
        for _ in range(TICKS_PER_DECISION):
            ego = _state(self._ego, self._map)
            lane = self._target_lane or self._map.get_waypoint(self._ego.get_location())
            target = lane.next(max(5.0, ego.speed))[0].transform.location
            throttle, brake = speed_control(TARGET_SPEEDS[self._speed_index], ego.speed)
            steer = steer_towards(ego, target.x, target.y)
            self._ego.apply_control(carla.VehicleControl(throttle=throttle, steer=steer, brake=brake))
            self._world.tick()
            self._driven += ego.speed * TICK
            self._time += TICK
            if (
                self._target_lane is not None
                and self._map.get_waypoint(self._ego.get_location()).lane_id == self._target_lane.lane_id
            ):
                self._target_lane = None
            if self._collided:
                break
        self._update_available()
        scene = self._scene()
        delta = (min(self._driven, self.route_length) - min(before, self.route_length)) / self.route_length
        factors = R.speed_factor(scene.speed, scene.speed_limit) * R.ttc_factor(scene.min_ttc)
        rewards = {
            "progress_reward": delta,
            "carl_reward": R.carl_reward(
                delta, speed=factors, ttc=1.0, comfort=1.0, collided=self._collided, offroad=False
            ),
            "safety_reward": R.safety_reward(collided=self._collided, offroad=False, ttc=scene.min_ttc),
        }
        success = not self._collided and self._driven >= self.route_length
        ended = self._collided or success or self._time >= self.duration
        if ended:
            self._ended = "You collided. Episode over." if self._collided else "Episode over."
        return Transition(f"You chose {action}.\n\n{self._observe()}", rewards, terminated=ended, success=success)

    def admissible_actions(self) -> list[str]:
        return list(self._available)

    def close(self) -> None:
        super().close()
        if self._actors:
            self._clear()
        if getattr(self, "_world", None) is not None:
            settings = self._world.get_settings()
            settings.synchronous_mode = False
            self._world.apply_settings(settings)
