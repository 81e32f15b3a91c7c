"""envgym/Drive-* over the real highway-env: text view, masking, invalid actions, determinism,
splits, reward modes, the numeric view, the rule-based driver and offscreen rendering.

Episodes are kept short (``duration`` of a few seconds) so the family's tests stay fast: one
highway-env decision step costs 15-40 ms here.
"""

from __future__ import annotations

import pickle
import random
import re

import numpy as np
import pytest

pytest.importorskip("highway_env")

from envgym.agents.solvers.driving import Solver, parse_scene
from envgym.environments.driving.env import DriveEnv, DriveKinematicsEnv
from envgym.environments.driving.sim import SEED_SPACE, simulator_seed

import envgym
from envgym.errors import InvalidKwargsError

# Rewards are float64 sums/products of a few terms computed the same way on both sides, so the
# comparisons below are exact or 1e-12 relative (far above rounding, far below a wrong term).
REL = 1e-12


def _actions(obs: str) -> list[str]:
    return re.findall(r"^\d+\. (\w+) - ", obs, re.MULTILINE)


def test_text_view_lists_the_scene_and_the_masked_numbered_actions() -> None:
    env = envgym.make("envgym/Drive-Highway-v0")
    obs, info = env.reset(seed=0)
    assert "Goal: Drive along the highway" in obs
    assert re.search(r"Road: 3 lanes in your direction, numbered from the left\. You are in lane \d of 3\.", obs)
    assert re.search(r"Your speed: \d+\.\d m/s \(target \d+\.\d m/s, speed limit 30\.0 m/s\)", obs)
    assert re.search(r"- lane \d of 3 \(yours\): ahead: ", obs)
    # the numbered list is exactly highway-env's available actions, in action-id order
    sim = env.unwrapped._sim
    expected = [sim.names[a] for a in sorted(sim.env.get_available_actions())]
    assert _actions(obs) == info["admissible_actions"] == expected
    lane = int(re.search(r"You are in lane (\d)", obs).group(1))  # type: ignore[union-attr]
    assert ("LANE_LEFT" in expected) == (lane > 1) and ("LANE_RIGHT" in expected) == (lane < 3)
    assert info["task"]["scenario"] == "highway" and info["progress"] == 0.0
    assert set(info["reward_components"]) == set(env.unwrapped.reward_components)


def test_number_and_name_answers_and_invalid_actions_keep_the_state() -> None:
    env = DriveEnv(scenario="highway", duration=5)
    obs, info = env.reset(seed=1)
    scene = env._observe()
    t0 = info["sim_time"]
    for bad in ("fly", "9", "0", "LANE_LEFT_NOW", ""):
        obs, reward, terminated, truncated, info = env.step(bad)
        assert not info["action_valid"] and reward == -0.1 and not (terminated or truncated)
        assert obs.startswith("Invalid action") and env._observe() == scene and info["sim_time"] == t0
    masked = next(a for a in ("LANE_LEFT", "LANE_RIGHT", "FASTER", "SLOWER") if a not in info["admissible_actions"])
    obs, reward, *_, info = env.step(masked.lower())
    assert not info["action_valid"] and f"{masked} is not available now" in obs
    first = info["admissible_actions"][0]
    obs, reward, *_, info = env.step("<action>1</action>")
    assert info["action_valid"] and obs.startswith(f"You chose {first}.") and info["sim_time"] == t0 + 1.0
    obs, reward, *_, info = env.step("keep")
    assert info["action_valid"] and obs.startswith("You chose IDLE.")


def test_intersection_offers_speed_only() -> None:
    env = DriveEnv(scenario="intersection", duration=3)
    obs, info = env.reset(seed=0)
    assert set(info["admissible_actions"]) <= {"SLOWER", "IDLE", "FASTER"}
    obs, *_, info = env.step("LANE_LEFT")
    assert not info["action_valid"] and "you control only your speed" in obs
    assert "Nearest vehicles" in obs or "No vehicle within" in obs


