"""``report.md``: a training run at a glance, with learning-curve plots.

:func:`write_report` reads a run folder's ``config.json``, ``meta.json`` and ``metrics.jsonl``
and writes ``report.md`` next to them, with PNG plots under ``report/`` (matplotlib, Agg
backend, imported only here).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from envgym._imports import optional
from envgym._runfiles import write_atomic
from envgym.errors import ConfigError
from envgym.trainer.metrics import read_metrics

__all__ = ["PLOTS", "write_report"]

REPORT_FILE = "report.md"
#: One PNG per entry: (file name, title, metric keys drawn together).
PLOTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("return.png", "Episode return", ("episode/return", "eval/return")),
    ("success.png", "Success rate", ("episode/success_rate", "eval/success_rate")),
    ("format.png", "Replies with a well-formed action", ("episode/format_ok", "eval/format_ok")),
    ("turns.png", "Turns per episode", ("episode/turns", "eval/turns")),
    ("losses.png", "Losses", ("loss/policy", "loss/value", "loss/kl")),
    ("policy.png", "Policy statistics", ("policy/entropy", "policy/approx_kl", "policy/clip_fraction")),
    ("grad_norm.png", "Gradient norm (before clipping)", ("grad_norm",)),
    ("throughput.png", "Seconds per update", ("perf/rollout_s", "perf/update_s")),
)
#: Rows of the summary table, in order (shown when present).
SUMMARY_KEYS = (
    "episode/return",
    "episode/success_rate",
    "episode/format_ok",
    "episode/turns",
    "eval/return",
    "eval/success_rate",
    "eval/format_ok",
    "loss/policy",
    "loss/value",
    "loss/kl",
    "policy/entropy",
    "policy/approx_kl",
    "grad_norm",
    "perf/tokens_per_s",
)


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for row in rows:
        value = row.get(key)
        if isinstance(value, (int, float)):
            xs.append(int(row["update"]))
            ys.append(float(value))
    return xs, ys


def _first_last(rows: list[dict[str, Any]], key: str) -> tuple[float | None, float | None]:
    _, ys = _series(rows, key)
    return (ys[0], ys[-1]) if ys else (None, None)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def write_report(run: str | os.PathLike[str]) -> Path:
    """Write ``report.md`` and its plots for run folder ``run``; return the report's path.

    Raises:
        ConfigError: ``run`` has no ``metrics.jsonl`` rows.
        MissingDependencyError: matplotlib is not installed.
    """
    folder = Path(run)
    rows = read_metrics(folder)
    if not rows:
        raise ConfigError(f"{folder} has no metrics.jsonl rows to report on; train first.")
    matplotlib = optional("matplotlib", purpose="the training report's plots", extra="train")
    matplotlib.use("Agg", force=True)
    plt = optional("matplotlib.pyplot", purpose="the training report's plots", extra="train")
    config: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    for name, target in (("config.json", config), ("meta.json", meta)):
        path = folder / name
        if path.exists():
            try:
                target.update(json.loads(path.read_text(encoding="utf-8")))
            except json.JSONDecodeError:
                pass
    plots = folder / "report"
    plots.mkdir(exist_ok=True)
    images = []
    for file, title, keys in PLOTS:
        drawn = [(key, *_series(rows, key)) for key in keys]
        drawn = [(key, xs, ys) for key, xs, ys in drawn if xs]
        if not drawn:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
        # Fixed margins where tight_layout would draw the figure once more to measure it (half the
        # report's time): room for tick labels of up to 7 characters, the title and the x label.
        fig.subplots_adjust(left=0.13, right=0.97, bottom=0.14, top=0.91)
        for key, xs, ys in drawn:
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=key)
        ax.set_title(title)
        ax.set_xlabel("update")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.savefig(plots / file)
        plt.close(fig)
        images.append((title, f"report/{file}"))
    last = max(int(r["update"]) for r in rows)
    git = meta.get("git") or {}
    lines = [
        f"# Training report: {config.get('env_id', '?')} ({config.get('algo', '?')})",
        "",
        f"- model: `{config.get('model', '?')}`"
        + (f" with LoRA {config['lora']}" if config.get("lora") else " (full fine-tuning)"),
        (
            f"- updates: {last} of {config.get('updates', '?')}; {config.get('groups_per_update', '?')} groups x "
            f"{config.get('group_size', '?')} episodes per update"
        ),
        f"- git commit: `{git.get('commit', 'unknown')}`" + (" (dirty)" if git.get("dirty") else ""),
        f"- packages: {', '.join(f'{k} {v}' for k, v in sorted((meta.get('packages') or {}).items())) or 'unknown'}",
        "",
        "## First and last values",
        "",
        "| metric | first | last |",
        "|---|---:|---:|",
    ]
    for key in SUMMARY_KEYS:
        first, final = _first_last(rows, key)
        if first is not None:
            lines.append(f"| `{key}` | {_fmt(first)} | {_fmt(final)} |")
    lines += ["", "## Learning curves", ""]
    for title, path in images:
        lines += [f"### {title}", "", f"![{title}]({path})", ""]
    lines += [
        "## Reproduce",
        "",
        "```bash",
        f"envgym train --config {folder / 'config.json'} --out {folder}  # resumes; raise --updates to go on",
        "```",
        "",
    ]
    report = folder / REPORT_FILE
    write_atomic(report, "\n".join(lines))  # whole or not at all: a kill leaves the last report
    return report
