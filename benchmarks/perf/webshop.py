"""WebShop performance and baseline report.

Prints (one process, one core):

* per catalogue size: catalogue generation time (every product made once, as the index build
  streams them), search index build time (FTS5 + impact arrays), and search latency p50/p99 over
  the queries an agent sends (the first test goals' instructions without the price clause, and
  their product types), for the pruned search (``SearchIndex.search``) and, side by side on the
  same queries (alternating which goes first), the exhaustive one it replaced
  (``search_exhaustive``, or with ``--baseline REV`` the ``search`` of ``search.py`` at git
  revision ``REV``), with the number of rankings that differ (0 expected), the load average and
  the memory the pruning adds (per-term maxima and block bounds, shared on disk; one float64
  accumulator per product, per process; float32 block-bound sums per query term, per search);
* text-mode reset time (ms) and steps/s (random admissible actions, observation and info
  included; resets excluded) on the default 10,000-product catalogue;
* browser mode (``envgym/WebShop-Browser-v0``, real Chromium): steps/s and seconds per oracle
  episode (reset included);
* the resident memory an env instance adds with the 100,000-product catalogue once the index is
  built, split into its own (anonymous) memory and the index pages it maps (file-backed, shared
  through the page cache by every env and worker process, not copied), for a first and a second
  instance;
* the oracle's (``envgym.agents.solvers.webshop``) and the random agent's mean score and
  success on the test split.

Usage::

    python benchmarks/perf/webshop.py                          # sizes 10k and 100k, 500 episodes
    python benchmarks/perf/webshop.py --sizes 10000,100000,1000000 --episodes 500 --json
    python benchmarks/perf/webshop.py --sizes 1000000 --search-only --baseline 63d6b63 --cache /tmp/webshop-cache

Indexes are cached under ``--cache`` (default: the envgym cache); ``--fresh`` rebuilds them so the
build is timed.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from envgym.agents.solvers.webshop import Solver, parse_instruction
from envgym.environments.webshop.browser_env import WebShopBrowserEnv
from envgym.environments.webshop.catalogue import GeneratedCatalogue, generate_product
from envgym.environments.webshop.env import WebShopEnv
from envgym.environments.webshop.search import SearchIndex, default_index_dir

import envgym


def rss_mb() -> dict[str, float]:
    """Resident memory (MB): total, anonymous (this process's own) and file-backed (shared page cache)."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) / 1024
    return out


def baseline_search(rev: str) -> Any:
    """``SearchIndex`` as ``environments/webshop/search.py`` had it at git revision ``rev``."""
    root = Path(__file__).resolve().parents[2]
    try:
        source = subprocess.run(
            ["git", "show", f"{rev}:environments/webshop/search.py"],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise SystemExit(f"--baseline {rev!r}: could not read search.py at that revision ({err}).") from err
    folder = Path(tempfile.mkdtemp(prefix="envgym-webshop-baseline-"))
    (folder / "search_baseline.py").write_text(source)
    spec = importlib.util.spec_from_file_location(f"webshop_search_{rev}", folder / "search_baseline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    shutil.rmtree(folder, ignore_errors=True)
    return module.SearchIndex


def percentiles(times: list[float]) -> tuple[float, float]:
    """p50 and p99 in milliseconds."""
    times = sorted(times)
    return 1e3 * times[len(times) // 2], 1e3 * times[int(0.99 * (len(times) - 1))]


def search_figures(
    size: int, cache: str | None, fresh: bool, queries: int, baseline: str | None = None
) -> dict[str, Any]:
    catalogue = GeneratedCatalogue(size)
    start = time.perf_counter()
    for i in range(min(size, 20_000)):
        generate_product(0, i)
    gen_per_product = (time.perf_counter() - start) / min(size, 20_000)
    if fresh:
        shutil.rmtree(default_index_dir(catalogue, cache), ignore_errors=True)
    start = time.perf_counter()
    index = SearchIndex.for_catalogue(catalogue, cache)
    build = time.perf_counter() - start
    before = baseline_search(baseline)(index.folder).search if baseline else index.search_exhaustive
    texts = [parse_instruction(catalogue.goal(i).instruction)[0] for i in range(queries)]
    texts += [catalogue.goal(i).query for i in range(queries // 2)]
    differ = 0
    for q in texts:  # warm: stems cached, pages mapped; and the two rankings compared
        differ += index.search(q) != before(q)
    load = os.getloadavg()
    lat: list[float] = []
    lat_before: list[float] = []
    cpu: list[float] = []
    cpu_before: list[float] = []
    for k, q in enumerate(texts):
        pair = ((index.search, lat, cpu), (before, lat_before, cpu_before))
        for search, times, cpu_times in pair if k % 2 == 0 else pair[::-1]:
            t, c = time.perf_counter(), time.thread_time()
            search(q)
            cpu_times.append(time.thread_time() - c)
            times.append(time.perf_counter() - t)
    p50, p99 = percentiles(lat)
    b50, b99 = percentiles(lat_before)
    arrays = index._load()
    return {
        "size": size,
        "generation_s": gen_per_product * size,
        "index_build_s": build,
        "search_p50_ms": p50,
        "search_p99_ms": p99,
        "before_p50_ms": b50,
        "before_p99_ms": b99,
        # CPU time of the searching thread: what a busy machine's time slicing does not inflate
        "search_cpu_p50_ms": percentiles(cpu)[0],
        "before_cpu_p50_ms": percentiles(cpu_before)[0],
        "before": f"search.py at {baseline}" if baseline else "search_exhaustive",
        "p50_speedup": b50 / p50,
        "rankings_differ": differ,
        "queries": len(lat),
        "loadavg_start": [round(x, 2) for x in load],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "pruning_mb": {
            "maxima_on_disk": arrays.maxima.nbytes / 2**20,
            "block_bounds_on_disk": arrays.blocks.nbytes / 2**20,  # memory-mapped, shared by processes
            "accumulator_per_process": 9 * size / 2**20,
            "block_sums_per_query_term": 4 * arrays.blocks.shape[1] / 2**20,  # while a search runs
        },
    }


def speed(cache: str | None, resets: int, steps: int) -> dict[str, float]:
    env = WebShopEnv(cache_dir=cache, split="test")
    env.reset(seed=0)
    times = []
    for seed in range(resets):
        t = time.perf_counter()
        env.reset(seed=seed)
        times.append(time.perf_counter() - t)
    rng = random.Random(0)
    env.reset(seed=0)
    stepped, elapsed, seed = 0, 0.0, 0
    while stepped < steps:
        action = env.sample_action(rng)
        t = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        elapsed += time.perf_counter() - t
        stepped += 1
        if terminated or truncated:
            seed += 1
            env.reset(seed=seed)
    return {"reset_ms": 1e3 * statistics.fmean(times), "steps_per_s": stepped / elapsed}


def browser(cache: str | None, episodes: int) -> dict[str, float]:
    """Oracle episodes in envgym/WebShop-Browser-v0 (real Chromium): steps/s and seconds per episode."""
    env = WebShopBrowserEnv(cache_dir=cache, split="test")
    try:
        env.reset(seed=0)  # launch the browser before timing
        steps, step_time, episode_times = 0, 0.0, []
        for seed in range(episodes):
            start = time.perf_counter()
            obs, info = env.reset(seed=seed)
            solver = Solver("envgym/WebShop-v0", seed)
            while True:
                t = time.perf_counter()
                obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
                step_time += time.perf_counter() - t
                steps += 1
                if terminated or truncated:
                    break
            episode_times.append(time.perf_counter() - start)
    finally:
        env.close()
    return {"episodes": episodes, "steps_per_s": steps / step_time, "episode_s": statistics.fmean(episode_times)}


def memory(cache: str | None, size: int) -> dict[str, float]:
    """What one env instance adds (20 episodes played), and what a second one adds on top."""
    WebShopEnv(catalogue_size=size, cache_dir=cache).reset(seed=0)  # build / open the index first
    out: dict[str, float] = {"size": size}
    envs = []
    for label in ("first", "second"):
        gc.collect()
        before = rss_mb()
        env = WebShopEnv(catalogue_size=size, cache_dir=cache, split="test")
        for seed in range(20):
            env.reset(seed=seed)
            env.step(env.sample_action(random.Random(seed)))
        envs.append(env)
        gc.collect()
        after = rss_mb()
        out[f"{label}_env_anon_mb"] = after["RssAnon"] - before["RssAnon"]
        out[f"{label}_env_file_mb"] = after["RssFile"] - before["RssFile"]
    out["rss_mb_total"] = rss_mb()["VmRSS"]
    return out


def agents(cache: str | None, episodes: int) -> dict[str, float]:
    env = WebShopEnv(cache_dir=cache, split="test")
    out: dict[str, list[float]] = {"oracle": [], "oracle_win": [], "random": [], "random_win": []}
    for seed in range(episodes):
        for name in ("oracle", "random"):
            obs, info = env.reset(seed=seed)
            solver, rng = Solver("envgym/WebShop-v0", seed), random.Random(seed)
            while True:
                action = solver.act(obs, info) if name == "oracle" else rng.choice(info["admissible_actions"])
                obs, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            out[name].append(info["reward_components"]["webshop_reward"])
            out[f"{name}_win"].append(float(info["success"]))
    return {k: statistics.fmean(v) for k, v in out.items()} | {"episodes": episodes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated catalogue sizes")
    parser.add_argument("--episodes", type=int, default=500, help="test-split episodes per agent")
    parser.add_argument(
        "--queries", type=int, default=400, help="instructions timed per size (then half as many product queries)"
    )
    parser.add_argument("--resets", type=int, default=500)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--browser-episodes", type=int, default=10, help="browser-mode episodes (0: skip)")
    parser.add_argument("--memory-size", type=int, default=100_000, help="catalogue size of the memory figure")
    parser.add_argument("--cache", default=None, help="index cache folder (default: the envgym cache)")
    parser.add_argument("--fresh", action="store_true", help="rebuild indexes in a temporary folder (times the build)")
    parser.add_argument(
        "--baseline", default=None, help="git revision whose search.py is timed beside (default: search_exhaustive)"
    )
    parser.add_argument("--search-only", action="store_true", help="only the search figures (skip the env sections)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    cache = args.cache
    tmp = None
    if args.fresh and cache is None:
        tmp = cache = tempfile.mkdtemp(prefix="envgym-webshop-perf-")
    try:
        report: dict[str, Any] = {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "envgym": envgym.__version__,
            "search": [],
        }
        for size in sizes:
            print(f"catalogue {size:,} ...", file=sys.stderr)
            report["search"].append(search_figures(size, cache, args.fresh, args.queries, args.baseline))
        if args.search_only:
            return print_report(report, args.json)
        print("text-mode speed ...", file=sys.stderr)
        report["speed"] = speed(cache, args.resets, args.steps)
        if args.browser_episodes > 0:
            print("browser mode ...", file=sys.stderr)
            report["browser"] = browser(cache, args.browser_episodes)
        print("memory ...", file=sys.stderr)
        report["memory"] = memory(cache, args.memory_size)
        print("agents ...", file=sys.stderr)
        report["agents"] = agents(cache, args.episodes)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return print_report(report, args.json)


def print_report(report: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"envgym {report['envgym']}, python {report['python']}, {report['platform']}, one process\n")
    print(
        f"{'products':>10}{'generate s':>12}{'index s':>10}{'search p50 ms':>15}{'p99 ms':>9}"
        f"{'before p50':>12}{'p99':>9}{'x p50':>7}{'cpu p50':>9}{'before':>8}{'differ':>8}  load avg 1/5/15 min (start; end)"
    )
    for row in report["search"]:
        print(
            f"{row['size']:>10,}{row['generation_s']:>12.1f}{row['index_build_s']:>10.1f}"
            f"{row['search_p50_ms']:>15.2f}{row['search_p99_ms']:>9.2f}{row['before_p50_ms']:>12.2f}"
            f"{row['before_p99_ms']:>9.2f}{row['p50_speedup']:>7.1f}{row['search_cpu_p50_ms']:>9.2f}"
            f"{row['before_cpu_p50_ms']:>8.2f}{row['rankings_differ']:>8}  "
            f"{' '.join(map(str, row['loadavg_start']))}; {' '.join(map(str, row['loadavg_end']))}"
        )
    before = report["search"][0]["before"] if report["search"] else ""
    print(f"(before: {before}, timed on the same queries, alternating which goes first)")
    if "speed" not in report:
        return 0
    s, m, a = report["speed"], report["memory"], report["agents"]
    print(f"\ntext mode, 10,000 products: reset {s['reset_ms']:.3f} ms, {s['steps_per_s']:,.0f} steps/s")
    if "browser" in report:
        b = report["browser"]
        print(f"browser mode (Chromium): {b['steps_per_s']:.1f} steps/s, {b['episode_s']:.2f} s per oracle episode")
    print(
        f"memory with {m['size']:,} products: first env +{m['first_env_anon_mb']:.1f} MB own "
        f"+{m['first_env_file_mb']:.1f} MB shared index pages; second env +{m['second_env_anon_mb']:.1f} MB own "
        f"+{m['second_env_file_mb']:.1f} MB shared (process {m['rss_mb_total']:.0f} MB)"
    )
    print(
        f"test split, {a['episodes']} episodes: oracle score {a['oracle']:.3f}, success {100 * a['oracle_win']:.1f}%; "
        f"random score {a['random']:.3f}, success {100 * a['random_win']:.1f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
