"""Sokoban: contract, generator (seeded, solvable), rules, rewards, parsing, kwargs and the solver."""

from __future__ import annotations

import random

import gymnasium as gym
import pytest

import envgym
from envgym.agents.oracle import OracleAgent
from envgym.agents.solvers.sokoban import ACTIONS, Solver, parse_board, solve
from envgym.environments.games.sokoban import SokobanEnv, dead_squares, parse_level
from envgym.errors import ConfigError, InvalidKwargsError
from envgym.rollout import run_episodes
from envgym.testing import check_env

IDS = ["envgym/Sokoban-v0", "envgym/Sokoban-Easy-v0", "envgym/Sokoban-Medium-v0", "envgym/Sokoban-Hard-v0"]
PRESETS = {
    "envgym/Sokoban-v0": (6, 1),
    "envgym/Sokoban-Easy-v0": (6, 1),
    "envgym/Sokoban-Medium-v0": (7, 2),
    "envgym/Sokoban-Hard-v0": (8, 3),
}

# Two boxes; the top one sits left of a target, the bottom one left of the other target.
TWO_BOXES = """
# # # # # # # # #
# P X O _ _ _ _ #
# _ _ _ _ X O _ #
# # # # # # # # #
"""


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id: str) -> None:
    report = check_env(env_id)
    assert "seeded_determinism" in report.checks and "bad_input_fuzz" in report.checks
    assert report.steps > 0


@pytest.mark.parametrize("env_id", IDS)
def test_generated_levels_match_the_preset(env_id: str) -> None:
    size, boxes = PRESETS[env_id]
    env = envgym.make(env_id)
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        width, floor, targets, box_cells, player = parse_board(obs)
        assert width == size and len(floor) == size * size
        assert len(box_cells) == boxes == sum(targets) == info["task"]["boxes"]
        # enclosed by walls, the player on a floor cell, and something left to do
        assert not any(floor[i] for i in range(size)) and not any(
            floor[i] for i in range(size * (size - 1), size * size)
        )
        assert floor[player] and player not in box_cells
        assert info["progress"] < 1.0
        assert info["task"]["generator_pushes"] >= 1


def test_seeded_determinism_and_variety() -> None:
    env = envgym.make("envgym/Sokoban-Medium-v0")
    other = envgym.make("envgym/Sokoban-Medium-v0")
    ids = set()
    for seed in range(60):
        obs, info = env.reset(seed=seed)
        obs2, info2 = other.reset(seed=seed)
        assert obs == obs2 and info == info2
        ids.add(info["task"]["id"])
    assert len(ids) >= 58  # different seeds give different levels
    # the split changes the stream of levels
    test_env = envgym.make("envgym/Sokoban-Medium-v0", split="test")
    assert test_env.reset(seed=0)[1]["task"]["id"] != env.reset(seed=0)[1]["task"]["id"]


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_generated_levels(env_id: str) -> None:
    results = run_episodes(env_id, OracleAgent(), episodes=200, seed=0)
    rate = sum(r.success for r in results) / len(results)
    assert rate >= 0.95, f"{env_id}: oracle success {rate:.3f}"
    assert all(r.invalid_actions == 0 for r in results)
    assert all(r.reward_components["success_reward"] == 1.0 for r in results if r.success)


def test_size_and_boxes_overrides() -> None:
    env = gym.make("envgym/Sokoban-v0", size=6, boxes=2)
    obs, info = env.reset(seed=3)
    width, floor, targets, boxes, _ = parse_board(obs)
    assert (width, len(floor), len(boxes), sum(targets)) == (6, 36, 2, 2)
    assert info["task"]["difficulty"] == "size=6,boxes=2"
    assert solve(parse_board(obs)) is not None
    # a preset's box count is capped by an overriding smaller size
    assert envgym.make("envgym/Sokoban-Hard-v0", size=6).unwrapped.num_boxes == 2
    for size in (5, 9, 10):
        for boxes in range(1, min(4, size - 4) + 1):
            obs, info = envgym.make("envgym/Sokoban-v0", size=size, boxes=boxes).reset(seed=size * 10 + boxes)
            width, floor, targets, box_cells, _ = parse_board(obs)
            assert width == size and len(box_cells) == boxes == sum(targets)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"difficulty": "extreme"}, "'easy', 'medium', 'hard'"),
        ({"difficulty": "hrad"}, "Did you mean 'hard'"),
        ({"size": 4}, "from 5 to 10"),
        ({"size": 11}, "from 5 to 10"),
        ({"size": "6"}, "got '6'"),
        ({"size": True}, "got True"),
        ({"boxes": 0}, "from 1 to 2"),
        ({"size": 6, "boxes": 3}, "from 1 to 2 on a 6x6 board"),
        ({"size": 10, "boxes": 5}, "from 1 to 4"),
        ({"boxes": 1.5}, "got 1.5"),
        ({"end_on_deadlock": "yes"}, "True or False"),
        ({"boxs": 2}, "Did you mean 'boxes'"),
    ],
)
def test_kwargs_validation(kwargs: dict, fragment: str) -> None:
    with pytest.raises(InvalidKwargsError, match=fragment.replace("(", r"\(")):
        envgym.make("envgym/Sokoban-v0", **kwargs)


