"""``envgym run`` and ``envgym run-all``: run agents over environments and report the results."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
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
from envgym.cli._options import (
    AgentOptionsOption,
    AgentTimeoutOption,
    BackendOption,
    EnvKwargsOption,
    EpisodesOption,
    EpisodeTimeoutOption,
    FamilyOption,
    GroupSizeOption,
    HistoryOption,
    JsonOption,
    LastKOption,
    MaxRetriesOption,
    MaxTurnsOption,
    ModeOption,
    NumEnvsOption,
    ReplyTokensOption,
    SeedOption,
    StepTimeoutOption,
    StopAtActionOption,
    TokenBudgetOption,
    VariantsOption,
    WorkersOption,
    agent_option,
    out_option,
)
from envgym.cli.agents import check_agent_spec, parse_agent_spec
from envgym.errors import EnvgymError, NotAvailableError, StopRun, suggest
from envgym.registration import list_envs
from envgym.rollout import PromptConfig, RunConfig, Runner
from envgym.rollout.records import episode_record

__all__ = ["run_all_command", "run_command", "run_one"]

DEFAULT_ALL_AGENTS = ("oracle", "random")


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
    """Run ``episodes`` of ``env_id`` in this process with the agent named by ``agent_spec``;
    return (summary, trajectories). Nothing is written to disk."""
    config = RunConfig(
        env_id=env_id,
        agent=agent_spec,
        episodes=episodes,
        seed=seed,
        env_kwargs=dict(env_kwargs or {}),
        num_envs=num_envs,
    )
    agent = parse_agent_spec(agent_spec, seed=seed)
    try:
        result = Runner(config, agent, on_episode_end=on_episode_end).run()
    finally:
        agent.close()
    return {**result.summary, "kwargs": dict(env_kwargs or {})}, result.trajectories


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        fail(f"{name} must be at least 1, got {value!r}.", EXIT_USAGE)


def _print_run(summary: dict[str, Any]) -> None:
    console = out_console()
    table = Table(title=f"{summary['env_id']}  agent={summary['agent']}", title_justify="left", title_style="bold")
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("value", justify="right")
    rows = [
        ("episodes", f"{summary['episodes']} ({summary['scored']} scored)"),
        ("success rate", fmt_float(summary["success_rate"])),
        ("mean return", fmt_float(summary["mean_return"])),
        ("std return", fmt_float(summary["std_return"])),
        ("mean turns", fmt_float(summary["mean_turns"], 2)),
        ("invalid actions", f"{summary['invalid_actions']} ({fmt_float(summary['invalid_per_episode'], 2)}/episode)"),
    ]
    if summary.get("format_error_rate") is not None:
        rows.append(("format errors", f"{summary['format_error_rate']:.1%} of replies"))
    if summary.get("completion_tokens"):
        rows.append(("tokens (prompt/completion)", f"{summary['prompt_tokens']}/{summary['completion_tokens']}"))
    rows += [
        ("steps", str(summary["steps"])),
        ("wall time (s)", f"{summary['wall_time_s']:.3f}"),
        ("steps/s", fmt_float(summary["steps_per_s"], 0)),
    ]
    for key, value in summary["mean_reward_components"].items():
        rows.append((f"mean {key}", fmt_float(value)))
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(summary["termination_reasons"].items()))
    rows.append(("termination reasons", reasons or "-"))
    infra = summary.get("infra_errors") or {}
    rows.append(("infrastructure errors", ", ".join(f"{k}: {v}" for k, v in sorted(infra.items())) or "none"))
    if summary.get("retries"):
        rows.append(("retried attempts", str(summary["retries"])))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def _run_progress(console: Any) -> Any:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("success {task.fields[success]}"),
        TextColumn("errors {task.fields[errors]}"),
        TextColumn("{task.fields[turns_per_s]} turns/s"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


@handle_errors
def run_command(
    env_id: Annotated[str, typer.Argument(metavar="ID|all", help="Environment id, or 'all' (same as run-all).")],
    agent: Annotated[str | None, agent_option("random; with 'all': oracle and random")] = None,
    episodes: EpisodesOption = 10,
    seed: SeedOption = 0,
    kwargs: EnvKwargsOption = None,
    num_envs: NumEnvsOption = 8,
    workers: WorkersOption = 1,
    backend: BackendOption = "inproc",
    mode: ModeOption = "lockstep",
    group_size: GroupSizeOption = 1,
    max_turns: MaxTurnsOption = None,
    max_retries: MaxRetriesOption = 2,
    episode_timeout: EpisodeTimeoutOption = None,
    step_timeout: StepTimeoutOption = None,
    agent_timeout: AgentTimeoutOption = None,
    agent_options: AgentOptionsOption = None,
    history: HistoryOption = "full",
    last_k: LastKOption = 4,
    token_budget: TokenBudgetOption = None,
    reply_tokens: ReplyTokensOption = None,
    stop_at_action: StopAtActionOption = True,
    out: Annotated[
        str | None,
        out_option("Run folder: records written as each episode ends; re-run to resume.", short=False),
    ] = None,
    per_episode: Annotated[bool, typer.Option("--per-episode", help="With --json: include every episode.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Run an agent for some episodes of an environment and print a results table.

    With --out DIR every episode is written to DIR/episodes.jsonl the moment it ends, with the
    resolved configuration, package versions and git commit; running the same command again
    resumes (finished episodes are skipped; a changed configuration is refused).
    """
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
    options = parse_kwargs(agent_options, flag="--agent-option")
    spec = select_spec(env_id, None, allowed=("gymnasium",))
    agent_spec = agent or "random"
    check_agent_spec(agent_spec)  # a typo fails before any environment or model loads
    config = RunConfig(
        env_id=spec.id,
        agent=agent_spec,
        agent_options=options,
        episodes=episodes,
        seed=seed,
        group_size=group_size,
        env_kwargs=env_kwargs,
        max_turns=max_turns,
        num_envs=num_envs,
        backend=backend,
        workers=workers,
        mode=mode,
        max_retries=max_retries,
        episode_timeout_s=episode_timeout,
        step_timeout_s=step_timeout,
        agent_timeout_s=agent_timeout,
        prompt=PromptConfig(
            history=history,
            last_k=last_k,
            token_budget=token_budget,
            max_new_tokens=reply_tokens,
            stop_at_action=stop_at_action,
        ),
    )
    console = err_console()
    counts = {"ended": 0, "success": 0, "errors": 0, "turns": 0}
    started = time.perf_counter()
    with _run_progress(console) as progress:
        task = progress.add_task(f"{spec.id} · {agent_spec}", total=episodes, success="-", errors=0, turns_per_s="-")

        def on_turns(n: int) -> None:
            counts["turns"] += n
            elapsed = time.perf_counter() - started
            progress.update(task, turns_per_s=f"{counts['turns'] / elapsed:.0f}" if elapsed > 0 else "-")

        def on_episode_end(t: Any) -> None:
            counts["ended"] += 1
            if t.scored:
                counts["success"] += bool(t.success)
            else:
                counts["errors"] += 1
            scored = counts["ended"] - counts["errors"]
            rate = f"{counts['success'] / scored:.0%}" if scored else "-"
            progress.update(task, advance=1, success=rate, errors=counts["errors"])

        runner = Runner(config, out=out, on_episode_end=on_episode_end, on_turns=on_turns)
        try:
            result = runner.run()
        except (KeyboardInterrupt, StopRun) as err:
            progress.stop()
            where = (
                f" in {out}; run the same command again to resume" if out else " (not saved: use --out DIR to resume)"
            )
            what = "stopped" if isinstance(err, StopRun) else "interrupted"
            console.print(f"[yellow]{what}[/]: {counts['ended']} episode(s) recorded{escape(where)}.", soft_wrap=True)
            raise typer.Exit(0 if isinstance(err, StopRun) else 130) from None
    summary = {**result.summary, "kwargs": dict(env_kwargs), "config": config.to_dict()}
    if out is not None:
        summary["out"] = str(out)
    if as_json:
        if per_episode:
            summary["per_episode"] = [episode_record(t, turns=False) for t in result.trajectories]
        echo_json(summary)
    else:
        _print_run(summary)
        if out is not None:
            out_console().print(f"records: {escape(str(Path(out) / 'episodes.jsonl'))}")


def _run_all(
    *,
    agents: Sequence[str],
    episodes: int,
    seed: int,
    family: str | None,
    variants: bool,
    as_json: bool,
) -> None:
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
        echo_json(
            {
                "episodes_per_env": episodes,
                "seed": seed,
                "agents": list(agents),
                "wall_time_s": round(wall, 3),
                "errors": len(errors),
                "skipped": len(skipped),
                "results": rows,
            }
        )
    else:
        table = Table(
            title=f"envgym run-all ({episodes} episodes per env and agent, seed {seed})",
            title_justify="left",
            title_style="bold",
        )
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
                note = (
                    Text(r["error"][:200], style="red") if r.get("error") else Text(r["skipped"][:200], style="yellow")
                )
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
    agent: Annotated[list[str] | None, agent_option("oracle and random")] = None,
    episodes: EpisodesOption = 10,
    seed: SeedOption = 0,
    family: FamilyOption = None,
    variants: VariantsOption = False,
    as_json: JsonOption = False,
) -> None:
    """Run the oracle and random agents over every single-agent environment: one summary table.

    Each environment and agent plays --episodes episodes; repeat --agent to run other agents.
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
