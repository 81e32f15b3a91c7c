"""Household family: contract, grammar, task success checks, splits, planner and optimal plans."""

from __future__ import annotations

import collections
import random
from collections import deque

import pytest
from envgym.agents.oracle import OracleAgent
from envgym.agents.solvers.household import Solver, parse_goal
from envgym.environments.household.catalogue import CLEAN, COOL, HEAT, LOOK, PICK, ROOMS, TASK_TYPES, TWO
from envgym.environments.household.env import HouseholdEnv, canonical_command
from envgym.environments.household.floorplans import FLOORPLANS, SIZES, VARIANTS, goal_combos, is_unseen_combo
from envgym.environments.household.goals import Goal
from envgym.environments.household.simulator import World, is_mutating

import envgym
from envgym.errors import InvalidKwargsError
from envgym.rollout import run_episodes
from envgym.testing import check_env

HOUSEHOLD_IDS = [s.id for s in envgym.list_envs(family="household") if "TextWorld" not in s.id]
SPLITS = ("train", "valid_seen", "valid_unseen")


# ----------------------------------------------------------------------------- helpers
def kitchen_world(**overrides: object) -> World:
    """A two-room house built by hand: kitchen appliances, a bedroom with both lamp kinds."""
    spec = {
        "rooms": {
            "kitchen": ["countertop 1", "cabinet 1", "fridge 1", "microwave 1", "sinkbasin 1", "coffeemachine 1"],
            "bedroom": ["desk 1", "floorlamp 1", "drawer 1", "shelf 1"],
        },
        "objects": {
            "mug 1": "countertop 1",
            "mug 2": "cabinet 1",
            "apple 1": "fridge 1",
            "book 1": "shelf 1",
            "desklamp 1": "desk 1",
            "knife 1": "drawer 1",
        },
        "closed": ["cabinet 1", "fridge 1", "drawer 1"],
        "start_room": "kitchen",
    }
    spec.update(overrides)
    return World.build(spec["rooms"], spec["objects"], closed=spec["closed"], start_room=spec["start_room"])


def play(goal: Goal, commands: list[str], world: World | None = None, **kwargs: object):
    env = HouseholdEnv(**kwargs)
    obs, info = env.reset(seed=0, options={"world": world or kitchen_world(), "goal": goal})
    steps = [(obs, 0.0, False, False, info)]
    for command in commands:
        steps.append(env.step(command))
        if steps[-1][2] or steps[-1][3]:
            break
    return env, steps


def solve(env_id: str, seed: int, **kwargs: object) -> tuple[bool, int, str]:
    env = envgym.make(env_id, **kwargs)
    obs, info = env.reset(seed=seed)
    solver = Solver(env_id, seed)
    turns = 0
    while True:
        obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
        turns += 1
        if terminated or truncated:
            return bool(info["success"]), turns, info["task"]["task_type"]


# ----------------------------------------------------------------------------- contract
@pytest.mark.parametrize("env_id", HOUSEHOLD_IDS)
def test_check_env(env_id: str) -> None:
    report = check_env(env_id)
    assert "seeded_determinism" in report.checks and report.steps > 0


def test_registered_ids() -> None:
    expected = {
        "envgym/Household-v0",
        *(f"envgym/Household-{d}-v0" for d in ("Easy", "Medium", "Hard")),
        *(f"envgym/Household-{t}-v0" for t in ("PickPlace", "LookInLight", "Clean", "Heat", "Cool", "PickTwo")),
    }
    assert expected == set(HOUSEHOLD_IDS)
    assert envgym.spec("envgym/TextWorld-v0").family == "household"


@pytest.mark.parametrize(
    "variant, task_type",
    [
        ("PickPlace", PICK),
        ("LookInLight", LOOK),
        ("Clean", CLEAN),
        ("Heat", HEAT),
        ("Cool", COOL),
        ("PickTwo", TWO),
    ],
)
def test_task_type_variants(variant: str, task_type: str) -> None:
    env = envgym.make(f"envgym/Household-{variant}-v0")
    for seed in range(20):
        _, info = env.reset(seed=seed)
        assert info["task"]["task_type"] == task_type
        assert parse_goal(info["task"]["goal"])[1:] == (info["task"]["object"], info["task"]["target"])


