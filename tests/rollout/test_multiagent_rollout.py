"""The harness's multi-agent path: PettingZoo Parallel text envs (the coopetition LLM view).

Real parts: the coopetition text env, the runner, run folders on disk, a bench suite file and the
``envgym run`` command. The agents are small scripted ones (the behaviour under test is the
harness's, not a model's): they count their calls and answer with fixed contributions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envgym.bench.run import load_bench_run, run_suite
from envgym.bench.suite import load_suite
from envgym.errors import ConfigError, UnknownAgentError
from envgym.registration import make_parallel
from envgym.rollout import Agent, AgentInput, AgentOutput, RunConfig, Runner
from envgym.rollout.prompting import PromptConfig

ENV = "envgym/Coop-TrustDilemma-Text-v0"


class Fixed(Agent):
    """Answers every agent with its fixed contribution; records each call's batch."""

    def __init__(self, amounts: dict[str, int], *, chat: bool = False, say: str = "", name: str = "fixed") -> None:
        self.amounts = amounts
        self.chat = chat
        self.say = say
        self.name = name
        self.calls: list[list[AgentInput]] = []
        self.started: list[tuple[str, int]] = []

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        self.started.append((episode_id, member))

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        self.calls.append(list(batch))
        out = []
        for item in batch:
            agent = item.episode_id.rsplit("/", 1)[1]
            text = f"{self.amounts[agent]}" + (f" say: {self.say}" if self.say else "")
            if self.chat:
                text = f"I think. <action>{text}</action>"
            out.append(AgentOutput(text, token_ids=[1, 2], prompt_token_ids=[5, 6, 7], logprobs=[-0.5, -0.25]))
        return out


def env_rewards(amounts: dict[str, int], seed: int, rounds: int, **kwargs: object) -> dict[str, list[float]]:
    """What the env itself pays each agent over ``rounds`` rounds of fixed contributions."""
    env = make_parallel(ENV, **kwargs)
    env.reset(seed=seed)
    paid: dict[str, list[float]] = {a: [] for a in env.possible_agents}
    for _ in range(rounds):
        _, rewards, *_ = env.step({a: str(v) for a, v in amounts.items()})
        for a, r in rewards.items():
            paid[a].append(r)
    return paid


# ----------------------------------------------------------------------------- self-play
def test_self_play_one_batched_call_per_round_and_per_agent_records() -> None:
    agent = Fixed({"agent_0": 50, "agent_1": 30})
    config = RunConfig(env_id=ENV, episodes=4, group_size=2, seed=7, max_turns=3)
    result = Runner(config, agent).run()
    # 3 rounds, each ONE call over 4 episodes x 2 agents.
    assert [len(batch) for batch in agent.calls] == [8, 8, 8]
    assert {item.episode_id for item in agent.calls[0]} == {f"00000{e}/agent_{k}" for e in range(4) for k in (0, 1)}
    trajs = result.trajectories
    assert [t.episode_id for t in trajs] == [f"00000{e}/agent_{k}" for e in range(4) for k in (0, 1)]
    assert [t.index for t in trajs] == list(range(8))
    assert [(t.seed, t.group, t.member) for t in trajs[::2]] == [(7, 0, 0), (7, 0, 1), (8, 1, 0), (8, 1, 1)]
    # The agents of one task sample from distinct streams (member * n_agents + position); seeds tell tasks apart.
    assert [m for _, m in agent.started] == [0, 1, 2, 3] * 2
    paid = env_rewards({"agent_0": 50, "agent_1": 30}, seed=7, rounds=3)
    for t in trajs[:2]:
        who = t.extra["multiagent"]["agent_id"]
        assert t.rewards == pytest.approx(paid[who], rel=0, abs=0)
        assert t.total_reward == pytest.approx(sum(paid[who]), rel=1e-12)
        assert (
            t.num_turns == 3 and t.termination_reason == "max_turns" and t.extra["truncated_by"] == "harness_max_turns"
        )
        assert t.completion_tokens == 6 and t.prompt_tokens == 9
        assert set(t.reward_components) == {"payoff_reward", "social_reward"}
        assert math.isclose(sum(t.reward_components.values()), t.total_reward, rel_tol=1e-9)
    meta = trajs[0].extra["multiagent"]
    assert meta["agents"] == ["agent_0", "agent_1"] and meta["policies"] == {"agent_0": "fixed", "agent_1": "fixed"}
    assert meta["joint_return"] == pytest.approx(sum(paid["agent_0"]) + sum(paid["agent_1"]), rel=1e-12)
    assert meta["rounds"] == 3 and meta["invalid_rounds"] == 0
    assert meta["final"]["cooperation_rate"] == pytest.approx(0.4, abs=1e-6)  # (50 + 30) / 200
    summary = result.summary
    assert summary["episodes"] == 8 and summary["steps"] == 24
    multi = summary["multiagent"]
    assert multi["episodes"] == 4 and multi["agents_per_episode"] == 2
    assert multi["mean_final"]["cooperation_rate"] == pytest.approx(0.4, abs=1e-6)
    by_agent = multi["mean_return_by_agent"]
    assert by_agent["agent_0"] == pytest.approx(sum(t.total_reward for t in trajs[0::2]) / 4, rel=1e-12)


