"""Task lists: a run plays an explicit list of (env, kwargs, seed, group, member) episodes, and
episodes of different environments share one lock-step batch."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest

from envgym.errors import ConfigError
from envgym.rollout import Agent, AgentInput, AgentOutput, EpisodeTask, RandomAgent, RunConfig, Runner
from envgym.rollout.tasks import default_tasks, tasks_for

LAKE = "envgym/FrozenLake-v0"
BOXES = "envgym/Sokoban-v0"


class Recorder(RandomAgent):
    """A random agent that remembers the env ids of every batch it was asked."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.batches: list[list[str]] = []

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        self.batches.append([item.env_id for item in batch])
        return super().act(batch)


def mixed() -> list[EpisodeTask]:
    return [
        EpisodeTask(LAKE, seed=11, env_kwargs={"max_turns": 4}, group=0, member=0),
        EpisodeTask(BOXES, seed=5, env_kwargs={"size": 6}, group=1, member=0, max_turns=3),
        EpisodeTask(LAKE, seed=11, env_kwargs={"max_turns": 4}, group=0, member=1),
        EpisodeTask(BOXES, seed=9, env_kwargs={"size": 6}, group=2, member=0, max_turns=3),
    ]


def test_the_default_task_list_is_seed_plus_group() -> None:
    config = RunConfig(env_id=LAKE, episodes=6, seed=4, group_size=3, env_kwargs={"max_turns": 2})
    tasks = config.task_list()
    assert [(t.seed, t.group, t.member) for t in tasks] == [
        (4, 0, 0),
        (4, 0, 1),
        (4, 0, 2),
        (5, 1, 0),
        (5, 1, 1),
        (5, 1, 2),
    ]
    assert all(t.env_id == LAKE and dict(t.env_kwargs) == {"max_turns": 2} for t in tasks)
    assert tasks == default_tasks(LAKE, episodes=6, seed=4, group_size=3, env_kwargs={"max_turns": 2})
    assert config.tasks is None and config.to_dict()["tasks"] is None


def test_a_task_list_of_two_envs_plays_in_one_batch_and_matches_single_env_runs() -> None:
    agent = Recorder()
    result = Runner(RunConfig(agent="random", tasks=mixed(), num_envs=4), agent).run()
    trajs = result.trajectories
    assert [(t.env_id, t.seed, t.group, t.member, t.index) for t in trajs] == [
        (LAKE, 11, 0, 0, 0),
        (BOXES, 5, 1, 0, 1),
        (LAKE, 11, 0, 1, 2),
        (BOXES, 9, 2, 0, 3),
    ]
    assert trajs[1].env_kwargs == {"size": 6} and trajs[0].env_kwargs == {"max_turns": 4}
    # The first turn asked the agent about both environments at once.
    assert set(agent.batches[0]) == {LAKE, BOXES} and len(agent.batches[0]) == 4
    # A task's own turn limit caps its episode; the other env's limit is its own kwarg.
    assert all(t.num_turns <= 3 for t in trajs if t.env_id == BOXES)
    assert all(t.num_turns <= 4 for t in trajs if t.env_id == LAKE)
    assert result.summary["env_ids"] == [LAKE, BOXES] and result.summary["episodes"] == 4
    # Each episode equals its task played alone (same seed, member and agent seed).
    for task, traj in zip(mixed(), trajs, strict=True):
        alone = Runner(RunConfig(agent="random", tasks=[task]), RandomAgent(seed=0)).run().trajectories[0]
        assert (alone.actions, alone.total_reward) == (traj.actions, traj.total_reward)
    # And the default list plays what the same tasks given as a list play.
    plain = RunConfig(env_id=LAKE, agent="random", episodes=4, seed=2, group_size=2, env_kwargs={"max_turns": 4})
    listed = RunConfig(agent="random", seed=2, tasks=plain.task_list())  # seed: the agent's
    assert [t.comparable() for t in Runner(plain).run().trajectories] == [
        t.comparable() for t in Runner(listed).run().trajectories
    ]


