"""MiniWoB++ through envgym's browser layer vs the miniwob package's own Selenium environment.

For each task (click-button, click-checkboxes, enter-text, click-tab, choose-list), in one run and
on the same machine, both envs play the same kind of episodes: a reset, then clicks on random
elements of the page until MiniWoB ends the episode or ``--steps`` clicks were made. Reported per
env and task: env creation time, mean reset time, steps per second, and the browser's memory per
worker (PSS, summed over the worker's browser processes and the driver: Playwright's node driver
and Chromium for envgym; chromedriver and Chromium for Selenium).

* envgym: ``envgym.make("envgym/MiniWoB-<task>-v0")``, text observations (the accessibility
  tree), one Chromium per worker (Debian's ``/usr/bin/chromium`` through Playwright);
  ``--screenshots`` adds a screenshot to every observation (``obs="dict"``).
Memory is measured after the last episode, as PSS (shared pages split between processes), the
Chromium processes apart from the driver.

* miniwob: ``gymnasium.make("miniwob/<task>-v1")`` with Debian's ``chromium`` and
  ``chromium-driver`` (``MINIWOB_CHROME_BINARY`` / ``MINIWOB_CHROMEDRIVER``); its observation
  always carries the DOM elements and, unless ``--no-selenium-screenshots``, a screenshot (its
  default). Actions are ``CLICK_ELEMENT`` on a random element ref of its observation.

``--baseline-src DIR`` also measures the envgym side from another checkout (e.g. the code before a
change: ``git worktree add /tmp/gui-base <commit>``), in a child process that imports envgym from
DIR ahead of the installed one, so both versions and the Selenium env are measured in one run:
rows ``envgym_baseline`` and ``speedup_vs_baseline``.

``--random-agent N`` instead plays N episodes of the random agent (the env's ``sample_action``,
as ``agents/random.py``; default ``max_turns`` 10) on every registered MiniWoB task and reports
its success rate and mean raw reward per task.

    python benchmarks/perf/gui.py                       # the figures in benchmarks/perf/results/gui.json
    python benchmarks/perf/gui.py --episodes 3 --tasks click-button --json   # smoke run
    python benchmarks/perf/gui.py --random-agent 20 --json   # random-agent figures, every task
    python benchmarks/perf/gui.py --baseline-src /tmp/gui-base   # before/after and Selenium, one run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TASKS = ("click-button", "click-checkboxes", "enter-text", "click-tab", "choose-list")


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def browser_memory_mb(pids: set[int]) -> tuple[float, float]:
    """PSS (proportional set size: shared pages split between processes) in MiB of the Chromium
    processes among ``pids``, and of the others (the driver: Playwright's node, or chromedriver)."""
    browser = driver = 0
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    kib = int(line.split()[1])
                    if name.startswith("chrom") and name != "chromedriver":
                        browser += kib
                    else:
                        driver += kib
                    break
        except OSError:
            continue
    return browser / 1024, driver / 1024


def _summary(create_s: float, resets: list[float], steps: list[float], memory: tuple[float, float]) -> dict[str, Any]:
    return {
        "create_s": round(create_s, 3),
        "reset_ms": round(1000 * statistics.mean(resets), 2),
        "reset_ms_median": round(1000 * statistics.median(resets), 2),
        "step_ms": round(1000 * statistics.mean(steps), 2),
        "steps_per_s": round(len(steps) / sum(steps), 1),
        "resets": len(resets),
        "steps": len(steps),
        "browser_memory_mb": round(memory[0], 1),
        "driver_memory_mb": round(memory[1], 1),
    }


def run_envgym(task: str, episodes: int, max_steps: int, screenshots: bool, seed: int) -> dict[str, Any]:
    import envgym

    before = _descendants(os.getpid())
    t0 = time.perf_counter()
    env = envgym.make(f"envgym/MiniWoB-{task}-v0", obs="dict" if screenshots else "text", max_turns=1000)
    env.reset(seed=seed)  # the first reset launches the browser and loads the page: counted as creation
    create = time.perf_counter() - t0
    rng = random.Random(seed)
    resets, steps = [], []
    for episode in range(episodes):
        t = time.perf_counter()
        obs, _ = env.reset(seed=seed + 1 + episode)
        resets.append(time.perf_counter() - t)
        for _ in range(max_steps):
            tree = obs["axtree"] if screenshots else obs
            ids = [line.strip()[1:].split("]", 1)[0] for line in tree.splitlines() if line.strip().startswith("[")]
            action = f"click({rng.choice(ids)})" if ids else "noop()"
            t = time.perf_counter()
            obs, _, terminated, truncated, _ = env.step(action)
            steps.append(time.perf_counter() - t)
            if terminated or truncated:
                break
    memory = browser_memory_mb(_descendants(os.getpid()) - before)
    env.close()
    return _summary(create, resets, steps, memory)


# A child process that measures run_envgym with envgym imported from another checkout (argv[1]):
# its finder goes first, and the envgym modules the installed package's .pth hook imported are dropped.
_BASELINE_CHILD = """
import importlib.util, json, sys
root, script, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
folders = {"envgym": root + "/envgym", "envgym.environments": root + "/environments", "envgym.agents": root + "/agents"}

class FromCheckout:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        folder = folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(fullname, folder + "/__init__.py", submodule_search_locations=[folder])

sys.meta_path.insert(0, FromCheckout)
for name in [n for n in sys.modules if n == "envgym" or n.startswith("envgym.")]:
    del sys.modules[name]
spec = importlib.util.spec_from_file_location("gui_bench", script)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
import envgym
assert envgym.__file__.startswith(root), envgym.__file__
print(json.dumps(bench.run_envgym(*args)))
"""


def run_envgym_from(
    root: Path, task: str, episodes: int, max_steps: int, screenshots: bool, seed: int
) -> dict[str, Any]:
    """:func:`run_envgym` with envgym imported from the checkout ``root``, in a child process."""
    args = json.dumps([task, episodes, max_steps, screenshots, seed])
    proc = subprocess.run(
        [sys.executable, "-c", _BASELINE_CHILD, str(root.resolve()), str(Path(__file__).resolve()), args],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the baseline run from {root} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def _commit(root: Path) -> str | None:
    """The git commit checked out at ``root`` (``None`` outside a git checkout)."""
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() or None


def run_selenium(task: str, episodes: int, max_steps: int, screenshots: bool, seed: int) -> dict[str, Any]:
    import gymnasium
    import miniwob  # noqa: F401  - registers miniwob/* in Gymnasium
    from miniwob.action import ActionTypes

    os.environ.setdefault("MINIWOB_CHROME_BINARY", "/usr/bin/chromium")
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", "/usr/bin/chromedriver")
    before = _descendants(os.getpid())
    t0 = time.perf_counter()
    env = gymnasium.make(f"miniwob/{task}-v1")
    env.reset(seed=seed, options={"record_screenshots": screenshots})
    create = time.perf_counter() - t0
    rng = random.Random(seed)
    resets, steps = [], []
    try:
        for episode in range(episodes):
            t = time.perf_counter()
            obs, _ = env.reset(seed=seed + 1 + episode)
            resets.append(time.perf_counter() - t)
            for _ in range(max_steps):
                refs = [e["ref"] for e in obs["dom_elements"] if e["ref"] > 0]
                action = env.unwrapped.create_action(ActionTypes.CLICK_ELEMENT, ref=rng.choice(refs))
                t = time.perf_counter()
                obs, _, terminated, truncated, _ = env.step(action)
                steps.append(time.perf_counter() - t)
                if terminated or truncated:
                    break
        memory = browser_memory_mb(_descendants(os.getpid()) - before)
    finally:
        env.close()
    return _summary(create, resets, steps, memory)


def random_agent(tasks: list[str], episodes: int, seed: int) -> dict[str, Any]:
    """Success rate and mean raw reward of uniformly sampled actions (the env's ``sample_action``)."""
    import envgym

    rows: dict[str, Any] = {}
    for task in tasks:
        env = envgym.make(f"envgym/MiniWoB-{task}-v0")
        rng = random.Random(seed)
        wins, raws, turns = 0, [], []
        t0 = time.perf_counter()
        for episode in range(episodes):
            env.reset(seed=seed + episode)
            raw, n = 0.0, 0
            while True:
                _, _, terminated, truncated, info = env.step(env.unwrapped.sample_action(rng))
                n += 1
                raw += info["reward_components"]["raw_reward"]
                if terminated or truncated:
                    wins += bool(info["success"])
                    break
            raws.append(raw)
            turns.append(n)
        env.close()
        rows[task] = {
            "success_rate": round(wins / episodes, 3),
            "mean_raw_reward": round(statistics.mean(raws), 3),
            "mean_turns": round(statistics.mean(turns), 2),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        print(f"random {task}: {json.dumps(rows[task])}", file=sys.stderr)
    rates = [r["success_rate"] for r in rows.values()]
    return {
        "episodes_per_task": episodes,
        "tasks": rows,
        "mean_success_rate": round(statistics.mean(rates), 3) if rates else 0.0,
        "tasks_with_any_success": sum(r > 0 for r in rates),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), help="MiniWoB task names")
    parser.add_argument("--episodes", type=int, default=30, help="episodes per env and task")
    parser.add_argument("--steps", type=int, default=5, help="at most this many clicks per episode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--screenshots", action="store_true", help="envgym: dict observations with a screenshot")
    parser.add_argument(
        "--no-selenium-screenshots", action="store_true", help="miniwob: no screenshot in its observations"
    )
    parser.add_argument("--no-selenium", action="store_true", help="skip the miniwob Selenium env")
    parser.add_argument(
        "--baseline-src", type=Path, metavar="DIR", help="also measure envgym from this checkout (before/after)"
    )
    parser.add_argument(
        "--random-agent", type=int, metavar="N", default=0, help="random-agent figures: N episodes on every task"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    parser.add_argument("--out", type=Path, help="also write the JSON results to this file")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.steps < 1:
        parser.error("--episodes and --steps must be >= 1")
    if args.random_agent < 0:
        parser.error("--random-agent must be >= 0")
    if args.baseline_src is not None and not (args.baseline_src / "envgym" / "__init__.py").is_file():
        parser.error(
            f"--baseline-src must be an envgym checkout (with envgym/__init__.py), got {str(args.baseline_src)!r}"
        )
    if args.random_agent:
        from envgym.environments.gui import MINIWOB_TASKS

        tasks = list(MINIWOB_TASKS) if args.tasks == list(TASKS) else args.tasks
        report = {"benchmark": "gui-random-agent", **random_agent(sorted(tasks), args.random_agent, args.seed)}
        text = json.dumps(report, indent=2)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
        print(
            text
            if args.json
            else f"random agent: mean success {report['mean_success_rate']:.3f} over "
            f"{len(report['tasks'])} tasks ({report['tasks_with_any_success']} with a success)"
        )
        return 0

    results: dict[str, Any] = {
        "benchmark": "gui",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg": os.getloadavg()},
        "settings": {
            "episodes": args.episodes,
            "max_clicks": args.steps,
            "envgym_screenshots": args.screenshots,
            "selenium_screenshots": not args.no_selenium_screenshots,
            "baseline_src": str(args.baseline_src) if args.baseline_src is not None else None,
            "baseline_commit": _commit(args.baseline_src) if args.baseline_src is not None else None,
            "commit": _commit(Path(__file__).resolve().parents[2]),
        },
        "tasks": {},
    }
    for task in args.tasks:
        row: dict[str, Any] = {}
        if args.baseline_src is not None:  # the baseline first, then the current code, then Selenium
            row["envgym_baseline"] = run_envgym_from(
                args.baseline_src, task, args.episodes, args.steps, args.screenshots, args.seed
            )
        row["envgym"] = run_envgym(task, args.episodes, args.steps, args.screenshots, args.seed)
        if args.baseline_src is not None:
            base, ours = row["envgym_baseline"], row["envgym"]
            row["speedup_vs_baseline"] = {
                "reset": round(base["reset_ms"] / ours["reset_ms"], 2),
                "steps_per_s": round(ours["steps_per_s"] / base["steps_per_s"], 2),
            }
        if not args.no_selenium:
            row["miniwob_selenium"] = run_selenium(
                task, args.episodes, args.steps, not args.no_selenium_screenshots, args.seed
            )
            theirs = row["miniwob_selenium"]
            for name, key in (("envgym", "speedup"), ("envgym_baseline", "baseline_speedup")):
                if name in row:
                    row[key] = {
                        "reset": round(theirs["reset_ms"] / row[name]["reset_ms"], 2),
                        "steps_per_s": round(row[name]["steps_per_s"] / theirs["steps_per_s"], 2),
                    }
        results["tasks"][task] = row
        print(f"{task}: {json.dumps(row)}", file=sys.stderr)
    results["machine"]["load_avg_end"] = os.getloadavg()
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if args.json:
        print(text)
    else:
        for task, row in results["tasks"].items():
            for name in ("envgym_baseline", "envgym", "miniwob_selenium"):
                if name in row:
                    r = row[name]
                    print(
                        f"{task:18} {name:17} reset {r['reset_ms']:8.1f} ms  {r['steps_per_s']:7.1f} steps/s  "
                        f"browser {r['browser_memory_mb']:6.1f} MiB  driver {r['driver_memory_mb']:6.1f} MiB"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