def test_reset_observation_style() -> None:
    env = envgym.make("envgym/Household-Medium-v0")
    obs, info = env.reset(seed=3)
    assert obs.startswith("-= Welcome to envgym Household! =-\n\nYou are in the middle of the ")
    assert "Looking quickly around you, you see a" in obs
    assert "Elsewhere in the house, the " in obs  # two rooms
    assert obs.endswith(f"Your task is to: {info['task']['goal']}.")
    assert info["progress"] == 0.0 and info["turn"] == 0
    assert len(info["task"]["rooms"]) == 2
    # Every receptacle of the house can be reached by `go to` from the start.
    world = env.unwrapped.world
    assert {f"go to {r.name}" for r in world.recs} <= set(info["admissible_actions"])


def test_kwargs_validation() -> None:
    with pytest.raises(InvalidKwargsError, match="Did you mean 'medium'"):
        HouseholdEnv(difficulty="meduim")
    with pytest.raises(InvalidKwargsError, match="task_type"):
        HouseholdEnv(task_type="juggle")
    with pytest.raises(InvalidKwargsError, match="valid_unseen"):
        HouseholdEnv(split="test")
    with pytest.raises(InvalidKwargsError, match="rooms"):
        HouseholdEnv(rooms=0)
    with pytest.raises(InvalidKwargsError, match="distractors"):
        HouseholdEnv(distractors=(5, 2))
    with pytest.raises(InvalidKwargsError, match="closed_fraction"):
        HouseholdEnv(closed_fraction=2)
    for alias in ("heat", 4, "4", "pick_heat_then_place_in_recep"):
        assert HouseholdEnv(task_type=alias).task_type == HEAT
    assert HouseholdEnv(task_type="any").task_type is None


def test_overrides_change_the_house() -> None:
    env = HouseholdEnv(difficulty="easy", rooms=4, distractors=0, closed_fraction=1.0)
    _, info = env.reset(seed=5)
    world = env.unwrapped.world
    assert len(world.rooms) == 4
    assert all(not r.is_open for r in world.recs if r.openable)
    goal_items = [o for o in world.items if o.portable]
    assert {o.type for o in goal_items} == {info["task"]["object"]}


# ----------------------------------------------------------------------------- grammar
def test_grammar_walkthrough() -> None:
    goal = Goal(CLEAN, "mug", "coffeemachine")
    env = HouseholdEnv()
    obs, info = env.reset(seed=0, options={"world": kitchen_world(), "goal": goal})
    assert "You are in the middle of the kitchen." in obs
    assert "the bedroom has a desk 1, a floorlamp 1, a drawer 1, and a shelf 1" in obs
    assert obs.endswith("Your task is to: put a clean mug in coffeemachine.")

    def step(command: str, expected: str | None = None, valid: bool = True) -> str:
        obs, _, _, _, info = env.step(command)
        assert info["action_valid"] is valid, (command, obs)
        if expected is not None:
            assert obs == expected, (command, obs)
        return obs

    step("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed.")
    step("take mug 2 from cabinet 1", valid=False)  # closed
    step("open cabinet 1", "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 2.")
    step("close cabinet 1", "You close the cabinet 1.")
    step("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a mug 1.")
    step("take mug 1 from countertop 1", "You pick up the mug 1 from the countertop 1.")
    step("inventory", "You are carrying: a mug 1.")
    step("examine mug 1", "There's nothing special about mug 1.")
    step("take mug 1 from countertop 1", valid=False)  # already held
    step("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.")
    step("heat mug 1 with sinkbasin 1", valid=False)  # wrong appliance
    step("clean mug 1 with sinkbasin 1", "You clean the mug 1 using the sinkbasin 1.")
    step("examine mug 1", "This is a clean mug 1.")
    step("go to microwave 1", "You arrive at microwave 1. The microwave 1 is open. In it, you see nothing.")
    step("heat mug 1 with microwave 1", "You heat the mug 1 using the microwave 1.")
    step("examine mug 1", "This is a clean, hot mug 1.")
    step("go to desk 1", "You walk into the bedroom. You arrive at desk 1. On the desk 1, you see a desklamp 1.")
    step("use desklamp 1", "You turn on the desklamp 1.")
    step("examine desklamp 1", "This is a desklamp 1. It is on.")
    step("use desklamp 1", "You turn off the desklamp 1.")
    step("go to floorlamp 1", "You arrive at floorlamp 1. The floorlamp 1 is off.")
    step("move mug 1 to floorlamp 1", valid=False)  # a lamp is not a receptacle
    step("use floorlamp 1", "You turn on the floorlamp 1.")
    assert step("look").startswith("You are facing the floorlamp 1, in the bedroom. Looking quickly around you")
    step(
        "go to coffeemachine 1",
        "You walk into the kitchen. You arrive at coffeemachine 1. On the coffeemachine 1, you see nothing.",
    )
    obs, _reward, terminated, _, info = env.step("move mug 1 to coffeemachine 1")
    assert obs.startswith("You move the mug 1 to the coffeemachine 1.")
    assert terminated and info["success"] and info["termination_reason"] == "success"
    assert info["reward_components"]["success_reward"] == 1.0