@pytest.mark.parametrize("backend", ["inproc", "process"])
def test_task_lists_resume_and_route_by_tag(tmp_path: Path, backend: str) -> None:
    tasks = [EpisodeTask(LAKE, seed=s, env_kwargs={"max_turns": 3}, index=10 + s, tag="lake") for s in range(3)] + [
        EpisodeTask(BOXES, seed=s, env_kwargs={"size": 6}, max_turns=2, index=s, tag="boxes") for s in range(2)
    ]
    seen: dict[str, list[int]] = {}
    config = RunConfig(agent="random", tasks=tasks, num_envs=2, backend=backend, workers=2)
    first = Runner(
        config, out=tmp_path / "run", on_task_end=lambda task, t: seen.setdefault(task.tag, []).append(t.index)
    ).run()
    assert sorted(seen["lake"]) == [10, 11, 12] and sorted(seen["boxes"]) == [0, 1]
    assert [t.episode_id for t in first.trajectories] == [
        "lake/000010",
        "lake/000011",
        "lake/000012",
        "boxes/000000",
        "boxes/000001",
    ]
    # Resuming the same list replays nothing; a different list is refused.
    again: list[int] = []
    resumed = Runner(config, out=tmp_path / "run", on_episode_end=lambda t: again.append(t.index)).run()
    assert again == [] and [t.comparable() for t in resumed.trajectories] == [
        t.comparable() for t in first.trajectories
    ]
    other = RunConfig(agent="random", tasks=tasks[:-1], num_envs=2)
    with pytest.raises(ConfigError, match="different configuration"):
        Runner(other, out=tmp_path / "run").run()


def test_bad_task_lists_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="episodes \\(3\\) differs from the number of tasks \\(4\\)"):
        RunConfig(agent="random", tasks=mixed(), episodes=3)
    twice = RunConfig(agent="random", tasks=[EpisodeTask(LAKE, index=1), EpisodeTask(LAKE, seed=2, index=1)])
    with pytest.raises(ConfigError, match="one run folder must have distinct episode numbers"):
        Runner(twice, out=tmp_path / "twice")
    with pytest.raises(ConfigError, match=r"distinct episode ids \(tag and index\), got \['000001'\]"):
        Runner(twice)
    tagged = RunConfig(agent="random", tasks=[EpisodeTask(LAKE, index=1, tag="a"), EpisodeTask(LAKE, index=1, tag="b")])
    assert [t.episode_id for t in Runner(tagged).run().trajectories] == ["a/000001", "b/000001"]
    with pytest.raises(ConfigError, match="tasks must name at least one episode"):
        RunConfig(agent="random", tasks=[])
    with pytest.raises(ConfigError, match=r"tasks\[0\]: unknown field 'sed'"):
        RunConfig(agent="random", tasks=[{"env_id": LAKE, "sed": 3}])
    with pytest.raises(ConfigError, match="EpisodeTask.member must be an integer >= 0"):
        EpisodeTask(LAKE, member=-1)
    with pytest.raises(ConfigError, match="env_id must be a registered environment id"):
        RunConfig(agent="random")
    # Mappings (a config file) become tasks, and round-trip through to_dict/from_dict.
    config = RunConfig(agent="random", tasks=[t.to_dict() for t in mixed()])
    assert config.tasks == tuple(mixed()) and config.env_id == LAKE and config.episodes == 4
    assert RunConfig.from_dict(config.to_dict()).tasks == config.tasks


class Unknown(Agent):
    name = "x"

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:  # pragma: no cover - never asked
        raise AssertionError


def test_an_unknown_env_in_a_task_list_fails_before_any_episode() -> None:
    from envgym.errors import UnknownEnvError

    tasks = [EpisodeTask(LAKE), EpisodeTask("envgym/Sokobn-v0")]
    with pytest.raises(UnknownEnvError, match="Sokoban"):
        Runner(RunConfig(agent="random", tasks=tasks), Unknown()).run()