def test_chat_agents_get_conversations_and_messages_flow() -> None:
    agent = Fixed({"agent_0": 45, "agent_1": 44}, chat=True, say="deal")
    config = RunConfig(env_id=ENV, env_kwargs={"messages": True}, episodes=1, max_turns=2, prompt=PromptConfig())
    trajs = Runner(config, agent).run().trajectories
    assert len(agent.calls) == 2 and all(len(b) == 2 for b in agent.calls)
    second = {item.episode_id: item for item in agent.calls[1]}
    assert 'agent_1: "deal"' in second["000000/agent_0"].observation
    assert second["000000/agent_0"].messages[0]["role"] == "system"
    assert second["000000/agent_0"].stop == ("</action>",)
    assert all(
        turn.format_ok and turn.action == f"{45 if t.episode_id.endswith('0') else 44} say: deal"
        for t in trajs
        for turn in t.turns
    )
    assert trajs[0].turns[0].messages is not None and trajs[0].turns[0].completion.startswith("I think.")


def test_several_policies_one_call_each_per_round() -> None:
    first = Fixed({"agent_0": 60, "agent_1": 0}, name="generous")
    second = Fixed({"agent_0": 0, "agent_1": 10}, name="stingy")
    config = RunConfig(env_id=ENV, episodes=3, max_turns=2)
    result = Runner(config, first, agents={"agent_1": second}).run()
    assert [len(b) for b in first.calls] == [3, 3] and [len(b) for b in second.calls] == [3, 3]
    assert all(i.episode_id.endswith("agent_0") for b in first.calls for i in b)
    assert [t.agent for t in result.trajectories[:2]] == ["generous", "stingy"]
    assert result.summary["agents"] == {"agent_0": "generous", "agent_1": "stingy"}
    assert set(result.summary["multiagent"]["mean_return_by_policy"]) == {"generous", "stingy"}
    paid = env_rewards({"agent_0": 60, "agent_1": 10}, seed=0, rounds=2)
    assert result.trajectories[1].rewards == paid["agent_1"]


def test_agents_by_spec_and_bad_names() -> None:
    config = RunConfig(env_id=ENV, agent="random", agents={"agent_1": "random:3"}, episodes=2, max_turns=2)
    result = Runner(config).run()
    assert [t.agent for t in result.trajectories] == ["random", "random:3"] * 2
    assert all(t.invalid_actions == 0 for t in result.trajectories)  # sample_action answers are legal
    with pytest.raises(ConfigError, match="agents names 'agent_9'"):
        Runner(RunConfig(env_id=ENV, agents={"agent_9": "random"}, episodes=1)).run()
    with pytest.raises(UnknownAgentError, match="Did you mean 'random'"):
        RunConfig(env_id=ENV, agents={"agent_1": "randm"})
    with pytest.raises(ConfigError, match="inproc"):
        Runner(RunConfig(env_id=ENV, episodes=1, backend="process")).run()
    with pytest.raises(ConfigError, match="Parallel envs only"):
        Runner(RunConfig(env_id="envgym/FrozenLake-v0", agents={"agent_1": "random"}, episodes=1)).run()


# ----------------------------------------------------------------------------- failures and limits
class Flaky(Fixed):
    """Raises whenever agent_0's second turn is in the batch, twice (the batched call, then the
    runner's one-at-a-time retry of it), then works."""

    failures = 0

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        if self.failures < 2 and any(i.turn == 1 and i.episode_id.endswith("agent_0") for i in batch):
            self.failures += 1
            raise RuntimeError("model fell over")
        return super().act(batch)


def test_an_agent_error_restarts_the_whole_episode() -> None:
    agent = Flaky({"agent_0": 40, "agent_1": 40})
    result = Runner(RunConfig(env_id=ENV, episodes=1, max_turns=2), agent).run()
    trajs = result.trajectories
    assert [t.attempts for t in trajs] == [2, 2] and all(t.scored for t in trajs)
    assert all(t.errors == ["agent_error: agent_0: RuntimeError: model fell over"] for t in trajs)
    assert [t.num_turns for t in trajs] == [2, 2]