def test_seeded_episodes_repeat_exactly() -> None:
    def run(seed: int) -> list[tuple[str, float]]:
        env = DriveEnv(scenario="merge", duration=4)
        obs, info = env.reset(seed=seed)
        rng = random.Random(seed)
        out = [(obs, 0.0)]
        for _ in range(4):
            obs, reward, terminated, truncated, info = env.step(rng.choice(info["admissible_actions"]))
            out.append((obs, reward))
            if terminated or truncated:
                break
        return out

    assert run(3) == run(3)
    assert run(3)[0] != run(4)[0]


def test_train_and_test_splits_use_disjoint_simulator_seeds() -> None:
    rng = random.Random(0)
    train = {simulator_seed("train", random.Random(f"driving:train:{s}")) for s in range(500)}
    test = {simulator_seed("test", random.Random(f"driving:test:{s}")) for s in range(500)}
    assert max(train) < SEED_SPACE <= min(test) < 2 * SEED_SPACE
    assert not train & test and len(train) == len(test) == 500
    # the envs use exactly these seeds, and the same seed gives the same scene in both views
    text = DriveEnv(scenario="highway", split="test", duration=2)
    numeric = DriveKinematicsEnv(scenario="highway", split="test", duration=2)
    for seed in (0, 7):
        _, info = text.reset(seed=seed)
        obs, ninfo = numeric.reset(seed=seed)
        assert (
            info["task"]["sim_seed"]
            == ninfo["task"]["sim_seed"]
            == simulator_seed("test", random.Random(f"driving:test:{seed}"))
        )
        np.testing.assert_array_equal(obs, text._sim.observation)
    with pytest.raises(InvalidKwargsError):
        simulator_seed("dev", rng)


def test_reward_modes_pick_their_components() -> None:
    rewards = {}
    for mode in ("highway", "carl", "preordered"):
        env = DriveEnv(scenario="highway", reward_mode=mode, duration=3)
        env.reset(seed=2)
        _, reward, *_, info = env.step("IDLE")
        c = info["reward_components"]
        rewards[mode] = (reward, c)
        if mode == "highway":
            assert reward == c["env_reward"] and 0.0 <= reward <= 1.0
        elif mode == "carl":
            expected = c["progress_reward"] * c["speed_factor"] * c["ttc_factor"] * c["comfort_factor"]
            assert reward == pytest.approx(expected, rel=REL) and c["carl_reward"] == pytest.approx(expected, rel=REL)
        else:
            assert info["reward_priorities"] == (c["safety_reward"], c["progress_reward"], c["comfort_reward"])
            expected = c["safety_reward"] + 1e-3 * c["progress_reward"] + 1e-6 * c["comfort_reward"]
            assert reward == pytest.approx(expected, rel=1e-9)
    # the components do not depend on the mode: the same step scores the same everywhere
    assert rewards["highway"][1] == rewards["carl"][1] == rewards["preordered"][1]
    # IDLE at the start of the highway: ~25 m/s for 1 s out of a 3 s x 20 m/s route
    assert 0.3 < rewards["carl"][1]["progress_reward"] < 0.5


def test_a_collision_ends_the_episode_with_the_carl_terminal_value() -> None:
    env = DriveEnv(scenario="highway", reward_mode="carl", duration=30)
    for seed in range(20):  # random driving on the highway collides in every episode measured
        obs, info = env.reset(seed=seed)
        rng = random.Random(seed)
        while True:
            obs, reward, terminated, truncated, info = env.step(rng.choice(info["admissible_actions"]))
            if terminated or truncated:
                break
        if info["collision"]:
            break
    c = info["reward_components"]
    assert terminated and not info["success"] and info["termination_reason"] == "failure"
    assert reward == c["carl_reward"] == -1.0 and c["safety_reward"] == -1.0
    assert c["highway_collision_reward"] == 1.0 and "You collided" in obs


