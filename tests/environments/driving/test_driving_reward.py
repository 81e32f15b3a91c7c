"""Driving reward formulas and scene geometry on hand-worked values (no simulator needed)."""

from __future__ import annotations

import math

import pytest
from envgym.environments.driving import reward as R
from envgym.environments.driving.carla_scene import (
    ActorState,
    available_actions,
    lane_offset,
    scene_from_actors,
    speed_control,
    steer_towards,
    to_ego_frame,
)
from envgym.environments.driving.scene import closest_approach, time_to_collision

from envgym.rubric import Lexicographic, RewardContext, Term

# Tolerance: every expected value below is a short float64 expression evaluated in Python (a few
# roundings of numbers below 1e3), so 1e-12 relative is far above rounding and far below any bug.
REL = 1e-12


def test_speed_factor_is_one_at_the_limit_and_zero_at_tolerance() -> None:
    assert R.speed_factor(30.0, 30.0) == 1.0
    assert R.speed_factor(25.0, 30.0) == 1.0
    # 1 m/s over: 1 - 1/2.23
    assert R.speed_factor(31.0, 30.0) == pytest.approx(1.0 - 1.0 / 2.23, rel=REL)
    assert R.speed_factor(30.0 + 2.23, 30.0) == pytest.approx(0.0, abs=1e-12)  # 2.23 over, up to rounding of 32.23
    assert R.speed_factor(40.0, 30.0) == 0.0


def test_ttc_factor_halves_below_two_seconds() -> None:
    assert R.ttc_factor(1.99) == 0.5
    assert R.ttc_factor(2.0) == 1.0
    assert R.ttc_factor(math.inf) == 1.0


def test_motion_and_comfort_limits() -> None:
    # 25 -> 20 m/s in 1 s: -5 m/s^2, below nuPlan's -4.05; jerk against a previous +1: -6 m/s^3.
    m = R.motion_between((25.0, 20.0), (0.0, 0.0), 1.0, previous_accel=1.0)
    assert (m.lon_accel, m.lon_jerk, m.yaw_rate, m.lat_accel) == (-5.0, -6.0, 0.0, 0.0)
    assert R.comfort_violations(m) == ["lon_accel", "lon_jerk"]
    assert R.comfort_factor(m) == 0.5
    # heading 0.1 rad in 0.5 s: yaw rate 0.2 rad/s, lateral accel = mean speed 10 * 0.2 = 2
    calm = R.motion_between((10.0, 10.0), (0.0, 0.1), 0.5)
    assert calm.yaw_rate == pytest.approx(0.2, rel=REL) and calm.lat_accel == pytest.approx(2.0, rel=REL)
    assert R.comfort_violations(calm) == [] and R.comfort_factor(calm) == 1.0
    # the heading difference wraps: from +3.1 to -3.1 rad is a 0.083 rad turn, not 6.2
    wrapped = R.motion_between((1.0, 1.0), (3.1, -3.1), 1.0)
    assert wrapped.yaw_rate == pytest.approx(2 * math.pi - 6.2, rel=1e-9)


def test_carl_reward_multiplies_progress_and_ends_on_infractions() -> None:
    assert R.carl_reward(0.04, speed=1.0, ttc=0.5, comfort=0.5, collided=False, offroad=False) == pytest.approx(
        0.01, rel=REL
    )
    assert R.carl_reward(0.04, speed=1.0, ttc=1.0, comfort=1.0, collided=True, offroad=False) == -R.TERMINAL_HINT
    assert R.carl_reward(0.04, speed=1.0, ttc=1.0, comfort=1.0, collided=False, offroad=True) == 0.0


def test_safety_and_comfort_objectives() -> None:
    assert R.safety_reward(collided=True, offroad=False, ttc=10.0) == -1.0
    assert R.safety_reward(collided=False, offroad=True, ttc=10.0) == -1.0
    assert R.safety_reward(collided=False, offroad=False, ttc=1.5) == -0.1
    assert R.safety_reward(collided=False, offroad=False, ttc=3.0) == 0.0
    harsh = R.Kinematics(lon_accel=3.0)
    assert R.comfort_reward(harsh, lane_changed=True) == pytest.approx(-0.6, rel=REL)
    assert R.comfort_reward(R.Kinematics(), lane_changed=False) == 0.0


