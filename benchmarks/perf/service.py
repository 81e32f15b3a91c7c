"""Customer-service domains: speed and the baseline table with pass^k.

Prints (one process, one core):

* per domain: reset time (ms) and steps/s (random actions from ``sample_action``: tool calls with
  arguments of the right types, short messages, ``done``; the scripted user answering included;
  resets excluded);
* the baseline table: for each domain and agent (the oracle, the random agent, and with ``--llm``
  the bundled SmolLM2 zero-shot on a few tasks), success rate, mean reward and pass^1..pass^k
  over ``--tasks`` test tasks with ``--trials`` trials each (tau2-bench's pass^k: per task
  ``C(successes, k) / C(trials, k)``, averaged over tasks), through the rollout harness.

Usage::

    python benchmarks/perf/service.py                           # 100 test tasks x 4 trials per domain
    python benchmarks/perf/service.py --domains retail --tasks 20 --trials 4 --llm 5 --json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sys
import time
from typing import Any

from envgym.environments.service.catalog import DOMAINS

import envgym
from envgym.rollout import PromptConfig, RunConfig, Runner


def speed(domain: str, seconds: float) -> dict[str, Any]:
    env = envgym.make(f"envgym/Service-{DOMAINS[domain][2]}-v0").unwrapped
    rng = random.Random(0)
    t0 = time.perf_counter()
    resets = 0
    while time.perf_counter() - t0 < seconds / 4 or resets < 5:
        env.reset(seed=resets)
        resets += 1
    reset_ms = (time.perf_counter() - t0) / resets * 1000
    steps, seed, elapsed = 0, 10_000, 0.0
    env.reset(seed=seed)
    while elapsed < seconds:
        action = env.sample_action(rng)
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        elapsed += time.perf_counter() - start
        steps += 1
        if terminated or truncated:
            seed += 1
            env.reset(seed=seed)
    return {"domain": domain, "reset_ms": reset_ms, "steps_per_s": steps / elapsed}


def pass_hat(successes: list[list[bool]], k: int) -> float:
    """tau2-bench's pass^k averaged over tasks (each task needs at least k trials)."""
    values = [math.comb(sum(s), k) / math.comb(len(s), k) for s in successes]
    return sum(values) / len(values)


def table_row(domain: str, agent: str, tasks: int, trials: int, **options: Any) -> dict[str, Any]:
    config = RunConfig(
        env_id=f"envgym/Service-{DOMAINS[domain][2]}-v0",
        env_kwargs={"split": "test"},
        agent=agent,
        agent_options=options,
        episodes=tasks * trials,
        group_size=trials,
        seed=0,
        prompt=PromptConfig(history="full", max_new_tokens=160, stop_at_action=True),
    )
    t0 = time.perf_counter()
    result = Runner(config).run()
    seconds = time.perf_counter() - t0
    by_task: dict[int, list[bool]] = {}
    for t in result.trajectories:
        by_task.setdefault(int(t.seed), []).append(bool(t.success))
    successes = list(by_task.values())
    rewards = [float(t.total_reward) for t in result.trajectories]
    row = {
        "domain": domain,
        "agent": agent,
        "tasks": len(successes),
        "trials": trials,
        "success_rate": sum(map(sum, successes)) / sum(map(len, successes)),
        "mean_reward": sum(rewards) / len(rewards),
        "mean_turns": sum(t.num_turns for t in result.trajectories) / len(result.trajectories),
        "seconds": seconds,
    }
    for k in range(1, trials + 1):
        row[f"pass^{k}"] = pass_hat(successes, k)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated domains")
    parser.add_argument("--tasks", type=int, default=100, help="test tasks per domain and agent (seeds 0..N-1)")
    parser.add_argument("--trials", type=int, default=4, help="trials per task (pass^1..pass^k)")
    parser.add_argument("--seconds", type=float, default=2.0, help="timing window for steps/s")
    parser.add_argument("--agents", default="oracle,random", help="comma-separated agent specs for the table")
    parser.add_argument("--llm", type=int, default=0, help="also run the bundled SmolLM2 on this many tasks")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown:
        parser.error(f"unknown domains {unknown}; domains: {', '.join(DOMAINS)}")
    report: dict[str, Any] = {"python": sys.version.split()[0], "machine": platform.machine(), "speed": [], "table": []}
    for domain in domains:
        report["speed"].append(speed(domain, args.seconds))
        if not args.json:
            s = report["speed"][-1]
            print(f"{domain:8s} reset {s['reset_ms']:.2f} ms  steps/s {s['steps_per_s']:,.0f}", flush=True)
    runs = [(a.strip(), args.tasks, {}) for a in args.agents.split(",") if a.strip()]
    if args.llm:
        runs.append(("hf:smollm2", args.llm, {}))
    for domain in domains:
        for agent, tasks, options in runs:
            row = table_row(domain, agent, tasks, args.trials, **options)
            report["table"].append(row)
            if not args.json:
                passes = "  ".join(f"pass^{k} {row[f'pass^{k}']:.3f}" for k in range(1, args.trials + 1))
                print(
                    f"{domain:8s} {agent:11s} tasks {row['tasks']:3d}  success {row['success_rate']:.3f}  reward "
                    f"{row['mean_reward']:.3f}  turns {row['mean_turns']:.1f}  {passes}  ({row['seconds']:.0f} s)",
                    flush=True,
                )
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