def test_the_rule_based_driver_survives_short_highway_episodes() -> None:
    env = envgym.make("envgym/Drive-Highway-v0", duration=8, split="test")
    for seed in range(4):
        obs, info = env.reset(seed=seed)
        solver = Solver("envgym/Drive-Highway-v0", seed)
        while True:
            obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
            assert info["action_valid"]
            if terminated or truncated:
                break
        assert info["success"] and info["termination_reason"] == "success" and info["progress"] == 1.0


def test_the_driver_parses_what_the_env_writes() -> None:
    env = DriveEnv(scenario="highway", duration=2)
    obs, _ = env.reset(seed=5)
    p = parse_scene(obs)
    scene = env._sim.scene()
    assert (p.scenario, p.lane, p.lanes) == ("highway", scene.lane, scene.lanes)
    assert p.speed == pytest.approx(scene.speed, abs=0.05)  # printed with one decimal
    for view in scene.lane_views:
        parsed = p.ahead[view.number]  # type: ignore[index]
        assert (parsed is None) == (view.ahead is None)
        if view.ahead is not None and view.ahead.gap > 0:
            assert parsed.gap == pytest.approx(view.ahead.gap, abs=0.05)


def test_numeric_view_is_a_plain_gymnasium_env_with_envgym_info() -> None:
    env = envgym.make("envgym/Drive-Roundabout-Kinematics-v0", duration=3)
    obs, info = env.reset(seed=0)
    assert obs.shape == (5, 5) and obs.dtype == np.float32 and env.observation_space.contains(obs)
    assert env.action_space.n == 5
    assert [env.unwrapped._sim.names[i] for i in np.flatnonzero(info["action_mask"])] == info["admissible_actions"]
    before = obs.copy()
    obs, reward, terminated, truncated, info = env.step(7)  # outside Discrete(5)
    assert not info["action_valid"] and reward == -0.1 and np.array_equal(obs, before)
    obs, reward, terminated, truncated, info = env.step(np.int64(1))
    assert info["action_valid"] and info["sim_time"] == 1.0 and isinstance(reward, float)
    steps = 2
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(1)
        steps += 1
    assert info["termination_reason"] in ("success", "failure") and info["sim_time"] <= 3.0


def test_bad_kwargs_fail_with_the_choices() -> None:
    with pytest.raises(InvalidKwargsError, match="scenario must be one of"):
        DriveEnv(scenario="parking")
    with pytest.raises(InvalidKwargsError, match="Did you mean 'vehicles_count'"):
        DriveEnv(config={"vehicle_count": 10})
    with pytest.raises(InvalidKwargsError, match="reward_mode"):
        DriveKinematicsEnv(reward_mode="dense")


@pytest.mark.parametrize("dummy", [False, True], ids=["default", "SDL_VIDEODRIVER=dummy"])
def test_offscreen_frames_are_not_blank(monkeypatch: pytest.MonkeyPatch, dummy: bool) -> None:
    if dummy:
        monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")  # highway-env alone draws black frames here
    env = DriveEnv(scenario="highway", duration=2, render_mode="rgb_array")
    env.reset(seed=0)
    env.step("IDLE")
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    colours = np.unique(frame.reshape(-1, 3), axis=0)
    assert frame.std() > 10 and len(colours) >= 5  # road, lane marks, grass, ego, other cars
    clone = pickle.loads(pickle.dumps(env))  # the viewer is left behind, the episode is not
    assert clone._observe() == env._observe()
    env.close()
    env.close()


def test_an_intersection_in_the_same_process_does_not_change_highway_traffic() -> None:
    # highway-env's IntersectionEnv sets IDM parameters on the IDMVehicle class itself; without
    # DriveSim restoring them, highway episodes replayed after one (leaderboard replays, worker
    # pools running several scenarios) would drive differently.
    def highway() -> str:
        env = DriveEnv(scenario="highway", duration=4)
        env.reset(seed=6)
        for _ in range(3):
            obs = env.step("IDLE")[0]
        return obs

    before = highway()
    crossing = DriveEnv(scenario="intersection", duration=2)
    crossing.reset(seed=0)
    crossing.step("IDLE")
    assert highway() == before