def test_route_progress_over_segments() -> None:
    # segments 100, 50, 80; on the second at 20 m: (100 + 20) / 230
    assert R.route_progress([100, 50, 80], 1, 20.0) == pytest.approx(120 / 230, rel=REL)
    # started 40 m into the first segment, the route ends 25 m into the last: (120 - 40) / (175 - 40)
    assert R.route_progress([100, 50, 80], 1, 20.0, end=25.0, start=40.0) == pytest.approx(80 / 135, rel=REL)
    assert R.route_progress([100, 50, 80], 2, 500.0, end=25.0) == 1.0
    assert R.route_progress([100], 0, -5.0) == 0.0
    assert R.route_progress([], 0, 1.0) == 0.0


def test_preordered_objective_puts_safety_first() -> None:
    rubric = Lexicographic([Term("safety_reward"), Term("progress_reward"), Term("comfort_reward")])
    ctx = RewardContext(action_text="", turn=1, action_valid=True, terminated=False, success=False, task={})
    safe_slow = {"safety_reward": 0.0, "progress_reward": 0.01, "comfort_reward": -0.6}
    risky_fast = {"safety_reward": -0.1, "progress_reward": 0.06, "comfort_reward": 0.0}
    assert rubric.priorities(safe_slow, ctx) > rubric.priorities(risky_fast, ctx)
    assert rubric(safe_slow, ctx) > rubric(risky_fast, ctx)
    # o0 + 1e-3 o1 + 1e-6 o2
    assert rubric(safe_slow, ctx) == pytest.approx(0.0 + 1e-5 - 6e-7, rel=1e-9)


def test_time_to_collision_and_closest_approach() -> None:
    assert time_to_collision(20.0, 5.0) == 4.0
    assert time_to_collision(20.0, 0.0) == math.inf
    assert time_to_collision(-1.0, 5.0) == 0.0
    # a car 30 m ahead and 4 m to the side coming straight at 10 m/s passes 4 m away in 3 s
    t, d = closest_approach(30.0, 4.0, -10.0, 0.0)
    assert (t, d) == (3.0, 4.0)
    # moving apart: no approach
    assert closest_approach(30.0, 0.0, 5.0, 0.0)[0] == math.inf


def test_carla_frame_lanes_and_controls() -> None:
    ego = ActorState(x=0.0, y=0.0, yaw=90.0, vx=0.0, vy=10.0, road_id=1, lane_id=-2)
    # yaw 90 deg faces +y; CARLA's y points right, so a point at x=+3 is on the ego's left
    fwd, left = to_ego_frame(ego, ActorState(x=3.0, y=20.0, yaw=90.0, vx=0, vy=8, road_id=1, lane_id=-1))
    assert fwd == pytest.approx(20.0, abs=1e-12) and left == pytest.approx(3.0, abs=1e-12)
    assert lane_offset(-2, -1) == -1 and lane_offset(-2, -3) == 1 and lane_offset(-2, 1) is None
    assert available_actions(-1, 3, 0) == ["IDLE", "LANE_RIGHT", "FASTER"]
    assert available_actions(-3, 3, 2) == ["LANE_LEFT", "IDLE", "SLOWER"]
    lead = ActorState(x=3.0, y=24.5, yaw=90.0, vx=0.0, vy=8.0, road_id=1, lane_id=-1)
    same = ActorState(x=0.0, y=-14.5, yaw=90.0, vx=0.0, vy=12.0, road_id=1, lane_id=-2)
    scene = scene_from_actors(
        ego, [lead, same], lanes=3, target_speed=10.0, speed_limit=13.9, time=1.0, duration=60.0, progress=0.1
    )
    views = {v.number: v for v in scene.lane_views}
    assert scene.lane == 2 and set(views) == {1, 2, 3}
    assert views[1].ahead is not None and views[1].ahead.gap == pytest.approx(24.5 - 4.5, rel=REL)
    assert views[1].ahead.relative_speed == pytest.approx(-2.0, rel=REL)
    assert views[2].behind is not None and views[2].behind.ttc == pytest.approx(10.0 / 2.0, rel=REL)
    assert speed_control(10.0, 6.0) == (1.0, 0.0) and speed_control(10.0, 12.0) == (0.0, 0.5)
    assert steer_towards(ego, 0.0, 50.0) == 0.0 and steer_towards(ego, -50.0, 50.0) > 0  # -x is to the right


def test_carla_adapter_without_carla_names_the_install_line() -> None:
    pytest.importorskip("highway_env")
    try:
        import carla  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - a machine with the CARLA client
        pytest.skip("the carla client is installed")
    from envgym.errors import MissingDependencyError

    with pytest.raises(MissingDependencyError, match=r"pip install 'envgym\[carla\]'"):
        import envgym.environments.driving.carla_adapter  # noqa: F401
