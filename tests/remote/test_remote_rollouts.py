"""The harness, the CLI and the trainer on ``backend="remote"``: the envs live in an envgym serve
server, and the records are those of an in-process run with the same agent and seeds; a server
that goes away mid-run costs retries, never episodes."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envgym import remote
from envgym.cli import app
from envgym.errors import ConfigError
from envgym.rollout import AgentOutput, RandomAgent, RunConfig, run
from envgym.rollout.pools import ResetRequest, StepRequest, make_pool
from envgym.rollout.pools.records import EnvFailure
from envgym.rollout.records import TIMING_FIELDS, TURN_TIMING_FIELDS, Trajectory
from envgym.serve import Server

SOKOBAN = "envgym/Sokoban-v0"
WORDLE = "envgym/Wordle-v0"
COOP = "envgym/Coop-TrustDilemma-Text-v0"  # registered both ways: served as a PettingZoo Parallel env


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server([SOKOBAN, WORDLE, COOP], kinds={COOP: "parallel"}) as live:
        yield live


def _record(traj: Trajectory, *, retries: bool = True) -> dict[str, Any]:
    """A trajectory's record without its timings (and, with ``retries=False``, its retries)."""
    data = traj.to_dict()
    for key in TIMING_FIELDS | ({"attempts", "errors"} if not retries else set()):
        data.pop(key)
    data["turns"] = [{k: v for k, v in turn.items() if k not in TURN_TIMING_FIELDS} for turn in data["turns"]]
    return data


def _records(trajectories: Sequence[Trajectory], **options: bool) -> list[dict[str, Any]]:
    return [_record(t, **options) for t in trajectories]


@pytest.mark.parametrize(
    ("agent", "settings"),
    [
        ("random", {"env_id": SOKOBAN, "episodes": 6, "num_envs": 3, "max_turns": 8}),
        ("oracle", {"env_id": SOKOBAN, "episodes": 2, "mode": "async", "env_kwargs": {"size": 6}}),
        ("oracle", {"env_id": COOP, "episodes": 2, "max_turns": 4}),  # one record per agent
    ],
)
def test_a_remote_run_records_what_an_inproc_run_records(server: Server, agent: str, settings: dict[str, Any]) -> None:
    local = run(RunConfig(agent=agent, **settings))
    served = run(RunConfig(agent=agent, backend="remote", url=server.url, **settings))
    assert _records(served.trajectories) == _records(local.trajectories)
    assert served.summary["infra_errors"] == {} and served.summary["episodes"] == local.summary["episodes"]
    assert len(served.trajectories) == settings["episodes"] * (2 if settings["env_id"] == COOP else 1)
    assert served.summary["mean_return"] == local.summary["mean_return"]


def test_sampled_actions_travel_so_a_remote_run_records_what_a_worker_pool_records(server: Server) -> None:
    # Wordle lists no admissible actions: the random agent plays the env's sample_action, drawn
    # where the env lives, from the reset seed (worker pools and the server alike).
    settings = {"env_id": WORDLE, "episodes": 2, "max_turns": 3}
    pooled = run(RunConfig(agent="random", backend="process", **settings))
    served = run(RunConfig(agent="random", backend="remote", url=server.url, **settings))
    assert _records(served.trajectories) == _records(pooled.trajectories)
    actions = [turn.action for t in served.trajectories for turn in t.turns]
    assert len(actions) == 6 and all(len(a) == 5 and a.isalpha() for a in actions)  # sampled words, not ""


def test_the_served_pool_steps_a_batch_and_fails_slots_without_raising(server: Server) -> None:
    with make_pool(SOKOBAN, {"size": 6}, num_slots=3, backend="remote", url=server.url) as pool:
        assert pool.backend == "remote" and pool.slot_env(0) is None
        started = pool.reset([ResetRequest(slot=s, seed=s) for s in range(3)])
        assert all(not isinstance(r, EnvFailure) for r in started)
        assert len({r.observation for r in started}) == 3  # three seeds, three boards
        move = started[0].info["admissible_actions"][0]
        stepped = pool.step([StepRequest(slot=0, action=move), StepRequest(slot=1, action="")])
        assert [r.info["action_valid"] for r in stepped] == [True, False]
    with make_pool(SOKOBAN, None, num_slots=1, backend="remote", url=server.url) as pool:
        (early,) = pool.step([StepRequest(slot=0, action="up")])
        assert isinstance(early, EnvFailure) and "reset the slot" in early.message
    with pytest.raises(remote.UnknownRemoteEnvError, match="Did you mean 'envgym/Sokoban-v0'"):
        make_pool("envgym/Sokobn-v0", None, num_slots=1, backend="remote", url=server.url)
    with pytest.raises(ConfigError, match="give both"):
        make_pool(SOKOBAN, None, num_slots=1, backend="remote")
    with pytest.raises(ConfigError, match="give both or neither"):
        RunConfig(env_id=SOKOBAN, url=server.url)