@pytest.mark.parametrize(
    "command",
    [
        "put mug 1 in countertop 1",
        "put mug 1 on countertop 1",
        "put mug 1 in/on countertop 1",
        "PUT mug 1 ON the countertop 1.",
        "move mug 1 into countertop 1",
        "<action>move mug 1 to countertop 1</action>",
    ],
)
def test_put_aliases(command: str) -> None:
    goal = Goal(PICK, "mug", "countertop")
    world = kitchen_world(objects={"mug 1": "sinkbasin 1"})
    _env, steps = play(goal, ["go to sinkbasin 1", "take mug 1 from sinkbasin 1", "go to countertop 1", command], world)
    obs, _, terminated, _, info = steps[-1]
    assert info["action_valid"] and terminated and info["success"]
    assert obs.startswith("You move the mug 1 to the countertop 1.")


def test_canonical_command() -> None:
    assert canonical_command("Go to the Fridge 1.") == "go to fridge 1"
    assert canonical_command("put apple 1 in/on diningtable 1") == "move apple 1 to diningtable 1"
    assert canonical_command("i") == "inventory"
    assert canonical_command("x mug 1") == "examine mug 1"
    assert canonical_command("go to bathtubbasin 1") == "go to bathtubbasin 1"


def test_invalid_actions_say_nothing_happens() -> None:
    goal = Goal(PICK, "mug", "coffeemachine")
    _env, steps = play(
        goal,
        [
            "fly to the moon",
            "go to countertop 1",
            "go to countertop 1",
            "open countertop 1",
            "take mug 2 from countertop 1",
            "help",
        ],
        invalid_penalty=-0.5,
    )
    invalid = [s for s in steps[1:] if not s[4]["action_valid"]]
    assert len(invalid) == 4
    for obs, reward, *_, info in invalid:
        assert obs.startswith("Invalid action") and "Nothing happens." in obs
        assert info["reward_components"]["invalid_action_reward"] == -0.5 and reward == -0.5
    help_obs, help_reward, *_, help_info = steps[-1]
    assert help_info["action_valid"] and help_reward == 0.0 and "go to RECEPTACLE" in help_obs
    assert steps[-1][4]["invalid_actions"] == 4


