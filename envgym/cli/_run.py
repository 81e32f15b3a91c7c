"""``envgym run`` and ``envgym run-all``: run agents over environments and report the results."""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from envgym.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    echo_json,
    err_console,
    fail,
    fmt_float,
    handle_errors,
    out_console,
    parse_kwargs,
    progress_bar,
    select_spec,
)
from envgym.cli.agents import known_agent_specs, parse_agent_spec
from envgym.errors import EnvgymError, NotAvailableError, suggest

__all__ = ["run_command", "run_all_command", "summarize", "run_one"]

DEFAULT_ALL_AGENTS = ("oracle", "random")


def summarize(results: Sequence[Any], wall_time_s: float) -> dict[str, Any]:
    """Aggregate :class:`envgym.rollout.EpisodeResult` records into the numbers a report shows.

    Keys: episodes, success_rate, mean_return, std_return, mean_turns, steps, invalid_actions
    (total), invalid_per_episode, mean_reward_components, termination_reasons, wall_time_s,
    steps_per_s.
    """
    n = len(results)
    returns = [r.total_reward for r in results]
    turns = [r.turns for r in results]
    invalid = [r.invalid_actions for r in results]
    keys: list[str] = []
    for r in results:
        keys.extend(k for k in r.reward_components if k not in keys)
    components = {k: (math.fsum(r.reward_components.get(k, 0.0) for r in results) / n if n else 0.0) for k in keys}
    steps = sum(turns)
    return {
        "episodes": n,
        "success_rate": (sum(1 for r in results if r.success) / n) if n else None,
        "mean_return": statistics.fmean(returns) if n else None,
        "std_return": statistics.pstdev(returns) if n else None,
        "mean_turns": statistics.fmean(turns) if n else None,
        "steps": steps,
        "invalid_actions": sum(invalid),
        "invalid_per_episode": (sum(invalid) / n) if n else None,
        "mean_reward_components": components,
        "termination_reasons": dict(Counter(r.termination_reason for r in results)),
        "wall_time_s": round(wall_time_s, 4),
        "steps_per_s": round(steps / wall_time_s, 1) if wall_time_s > 0 else None,
    }


def _episode_record(r: Any) -> dict[str, Any]:
    return {
        "episode_id": r.episode_id,
        "seed": r.seed,
        "task_id": r.task_id,
        "success": r.success,
        "return": r.total_reward,
        "turns": r.turns,
        "invalid_actions": r.invalid_actions,
        "termination_reason": r.termination_reason,
        "reward_components": dict(r.reward_components),
        "wall_time_s": round(r.wall_time_s, 6),
    }


def run_one(
    env_id: str,
    agent_spec: str,
    *,
    episodes: int,
    seed: int,
    env_kwargs: dict[str, Any] | None = None,
    num_envs: int = 8,
    on_episode_end: Any = None,
) -> tuple[dict[str, Any], list[Any]]:
    """Run ``episodes`` of ``env_id`` with the agent named by ``agent_spec``; return (summary, results)."""
    from envgym.rollout import run_episodes  # noqa: PLC0415

    agent = parse_agent_spec(agent_spec, seed=seed)
    started = time.perf_counter()
    try:
        results = run_episodes(
            env_id,
            agent,
            episodes=episodes,
            seed=seed,
            env_kwargs=env_kwargs,
            num_envs=num_envs,
            on_episode_end=on_episode_end,
        )
    finally:
        agent.close()
    summary = summarize(results, time.perf_counter() - started)
    return {"env_id": env_id, "agent": agent_spec, "seed": seed, "kwargs": dict(env_kwargs or {}), **summary}, results


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        fail(f"{name} must be at least 1, got {value!r}.", EXIT_USAGE)