def test_an_agent_error_past_its_retries_is_recorded_unscored() -> None:
    class Broken(Fixed):
        def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
            raise RuntimeError("no")

    result = Runner(RunConfig(env_id=ENV, episodes=1, max_retries=1), Broken({})).run()
    assert [t.termination_reason for t in result.trajectories] == ["agent_error", "agent_error"]
    assert all(not t.scored and t.attempts == 2 for t in result.trajectories)
    assert (
        result.summary["scored"] == 0 and result.summary["multiagent"] is None
        if "multiagent" in result.summary
        else True
    )


def test_invalid_answers_end_by_the_env_rules() -> None:
    agent = Fixed({"agent_0": 40, "agent_1": 400})  # agent_1 always out of range
    result = Runner(RunConfig(env_id=ENV, env_kwargs={"invalid_limit": 2}, episodes=1), agent).run()
    a0, a1 = result.trajectories
    assert a0.num_turns == a1.num_turns == 2 and a1.invalid_actions == 2 and a0.invalid_actions == 0
    assert a0.termination_reason == a1.termination_reason == "invalid_limit"
    assert a0.extra["multiagent"]["invalid_rounds"] == 2 and a0.total_reward == 0.0


# ----------------------------------------------------------------------------- run folders
def test_run_folder_resume_plays_nothing_again(tmp_path: Path) -> None:
    config = RunConfig(env_id=ENV, episodes=2, max_turns=2)
    first = Runner(config, Fixed({"agent_0": 40, "agent_1": 41}), out=tmp_path / "run").run()
    lines = (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1, 2, 3]
    again = Fixed({"agent_0": 40, "agent_1": 41})
    second = Runner(config, again, out=tmp_path / "run").run()
    assert again.calls == []
    assert [t.comparable() for t in second.trajectories] == [t.comparable() for t in first.trajectories]
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert "agents" not in saved  # self-play: the config reads as a single-agent run's
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["multiagent"]["episodes"] == 2


# ----------------------------------------------------------------------------- bench and CLI
SUITE = """\
name: coopdemo
version: 1
description: two coopetition text games for the harness test
defaults: {episodes: 2, seed: 100, split: test, max_turns: 2, trials: 2}
metrics: [success_rate, mean_reward, pass_hat_k, mean_turns]
entries:
  - name: trust
    env: envgym/Coop-TrustDilemma-Text-v0
    kwargs: {messages: true}
"""


def test_a_suite_entry_with_a_parallel_id(tmp_path: Path) -> None:
    path = tmp_path / "coopdemo-v1.yaml"
    path.write_text(SUITE)
    suite = load_suite(path)
    run = run_suite(suite, "random", out=tmp_path / "bench")
    assert run.missing() == {}
    assert run.expected_records("trust") == 2 * 2 * 2  # seeds x trials x agents
    records = run.trajectories("trust")
    assert len(records) == 8 and {t.seed for t in records} == {100, 101}
    results = run.results()
    entry = results["entries"][0]
    assert entry["episodes"] == 8 and entry["tasks"] == 2 and entry["expected_episodes"] == 8
    assert entry["multiagent"]["episodes"] == 4 and entry["multiagent"]["agents_per_episode"] == 2
    assert entry["mean_reward"] == pytest.approx(sum(t.total_reward for t in records) / 8, rel=1e-12)
    # Resuming a complete run plays nothing.
    again = load_bench_run(tmp_path / "bench")
    assert again.missing() == {}
    run_suite(suite, "random", out=tmp_path / "bench")
    assert len(load_bench_run(tmp_path / "bench").trajectories("trust")) == 8


def test_suite_refuses_reward_wrappers_on_parallel(tmp_path: Path) -> None:
    path = tmp_path / "coopdemo-v1.yaml"
    path.write_text(SUITE + "    reward_wrappers: [outcome]\n")
    with pytest.raises(ConfigError, match="reward wrappers apply to single-agent envs only"):
        load_suite(path)


def test_envgym_run_a_parallel_id() -> None:
    from envgym.cli import app

    result = CliRunner().invoke(
        app,
        [
            "run",
            ENV,
            "--agent",
            "random",
            "--agent-for",
            "agent_1=random:9",
            "-n",
            "2",
            "--max-turns",
            "3",
            "--json",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["episodes"] == 4 and summary["steps"] == 12
    assert summary["agents"] == {"agent_0": "random", "agent_1": "random:9"}
    assert summary["config"]["agents"] == {"agent_1": "random:9"}
    assert summary["multiagent"]["episodes"] == 2
    bad = CliRunner().invoke(app, ["run", "envgym/FrozenLake-v0", "--agent-for", "agent_1=random", "--no-progress"])
    assert bad.exit_code == 2 and "Parallel" in bad.output
