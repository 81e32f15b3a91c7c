"""FrozenLake: contract, generator (seeded, always a safe path), rules, slip model, rewards, solver."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envgym
from envgym.agents.oracle import OracleAgent
from envgym.agents.solvers.frozen_lake import Solver, parse_map, shortest_path_action, slippery_values
from envgym.environments.games.frozen_lake import FrozenLakeEnv, distances_to, parse_lake
from envgym.errors import ConfigError, InvalidKwargsError
from envgym.rollout import RandomAgent, run_episodes
from envgym.testing import check_env

IDS = [
    "envgym/FrozenLake-v0",
    "envgym/FrozenLake-Easy-v0",
    "envgym/FrozenLake-Medium-v0",
    "envgym/FrozenLake-Hard-v0",
    "envgym/FrozenLake-Slippery-v0",
]
FIRM_IDS = IDS[:4]
PRESETS = {IDS[0]: (4, 2), IDS[1]: (4, 2), IDS[2]: (6, 7), IDS[3]: (8, 16), IDS[4]: (4, 2)}

# 4x4: start top-left, goal bottom-right, holes right of the start and in the third row (shortest path: 6).
MAP = """
P O _ _
_ _ _ _
_ O _ _
_ _ _ G
"""


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id: str) -> None:
    report = check_env(env_id)
    assert "seeded_determinism" in report.checks and "bad_input_fuzz" in report.checks


@pytest.mark.parametrize("env_id", IDS)
def test_every_generated_map_has_a_safe_path(env_id: str) -> None:
    size, holes = PRESETS[env_id]
    env = envgym.make(env_id)
    for seed in range(200):
        obs, info = env.reset(seed=seed)
        lake_size, hole_cells, goal, player = parse_map(obs)
        assert lake_size == size and sum(hole_cells) == holes == info["task"]["holes"]
        dist = distances_to(goal, hole_cells, size)
        assert dist[player] == info["task"]["shortest_path"] >= size - 1
        assert info["progress"] == 0.0


def test_seeded_determinism_and_variety() -> None:
    env, other = envgym.make("envgym/FrozenLake-Medium-v0"), envgym.make("envgym/FrozenLake-Medium-v0")
    ids = set()
    for seed in range(60):
        first, second = env.reset(seed=seed), other.reset(seed=seed)
        assert first == second
        ids.add(first[1]["task"]["id"])
    assert len(ids) == 60
    # slippery transitions are seeded too
    a, b = envgym.make("envgym/FrozenLake-Slippery-v0"), envgym.make("envgym/FrozenLake-Slippery-v0")
    for seed in range(10):
        a.reset(seed=seed), b.reset(seed=seed)
        for action in ["up", "right", "down", "left"] * 3:
            step_a, step_b = a.step(action), b.step(action)
            assert step_a == step_b
            if step_a[2] or step_a[3]:
                break


@pytest.mark.parametrize("env_id", FIRM_IDS)
def test_oracle_solves_every_firm_map(env_id: str) -> None:
    results = run_episodes(env_id, OracleAgent(), episodes=200, seed=0)
    rate = sum(r.success for r in results) / len(results)
    assert rate >= 0.95, f"{env_id}: oracle success {rate:.3f}"
    # and along a shortest path
    env = envgym.make(env_id)
    for result in results[:50]:
        _, info = env.reset(seed=result.seed)
        assert result.num_turns == info["task"]["shortest_path"]


def test_oracle_on_slippery_ice_beats_random_play() -> None:
    oracle = run_episodes("envgym/FrozenLake-Slippery-v0", OracleAgent(), episodes=200, seed=0)
    rand = run_episodes("envgym/FrozenLake-Slippery-v0", RandomAgent(seed=1), episodes=200, seed=0)
    oracle_rate = sum(r.success for r in oracle) / 200
    random_rate = sum(r.success for r in rand) / 200
    assert oracle_rate >= 0.9  # measured 0.99; slips make 100% impossible on some maps
    assert oracle_rate > random_rate + 0.3


def test_slip_model_matches_gymnasium() -> None:
    env = envgym.make("envgym/FrozenLake-v0", slippery=True)
    open_map = "_ _ _\n_ P _\n_ _ G"
    outcomes: dict[str, int] = {}
    for seed in range(900):
        env.reset(seed=seed, options={"map": open_map})
        obs, *_ = env.step("up")
        _size, _, _, player = parse_map(obs)
        moved = {1: "up", 3: "left", 5: "right", 7: "down"}[player]
        outcomes[moved] = outcomes.get(moved, 0) + 1
    assert "down" not in outcomes  # never the opposite direction
    for direction in ("up", "left", "right"):
        assert 0.28 < outcomes[direction] / 900 < 0.39, outcomes


@pytest.mark.parametrize(
    "text",
    [
        "down",
        "D",
        "Down",
        "  move   down ",
        "go down.",
        "south",
        "movedown",
        "<action>down</action>",
        "ok <action>step down</action>",
        '"down"',
    ],
)
def test_action_aliases(text: str) -> None:
    env = envgym.make("envgym/FrozenLake-v0")
    env.reset(options={"map": MAP})
    expected = env.step("down")
    env.reset(options={"map": MAP})
    result = env.step(text)
    assert result[4]["action_valid"] and result[0] == expected[0] and "You moved down." in result[0]


@pytest.mark.parametrize("text", ["jump", "", "downn", "up left", "2", "<action>fly</action>", None, 7.5, {"a": 1}])
def test_garbage_is_an_invalid_step_with_unchanged_state(text: object) -> None:
    env = envgym.make("envgym/FrozenLake-v0", invalid_penalty=-0.5)
    env.reset(seed=2)
    before = env.unwrapped._observe()
    obs, reward, terminated, truncated, info = env.step(text)
    assert not info["action_valid"] and reward == -0.5 and not terminated and not truncated
    assert info["reward_components"] == {"success_reward": 0.0, "invalid_action_reward": -0.5, "step_cost_reward": 0.0}
    assert env.unwrapped._observe() == before and obs.endswith(before) and obs.startswith("Invalid action")


def test_reward_components_and_progress_on_a_hand_made_sequence() -> None:
    env = envgym.make("envgym/FrozenLake-v0", step_cost=-0.02)
    obs, info = env.reset(options={"map": MAP})
    assert info["task"]["shortest_path"] == 6 and info["progress"] == 0.0
    script = [
        # action, success_reward, invalid_action_reward, progress, text
        ("up", 0.0, 0.0, 0.0, "edge of the lake"),
        ("down", 0.0, 0.0, 1 / 6, "You moved down."),
        ("right", 0.0, 0.0, 2 / 6, "You moved right."),
        ("fly", 0.0, -0.1, 2 / 6, "Invalid action"),
        ("right", 0.0, 0.0, 3 / 6, "You moved right."),
        ("down", 0.0, 0.0, 4 / 6, "You moved down."),
        ("down", 0.0, 0.0, 5 / 6, "You moved down."),
        ("right", 1.0, 0.0, 1.0, "You reached the goal!"),
    ]
    for turn, (action, success, invalid, progress, text) in enumerate(script, start=1):
        obs, reward, terminated, _truncated, info = env.step(action)
        expected = {"success_reward": success, "invalid_action_reward": invalid, "step_cost_reward": -0.02}
        assert info["reward_components"] == pytest.approx(expected), action
        assert reward == pytest.approx(sum(expected.values())) and text in obs
        assert info["progress"] == pytest.approx(progress) and terminated == (turn == len(script))
    assert info["success"] and info["termination_reason"] == "success"


def test_falling_into_a_hole_is_a_failure() -> None:
    env = envgym.make("envgym/FrozenLake-v0")
    env.reset(options={"map": MAP})
    obs, reward, terminated, truncated, info = env.step("right")
    assert terminated and not truncated and not info["success"] and info["termination_reason"] == "failure"
    assert reward == 0.0 and info["progress"] == 0.0 and "fell into a hole" in obs
    assert "P X _ _" not in obs and "_ X _ _" in obs


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"difficulty": "expert"}, "'easy', 'medium', 'hard'"),
        ({"difficulty": "meduim"}, "Did you mean 'medium'"),
        ({"size": 2}, "from 3 to 12"),
        ({"size": 13}, "from 3 to 12"),
        ({"size": 4.0}, "got 4.0"),
        ({"hole_fraction": 0.6}, "from 0.0 to 0.5"),
        ({"hole_fraction": -0.1}, "from 0.0 to 0.5"),
        ({"hole_fraction": "0.2"}, "got '0.2'"),
        ({"slippery": 1}, "True or False"),
        ({"slipery": True}, "Did you mean 'slippery'"),
    ],
)
def test_kwargs_validation(kwargs: dict, fragment: str) -> None:
    with pytest.raises(InvalidKwargsError, match=fragment):
        envgym.make("envgym/FrozenLake-v0", **kwargs)


def test_overrides() -> None:
    env = gym.make("envgym/FrozenLake-Hard-v0", size=5, hole_fraction=0.0)
    obs, info = env.reset(seed=0)
    size, holes, _, _ = parse_map(obs)
    assert size == 5 and sum(holes) == 0 and info["task"]["difficulty"] == "size=5,hole_fraction=0"
    env = envgym.make("envgym/FrozenLake-v0", size=12, hole_fraction=0.5)
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        size, holes, goal, player = parse_map(obs)
        assert size == 12 and sum(holes) == 71 and distances_to(goal, holes, size)[player] > 0


def test_custom_maps() -> None:
    assert parse_lake("SFH\nFFF\nHFG") == (3, bytearray([0, 0, 1, 0, 0, 0, 1, 0, 0]), 0, 8)
    for bad, fragment in [
        ("P _\n_ _", "one start and one goal"),
        ("P _ G\n_ _", "square grid"),
        ("P Z\n_ G", "unknown glyph 'Z'"),
    ]:
        with pytest.raises(ConfigError, match=fragment):
            parse_lake(bad)
    env = envgym.make("envgym/FrozenLake-v0")
    with pytest.raises(ConfigError, match="no safe path"):
        env.reset(options={"map": "P O\nO G"})


def test_solver_helpers() -> None:
    lake = parse_map(MAP)
    assert lake == (4, bytes([0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]), 15, 0)
    assert shortest_path_action(lake) == 1  # down: right is a hole
    values = slippery_values(4, lake[1], 15)
    assert values[15] == 1.0 and values[1] == values[9] == 0.0
    assert 0.0 < values[0] < values[14] < 1.0
    solver = Solver("envgym/FrozenLake-v0")
    env = envgym.make("envgym/FrozenLake-v0")
    obs, info = env.reset(options={"map": MAP})
    assert solver.act(obs, info) == "down"


def test_observation_and_card() -> None:
    env = envgym.make("envgym/FrozenLake-Slippery-v0", render_mode="ansi")
    obs, info = env.reset(seed=0)
    assert "The ice is slippery" in obs and "P you" in obs and "O hole" in obs
    assert obs.endswith(env.render()) and info["task"]["slippery"] is True
    assert "not slippery" in envgym.make("envgym/FrozenLake-v0").reset(seed=0)[0]
    assert FrozenLakeEnv.env_card().startswith("FrozenLake: cross a frozen lake")


# ------------------------------------------------------------------ regressions (bug hunt)
def test_train_and_test_splits_never_share_a_map() -> None:
    from envgym.environments.games.frozen_lake import in_split

    def maps(split: str, seeds: range) -> set[tuple[bytes, int, int]]:
        env = FrozenLakeEnv(split=split)
        found = set()
        for seed in seeds:
            env.reset(seed=seed)
            key = (bytes(env._holes), env._player, env._goal)
            assert in_split(*key, split) and not in_split(*key, "test" if split == "train" else "train")
            found.add(key)
        return found

    # easy 4x4 maps are few: before the partition ~40% of test maps were train maps
    train, test = maps("train", range(2000)), maps("test", range(300))
    assert len(test) > 150 and not train & test


# ---------------------------------------------------------------- the local view
def test_local_view_describes_the_neighbours_and_the_goal() -> None:
    from envgym.environments.games.frozen_lake import local_view

    # 3x3: player top-left, hole right of it, goal bottom-right
    holes = bytes([0, 1, 0, 0, 0, 0, 0, 0, 0])
    assert local_view(0, 8, holes, 3) == "Goal: 2 down, 2 right.\nup: edge, down: ice, left: edge, right: hole."
    assert local_view(5, 8, holes, 3) == "Goal: 1 down.\nup: ice, down: goal, left: ice, right: edge."


def test_local_view_plays_the_same_maps_as_the_grid_view() -> None:
    grid = FrozenLakeEnv(difficulty="easy")
    local = FrozenLakeEnv(difficulty="easy", view="local")
    for seed in range(20):
        g_obs, g_info = grid.reset(seed=seed)
        l_obs, l_info = local.reset(seed=seed)
        assert g_info["task"] == l_info["task"]  # same map, same id
        assert l_obs.splitlines()[-2].startswith("Goal: ") and " P " not in l_obs
        for action in ("down", "right", "up", "left", "down"):
            g = grid.step(action)
            l_ = local.step(action)
            assert g[1:4] == l_[1:4]  # same rewards and endings
            assert g[0].splitlines()[0] == l_[0].splitlines()[0]  # same "You moved ..." line
            if g[2] or g[3]:
                break
    with pytest.raises(InvalidKwargsError, match="view"):
        FrozenLakeEnv(view="map")


def test_local_view_passes_the_contract_checker() -> None:
    report = check_env("envgym/FrozenLake-v0", make_kwargs={"view": "local"})
    assert "seeded_determinism" in report.checks
