"""SWE sandboxes: episode start per sandbox, command latency, grading time, and the agents' resolve rates.

Prints (one process):

* per sandbox (``bwrap``; ``docker`` when an engine answers): episode start (``reset``: the task
  drawn and the workspace ready, mutated file written) in ms, and the mean latency of a small
  command (``ls``) through ``env.step``;
* grading: the time of the ``submit`` step (restore the tests, run FAIL_TO_PASS + PASS_TO_PASS in
  a fresh pytest process, parse the JUnit XML) per task, mean and max, with the oracle;
* the agents on test tasks: the privileged oracle (expected 100 % resolved), the do-nothing
  agent (submits at once: expected 0 %), and with ``--llm N`` the bundled SmolLM2 zero-shot on
  N tasks through the rollout harness (``--llm-turns`` turns);
* the manifest: tasks per library and split, mutation kinds, and the builder's time (as recorded
  by ``python -m envgym.environments.swe.builder``).

Usage::

    python benchmarks/perf/swe.py                      # every test task for the oracle / do-nothing
    python benchmarks/perf/swe.py --tasks 20 --resets 5 --commands 10 --llm 20 --json
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import statistics
import sys
import time
from typing import Any

from envgym.agents.solvers.swe import Solver
from envgym.environments.swe.tasks import load_manifest, select_tasks

import envgym
from envgym.rollout import PromptConfig, RunConfig, Runner
from envgym.sandbox import sandbox_class


def sandbox_speed(kind: str, resets: int, commands: int) -> dict[str, Any]:
    reason = sandbox_class(kind).unavailable_reason()
    if reason is not None:
        return {"sandbox": kind, "available": False, "reason": reason}
    env = envgym.make("envgym/SWE-v0", split="test", sandbox=kind).unwrapped
    try:
        starts = []
        for seed in range(resets):
            t0 = time.perf_counter()
            env.reset(seed=seed)
            starts.append(time.perf_counter() - t0)
        latencies = []
        for _ in range(commands):
            t0 = time.perf_counter()
            env.step("ls")
            latencies.append(time.perf_counter() - t0)
    finally:
        env.close()
    return {
        "sandbox": kind,
        "available": True,
        "episode_start_ms": statistics.mean(starts) * 1000,
        "episode_start_ms_median": statistics.median(starts) * 1000,
        "command_ms": statistics.mean(latencies) * 1000,
        "resets": resets,
        "commands": commands,
    }


def agents(tasks: int | None) -> dict[str, Any]:
    """Oracle and do-nothing over the first ``tasks`` test tasks (all when None), with grading times."""
    env = envgym.make("envgym/SWE-v0", split="test").unwrapped
    chosen = [t.id for t in env.tasks][: tasks or None]
    out: dict[str, Any] = {"tasks": len(chosen)}
    try:
        for name in ("oracle", "do-nothing"):
            resolved, grading = 0, []
            for task_id in chosen:
                obs, info = env.reset(seed=0, options={"task_id": task_id})
                solver = Solver("envgym/SWE-v0", 0)
                while True:
                    action = solver.act(obs, info) if name == "oracle" else "submit"
                    t0 = time.perf_counter()
                    obs, _reward, terminated, truncated, info = env.step(action)
                    if action == "submit":
                        grading.append(time.perf_counter() - t0)
                    if terminated or truncated:
                        break
                resolved += bool(info["success"])
            out[name] = {
                "resolved": resolved,
                "resolve_rate": resolved / max(1, len(chosen)),
                "grading_s_mean": statistics.mean(grading),
                "grading_s_max": max(grading),
            }
    finally:
        env.close()
    return out


def llm(tasks: int, turns: int) -> dict[str, Any]:
    config = RunConfig(
        env_id="envgym/SWE-v0",
        env_kwargs={"split": "test"},
        agent="hf:smollm2",
        episodes=tasks,
        seed=0,
        max_turns=turns,
        prompt=PromptConfig(history="summary", last_k=3, max_new_tokens=256, stop_at_action=False),
    )
    t0 = time.perf_counter()
    result = Runner(config).run()
    trajectories = result.trajectories
    return {
        "agent": "hf:smollm2",
        "tasks": len(trajectories),
        "max_turns": turns,
        "resolve_rate": sum(bool(t.success) for t in trajectories) / max(1, len(trajectories)),
        "submitted": sum(t.termination_reason in ("success", "failure") for t in trajectories),
        "mean_turns": statistics.mean(t.num_turns for t in trajectories) if trajectories else 0.0,
        "seconds": time.perf_counter() - t0,
    }


def manifest_figures() -> dict[str, Any]:
    meta, tasks = load_manifest()
    per_library: dict[str, dict[str, int]] = collections.defaultdict(lambda: {"train": 0, "test": 0})
    for t in tasks:
        per_library[t.library][t.split] += 1
    return {
        "tasks": len(tasks),
        "train": len(select_tasks("train")),
        "test": len(select_tasks("test")),
        "per_library": dict(sorted(per_library.items())),
        "kinds": dict(sorted(collections.Counter(t.mutation for t in tasks).items())),
        "builder_seconds": meta["builder"]["seconds"],
        "builder_per_library": {
            name: {k: s[k] for k in ("kept", "tried", "mutations", "covered", "hanging", "seconds")}
            for name, s in meta["builder"]["per_library"].items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandboxes", default="bwrap,docker", help="comma-separated sandbox kinds to time")
    parser.add_argument("--resets", type=int, default=20, help="episode starts timed per sandbox")
    parser.add_argument("--commands", type=int, default=30, help="commands timed per sandbox")
    parser.add_argument("--tasks", type=int, default=0, help="test tasks for the oracle / do-nothing (0: all)")
    parser.add_argument("--llm", type=int, default=0, help="also run the bundled SmolLM2 on this many test tasks")
    parser.add_argument("--llm-turns", type=int, default=8, help="turns per SmolLM2 episode")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"python": sys.version.split()[0], "machine": platform.machine()}
    report["sandboxes"] = [
        sandbox_speed(k.strip(), args.resets, args.commands) for k in args.sandboxes.split(",") if k.strip()
    ]
    report["agents"] = agents(args.tasks or None)
    if args.llm:
        report["llm"] = llm(args.llm, args.llm_turns)
    report["manifest"] = manifest_figures()
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for s in report["sandboxes"]:
        if s["available"]:
            print(f"{s['sandbox']:6s} episode start {s['episode_start_ms']:.1f} ms  command {s['command_ms']:.1f} ms")
        else:
            print(f"{s['sandbox']:6s} unavailable: {s['reason']}")
    a = report["agents"]
    for name in ("oracle", "do-nothing"):
        r = a[name]
        print(
            f"{name:10s} resolved {r['resolved']}/{a['tasks']} ({r['resolve_rate']:.1%})  grading "
            f"{r['grading_s_mean']:.2f} s mean, {r['grading_s_max']:.2f} s max"
        )
    if "llm" in report:
        r = report["llm"]
        print(
            f"hf:smollm2 resolved {r['resolve_rate']:.1%} of {r['tasks']} ({r['submitted']} submitted, {r['seconds']:.0f} s)"
        )
    m = report["manifest"]
    print(f"manifest: {m['tasks']} tasks ({m['train']} train, {m['test']} test); builder {m['builder_seconds']:.0f} s")
    for name, counts in m["per_library"].items():
        b = m["builder_per_library"][name]
        print(
            f"  {name:11s} train {counts['train']:3d} test {counts['test']:3d}  (kept {b['kept']} of {b['tried']} tried, {b['seconds']:.0f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
