"""Reports of a bench run: ``report.md`` and a self-contained ``report.html`` with plots.

:func:`write_report` reads a bench run folder (``results.json``, recomputed from the episodes
when missing) and writes, into ``out`` (default the run folder):

* ``success.png``: success rate per entry with its 95 % bootstrap interval as error bars;
* ``turns.png``: histogram of turns per scored episode, successes and failures stacked;
* ``report.md``: the run's identity, the metrics table and the plots (linked PNG files);
* ``report.html``: the same with the PNGs embedded as base64, so the one file can be mailed.

matplotlib is imported only here (Agg backend, no display needed).
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envgym._imports import optional
from envgym._runfiles import write_atomic
from envgym.bench.run import load_bench_run

__all__ = ["metrics_rows", "write_report"]


def _pyplot() -> Any:
    matplotlib = optional("matplotlib", purpose="Plotting bench reports")
    matplotlib.use("Agg", force=True)
    return optional("matplotlib.pyplot", purpose="Plotting bench reports")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ci(value: Any, digits: int = 2) -> str:
    if not value:
        return ""
    return f" [{value[0]:.{digits}f}, {value[1]:.{digits}f}]"


def _pass(curve: dict[str, float]) -> str:
    if not curve:
        return "-"
    return " / ".join(f"{curve[k]:.2f}" for k in sorted(curve, key=int))


def _errors(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "0"


NOTE = (
    "Success and reward are means over tasks (seeds) of each task's scored trials; infrastructure errors are "
    "counted apart, never as failures. Wall s: an entry's episodes summed (they overlap); overall: the run's "
    "elapsed time."
)
COLUMNS = (
    "entry",
    "env",
    "scored / episodes",
    "success [95% CI]",
    "mean reward [95% CI]",
    "pass^1..K",
    "turns",
    "tokens (prompt / completion)",
    "wall s",
    "format ok",
    "infra errors",
)


def metrics_rows(results: dict[str, Any]) -> list[list[str]]:
    """The metrics table as text cells (entries, then the overall row)."""
    rows = []
    for item in [*results["entries"], {"name": "overall (macro)", "env": "", **results["overall"]}]:
        rows.append(
            [
                str(item["name"]),
                str(item.get("env", "")),
                f"{item['scored']} / {item['episodes']}",
                ("—" if item.get("success_defined") is False else _fmt(item["success_rate"]))
                + _ci(item["success_rate_ci"]),
                _fmt(item["mean_reward"]) + _ci(item["mean_reward_ci"]),
                _pass(item["pass_hat_k"]),
                _fmt(item["mean_turns"], 2),
                f"{item['prompt_tokens']} / {item['completion_tokens']}",
                _fmt(None if item["wall_time_s"] is None else float(item["wall_time_s"]), 2),
                _fmt(item["format_ok_rate"], 2),
                _errors(item["infra_errors"]),
            ]
        )
    return rows


def _success_plot(results: dict[str, Any]) -> bytes:
    plt = _pyplot()
    entries = results["entries"]
    names = [e["name"] for e in entries]
    rates = [e["success_rate"] if e["success_rate"] is not None else 0.0 for e in entries]
    low = [r - (e["success_rate_ci"] or [r, r])[0] for r, e in zip(rates, entries, strict=True)]
    high = [(e["success_rate_ci"] or [r, r])[1] - r for r, e in zip(rates, entries, strict=True)]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.75 * len(names) + 2.0), 3.6), dpi=100)
    positions = list(range(len(names)))
    ax.bar(positions, rates, yerr=[low, high], capsize=4, color="#4C72B0", ecolor="#333333")
    overall = results["overall"]["success_rate"]
    if overall is not None:
        ax.axhline(overall, color="#C44E52", linestyle="--", linewidth=1, label=f"overall (macro) {overall:.2f}")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_xticks(positions)
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    ax.set_title(f"{results['suite']['id']}: {results['agent']} (95% bootstrap CI)", fontsize=10)
    fig.tight_layout()
    return _png(plt, fig)


def _turns_plot(results: dict[str, Any], turns: Sequence[tuple[int, bool]]) -> bytes:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.4), dpi=100)
    most = max((n for n, _ in turns), default=1)
    bins = [x - 0.5 for x in range(most + 2)]
    won = [n for n, ok in turns if ok]
    lost = [n for n, ok in turns if not ok]
    ax.hist([won, lost], bins=bins, stacked=True, color=["#55A868", "#C44E52"], label=["success", "failure"])
    ax.set_xlabel("turns per episode")
    ax.set_ylabel("episodes")
    ax.legend(fontsize=8)
    ax.set_title(f"turns per scored episode ({len(turns)})", fontsize=10)
    fig.tight_layout()
    return _png(plt, fig)


def _png(plt: Any, fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _identity(run: Any, results: dict[str, Any]) -> list[tuple[str, str]]:
    meta = run.meta
    suite = results["suite"]
    boot = results.get("bootstrap", {})
    items = [
        ("suite", f"{suite['id']} (sha256 {suite['sha256']})"),
        ("agent", f"{results['agent']} {results.get('agent_options') or ''}".strip()),
        ("trials per seed", str(results["trials"])),
        ("created", str(meta.get("created", "-"))),
        ("envgym", f"{meta.get('envgym_version', '-')} (git {meta.get('git_commit') or '-'})"),
        (
            "confidence intervals",
            (
                f"{boot.get('method', 'percentile')} bootstrap, {boot.get('resamples')} resamples, "
                f"seed {boot.get('seed')}, unit: {boot.get('unit')}; overall: {boot.get('overall')}"
            ),
        ),
        ("aggregation", str(results["overall"]["aggregation"])),
    ]
    if results.get("missing"):
        items.append(("INCOMPLETE", f"episodes not yet recorded: {results['missing']}"))
    return items


def write_report(run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and the two PNG plots for the bench run ``run_dir``.

    Returns ``{"md": path, "html": path, "success_png": path, "turns_png": path}``.
    """
    run = load_bench_run(run_dir)
    results = run.results()
    target = Path(out) if out is not None else run.path
    target.mkdir(parents=True, exist_ok=True)
    turns = [(t.num_turns, bool(t.success)) for trajs in run.per_entry().values() for t in trajs if t.scored]
    success_png = _success_plot(results)
    turns_png = _turns_plot(results, turns)
    paths = {
        "success_png": target / "success.png",
        "turns_png": target / "turns.png",
        "md": target / "report.md",
        "html": target / "report.html",
    }
    write_atomic(paths["success_png"], success_png)
    write_atomic(paths["turns_png"], turns_png)
    rows = metrics_rows(results)
    identity = _identity(run, results)
    title = f"envgym bench: {results['suite']['id']} / {results['agent']}"

    md = [f"# {title}", ""]
    md += [f"- **{key}**: {value}" for key, value in identity]
    md += ["", "## Results", ""]
    md.append("| " + " | ".join(COLUMNS) + " |")
    md.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    md += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    md += [
        "",
        NOTE,
        "",
        "## Plots",
        "",
        "![success rate per entry](success.png)",
        "",
        "![turns per episode](turns.png)",
        "",
    ]
    write_atomic(paths["md"], "\n".join(md))

    def image(data: bytes, alt: str) -> str:
        encoded = base64.b64encode(data).decode("ascii")
        return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'

    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "\n".join(
        "<tr"
        + (' class="overall"' if i == len(rows) - 1 else "")
        + ">"
        + "".join(f"<td>{html.escape(cell)}</td>" for cell in row)
        + "</tr>"
        for i, row in enumerate(rows)
    )
    facts = "\n".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in identity)
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }}
th {{ background: #f3f3f3; }}
td:first-child, td:nth-child(2) {{ text-align: left; }}
tr.overall td {{ font-weight: bold; background: #fafafa; }}
dt {{ font-weight: bold; float: left; clear: left; width: 12em; }}
dd {{ margin-left: 13em; }}
img {{ max-width: 100%; margin: 1em 1em 0 0; }}
</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<dl>
{facts}
</dl>
<h2>Results</h2>
<table id="results">
<thead><tr>{head}</tr></thead>
<tbody>
{body}
</tbody>
</table>
<p>{html.escape(NOTE)}</p>
<h2>Plots</h2>
{image(success_png, "success rate per entry")}
{image(turns_png, "turns per episode")}
</body>
</html>
"""
    write_atomic(paths["html"], page)
    return paths
