"""``envgym bench``: list suites, run one with an agent, report a run, compare two runs."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from envgym.bench.compare import compare_runs
from envgym.bench.report import write_report
from envgym.bench.run import default_out, load_bench_run, run_suite, write_results
from envgym.bench.suite import list_suites, load_suite, suites_dir
from envgym.cli._common import (
    EXIT_USAGE,
    echo_json,
    err_console,
    exit_if_nothing_scored,
    fail,
    fmt_float,
    fmt_success,
    handle_errors,
    out_console,
    probe_agent_server,
)
from envgym.cli._options import (
    BENCH_RUN_FLAGS,
    PROMPT_FLAGS,
    JsonOption,
    NoProgressOption,
    agent_option,
    entries_limit_option,
    out_option,
    with_field_flags,
)
from envgym.cli._run import _note, _tally
from envgym.cli.agents import check_agent_spec
from envgym.errors import StopRun
from envgym.progress import Progress as LiveProgress

__all__ = ["bench_app"]

bench_app = typer.Typer(
    name="bench",
    help="Benchmark suites: list them, run one with an agent, report a run, compare two runs.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


# -- list -------------------------------------------------------------------------------------------
@bench_app.command("list")
@handle_errors
def list_command(as_json: JsonOption = False) -> None:
    """List the bundled suites (the benchmarks/ folder; $ENVGYM_BENCHMARKS points elsewhere)."""
    rows = []
    for path in list_suites():
        try:
            rows.append(load_suite(path, check_envs=False).summary())
        except Exception as err:  # noqa: BLE001 - a broken suite file is a row, the others still list
            rows.append({"id": path.stem, "error": str(err), "path": str(path)})
    if as_json:
        echo_json({"dir": str(suites_dir()), "suites": rows})
        return
    table = Table(title=f"suites in {suites_dir()}", title_justify="left", title_style="bold")
    for column, justify in (("id", "left"), ("entries", "right"), ("tasks", "right"), ("trials", "right")):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("description", overflow="fold")
    for row in rows:
        if "error" in row:
            table.add_row(row["id"], "-", "-", "-", f"[red]{escape(row['error'])}[/]")
        else:
            table.add_row(row["id"], str(row["entries"]), str(row["episodes"]), str(row["trials"]), row["description"])
    out_console().print(table)
    if not rows:
        out_console().print(f"no suite files (*-vN.yaml) in {suites_dir()}.")


# -- run --------------------------------------------------------------------------------------------
def _results_table(results: dict[str, Any]) -> Table:
    shown = set(results.get("metrics") or ())
    table = Table(
        title=f"{results['suite']['id']}  agent={results['agent']}  trials={results['trials']}",
        title_justify="left",
        title_style="bold",
        caption="95% percentile-bootstrap CIs over tasks; overall = macro average over entries"
        + (
            "; wall s: an entry's episodes summed (they overlap), overall the run's elapsed time"
            if "wall_time" in shown
            else ""
        ),
        caption_justify="left",
    )
    table.add_column("entry", style="cyan", no_wrap=True)
    table.add_column("scored", justify="right")
    columns: list[tuple[str, Any]] = []
    if "success_rate" in shown:
        columns.append(("success [CI]", lambda r: fmt_success(r) + _ci(r["success_rate_ci"])))
    if "mean_reward" in shown:
        columns.append(("reward [CI]", lambda r: fmt_float(r["mean_reward"]) + _ci(r["mean_reward_ci"])))
    if "pass_hat_k" in shown and results["trials"] > 1:
        columns.append(("pass^1..K", lambda r: " / ".join(f"{v:.2f}" for v in r["pass_hat_k"].values()) or "-"))
    if "mean_turns" in shown:
        columns.append(("turns", lambda r: fmt_float(r["mean_turns"], 2)))
    if "tokens" in shown:
        columns.append(("tokens p/c", lambda r: f"{r['prompt_tokens']}/{r['completion_tokens']}"))
    if "wall_time" in shown:
        columns.append(("wall s", lambda r: fmt_float(r["wall_time_s"], 2)))
    if "format_ok_rate" in shown:
        columns.append(("format ok", lambda r: fmt_float(r["format_ok_rate"], 2)))
    columns.append(("infra errors", lambda r: str(r["infra_error_episodes"])))
    for name, _ in columns:
        table.add_column(name, justify="right", no_wrap=True)
    for row in results["entries"]:
        table.add_row(row["name"], f"{row['scored']}/{row['episodes']}", *[fn(row) for _, fn in columns])
    overall = results["overall"]
    table.add_section()
    table.add_row(
        "overall", f"{overall['scored']}/{overall['episodes']}", *[fn(overall) for _, fn in columns], style="bold"
    )
    return table


def _ci(value: Any) -> str:
    return f" [{value[0]:.2f}, {value[1]:.2f}]" if value else ""


#: The prompt flag of ``bench run``: the suite's other prompt settings are part of what it measures.
BENCH_PROMPT_FLAGS = PROMPT_FLAGS.only("system_prompt")


@bench_app.command("run")
@with_field_flags(BENCH_PROMPT_FLAGS, BENCH_RUN_FLAGS, after="limit")
@handle_errors
def run_command(
    suite: Annotated[str, typer.Argument(metavar="SUITE", help="Suite id (core-v1; see `envgym bench list`) or path.")],
    agent: Annotated[str, agent_option()] = "random",
    trials: Annotated[
        int | None, typer.Option("--trials", "-t", help="Episodes per seed (pass^k); default: the suite's.")
    ] = None,
    out: Annotated[
        str | None,
        out_option("Run folder (default runs/bench/SUITE/AGENT-UTCTIME); re-run to resume.", was_agent_option=True),
    ] = None,
    limit: Annotated[int | None, entries_limit_option()] = None,
    no_progress: NoProgressOption = False,
    as_json: JsonOption = False,
    **fields: Any,
) -> None:
    """Run a benchmark suite with an agent: every entry through the rollout harness.

    Writes DIR/bench.json, DIR/suite.yaml, one harness run folder per entry in DIR/entries/ and
    DIR/results.json (metrics with 95% bootstrap CIs), and prints the results table (with --json,
    results.json). Running the same command with the same --out resumes; a changed suite, agent
    or --trials is refused. Live progress (episodes of the whole suite, live episodes, turns,
    tokens/s, ETA) goes to stderr: one line on a terminal, a plain line every 10 s otherwise. A
    run that fails before its first episode (a bad option) leaves no folder behind.

    Exit codes: 0 ok; 1 when the agent's server cannot be reached (an openai:MODEL@URL agent is
    probed once before the run) or every episode ended by an infrastructure error (nothing was
    scored; the results are still printed); 2 usage error (bad flag, suite, option or --out).
    """
    check_agent_spec(agent)
    if trials is not None and trials < 1:
        fail(f"--trials must be at least 1, got {trials!r}.", EXIT_USAGE)
    if limit is not None and limit < 1:
        fail(f"--limit must be at least 1, got {limit!r}.", EXIT_USAGE)
    harness = BENCH_RUN_FLAGS.values(fields)  # --agent-option parsed
    prompt_text = BENCH_PROMPT_FLAGS.values(fields)["system_prompt"]  # --system-prompt @FILE read
    loaded = load_suite(suite)  # every entry is validated (and one env built each) before anything runs
    probe_agent_server(agent)  # a dead server fails now, not after every episode's retries
    k = trials if trials is not None else loaded.trials
    folder = Path(out) if out is not None else default_out(loaded, agent)
    playing = loaded.entries if limit is None else loaded.entries[:limit]
    total = sum(e.episodes for e in playing) * k
    console = err_console()
    counts = {"ended": 0, "success": 0, "errors": 0}
    recorded = {"episodes": 0}  # already in the folder (a resumed run): counted as done
    display = LiveProgress(enabled=False if no_progress else None)
    label = f"{loaded.id} · {agent}"
    display.start(label, total)

    def on_entry(name: str, todo: int, entry_total: int) -> None:
        recorded["episodes"] += entry_total - todo
        # entries are all set up before any episode plays: what is recorded is not this session's work
        display.start(label, total, done=recorded["episodes"])
        if not todo and display.enabled:
            display.clear()
            console.print(f"  {name}: all {entry_total} episode(s) already recorded", highlight=False)

    def on_progress(*, done: int, total: int, **rest: int) -> None:
        # the runner counts the episodes still to play; the display counts the whole suite
        display.update(done=recorded["episodes"] + done, note=_note(counts), **rest)

    try:
        try:
            run = run_suite(
                loaded,
                agent,
                **harness,
                trials=trials,
                out=folder,
                limit=limit,
                system_prompt=prompt_text,
                on_entry=on_entry,
                on_episode_end=lambda _name, t: _tally(counts, t),
                on_progress=on_progress,
            )
        finally:
            display.finish()
            display.close()
    except (KeyboardInterrupt, StopRun) as err:
        what = "stopped" if isinstance(err, StopRun) else "interrupted"
        again = shlex.join(["envgym", "bench", "run", suite, "--agent", agent, "--out", str(folder)])
        if fields["system_prompt"] is not None:
            again += f" --system-prompt {shlex.quote(fields['system_prompt'])}"
        console.print(
            f"[yellow]{what}[/]: {counts['ended']} episode(s) recorded in {escape(str(folder))}; "
            f"resume with: {escape(again)}",
            soft_wrap=True,
        )
        raise typer.Exit(0 if isinstance(err, StopRun) else 130) from None
    results = run.results()
    overall = results["overall"]
    if as_json:
        echo_json({**results, "out": str(folder)})
    else:
        console_out = out_console()
        console_out.print(_results_table(results))
        console_out.print(f"run folder: {escape(str(folder))}  (envgym bench report {escape(str(folder))})")
    exit_if_nothing_scored(overall["episodes"], overall["scored"], overall.get("infra_errors") or {})


# -- report -----------------------------------------------------------------------------------------
@bench_app.command("report")
@handle_errors
def report_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="A bench run folder.")],
    out: Annotated[str | None, out_option("Where to write the report (default: RUN).")] = None,
    recompute: Annotated[
        bool, typer.Option("--recompute", help="Recompute results.json from the episodes first.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Write report.md and a self-contained report.html (table, success and turns plots) for a run.

    With --json, prints the written paths and the results.
    """
    bench = load_bench_run(run)
    if recompute or not (bench.path / "results.json").exists():
        write_results(bench)
    paths = write_report(run, out)
    results = bench.results()
    if as_json:
        echo_json({"files": {k: str(v) for k, v in paths.items()}, "results": results})
        return
    console = out_console()
    console.print(_results_table(results))
    console.print(f"report: {escape(str(paths['md']))}, {escape(str(paths['html']))}")