@pytest.mark.parametrize(
    "text",
    [
        "up",
        "U",
        "Up",
        "UP",
        "push up",
        "  Push   Up ",
        "move up",
        "go up.",
        "north",
        "pushup",
        "<action>up</action>",
        "I think <action>push up</action>",
        "'up'",
    ],
)
def test_action_aliases(text: str) -> None:
    env = envgym.make("envgym/Sokoban-v0")
    level = "# # # # # #\n# _ _ _ _ #\n# _ _ O _ #\n# _ X _ _ #\n# _ P _ _ #\n# # # # # #"
    reference = env.reset(options={"level": level})
    expected = env.step("up")
    env.reset(options={"level": level})
    obs, reward, terminated, _truncated, info = env.step(text)
    assert info["action_valid"] and obs == expected[0] and reward == expected[1] == 0.0 and not terminated
    assert reference[0] != obs  # the box really moved up


@pytest.mark.parametrize("text", ["jump", "", "upp", "up down", "5", "<action>sideways</action>", None, 3, ["up"]])
def test_garbage_is_an_invalid_step_with_unchanged_state(text: object) -> None:
    env = envgym.make("envgym/Sokoban-v0", invalid_penalty=-0.25)
    env.reset(seed=5)
    before = env.unwrapped._observe()
    obs, reward, terminated, truncated, info = env.step(text)
    assert not info["action_valid"] and reward == -0.25
    assert info["reward_components"]["invalid_action_reward"] == -0.25
    assert not terminated and not truncated and info["invalid_actions"] == 1
    assert env.unwrapped._observe() == before and before in obs
    hint = "up, down, left or right" if isinstance(text, str) else "expected the action as a string"
    assert obs.startswith("Invalid action") and hint in obs


def test_reward_components_on_a_hand_made_sequence() -> None:
    env = envgym.make("envgym/Sokoban-v0", step_cost=-0.01)
    obs, info = env.reset(options={"level": TWO_BOXES})
    assert info["progress"] == 0.0 and info["task"]["difficulty"] == "custom"
    script = [
        # action, box_on_target_reward, success_reward, invalid_action_reward, progress, what the line says
        ("right", 0.1, 0.0, 0.0, 0.5, "onto a target"),
        ("right", -0.1, 0.0, 0.0, 0.0, "off a target"),
        ("dance", 0.0, 0.0, -0.1, 0.0, "Invalid action"),
        ("down", 0.0, 0.0, 0.0, 0.0, "You moved down"),
        ("down", 0.0, 0.0, 0.0, 0.0, "walked into a wall"),
        ("right", 0.0, 0.0, 0.0, 0.0, "You moved right"),
        ("right", 0.1, 0.0, 0.0, 0.5, "onto a target"),
        ("up", 0.0, 0.0, 0.0, 0.5, "You moved up"),
        ("left", 0.1, 1.0, 0.0, 1.0, "solved the level"),
    ]
    total = 0.0
    for turn, (action, box, success, invalid, progress, line) in enumerate(script, start=1):
        obs, reward, terminated, _truncated, info = env.step(action)
        expected = {
            "success_reward": success,
            "box_on_target_reward": box,
            "invalid_action_reward": invalid,
            "step_cost_reward": -0.01,
        }
        assert info["reward_components"] == pytest.approx(expected), action
        assert reward == pytest.approx(sum(expected.values()))
        assert info["progress"] == progress and line in obs and info["turn"] == turn
        total += reward
        assert terminated == (turn == len(script))
    assert info["success"] and info["termination_reason"] == "success" and info["admissible_actions"] == []
    assert total == pytest.approx(0.1 - 0.1 - 0.1 + 0.1 + 0.1 + 1.0 - 0.01 * len(script))


def test_blocked_pushes_are_valid_no_ops() -> None:
    env = envgym.make("envgym/Sokoban-v0")
    env.reset(options={"level": "# # # # # #\n# P X X O #\n# _ _ _ O #\n# # # # # #"})
    before = env.unwrapped._observe()
    obs, reward, *_, info = env.step("right")
    assert info["action_valid"] and "another box is behind it" in obs and env.unwrapped._observe() == before
    obs, reward_2, *_, info = env.step("up")
    assert info["action_valid"] and "walked into a wall" in obs and env.unwrapped._observe() == before
    assert reward == reward_2 == 0.0 and info["turn"] == 2 and info["invalid_actions"] == 0


def test_dead_square_ends_the_episode_unless_disabled() -> None:
    level = "# # # # # #\n# _ _ _ _ #\n# _ X P O #\n# _ _ _ _ #\n# # # # # #"
    env = envgym.make("envgym/Sokoban-v0")
    env.reset(options={"level": level})
    obs, reward, terminated, truncated, info = env.step("left")  # the box goes against the left wall
    assert terminated and not truncated and reward == 0.0
    assert not info["success"] and info["termination_reason"] == "failure"
    assert "can never reach a target" in obs
    relaxed = envgym.make("envgym/Sokoban-v0", end_on_deadlock=False)
    relaxed.reset(options={"level": level})
    *_, terminated, _truncated, info = relaxed.step("left")
    assert not terminated and info["termination_reason"] is None


