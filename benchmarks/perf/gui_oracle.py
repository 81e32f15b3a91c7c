"""Success of the MiniWoB oracle (``envgym.agents.solvers.miniwob``) and of the random agent on
the MiniWoB tasks, per task (LLM agents: ``envgym run ... --agent hf:smollm2``).

    .venv/bin/python benchmarks/perf/gui_oracle.py --agents oracle --seeds 100 --out oracle.json
    .venv/bin/python benchmarks/perf/gui_oracle.py --agents random --seeds 20 --max-turns 10 --out random.json
    .venv/bin/python benchmarks/perf/gui_oracle.py --tasks click-button,enter-text --seeds 5 --json   # a smoke run

(benchmarks/perf/results/gui_oracle.json holds the two runs' task rows together.)

Every episode is ``reset(seed=s)`` of ``envgym/MiniWoB-<task>-v0`` (split ``--split``, seeds
``--seed0 .. --seed0+seeds-1``) played to its end (MiniWoB's done, or the env's turn limit).
Success is the env's ``info["success"]`` (MiniWoB's raw reward > 0). The random agent plays the
env's own ``sample_action``. One Chromium serves the whole run. The tasks in
``WANTS_BOXES`` (two buttons that may overlap) are made with ``boxes=True``, as in the gui-v1 suite.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

import envgym


def _oracle_factory(env_id: str, seed: int) -> Any:
    from envgym.agents.solvers.miniwob import Solver

    return Solver(env_id, seed)


def _episode(env: Any, seed: int, agent: str) -> tuple[bool, int, str]:
    obs, info = env.reset(seed=seed)
    rng = random.Random(seed)
    policy = _oracle_factory(env.spec.id if env.spec else "", seed) if agent == "oracle" else None
    turns = 0
    last = ""
    while True:
        if agent == "oracle":
            action = policy.act(obs, info)
        else:
            action = env.unwrapped.sample_action(rng)
        last = action
        obs, _reward, terminated, truncated, info = env.step(action)
        turns += 1
        if terminated or truncated:
            err = getattr(policy, "last_error", None) or ""
            return bool(info.get("success")), turns, err or last


def main(argv: list[str] | None = None) -> int:
    from envgym.agents.solvers.miniwob import SUPPORTED, WANTS_BOXES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tasks", default=",".join(SUPPORTED), help="comma-separated task names (default: every supported one)"
    )
    ap.add_argument("--agents", default="oracle,random", help="comma-separated: oracle, random")
    ap.add_argument("--seeds", type=int, default=100, help="episodes per task and agent")
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--split", default="test")
    ap.add_argument(
        "--max-turns", type=int, default=20, help="turn limit per episode (the suite's; the env's own default is 10)"
    )
    ap.add_argument(
        "--json", action="store_true", help="print the results as JSON on stdout (the table goes to stderr)"
    )
    ap.add_argument("--out", default=None, help="also write the JSON results to this file")
    ap.add_argument("--verbose", action="store_true", help="print every failed episode")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error("--seeds must be >= 1")
    log = sys.stderr if args.json else sys.stdout
    tasks = [t for t in args.tasks.split(",") if t]
    agents = [a for a in args.agents.split(",") if a]
    results: dict[str, Any] = {
        "seeds": args.seeds,
        "seed0": args.seed0,
        "split": args.split,
        "max_turns": args.max_turns,
        "tasks": {},
    }
    t_start = time.perf_counter()
    for agent in agents:
        if agent not in ("oracle", "random"):
            ap.error(f"unknown agent {agent!r}: oracle or random (LLM agents: envgym run --agent hf:smollm2)")
        for task in tasks:
            env = envgym.make(
                f"envgym/MiniWoB-{task}-v0", split=args.split, max_turns=args.max_turns, boxes=task in WANTS_BOXES
            )
            wins, turns, t0 = 0, 0, time.perf_counter()
            try:
                for seed in range(args.seed0, args.seed0 + args.seeds):
                    ok, n, last = _episode(env, seed, agent)
                    wins += ok
                    turns += n
                    if not ok and args.verbose:
                        print(f"  fail {task} seed={seed} turns={n} last={last!r}", file=log, flush=True)
            finally:
                env.close()
            row = results["tasks"].setdefault(task, {})
            row[agent] = {
                "success": wins / args.seeds,
                "wins": wins,
                "episodes": args.seeds,
                "mean_turns": turns / args.seeds,
                "seconds": round(time.perf_counter() - t0, 2),
            }
            print(
                f"{agent:>10} {task:<28} {wins:>4}/{args.seeds}  turns {turns / args.seeds:4.1f}  {time.perf_counter() - t0:6.1f}s",
                file=log,
                flush=True,
            )
    results["seconds"] = round(time.perf_counter() - t_start, 1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1, sort_keys=True)
            fh.write("\n")
    if args.json:
        print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
