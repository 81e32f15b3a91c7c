"""Driving reward formulas: CaRL-style factors, the preordered objectives and route progress.

Pure functions of numbers (no simulator), each tested on hand-worked values.

**CaRL** (Jaeger et al., arXiv 2504.17838, "simple reward"): the reward of a step is the route
completion it adds, shrunk multiplicatively by soft penalties, and infractions end the episode::

    carl_reward = progress_delta * speed_factor * ttc_factor * comfort_factor
    carl_reward = -TERMINAL_HINT            on a collision (the episode terminates)
    carl_reward = 0                         on leaving the road (the episode terminates)

* ``speed_factor = max(0, 1 - overspeed / 2.23)`` with ``overspeed = max(0, speed - limit)``
  (CaRL's speeding factor: 2.23 m/s = 5 mph over the limit zeroes the step).
* ``ttc_factor = 0.5`` when the time to collision with the vehicle ahead is below
  :data:`TTC_THRESHOLD`, else 1 (CaRL's TTC factor; CaRL holds it for 500 ticks, here it applies
  per decision step).
* ``comfort_factor = 0.5`` when the step breaks any of nuPlan's comfort limits
  (:data:`COMFORT_LIMITS`, the limits CaRL uses), else 1. Accelerations, jerk and yaw rate are
  measured over the decision step (highway-env decides once per ``1 / policy_frequency`` s).

**Preordered objectives** (safety, then progress, then comfort), scalarised by
:class:`envgym.rubric.Lexicographic`:

* ``safety_reward``: ``-1`` on a collision or leaving the road, ``-NEAR_MISS`` when the time to
  collision is below :data:`TTC_THRESHOLD`, else 0.
* ``progress_reward``: the route completion added by the step (the same as CaRL's).
* ``comfort_reward``: ``-0.5`` when a comfort limit is broken, ``-LANE_CHANGE_COST`` per lane
  change (lane changes as a comfort proxy), summed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "COMFORT_LIMITS",
    "LANE_CHANGE_COST",
    "NEAR_MISS",
    "OVERSPEED_TOLERANCE",
    "TERMINAL_HINT",
    "TTC_THRESHOLD",
    "Kinematics",
    "carl_reward",
    "comfort_reward",
    "comfort_violations",
    "motion_between",
    "route_progress",
    "safety_reward",
    "speed_factor",
    "ttc_factor",
]

#: Overspeed (m/s) at which the speeding factor reaches 0 (CaRL: 5 mph).
OVERSPEED_TOLERANCE = 2.23
#: Time to collision (s) below which the TTC factor and the near-miss penalty apply.
TTC_THRESHOLD = 2.0
#: Factor of a step whose time to collision is below the threshold (CaRL).
TTC_PENALTY_FACTOR = 0.5
#: Factor of a step that breaks a comfort limit (CaRL's largest comfort factor).
COMFORT_PENALTY_FACTOR = 0.5
#: Subtracted from the reward of a step that ends in a collision (CaRL's "terminal hint").
TERMINAL_HINT = 1.0
#: Safety penalty of a step whose time to collision is below the threshold.
NEAR_MISS = 0.1
#: Comfort penalty of one lane change.
LANE_CHANGE_COST = 0.1
#: nuPlan comfort limits used by CaRL: longitudinal acceleration range (m/s^2), |longitudinal
#: jerk| (m/s^3), |lateral acceleration| (m/s^2), |yaw rate| (rad/s).
COMFORT_LIMITS: dict[str, float | tuple[float, float]] = {
    "lon_accel": (-4.05, 2.40),
    "lon_jerk": 4.13,
    "lat_accel": 4.89,
    "yaw_rate": 0.95,
}


def speed_factor(speed: float, limit: float) -> float:
    """``max(0, 1 - max(0, speed - limit) / OVERSPEED_TOLERANCE)``."""
    return max(0.0, 1.0 - max(0.0, speed - limit) / OVERSPEED_TOLERANCE)


def ttc_factor(ttc: float) -> float:
    """``0.5`` when ``ttc < TTC_THRESHOLD`` else ``1``."""
    return TTC_PENALTY_FACTOR if ttc < TTC_THRESHOLD else 1.0


@dataclass(frozen=True, slots=True)
class Kinematics:
    """The ego's motion over one decision step (SI units)."""

    lon_accel: float = 0.0
    lon_jerk: float = 0.0
    lat_accel: float = 0.0
    yaw_rate: float = 0.0