# -- compare ----------------------------------------------------------------------------------------
def _p(value: float | None) -> str:
    if value is None:
        return "-"
    mark = " *" if value < 0.05 else ""
    return (f"{value:.2g}" if value < 0.001 else f"{value:.3f}") + mark


def _diff(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


@bench_app.command("compare")
@handle_errors
def compare_command(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="A bench run folder (the baseline).")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="Another run folder of the same suite.")],
    as_json: JsonOption = False,
) -> None:
    """Pair the episodes of two runs of one suite by (entry, seed, trial) and test B - A.

    Success: exact McNemar test on the paired episodes, and a paired sign-flip test on per-task
    differences; reward: the paired sign-flip test. Two-sided, fixed seeds. Runs of different
    suites (or of a suite file that changed) are refused.
    """
    result = compare_runs(run_a, run_b)
    if as_json:
        echo_json(result)
        return
    a, b = result["a"], result["b"]
    table = Table(
        title=f"{result['suite']['id']}: B={b['agent']} minus A={a['agent']}",
        title_justify="left",
        title_style="bold",
        caption="* p < 0.05 (two-sided). McNemar: exact, on episode pairs; sign-flip: paired, on tasks.",
        caption_justify="left",
    )
    table.add_column("entry", style="cyan", no_wrap=True)
    for name in ("pairs", "success A", "success B", "diff", "McNemar p", "sign-flip p", "reward diff", "reward p"):
        table.add_column(name, justify="right", no_wrap=True)
    rows = [*result["entries"], {"name": "overall", **result["overall"]}]
    for i, row in enumerate(rows):
        if i == len(rows) - 1:
            table.add_section()
        table.add_row(
            row["name"],
            str(row["pairs"]) + (f" (+{row['unpaired']} unpaired)" if row["unpaired"] else ""),
            fmt_float(row["success_a"]),
            fmt_float(row["success_b"]),
            _diff(row["success_diff"]),
            _p(row["mcnemar_p"]),
            _p(row["success_sign_flip_p"]),
            _diff(row["reward_diff"]),
            _p(row["reward_p"]),
            style="bold" if i == len(rows) - 1 else None,
        )
    console = out_console()
    console.print(table)
    console.print(f"A: {escape(a['path'])}\nB: {escape(b['path'])}")
