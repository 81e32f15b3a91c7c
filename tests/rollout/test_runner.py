"""The episode runner: records, groups, modes, typed outcomes, retries, run folders and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import runner_toy_envs  # noqa: F401 - registers envgymtest/Trap-v0
from procs import descendants

import envgym
from envgym.errors import AgentContractError, ConfigError
from envgym.rollout import (
    Agent,
    AgentInput,
    AgentOutput,
    PromptConfig,
    RandomAgent,
    RunConfig,
    Runner,
    check_agent,
    export_parquet,
    load_run,
    load_trajectories,
    run_episodes,
)

ROOT = Path(__file__).resolve().parents[2]
TRAP = "envgymtest/Trap-v0"


class CountingAgent(Agent):
    """Guesses 1, 2, 3, ... in the trap env; optional misbehaviour by (episode id, turn)."""

    name = "counting"

    def __init__(
        self,
        *,
        raise_at: set[tuple[str, int]] | None = None,
        garbage_at: set[tuple[str, int]] | None = None,
        raise_times: int = 10**9,
        boom_at: set[tuple[str, int]] | None = None,
    ) -> None:
        self.raise_at = raise_at or set()
        self.garbage_at = garbage_at or set()
        self.boom_at = boom_at or set()
        self.raise_times = raise_times
        self.raised = 0
        self.batches: list[int] = []
        self.started: list[tuple[str, int | None, int]] = []
        self.ended: list[str] = []
        self.lock = threading.Lock()

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        with self.lock:
            self.started.append((episode_id, seed, member))

    def end_episode(self, episode_id: str) -> None:
        with self.lock:
            self.ended.append(episode_id)

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        with self.lock:
            self.batches.append(len(batch))
        outputs: list = []
        for item in batch:
            key = (item.episode_id, item.turn)
            if key in self.raise_at and self.raised < self.raise_times:
                self.raised += 1
                raise RuntimeError(f"agent crashed on {key}")
            if key in self.garbage_at:
                outputs.append(None)
            elif key in self.boom_at:
                outputs.append(AgentOutput("boom"))
            else:
                outputs.append(AgentOutput(str(item.turn + 1)))
        return outputs


class ChatGuesser(Agent):
    """A chat agent: answers '<action>N</action>' (N = turn + 1) with fake token ids/logprobs;
    forgets the tags on turn 1 of every episode."""

    name = "chat-guesser"
    chat = True

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, str], ...]] = []

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        outputs = []
        for item in batch:
            self.seen.append(item.messages)
            guess = item.turn + 1
            text = f"I guess {guess}." if item.turn == 1 else f"Let me think. <action>{guess}</action>"
            ids = list(range(10, 10 + len(text) // 3))
            outputs.append(
                AgentOutput(
                    text, token_ids=ids, logprobs=[-0.5] * len(ids), prompt_token_ids=[1, 2, 3], finish_reason="stop"
                )
            )
        return outputs


def test_records_replay_in_a_fresh_environment() -> None:
    trajectories = run_episodes("envgym/FrozenLake-v0", RandomAgent(seed=3), episodes=12, seed=40, num_envs=4)
    assert [t.index for t in trajectories] == list(range(12))
    assert [t.seed for t in trajectories] == list(range(40, 52))
    for t in trajectories:
        env = envgym.make("envgym/FrozenLake-v0")
        obs, info = env.reset(seed=t.seed)
        assert info["task"]["id"] == t.task_id
        for turn in t.turns:
            assert turn.observation == obs
            obs, reward, terminated, truncated, info = env.step(turn.action)
            assert reward == turn.reward
            assert info["reward_components"] == turn.reward_components
            assert (terminated, truncated) == (turn.terminated, turn.truncated)
        assert obs == t.final_observation
        assert t.success == info["success"]
        assert t.termination_reason == str(info["termination_reason"])
        assert t.total_reward == pytest.approx(sum(t.rewards))
        assert t.scored and t.attempts == 1 and t.errors == []


def test_lockstep_batches_every_live_episode() -> None:
    agent = CountingAgent()
    run_episodes(TRAP, agent, episodes=8, seed=0, num_envs=4)
    assert agent.batches[0] == 4  # one agent call per turn for all live episodes
    assert max(agent.batches) == 4
    assert sorted(agent.ended) == [f"{i:06d}" for i in range(8)]


def test_group_rollouts_share_the_seed_and_differ_in_sampling() -> None:
    config = RunConfig(env_id="envgym/FrozenLake-v0", episodes=12, seed=5, group_size=4, num_envs=6)
    result = Runner(config, RandomAgent(seed=1)).run()
    groups: dict[int, list] = {}
    for t in result.trajectories:
        groups.setdefault(t.group, []).append(t)
    assert sorted(groups) == [0, 1, 2]
    for group, members in groups.items():
        assert [m.member for m in members] == [0, 1, 2, 3]
        assert {m.seed for m in members} == {5 + group}
        assert len({m.task_id for m in members}) == 1
        assert len({tuple(m.actions) for m in members}) > 1  # members sample differently


def test_config_validation_before_anything_runs() -> None:
    with pytest.raises(ConfigError, match="multiple of group_size"):
        RunConfig(env_id=TRAP, episodes=10, group_size=4)
    with pytest.raises(ConfigError, match="Did you mean 'process'"):
        RunConfig(env_id=TRAP, backend="proces")
    with pytest.raises(ConfigError, match="num_envs"):
        RunConfig(env_id=TRAP, num_envs=0)
    with pytest.raises(ConfigError, match="episode_timeout_s"):
        RunConfig(env_id=TRAP, episode_timeout_s=-1)
    with pytest.raises(ConfigError, match="unknown run setting 'episode'"):
        RunConfig.from_dict({"env_id": TRAP, "episode": 3})
    assert (
        RunConfig.from_dict(RunConfig(env_id=TRAP, prompt=PromptConfig(history="none")).to_dict()).prompt.history
        == "none"
    )


def test_agent_errors_are_retried_then_recorded_apart() -> None:
    # episode 2 crashes the agent at turn 1 every time; episode 5 returns garbage every time.
    agent = CountingAgent(raise_at={("000002", 1)}, garbage_at={("000005", 0)})
    result = Runner(RunConfig(env_id=TRAP, episodes=8, seed=0, num_envs=3, max_retries=2), agent).run()
    by_id = {t.episode_id: t for t in result.trajectories}
    assert len(result.trajectories) == 8
    crashed, garbage = by_id["000002"], by_id["000005"]
    assert crashed.termination_reason == "agent_error" and not crashed.scored
    assert crashed.attempts == 3 and len(crashed.errors) == 3
    assert "RuntimeError: agent crashed" in crashed.errors[-1]
    assert garbage.termination_reason == "agent_error"
    assert "expected an AgentOutput, got NoneType" in garbage.error
    ok = [t for t in result.trajectories if t.scored]
    assert len(ok) == 6 and all(t.success for t in ok)
    summary = result.summary
    assert summary["scored"] == 6 and summary["success_rate"] == 1.0  # never a silent zero
    assert summary["infra_errors"] == {"agent_error": 2}
    assert summary["retries"] == 4


def test_a_transient_agent_error_is_retried_and_the_episode_scores() -> None:
    agent = CountingAgent(raise_at={("000001", 0)}, raise_times=1)
    result = Runner(RunConfig(env_id=TRAP, episodes=4, seed=0, num_envs=1), agent).run()
    retried = result.trajectories[1]
    assert retried.scored and retried.attempts == 2 and retried.success
    assert retried.errors == ["agent_error: RuntimeError: agent crashed on ('000001', 0)"]
    # the retry started over: a fresh agent episode and a full set of turns
    assert [s for s in agent.started if s[0] == "000001"] == [("000001", 1, 0)] * 2
    assert retried.agent == "counting"


def test_a_batch_call_that_raises_is_asked_again_per_episode() -> None:
    # one crash inside a batch of 4: the three innocent episodes are not charged with it
    agent = CountingAgent(raise_at={("000001", 0)}, raise_times=1)
    result = Runner(RunConfig(env_id=TRAP, episodes=4, seed=0, num_envs=4), agent).run()
    assert agent.raised == 1
    assert all(t.attempts == 1 and t.scored for t in result.trajectories)


def test_wrong_output_count_is_an_agent_error() -> None:
    class Short(CountingAgent):
        def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
            return super().act(batch)[:-1]

    result = Runner(RunConfig(env_id=TRAP, episodes=4, seed=0, num_envs=4, max_retries=0), Short()).run()
    assert {t.termination_reason for t in result.trajectories} == {"agent_error"}
    assert "returned 0 outputs for 1 inputs" in result.trajectories[0].error  # asked again alone


def test_env_errors_are_retried_and_recorded() -> None:
    agent = CountingAgent(boom_at={("000001", 0)})
    result = Runner(RunConfig(env_id=TRAP, episodes=3, seed=0, max_retries=1), agent).run()
    failed = result.trajectories[1]
    assert failed.termination_reason == "env_error" and failed.attempts == 2
    assert "RuntimeError: the environment blew up" in failed.error
    assert [t.scored for t in result.trajectories] == [True, False, True]


def test_episode_and_agent_timeouts() -> None:
    class Slow(CountingAgent):
        def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
            if any(item.episode_id == "000001" for item in batch):
                time.sleep(0.3)
            return super().act(batch)

    config = RunConfig(env_id=TRAP, episodes=2, seed=0, num_envs=1, agent_timeout_s=0.1, max_retries=1)
    result = Runner(config, Slow()).run()
    assert result.trajectories[0].scored
    assert result.trajectories[1].termination_reason == "timeout"
    assert "did not answer within 0.1 s" in result.trajectories[1].error

    config = RunConfig(
        env_id=TRAP, episodes=2, seed=0, num_envs=2, episode_timeout_s=0.05, max_retries=0, env_kwargs={"delay": 0.03}
    )
    result = Runner(config, CountingAgent()).run()
    reasons = {t.termination_reason for t in result.trajectories}
    assert reasons <= {"timeout", "success"} and "timeout" in reasons


def test_harness_max_turns_truncates() -> None:
    result = Runner(RunConfig(env_id="envgym/Sokoban-v0", episodes=3, max_turns=4), RandomAgent()).run()
    for t in result.trajectories:
        if not t.turns[-1].terminated:
            assert t.num_turns == 4 and t.termination_reason == "max_turns" and t.turns[-1].truncated
            assert t.extra["truncated_by"] == "harness_max_turns"


def test_chat_agents_get_messages_and_records_keep_tokens() -> None:
    agent = ChatGuesser()
    result = Runner(RunConfig(env_id=TRAP, episodes=2, seed=0, num_envs=2), agent).run()
    t = result.trajectories[0]
    first = t.turns[0]
    assert first.messages[0]["role"] == "system" and first.messages[-1]["role"] == "user"
    assert first.completion.endswith("<action>1</action>") and first.action == "1" and first.format_ok
    assert t.turns[1].format_ok is False and t.turns[1].action == "I guess 2."
    assert not t.turns[1].action_valid  # the env rejected the untagged reply
    if t.num_turns > 2:
        assert "<action>" in t.turns[2].messages[-1]["content"]  # format feedback in the next prompt
    assert first.token_ids and len(first.token_ids) == len(first.logprobs) == first.completion_tokens
    assert first.prompt_tokens == 3
    assert t.completion_tokens == sum(turn.completion_tokens for turn in t.turns)
    assert result.summary["format_error_rate"] == pytest.approx(
        sum(1 for x in result.trajectories for turn in x.turns if not turn.format_ok)
        / sum(x.num_turns for x in result.trajectories)
    )


def test_token_budget_truncates_chat_episodes() -> None:
    config = RunConfig(env_id=TRAP, episodes=2, seed=0, prompt=PromptConfig(token_budget=20))
    result = Runner(config, ChatGuesser()).run()
    for t in result.trajectories:
        if t.extra.get("truncated_by") == "token_budget":
            assert t.completion_tokens >= 20 and t.termination_reason == "max_turns"
    assert any(t.extra.get("truncated_by") == "token_budget" for t in result.trajectories)


def test_async_mode_gives_the_same_records_as_lockstep() -> None:
    base = {"env_id": "envgym/Sokoban-v0", "episodes": 10, "seed": 3, "num_envs": 3, "max_turns": 30}
    lock = Runner(RunConfig(**base), RandomAgent(seed=2)).run().trajectories
    asyn = Runner(RunConfig(**base, mode="async"), RandomAgent(seed=2)).run().trajectories
    assert [t.comparable() for t in lock] == [t.comparable() for t in asyn]


def test_process_backend_gives_the_same_records_as_inproc() -> None:
    base = {"env_id": "envgym/FrozenLake-v0", "episodes": 10, "seed": 3, "num_envs": 4}
    inproc = Runner(RunConfig(**base), RandomAgent(seed=2)).run().trajectories
    proc = Runner(RunConfig(**base, backend="process", workers=2), RandomAgent(seed=2)).run().trajectories
    assert [t.comparable() for t in inproc] == [t.comparable() for t in proc]


def test_a_worker_killed_mid_episode_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    config = RunConfig(
        env_id=TRAP,
        episodes=8,
        seed=0,
        num_envs=4,
        backend="process",
        workers=2,
        env_kwargs={"kill_marker": str(marker), "kill_seed": 5, "kill_turn": 3},
    )
    result = Runner(config, CountingAgent(), out=tmp_path / "run").run()
    assert marker.exists()  # a worker really died (SIGKILL) mid-episode
    lines = (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()
    indices = [json.loads(line)["index"] for line in lines]
    assert sorted(indices) == list(range(8))  # each episode exactly once
    assert all(t.scored and t.success for t in result.trajectories)
    restarted = [t for t in result.trajectories if t.attempts > 1]
    assert {t.seed for t in restarted} >= {5}
    assert any("died" in e or "replaced" in e for t in restarted for e in t.errors)


def test_run_folder_records_config_meta_and_loads_as_a_table(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = RunConfig(env_id="envgym/FrozenLake-v0", agent="random", episodes=6, seed=1)
    result = Runner(config, out=out).run()
    assert json.loads((out / "config.json").read_text())["env_id"] == "envgym/FrozenLake-v0"
    meta = json.loads((out / "meta.json").read_text())
    assert meta["packages"]["gymnasium"] and meta["python"]
    assert "git" in meta and len(meta["sessions"]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 6
    frame = load_run(out)
    assert list(frame["index"]) == list(range(6))
    assert frame["total_reward"].tolist() == [t.total_reward for t in result.trajectories]
    assert "reward/success_reward" in frame.columns
    turns = load_run(out, level="turn")
    assert len(turns) == sum(t.num_turns for t in result.trajectories)
    written = export_parquet(out)
    import pandas

    assert pandas.read_parquet(written[0])["index"].tolist() == list(range(6))
    assert [t.comparable() for t in load_trajectories(out)] == [t.comparable() for t in result.trajectories]


def test_resume_skips_finished_episodes_and_refuses_a_changed_config(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = Runner(RunConfig(env_id=TRAP, episodes=4, seed=0), CountingAgent(), out=out).run()
    agent = CountingAgent()
    second = Runner(RunConfig(env_id=TRAP, episodes=6, seed=0), agent, out=out).run()  # extend the run
    assert sorted(s[0] for s in agent.started) == ["000004", "000005"]
    assert [t.comparable() for t in second.trajectories[:4]] == [t.comparable() for t in first.trajectories]
    with pytest.raises(ConfigError, match=r"seed: 0 -> 1"):
        Runner(RunConfig(env_id=TRAP, episodes=6, seed=1), CountingAgent(), out=out).run()
    meta = json.loads((out / "meta.json").read_text())
    assert [s["resumed_from"] for s in meta["sessions"]] == [0, 4]


def test_resume_reruns_infrastructure_failures_and_repairs_a_torn_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    Runner(
        RunConfig(env_id=TRAP, episodes=3, seed=0, max_retries=0), CountingAgent(boom_at={("000001", 0)}), out=out
    ).run()
    with (out / "episodes.jsonl").open("a") as f:
        f.write('{"record_version": 1, "episode_id": "00')  # a write cut short by a crash
    agent = CountingAgent()
    result = Runner(RunConfig(env_id=TRAP, episodes=3, seed=0, max_retries=0), agent, out=out).run()
    assert [s[0] for s in agent.started] == ["000001"]
    assert all(t.scored for t in result.trajectories)
    assert all(
        line.startswith("{") and line.endswith("}") for line in (out / "episodes.jsonl").read_text().splitlines()
    )


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "envgym.cli", *args]


@pytest.mark.slow
def test_sigint_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    args = ["run", "envgym/Sokoban-v0", "--agent", "random:4", "-n", "300", "--seed", "11", "--max-turns", "40"]
    interrupted = tmp_path / "interrupted"
    proc = subprocess.Popen(
        _cli(*args, "--out", str(interrupted)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    records = interrupted / "episodes.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if records.exists() and len(records.read_text().splitlines()) >= 20:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "run the same command again to resume" in " ".join(err.split())
    done_before = len(records.read_text().splitlines())
    assert 20 <= done_before < 300
    subprocess.run(_cli(*args, "--out", str(interrupted)), check=True, capture_output=True, cwd=ROOT)
    straight = tmp_path / "straight"
    subprocess.run(_cli(*args, "--out", str(straight)), check=True, capture_output=True, cwd=ROOT)
    a, b = load_trajectories(interrupted), load_trajectories(straight)
    assert len(a) == len(b) == 300
    assert [t.comparable() for t in a] == [t.comparable() for t in b]
    assert len((interrupted / "episodes.jsonl").read_text().splitlines()) == 300  # nothing duplicated


def test_check_agent_accepts_good_agents_and_names_the_broken_part() -> None:
    check_agent(RandomAgent(seed=1))
    check_agent(ChatGuesser())

    class BadLogprobs(ChatGuesser):
        def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
            outputs = super().act(batch)
            outputs[0].logprobs = outputs[0].logprobs[:-1]
            return outputs

    with pytest.raises(AgentContractError, match="token_ids but .* logprobs"):
        check_agent(BadLogprobs())

    class OrderDependent(Agent):
        name = "order"

        def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
            return [AgentOutput(str(i + 1)) for i in range(len(batch))]

    with pytest.raises(AgentContractError, match="changed with the reversed batch"):
        check_agent(OrderDependent())
    check_agent(OrderDependent(), batch_invariance=False)


#: The interpreter-wide helpers of multiprocessing: started by the first forkserver pool of the
#: process (whichever test that is) and kept until the interpreter exits, by Python's design.
_MP_HELPERS = (b"from multiprocessing.forkserver import main", b"from multiprocessing.resource_tracker import main")


def test_no_worker_process_is_left_behind() -> None:
    # the runner leaves no worker processes behind: neither its own children nor the fork server's
    before = set(descendants(os.getpid(), zombies=False))
    Runner(RunConfig(env_id="envgym/FrozenLake-v0", episodes=4, backend="process", workers=2), RandomAgent()).run()
    deadline = time.monotonic() + 10  # workers are reaped as they exit, not all at once
    while True:
        new = descendants(os.getpid(), zombies=False)
        alive = {p: cmd for p, cmd in new.items() if p not in before and not any(h in cmd for h in _MP_HELPERS)}
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert alive == {}


def test_openai_agent_spec_in_async_mode_against_a_local_server(tmp_path: Path) -> None:
    from openai_server import FakeOpenAIServer

    def answer(messages: list[dict]) -> str:  # the FrozenLake solver's move, read from the prompt
        return "down" if "Valid actions" in messages[-1]["content"] else "noop"

    with FakeOpenAIServer(action=answer) as server:
        server.delay_s = 0.05
        spec = f"openai:fake-model@{server.url}"
        config = RunConfig(
            env_id="envgym/FrozenLake-v0",
            agent=spec,
            episodes=8,
            seed=0,
            num_envs=4,
            mode="async",
            max_turns=3,
            agent_options={"concurrency": 4, "logprobs": True},
        )
        result = Runner(config, out=tmp_path / "run").run()
        assert server.max_in_flight == 4  # four episodes wait on the server at once
    assert all(t.scored for t in result.trajectories)
    turn = result.trajectories[0].turns[0]
    assert turn.action == "down" and turn.format_ok and turn.completion == "<action>down</action>"
    assert turn.messages[0]["role"] == "system" and turn.logprobs and len(turn.logprobs) == turn.completion_tokens
    assert result.summary["completion_tokens"] == sum(t.completion_tokens for t in result.trajectories) > 0
    assert json.loads((tmp_path / "run" / "config.json").read_text())["agent"] == spec


def test_a_dead_server_is_an_agent_error_not_a_score() -> None:
    import socket

    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = RunConfig(
        env_id="envgym/FrozenLake-v0",
        agent=f"openai:m@http://127.0.0.1:{port}/v1",
        episodes=2,
        max_retries=1,
        agent_options={"max_retries": 0},
    )
    result = Runner(config).run()
    assert [t.termination_reason for t in result.trajectories] == ["agent_error", "agent_error"]
    assert result.summary["success_rate"] is None and result.summary["infra_errors"] == {"agent_error": 2}


@pytest.mark.slow
def test_ray_backend_gives_the_same_records_and_survives_a_killed_actor(ray_instance: object, tmp_path: Path) -> None:
    base = {"env_id": "envgym/FrozenLake-v0", "episodes": 8, "seed": 3, "num_envs": 4}
    inproc = Runner(RunConfig(**base), RandomAgent(seed=2)).run().trajectories
    on_ray = Runner(RunConfig(**base, backend="ray", workers=2), RandomAgent(seed=2)).run().trajectories
    assert [t.comparable() for t in inproc] == [t.comparable() for t in on_ray]
    assert ray_instance.is_initialized()  # the runner leaves a Ray it did not start running

    marker = tmp_path / "killed"
    config = RunConfig(
        env_id=TRAP,
        episodes=8,
        seed=0,
        num_envs=4,
        backend="ray",
        workers=2,
        env_kwargs={"kill_marker": str(marker), "kill_seed": 5, "kill_turn": 3},
    )
    result = Runner(config, CountingAgent()).run()
    assert marker.exists()
    assert [t.index for t in result.trajectories] == list(range(8))
    assert all(t.scored and t.success for t in result.trajectories)
    assert any(t.attempts > 1 for t in result.trajectories if t.seed == 5)


def test_run_config_has_its_own_module_and_keeps_its_import_paths() -> None:
    import ast

    import envgym.rollout
    from envgym.rollout import config as config_module
    from envgym.rollout import runner as runner_module

    assert envgym.rollout.RunConfig is runner_module.RunConfig is config_module.RunConfig
    assert config_module.RunConfig.__module__ == "envgym.rollout.config"
    assert runner_module.IDENTITY_KEYS is config_module.IDENTITY_KEYS
    assert runner_module.MAX_DEFAULT_ENVS == config_module.MAX_DEFAULT_ENVS == 64
    # The settings module loads no player: a config is checked before any runner code is needed.
    tree = ast.parse(Path(config_module.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {
        "envgym.rollout.runner",
        "envgym.rollout.session",
        "envgym.rollout.players",
        "envgym.rollout.multiagent",
    }


def test_the_runner_session_is_public_and_files_every_task() -> None:
    from envgym.rollout import RunSession

    seen: list[str] = []
    runner = Runner(
        RunConfig(env_id=TRAP, agent="random", episodes=4, group_size=2, seed=3), on_episode_end=seen.append
    )
    session = runner.session
    assert isinstance(session, RunSession) and runner.tasks is session.tasks and runner.out is None
    assert [(t.seed, t.group, t.member) for t in session.tasks] == [(3, 0, 0), (3, 0, 1), (4, 1, 0), (4, 1, 1)]
    assert session.kinds == [(TRAP, {})] and session.task_kind == [0, 0, 0, 0] and session.numbers == [0, 1, 2, 3]
    result = runner.run()
    assert session.done_tasks == {0, 1, 2, 3} and session.errors == {}
    assert [session.done[i] for i in range(4)] == result.trajectories
    assert len(seen) == 4 and session.agent_name == "random"