# ------------------------------------------------- one tasks_for behind run, bench and trainer
def old_default(env_id: str, episodes: int, seed: int, group_size: int, kwargs: dict) -> list[EpisodeTask]:
    """The list ``default_tasks`` built before ``tasks_for`` (the reference the new one must equal)."""
    return [
        EpisodeTask(env_id, seed + i // group_size, kwargs, group=i // group_size, member=i % group_size)
        for i in range(episodes)
    ]


@pytest.mark.parametrize(
    ("episodes", "seed", "group_size"), [(10, 0, 1), (12, 5, 3), (7, 2, 2), (0, 3, 1), (4, 1_000_000, 4)]
)
def test_default_tasks_are_the_same_episodes_through_tasks_for(episodes: int, seed: int, group_size: int) -> None:
    kwargs = {"difficulty": "easy"}
    assert list(default_tasks(LAKE, episodes=episodes, seed=seed, group_size=group_size, env_kwargs=kwargs)) == (
        old_default(LAKE, episodes, seed, group_size, kwargs)
    )
    config = RunConfig(env_id=LAKE, episodes=episodes - episodes % group_size, seed=seed, group_size=group_size)
    assert list(config.task_list()) == old_default(LAKE, config.episodes, seed, group_size, {})


def test_tasks_for_numbers_tags_and_limits_the_episodes_of_given_seeds() -> None:
    tasks = tasks_for(BOXES, [9, 4, None], group_size=2, env_kwargs={"size": 6}, max_turns=5, tag="b", first_index=10)
    assert [(t.seed, t.group, t.member, t.index, t.tag, t.max_turns) for t in tasks] == [
        (9, 0, 0, 10, "b", 5),
        (9, 0, 1, 11, "b", 5),
        (4, 1, 0, 12, "b", 5),
        (4, 1, 1, 13, "b", 5),
        (None, 2, 0, 14, "b", 5),
        (None, 2, 1, 15, "b", 5),
    ]
    assert all(dict(t.env_kwargs) == {"size": 6} for t in tasks)
    with pytest.raises(ConfigError, match="group_size must be an integer >= 1, got 0"):
        tasks_for(BOXES, [1], group_size=0)


def test_the_trainer_plays_the_same_episodes_through_tasks_for() -> None:
    from envgym.trainer.rollout import episode_tasks

    seeds, kwargs = [17, 3, 8], {"difficulty": "easy", "reward_wrappers": ["outcome"]}
    before = [
        EpisodeTask(LAKE, seed, kwargs, group=group, member=member, max_turns=6)
        for group, seed in enumerate(sorted(seeds))
        for member in range(4)
    ]
    assert episode_tasks(seeds, (LAKE, kwargs), 6, 4) == before


def test_a_multi_id_run_plays_the_same_episodes_through_tasks_for() -> None:
    from envgym.cli._run import _several_ids_tasks

    ids, episodes, seed, group_size, kwargs = [LAKE, BOXES], 6, 40, 3, {"difficulty": "easy"}
    before = []
    for j, env_id in enumerate(ids):
        for task in old_default(env_id, episodes, seed, group_size, kwargs):
            number = j * episodes + task.group * group_size + task.member
            before.append(dataclasses.replace(task, index=number, tag=env_id.rsplit("/", 1)[-1]))
    assert _several_ids_tasks(ids, episodes, seed, group_size, kwargs) == before
    assert _several_ids_tasks(ids, episodes, seed, group_size, kwargs, limit=9) == before[:9]


def test_a_bench_run_plays_the_same_episodes_through_tasks_for(tmp_path: Path) -> None:
    from envgym.bench.run import run_suite

    suite = tmp_path / "tiny-v1.yaml"
    suite.write_text(
        "name: tiny\nversion: 1\ndefaults: {episodes: 2, seed: 30, split: test, max_turns: 2, trials: 2}\n"
        "metrics: [success_rate]\nentries:\n"
        "  - {name: lake, env: envgym/FrozenLake-v0, kwargs: {difficulty: easy}, seeds: [7, 3]}\n"
        "  - {name: sums, env: envgym/Countdown-v0, kwargs: {difficulty: easy}, max_turns: 1}\n",
        encoding="utf-8",
    )
    run = run_suite(suite, "random", out=tmp_path / "run")
    played = {
        name: [(t.episode_id, t.seed, t.group, t.member, t.index) for t in trajs]
        for name, trajs in run.per_entry().items()
    }
    # What the bench built before tasks_for: seeds[i // k], group i // k, member i % k, index i.
    before = {
        name: [(f"{name}/{i:06d}", seeds[i // 2], i // 2, i % 2, i) for i in range(2 * len(seeds))]
        for name, seeds in (("lake", [7, 3]), ("sums", [30, 31]))
    }
    assert played == before
