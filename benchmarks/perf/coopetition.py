"""Coopetition performance and baseline report.

Prints (one process, one core):

* per game: PettingZoo Parallel steps/s (numeric view, every agent's action dict prepared in
  advance from the action spaces, observations and infos included, resets excluded), the
  Gymnasium joint view's steps/s and the bare engine's (``Game.step``) for comparison, and the
  reset time;
* the baseline table: for every game, reward mode and policy of :mod:`envgym.agents.coopetition`,
  the reference protocol's metrics over seeds (default 0-99, test split: the reference's
  seeding): mean episode return (summed over agents), mean final trust, cooperation rate and
  episode length, plus the reward-mode contribution ``(R_integrated - R_private) / R_integrated``
  per policy (``--oracle-seeds`` plays the two oracles, which solve an equilibrium every round, on
  fewer seeds: 17 of the 20 games have no randomness, so their episodes repeat across seeds);
* with ``--baseline DIR`` (a checkout of an older commit, e.g. ``git worktree add /tmp/base 63d6b63``):
  that checkout's Parallel steps/s beside this one's, each timed in a fresh interpreter that
  imports only its own tree, alternating ``--repeats`` times (the best of each side is reported,
  with the ratio), so both see the same machine load; ``--cpu-time`` counts the process's CPU
  seconds instead of wall seconds (for a busy machine);
* with ``--llm``: seconds per episode of the LLM view (``envgym/Coop-<Name>-Text-v0``, 10 rounds
  as in ``coopetition-v1``) played in self-play by the bundled model (one batched call per
  round), its return and its invalid answers.

Usage::

    python benchmarks/perf/coopetition.py                                  # everything, seeds 0-99
    python benchmarks/perf/coopetition.py --games TrustDilemma,TeamProduction --seeds 10 --json
    python benchmarks/perf/coopetition.py --skip-baselines --llm TrustDilemma --llm-episodes 2
    python benchmarks/perf/coopetition.py --skip-baselines --games TrustDilemma --baseline /tmp/base --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import numpy as np
from envgym.agents.coopetition import evaluate, mode_contribution
from envgym.environments.coopetition.api import build_game
from envgym.environments.coopetition.catalog import GAMES

import envgym

MODES = ("private", "integrated", "cooperative")
POLICIES = ("constant:0.0", "constant:0.5", "constant:1.0", "random", "tit_for_tat", "equilibrium", "trust_aware")


#: The clock of every timing: ``time.perf_counter`` (wall), or ``time.process_time`` with ``--cpu-time``.
CLOCK = time.perf_counter


def _rate(fn: Any, seconds: float) -> float:
    """Calls of ``fn`` per second over at least ``seconds`` (fn returns how many steps it made)."""
    done, start = 0, CLOCK()
    while True:
        done += fn()
        elapsed = CLOCK() - start
        if elapsed >= seconds:
            return done / elapsed


def speed(name: str, seconds: float) -> dict[str, Any]:
    """Steps/s of the Parallel view, the joint view and the bare engine for one game."""
    env_id = f"envgym/Coop-{name}-v0"
    par = envgym.make_parallel(env_id)
    rng = np.random.default_rng(0)
    agents = list(par.possible_agents)
    highs = [float(par.action_space(a).high[0]) for a in agents]
    dicts = [
        {a: np.asarray([rng.uniform(0.3, 1.0) * h], dtype=np.float32) for a, h in zip(agents, highs, strict=True)}
        for _ in range(64)
    ]
    state = {"k": 0, "seed": 0}

    def parallel_steps() -> int:
        steps = 0
        for _ in range(100):
            if not par.agents:
                state["seed"] += 1
                par.reset(seed=state["seed"])
            par.step(dicts[state["k"] % 64])
            state["k"] += 1
            steps += 1
        return steps

    par.reset(seed=0)
    parallel = _rate(parallel_steps, seconds)
    joint = envgym.make(env_id).unwrapped
    vectors = [np.concatenate([d[a] for a in agents]) for d in dicts]
    joint.reset(seed=0)
    live = {"over": False}

    def joint_steps() -> int:
        for k in range(100):
            if live["over"]:
                joint.reset(seed=k)
            _, _, term, trunc, _ = joint.step(vectors[k % 64])
            live["over"] = term or trunc
        return 100

    joint_rate = _rate(joint_steps, seconds)
    game = build_game(name, {})
    game.reset(0)

    def engine_steps() -> int:
        for k in range(100):
            if game.step_count >= game.max_steps:
                game.reset(k)
            game.step(vectors[k % 64])
        return 100

    engine = _rate(engine_steps, seconds)
    t0 = CLOCK()
    for seed in range(50):
        par.reset(seed=seed)
    reset_ms = (CLOCK() - t0) / 50 * 1000
    return {
        "game": name,
        "agents": len(agents),
        "parallel_steps_per_s": parallel,
        "joint_steps_per_s": joint_rate,
        "engine_steps_per_s": engine,
        "reset_ms": reset_ms,
    }


#: Run in a fresh interpreter without site hooks (``-S``), so that ``envgym`` and its
#: ``environments`` folder come from the checkout ``root`` and nowhere else: prints that
#: checkout's ``speed(name, seconds)`` as JSON.
_SPEED_IN_CHECKOUT = """
import importlib.util, json, sys, time
root, site_packages, name, seconds, cpu = sys.argv[1:6]
sys.path[:0] = [root]
sys.path.append(site_packages)
folders = {"envgym.environments": root + "/environments", "envgym.agents": root + "/agents"}
class Checkout:
    @staticmethod
    def find_spec(fullname, path=None, target=None):
        folder = folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder + "/__init__.py", submodule_search_locations=[folder])
