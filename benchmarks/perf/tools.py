"""Tools family performance: reset time, steps/s, SQL query latency at 1M rows, search p50 at 100k articles.

Prints (one process, one core):

* per id (SQL, search and code): the mean wall time of ``reset(seed=i)`` over ``--resets`` seeds (databases already
  cached: the first build is reported apart), then steps/s over ``--steps`` steps of random
  valid tool calls from ``sample_action`` (schema look-ups, count queries, now and then a
  submit), resetting whenever an episode ends (only the steps are timed);
* query latency: the oracle's query for every question template, run through ``execute_sql``
  on a database of ``--rows`` events (default 1,000,000: the ``perf`` size), p50 and max in ms
  per template, and the time the database took to build (once; then cached);
* search latency: p50 and p99 of the search tool over an encyclopedia of ``--articles``
  articles (default 100,000; the index is built once, then cached).

Usage::

    python benchmarks/perf/tools.py                 # the full run (builds the 1M-row databases once)
    python benchmarks/perf/tools.py --quick --json  # tiny settings (the test of this script)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

import envgym

SQL_IDS = ("envgym/Tools-SQL-v0", "envgym/Tools-SQL-Easy-v0", "envgym/Tools-SQL-Medium-v0", "envgym/Tools-SQL-Hard-v0")
IDS = (*SQL_IDS, "envgym/Tools-Search-v0", "envgym/Tools-Code-v0")
#: Steps of the code env: one in 50 of ``--steps``, at most this many (each runs a sandboxed program).
CODE_STEPS = 100


def speed(env_id: str, resets: int, steps: int, size: str) -> dict[str, float]:
    env = (envgym.make(env_id, size=size) if env_id in SQL_IDS else envgym.make(env_id)).unwrapped
    if env_id == "envgym/Tools-Code-v0":
        resets, steps = min(resets, 20), max(1, min(steps // 50, CODE_STEPS))
    start = time.perf_counter()
    env.reset(seed=0)
    first_ms = (time.perf_counter() - start) * 1e3
    for seed in range(resets):  # build every database of the id once before timing
        env.reset(seed=seed)
    start = time.perf_counter()
    for seed in range(resets):
        env.reset(seed=seed)
    reset_ms = (time.perf_counter() - start) / resets * 1e3
    rng = random.Random(0)
    env.reset(seed=0)
    spent = 0.0
    episodes = 1
    for _ in range(steps):
        action = env.sample_action(rng)
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        spent += time.perf_counter() - start
        if terminated or truncated:
            env.reset(seed=rng.randrange(1 << 30))
            episodes += 1
    env.close()
    return {
        "first_reset_ms": first_ms,
        "reset_ms": reset_ms,
        "steps": steps,
        "steps_per_s": steps / spent,
        "episodes": episodes,
    }


def query_latency(size: str, repeats: int) -> dict[str, Any]:
    from envgym.agents.solvers.tools_sql import Solver
    from envgym.environments.tools import sqldata
    from envgym.environments.tools.sql import SQLEnv

    env = SQLEnv(size=size, max_turns=50)
    start = time.perf_counter()
    env.reset(seed=0, options={"schema": "shop", "instance": 0, "template": "count_category"})
    build_s = time.perf_counter() - start
    rows: dict[str, dict[str, float]] = {}
    for template in sqldata.TEMPLATES:
        times: list[float] = []
        for seed in range(repeats):
            obs, info = env.reset(seed=seed, options={"schema": "shop", "instance": 0, "template": template})
            solver = Solver("envgym/Tools-SQL-v0", seed)
            while True:  # the oracle's look-ups, then its one execute_sql (timed), then stop
                action = solver.act(obs, info)
                if '"execute_sql"' in action:
                    start = time.perf_counter()
                    obs, _, _, _, info = env.step(action)
                    times.append((time.perf_counter() - start) * 1e3)
                    if obs.startswith("Tool error"):
                        raise RuntimeError(f"the oracle's query failed at {size}: {obs[:200]}")
                    break
                obs, _, _, _, info = env.step(action)
        rows[template] = {"p50_ms": statistics.median(times), "max_ms": max(times)}
    env.close()
    return {"events": sqldata.SIZES[size], "build_or_open_s": build_s, "templates": rows}


def search_latency(articles: int, queries: int) -> dict[str, float]:
    from envgym.environments.tools.search import search_latency as measure

    return measure(articles, queries=queries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resets", type=int, default=100, help="timed resets per id")
    parser.add_argument("--steps", type=int, default=5_000, help="timed steps per id")
    parser.add_argument("--repeats", type=int, default=5, help="queries per template for the latency figure")
    parser.add_argument("--articles", type=int, default=100_000, help="encyclopedia size for the search latency")
    parser.add_argument("--quick", action="store_true", help="tiny settings: small databases, few steps")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if min(args.resets, args.steps, args.repeats, args.articles) < 1:
        parser.error("--resets, --steps, --repeats and --articles must be at least 1")
    size, latency_size = "default", "perf"
    if args.quick:
        args.resets, args.steps, args.repeats = min(args.resets, 5), min(args.steps, 100), min(args.repeats, 2)
        size = latency_size = "small"
        args.articles = min(args.articles, 1_000)
    report = {
        "size": size,
        "speed": {env_id: speed(env_id, args.resets, args.steps, size) for env_id in IDS},
        "latency": query_latency(latency_size, args.repeats),
        "search": search_latency(args.articles, queries=50 if args.quick else 200),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for env_id, row in report["speed"].items():
        print(f"{env_id:30s} reset {row['reset_ms']:7.2f} ms  {row['steps_per_s']:9,.0f} steps/s")
    latency = report["latency"]
    print(
        f"execute_sql latency at {latency['events']:,} events (database ready in {latency['build_or_open_s']:.1f} s):"
    )
    for template, row in latency["templates"].items():
        print(f"  {template:20s} p50 {row['p50_ms']:8.2f} ms  max {row['max_ms']:8.2f} ms")
    search = report["search"]
    print(
        f"search at {search['articles']:,.0f} articles: p50 {search['search_p50_ms']:.2f} ms, "
        f"p99 {search['search_p99_ms']:.2f} ms (index ready in {search['setup_s']:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