class _KillsTheServer(RandomAgent):
    """A random agent that, on its ``at``-th batch, stops the server and starts a new one on the
    same port: every live episode loses its session mid-episode."""

    def __init__(self, holder: dict[str, Server], at: int) -> None:
        super().__init__(seed=0)
        self.holder, self.at, self.calls = holder, at, 0

    def act(self, batch: Sequence[Any]) -> list[AgentOutput]:
        self.calls += 1
        if self.calls == self.at:
            old = self.holder["server"]
            port = old.port
            old.stop()
            self.holder["server"] = Server([SOKOBAN], port=port).start()
        return super().act(batch)


def test_a_server_gone_mid_run_costs_retries_not_episodes(tmp_path: Path) -> None:
    settings = {"env_id": SOKOBAN, "episodes": 4, "num_envs": 4, "max_turns": 6}
    local = run(RunConfig(agent="random", **settings), RandomAgent(seed=0))
    holder = {"server": Server([SOKOBAN]).start()}
    try:
        config = RunConfig(agent="random", backend="remote", url=holder["server"].url, **settings)
        served = run(config, _KillsTheServer(holder, at=3), out=tmp_path / "run")
    finally:
        holder["server"].stop()
    assert served.summary["infra_errors"] == {} and served.summary["retries"] == 4
    for traj in served.trajectories:
        assert traj.attempts == 2 and len(traj.errors) == 1
        assert "SERVER_STOPPING" in traj.errors[0] or "ServerLostError" in traj.errors[0], traj.errors
    # The restarted episodes replay their seeds: the records are the in-process run's.
    assert _records(served.trajectories, retries=False) == _records(local.trajectories, retries=False)
    written = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert len(written) == 4 and all(row["attempts"] == 2 for row in written)


def test_the_cli_runs_on_a_server(server: Server, tmp_path: Path) -> None:
    args = ["run", SOKOBAN, "--agent", "random", "-n", "4", "--max-turns", "5", "--json", "--no-progress"]
    local = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "local")])
    served = CliRunner().invoke(
        app, [*args, "-o", str(tmp_path / "served"), "--backend", "remote", "--url", server.url]
    )
    assert local.exit_code == 0, local.output
    assert served.exit_code == 0, served.output
    a, b = json.loads(local.stdout), json.loads(served.stdout)
    for key in ("episodes", "mean_return", "success_rate", "mean_turns", "invalid_actions", "mean_reward_components"):
        assert a[key] == b[key], key
    config = json.loads((tmp_path / "served" / "config.json").read_text())
    assert config["backend"] == "remote" and config["url"] == server.url
    unknown = CliRunner().invoke(app, ["run", "envgym/Wordel-v0", "--backend", "remote", "--url", server.url])
    assert unknown.exit_code == 2 and "Did you mean 'envgym/Wordle-v0'" in unknown.output


SUITE = """\
name: remote
version: 1
description: Two Sokoban entries, played on a server.
defaults: {episodes: 2, seed: 0, split: test, max_turns: 6, trials: 1}
metrics: [success_rate, mean_reward, mean_turns]
entries:
  - {name: sokoban-easy, env: envgym/Sokoban-v0, kwargs: {difficulty: easy}}
  - {name: sokoban-small, env: envgym/Sokoban-v0, kwargs: {size: 6}}
"""


def test_a_bench_run_on_a_server_scores_as_in_process(server: Server, tmp_path: Path) -> None:
    suite = tmp_path / "remote-v1.yaml"
    suite.write_text(SUITE)
    args = ["bench", "run", str(suite), "--agent", "random", "--json", "--no-progress"]
    local = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "local")])
    served = CliRunner().invoke(
        app, [*args, "-o", str(tmp_path / "served"), "--backend", "remote", "--url", server.url]
    )
    assert local.exit_code == 0, local.output
    assert served.exit_code == 0, served.output
    a, b = json.loads(local.stdout), json.loads(served.stdout)
    timings = {"wall_time_s", "steps_per_s"}
    assert {k: v for k, v in b["overall"].items() if k not in timings} == {
        k: v for k, v in a["overall"].items() if k not in timings
    }
    assert b["overall"]["episodes"] == 4
    entries = sorted((tmp_path / "served" / "entries").iterdir())
    assert len(entries) == 2
    assert all(json.loads((e / "config.json").read_text())["backend"] == "remote" for e in entries)
