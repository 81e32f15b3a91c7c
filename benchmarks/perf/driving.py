"""Driving performance and baseline report (``envgym/Drive-*`` over highway-env).

Prints (one process, one core):

* per scenario, the time per step of raw highway-env (the same highway-env class and config,
  stepped directly) and of envgym's text view (``DriveEnv``: scene text, action parsing, every
  reward component, info) and numeric view (``DriveKinematicsEnv``), measured in the same run
  on the same simulator seeds and the same action sequence (a seeded random available
  meta-action), episodes interleaved; the wrapper overhead in percent (target <= 10 %) and
  steps/s; resets excluded, their time reported apart;
* the baseline table: for the rule-based driver (``envgym.agents.solvers.driving``) and the
  random agent (uniform over the available meta-actions), on the test split: success rate
  (the scenario's goal reached without a collision), mean route progress, collision rate and
  mean highway-env return, over ``--episodes`` seeds per scenario.

Usage::

    python benchmarks/perf/driving.py                         # 4 scenarios, 100 episodes per agent
    python benchmarks/perf/driving.py --scenarios highway --episodes 20 --json
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from typing import Any

from envgym.agents.solvers.driving import Solver
from envgym.environments.driving.env import NAME, DriveEnv, DriveKinematicsEnv
from envgym.environments.driving.sim import SCENARIOS, DriveSim, simulator_seed

SEED_BASE = 10_000


def _sim_seed(split: str, seed: int) -> int:
    return simulator_seed(split, random.Random(f"{NAME}:{split}:{seed}"))


def time_steps(scenario: str, episodes: int, split: str, duration: float | None) -> dict[str, Any]:
    """Seconds per step of raw highway-env, the text view and the numeric view, same seeds and actions."""
    raw = DriveSim(scenario, duration=duration).env  # the highway-env object itself, stepped directly
    text = DriveEnv(scenario=scenario, duration=duration, split=split)
    numeric = DriveKinematicsEnv(scenario=scenario, duration=duration, split=split)
    cost = {"raw": 0.0, "text": 0.0, "numeric": 0.0}
    resets = {"raw": 0.0, "text": 0.0, "numeric": 0.0}
    steps = {"raw": 0, "text": 0, "numeric": 0}
    names = None
    for ep in range(episodes):
        seed = SEED_BASE + ep
        for kind in ("raw", "text", "numeric") if ep % 2 == 0 else ("numeric", "text", "raw"):
            rng = random.Random(seed)
            t0 = time.perf_counter()
            if kind == "raw":
                raw.reset(seed=_sim_seed(split, seed))
                names = raw.action_type.actions
                resets[kind] += time.perf_counter() - t0
                done = False
                while not done:
                    action = rng.choice(sorted(raw.get_available_actions()))
                    t0 = time.perf_counter()
                    _, _, terminated, truncated, _ = raw.step(action)
                    cost[kind] += time.perf_counter() - t0
                    steps[kind] += 1
                    # The wrappers also stop at the time limit (merge has none of its own) and off road.
                    done = terminated or truncated or raw.time >= (duration or SCENARIOS[scenario].duration) - 1e-9
                    done = done or not raw.vehicle.on_road or (scenario == "merge" and raw.vehicle.position[0] > 370)
            elif kind == "text":
                _, info = text.reset(seed=seed)
                resets[kind] += time.perf_counter() - t0
                done = False
                while not done:
                    ids = sorted(text._sim.available())
                    action = text._sim.names[rng.choice(ids)]
                    t0 = time.perf_counter()
                    _, _, terminated, truncated, info = text.step(action)
                    cost[kind] += time.perf_counter() - t0
                    steps[kind] += 1
                    done = terminated or truncated
            else:
                _, info = numeric.reset(seed=seed)
                resets[kind] += time.perf_counter() - t0
                done = False
                while not done:
                    action = rng.choice([i for i, ok in enumerate(info["action_mask"]) if ok])
                    t0 = time.perf_counter()
                    _, _, terminated, truncated, info = numeric.step(action)
                    cost[kind] += time.perf_counter() - t0
                    steps[kind] += 1
                    done = terminated or truncated
    assert names is not None
    out: dict[str, Any] = {"scenario": scenario, "episodes": episodes}
    for kind, seconds in cost.items():
        out[f"{kind}_ms_per_step"] = 1000.0 * seconds / max(steps[kind], 1)
        out[f"{kind}_steps_per_s"] = steps[kind] / seconds if seconds else 0.0
        out[f"{kind}_reset_ms"] = 1000.0 * resets[kind] / episodes
        out[f"{kind}_steps"] = steps[kind]
    for kind in ("text", "numeric"):
        out[f"{kind}_overhead_pct"] = 100.0 * (out[f"{kind}_ms_per_step"] / out["raw_ms_per_step"] - 1.0)
    text.close()
    numeric.close()
    raw.close()
    return out


def play(scenario: str, agent: str, episodes: int, split: str, duration: float | None) -> dict[str, Any]:
    """Success rate, mean progress, collision rate and mean return of ``agent`` on ``episodes`` seeds."""
    env = DriveEnv(scenario=scenario, duration=duration, split=split)
    success = collisions = 0
    progress: list[float] = []
    returns: list[float] = []
    steps = 0
    for ep in range(episodes):
        seed = ep
        obs, info = env.reset(seed=seed)
        solver = Solver(f"envgym/Drive-{scenario.capitalize()}-v0", seed)
        rng = random.Random(seed)
        total = 0.0
        while True:
            actions = info["admissible_actions"]
            action = solver.act(obs, info) if agent == "rule" else rng.choice(actions)
            obs, reward, terminated, truncated, info = env.step(action)
            total += reward
            steps += 1
            if terminated or truncated:
                break
        success += bool(info["success"])
        collisions += bool(info["collision"])
        progress.append(info["progress"])
        returns.append(total)
    env.close()
    return {
        "scenario": scenario,
        "agent": agent,
        "episodes": episodes,
        "success_rate": success / episodes,
        "mean_progress": statistics.fmean(progress),
        "collision_rate": collisions / episodes,
        "mean_return": statistics.fmean(returns),
        "mean_steps": steps / episodes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated scenario names")
    parser.add_argument("--episodes", type=int, default=100, help="test-split episodes per agent and scenario")
    parser.add_argument("--timing-episodes", type=int, default=20, help="episodes per view for the overhead figure")
    parser.add_argument("--split", default="test", choices=("train", "test"))
    parser.add_argument("--duration", type=float, default=None, help="time limit override in s (smoke tests)")
    parser.add_argument("--agents", default="rule,random", help="comma-separated: rule, random (empty: none)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    scenarios = [s for s in args.scenarios.split(",") if s]
    for s in scenarios:
        if s not in SCENARIOS:
            parser.error(f"unknown scenario {s!r}; choose from {', '.join(SCENARIOS)}")
    agents = [a for a in args.agents.split(",") if a]
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "split": args.split,
        "speed": [time_steps(s, args.timing_episodes, args.split, args.duration) for s in scenarios],
        "baselines": [play(s, a, args.episodes, args.split, args.duration) for s in scenarios for a in agents],
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{'scenario':<13}{'raw ms':>8}{'text ms':>9}{'overhead':>10}{'num ms':>8}{'overhead':>10}{'text steps/s':>14}"
    )
    for r in report["speed"]:
        print(
            f"{r['scenario']:<13}{r['raw_ms_per_step']:>8.2f}{r['text_ms_per_step']:>9.2f}"
            f"{r['text_overhead_pct']:>9.1f}%{r['numeric_ms_per_step']:>8.2f}{r['numeric_overhead_pct']:>9.1f}%"
            f"{r['text_steps_per_s']:>14.1f}"
        )
    print()
    print(f"{'scenario':<13}{'agent':<8}{'episodes':>9}{'success':>9}{'progress':>10}{'collision':>11}{'return':>9}")
    for r in report["baselines"]:
        print(
            f"{r['scenario']:<13}{r['agent']:<8}{r['episodes']:>9}{r['success_rate']:>9.2f}"
            f"{r['mean_progress']:>10.3f}{r['collision_rate']:>11.2f}{r['mean_return']:>9.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