def test_admissible_actions_are_exactly_the_valid_commands() -> None:
    """In many random states: each listed command is valid, and grammar commands not listed are not."""
    rng = random.Random(0)
    env = HouseholdEnv(difficulty="easy")
    verbs = [
        "open {r}",
        "close {r}",
        "use {r}",
        "examine {r}",
        "go to {r}",
        "take {o} from {r}",
        "move {o} to {r}",
        "heat {o} with {r}",
        "cool {o} with {r}",
        "clean {o} with {r}",
        "use {o}",
        "examine {o}",
        "slice {o} with {p}",
    ]
    checked = 0
    for seed in range(12):
        _, info = env.reset(seed=seed)
        world = env.unwrapped.world
        recs = [r.name for r in world.recs]
        objs = [o.name for o in world.items]
        history: list[str] = []
        for _ in range(12):
            listed = set(info["admissible_actions"])
            assert len(listed) == len(info["admissible_actions"])
            # Unlisted grammar instances are invalid (they leave the state as it is).
            for _ in range(25):
                template = rng.choice(verbs)
                command = template.format(r=rng.choice(recs), o=rng.choice(objs), p=rng.choice(objs))
                if command in listed:
                    continue
                before = world.state_key()
                _, _, _, _, probe = env.step(command)
                assert not probe["action_valid"], command
                assert world.state_key() == before
                checked += 1
                if probe["termination_reason"]:
                    break
            # Every listed command is valid: replay the history, then try it.
            for command in rng.sample(sorted(listed), min(4, len(listed))):
                env.reset(seed=seed)
                for past in history:
                    env.step(past)
                _, _, _, _, probe = env.step(command)
                assert probe["action_valid"], command
                checked += 1
            env.reset(seed=seed)
            for past in history:
                env.step(past)
            choice = rng.choice(sorted(listed - {"help", "look", "inventory"}))
            history.append(choice)
            _, _, terminated, truncated, info = env.step(choice)
            world = env.unwrapped.world
            if terminated or truncated:
                break
    assert checked > 1000


def test_one_object_at_a_time() -> None:
    goal = Goal(PICK, "mug", "coffeemachine")
    world = kitchen_world(objects={"mug 1": "countertop 1", "apple 1": "countertop 1"})
    _env, steps = play(
        goal, ["go to countertop 1", "take apple 1 from countertop 1", "take mug 1 from countertop 1"], world
    )
    assert steps[2][4]["action_valid"] and not steps[3][4]["action_valid"]
    assert "take mug 1 from countertop 1" not in steps[2][4]["admissible_actions"]


def test_slice() -> None:
    goal = Goal(PICK, "apple", "diningtable")
    world = kitchen_world(objects={"knife 1": "countertop 1", "apple 1": "countertop 1"})
    _env, steps = play(
        goal,
        ["go to countertop 1", "take knife 1 from countertop 1", "slice apple 1 with knife 1", "examine apple 1"],
        world,
    )
    assert steps[-1][0] == "This is a sliced apple 1."


# ----------------------------------------------------------------------------- success checks per task type
def test_success_pick_and_place() -> None:
    goal = Goal(PICK, "mug", "coffeemachine")
    _, steps = play(
        goal,
        [
            "go to countertop 1",
            "take mug 1 from countertop 1",
            "go to coffeemachine 1",
            "move mug 1 to coffeemachine 1",
        ],
    )
    assert [s[4]["progress"] for s in steps] == [0.0, 0.0, 0.5, 0.5, 1.0]
    assert [s[4]["success"] for s in steps] == [False] * 4 + [True]
    assert sum(s[1] for s in steps) == pytest.approx(2.0)  # success + progress
    # Putting it somewhere else is not a success.
    _env, steps = play(
        goal, ["go to countertop 1", "take mug 1 from countertop 1", "go to sinkbasin 1", "move mug 1 to sinkbasin 1"]
    )
    assert not steps[-1][4]["success"] and steps[-1][4]["progress"] == 0.0