def motion_between(
    speeds: Sequence[float], headings: Sequence[float], dt: float, previous_accel: float | None = None
) -> Kinematics:
    """Accelerations, jerk and yaw rate from the speed and heading at the start and end of a step.

    ``lon_accel = (v1 - v0) / dt``, ``lon_jerk = (lon_accel - previous_accel) / dt`` (0 without a
    previous step), ``yaw_rate = wrap(h1 - h0) / dt``, ``lat_accel = mean speed * yaw_rate``.
    """
    v0, v1 = speeds
    h0, h1 = headings
    accel = (v1 - v0) / dt
    jerk = 0.0 if previous_accel is None else (accel - previous_accel) / dt
    turn = math.atan2(math.sin(h1 - h0), math.cos(h1 - h0))
    yaw = turn / dt
    return Kinematics(lon_accel=accel, lon_jerk=jerk, lat_accel=0.5 * (v0 + v1) * yaw, yaw_rate=yaw)


def comfort_violations(motion: Kinematics) -> list[str]:
    """Names of the nuPlan comfort limits ``motion`` breaks (empty when comfortable)."""
    lo, hi = COMFORT_LIMITS["lon_accel"]  # type: ignore[misc]
    broken = []
    if not lo <= motion.lon_accel <= hi:
        broken.append("lon_accel")
    for name in ("lon_jerk", "lat_accel", "yaw_rate"):
        if abs(getattr(motion, name)) > COMFORT_LIMITS[name]:  # type: ignore[operator]
            broken.append(name)
    return broken


def comfort_factor(motion: Kinematics) -> float:
    """``0.5`` when a comfort limit is broken, else ``1``."""
    return COMFORT_PENALTY_FACTOR if comfort_violations(motion) else 1.0


def carl_reward(
    progress_delta: float,
    *,
    speed: float,
    ttc: float,
    comfort: float,
    collided: bool,
    offroad: bool,
) -> float:
    """CaRL's single reward: ``progress_delta * speed * ttc * comfort`` (factors), or the
    terminal value on a collision (``-TERMINAL_HINT``) or off the road (``0``)."""
    if collided:
        return -TERMINAL_HINT
    if offroad:
        return 0.0
    return progress_delta * speed * ttc * comfort


def safety_reward(*, collided: bool, offroad: bool, ttc: float) -> float:
    """``-1`` on a collision or off the road, ``-NEAR_MISS`` below the TTC threshold, else 0."""
    if collided or offroad:
        return -1.0
    return -NEAR_MISS if ttc < TTC_THRESHOLD else 0.0


def comfort_reward(motion: Kinematics, *, lane_changed: bool) -> float:
    """``-0.5`` when a comfort limit is broken plus ``-LANE_CHANGE_COST`` for a lane change."""
    value = -(1.0 - COMFORT_PENALTY_FACTOR) if comfort_violations(motion) else 0.0
    return value - (LANE_CHANGE_COST if lane_changed else 0.0)


def route_progress(
    lengths: Sequence[float], index: int, longitudinal: float, end: float | None = None, start: float = 0.0
) -> float:
    """Route completion in [0, 1]: distance driven along a route of segments over the route's length.

    ``lengths`` are the segment lengths in route order, ``index`` the segment the vehicle is on and
    ``longitudinal`` its position along it; the route starts ``start`` metres into the first
    segment (where the vehicle started) and ends ``end`` metres into the last one (default: its
    end). ``(driven - start) / (total - start)``, clipped to [0, 1].
    """
    if not lengths:
        return 0.0
    last = lengths[-1] if end is None else min(end, lengths[-1])
    total = math.fsum(lengths[:-1]) + last - start
    if total <= 0:
        return 1.0
    done = math.fsum(lengths[:index]) + min(max(longitudinal, 0.0), lengths[index]) - start
    return min(1.0, max(0.0, done / total))
