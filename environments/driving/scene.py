"""The driving scene as data, and its text for LLM agents.

A :class:`Scene` holds what a driver sees around the ego vehicle: the lanes of its road, its
speed, and for each lane the nearest vehicle ahead and behind (gap, relative speed, time to
collision), or, at a junction (roundabout, intersection), the nearest vehicles around it in the
ego's own frame. :func:`describe` turns a scene and the available meta-actions into the text an
agent reads. Both simulators fill the same :class:`Scene`: highway-env through
:func:`scene_from_road` (it reads the road objects by attribute, so this module imports no
simulator) and CARLA through :mod:`envgym.environments.driving.carla_scene`.

Conventions: lanes are numbered from the left, 1 = leftmost (highway-env's lane id + 1);
a *gap* is bumper to bumper (centre distance minus one vehicle length); a *relative speed* is
theirs minus yours along your lane; a *time to collision* is gap / closing speed, shown only
while the gap is closing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envgym.core import InvalidAction

__all__ = [
    "ACTION_HELP",
    "SENSOR_RANGE",
    "LaneView",
    "Neighbour",
    "Scene",
    "closest_approach",
    "describe",
    "describe_actions",
    "lane_name",
    "parse_meta_action",
    "scene_from_road",
    "time_to_collision",
]

#: Vehicles farther than this (m) are not reported.
SENSOR_RANGE = 100.0
#: A lane that ends (does not continue) within this distance (m) says so.
LANE_END_RANGE = 200.0
#: Times to collision at or above this (s) are not shown (nothing is closing in any real sense).
TTC_SHOWN = 100.0
#: Nearest vehicles listed at a junction.
JUNCTION_VEHICLES = 5
#: Junction vehicles farther than this (m) are not listed.
JUNCTION_RANGE = 60.0
#: At a junction a vehicle is on a collision course when, at constant velocities, the centres
#: will pass closer than this (m): a car length, so side-by-side lanes (4 m apart) do not count.
CONFLICT_RADIUS = 3.5

#: Meta-action name -> what it does, as shown to the agent.
ACTION_HELP: dict[str, str] = {
    "LANE_LEFT": "change to the lane on your left",
    "IDLE": "keep your lane and your target speed",
    "LANE_RIGHT": "change to the lane on your right",
    "FASTER": "raise your target speed one step",
    "SLOWER": "lower your target speed one step",
}


def time_to_collision(gap: float, closing_speed: float) -> float:
    """``gap / closing_speed`` while the gap closes (``closing_speed > 0``), else ``inf``.

    A gap already closed (``<= 0``) gives ``0``.
    """
    if gap <= 0.0:
        return 0.0
    if closing_speed <= 1e-9:
        return math.inf
    return gap / closing_speed


@dataclass(frozen=True, slots=True)
class Neighbour:
    """One vehicle near the ego.

    Attributes:
        gap: bumper-to-bumper distance (m); for junction vehicles the centre distance minus a length.
        relative_speed: their speed minus yours along your lane (lane view), or the rate at which
            the distance changes (junction view, negative = closing).
        ttc: time to collision (s), ``inf`` when not closing.
        forward: junction view only: metres ahead (+) or behind (-) in your frame.
        left: junction view only: metres to your left (+) or right (-).
        speed: its speed (m/s).
        heading: junction view only: its heading relative to yours, degrees, + = turned left.
        approach: junction view only: the closest distance between the centres at constant
            velocities (m), ``inf`` when they are moving apart.
    """

    gap: float
    relative_speed: float
    ttc: float
    forward: float = 0.0
    left: float = 0.0
    speed: float = 0.0
    heading: float = 0.0
    approach: float = math.inf


def closest_approach(px: float, py: float, wx: float, wy: float) -> tuple[float, float]:
    """``(time, distance)`` of the closest approach of a point at ``p`` moving at ``w`` relative to
    the origin: ``t* = -p.w / |w|^2`` (``inf``, and the current distance, when not approaching)."""
    w2 = wx * wx + wy * wy
    dot = px * wx + py * wy
    if w2 <= 1e-12 or dot >= 0.0:
        return math.inf, math.hypot(px, py)
    t = -dot / w2
    return t, math.hypot(px + wx * t, py + wy * t)


@dataclass(frozen=True, slots=True)
class LaneView:
    """One lane of the ego's road: its 1-based number, the nearest vehicle ahead and behind, and
    the distance (m) to where the lane ends when that is within :data:`LANE_END_RANGE`."""

    number: int
    ahead: Neighbour | None
    behind: Neighbour | None
    ends_in: float | None = None


@dataclass(frozen=True, slots=True)
class Scene:
    """What the ego driver perceives at one decision step.

    Attributes:
        scenario: the scenario name (``highway``, ``merge``, ...).
        time: simulated seconds since the start.
        duration: the scenario's time limit (s).
        lanes: lanes of the ego's road in its direction.
        lane: the ego's lane, 1 = leftmost.
        speed: the ego's speed (m/s).
        target_speed: the speed the ego's controller tracks (m/s).
        speed_limit: the speed limit of the ego's lane (m/s).
        progress: route completion in [0, 1].
        lane_views: the ego's lane and its neighbours, left to right (lane-based scenarios).
        nearby: the nearest vehicles around the ego (junction scenarios), or on roads joining the
            ego's (an on-ramp) in lane-based scenarios.
        junction: whether the scene is described in the junction view.
        goal: the driving goal in words.
    """

    scenario: str
    time: float
    duration: float
    lanes: int
    lane: int
    speed: float
    target_speed: float
    speed_limit: float
    progress: float
    lane_views: tuple[LaneView, ...] = ()
    nearby: tuple[Neighbour, ...] = ()
    junction: bool = False
    goal: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def min_ttc(self) -> float:
        """The smallest time to collision the scene shows (ego lane leader; any nearby vehicle at a junction)."""
        if self.junction:
            return min((n.ttc for n in self.nearby), default=math.inf)
        for view in self.lane_views:
            if view.number == self.lane and view.ahead is not None:
                return view.ahead.ttc
        return math.inf


def lane_name(number: int, ego_lane: int, lanes: int) -> str:
    """``"lane 2 (yours)"``, ``"lane 1 (left)"``, ``"lane 3 (right)"``."""
    side = "yours" if number == ego_lane else "left" if number < ego_lane else "right"
    return f"lane {number} of {lanes} ({side})"


def _fmt_ttc(ttc: float) -> str:
    return f", time to collision {ttc:.1f} s" if ttc < TTC_SHOWN else ""


def _fmt_neighbour(where: str, n: Neighbour | None) -> str:
    if n is None:
        return f"{where}: none within {SENSOR_RANGE:.0f} m"
    if n.gap <= 0.0:
        return f"{where}: a vehicle alongside you (overlapping), relative speed {n.relative_speed:+.1f} m/s"
    return f"{where}: gap {n.gap:.1f} m, relative speed {n.relative_speed:+.1f} m/s{_fmt_ttc(n.ttc)}"


def _fmt_junction(n: Neighbour) -> str:
    fwd = f"{abs(n.forward):.1f} m {'ahead' if n.forward >= 0 else 'behind'}"
    lat = f"{abs(n.left):.1f} m to your {'left' if n.left >= 0 else 'right'}"
    trend = f"closing at {-n.relative_speed:.1f} m/s" if n.relative_speed < 0 else "not closing"
    if math.isfinite(n.approach):
        trend += f", closest approach {n.approach:.1f} m"
    return (
        f"- vehicle {fwd} and {lat}: speed {n.speed:.1f} m/s, heading {n.heading:+.0f} deg from yours, "
        f"distance {n.gap:.1f} m, {trend}{_fmt_ttc(n.ttc)}"
    )


def describe_actions(names: Sequence[str], numbers: Mapping[str, int] | None = None) -> str:
    """The numbered list of available meta-actions: numbered from 1 in the given order, or with
    ``numbers`` each by its own fixed number (highway-env's action index), whatever is available."""
    lines = ["Available actions (answer with the number or the name):"]
    numbered = [(numbers[name] if numbers else i, name) for i, name in enumerate(names, start=1)]
    lines += [f"{i}. {name} - {ACTION_HELP.get(name, name.lower())}" for i, name in numbered]
    return "\n".join(lines)


def describe(scene: Scene, actions: Sequence[str] | None = None) -> str:
    """The scene as text (and the numbered available actions when given)."""
    lines = [
        f"Scenario: {scene.scenario}. Time {scene.time:.0f} s of {scene.duration:.0f} s.",
        (
            f"Road: {scene.lanes} lane{'s' if scene.lanes != 1 else ''} in your direction, numbered from the left. "
            f"You are in lane {scene.lane} of {scene.lanes}."
        ),
        (
            f"Your speed: {scene.speed:.1f} m/s (target {scene.target_speed:.1f} m/s, speed limit "
            f"{scene.speed_limit:.1f} m/s). Route progress: {100.0 * scene.progress:.0f}%."
        ),
    ]
    if scene.junction:
        if scene.nearby:
            lines.append(
                f"Nearest vehicles (within {JUNCTION_RANGE:.0f} m; distance is centre to centre minus a car length):"
            )
            lines += [_fmt_junction(n) for n in scene.nearby]
        else:
            lines.append(f"No vehicle within {JUNCTION_RANGE:.0f} m.")
    else:
        lines.append("Nearby vehicles (gap is bumper to bumper; relative speed is theirs minus yours):")
        for view in scene.lane_views:
            name = lane_name(view.number, scene.lane, scene.lanes)
            if view.ends_in is not None:
                name += f", ends in {view.ends_in:.0f} m"
            lines.append(f"- {name}: {_fmt_neighbour('ahead', view.ahead)}; {_fmt_neighbour('behind', view.behind)}")
        if scene.nearby:
            lines.append("Vehicles on joining roads (not yet in your lanes):")
            lines += [_fmt_junction(n) for n in scene.nearby]
    text = "\n".join(lines)
    if actions is not None:
        text += "\n" + describe_actions(actions)
    return text


_ALIASES: dict[str, str] = {}
for _name, _words in {
    "LANE_LEFT": ("lane_left", "left", "turn_left", "change_left", "change_lane_left", "go_left", "move_left"),
    "IDLE": ("idle", "keep", "keep_lane", "cruise", "maintain", "stay", "none", "noop"),
    "LANE_RIGHT": ("lane_right", "right", "turn_right", "change_right", "change_lane_right", "go_right", "move_right"),
    "FASTER": ("faster", "accelerate", "speed_up", "speedup"),
    "SLOWER": ("slower", "decelerate", "slow_down", "brake", "slowdown"),
}.items():
    for _w in _words:
        _ALIASES[_w] = _name
_NUMBER = re.compile(r"^(?:action(?:_id)?\s*[:#]?\s*)?#?\s*(\d{1,3})\s*[.):]?$", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s\-]+")


def parse_meta_action(
    text: str, available: list[str], known: tuple[str, ...], numbers: Mapping[str, int] | None = None
) -> str:
    """The meta-action name ``text`` asks for among ``available`` (numbered from 1, or by
    ``numbers``: each action's fixed number), or raise :class:`InvalidAction` with a message
    saying what is allowed."""
    if numbers:
        choices = ", ".join(f"{numbers[n]} {n}" for n in available)
    else:
        choices = ", ".join(f"{i} {n}" for i, n in enumerate(available, start=1))
    match = _NUMBER.match(text)
    if match and numbers:
        number = int(match.group(1))
        name = next((n for n, i in numbers.items() if i == number), None)
        if name in available:
            return name
        if name is None:
            raise InvalidAction(f"there is no action number {number}; available now: {choices}.")
        raise InvalidAction(f"{number} ({name}) is not available now; available: {choices}.")
    if match:
        number = int(match.group(1))
        if 1 <= number <= len(available):
            return available[number - 1]
        raise InvalidAction(f"there is no action number {number} now; choose 1 to {len(available)} ({choices}).")
    key = _SEPARATORS.sub("_", text.strip().strip(".!").lower())
    name = _ALIASES.get(key)
    if name is None:
        raise InvalidAction(f"expected an action number or name: {choices}.")
    if name not in available:
        why = "" if name in known else " in this scenario (you control only your speed)"
        raise InvalidAction(f"{name} is not available now{why}; available: {choices}.")
    return name


# ---------------------------------------------------------------------------- highway-env roads
def _lane_neighbour(ego: Any, other: Any, lane: Any, ahead: bool) -> Neighbour:
    s_ego = lane.local_coordinates(ego.position)[0]
    s_other = lane.local_coordinates(other.position)[0]
    length = 0.5 * (float(getattr(ego, "LENGTH", 5.0)) + float(getattr(other, "LENGTH", 5.0)))
    gap = abs(s_other - s_ego) - length
    heading = lane.heading_at(s_ego)
    dx, dy = math.cos(heading), math.sin(heading)
    v_ego = float(ego.velocity[0] * dx + ego.velocity[1] * dy)
    v_other = float(other.velocity[0] * dx + other.velocity[1] * dy)
    rel = v_other - v_ego
    closing = -rel if ahead else rel
    return Neighbour(gap=float(gap), relative_speed=rel, ttc=time_to_collision(gap, closing), speed=float(other.speed))


def _lane_views(road: Any, ego: Any) -> tuple[int, int, tuple[LaneView, ...]]:
    # Look across segment boundaries (highway-env's connected-lanes search) for perception only;
    # the other drivers keep highway-env's default behaviour.
    connected = getattr(road, "neighbour_vehicles_connected_lanes", False)
    road.neighbour_vehicles_connected_lanes = True
    try:
        return _lane_views_connected(road, ego)
    finally:
        road.neighbour_vehicles_connected_lanes = connected


def _lane_views_connected(road: Any, ego: Any) -> tuple[int, int, tuple[LaneView, ...]]:
    network = road.network
    lane_index = ego.lane_index
    side = network.all_side_lanes(lane_index)
    lanes = len(side)
    ego_id = int(lane_index[2])
    views = []
    for lane_id in (ego_id - 1, ego_id, ego_id + 1):
        if not 0 <= lane_id < lanes:
            continue
        index = (lane_index[0], lane_index[1], lane_id)
        lane = network.get_lane(index)
        front, rear = road.neighbour_vehicles(ego, index)
        ends_in = None
        following = network.graph.get(index[1], {})
        if not any(lane_id < len(lanes_there) for lanes_there in following.values()):
            remaining = float(lane.length - lane.local_coordinates(ego.position)[0])
            ends_in = max(0.0, remaining) if remaining <= LANE_END_RANGE else None
        views.append(
            LaneView(
                number=lane_id + 1,
                ends_in=ends_in,
                ahead=_within(_lane_neighbour(ego, front, lane, True)) if front is not None else None,
                behind=_within(_lane_neighbour(ego, rear, lane, False)) if rear is not None else None,
            )
        )
    return lanes, ego_id + 1, tuple(views)


def _within(n: Neighbour) -> Neighbour | None:
    return n if n.gap <= SENSOR_RANGE else None


def _joining(road: Any, ego: Any) -> list[Any]:
    """Vehicles on other roads than the ego's (an on-ramp), which the lane views do not show."""
    network = road.network
    here = (ego.lane_index[0], ego.lane_index[1])
    edges = {here}
    edges.update((here[1], nxt) for nxt in network.graph.get(here[1], {}))
    edges.update((prev, here[0]) for prev, tos in network.graph.items() if here[0] in tos)
    return [v for v in road.vehicles if v is not ego and (v.lane_index[0], v.lane_index[1]) not in edges]


def _junction_neighbours(vehicles: Iterable[Any], ego: Any) -> tuple[Neighbour, ...]:
    cos_h, sin_h = math.cos(ego.heading), math.sin(ego.heading)
    ex, ey = float(ego.position[0]), float(ego.position[1])
    evx, evy = float(ego.velocity[0]), float(ego.velocity[1])
    found = []
    for v in vehicles:
        if v is ego:
            continue
        px, py = float(v.position[0]) - ex, float(v.position[1]) - ey
        dist = math.hypot(px, py)
        if dist > JUNCTION_RANGE:
            continue
        wx, wy = float(v.velocity[0]) - evx, float(v.velocity[1]) - evy
        rate = (px * wx + py * wy) / dist if dist > 1e-9 else 0.0  # d(distance)/dt
        gap = dist - float(getattr(ego, "LENGTH", 5.0))
        # At a junction the time to collision is the time to the closest approach, counted only
        # when the paths come within CONFLICT_RADIUS (crossing or same-lane traffic; not the
        # oncoming lane).
        t_cpa, d_cpa = closest_approach(px, py, wx, wy)
        # highway-env's y axis points down the screen: "left" of the heading is -y rotated.
        forward = px * cos_h + py * sin_h
        left = px * sin_h - py * cos_h
        heading = math.degrees(math.atan2(math.sin(ego.heading - v.heading), math.cos(ego.heading - v.heading)))
        found.append(
            Neighbour(
                gap=gap,
                relative_speed=rate,
                ttc=(0.0 if gap <= 0.0 else t_cpa) if d_cpa < CONFLICT_RADIUS else math.inf,
                forward=forward,
                left=left,
                speed=float(v.speed),
                heading=heading,
                approach=d_cpa if math.isfinite(t_cpa) else math.inf,
            )
        )
    found.sort(key=lambda n: n.gap)
    return tuple(found[:JUNCTION_VEHICLES])


def scene_from_road(
    road: Any,
    ego: Any,
    *,
    scenario: str,
    time: float,
    duration: float,
    progress: float,
    junction: bool,
    goal: str = "",
    speed_limit: float | None = None,
) -> Scene:
    """Build a :class:`Scene` from a highway-env ``Road`` and its ego ``ControlledVehicle``."""
    lanes, lane, views = _lane_views(road, ego)
    nearby = _junction_neighbours(road.vehicles if junction else _joining(road, ego), ego)
    return Scene(
        scenario=scenario,
        time=float(time),
        duration=float(duration),
        lanes=lanes,
        lane=lane,
        speed=float(ego.speed),
        target_speed=float(getattr(ego, "target_speed", ego.speed)),
        speed_limit=float(speed_limit if speed_limit is not None else ego.lane.speed_limit),
        progress=float(progress),
        lane_views=() if junction else views,
        nearby=nearby,
        junction=junction,
        goal=goal,
    )
