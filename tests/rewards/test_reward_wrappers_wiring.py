"""Reward wrappers on the real paths: ``make(id, reward_wrappers=...)``, a suite entry's
``reward_wrappers`` (bench run, its hash, the leaderboard's replay), a training config's, and a
worker-process pool.

Real environments throughout (FrozenLake and Sokoban), real bench runs with the random agent,
real worker processes. The trainer's rollout plays with the random agent in place of the policy
(its ``generation`` stand-in hands one out): no model is needed to check which environments the
trainer makes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import envgym
from envgym.bench.run import run_suite
from envgym.bench.suite import load_suite
from envgym.errors import ConfigError
from envgym.leaderboard.bundle import make_bundle
from envgym.leaderboard.verify import VerificationError, verify_bundle
from envgym.rewards import RubricError, StepCost
from envgym.rollout import load_trajectories, make_agent, make_pool
from envgym.rollout.pools import ResetRequest, StepRequest, StepResult
from envgym.trainer.config import TrainConfig
from envgym.trainer.rollout import episode_tasks, play_evaluation, play_rollout
from envgym.trainer.state import RunState

#: Sokoban (a TextEnv) already emits step_cost_reward: the wrapper adds a differently named cost.
TIME_PENALTY = [{"step_cost": {"cost": -0.05, "name": "time_penalty_reward"}}]


def ok(result: Any) -> StepResult:
    assert isinstance(result, StepResult), result
    return result


# -- make ------------------------------------------------------------------------------------------------
def test_make_stacks_the_wrappers_and_adds_their_component() -> None:
    plain = envgym.make("envgym/Sokoban-v0")
    wrapped = envgym.make("envgym/Sokoban-v0", reward_wrappers=TIME_PENALTY)
    try:
        assert isinstance(wrapped, StepCost)
        _, info = wrapped.reset(seed=3)
        assert info["reward_components"]["time_penalty_reward"] == 0.0
        plain.reset(seed=3)
        _, base, *_ = plain.step("up")
        _, reward, _, _, info = wrapped.step("up")
        assert info["reward_components"]["time_penalty_reward"] == -0.05
        assert reward == pytest.approx(float(base) - 0.05)
    finally:
        plain.close()
        wrapped.close()
    # None and [] leave the environment as registered.
    for nothing in (None, []):
        env = envgym.make("envgym/Sokoban-v0", reward_wrappers=nothing)
        assert not isinstance(env, StepCost)
        env.close()


def test_make_refuses_bad_specs_with_the_spec_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import gymnasium

    made: list[str] = []
    real_make = gymnasium.make
    monkeypatch.setattr(gymnasium, "make", lambda env_id, **kw: made.append(env_id) or real_make(env_id, **kw))
    with pytest.raises(RubricError, match=r"reward_wrappers\[0\]: unknown reward wrapper 'stepcost'.*'step_cost'"):
        envgym.make("envgym/Sokoban-v0", reward_wrappers=[{"stepcost": {}}])
    with pytest.raises(RubricError, match=r"reward_wrappers\[1\]\.step_cost: .*'cots'.*Options of 'step_cost': cost"):
        envgym.make("envgym/Sokoban-v0", reward_wrappers=["outcome", {"step_cost": {"cots": -1}}])
    assert made == []  # malformed specs fail before the environment is made
    # What only the environment can tell fails when the stack is built, naming the spec.
    with pytest.raises(ConfigError, match=r"reward_wrappers\[0\]\.step_cost: .*already emits 'step_cost_reward'"):
        envgym.make("envgym/Sokoban-v0", reward_wrappers=[{"step_cost": {"cost": -0.05}}])


# -- suites -----------------------------------------------------------------------------------------------
SUITE = """\
name: rwtest
version: 1
description: reward wrappers in a suite
defaults: {{episodes: 2, seed: 5, split: train, max_turns: 4, trials: 1}}
entries:
  - name: lake
    env: envgym/FrozenLake-v0
{wrappers}  - name: boxes
    env: envgym/Sokoban-v0
    kwargs: {{size: 6, boxes: 1}}