sys.meta_path.insert(0, Checkout)
import envgym._autoregister
assert envgym.__file__.startswith(root), envgym.__file__
if cpu == "1":
    time.perf_counter = time.process_time  # the older scripts read this clock
spec = importlib.util.spec_from_file_location("coopetition_perf", root + "/benchmarks/perf/coopetition.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(module.speed(name, float(seconds))))
"""


def speed_in_checkout(root: Path, name: str, seconds: float, cpu_time: bool) -> dict[str, Any]:
    """:func:`speed` of the checkout ``root`` (this one or an older commit's), in a fresh interpreter."""
    site_packages = sysconfig.get_paths()["purelib"]
    command = [sys.executable, "-S", "-c", _SPEED_IN_CHECKOUT, str(root), site_packages, name, str(seconds)]
    proc = subprocess.run([*command, "1" if cpu_time else "0"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"timing {name} in {root} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def side_by_side(name: str, baseline: Path, seconds: float, repeats: int, cpu_time: bool) -> dict[str, Any]:
    """The baseline checkout's and this checkout's Parallel steps/s for ``name``, alternating runs."""
    here = Path(__file__).resolve().parents[2]
    runs: dict[str, list[float]] = {"baseline": [], "current": []}
    for k in range(repeats):
        order = [("baseline", baseline), ("current", here)]
        for side, root in order if k % 2 == 0 else order[::-1]:
            runs[side].append(speed_in_checkout(root, name, seconds, cpu_time)["parallel_steps_per_s"])
    best = {side: max(rates) for side, rates in runs.items()}
    return {
        "game": name,
        "baseline_parallel_steps_per_s": best["baseline"],
        "parallel_steps_per_s": best["current"],
        "ratio": best["current"] / best["baseline"],
        "runs": runs,
    }


#: The oracles, which solve an equilibrium every round (slow on the many-agent games).
ORACLES = ("equilibrium", "trust_aware")


def baselines(name: str, seeds: list[int], policies: list[str], oracle_seeds: list[int]) -> list[dict[str, Any]]:
    rows = []
    for policy in policies:
        returns = {}
        for mode in MODES:
            t0 = time.perf_counter()
            played = oracle_seeds if policy in ORACLES else seeds
            m = evaluate(f"envgym/Coop-{name}-v0", policy, played, reward_mode=mode, split="test")
            returns[mode] = m.mean_return
            rows.append(
                {"game": name, "policy": policy, "mode": mode, **m.as_dict(), "seconds": time.perf_counter() - t0}
            )
        contribution = mode_contribution(returns["integrated"], returns["private"])
        for row in rows[-len(MODES) :]:
            row["mode_contribution"] = contribution
    return rows


def llm_episodes(name: str, episodes: int, max_new_tokens: int) -> dict[str, Any]:
    """The bundled model in self-play on the LLM view (10 rounds, as coopetition-v1): seconds per
    episode (model load excluded) and the mean return per agent."""
    from envgym.rollout import PromptConfig, RunConfig, Runner
    from envgym.rollout.specs import make_agent

    agent = make_agent("hf:smollm2")
    config = RunConfig(
        env_id=f"envgym/Coop-{name}-Text-v0",
        env_kwargs={"max_steps": 10, "split": "test"},
        agent="hf:smollm2",
        episodes=episodes,
        prompt=PromptConfig(history="last_k", last_k=1, max_new_tokens=max_new_tokens, stop_at_action=True),
    )
    t0 = time.perf_counter()
    result = Runner(config, agent).run()
    seconds = time.perf_counter() - t0
    multi = result.summary["multiagent"]
    valid = [t.invalid_actions for t in result.trajectories]
    return {
        "game": name,
        "episodes": episodes,
        "seconds_per_episode": seconds / episodes,
        "mean_return_per_agent": float(np.mean([t.total_reward for t in result.trajectories])),
        "mean_joint_return": multi["mean_joint_return"],
        "mean_invalid_per_agent": float(np.mean(valid)),
        "rounds": multi["mean_rounds"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default="", help="comma-separated game names (default: all 20)")
    parser.add_argument("--seeds", type=int, default=100, help="baseline episodes per cell: seeds 0..N-1 (default 100)")
    parser.add_argument(
        "--oracle-seeds", type=int, default=None, help="episodes per cell for the oracles (default: --seeds)"
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="timing window per speed figure (default 1 s)")
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated policies for the table")
    parser.add_argument("--skip-baselines", action="store_true", help="speed only")
    parser.add_argument("--llm", default="", help="game names to play with the bundled model (LLM view)")
    parser.add_argument("--llm-episodes", type=int, default=1)
    parser.add_argument("--llm-tokens", type=int, default=48, help="reply tokens per move for --llm")
    parser.add_argument("--json", action="store_true", help="print one JSON report instead of tables")
    parser.add_argument(
        "--baseline", default="", help="a checkout of an older commit: time its Parallel view beside this one's"
    )
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per side with --baseline (default 3)")
    parser.add_argument("--cpu-time", action="store_true", help="time with process CPU seconds (a busy machine)")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.cpu_time else time.perf_counter
    baseline = Path(args.baseline).resolve() if args.baseline else None
    if baseline is not None and not (baseline / "environments" / "coopetition").is_dir():
        parser.error(f"--baseline {args.baseline!r} is not an envgym checkout (no environments/coopetition in it)")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    names = [g.name for g in GAMES] if not args.games else [n.strip() for n in args.games.split(",") if n.strip()]
    known = {g.name for g in GAMES}
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown games {unknown}; games: {', '.join(sorted(known))}")
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "clock": "process_time" if args.cpu_time else "perf_counter",
        "loadavg_at_start": list(os.getloadavg()),
        "speed": [],
        "baselines": [],
    }
    if baseline is not None:
        report["side_by_side"] = {"baseline": str(baseline), "repeats": args.repeats, "games": []}
        for name in names:
            row = side_by_side(name, baseline, args.seconds, args.repeats, args.cpu_time)
            report["side_by_side"]["games"].append(row)
            if not args.json:
                print(
                    f"{name:24s} parallel: baseline {row['baseline_parallel_steps_per_s']:8.0f}/s  now "
                    f"{row['parallel_steps_per_s']:8.0f}/s  x{row['ratio']:.2f} (best of {args.repeats} each)",
                    flush=True,
                )
    for name in names:
        report["speed"].append(speed(name, args.seconds))
        if not args.json:
            s = report["speed"][-1]
            print(
                f"{name:24s} n={s['agents']:2d}  parallel {s['parallel_steps_per_s']:8.0f}/s  joint "
                f"{s['joint_steps_per_s']:8.0f}/s  engine {s['engine_steps_per_s']:8.0f}/s  reset {s['reset_ms']:.3f} ms",
                flush=True,
            )
    if not args.skip_baselines:
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        for name in names:
            oracle_seeds = list(range(args.seeds if args.oracle_seeds is None else args.oracle_seeds))
            rows = baselines(name, list(range(args.seeds)), policies, oracle_seeds)
            report["baselines"].extend(rows)
            if not args.json:
                for r in rows:
                    contrib = f"  contrib {r['mode_contribution']:.3f}" if r["mode"] == MODES[-1] else ""
                    print(
                        f"{name:24s} {r['policy']:13s} {r['mode']:11s} return {r['mean_return']:11.1f}  trust "
                        f"{r['mean_final_trust']:.3f}  coop {r['cooperation_rate']:.3f}  length {r['mean_length']:6.1f}{contrib}",
                        flush=True,
                    )
    if args.llm:
        report["llm"] = [
            llm_episodes(n.strip(), args.llm_episodes, args.llm_tokens) for n in args.llm.split(",") if n.strip()
        ]
        if not args.json:
            for r in report["llm"]:
                print(
                    f"LLM view {r['game']}: {r['seconds_per_episode']:.1f} s/episode ({r['rounds']:.0f} rounds), mean "
                    f"return per agent {r['mean_return_per_agent']:.1f}, invalid answers per agent "
                    f"{r['mean_invalid_per_agent']:.1f}"
                )
    report["loadavg_at_end"] = list(os.getloadavg())
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