@pytest.mark.parametrize(
    "task_type, verb, appliance, prop",
    [
        (CLEAN, "clean", "sinkbasin 1", "clean"),
        (HEAT, "heat", "microwave 1", "hot"),
        (COOL, "cool", "fridge 1", "cool"),
    ],
)
def test_success_state_then_place(task_type: str, verb: str, appliance: str, prop: str) -> None:
    goal = Goal(task_type, "mug", "coffeemachine")
    plain = [
        "go to countertop 1",
        "take mug 1 from countertop 1",
        "go to coffeemachine 1",
        "move mug 1 to coffeemachine 1",
    ]
    env, steps = play(goal, plain)
    assert not steps[-1][4]["success"] and steps[-1][4]["progress"] == 0.0  # placed but not processed
    full = [
        "go to countertop 1",
        "take mug 1 from countertop 1",
        f"go to {appliance}",
        f"{verb} mug 1 with {appliance}",
        "go to coffeemachine 1",
        "move mug 1 to coffeemachine 1",
    ]
    env, steps = play(goal, full)
    assert all(s[4]["action_valid"] for s in steps)
    progress = [s[4]["progress"] for s in steps]
    assert progress == pytest.approx([0, 0, 1 / 3, 1 / 3, 2 / 3, 2 / 3, 1])
    assert steps[-1][4]["success"] and getattr(env.unwrapped.world.items[0], prop)
    components = collections.Counter()
    for s in steps:
        components.update(s[4]["reward_components"])
    assert components["progress_reward"] == pytest.approx(1.0)
    assert components["success_reward"] == 1.0


def test_heat_then_cool_is_not_hot() -> None:
    goal = Goal(HEAT, "mug", "coffeemachine")
    _env, steps = play(
        goal,
        [
            "go to countertop 1",
            "take mug 1 from countertop 1",
            "go to microwave 1",
            "heat mug 1 with microwave 1",
            "go to fridge 1",
            "cool mug 1 with fridge 1",
            "go to coffeemachine 1",
            "move mug 1 to coffeemachine 1",
        ],
    )
    assert all(s[4]["action_valid"] for s in steps) and not steps[-1][4]["success"]


@pytest.mark.parametrize(
    "lamp, lamp_at, use", [("desklamp", "desk 1", "desklamp 1"), ("floorlamp", "floorlamp 1", "floorlamp 1")]
)
def test_success_look_at_obj_in_light(lamp: str, lamp_at: str, use: str) -> None:
    goal = Goal(LOOK, "book", lamp)
    assert goal.text == f"look at book under the {lamp}"
    # Lamp on but the book is not held: no success; then fetch the book and come back.
    commands = [f"go to {lamp_at}", f"use {use}", "go to shelf 1", "take book 1 from shelf 1", f"go to {lamp_at}"]
    _, steps = play(goal, commands)
    assert [s[4]["success"] for s in steps] == [False] * 5 + [True]
    assert steps[2][4]["progress"] == pytest.approx(1 / 3) and steps[4][4]["progress"] == pytest.approx(1 / 3)
    # Holding the book under the other kind of lamp is not a success.
    other = "floorlamp 1" if lamp == "desklamp" else "desklamp 1"
    other_at = "floorlamp 1" if lamp == "desklamp" else "desk 1"
    _env, steps = play(goal, ["go to shelf 1", "take book 1 from shelf 1", f"go to {other_at}", f"use {other}"])
    assert all(s[4]["action_valid"] for s in steps) and not steps[-1][4]["success"]


def test_success_pick_two() -> None:
    goal = Goal(TWO, "mug", "countertop", template=1)
    assert goal.text == "find two mug and put them in countertop"
    world = kitchen_world(
        rooms={"kitchen": ["countertop 1", "countertop 2", "cabinet 1", "sinkbasin 1"]},
        objects={"mug 1": "sinkbasin 1", "mug 2": "cabinet 1"},
        closed=["cabinet 1"],
    )
    split = [
        "go to sinkbasin 1",
        "take mug 1 from sinkbasin 1",
        "go to countertop 1",
        "move mug 1 to countertop 1",
        "go to cabinet 1",
        "open cabinet 1",
        "take mug 2 from cabinet 1",
        "go to countertop 2",
        "move mug 2 to countertop 2",
    ]
    _, steps = play(goal, split, world)
    assert all(s[4]["action_valid"] for s in steps) and not steps[-1][4]["success"]
    together = split[:-2] + ["go to countertop 1", "move mug 2 to countertop 1"]
    _env, steps = play(goal, together, world)
    assert [s[4]["progress"] for s in steps] == pytest.approx([0, 0, 0.25, 0.25, 0.5, 0.5, 0.5, 0.75, 0.75, 1.0])
    assert steps[-1][4]["success"]


