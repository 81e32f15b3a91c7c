"""Household performance and baseline report.

Prints, for each difficulty preset (through ``envgym.make``, one process, one core):

* reset time (world + task generation, ms: mean and p99) and step throughput (steps/s with
  random admissible actions, text observation and info included; resets excluded);
* the planner's (``envgym.agents.solvers.household``) success rate and mean turns per task type
  and split, and the random agent's (uniform over ``admissible_actions``) success rate;
* the distribution of optimal plan lengths per task type. Optimal lengths come from the
  privileged closed-form planner :func:`envgym.environments.household.planner.optimal_plan`
  (exhaustive over goal objects, target receptacles, appliances and lamps; checked against
  breadth-first search in ``tests/environments/household/test_household.py``). It reads the true world state, so it
  is a reference for the report, not an agent.

Usage::

    python benchmarks/perf/household.py                 # 300 episodes per split and difficulty
    python benchmarks/perf/household.py --episodes 1000 --difficulty medium
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import random
import statistics
import sys
import time
from typing import Any

from envgym.agents.solvers.household import Solver
from envgym.environments.household.catalogue import TASK_TYPES

import envgym

SPLITS = ("train", "valid_seen", "valid_unseen")
SHORT = {
    "pick_and_place_simple": "pick_place",
    "look_at_obj_in_light": "look_in_light",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick_two",
}


def speed(env_id: str, resets: int, steps: int) -> tuple[float, float, float, float]:
    """(mean reset ms, mean and p99 reset CPU ms, steps/s).

    The CPU time of the thread is reported beside the wall time: on a loaded machine the wall
    time of a sub-millisecond call has scheduler spikes that say nothing about the code.
    """
    env = envgym.make(env_id)
    env.reset(seed=0)  # warm up imports and caches
    times, cpu = [], []
    for seed in range(resets):
        start, start_cpu = time.perf_counter(), time.thread_time()
        env.reset(seed=seed)
        cpu.append(time.thread_time() - start_cpu)
        times.append(time.perf_counter() - start)
    cpu.sort()
    rng = random.Random(0)
    _, info = env.reset(seed=0)
    stepped, elapsed, seed = 0, 0.0, 0
    while stepped < steps:
        action = rng.choice(info["admissible_actions"])
        start = time.perf_counter()
        _, _, terminated, truncated, info = env.step(action)
        elapsed += time.perf_counter() - start
        stepped += 1
        if terminated or truncated:
            seed += 1
            _, info = env.reset(seed=seed)
    return (
        1e3 * statistics.fmean(times),
        1e3 * statistics.fmean(cpu),
        1e3 * cpu[int(0.99 * (len(cpu) - 1))],
        stepped / elapsed,
    )


def play(env_id: str, split: str, episodes: int) -> dict[str, dict[str, list[float]]]:
    """Per task type: planner wins and turns, random wins, optimal lengths."""
    env = envgym.make(env_id, split=split)
    out: dict[str, dict[str, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        task_type = info["task"]["task_type"]
        row = out[task_type]
        row["optimal"].append(len(env.unwrapped.optimal_plan()))
        solver = Solver(env_id, seed)
        turns = 0
        while True:
            obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
            turns += 1
            if terminated or truncated:
                break
        row["planner"].append(float(info["success"]))
        row["planner_turns"].append(turns)
        rng = random.Random(seed)
        obs, info = env.reset(seed=seed)
        while True:
            obs, _, terminated, truncated, info = env.step(rng.choice(info["admissible_actions"]))
            if terminated or truncated:
                break
        row["random"].append(float(info["success"]))
    return out


def pct(values: list[float]) -> str:
    return f"{100 * statistics.fmean(values):5.1f}%" if values else "   -  "


def measure(levels: list[str], episodes: int, resets: int, steps: int) -> dict[str, Any]:
    """Every number of the report, JSON-ready."""
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "envgym": envgym.__version__,
        "episodes_per_split": episodes,
        "speed": [],
        "success": [],
        "optimal_length": [],
    }
    for level in levels:
        env_id = f"envgym/Household-{level.capitalize()}-v0"
        print(f"timing {env_id} ...", file=sys.stderr)
        wall, mean, p99, rate = speed(env_id, resets, steps)
        report["speed"].append(
            {"id": env_id, "reset_wall_ms": wall, "reset_cpu_ms": mean, "reset_cpu_p99_ms": p99, "steps_per_s": rate}
        )
    for level in levels:
        env_id = f"envgym/Household-{level.capitalize()}-v0"
        lengths: dict[str, list[float]] = collections.defaultdict(list)
        for split in SPLITS:
            print(f"playing {env_id} {split} ...", file=sys.stderr)
            for task_type, row in sorted(play(env_id, split, episodes).items()):
                lengths[task_type] += row["optimal"]
                report["success"].append(
                    {
                        "id": env_id,
                        "split": split,
                        "task_type": task_type,
                        "episodes": len(row["planner"]),
                        "planner_success": statistics.fmean(row["planner"]),
                        "planner_turns": statistics.fmean(row["planner_turns"]),
                        "random_success": statistics.fmean(row["random"]),
                    }
                )
        for task_type in TASK_TYPES:
            values = sorted(lengths[task_type])
            if not values:
                continue
            q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
            report["optimal_length"].append(
                {
                    "difficulty": level,
                    "task_type": task_type,
                    "min": values[0],
                    "p25": q[0],
                    "median": statistics.median(values),
                    "mean": statistics.fmean(values),
                    "p75": q[2],
                    "max": values[-1],
                    "histogram": {str(k): v for k, v in sorted(collections.Counter(int(x) for x in values).items())},
                }
            )
    return report


def print_tables(report: dict[str, Any]) -> None:
    print(f"envgym {report['envgym']}, python {report['python']}, {report['platform']}, one process\n")
    print(f"{'preset':<28}{'reset wall ms':>14}{'reset CPU ms':>14}{'CPU p99 ms':>12}{'steps/s':>12}")
    for row in report["speed"]:
        print(
            f"{row['id']:<28}{row['reset_wall_ms']:>14.3f}{row['reset_cpu_ms']:>14.3f}"
            f"{row['reset_cpu_p99_ms']:>12.3f}{row['steps_per_s']:>12,.0f}"
        )
    by_id: dict[str, dict[tuple[str, str], dict[str, Any]]] = collections.defaultdict(dict)
    for row in report["success"]:
        by_id[row["id"]][(row["split"], row["task_type"])] = row
    for env_id, rows in by_id.items():
        print(f"\n{env_id}: success rate per task type ({report['episodes_per_split']} episodes per split)")
        print(f"{'task type':<15}" + "".join(f"{split + ' planner':>26}{'random':>9}" for split in SPLITS))
        for task_type in TASK_TYPES:
            cells = ""
            for split in SPLITS:
                row = rows.get((split, task_type))
                if row is None:
                    cells += f"{'-':>26}{'-':>9}"
                    continue
                planner = f"{100 * row['planner_success']:.1f}% (n={row['episodes']}, {row['planner_turns']:.1f} t)"
                cells += f"{planner:>26}{100 * row['random_success']:>8.1f}%"
            print(f"{SHORT[task_type]:<15}{cells}")
    print("\nOptimal plan length per task type (privileged planner, all splits)")
    print(f"{'preset':<8}{'task type':<15}{'min':>5}{'p25':>6}{'median':>8}{'mean':>7}{'p75':>6}{'max':>5}  histogram")
    for row in report["optimal_length"]:
        hist = " ".join(f"{k}:{v}" for k, v in row["histogram"].items())
        print(
            f"{row['difficulty']:<8}{SHORT[row['task_type']]:<15}{row['min']:>5.0f}{row['p25']:>6.1f}"
            f"{row['median']:>8.1f}{row['mean']:>7.2f}{row['p75']:>6.1f}{row['max']:>5.0f}  {hist}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300, help="episodes per split and difficulty")
    parser.add_argument("--difficulty", default="easy,medium,hard", help="comma-separated presets")
    parser.add_argument("--resets", type=int, default=2000, help="resets timed per preset")
    parser.add_argument("--steps", type=int, default=50_000, help="steps timed per preset")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    args = parser.parse_args(argv)
    levels = [d.strip().lower() for d in args.difficulty.split(",") if d.strip()]
    unknown = [d for d in levels if d not in ("easy", "medium", "hard")]
    if unknown or args.episodes < 1 or args.resets < 1 or args.steps < 1:
        parser.error(
            f"--difficulty takes easy, medium and/or hard (got {args.difficulty!r}); "
            "--episodes, --resets and --steps must be positive"
        )
    report = measure(levels, args.episodes, args.resets, args.steps)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_tables(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
