"""Reset time and step throughput of every registered environment, in one process.

For each id: the mean wall time of ``reset(seed=i)`` over ``--resets`` seeds, then ``--steps``
steps with random *valid* actions (``env.unwrapped.sample_action(rng)`` when the environment has
it, else a random admissible action, else a sample of the action space), resetting whenever an
episode ends. Environments are built with ``envgym.make`` (so Gymnasium's wrappers are included,
as users get them) and every step produces its text observation. Only the ``step`` calls are
timed, not the choice of the action nor the resets between episodes.

Multi-agent (AEC) ids are built with ``envgym.make_aec``; one step is ``env.step(action)``
followed by ``env.last()`` (the next player's observation text), both timed.

Usage::

    python benchmarks/perf/envs.py                          # every id, table on stdout
    python benchmarks/perf/envs.py --ids envgym/Sokoban-v0 --steps 50000 --json

This script measures and reports; it asserts nothing. The project's target is >= 20,000 steps/s
per game on one core.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

TARGET_STEPS_PER_S = 20_000


def _single_actions(env: Any, info: dict[str, Any]) -> Any:
    sampler = getattr(env.unwrapped, "sample_action", None)
    if sampler is not None:
        return lambda rng, info: sampler(rng)
    return lambda rng, info: (
        rng.choice(info["admissible_actions"]) if info.get("admissible_actions") else env.action_space.sample()
    )


def bench_single(env_id: str, *, resets: int, steps: int, seed: int) -> dict[str, Any]:
    """Measure one single-agent id; returns a JSON-ready row."""
    import envgym

    env = envgym.make(env_id)
    rng = random.Random(seed)
    reset_times = []
    obs_chars = 0
    for i in range(resets):
        t0 = time.perf_counter()
        obs, info = env.reset(seed=seed + i)
        reset_times.append(time.perf_counter() - t0)
        obs_chars += len(obs)
    obs, info = env.reset(seed=seed)
    choose = _single_actions(env, info)
    has_sampler = hasattr(env.unwrapped, "sample_action")
    step_time = 0.0
    episodes = 1
    invalid = 0
    step_chars = 0
    perf = time.perf_counter
    for _ in range(steps):
        action = choose(rng, info)
        t0 = perf()
        obs, reward, terminated, truncated, info = env.step(action)
        step_time += perf() - t0
        step_chars += len(obs)
        if not info.get("action_valid", True):
            invalid += 1
        if terminated or truncated:
            episodes += 1
            obs, info = env.reset(seed=seed + resets + episodes)
    env.close()
    return {
        "id": env_id,
        "kind": "single",
        "reset_ms_mean": 1e3 * statistics.fmean(reset_times) if reset_times else None,
        "reset_ms_median": 1e3 * statistics.median(reset_times) if reset_times else None,
        "steps": steps,
        "steps_per_s": steps / step_time if step_time > 0 else None,
        "us_per_step": 1e6 * step_time / steps if steps else None,
        "episodes": episodes,
        "invalid_steps": invalid,
        "mean_reset_obs_chars": obs_chars / resets if resets else None,
        "mean_step_obs_chars": step_chars / steps if steps else None,
        "action_source": "sample_action" if has_sampler else "admissible_actions/action_space",
        "error": None,
    }


def _aec_action(env: Any, agent: str, info: dict[str, Any], rng: random.Random) -> Any:
    actions = info.get("admissible_actions") if isinstance(info, dict) else None
    if actions:
        return rng.choice(actions)
    sampler = getattr(env.unwrapped, "sample_action", None)
    if sampler is not None:
        return sampler(agent, rng)
    return env.action_space(agent).sample()


def bench_aec(env_id: str, *, resets: int, steps: int, seed: int) -> dict[str, Any]:
    """Measure one AEC id; returns a JSON-ready row."""
    import envgym

    env = envgym.make_aec(env_id)
    rng = random.Random(seed)
    reset_times = []
    for i in range(resets):
        t0 = time.perf_counter()
        env.reset(seed=seed + i)
        env.last()
        reset_times.append(time.perf_counter() - t0)
    env.reset(seed=seed)
    obs, reward, termination, truncation, info = env.last()
    step_time = 0.0
    episodes = 1
    done_steps = 0
    chars = 0
    perf = time.perf_counter
    while done_steps < steps:
        if not env.agents:
            episodes += 1
            env.reset(seed=seed + resets + episodes)
            obs, reward, termination, truncation, info = env.last()
            continue
        agent = env.agent_selection
        action = None if (termination or truncation) else _aec_action(env, agent, info, rng)
        t0 = perf()
        env.step(action)
        if env.agents:
            obs, reward, termination, truncation, info = env.last()
        step_time += perf() - t0
        if action is not None:
            done_steps += 1
            chars += len(obs) if isinstance(obs, str) else 0
    env.close()
    return {
        "id": env_id,
        "kind": "aec",
        "reset_ms_mean": 1e3 * statistics.fmean(reset_times) if reset_times else None,
        "reset_ms_median": 1e3 * statistics.median(reset_times) if reset_times else None,
        "steps": steps,
        "steps_per_s": steps / step_time if step_time > 0 else None,
        "us_per_step": 1e6 * step_time / steps if steps else None,
        "episodes": episodes,
        "invalid_steps": None,
        "mean_reset_obs_chars": None,
        "mean_step_obs_chars": chars / steps if steps else None,
        "action_source": "admissible_actions/sample_action/action_space",
        "error": None,
    }


def select_specs(ids: Sequence[str] | None, *, variants: bool, multi: bool) -> list[Any]:
    """The specs to measure: the given ids (every registration of each), else all registered."""
    import envgym

    everything = envgym.list_envs(variants=True)
    if ids:
        chosen = []
        for env_id in ids:
            found = sorted((s for s in everything if s.id == env_id), key=lambda s: s.kind != "gymnasium")
            if not found:
                envgym.spec(env_id)  # raises UnknownEnvError with a suggestion
            chosen.extend(found)
    else:
        chosen = [s for s in everything if variants or s.variant_of is None]
    chosen = [s for s in chosen if s.kind == "gymnasium" or (multi and s.kind in ("aec", "parallel"))]
    if not ids:
        chosen.sort(
            key=lambda s: (s.family, s.variant_of or s.id, s.variant_of is not None, s.id, s.kind != "gymnasium")
        )
    return chosen


def run(
    ids: Sequence[str] | None, *, resets: int, steps: int, seed: int, variants: bool, multi: bool
) -> dict[str, Any]:
    """Measure every selected id; errors become rows (the benchmark never stops on one env)."""
    import envgym

    rows = []
    for spec in select_specs(ids, variants=variants, multi=multi):
        bench = bench_single if spec.kind == "gymnasium" else bench_aec
        print(f"measuring {spec.id} ({spec.kind}) ...", file=sys.stderr, flush=True)
        try:
            rows.append(bench(spec.id, resets=resets, steps=steps, seed=seed))
        except Exception as err:  # noqa: BLE001 - report the failure, measure the others
            rows.append(
                {
                    "id": spec.id,
                    "kind": "single" if spec.kind == "gymnasium" else "aec",
                    "error": f"{type(err).__name__}: {err}",
                }
            )
            print(f"  failed: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
    return {
        "benchmark": "envs",
        "envgym_version": envgym.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "resets": resets,
        "steps": steps,
        "seed": seed,
        "target_steps_per_s": TARGET_STEPS_PER_S,
        "results": rows,
    }


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(report: dict[str, Any]) -> None:
    """Print the report as a fixed-width table on stdout."""
    rows = report["results"]
    width = max([len(r["id"]) for r in rows] + [2])
    header = (
        f"{'id':<{width}}  {'kind':<6}  {'reset ms':>9}  {'steps/s':>10}  {'us/step':>8}  {'episodes':>8}  "
        f"{'obs chars':>9}  note"
    )
    print(f"envgym {report['envgym_version']} | Python {report['python']} | {report['platform']}")
    print(
        f"{report['resets']} resets and {report['steps']} random valid steps per id; target >= "
        f"{report['target_steps_per_s']:,} steps/s"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        if r.get("error"):
            print(f"{r['id']:<{width}}  {r['kind']:<6}  ERROR: {r['error'][:120]}")
            continue
        sps = r["steps_per_s"]
        note = "" if sps is None or sps >= report["target_steps_per_s"] else "below target"
        print(
            f"{r['id']:<{width}}  {r['kind']:<6}  {_fmt(r['reset_ms_mean'], '9.3f')}  {_fmt(sps, '10,.0f')}  "
            f"{_fmt(r['us_per_step'], '8.1f')}  {r['episodes']:>8}  {_fmt(r['mean_step_obs_chars'], '9.0f')}  {note}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", nargs="+", metavar="ID", help="Ids to measure (default: every registered id).")
    parser.add_argument("--resets", type=int, default=100, help="Resets timed per id (default 100).")
    parser.add_argument("--steps", type=int, default=10_000, help="Steps timed per id (default 10000).")
    parser.add_argument("--seed", type=int, default=0, help="First reset seed and action seed (default 0).")
    parser.add_argument("--no-variants", action="store_true", help="Only base ids (when --ids is not given).")
    parser.add_argument("--single-only", action="store_true", help="Skip multi-agent ids.")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON instead of a table.")
    args = parser.parse_args(argv)
    if args.resets < 1 or args.steps < 1:
        parser.error(f"--resets and --steps must be at least 1, got {args.resets} and {args.steps}.")
    from envgym.errors import UnknownEnvError

    try:
        report = run(
            args.ids,
            resets=args.resets,
            steps=args.steps,
            seed=args.seed,
            variants=not args.no_variants,
            multi=not args.single_only,
        )
    except UnknownEnvError as err:
        parser.error(str(err))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