# ----------------------------------------------------------------------------- splits and determinism
def test_split_partition_is_nonempty_for_every_type() -> None:
    for task_type in TASK_TYPES:
        seen, unseen = goal_combos(task_type, False), goal_combos(task_type, True)
        assert seen and unseen and not set(seen) & set(unseen)
    for room in ROOMS:
        for size in SIZES:
            plans = [fp for fp in FLOORPLANS.values() if fp.room == room and fp.size == size]
            assert sum(fp.unseen for fp in plans) == 1 and len(plans) == VARIANTS


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_unseen_combos_and_layouts_never_in_train(difficulty: str) -> None:
    observed: dict[str, tuple[set, set, set]] = {}
    for split in SPLITS:
        env = HouseholdEnv(difficulty=difficulty, split=split)
        combos, plans, layouts = set(), set(), set()
        for seed in range(700 if split == "train" else 300):
            _, info = env.reset(seed=seed)
            task = info["task"]
            combos.add((task["object"], task["target"]))
            plans.update(task["floorplans"])
            layouts.add(tuple(sorted(task["floorplans"])))
        observed[split] = (combos, plans, layouts)
    train, seen, unseen = observed["train"], observed["valid_seen"], observed["valid_unseen"]
    # Nothing of valid_unseen occurs in train: goal pairs, floor plans, whole layouts.
    assert not train[0] & unseen[0]
    assert not train[1] & unseen[1]
    assert not train[2] & unseen[2]
    # The declared partition holds for every task drawn.
    assert all(not is_unseen_combo(*c) for c in train[0] | seen[0])
    assert all(is_unseen_combo(*c) for c in unseen[0])
    assert all(not FLOORPLANS[p].unseen for p in train[1] | seen[1])
    assert all(FLOORPLANS[p].unseen for p in unseen[1])
    # valid_seen draws from train's distribution: its pairs are mostly ones train has drawn too.
    assert len(seen[0] & train[0]) / len(seen[0]) > 0.6
    assert len(unseen[0]) >= 10


def test_determinism_and_split_streams() -> None:
    a, b = HouseholdEnv(), HouseholdEnv()
    for seed in (0, 1, 99):
        obs_a, info_a = a.reset(seed=seed)
        obs_b, info_b = b.reset(seed=seed)
        assert obs_a == obs_b and info_a == info_b
        for command in info_a["admissible_actions"][:5]:
            assert a.step(command) == b.step(command)
    observations = {HouseholdEnv(split=split).reset(seed=7)[0] for split in SPLITS}
    assert len(observations) == 3
    ids = {HouseholdEnv().reset(seed=s)[1]["task"]["id"] for s in range(200)}
    assert len(ids) >= 195


def test_fixed_task_type_keeps_the_world_of_a_drawn_one() -> None:
    any_env = HouseholdEnv()
    matched = 0
    for seed in range(30):
        obs, info = any_env.reset(seed=seed)
        fixed = HouseholdEnv(task_type=info["task"]["task_type"])
        assert fixed.reset(seed=seed)[0] == obs
        matched += 1
    assert matched == 30


# ----------------------------------------------------------------------------- planner
@pytest.mark.parametrize("difficulty, episodes", [("easy", 300), ("medium", 600), ("hard", 300)])
@pytest.mark.parametrize("split", SPLITS)
def test_planner_solves_every_type(difficulty: str, split: str, episodes: int) -> None:
    wins: dict[str, list[bool]] = collections.defaultdict(list)
    for seed in range(episodes):
        ok, _, task_type = solve(f"envgym/Household-{difficulty.capitalize()}-v0", seed, split=split)
        wins[task_type].append(ok)
    assert set(wins) == set(TASK_TYPES)
    for task_type, results in wins.items():
        assert len(results) >= 20
        assert sum(results) / len(results) >= 0.99, (task_type, sum(results), len(results))


