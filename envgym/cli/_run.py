"""``envgym run`` and ``envgym run-all``: run agents over environments and report the results.

``envgym run`` shows live progress on stderr (:mod:`envgym.progress`): episodes done of the total,
live episodes, turns, the agent's tokens/s, success so far and an ETA; one line rewritten on a
terminal, a plain line every 10 s and a final one otherwise (``--no-progress`` or
``ENVGYM_PROGRESS=0``: none).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from envgym.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    NOT_DEFINED,
    echo_json,
    err_console,
    exit_if_nothing_scored,
    fail,
    fmt_float,
    fmt_success,
    handle_errors,
    out_console,
    probe_agent_server,
    progress_bar,
    select_spec,
)
from envgym.cli._options import (
    PROMPT_FLAGS,
    RUN_FLAGS,
    EpisodesOption,
    FamilyOption,
    JsonOption,
    LimitOption,
    NoProgressOption,
    SeedOption,
    VariantsOption,
    agent_option,
    out_option,
    with_field_flags,
)
from envgym.cli.agents import check_agent_spec, parse_agent_spec, prompt_for_agent
from envgym.errors import EnvgymError, NotAvailableError, StopRun, suggest
from envgym.progress import Progress as LiveProgress
from envgym.registration import list_envs
from envgym.rollout import EpisodeTask, PromptConfig, RunConfig, Runner
from envgym.rollout.records import episode_record
from envgym.rollout.summary import defines_success, summarize
from envgym.rollout.tasks import tasks_for

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
        (
            "success rate",
            fmt_success(summary) + (" (not defined here)" if summary.get("success_defined") is False else ""),
        ),
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
    multi = summary.get("multiagent")
    if multi:
        rows.append(("episodes (multi-agent)", f"{multi['episodes']} x {multi['agents_per_episode']} agents"))
        rows.append(("mean joint return", fmt_float(multi["mean_joint_return"])))
        for name, value in multi["mean_return_by_agent"].items():
            policy = (summary.get("agents") or {}).get(name)
            rows.append((f"mean return {name}" + (f" ({policy})" if policy else ""), fmt_float(value)))
        rows.append(("mean invalid rounds", fmt_float(multi["mean_invalid_rounds"], 2)))
        for key in ("mean_trust", "cooperation_rate"):
            if key in multi["mean_final"]:
                rows.append((f"final {key}", fmt_float(multi["mean_final"][key])))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def _tally(counts: dict[str, int], trajectory: Any) -> None:
    """Count an ended episode: successes among the scored ones, infrastructure errors apart."""
    counts["ended"] += 1
    if not trajectory.scored:
        counts["errors"] += 1
    elif defines_success(trajectory):
        counts["success"] += bool(trajectory.success)
    else:
        counts["undefined"] = counts.get("undefined", 0) + 1  # scored, but no success to count


def _note(counts: dict[str, int]) -> str:
    """``success 40%`` (of this session's scored episodes whose task defines success; "—" when
    none does) and the infrastructure errors, if any."""
    scored = counts["ended"] - counts["errors"]
    judged = scored - counts.get("undefined", 0)  # episodes whose task defines success
    text = f"success {counts['success'] / judged:.0%}" if judged else f"success {NOT_DEFINED if scored else '-'}"
    return text + (f"  errors {counts['errors']}" if counts["errors"] else "")


@with_field_flags(RUN_FLAGS, PROMPT_FLAGS, after="agent")
@handle_errors
def run_command(
    ctx: typer.Context,
    env_ids: Annotated[
        list[str],
        typer.Argument(
            metavar="ID... | all",
            help="Environment id(s); several ids play in one lock-step batch (--episodes each). 'all': as run-all.",
            show_default=False,
        ),
    ],
    agent: Annotated[str | None, agent_option("random; with 'all': oracle and random")] = None,
    limit: LimitOption = None,
    out: Annotated[
        str | None,
        out_option("Run folder: records written as each episode ends; re-run to resume.", was_agent_option=True),
    ] = None,
    per_episode: Annotated[bool, typer.Option("--per-episode", help="With --json: include every episode.")] = False,
    no_progress: NoProgressOption = False,
    as_json: JsonOption = False,
    **fields: Any,
) -> None:
    """Run an agent for some episodes of one or more environments and print a results table.

    Several ids play together: one task list, one lock-step batch of agent calls per turn across
    the episodes of every id (a batched model answers them all at once), one table per id;
    --kwargs applies to every id.

    With --out DIR every episode is written to DIR/episodes.jsonl the moment it ends, with the
    resolved configuration, package versions and git commit; running the same command again
    resumes (finished episodes are skipped; a changed configuration is refused). A run that fails
    before its first episode (a bad option) leaves no folder behind.

    Exit codes: 0 ok; 1 when the agent's server cannot be reached (an openai:MODEL@URL agent is
    probed once before the run) or every episode ended by an infrastructure error (nothing was
    scored; the results are still printed); 2 usage error (bad flag, id, option or --out).
    """
    episodes, seed, group_size = fields["episodes"], fields["seed"], fields["group_size"]
    if "all" in env_ids:
        if len(env_ids) > 1:
            fail("'all' runs every environment; give it alone, or name the ids to run.", EXIT_USAGE)
        if fields["kwargs"]:
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
    if fields["num_envs"] is not None:
        _check_positive("--num-envs", fields["num_envs"])
    if limit is not None:
        _check_positive("--limit", limit)
    settings = RUN_FLAGS.values(fields)  # --kwargs, --agent-option and --agent-for parsed
    env_kwargs = settings.get("env_kwargs", {})  # with several ids, every id gets them
    prompt = PromptConfig(**PROMPT_FLAGS.values(fields))  # --system-prompt @FILE read
    specs = [select_spec(env_id, None, allowed=("gymnasium", "parallel"), command="envgym run") for env_id in env_ids]
    ids = [s.id for s in specs]
    if len({s.kind for s in specs}) > 1:
        fail("give single-agent ids or PettingZoo Parallel ids, not both in one run.", EXIT_USAGE)
    per_agent = settings.get("agents")
    if per_agent:
        if specs[0].kind != "parallel":
            fail("--agent-for applies to PettingZoo Parallel (multi-agent) environments only.", EXIT_USAGE)
        for name, spec_text in per_agent.items():
            if not isinstance(spec_text, str):
                fail(f"--agent-for {name}=...: expected an agent spec such as 'random', got {spec_text!r}.", EXIT_USAGE)
            check_agent_spec(spec_text)
    if len(set(ids)) < len(ids):
        fail(f"each id once, please: {' '.join(env_ids)} names one twice.", EXIT_USAGE)
    label = ids[0] if len(ids) == 1 else f"{len(ids)} environments"
    agent_spec = agent or "random"
    check_agent_spec(agent_spec)  # a typo fails before any environment or model loads
    for spec_text in dict.fromkeys([agent_spec, *(per_agent or {}).values()]):
        probe_agent_server(spec_text)  # a dead server fails now, not after every episode's retries
    config = RunConfig(
        **{
            **settings,  # what every RunConfig flag set; the run's own episodes and tasks:
            "env_id": ids[0],
            "tasks": _several_ids_tasks(ids, episodes, seed, group_size, env_kwargs, limit) if len(ids) > 1 else None,
            "agent": agent_spec,
            "episodes": _limited(episodes, limit, group_size) if len(ids) == 1 else None,
            # defaults < the prompt a trained adapter records < flags
            "prompt": prompt_for_agent(agent_spec, prompt, PROMPT_FLAGS.fields_by_param(), ctx),
        }
    )
    console = err_console()
    counts = {"ended": 0, "success": 0, "errors": 0}
    played: list[Any] = []  # this session's episodes (a resumed run's earlier ones are not)
    display = LiveProgress(enabled=False if no_progress else None)
    display.start(f"{label} · {agent_spec}", len(config.task_list()))
    runner = Runner(
        config,
        out=out,
        on_episode_end=lambda t: (_tally(counts, t), played.append(t)),
        on_progress=lambda **c: display.update(note=_note(counts), **c),
    )
    try:
        try:
            result = runner.run()
        finally:
            display.finish()
            display.close()
    except (KeyboardInterrupt, StopRun) as err:
        where = f" in {out}; run the same command again to resume" if out else " (not saved: use --out DIR to resume)"
        what = "stopped" if isinstance(err, StopRun) else "interrupted"
        console.print(f"[yellow]{what}[/]: {counts['ended']} episode(s) recorded{escape(where)}.", soft_wrap=True)
        raise typer.Exit(0 if isinstance(err, StopRun) else 130) from None
    if len(ids) == 1:
        summary = {**result.summary, "kwargs": dict(env_kwargs), "config": config.to_dict()}
        if out is not None:
            summary["out"] = str(out)
        if as_json:
            if per_episode:
                summary["per_episode"] = [episode_record(t, turns=False) for t in result.trajectories]
            echo_json(summary)
        else:
            _print_run(summary)
    else:
        wall = result.summary["wall_time_s"]
        summaries = []
        for env_id in ids:
            mine = [t for t in result.trajectories if t.env_id == env_id]
            now = [t for t in played if t.env_id == env_id]
            summaries.append(
                {"env_id": env_id, "agent": result.summary["agent"], "seed": seed, **summarize(mine, wall, played=now)}
            )
        if as_json:
            document: dict[str, Any] = {"runs": summaries, "combined": result.summary, "config": config.to_dict()}
            if out is not None:
                document["out"] = str(out)
            if per_episode:
                document["per_episode"] = [episode_record(t, turns=False) for t in result.trajectories]
            echo_json(document)
        else:
            for summary in summaries:
                _print_run(summary)
    if out is not None and not as_json:
        out_console().print(f"records: {escape(str(Path(out) / 'episodes.jsonl'))}")
    combined = result.summary
    exit_if_nothing_scored(combined["episodes"], combined["scored"], combined.get("infra_errors") or {})


def _limited(episodes: int, limit: int | None, group_size: int) -> int:
    """The episodes a one-id run plays under ``--limit``: the first ``limit`` of its ``episodes``
    (``episodes`` is not part of a run folder's identity, so the full run resumes from them)."""
    if limit is None or limit >= episodes:
        return episodes
    if limit % group_size:
        fail(f"--limit ({limit}) must be a multiple of --group-size ({group_size}): groups play whole.", EXIT_USAGE)
    return limit


def _several_ids_tasks(
    ids: Sequence[str],
    episodes: int,
    seed: int,
    group_size: int,
    env_kwargs: dict[str, Any] | None = None,
    limit: int | None = None,
) -> list[EpisodeTask]:
    """One task list over ``ids``: each plays ``episodes`` episodes from ``seed`` with ``env_kwargs``
    as a run of it alone would (same seeds, groups and members), tagged with its id and numbered
    apart; cut to the first ``limit`` (whole groups)."""
    if episodes % group_size:
        fail(f"--episodes ({episodes}) must be a multiple of --group-size ({group_size}).", EXIT_USAGE)
    seeds = range(seed, seed + episodes // group_size)
    tasks = [
        task
        for j, env_id in enumerate(ids)
        for task in tasks_for(
            env_id,
            seeds,
            group_size=group_size,
            env_kwargs=env_kwargs,
            tag=env_id.rsplit("/", 1)[-1],
            first_index=j * episodes,
        )
    ]
    if limit is not None and limit < len(tasks):
        if limit % group_size:
            fail(f"--limit ({limit}) must be a multiple of --group-size ({group_size}): groups play whole.", EXIT_USAGE)
        tasks = tasks[:limit]
    return tasks


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
                fmt_success(r, 2),
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
