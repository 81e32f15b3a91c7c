"""Pure pieces of the CARLA adapter: actor states to a :class:`Scene`, meta-actions to controls.

Nothing here imports ``carla``: the adapter (:mod:`envgym.environments.driving.carla_adapter`)
reads the simulator into :class:`ActorState` records and applies the controls these functions
compute, so they are tested without a server.

CARLA's frame (Unreal's): x forward, y to the *right*, z up; yaw in degrees, positive turning
right (clockwise seen from above). Driving lanes of one direction share the sign of their
``lane_id``; ``|lane_id|`` grows away from the road centre line, so for the ego the lane on the
left is the one whose ``|lane_id|`` is one smaller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from envgym.environments.driving.scene import SENSOR_RANGE, LaneView, Neighbour, Scene, time_to_collision

__all__ = [
    "META_ACTIONS",
    "TARGET_SPEEDS",
    "ActorState",
    "available_actions",
    "lane_offset",
    "scene_from_actors",
    "speed_control",
    "steer_towards",
    "to_ego_frame",
]

#: The meta-actions, as in highway-env.
META_ACTIONS: tuple[str, ...] = ("LANE_LEFT", "IDLE", "LANE_RIGHT", "FASTER", "SLOWER")
#: Target speeds (m/s) FASTER and SLOWER step through (urban CARLA towns: 18 to 54 km/h).
TARGET_SPEEDS: tuple[float, ...] = (5.0, 10.0, 15.0)


@dataclass(frozen=True, slots=True)
class ActorState:
    """One vehicle as the adapter reads it from CARLA (metres, m/s, degrees)."""

    x: float
    y: float
    yaw: float
    vx: float
    vy: float
    road_id: int
    lane_id: int
    length: float = 4.5

    @property
    def speed(self) -> float:
        return math.hypot(self.vx, self.vy)


def to_ego_frame(ego: ActorState, other: ActorState) -> tuple[float, float]:
    """``(forward, left)`` metres of ``other`` in the ego's frame (CARLA: y points right)."""
    dx, dy = other.x - ego.x, other.y - ego.y
    yaw = math.radians(ego.yaw)
    forward = dx * math.cos(yaw) + dy * math.sin(yaw)
    right = -dx * math.sin(yaw) + dy * math.cos(yaw)
    return forward, -right


def lane_offset(ego_lane: int, other_lane: int) -> int | None:
    """Lanes to the right (+) or left (-) of the ego's; ``None`` for the opposite direction."""
    if ego_lane == 0 or other_lane == 0 or (ego_lane > 0) != (other_lane > 0):
        return None
    return abs(other_lane) - abs(ego_lane)


def available_actions(ego_lane: int, lanes: int, target_index: int) -> list[str]:
    """The meta-actions allowed: lane changes inside the road's ``lanes`` driving lanes of the
    ego's direction (lane ``|ego_lane|`` counted from the centre), speed steps inside
    :data:`TARGET_SPEEDS`. In the order of :data:`META_ACTIONS`."""
    position = abs(ego_lane)  # 1 = leftmost
    allowed = {"IDLE"}
    if position > 1:
        allowed.add("LANE_LEFT")
    if position < lanes:
        allowed.add("LANE_RIGHT")
    if target_index < len(TARGET_SPEEDS) - 1:
        allowed.add("FASTER")
    if target_index > 0:
        allowed.add("SLOWER")
    return [a for a in META_ACTIONS if a in allowed]


def scene_from_actors(
    ego: ActorState,
    others: Sequence[ActorState],
    *,
    lanes: int,
    target_speed: float,
    speed_limit: float,
    time: float,
    duration: float,
    progress: float,
    goal: str = "",
) -> Scene:
    """The lane view of a CARLA scene: nearest vehicle ahead and behind in the ego's lane and
    its neighbours (same road, same direction), gaps bumper to bumper along the ego's heading."""
    position = abs(ego.lane_id)
    yaw = math.radians(ego.yaw)
    ux, uy = math.cos(yaw), math.sin(yaw)
    v_ego = ego.vx * ux + ego.vy * uy
    nearest: dict[tuple[int, bool], Neighbour] = {}
    for other in others:
        if other.road_id != ego.road_id:
            continue
        offset = lane_offset(ego.lane_id, other.lane_id)
        if offset is None or abs(offset) > 1:
            continue
        forward, _ = to_ego_frame(ego, other)
        ahead = forward >= 0
        gap = abs(forward) - 0.5 * (ego.length + other.length)
        if gap > SENSOR_RANGE:
            continue
        rel = (other.vx * ux + other.vy * uy) - v_ego
        n = Neighbour(
            gap=gap, relative_speed=rel, ttc=time_to_collision(gap, -rel if ahead else rel), speed=other.speed
        )
        key = (position + offset, ahead)
        if key not in nearest or n.gap < nearest[key].gap:
            nearest[key] = n
    views = tuple(
        LaneView(number=lane, ahead=nearest.get((lane, True)), behind=nearest.get((lane, False)))
        for lane in (position - 1, position, position + 1)
        if 1 <= lane <= lanes
    )
    return Scene(
        scenario="carla",
        time=time,
        duration=duration,
        lanes=lanes,
        lane=position,
        speed=ego.speed,
        target_speed=target_speed,
        speed_limit=speed_limit,
        progress=progress,
        lane_views=views,
        goal=goal,
    )


def speed_control(target: float, speed: float, *, gain: float = 0.25) -> tuple[float, float]:
    """``(throttle, brake)`` in [0, 1] of a proportional speed controller."""
    u = gain * (target - speed)
    return (min(1.0, u), 0.0) if u >= 0 else (0.0, min(1.0, -u))


def steer_towards(ego: ActorState, target_x: float, target_y: float, *, max_angle: float = 70.0) -> float:
    """Steering in [-1, 1] towards a point (pure pursuit on the heading error; + = right in CARLA)."""
    bearing = math.degrees(math.atan2(target_y - ego.y, target_x - ego.x))
    error = (bearing - ego.yaw + 180.0) % 360.0 - 180.0
    return max(-1.0, min(1.0, error / max_angle))