@pytest.mark.parametrize("variant", ["PickPlace", "LookInLight", "Clean", "Heat", "Cool", "PickTwo"])
def test_oracle_agent_through_run_episodes(variant: str) -> None:
    results = run_episodes(
        f"envgym/Household-{variant}-v0", OracleAgent(), episodes=40, seed=1000, env_kwargs={"split": "valid_unseen"}
    )
    assert sum(r.success for r in results) >= 40 * 0.99 - 1e-9
    assert all(r.invalid_actions == 0 for r in results)


def test_random_agent_rarely_succeeds() -> None:
    results = run_episodes("envgym/Household-v0", envgym.rollout.RandomAgent(seed=0), episodes=200, seed=0)
    rate = sum(r.success for r in results) / len(results)
    assert rate < 0.05


# ----------------------------------------------------------------------------- optimal plans
def _strip(world: World, goal: Goal) -> World:
    """The same house with only the goal objects and the lamps (distractors never shorten a plan)."""
    rooms: dict[str, list[str]] = {key: [] for key in world.rooms}
    for rec in world.recs:
        rooms[world.rooms[rec.room]].append(rec.name)
    keep = {o.name: world.recs[o.loc].name for o in world.items if o.type in (goal.obj, "desklamp")}
    closed = [r.name for r in world.recs if not r.is_open]
    return World.build(rooms, keep, closed=closed, start_room=world.rooms[world.room])


def _bfs_length(world: World, goal: Goal, limit: int) -> int:
    frontier = deque([(world, 0)])
    seen = {world.state_key()}
    while frontier:
        state, depth = frontier.popleft()
        if depth >= limit:
            continue
        commands = [("go", str(i)) for i in state.go_commands().values() if i != state.loc]
        commands += [c for c in state.local_commands().values() if is_mutating(c) and c[0] != "close"]
        for command in commands:
            nxt = state.clone()
            nxt.execute(command)
            if goal.success(nxt):
                return depth + 1
            key = nxt.state_key()
            if key not in seen:
                seen.add(key)
                frontier.append((nxt, depth + 1))
    return limit + 1


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_optimal_plan_is_shortest_and_works(task_type: str) -> None:
    env = HouseholdEnv(difficulty="easy", task_type=task_type)
    for seed in range(3):
        env.reset(seed=seed)
        world, goal = env.world, env.goal
        plan = env.optimal_plan()
        assert _bfs_length(_strip(world, goal), goal, len(plan)) == len(plan), (seed, plan)
    for seed in range(40):
        _, info = env.reset(seed=seed)
        plan = env.optimal_plan()
        for i, command in enumerate(plan):
            _, _, terminated, _, info = env.step(command)
            assert info["action_valid"], (seed, command)
            assert terminated == (i == len(plan) - 1), (seed, plan)
        assert info["success"]
        # The planner never beats the privileged optimum.
        ok, turns, _ = solve("envgym/Household-Easy-v0", seed, task_type=task_type)
        assert ok and turns >= len(plan)


@pytest.mark.parametrize("task_type", [PICK, CLEAN, LOOK, TWO])
def test_start_steps_start_part_way_along_the_plan(task_type: str) -> None:
    """``start_steps`` plays the first steps of the shortest plan at reset: the same world as
    without them, the task id and info say how far, the progress is the state's, the rest of the
    plan finishes the task, and the goal's last step is never played."""
    plain = HouseholdEnv(difficulty="easy", task_type=task_type)
    env = HouseholdEnv(difficulty="easy", task_type=task_type, start_steps=(0, 4))
    started = collections.Counter()
    for seed in range(30):
        _, plain_info = plain.reset(seed=seed)
        full = plain.optimal_plan()
        obs, info = env.reset(seed=seed)
        played = info["task"]["start_steps"]
        assert played == full[: len(played)] and len(played) < len(full), (seed, played, full)
        base_id = plain_info["task"]["id"]
        assert info["task"]["id"] == (f"{base_id}/start{len(played)}" if played else base_id)
        assert info["progress"] == env.goal.progress(env.world) < 1.0
        assert env.optimal_plan() == full[len(played) :]
        if played:
            assert not obs.startswith("-= Welcome") and "Your task is to:" in obs and "carrying" in obs
        started[len(played)] += 1
        for i, command in enumerate(env.optimal_plan()):
            _, _, terminated, _, info = env.step(command)
            assert info["action_valid"] and terminated == (i == len(full) - len(played) - 1), (seed, command)
        assert info["success"]
    assert len(started) >= 3  # starts spread along the plans
    fixed = HouseholdEnv(difficulty="easy", task_type=task_type, start_steps=2)
    _, info = fixed.reset(seed=1)
    assert len(info["task"]["start_steps"]) == 2
    far = HouseholdEnv(difficulty="easy", task_type=task_type, start_steps=100)
    _, info = far.reset(seed=1)
    assert len(far.optimal_plan()) == 1 and not info["success"]  # all but the last step
    for bad in (-1, (3, 1), (0, 101), "2", True, (1, 2, 3)):
        with pytest.raises(InvalidKwargsError, match="start_steps"):
            HouseholdEnv(start_steps=bad)


