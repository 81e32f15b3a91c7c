"""The TextEnv base class, text spaces, action extraction and the error hierarchy."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest
from toy_envs import GuessEnv

import envgym
from envgym.core import INFO_KEYS, TerminationReason, extract_action
from envgym.errors import InvalidKwargsError, MissingDependencyError, ResetNeededError
from envgym.spaces import Text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("up", "up"),
        ("  Push   UP \n", "Push UP"),
        ("I think <action>left</action>", "left"),
        ("<action>a</action> then <ACTION> b </Action>", "b"),
        ("<action>go to fridge 1", "go to fridge 1"),
        ("'right'", "right"),
        ("`down`", "down"),
        ("", ""),
        ("<action></action>", ""),
        ("no tags < here", "no tags < here"),
    ],
)
def test_extract_action(raw: str, expected: str) -> None:
    assert extract_action(raw) == expected


def test_extract_action_custom_tags() -> None:
    assert extract_action("<move>x</move><action>y</action>", ("move",)) == "x"
    assert extract_action("<answer>42</answer>", ("action", "answer")) == "42"


def test_text_space_contains_real_observations() -> None:
    space = Text()
    board = "#####\n#P_O#\n#####\n🤖 ñ 日本"
    assert space.contains(board)
    assert space.contains("")
    assert space.contains("x" * 200_000)
    assert not space.contains(b"bytes")
    assert not space.contains(3)
    assert isinstance(space, gym.spaces.Text)
    assert not Text(10).contains("x" * 11)
    assert not Text(10, min_length=2).contains("x")


def test_text_space_sample_is_bounded_and_seeded() -> None:
    a, b = Text(seed=3), Text(seed=3)
    samples = [a.sample() for _ in range(50)]
    assert samples == [b.sample() for _ in range(50)]
    assert all(len(s) <= a.sample_max_length and a.contains(s) for s in samples)
    assert len(set(samples)) > 40


def test_reset_and_info_contract() -> None:
    env = GuessEnv()
    obs, info = env.reset(seed=5)
    assert obs.startswith("Guess the number between 1 and 10.")
    assert set(INFO_KEYS) <= set(info)
    assert info["task"]["seed"] == 5 and info["task"]["split"] == "train"
    assert info["admissible_actions"] == [str(i) for i in range(1, 11)]
    assert info["reward_components"] == {"success_reward": 0.0, "invalid_action_reward": 0.0, "step_cost_reward": 0.0}
    assert info["termination_reason"] is None and info["turn"] == 0 and info["success"] is False


def test_same_seed_same_task_different_seeds_differ() -> None:
    env = GuessEnv(high=1000)
    secrets = []
    for seed in range(5):
        env.reset(seed=seed)
        first = env.secret
        env.reset(seed=seed)
        assert env.secret == first
        secrets.append(first)
    assert len(set(secrets)) == 5


def test_splits_give_different_tasks() -> None:
    train, test = GuessEnv(high=5000), GuessEnv(high=5000, split="test")
    train.reset(seed=1)
    test.reset(seed=1)
    assert train.secret != test.secret


def test_unseeded_reset_continues_the_seeded_stream() -> None:
    a, b = GuessEnv(high=5000), GuessEnv(high=5000)
    a.reset(seed=9)
    b.reset(seed=9)
    assert [a.reset()[1]["task"]["id"] for _ in range(3)] == [b.reset()[1]["task"]["id"] for _ in range(3)]


def test_success_step() -> None:
    env = GuessEnv()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(f"<action>{env.secret}</action>")
    assert (obs, reward, terminated, truncated) == ("Correct!", 1.0, True, False)
    assert info["success"] is True and info["termination_reason"] == "success"
    assert info["reward_components"]["success_reward"] == 1.0
    assert info["admissible_actions"] == []
    with pytest.raises(ResetNeededError, match="after the episode ended"):
        env.step("1")


@pytest.mark.parametrize("bad", ["", "eleven", "11", "0", None, 7, b"\xff", ["3"], "x" * 50_000])
def test_invalid_actions_are_steps_not_exceptions(bad: object) -> None:
    env = GuessEnv(invalid_penalty=-0.25)
    env.reset(seed=0)
    before = env._observe()
    obs, reward, terminated, truncated, info = env.step(bad)
    assert info["action_valid"] is False
    assert reward == -0.25 and info["reward_components"]["invalid_action_reward"] == -0.25
    assert obs.startswith("Invalid action") and "expected" in obs
    assert len(obs) < 500  # a huge action is not echoed back whole
    assert env._observe() == before
    assert not terminated and not truncated and info["invalid_actions"] == 1


def test_step_before_reset_is_a_clear_error() -> None:
    with pytest.raises(ResetNeededError, match="before reset"):
        GuessEnv().step("1")


def test_max_turns_truncates_with_reason() -> None:
    env = GuessEnv(max_turns=3, high=1000)
    env.reset(seed=0)
    wrong = "1" if env.secret != 1 else "2"
    results = [env.step(wrong) for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert results[-1][4]["termination_reason"] == TerminationReason.MAX_TURNS.value
    assert results[-1][2] is False


def test_invalid_limit_terminates() -> None:
    env = GuessEnv(invalid_limit=2)
    env.reset(seed=0)
    env.step("nope")
    _, _, terminated, truncated, info = env.step("nope")
    assert terminated and not truncated
    assert info["termination_reason"] == "invalid_limit" and info["success"] is False


def test_step_cost_component() -> None:
    env = GuessEnv(step_cost=-0.01, high=1000)
    env.reset(seed=0)
    _, reward, *_, info = env.step("1" if env.secret != 1 else "2")
    assert info["reward_components"]["step_cost_reward"] == -0.01
    assert reward == pytest.approx(-0.01)


def test_reward_weights_and_callable_rubric() -> None:
    env = GuessEnv(reward={"invalid_action_reward": 2.0})
    env.reset(seed=0)
    assert env.step("bad")[1] == pytest.approx(-0.2)
    seen = []

    def rubric(components, context):
        seen.append(context)
        return 10.0 * components["success_reward"]

    env = GuessEnv(reward=rubric)
    env.reset(seed=0)
    assert env.step(str(env.secret))[1] == 10.0
    assert seen[0].success is True and seen[0].action_text == str(env.secret) and seen[0].turn == 1


def test_reward_rubric_as_yaml_text() -> None:
    yaml_text = "gate: {context: action_valid}\nthen: {sum: [success_reward]}\nelse: -0.5\n"
    env = GuessEnv(reward=yaml_text)
    env.reset(seed=0)
    assert env.step("bad")[1] == -0.5
    assert env.step(str(env.secret))[1] == 1.0
    env = gym.make("envgym/Sokoban-v0", reward="sum: [success_reward, box_on_target_reward]")
    env.reset(seed=0)
    assert env.step("nonsense")[1] == 0.0  # the invalid-action penalty is not in the rubric
    with pytest.raises(InvalidKwargsError, match="Did you mean 'success_reward'"):
        GuessEnv(reward="sum: [sucess_reward]")
    with pytest.raises(InvalidKwargsError, match="malformed YAML"):
        GuessEnv(reward="sum: [a, b")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hihg": 3}, "Did you mean 'high'"),
        ({"max_turns": 0}, "max_turns must be a positive integer"),
        ({"invalid_limit": -1}, "invalid_limit"),
        ({"step_cost": math.inf}, "finite"),
        ({"split": "tset"}, "Did you mean 'test'"),
        ({"render_mode": "rgb_array"}, "render_mode"),
        ({"reward": {"sucess_reward": 1.0}}, "Did you mean 'success_reward'"),
        ({"reward": {"success_reward": math.nan}}, "finite"),
        ({"reward": 3}, "reward must be"),
    ],
)
def test_bad_kwargs_raise_with_suggestions(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidKwargsError, match=message):
        GuessEnv(**kwargs)


def test_infos_are_fresh_objects() -> None:
    env = GuessEnv()
    _, info1 = env.reset(seed=0)
    info1["task"]["id"] = "mutated"
    info1["reward_components"]["success_reward"] = 9.0
    *_, info2 = env.step("bad")
    assert info2["task"]["id"] != "mutated"
    assert info2["reward_components"]["success_reward"] == 0.0


def test_render_modes(capsys: pytest.CaptureFixture[str]) -> None:
    env = GuessEnv(render_mode="ansi")
    env.reset(seed=0)
    assert env.render() == "Last guess: None"
    human = GuessEnv(render_mode="human")
    human.reset(seed=0)
    assert human.render() is None
    assert "Last guess" in capsys.readouterr().out


def test_env_card_is_the_docstring() -> None:
    assert GuessEnv.env_card().startswith("Guess the secret number.")


def test_termination_reason_infrastructure_split() -> None:
    infra = {r for r in TerminationReason if r.is_infrastructure}
    assert infra == {TerminationReason.ENV_ERROR, TerminationReason.AGENT_ERROR, TerminationReason.TIMEOUT}
    assert TerminationReason("max_turns") is TerminationReason.MAX_TURNS


def test_missing_dependency_error_names_install_command() -> None:
    err = MissingDependencyError("playwright", "gui", "The GUI environments")
    assert "pip install 'envgym[gui]'" in str(err) and isinstance(err, ImportError)


def test_public_api_is_lazy_and_complete() -> None:
    for name in envgym.__all__:
        assert getattr(envgym, name) is not None
    with pytest.raises(AttributeError):
        envgym.does_not_exist  # noqa: B018


def test_environments_pickle_mid_episode() -> None:
    import pickle

    env = GuessEnv(reward={"invalid_action_reward": 3.0}, high=1000)
    env.reset(seed=4)
    env.step("bad")
    clone = pickle.loads(pickle.dumps(env))
    assert clone.secret == env.secret and clone.turn == 1
    assert clone.step("bad")[1] == env.step("bad")[1] == pytest.approx(-0.3)


def test_kwargs_are_checked_on_subclasses_without_their_own_init() -> None:
    class Plain(GuessEnv):
        pass

    with pytest.raises(InvalidKwargsError, match="Did you mean 'high'"):
        Plain(hihg=2)
    env = Plain(high=3, max_turns=4)
    assert env.high == 3 and env.max_turns == 4 and env._init_kwargs == {"high": 3, "max_turns": 4}