"""
LAKE_WRAPPERS = "    reward_wrappers:\n      - step_cost: {cost: -0.05, name: time_penalty_reward}\n"


def write_suite(folder: Path, wrappers: str = LAKE_WRAPPERS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rwtest-v1.yaml"
    path.write_text(SUITE.format(wrappers=wrappers), encoding="utf-8")
    return path


def test_suite_entry_carries_its_wrappers_into_env_kwargs_and_the_hash(tmp_path: Path) -> None:
    with_them = load_suite(write_suite(tmp_path / "a"))
    without = load_suite(write_suite(tmp_path / "b", wrappers=""))
    lake, boxes = with_them.entries
    assert lake.reward_wrappers == ({"step_cost": {"cost": -0.05, "name": "time_penalty_reward"}},)
    assert lake.env_kwargs == {"split": "train", "reward_wrappers": list(lake.reward_wrappers)}
    assert lake.to_dict()["reward_wrappers"] == list(lake.reward_wrappers)
    # An entry without wrappers resolves exactly as before (no key): published suites keep their hash.
    assert "reward_wrappers" not in boxes.to_dict() and "reward_wrappers" not in boxes.env_kwargs
    assert without.entries[1].to_dict() == boxes.to_dict()
    assert with_them.sha256 != without.sha256
    assert load_suite(write_suite(tmp_path / "c", wrappers="    reward_wrappers: []\n")).sha256 == without.sha256


def test_bench_run_records_the_wrapper_component_and_replays_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suites = tmp_path / "suites"
    monkeypatch.setenv("ENVGYM_BENCHMARKS", str(suites))  # the leaderboard replays installed suites only
    run = run_suite(write_suite(suites), "random", out=tmp_path / "run", num_envs=4)
    lake = run.trajectories("lake")
    assert len(lake) == 2 and all(t.env_kwargs["reward_wrappers"] == TIME_PENALTY for t in lake)
    for trajectory in lake:
        assert trajectory.turns
        for turn in trajectory.turns:
            assert turn.reward_components["time_penalty_reward"] == -0.05
        assert math.isclose(
            sum(t.reward_components["time_penalty_reward"] for t in trajectory.turns), -0.05 * len(trajectory.turns)
        )
    assert all("time_penalty_reward" not in t.reward_components for tr in run.trajectories("boxes") for t in tr.turns)
    assert run.entry_config("lake")["env_kwargs"]["reward_wrappers"] == TIME_PENALTY

    # The leaderboard's replay makes the entry's environment with the same wrappers.
    bundle = make_bundle(run.path, name="random")
    assert bundle.manifest["entries"][0]["env_kwargs"]["reward_wrappers"] == TIME_PENALTY
    verified = verify_bundle(bundle)
    lake_outcomes = [o for o in verified.outcomes if o.entry == "lake"]
    assert len(lake_outcomes) == 2
    for outcome, trajectory in zip(lake_outcomes, lake, strict=True):
        assert outcome.reward_components["time_penalty_reward"] == pytest.approx(-0.05 * len(trajectory.turns))
    turn = bundle.episodes[0]["turns"][0]
    turn["reward_components"]["time_penalty_reward"] = 0.0
    bundle.rehash()
    with pytest.raises(VerificationError, match="time_penalty_reward"):
        verify_bundle(bundle)


@pytest.mark.parametrize(
    ("wrappers", "message"),
    [
        (
            "    reward_wrappers: [{stepcost: {cost: -0.1}}]\n",
            r"entries\[0\] \('lake'\) field reward_wrappers\[0\]: unknown reward wrapper 'stepcost'.*'step_cost'",
        ),
        (
            "    reward_wrappers: [{format: {tag: [action]}}]\n",
            r"entries\[0\] \('lake'\) field reward_wrappers\[0\]\.format: .*'tag'.*Options of 'format': tags",
        ),
        ("    reward_wrappers: {step_cost: {}}\n", r"entries\[0\] \('lake'\) field reward_wrappers: expected a list"),
        (
            "    kwargs: {reward_wrappers: [outcome]}\n",
            r"entries\[0\] \('lake'\) field 'kwargs': give reward wrappers as the entry's 'reward_wrappers' field",
        ),
    ],
)
def test_bad_wrapper_spec_in_a_suite_names_the_entry(tmp_path: Path, wrappers: str, message: str) -> None:
    path = write_suite(tmp_path, wrappers=wrappers)
    for check_envs in (False, True):  # caught without making an environment
        with pytest.raises(ConfigError, match=message):
            load_suite(path, check_envs=check_envs)


def test_wrapper_the_environment_cannot_carry_fails_at_load(tmp_path: Path) -> None:
    # Well-formed, so only building it on the environment (the default check) catches it.
    path = write_suite(tmp_path, wrappers="    reward_wrappers: [{step_cost: {cost: -0.1}}]\n")
    assert load_suite(path, check_envs=False).entries[0].reward_wrappers == ({"step_cost": {"cost": -0.1}},)
    with pytest.raises(
        ConfigError, match=r"entries\[0\] \('lake'\) field reward_wrappers\[0\]\.step_cost: .*already emits"
    ):
        load_suite(path)
    path = write_suite(tmp_path, wrappers="    reward_wrappers: [{rubric: {sum: [success_reward, no_such_reward]}}]\n")
    with pytest.raises(ConfigError, match=r"entries\[0\] \('lake'\) field .*no_such_reward"):
        load_suite(path)


# -- training ------------------------------------------------------------------------------------------------
def test_train_config_validates_and_keeps_the_wrappers() -> None:
    config = TrainConfig(env_id="envgym/FrozenLake-v0", model="tiny", reward_wrappers=TIME_PENALTY)
    assert config.reward_wrappers == TIME_PENALTY
    assert TrainConfig.from_dict(config.to_dict()) == config
    assert config.resolved_env_kwargs == {"reward_wrappers": TIME_PENALTY}
    assert config.resolved_eval_env_kwargs == {"split": "test", "reward_wrappers": TIME_PENALTY}
    assert config.level_env("hard")[1] == {"difficulty": "hard", "reward_wrappers": TIME_PENALTY}
    assert TrainConfig(env_id="envgym/FrozenLake-v0").resolved_env_kwargs == {}
    with pytest.raises(ConfigError, match=r"reward_wrappers\[0\]: unknown reward wrapper 'stepcost'"):
        TrainConfig(env_id="envgym/FrozenLake-v0", reward_wrappers=[{"stepcost": {}}])
    with pytest.raises(ConfigError, match="reward_wrappers: expected a list"):
        TrainConfig(env_id="envgym/FrozenLake-v0", reward_wrappers="outcome")
    with pytest.raises(ConfigError, match="both as a setting and in env_kwargs"):
        TrainConfig(env_id="envgym/FrozenLake-v0", env_kwargs={"reward_wrappers": []}, reward_wrappers=["outcome"])
    with pytest.raises(ConfigError, match="plain data"):
        TrainConfig(env_id="envgym/FrozenLake-v0", reward_wrappers=[{"rubric": lambda components, context: 0.0}])


def test_train_config_file_accepts_reward_wrappers(tmp_path: Path) -> None:
    file = tmp_path / "train.yaml"
    file.write_text(
        "env_id: envgym/FrozenLake-v0\nmodel: tiny\nreward_wrappers:\n"
        "  - step_cost: {cost: -0.05, name: time_penalty_reward}\n",
        encoding="utf-8",
    )
    assert TrainConfig.from_file(file).reward_wrappers == TIME_PENALTY


def test_trainer_tasks_carry_the_wrappers() -> None:
    config = TrainConfig(env_id="envgym/FrozenLake-v0", env_kwargs={"max_turns": 5}, reward_wrappers=TIME_PENALTY)
    env = RunState.fresh(config).env()
    tasks = episode_tasks([4, 2], env, 3, 2)
    assert [(t.seed, t.group, t.member) for t in tasks] == [(2, 0, 0), (2, 0, 1), (4, 1, 0), (4, 1, 1)]
    assert all(t.env_kwargs == {"max_turns": 5, "reward_wrappers": TIME_PENALTY} for t in tasks)
    # A difficulty level that names its own wrappers keeps them.
    assert config.level_env({"reward_wrappers": []})[1] == {"max_turns": 5, "reward_wrappers": []}
    assert RunState.fresh(TrainConfig(env_id="envgym/FrozenLake-v0")).env() == ("envgym/FrozenLake-v0", {})


class RandomPolicy:
    """Stands in for the trainer's generation engine: hands out the random agent as the policy."""

    def agent(self, **_: Any) -> Any:
        return make_agent("random", seed=0)