# ----------------------------------------------------------------------------- reward layer and perf script
def test_progress_shaping_and_sparse_reward() -> None:
    from envgym.rewards import ProgressShaping

    env = ProgressShaping(envgym.make("envgym/Household-Easy-v0", reward={"progress_reward": 0.0}), gamma=1.0)
    obs, info = env.reset(seed=4)
    solver = Solver("envgym/Household-Easy-v0", 4)
    shaped, rewards = 0.0, []
    while True:
        obs, reward, terminated, truncated, info = env.step(solver.act(obs, info))
        shaped += info["reward_components"]["shaping_reward"]
        rewards.append(reward)
        if terminated or truncated:
            break
    assert info["success"]
    # gamma = 1 and Phi(terminal) = 0: the shaping telescopes to -Phi(s0) = 0.
    assert shaped == pytest.approx(0.0)
    # progress_reward weighted 0: the env's own scalar is ALFWorld's sparse 1 on success.
    assert sum(rewards) == pytest.approx(1.0 + shaped)


def test_perf_script_runs_and_reports(tmp_path) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "benchmarks" / "perf" / "household.py"
    args = ["--episodes", "12", "--resets", "5", "--steps", "200", "--difficulty", "easy", "--json"]
    proc = subprocess.run(
        [sys.executable, str(script), *args], check=False, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [row["id"] for row in report["speed"]] == ["envgym/Household-Easy-v0"]
    assert report["speed"][0]["steps_per_s"] > 0 and report["speed"][0]["reset_cpu_ms"] > 0
    for split in SPLITS:
        rows = [r for r in report["success"] if r["split"] == split]
        assert sum(r["episodes"] for r in rows) == 12
        assert all(0.0 <= r["random_success"] <= 1.0 and r["planner_success"] == 1.0 for r in rows)
    for row in report["optimal_length"]:
        assert 3 <= row["min"] <= row["median"] <= row["max"] <= 12
        assert sum(row["histogram"].values()) >= 1
    bad = subprocess.run(
        [sys.executable, str(script), "--difficulty", "extreme"], check=False, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--difficulty" in bad.stderr


def test_custom_world_validation() -> None:
    env = HouseholdEnv()
    with pytest.raises(InvalidKwargsError, match="already holds"):
        env.reset(options={"world": kitchen_world(), "goal": Goal(PICK, "mug", "countertop")})
    with pytest.raises(InvalidKwargsError, match="World and Goal"):
        env.reset(options={"world": "kitchen", "goal": None})
    with pytest.raises(ValueError, match="not a receptacle"):
        World.build({"kitchen": ["countertop 1"]}, {"mug 1": "fridge 1"})


# ----------------------------------------------------------------------------- regressions (bug hunt)
def test_start_text_states_the_command_format() -> None:
    env = envgym.make("envgym/Household-v0")
    obs, info = env.reset(seed=1)
    intro = obs.split("Your task is to:")[0]
    for form in ("go to RECEPTACLE", "take OBJECT from RECEPTACLE", "move OBJECT to RECEPTACLE", "'help'"):
        assert form in intro
    obs, _, _, _, step_info = env.step("help")
    assert step_info["action_valid"] and "help" in info["admissible_actions"]
