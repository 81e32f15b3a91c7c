"""``envgym train``: train a policy with RL on an environment (see :mod:`envgym.trainer`).

Progress goes to stderr (:mod:`envgym.progress`): the phase under way (rollout: episodes, live
episodes, turns, tokens/s; optimisation: micro-batches; evaluation: episodes) with its ETA, then
one line of metrics per update. The header names the device profile the ``auto`` settings took.

The first Ctrl-C asks the trainer to stop cleanly (the update under way is finished or
abandoned, the last completed update checkpointed, ``report.md`` written; exit 130 with the
resume command); a second Ctrl-C aborts at once (exit 130, the newest periodic checkpoint kept).
Under ``torchrun --nproc_per_node=N -m envgym.cli train ...`` every rank runs this command and
only rank 0 prints.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from envgym.cli._common import echo_json, err_console, fmt_float, handle_errors, out_console, parse_kwargs
from envgym.cli._options import (
    KEY_VALUE,
    FieldFlags,
    Flag,
    JsonOption,
    NoProgressOption,
    config_help,
    with_field_flags,
)
from envgym.errors import ConfigError
from envgym.progress import Progress
from envgym.trainer.checkpoint import list_checkpoints
from envgym.trainer.config import TrainConfig, read_config_file, recorded_config, unknown_setting
from envgym.trainer.distributed import world_from_env
from envgym.trainer.loop import Trainer, stop_on_sigint

__all__ = ["train_command"]

EXIT_INTERRUPTED = 130

#: Metrics shown in the per-update progress line and the final summary, with their labels.
SHOWN = (
    ("episode/return", "return"),
    ("episode/success_rate", "success"),
    ("eval/success_rate", "eval success"),
    ("loss/policy", "loss"),
    ("policy/approx_kl", "kl"),
    ("policy/entropy", "entropy"),
)


def _help(name: str) -> str:
    return config_help(TrainConfig, name)


def _parse_set(items: list[str] | None) -> dict[str, Any]:
    values = parse_kwargs(items, flag="--set")
    known = list(TrainConfig.__dataclass_fields__)
    for key in values:
        if key not in known:
            raise typer.BadParameter(unknown_setting(key, known), param_hint="--set")
    return values


def _profile_line(config: TrainConfig, auto: list[str]) -> str:
    """What the ``auto`` settings became, for the header."""
    shown = []
    for name in auto:
        value = getattr(config, name)
        if name == "prompt":
            prompt = config.prompt
            history = getattr(prompt, "history", "?")
            shown.append(
                f"history {history}" + (f" (last {prompt.last_k})" if history in ("last_k", "summary") else "")
            )
        else:
            shown.append(f"{name} {value}")
    why = "no GPU" if config.profile == "cpu" else "GPU"
    return (
        f"{config.profile} profile ({why}): " + ", ".join(shown) + "; any setting given explicitly wins "
        "(envgym train --help)"
    )


def _busy_cores_hint(config: TrainConfig) -> str | None:
    """A hint when training on a CPU whose cores are already busy and torch would use them all.
    Only a hint: the thread count changes float rounding, and a run must resume as it ran."""
    if config.profile != "cpu" or os.environ.get("OMP_NUM_THREADS"):
        return None
    try:
        load = float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    cores = os.cpu_count() or 1
    if cores < 2 or load < cores:
        return None
    return (
        f"load average {load:.1f} on {cores} cores: torch threads that wait on each other are slow here; "
        "OMP_NUM_THREADS=1 envgym train ... was 3-4x faster on such a machine (keep it the same when resuming)"
    )


def _progress_line(row: dict[str, Any], total: int) -> str:
    parts = [f"update {row['update']}/{total}"]
    for key, label in SHOWN:
        value = row.get(key)
        if isinstance(value, float):
            parts.append(f"{label} {value:.3f}")
    seconds = sum(v for k, v in row.items() if k in ("perf/rollout_s", "perf/update_s") and isinstance(v, float))
    if seconds:
        parts.append(f"{seconds:.1f}s")
    return "  ".join(parts)


#: The flags that set a :class:`TrainConfig` field, declared once: ``(field, long flag, short flag)``.
#: Each flag's type and help come from its field (:class:`~envgym.cli._options.FieldFlags`); every other setting is
#: ``--set KEY=VALUE`` (``--kwargs`` adds to ``env_kwargs`` instead of replacing it).
TRAIN_FLAGS: tuple[tuple[str, str, str | None], ...] = (
    ("env_id", "--env", "-e"),
    ("algo", "--algo", None),
    ("model", "--model", "-m"),
    ("updates", "--updates", "-u"),
    ("group_size", "--group-size", "-g"),
    ("groups_per_update", "--groups", None),
    ("lr", "--lr", None),
    ("max_turns", "--max-turns", None),
    ("max_new_tokens", "--max-new-tokens", None),
    ("eval_every", "--eval-every", None),
    ("seed", "--seed", None),
    ("device", "--device", None),
    ("out", "--out", "-o"),
    ("task_pool", "--task-pool", None),
    ("rollout_backend", "--rollout-backend", None),
    ("rollout_workers", "--rollout-workers", None),
    ("rollout_url", "--rollout-url", None),
)


@with_field_flags(FieldFlags(TrainConfig, tuple(Flag(*flag) for flag in TRAIN_FLAGS), unset=True), after="config_file")
@handle_errors
def train_command(
    config_file: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="YAML or JSON file of training settings (flags override it)."),
    ] = None,
    kwargs: Annotated[list[str] | None, typer.Option("--kwargs", help=f"{_help('env_kwargs')} {KEY_VALUE}")] = None,
    settings: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Any other training setting as KEY=VALUE (JSON values), repeatable, e.g. --set kl_coef=0.05 "
            "--set 'lora={\"r\": 16}'. `envgym train --show-config` lists every setting and its value.",
        ),
    ] = None,
    show_config: Annotated[
        bool, typer.Option("--show-config", help="Print the resolved configuration as JSON and exit.")
    ] = False,
    no_progress: NoProgressOption = False,
    as_json: JsonOption = False,
    **fields: Any,
) -> None:
    """Train a policy with RL (GRPO, Dr. GRPO, RLOO, PPO, GiGPO) on an environment.

    Settings come from the defaults, then `--config FILE`, then the flags. Running the same
    command again resumes the run from its folder's newest checkpoint; raise `--updates` to train
    further. Progress goes to stderr, the summary to stdout (--json: as JSON).
    """
    data: dict[str, Any] = read_config_file(config_file) if config_file is not None else {}
    overrides = _parse_set(settings)
    data.update(overrides)
    data.update({k: v for k, v in fields.items() if v is not None})
    if kwargs:
        data["env_kwargs"] = {**dict(data.get("env_kwargs") or {}), **parse_kwargs(kwargs)}
    if "env_id" not in data:
        raise ConfigError(
            "no environment to train on: pass --env ID (e.g. --env envgym/FrozenLake-v0) or --config FILE."
        )
    given = TrainConfig.from_dict(data)
    # The auto settings take the device profile's values (or, resuming, the run's recorded ones).
    config = given.resolve(recorded=recorded_config(given.out_dir))
    if show_config:
        echo_json(config.to_dict())
        return
    _train(config, as_json=as_json, auto=given.auto_fields, show_progress=not no_progress)


def _train(config: Any, *, as_json: bool, auto: list[str] | None = None, show_progress: bool = True) -> None:
    console = err_console()
    run_dir = config.out_dir
    rank, world, _ = world_from_env()
    main = rank == 0  # under torchrun only rank 0 reports; the others stay quiet
    resume_hint = f"  envgym train --config {run_dir / 'config.json'} --out {run_dir}"
    display = Progress(enabled=None if show_progress and main else False)
    phase: dict[str, Any] = {"key": None}

    def on_progress(name: str, update: int, **counts: int) -> None:
        if (name, update) != phase["key"]:
            phase["key"] = (name, update)
            label = "before training: evaluate" if update == 0 else f"update {update}/{config.updates}: {name}"
            unit = "micro-batches" if name == "optimise" else "episodes"
            display.start(label, counts.get("total"), unit=unit, done=counts.get("done", 0))
        display.update(**counts)

    def on_update(row: dict[str, Any]) -> None:
        display.finish(keep=False)
        phase["key"] = None
        if main:
            console.print(escape(_progress_line(row, config.updates)), soft_wrap=True, highlight=False)

    def on_event(message: str) -> None:
        if main and (message.startswith(("resuming", "stopped", "checkpoint")) or "abandoned" in message):
            display.clear()
            console.print(f"[dim]{escape(message)}[/]", soft_wrap=True)

    def on_first_ctrl_c() -> None:
        # Runs inside the signal handler: a raw write cannot collide with a print under way.
        os.write(
            2,
            b"\nstopping: the update under way is finished or abandoned, then the last completed update is "
            b"checkpointed (Ctrl-C again aborts at once)\n",
        )

    if main:
        console.print(
            f"training {config.model} on {config.env_id} with {config.algo}: {config.updates} updates of "
            f"{config.groups_per_update} x {config.group_size} episodes -> {run_dir}"
            + (f" ({world} data-parallel processes)" if world > 1 else ""),
            soft_wrap=True,
            highlight=False,
        )
        if auto:
            console.print(f"[dim]{escape(_profile_line(config, auto))}[/]", soft_wrap=True, highlight=False)
        hint = _busy_cores_hint(config)
        if hint:
            console.print(f"[dim]{escape(hint)}[/]", soft_wrap=True, highlight=False)
    trainer = Trainer(config, on_update=on_update, on_event=on_event, on_progress=on_progress)
    display.start(f"loading {config.model} and {config.env_id}", unit="")  # until the first rollout
    try:
        with stop_on_sigint(trainer, notify=on_first_ctrl_c):
            try:
                result = trainer.train()
            finally:
                display.close()
    except KeyboardInterrupt:
        done = list_checkpoints(run_dir)
        kept = f"update {done[-1][0]}" if done else "nothing yet (no checkpoint)"
        if main:
            console.print(
                f"\ninterrupted. Kept up to the newest checkpoint: {kept}. Resume with:\n{resume_hint}",
                soft_wrap=True,
                highlight=False,
            )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if not main:
        raise typer.Exit(EXIT_INTERRUPTED if result.stopped else 0)
    last = result.rows[-1] if result.rows else {}
    summary = {
        "out": str(result.out),
        "env_id": config.env_id,
        "algo": config.algo,
        "model": config.model,
        "start_update": result.start_update,
        "final_update": result.final_update,
        "updates": config.updates,
        "checkpoint": str(result.checkpoint) if result.checkpoint else None,
        "report": str(result.report) if result.report else None,
        "stopped": result.stopped,
        "last": {k: v for k, v in last.items() if k != "time"},
    }
    if result.stopped:
        kept = f"update {result.final_update}" if result.final_update else "nothing yet"
        console.print(
            f"stopped. Kept up to {kept} (checkpoint {result.checkpoint or '-'}; report {result.report or '-'}). "
            f"Resume with:\n{resume_hint}",
            soft_wrap=True,
            highlight=False,
        )
    if as_json:
        echo_json(summary)
        if result.stopped:
            raise typer.Exit(EXIT_INTERRUPTED)
        return
    if result.start_update >= config.updates:
        console.print(f"{run_dir} already holds {result.start_update} updates; raise --updates to train further.")
    table = Table(title=f"{config.env_id}  {config.algo}  {config.model}", title_justify="left", title_style="bold")
    table.add_column("", style="bold", no_wrap=True)
    table.add_column("value", justify="right")
    table.add_row("updates", f"{result.final_update}/{config.updates}")
    for key, label in SHOWN:
        if isinstance(last.get(key), float):
            table.add_row(label, fmt_float(last[key]))
    table.add_row("run folder", str(result.out))
    table.add_row("checkpoint", str(result.checkpoint) if result.checkpoint else "-")
    table.add_row("report", str(result.report) if result.report else "-")
    out_console().print(table)
    if result.stopped:
        raise typer.Exit(EXIT_INTERRUPTED)
