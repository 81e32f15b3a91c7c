"""Harness overhead per turn: the runner's time on top of the environment's.

A zero-latency agent (it answers from a fixed action cycle, allocating only the output) plays
Sokoban through :class:`envgym.rollout.Runner` in this process. The same action sequences are
then replayed on bare environments with a plain ``env.step`` loop. The overhead per turn is

    (runner wall time - bare replay wall time) / turns

i.e. everything the harness adds: batching, AgentInput construction, records (Turn objects,
reward-component sums), bookkeeping. Target: <= 50 us per turn.

Usage::

    python benchmarks/perf/harness.py               # 400 episodes, 8 envs
    python benchmarks/perf/harness.py --quick --json
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import envgym
from envgym.rollout import Agent, AgentInput, AgentOutput, RunConfig, Runner

ACTIONS = ("up", "left", "down", "right", "up", "up", "right", "down")


class CycleAgent(Agent):
    """Answers instantly: the next action of a fixed cycle (per episode, by turn number)."""

    name = "cycle"

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        return [AgentOutput(ACTIONS[(item.turn + len(item.episode_id)) % len(ACTIONS)]) for item in batch]


def measure(env_id: str, episodes: int, num_envs: int, max_turns: int) -> dict[str, Any]:
    config = RunConfig(env_id=env_id, agent="cycle", episodes=episodes, seed=0, num_envs=num_envs, max_turns=max_turns)
    gc.collect()
    started = time.perf_counter()
    result = Runner(config, CycleAgent()).run()
    runner_s = time.perf_counter() - started
    turns = sum(t.num_turns for t in result.trajectories)

    # Bare replay: the same actions on fresh environments, one env per episode like the runner's
    # reset-per-episode; env construction is done up front and not timed.
    envs = [envgym.make(env_id) for _ in range(num_envs)]
    plans = [(t.seed, t.actions) for t in result.trajectories]
    gc.collect()
    started = time.perf_counter()
    for i, (seed, actions) in enumerate(plans):
        env = envs[i % num_envs]
        env.reset(seed=seed)
        step = env.step
        for action in actions:
            step(action)
    bare_s = time.perf_counter() - started
    for env in envs:
        env.close()
    return {
        "env_id": env_id,
        "episodes": episodes,
        "num_envs": num_envs,
        "turns": turns,
        "runner_s": runner_s,
        "bare_s": bare_s,
        "overhead_us_per_turn": (runner_s - bare_s) / turns * 1e6,
        "runner_turns_per_s": turns / runner_s,
        "bare_turns_per_s": turns / bare_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="envgym/Sokoban-v0")
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--max-turns", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3, help="Best-of repeats per setting (noise on a shared VM).")
    parser.add_argument("--quick", action="store_true", help="A few seconds: 60 episodes, 1 repeat.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.episodes, args.repeats = 60, 1
    rows = []
    for num_envs in args.num_envs:
        runs = [measure(args.env, args.episodes, num_envs, args.max_turns) for _ in range(args.repeats)]
        best = min(runs, key=lambda r: r["overhead_us_per_turn"])
        best["overhead_us_median"] = statistics.median(r["overhead_us_per_turn"] for r in runs)
        rows.append(best)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'env':24} {'envs':>5} {'turns':>7} {'runner t/s':>11} {'bare t/s':>10} {'overhead us/turn':>17} {'(median)':>9}"
    )
    for r in rows:
        print(
            f"{r['env_id']:24} {r['num_envs']:>5} {r['turns']:>7} {r['runner_turns_per_s']:>11.0f} "
            f"{r['bare_turns_per_s']:>10.0f} {r['overhead_us_per_turn']:>17.1f} {r['overhead_us_median']:>9.1f}"
        )
    print("target: <= 50 us per turn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