def test_trainer_rollout_and_evaluation_play_wrapped_environments(tmp_path: Path) -> None:
    config = TrainConfig(
        env_id="envgym/FrozenLake-v0",
        model="tiny",
        group_size=2,
        groups_per_update=2,
        eval_episodes=2,
        max_new_tokens=16,
        reward_wrappers=TIME_PENALTY,
    )
    trajectories = play_rollout(
        config,
        RandomPolicy(),
        update=1,
        seeds=[0, 1],
        env=(config.env_id, config.resolved_env_kwargs),
        max_turns=3,
        folder=tmp_path / "rollout",
    )
    assert len(trajectories) == 4
    for trajectory in trajectories:
        assert trajectory.turns
        assert all(turn.reward_components["time_penalty_reward"] == -0.05 for turn in trajectory.turns)
    metrics = play_evaluation(config, RandomPolicy(), update=1, max_turns=3, out=tmp_path)
    evaluated = load_trajectories(tmp_path / "eval" / "update-000001")
    assert len(evaluated) == 2 and all(t.env_kwargs["reward_wrappers"] == TIME_PENALTY for t in evaluated)
    assert all(t.env_kwargs["split"] == "test" for t in evaluated)
    assert all(turn.reward_components["time_penalty_reward"] == -0.05 for t in evaluated for turn in t.turns)
    assert metrics["eval/return"] == pytest.approx(sum(t.total_reward for t in evaluated) / 2)


# -- worker pools ------------------------------------------------------------------------------------------------
def test_process_pool_makes_wrapped_environments_in_its_workers() -> None:
    kinds = [("envgym/FrozenLake-v0", {"reward_wrappers": TIME_PENALTY}), ("envgym/FrozenLake-v0", {})]
    with make_pool(kinds, num_slots=2, backend="process", workers=2) as pool:
        first = [ok(r) for r in pool.reset([ResetRequest(0, 7, env=0), ResetRequest(1, 7, env=1)])]
        assert first[0].info["reward_components"]["time_penalty_reward"] == 0.0
        assert "time_penalty_reward" not in first[1].info["reward_components"]
        wrapped, plain = (ok(r) for r in pool.step([StepRequest(0, "up"), StepRequest(1, "up")]))
        assert wrapped.info["reward_components"]["time_penalty_reward"] == -0.05
        assert wrapped.reward == pytest.approx(plain.reward - 0.05)