def test_dead_squares() -> None:
    width, _height, floor, targets, _boxes, _player = parse_level(
        "# # # # #\n# _ _ _ #\n# P X O #\n# _ _ _ #\n# # # # #"
    )
    dead = dead_squares(floor, [i for i in range(len(targets)) if targets[i]], width)
    corners = {6, 8, 16, 18}
    left_wall = {11}
    assert {i for i in range(len(dead)) if dead[i]} == corners | left_wall | {7, 17}


def test_parse_level_accepts_xsb_and_rejects_bad_levels() -> None:
    width, height, _floor, targets, boxes, player = parse_level("#####\n#@$.#\n#####")
    assert (width, height, player, sum(boxes), sum(targets)) == (5, 3, 6, 1, 1)
    for bad, fragment in [
        ("# # #\n# Q #\n# # #", "unknown glyph 'Q'"),
        ("# # # #\n# P X #\n# # # #", "as many boxes as targets"),
        ("# # # # #\n# P X O _\n# # # # #", "enclosed by walls"),
        ("# # # # #\n# _ X O #\n# # # # #", "exactly one player"),
        ("", "at least one row"),
    ]:
        with pytest.raises(ConfigError, match=fragment):
            parse_level(bad)


def test_observation_text_and_render() -> None:
    env = envgym.make("envgym/Sokoban-Hard-v0", render_mode="ansi")
    obs, info = env.reset(seed=1)
    for glyph in ("# wall", "_ floor", "O empty target", "X box", "* box on a target", "P you", "S you"):
        assert glyph in obs
    assert obs.endswith("Boxes on targets: 0/3.")
    assert env.render() == obs.split("\n\n")[-1]
    assert info["admissible_actions"] == list(ACTIONS)
    assert SokobanEnv.env_card().startswith("Sokoban: push every box onto a target.")


def test_solver_replans_after_unexpected_moves() -> None:
    rng = random.Random(0)
    solved = 0
    for seed in range(25):
        env = envgym.make("envgym/Sokoban-Medium-v0")
        solver = Solver("envgym/Sokoban-Medium-v0", seed)
        obs, info = env.reset(seed=seed)
        for turn in range(100):
            action = solver.act(obs, info)
            if turn % 3 == 1:  # replace the solver's move by a random walk that pushes nothing
                width, floor, _, boxes, player = parse_board(obs)
                free = [
                    d
                    for d, off in enumerate((-width, width, -1, 1))
                    if floor[player + off] and player + off not in boxes
                ]
                action = ACTIONS[rng.choice(free)] if free else action
            obs, _reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        solved += info["success"]
    assert solved == 25


def test_solve_reports_unsolvable_boards() -> None:
    board = parse_board("# # # # # #\n# X _ _ O #\n# _ _ P _ #\n# # # # # #")
    assert solve(board) is None  # the box is in a corner
    assert solve(parse_board("# # # #\n# * P #\n# # # #")) == []
    plan = solve(parse_board("# # # # # #\n# P X _ O #\n# # # # # #"))
    assert [ACTIONS[d] for d in plan] == ["right", "right"]


# ------------------------------------------------------------------ regressions (bug hunt)
def test_train_and_test_splits_never_share_a_level() -> None:
    from envgym.environments.games.sokoban import in_split

    def levels(split: str, seeds: range) -> set[bytes]:
        env = SokobanEnv(split=split)
        found = set()
        for seed in seeds:
            env.reset(seed=seed)
            assert in_split(env._floor, env._target, env._box, split)
            assert not in_split(env._floor, env._target, env._box, "test" if split == "train" else "train")
            found.add(bytes(env._floor) + bytes(env._target) + bytes(env._box))
        return found

    # easy 6x6 one-box rooms are few: before the partition ~40% of test levels were train levels
    train, test = levels("train", range(1500)), levels("test", range(300))
    assert len(test) > 150 and not train & test


def test_xsb_levels_with_space_floor_and_outside_spaces() -> None:
    xsb = "  ####\n###  #\n#@$. #\n######"
    width, height, floor, targets, boxes, player = parse_level(xsb)
    assert (width, height, player) == (6, 4, 13)
    assert floor[:6] == bytearray(6)  # the spaces outside the walls are not floor
    assert floor[9] == floor[10] == floor[16] == 1 and targets[15] == boxes[14] == 1
    env = envgym.make("envgym/Sokoban-v0")
    obs, _ = env.reset(seed=0, options={"level": "    #####\n    #@ $.#\n    ######"})  # indented, space floor
    assert "# P _ X O #" in obs
    for action in ("right", "right"):
        obs, _, terminated, _, info = env.step(action)
    assert terminated and info["success"]
    # the observation's own spaced format still parses the same way
    assert parse_level("# # # # #\n# P X O #\n# # # # #")[2] == parse_level("#####\n#@$.#\n#####")[2]
    with pytest.raises(ConfigError, match="enclosed"):
        parse_level("#####\n#@$.#\n## ##")  # a hole in the bottom wall