def _print_run(summary: dict[str, Any]) -> None:
    console = out_console()
    table = Table(title=f"{summary['env_id']}  agent={summary['agent']}", title_justify="left", title_style="bold")
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("value", justify="right")
    rows = [
        ("episodes", str(summary["episodes"])),
        ("success rate", fmt_float(summary["success_rate"])),
        ("mean return", fmt_float(summary["mean_return"])),
        ("std return", fmt_float(summary["std_return"])),
        ("mean turns", fmt_float(summary["mean_turns"], 2)),
        ("invalid actions", f"{summary['invalid_actions']} ({fmt_float(summary['invalid_per_episode'], 2)}/episode)"),
        ("steps", str(summary["steps"])),
        ("wall time (s)", f"{summary['wall_time_s']:.3f}"),
        ("steps/s", fmt_float(summary["steps_per_s"], 0)),
    ]
    for key, value in summary["mean_reward_components"].items():
        rows.append((f"mean {key}", fmt_float(value)))
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(summary["termination_reasons"].items()))
    rows.append(("termination reasons", reasons or "-"))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


@handle_errors
def run_command(
    env_id: Annotated[str, typer.Argument(metavar="ID|all", help="Environment id, or 'all' (same as run-all).")],
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", "-a", help=f"Agent spec: {known_agent_specs()}. Default: random ('all': oracle and random)."
        ),
    ] = None,
    episodes: Annotated[int, typer.Option("--episodes", "-n", help="Episodes to run.")] = 10,
    seed: Annotated[int, typer.Option("--seed", "-s", help="Seed of episode 0; episode i uses seed + i.")] = 0,
    kwargs: Annotated[
        list[str] | None,
        typer.Option("--kwargs", "-k", help="Environment argument key=value (repeatable); values parse as JSON."),
    ] = None,
    num_envs: Annotated[int, typer.Option("--num-envs", help="Episodes played at the same time.")] = 8,
    per_episode: Annotated[bool, typer.Option("--per-episode", help="With --json: include every episode.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Run an agent for some episodes of an environment and print a results table."""
    if env_id == "all":
        if kwargs:
            fail("--kwargs applies to one environment; it cannot be used with 'all'.", EXIT_USAGE)
        _run_all(
            agents=[agent] if agent else list(DEFAULT_ALL_AGENTS),
            episodes=episodes,
            seed=seed,
            family=None,
            variants=False,
            as_json=as_json,
        )
        return
    _check_positive("--episodes", episodes)
    _check_positive("--num-envs", num_envs)
    env_kwargs = parse_kwargs(kwargs)
    spec = select_spec(env_id, None, allowed=("gymnasium",))
    agent_spec = agent or "random"
    parse_agent_spec(agent_spec, seed=seed)  # validate before any environment is built
    console = err_console()
    with progress_bar(console) as progress:
        task = progress.add_task(f"{spec.id} · {agent_spec}", total=episodes)
        summary, results = run_one(
            spec.id,
            agent_spec,
            episodes=episodes,
            seed=seed,
            env_kwargs=env_kwargs,
            num_envs=num_envs,
            on_episode_end=lambda _result: progress.advance(task),
        )
    if as_json:
        if per_episode:
            summary["per_episode"] = [_episode_record(r) for r in results]
        echo_json(summary)
    else:
        _print_run(summary)


def _run_all(
    *,
    agents: Sequence[str],
    episodes: int,
    seed: int,
    family: str | None,
    variants: bool,
    as_json: bool,
) -> None:
    from envgym.registration import list_envs  # noqa: PLC0415

    _check_positive("--episodes", episodes)
    for spec_text in agents:
        parse_agent_spec(spec_text, seed=seed)  # unknown agents fail before anything runs
    everything = list_envs(kind="gymnasium")
    families = sorted({s.family for s in everything})
    if family is not None and family not in families:
        fail(f"unknown family {family!r}.{suggest(family, families)} Families: {', '.join(families)}.", EXIT_USAGE)
    specs = list_envs(kind="gymnasium", family=family, variants=variants)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    console = err_console()
    with progress_bar(console) as progress:
        task = progress.add_task("run-all", total=len(specs) * len(agents) * episodes)
        for spec in specs:
            for agent_spec in agents:
                progress.update(task, description=f"{spec.id} · {agent_spec}")
                finished = 0

                def advance(_result: Any) -> None:
                    nonlocal finished
                    finished += 1
                    progress.advance(task)

                try:
                    summary, _ = run_one(
                        spec.id,
                        agent_spec,
                        episodes=episodes,
                        seed=seed,
                        on_episode_end=advance,
                    )
                    summary["error"] = None
                except NotAvailableError as err:  # no solver, extra not installed: skipped, not failed
                    summary = {"env_id": spec.id, "agent": agent_spec, "seed": seed, "episodes": 0}
                    summary["error"] = None
                    summary["skipped"] = str(err)
                    progress.advance(task, episodes - finished)
                except Exception as err:  # noqa: BLE001 - one env's failure is a row, the others still run
                    summary = {"env_id": spec.id, "agent": agent_spec, "seed": seed, "episodes": 0}
                    summary["error"] = f"{type(err).__name__}: {err}"
                    if not isinstance(err, EnvgymError):
                        console.print(
                            f"[red]{spec.id} with {escape(agent_spec)} crashed:[/] {escape(f'{type(err).__name__}: {err}')}"
                        )
                    progress.advance(task, episodes - finished)
                summary["family"] = spec.family
                rows.append(summary)
    wall = time.perf_counter() - started
    errors = [r for r in rows if r.get("error")]
    skipped = [r for r in rows if r.get("skipped")]
    if as_json:
        echo_json({"episodes_per_env": episodes, "seed": seed, "agents": list(agents), "wall_time_s": round(wall, 3),
                   "errors": len(errors), "skipped": len(skipped), "results": rows})
    else:
        table = Table(title=f"envgym run-all ({episodes} episodes per env and agent, seed {seed})",
                      title_justify="left", title_style="bold")
        table.add_column("env", no_wrap=True, style="cyan")
        table.add_column("agent", no_wrap=True)
        table.add_column("episodes", justify="right")
        table.add_column("success", justify="right")
        table.add_column("return", justify="right")
        table.add_column("turns", justify="right")
        table.add_column("invalid/ep", justify="right")
        table.add_column("wall s", justify="right")
        if errors or skipped:
            table.add_column("note", overflow="fold")
        for r in rows:
            if r.get("error") or r.get("skipped"):
                note = Text(r["error"][:200], style="red") if r.get("error") else Text(r["skipped"][:200], style="yellow")
                table.add_row(r["env_id"], r["agent"], "0", "-", "-", "-", "-", "-", note)
                continue
            table.add_row(
                r["env_id"],
                r["agent"],
                str(r["episodes"]),
                fmt_float(r["success_rate"], 2),
                fmt_float(r["mean_return"], 3),
                fmt_float(r["mean_turns"], 1),
                fmt_float(r["invalid_per_episode"], 2),
                f"{r['wall_time_s']:.2f}",
                *([""] if errors or skipped else []),
            )
        out = out_console()
        out.print(table)
        out.print(f"{len(rows)} run(s), {len(errors)} error(s), {len(skipped)} skipped, {wall:.1f} s.")
    if errors:
        raise typer.Exit(EXIT_FAILED)


@handle_errors
def run_all_command(
    agent: Annotated[
        list[str] | None,
        typer.Option("--agent", "-a", help=f"Agent spec (repeatable): {known_agent_specs()}. Default: oracle, random."),
    ] = None,
    episodes: Annotated[int, typer.Option("--episodes", "-n", help="Episodes per environment and agent.")] = 10,
    seed: Annotated[int, typer.Option("--seed", "-s", help="Seed of episode 0; episode i uses seed + i.")] = 0,
    family: Annotated[str | None, typer.Option("--family", "-f", help="Only this family.")] = None,
    variants: Annotated[
        bool, typer.Option("--variants/--no-variants", help="Also run every preset, not only the base ids.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Run the oracle and random agents over every single-agent environment: one summary table.

    Exits 1 when any run failed. An environment without an oracle solver, or whose optional extra
    is not installed, is reported as skipped.
    """
    _run_all(
        agents=list(agent) if agent else list(DEFAULT_ALL_AGENTS),
        episodes=episodes,
        seed=seed,
        family=family,
        variants=variants,
        as_json=as_json,
    )
