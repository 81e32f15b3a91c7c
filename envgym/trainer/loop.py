"""The training loop: roll out groups with the live policy, turn them into advantages, update.

One update:

1. **Rollout.** ``groups_per_update`` task seeds, ``group_size`` episodes each, played by the
   harness's :class:`~envgym.rollout.runner.Runner` with an agent that samples from the live
   policy in this process (see :mod:`envgym.trainer.policy`); the environments step in this
   process or, with ``rollout_backend`` ``process`` / ``ray``, in ``rollout_workers`` worker
   processes or Ray actors. Each round is a run folder under ``<run>/rollouts/`` (the
   trajectories are kept, token ids and log-probs included). Task seeds are fresh every update,
   or, with ``task_pool=N``, drawn from N fixed seeds in a seeded random order
   (:class:`~envgym.trainer.curriculum.TaskPool`); with ``task_filter`` a pool task whose last
   ``task_filter_groups`` groups were all solved or all failed is dropped (never below
   ``groups_per_update`` tasks left: a task that would take the pool lower stays in and is judged
   again after its next group; ``tasks/*`` metrics and the checkpoint record the drops).
   With ``dynamic_sampling`` the groups whose returns are all equal are dropped and fresh seeds
   are rolled out to refill the update, up to ``max_refill_rounds`` extra rounds.
2. **Advantages.** Group-relative (GRPO, Dr. GRPO, RLOO, GDPO per reward component, GiGPO's
   episode + step levels) or, for PPO, turn-level GAE on a value head read at the last prompt
   token of each turn. Functions from :mod:`envgym.trainer.advantages`.
3. **Optimisation.** ``ppo_epochs`` passes, each in ``minibatches`` optimizer steps, each step
   accumulating gradients over micro-batches of ``micro_batch_size`` sequences; the clipped
   policy loss, the KL penalty, the entropy bonus and the value loss come from
   :mod:`envgym.trainer.losses`, all on the policy at the sampling temperature, with the old
   log-probs recorded at that temperature (see :mod:`envgym.trainer.batch`); the gradient norm
   is clipped; AdamW steps.
4. **Bookkeeping.** One line of ``metrics.jsonl`` (see :mod:`envgym.trainer.metrics`), greedy
   evaluation on the held-out split every ``eval_every`` updates, a checkpoint every
   ``checkpoint_every`` updates and at the end, and ``report.md`` when the run ends.

Running again into the same folder resumes from the newest checkpoint: the update counter,
weights, optimizer, task seeds, task pool and filter, curricula and RNG states are restored,
updates after the checkpoint are played again (their partial records are replaced), and the
metrics equal those of an uninterrupted run. A changed configuration is refused, except the
fields in :data:`~envgym.trainer.config.RESUMABLE_CHANGES` (``updates`` may grow, for instance).

**Stopping.** :meth:`Trainer.request_stop` (``envgym train`` calls it on the first Ctrl-C, see
:func:`stop_on_sigint`; a second Ctrl-C aborts at once) ends the run cleanly: an update whose
rollouts are under way is abandoned (its partial records removed, the task seeds, curricula and
RNG states put back as they were before it), an update that is optimising finishes, and then the
last completed update is checkpointed and ``report.md`` written. Resuming then gives the same
results as a run that was never stopped.

**Data parallel.** Under ``torchrun --nproc_per_node=N -m envgym.cli train ...`` every rank
rolls out its own contiguous share of each round's groups (disjoint task seeds;
``groups_per_update`` must divide by N), the model's gradients are all-reduced by
``DistributedDataParallel``, the loss is normalised over the tokens (or sequences) of all ranks
so an update equals the one-process update over the same groups, and rank 0 alone evaluates and
writes metrics (reduced over the ranks), checkpoints and the report; see
:mod:`envgym.trainer.distributed`. The ranks agree on stopping at the end of an update and
before optimising (an interrupted rollout is not abandoned mid-way there).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import math
import os
import random
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgym._clock import utc_timestamp
from envgym.errors import ConfigError, EnvgymError, StopRun
from envgym.rollout.agent import Agent, AgentInput, AgentOutput
from envgym.rollout.records import Trajectory, Turn
from envgym.trainer.algorithms import Algorithm, Episodes, get_algorithm
from envgym.trainer.batch import Collected, TrainBatch, build_batch, collect
from envgym.trainer.checkpoint import CHECKPOINTS_DIR, latest_checkpoint, load_checkpoint, save_checkpoint
from envgym.trainer.config import RESUMABLE_CHANGES, TrainConfig
from envgym.trainer.distributed import Distributed
from envgym.trainer.metrics import MetricsLog, episode_metrics

__all__ = ["TrainResult", "Trainer", "stop_on_sigint", "train"]

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
META_FILE = "meta.json"
ROLLOUTS_DIR = "rollouts"
EVAL_DIR = "eval"
#: Training task seeds of run seed ``s`` start at ``s * TRAIN_SEED_STRIDE`` (runs with different
#: seeds never share tasks); evaluation always plays seeds ``0 .. eval_episodes-1`` of its split.
TRAIN_SEED_STRIDE = 1_000_000


@dataclass
class TrainResult:
    """What :meth:`Trainer.train` returns.

    Attributes:
        out: the run folder.
        rows: the ``metrics.jsonl`` lines written in this session (one per update, plus the
            update-0 evaluation of a fresh run).
        start_update: updates already done when the session started (0 for a fresh run).
        final_update: updates done when it ended.
        checkpoint: the newest checkpoint folder (rank 0 only under torchrun).
        report: ``report.md`` (``None`` when it could not be written, and on ranks other than 0).
        stopped: whether :meth:`Trainer.request_stop` ended the session before ``updates``.
        abandoned: the update whose rollouts a stop request abandoned (played again on resume).
    """

    out: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    start_update: int = 0
    final_update: int = 0
    checkpoint: Path | None = None
    report: Path | None = None
    stopped: bool = False
    abandoned: int | None = None


def _mix(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "little") >> 1


class _Abandoned(Exception):
    """A stop request arrived before the update's optimisation began: the update is dropped."""


class _StopCheck(Agent):
    """Wraps the rollout agent: a pending stop request ends the rollout (``StopRun``) at the next
    agent call, so a long rollout does not hold a Ctrl-C for minutes."""

    def __init__(self, inner: Agent, stop: Callable[[], bool]) -> None:
        self.inner = inner
        self._stop = stop
        self.name = inner.name
        self.chat = inner.chat
        self.wants_sample_action = inner.wants_sample_action

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        if self._stop():
            raise StopRun("training stop requested: the update's rollout is abandoned")
        return self.inner.act(batch)

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        self.inner.start_episode(episode_id, env_id, seed, member=member)

    def end_episode(self, episode_id: str) -> None:
        self.inner.end_episode(episode_id)

    def reset(self) -> None:
        self.inner.reset()

    def close(self) -> None:
        self.inner.close()


@contextmanager
def stop_on_sigint(trainer: Trainer, notify: Callable[[], None] | None = None) -> Iterator[None]:
    """While inside, the first SIGINT (Ctrl-C) calls ``trainer.request_stop()`` (then ``notify``,
    from the signal handler: keep it to an ``os.write``); a second one raises
    ``KeyboardInterrupt`` at once. Outside the main thread, or where SIGINT is ignored, it does
    nothing. The previous handler is put back on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        yield
        return

    def first(signum: int, frame: Any) -> None:
        trainer.request_stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the second Ctrl-C aborts
        if notify is not None:
            notify()

    signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _contiguous(seeds: Sequence[int]) -> list[list[int]]:
    """``seeds`` sorted and cut into runs of consecutive integers (one harness run each)."""
    runs: list[list[int]] = []
    for value in sorted(seeds):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return runs


def _light(traj: Trajectory) -> Trajectory:
    """``traj`` with only what the episode metrics read (sent between ranks)."""
    turns = [
        Turn(
            index=t.index,
            observation="",
            action="",
            reward=t.reward,
            reward_components={},
            action_valid=t.action_valid,
            format_ok=t.format_ok,
        )
        for t in traj.turns
    ]
    return dataclasses.replace(traj, turns=turns, task={}, final_observation="", env_kwargs={}, errors=[], extra={})


class Trainer:
    """Trains a policy on an environment as configured by a :class:`TrainConfig`.

    Args:
        config: the run.
        model: a live transformers causal LM to train instead of loading ``config.model``
            (with ``tokenizer``); resuming loads the checkpoint's weights into it.
        tokenizer: the tokenizer of ``model``.
        on_update: called with every ``metrics.jsonl`` line as it is written.
        on_event: called with short progress messages (``"rollout"``, ``"update"``...).
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        model: Any = None,
        tokenizer: Any = None,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        if not isinstance(config, TrainConfig):
            raise ConfigError(f"Trainer needs a TrainConfig, got {type(config).__name__}.")
        self.config = config
        self.algorithm: Algorithm = get_algorithm(config.algo)
        self.out = config.out_dir
        self._model = model
        self._tokenizer = tokenizer
        self.on_update = on_update
        self.on_event = on_event
        self._stop = False
        self.dist = Distributed()
        self.policy: Any = None
        self.optimizer: Any = None
        self.next_seed = config.seed * TRAIN_SEED_STRIDE
        self.horizon: Any = None
        self.ladder: Any = None
        self.pool: Any = None
        self.task_filter: Any = None

    def request_stop(self) -> None:
        """Stop soon and cleanly (safe from a callback or a signal handler): an update still rolling
        out is abandoned, one already optimising finishes; then the last completed update is
        checkpointed, ``report.md`` written, and :meth:`train` returns with ``stopped=True``."""
        self._stop = True

    @property
    def stop_requested(self) -> bool:
        return self._stop

    def _event(self, message: str) -> None:
        log.info(message)
        if self.on_event is not None:
            self.on_event(message)

    # ------------------------------------------------------------------------------ setup
    def _check_envs(self) -> None:
        """Fail on a bad id or bad environment arguments before any model loads."""
        from envgym.registration import make, spec

        cfg = self.config
        variants = [(cfg.env_id, dict(cfg.env_kwargs))]
        if cfg.difficulty is not None:
            variants = [cfg.level_env(level) for level in cfg.difficulty["levels"]]
        if cfg.eval_every:
            variants.append((cfg.env_id, cfg.resolved_eval_env_kwargs))
        for env_id, kwargs in variants:
            if spec(env_id).kind != "gymnasium":
                raise ConfigError(f"{env_id!r} is a multi-agent environment; the trainer needs single-agent ids.")
            make(env_id, **kwargs).close()

    def _check_world(self) -> None:
        cfg, world = self.config, self.dist.world_size
        if cfg.groups_per_update % world:
            raise ConfigError(
                f"groups_per_update ({cfg.groups_per_update}) must be a multiple of the number of data-parallel "
                f"processes ({world}): every rank rolls out the same number of groups."
            )

    def _open_folder(self) -> Path | None:
        """Create or reopen the run folder; refuse a changed config. Returns the checkpoint to
        resume from (``None``: a fresh start)."""
        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        config_path = self.out / CONFIG_FILE
        checkpoint = latest_checkpoint(self.out)
        if config_path.exists():
            try:
                old = json.loads(config_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                raise ConfigError(
                    f"{config_path} is not valid JSON ({err}); remove the folder or pick another --out."
                ) from err
            changes = [line for line in cfg.changes_from(old) if line.split(":", 1)[0] not in RESUMABLE_CHANGES]
            if changes and checkpoint is not None:
                raise ConfigError(
                    f"{self.out} holds a training run with a different configuration ({'; '.join(changes)}). Resume it "
                    "with the same settings (only updates, checkpoint_every, keep_checkpoints, tensorboard and the "
                    "rollout backend may change), or train into another folder (--out)."
                )
        tmp = config_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(cfg.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, config_path)
        self._write_meta(checkpoint)
        return checkpoint

    def _open_folder_everywhere(self) -> Path | None:
        """:meth:`_open_folder` on rank 0; the other ranks learn its answer (or its error)."""
        if not self.dist.active:
            return self._open_folder()
        if self.dist.is_main:
            try:
                checkpoint = self._open_folder()
            except ConfigError as err:
                self.dist.broadcast(("error", str(err)))
                raise
            self.dist.broadcast(("ok", str(checkpoint) if checkpoint is not None else None))
            return checkpoint
        status, value = self.dist.broadcast(None)
        if status == "error":
            raise ConfigError(value)
        return Path(value) if value is not None else None

    def _write_meta(self, checkpoint: Path | None) -> None:
        from envgym.rollout.rundir import record_session

        session = {
            "started_at": utc_timestamp(),
            "argv": list(sys.argv),
            "resumed_from": str(checkpoint) if checkpoint else None,
            "world_size": self.dist.world_size,
        }
        record_session(self.out / META_FILE, session)

    def _build(self) -> None:
        import torch

        from envgym.trainer.policy import load_policy

        cfg = self.config
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.policy = load_policy(cfg, model=self._model, tokenizer=self._tokenizer)
        if self.dist.active:
            device = self.policy.device
            self.policy.wrap_data_parallel([device.index] if device.type == "cuda" else None)
        self.optimizer = torch.optim.AdamW(self.policy.trainable_parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.generation = self.policy.generation()
        from envgym.trainer import curriculum

        if cfg.horizon is not None:
            self.horizon = curriculum.HorizonSchedule([tuple(stage) for stage in cfg.horizon])
        if cfg.difficulty is not None:
            ladder = cfg.difficulty
            self.ladder = curriculum.DifficultyController(
                list(ladder["levels"]),
                target=tuple(ladder["target"]) if isinstance(ladder["target"], list) else float(ladder["target"]),
                window=int(ladder["window"]),
                min_episodes=int(ladder["min_episodes"]),
            )
        if cfg.task_pool is not None:
            base = cfg.seed * TRAIN_SEED_STRIDE
            self.pool = curriculum.TaskPool(list(range(base, base + cfg.task_pool)), seed=cfg.seed)
            if cfg.task_filter:
                self.task_filter = curriculum.TaskFilter(min_attempts=1, window=cfg.task_filter_groups)

    def _state(self, update: int) -> dict[str, Any]:
        return {
            "update": update,
            "next_seed": self.next_seed,
            "horizon": self.horizon.state_dict() if self.horizon is not None else None,
            "difficulty": self.ladder.state_dict() if self.ladder is not None else None,
            "task_pool": self.pool.state_dict() if self.pool is not None else None,
            "task_filter": self.task_filter.state_dict() if self.task_filter is not None else None,
            "config": self.config.to_dict(),
        }

    def _restore(self, checkpoint: Path) -> int:
        state = load_checkpoint(checkpoint, policy=self.policy, optimizer=self.optimizer)
        self.next_seed = int(state["next_seed"])
        if self.horizon is not None and state.get("horizon") is not None:
            self.horizon.load_state_dict(state["horizon"])
        if self.ladder is not None and state.get("difficulty") is not None:
            self.ladder.load_state_dict(state["difficulty"])
        if self.pool is not None and state.get("task_pool") is not None:
            self.pool.load_state_dict(state["task_pool"])
        if self.task_filter is not None and state.get("task_filter") is not None:
            self.task_filter.load_state_dict(state["task_filter"])
        return int(state["update"])

    def _snapshot(self) -> dict[str, Any]:
        """Everything an update changes besides the weights and the optimizer (taken before it,
        put back by :meth:`_put_back` when a stop request abandons it)."""
        import torch

        snap: dict[str, Any] = copy.deepcopy(self._state(0))
        snap["torch_rng"] = torch.get_rng_state()
        if torch.cuda.is_available():
            snap["cuda_rng"] = torch.cuda.get_rng_state_all()
        snap["python_rng"] = random.getstate()
        return snap

    def _put_back(self, snap: dict[str, Any]) -> None:
        import torch

        self.next_seed = int(snap["next_seed"])
        for owner, key in ((self.horizon, "horizon"), (self.ladder, "difficulty"), (self.pool, "task_pool")):
            if owner is not None:
                owner.load_state_dict(snap[key])
        if self.task_filter is not None:
            self.task_filter.load_state_dict(snap["task_filter"])
        torch.set_rng_state(snap["torch_rng"])
        if "cuda_rng" in snap:
            torch.cuda.set_rng_state_all(snap["cuda_rng"])
        random.setstate(snap["python_rng"])

    def _discard_after(self, update: int) -> None:
        """Remove the records of updates after ``update`` (they are played again)."""
        for sub in (ROLLOUTS_DIR, EVAL_DIR):
            root = self.out / sub
            if not root.is_dir():
                continue
            for folder in root.iterdir():
                number = folder.name.removeprefix("update-").split("-")[0]
                if number.isdigit() and int(number) > update:
                    shutil.rmtree(folder, ignore_errors=True)

    # ------------------------------------------------------------------------------ run
    def train(self) -> TrainResult:
        """Run (or resume) the configured updates; see the module docstring."""
        self.dist = Distributed.from_env(self.config.device)
        try:
            return self._train()
        finally:
            self.dist.close()

    def _train(self) -> TrainResult:
        cfg = self.config
        dist = self.dist
        self._check_world()
        self._check_envs()
        checkpoint = self._open_folder_everywhere()
        self._build()
        start = self._restore(checkpoint) if checkpoint is not None else 0
        if checkpoint is not None:
            self._event(f"resuming {self.out} from {checkpoint.name} (update {start} of {cfg.updates})")
        if dist.is_main:
            self._discard_after(start)
        dist.barrier()  # no rank writes rollouts before the stale ones are gone
        metrics_log = MetricsLog(self.out, tensorboard=cfg.tensorboard) if dist.is_main else None
        if metrics_log is not None:
            metrics_log.truncate_after(start)
        result = TrainResult(out=self.out, start_update=start, final_update=start, checkpoint=checkpoint)
        saved_at = start if checkpoint is not None else -1

        def write(update: int, metrics: dict[str, Any]) -> None:
            row = metrics_log.write(update, metrics) if metrics_log is not None else {"update": update, **metrics}
            result.rows.append(row)
            self._emit(row)

        try:
            if start == 0 and cfg.eval_every:
                write(0, self._evaluate(0))
            for update in range(start + 1, cfg.updates + 1):
                if dist.any(self._stop):
                    result.stopped = True
                    break
                snapshot = self._snapshot()
                try:
                    metrics = self._update(update)
                except _Abandoned:
                    self._put_back(snapshot)
                    if dist.is_main:
                        self._discard_after(update - 1)
                    result.stopped, result.abandoned = True, update
                    self._event(f"update {update} abandoned (stop requested during its rollouts)")
                    break
                if cfg.eval_every and (update % cfg.eval_every == 0 or update == cfg.updates):
                    metrics.update(self._evaluate(update))
                write(update, metrics)
                result.final_update = update
                if (cfg.checkpoint_every and update % cfg.checkpoint_every == 0) or update == cfg.updates:
                    result.checkpoint = self._save(update)
                    saved_at = update
            if result.final_update >= cfg.updates:
                result.stopped = False  # a stop request that came with the last update stops nothing
            if saved_at != result.final_update and result.final_update > 0:
                result.checkpoint = self._save(result.final_update)
        finally:
            if metrics_log is not None:
                metrics_log.close()
        if result.stopped:
            self._event(f"stopped after update {result.final_update}; run again with the same settings to resume")
        if dist.is_main and (result.final_update >= cfg.updates or result.stopped):
            result.report = self._report()
        return result

    def _emit(self, row: dict[str, Any]) -> None:
        if self.on_update is not None:
            self.on_update(row)

    def _save(self, update: int) -> Path:
        if not self.dist.is_main:
            return self.out / CHECKPOINTS_DIR / f"update-{update:06d}"
        self._event(f"checkpoint at update {update}")
        return save_checkpoint(
            self.out,
            update,
            policy=self.policy,
            optimizer=self.optimizer,
            state=self._state(update),
            keep=self.config.keep_checkpoints,
        )

    def _report(self) -> Path | None:
        from envgym.trainer.metrics import read_metrics
        from envgym.trainer.report import write_report

        if not read_metrics(self.out):
            return None
        try:
            return write_report(self.out)
        except EnvgymError as err:  # a missing matplotlib must not fail a finished run
            log.warning("no report.md: %s", err)
            return None

    # ------------------------------------------------------------------------------ rollouts
    def _max_turns(self, update: int) -> int | None:
        if self.horizon is not None:
            return int(self.horizon.max_turns(update - 1))
        return self.config.max_turns

    def _env(self) -> tuple[str, dict[str, Any]]:
        """The env id and arguments of this update's rollouts (the difficulty ladder's level)."""
        if self.ladder is not None:
            return self.config.level_env(self.ladder.current)
        return self.config.env_id, dict(self.config.env_kwargs)

    def _task_seeds(self, count: int, used: set[int]) -> list[int]:
        """The next ``count`` training task seeds (fresh ones, or from the pool, skipping ``used``)."""
        if self.pool is None:
            seeds = list(range(self.next_seed, self.next_seed + count))
            self.next_seed += count
            return seeds
        return [int(s) for s in self.pool.draw(count, exclude=used)]

    def _rollout(
        self, update: int, round_: int, seeds: Sequence[int], env: tuple[str, Mapping[str, Any]], max_turns: int | None
    ) -> list[Trajectory]:
        """Play ``group_size`` episodes of each of ``seeds``, all in one harness run."""
        from envgym.rollout.runner import RunConfig, Runner
        from envgym.rollout.tasks import EpisodeTask

        cfg = self.config
        env_id, env_kwargs = env
        agent: Agent = self.generation.agent(
            temperature=cfg.temperature, top_p=cfg.top_p, seed=cfg.seed, name=f"policy@update{update - 1}"
        )
        if not self.dist.active:  # with ranks, stops are agreed at update boundaries instead
            agent = _StopCheck(agent, lambda: self._stop)
        folder = self.out / ROLLOUTS_DIR / (f"update-{update:06d}" + (f"-refill{round_ - 1}" if round_ > 1 else ""))
        if self.dist.active:
            folder = folder / f"rank-{self.dist.rank}"
        runs = _contiguous(seeds)
        shown = ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
        self._event(f"update {update}: rollout of {len(seeds) * cfg.group_size} episodes (seeds {shown})")
        # One task list, one harness run: the whole update's episodes share the generation batches.
        tasks = [
            EpisodeTask(env_id, seed, env_kwargs, group=group, member=member, max_turns=max_turns)
            for group, seed in enumerate(sorted(seeds))
            for member in range(cfg.group_size)
        ]
        run_config = RunConfig(
            agent_options={"temperature": cfg.temperature, "top_p": cfg.top_p, "max_new_tokens": cfg.max_new_tokens},
            tasks=tasks,
            seed=cfg.seed,
            group_size=cfg.group_size,
            max_turns=max_turns,
            num_envs=cfg.num_envs or len(tasks),
            prompt=cfg.prompt,
            backend=cfg.rollout_backend,
            workers=cfg.rollout_workers,
        )
        return Runner(run_config, agent, out=folder).run().trajectories

    def _evaluate(self, update: int) -> dict[str, float]:
        """Greedy evaluation on the held-out split (rank 0 plays it; every rank gets the metrics)."""
        from envgym.rollout.runner import RunConfig, Runner

        cfg = self.config
        metrics: dict[str, float] | None = None
        if self.dist.is_main:
            run_config = RunConfig(
                env_id=cfg.env_id,
                agent_options={"temperature": 0.0, "max_new_tokens": cfg.max_new_tokens},
                episodes=cfg.eval_episodes,
                seed=0,
                env_kwargs=cfg.resolved_eval_env_kwargs,
                max_turns=self._max_turns(max(update, 1)),
                num_envs=cfg.num_envs or cfg.eval_episodes,
                prompt=cfg.prompt,
                backend=cfg.rollout_backend,
                workers=cfg.rollout_workers,
            )
            agent = self.generation.agent(temperature=0.0, top_p=1.0, seed=cfg.seed, name=f"policy@update{update}")
            self._event(f"update {update}: greedy evaluation on {cfg.eval_episodes} held-out episodes")
            folder = self.out / EVAL_DIR / f"update-{update:06d}"
            shutil.rmtree(folder, ignore_errors=True)  # evaluation is always played anew
            trajectories = Runner(run_config, agent, out=folder).run().trajectories
            metrics = episode_metrics(trajectories, prefix="eval")
        return self.dist.broadcast(metrics)

    # ------------------------------------------------------------------------------ one update
    def _update(self, update: int) -> dict[str, Any]:
        import torch

        from envgym.trainer import advantages as adv_fns

        cfg = self.config
        dist = self.dist
        t0 = time.perf_counter()
        max_turns = self._max_turns(update)
        env = self._env()
        metrics: dict[str, Any] = {}
        if max_turns is not None:
            metrics["curriculum/max_turns"] = max_turns
        if self.ladder is not None:
            metrics["curriculum/level"] = self.ladder.index
        share = cfg.groups_per_update // dist.world_size
        played: list[Trajectory] = []
        kept: list[list[Trajectory]] = []  # groups trained on
        used: set[int] = set()
        rounds = zero_variance = 0
        need = share
        while True:
            needs = [int(n) for n in dist.gather(need)]
            if sum(needs) == 0:
                break
            rounds += 1
            seeds = self._task_seeds(sum(needs), used)  # the same on every rank
            if not seeds:
                break  # a pool with no unplayed active task left for this update
            used.update(seeds)
            first = sum(needs[: dist.rank])
            mine = seeds[first : first + needs[dist.rank]]
            try:
                trajectories = self._rollout(update, rounds, mine, env, max_turns) if mine else []
            except StopRun as err:
                raise _Abandoned from err
            played += trajectories
            outcomes = [
                pair
                for part in dist.gather([(int(t.seed), bool(t.success)) for t in trajectories if t.scored])
                for pair in part
            ]
            if self.ladder is not None:
                self.ladder.record([success for _, success in outcomes])
            if self.task_filter is not None:
                by_task: dict[int, list[bool]] = {}
                for task_seed, success in outcomes:
                    by_task.setdefault(task_seed, []).append(success)
                for task_seed, results in by_task.items():
                    self.task_filter.record(task_seed, results)
            groups: dict[int, list[Trajectory]] = {}
            for traj in trajectories:
                groups.setdefault(int(traj.seed if traj.seed is not None else -1), []).append(traj)
            if cfg.dynamic_sampling:
                usable = collect(trajectories, group_key=lambda t: t.seed)
                if usable.trajectories:
                    returns = torch.tensor([t.total_reward for t in usable.trajectories], dtype=torch.float32)
                    ids = torch.tensor([int(t.seed) for t in usable.trajectories], dtype=torch.long)
                    flat = adv_fns.zero_variance_groups(returns, ids)
                    dead = {int(ids[i]) for i in range(len(ids)) if bool(flat[i])}
                else:
                    dead = set(groups)
                zero_variance += len(dead & set(groups))
                kept += [members for key, members in groups.items() if key not in dead]
            else:
                kept += list(groups.values())
            refill = cfg.dynamic_sampling and rounds <= cfg.max_refill_rounds
            need = max(0, share - len(kept)) if refill else 0
        kept = kept[:share]
        if dist.any(self._stop):
            raise _Abandoned  # the rollouts are done but nothing changed yet: drop the update
        if self.task_filter is not None:
            metrics.update(self._filter_tasks(update))
        if self.pool is not None:
            metrics["tasks/active"] = len(self.pool.active)
            metrics["tasks/passes"] = self.pool.passes
        rollout_s = dist.max([time.perf_counter() - t0])[0]
        everyone = [t for part in dist.gather([_light(t) for t in played]) for t in part] if dist.active else played
        metrics.update(episode_metrics(everyone))
        generated = sum(t.completion_tokens for t in everyone)
        metrics["dynamic/rounds"] = rounds
        if cfg.dynamic_sampling:
            zero_variance, kept_groups = dist.sum([zero_variance, len(kept)])
            metrics["dynamic/zero_variance_groups"] = int(zero_variance)
            metrics["dynamic/kept_groups"] = int(kept_groups)
        metrics["perf/rollout_s"] = rollout_s
        metrics["perf/generated_tokens_per_s"] = generated / rollout_s if rollout_s > 0 else 0.0
        collected = collect(
            [t for group in kept for t in group], group_key=lambda t: t.seed, temperature=cfg.temperature
        )
        counts = dist.sum(
            [len(collected.trajectories), len(collected.samples), collected.excluded_episodes, collected.excluded_turns]
        )
        metrics["batch/episodes"], metrics["batch/turns"] = int(counts[0]), int(counts[1])
        metrics["batch/excluded_episodes"], metrics["batch/excluded_turns"] = int(counts[2]), int(counts[3])
        metrics["lr"] = cfg.lr
        if dist.min([len(collected.samples)])[0] == 0:
            where = "" if not dist.active else " on at least one rank"
            log.warning("update %d: nothing to train on%s (no scored episode with token ids); skipped", update, where)
            return metrics
        t1 = time.perf_counter()
        batch = self._make_batch(collected)
        metrics["policy/advantage_std"] = _std(self._turn_advantages)
        metrics.update(self._optimise(update, batch))
        self.generation.sync()
        update_s = dist.max([time.perf_counter() - t1])[0]
        metrics["perf/update_s"] = update_s
        processed = dist.sum([int(batch.attention_mask.sum().item()) * cfg.ppo_epochs])[0]
        metrics["perf/tokens_per_s"] = processed / update_s if update_s > 0 else 0.0
        return metrics

    def _filter_tasks(self, update: int) -> dict[str, Any]:
        """Drop the pool tasks the filter retired, keeping at least ``groups_per_update`` active."""
        floor = self.config.groups_per_update
        active = self.pool.active
        retired = [s for s in active if not self.task_filter.is_active(s)]
        room = max(0, len(active) - floor)
        dropped, spared = retired[:room], retired[room:]
        for task_seed in dropped:
            self.pool.drop(task_seed, update)
        if spared:
            log.info(
                "update %d: %d task(s) qualify for dropping but the pool keeps groups_per_update=%d tasks: %s",
                update,
                len(spared),
                floor,
                spared,
            )
        solved = sum(1 for s in dropped if self.task_filter.counts(s)[0] > 0)
        return {
            "tasks/dropped": len(self.pool.dropped),
            "tasks/dropped_seeds": dropped,
            "tasks/dropped_solved": solved,
            "tasks/dropped_failed": len(dropped) - solved,
            "tasks/spared": len(spared),
        }

    # ------------------------------------------------------------------------------ advantages
    def _make_batch(self, collected: Collected) -> TrainBatch:
        import torch

        cfg = self.config
        trajs = collected.trajectories
        seeds = [int(t.seed if t.seed is not None else -1) for t in trajs]
        order = {s: i for i, s in enumerate(dict.fromkeys(seeds))}
        episodes = Episodes(
            trajectories=trajs,
            group_ids=torch.tensor([order[s] for s in seeds], dtype=torch.long),
            returns=torch.tensor([t.total_reward for t in trajs], dtype=torch.float32),
            config=cfg,
            turn_values=lambda: self._turn_values(collected),
        )
        result = self.algorithm.advantages(episodes)
        per_turn = result.per_turn
        returns_per_sample: list[float] | None = None
        old_values: list[float] | None = None
        if result.returns is not None and result.values is not None:
            returns_per_sample = [float(result.returns[s.episode][s.turn]) for s in collected.samples]
            old_values = [float(result.values[s.episode][s.turn]) for s in collected.samples]
        advantages = [float(per_turn[s.episode][s.turn]) for s in collected.samples]
        everyone = [a for part in self.dist.gather(advantages) for a in part] if self.dist.active else advantages
        if self.algorithm.whiten and len(everyone) > 1:  # e.g. PPO: whitened over the (whole) batch
            mean = sum(everyone) / len(everyone)
            std = _std(everyone)
            advantages = [(a - mean) / (std + 1e-8) for a in advantages]
            everyone = [(a - mean) / (std + 1e-8) for a in everyone]
        self._turn_advantages = everyone
        batch = build_batch(
            collected.samples,
            advantages,
            pad_id=self.policy.pad_id,
            returns=returns_per_sample,
            old_values=old_values,
        )
        if not all(sample.logprobs_match for sample in collected.samples):
            # The records hold no log-probs of the untruncated policy at this temperature (top-p
            # truncated them): recompute them. The weights are still the ones that sampled.
            batch.old_logprobs = self._no_grad_logprobs(batch, reference=False)
        if cfg.kl_coef > 0:
            batch.ref_logprobs = self._no_grad_logprobs(batch, reference=True)
        return batch

    def _no_grad_logprobs(self, batch: TrainBatch, *, reference: bool) -> Any:
        import torch

        width = batch.input_ids.shape[1]
        parts = []
        was_training = self.policy.model.training
        self.policy.train(False)  # no dropout: these are the sampling policy's numbers
        try:
            with torch.no_grad():
                for micro in batch.split(self.config.micro_batch_size):
                    lp = self.policy.forward(micro, reference=reference).logprobs.float().cpu()
                    parts.append(torch.nn.functional.pad(lp, (0, width - lp.shape[1])))
        finally:
            self.policy.train(was_training)
        return torch.cat(parts)

    def _turn_values(self, collected: Collected) -> list[Any]:
        """The value head's estimate of every turn before the update, per episode (value-head
        algorithms). A turn left out of the batch (no token ids) keeps value 0."""
        import torch

        probe = build_batch(collected.samples, [0.0] * len(collected.samples), pad_id=self.policy.pad_id)
        values: list[float] = []
        with torch.no_grad():
            for micro in probe.split(self.config.micro_batch_size):
                values += self.policy.forward(micro, values=True).values.float().cpu().tolist()
        turn_values = []
        for episode, traj in enumerate(collected.trajectories):
            v = torch.zeros(len(traj.turns), dtype=torch.float32)
            # samples index turns by Turn.index, which is the position in traj.turns
            for turn, position in enumerate(collected.turn_index[episode]):
                if position is not None:
                    v[turn] = values[position]
            turn_values.append(v)
        return turn_values

    # ------------------------------------------------------------------------------ optimisation
    def _optimise(self, update: int, batch: TrainBatch) -> dict[str, float]:
        """``ppo_epochs`` passes of ``minibatches`` optimizer steps over ``batch``.

        Each micro-batch's loss is weighted by its share of the step's tokens (or sequences)
        summed over every rank, and multiplied by the number of ranks because
        ``DistributedDataParallel`` averages the gradients: a step's gradient is then the one a
        single process would compute over all the ranks' sequences. A rank with no sequence in
        a step still joins its all-reduce with a zero-weight pass.
        """
        import torch

        from envgym.trainer import losses

        cfg = self.config
        dist = self.dist
        policy = self.policy
        params = policy.trainable_parameters()
        aggregation = cfg.aggregation
        per_token = aggregation == "token-mean"
        generator = torch.Generator().manual_seed(_mix(cfg.seed, update))
        n = len(batch)
        sums: dict[str, float] = {}
        weights: dict[str, float] = {}
        ratio_max = -math.inf
        grad_norms: list[float] = []
        # With the policy loss alone (no KL, entropy or value term), a sequence whose advantages
        # are all 0 has a gradient of exactly 0: it is left out of the forward and backward passes
        # (its tokens still count in the step's normaliser, so the step is the same). Its tokens
        # are then missing from the policy/* statistics.
        skip_idle = cfg.kl_coef == 0 and cfg.entropy_coef == 0 and not self.algorithm.value_head
        skipped = 0
        policy.train()
        for _epoch in range(cfg.ppo_epochs):
            order = torch.randperm(n, generator=generator) if (cfg.ppo_epochs > 1 or cfg.minibatches > 1) else None
            index = order if order is not None else torch.arange(n)
            minibatches = [
                batch.select(chunk) if len(chunk) else None for chunk in torch.tensor_split(index, cfg.minibatches)
            ]
            local = [(mb.tokens if per_token else len(mb)) if mb is not None else 0 for mb in minibatches]
            totals = dist.sum(local)
            for minibatch, total in zip(minibatches, totals, strict=True):
                if total <= 0:
                    continue  # empty on every rank: no step
                self.optimizer.zero_grad(set_to_none=True)
                # (micro-batch, its share of the step, the share it had before idle rows were left out)
                parts: list[tuple[TrainBatch, float, float]] = []
                for micro in minibatch.split(cfg.micro_batch_size) if minibatch is not None else ():
                    full = (micro.tokens if per_token else len(micro)) / total
                    if skip_idle:
                        active = _active_rows(micro)
                        if len(active) < len(micro):
                            skipped += len(micro) - len(active)
                            if not active:
                                for key in ("loss/policy", "loss/total"):  # its loss is exactly 0
                                    _add(sums, weights, key, 0.0, full)
                                continue
                            micro = micro.select(active)
                    parts.append((micro, (micro.tokens if per_token else len(micro)) / total, full))
                if not parts and dist.active:
                    parts = [(batch.select([0]), 0.0, 0.0)]  # join the all-reduce, add nothing
                for i, (micro, share, full) in enumerate(parts):
                    with policy.no_sync() if i < len(parts) - 1 else nullcontext():
                        loss, stats = self._micro_loss(micro, losses, aggregation)
                        (loss["total"] * (share * dist.world_size)).backward()
                    if share == 0:
                        continue
                    tokens = float(micro.tokens)
                    for key, value in loss.items():
                        # Left-out rows add 0 to the micro-batch's loss: report it over all its rows.
                        _add(sums, weights, f"loss/{key}", float(value.detach()) * (share / full), full)
                    for key in ("clip_fraction", "approx_kl", "ratio_mean"):
                        if key in stats:
                            _add(sums, weights, f"policy/{key}", _scalar(stats[key]), tokens)
                    if "ratio_max" in stats:
                        ratio_max = max(ratio_max, _scalar(stats["ratio_max"]))
                    _add(sums, weights, "policy/entropy", float(stats["entropy"]), tokens)
                if all(param.grad is None for param in params):
                    for param in params:  # every sequence skipped: AdamW still steps, on a zero gradient
                        param.grad = torch.zeros_like(param)
                limit = cfg.max_grad_norm if cfg.max_grad_norm is not None else math.inf
                norm = torch.nn.utils.clip_grad_norm_(params, limit)
                grad_norms.append(float(norm))
                self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if dist.active:
            merged_sums: dict[str, float] = {}
            merged_weights: dict[str, float] = {}
            for part_sums, part_weights in dist.gather((sums, weights)):
                for key, value in part_sums.items():
                    merged_sums[key] = merged_sums.get(key, 0.0) + value
                    merged_weights[key] = merged_weights.get(key, 0.0) + part_weights[key]
            sums, weights = merged_sums, merged_weights
            ratio_max = dist.max([ratio_max])[0]
        out = {key: sums[key] / weights[key] for key in sums if weights[key] > 0}
        if ratio_max > -math.inf:
            out["policy/ratio_max"] = ratio_max
        if grad_norms:
            out["grad_norm"] = sum(grad_norms) / len(grad_norms)
        out["optimizer_steps"] = float(len(grad_norms))
        out["batch/skipped_zero_advantage"] = dist.sum([float(skipped)])[0]
        out["tokens"] = dist.sum([float(batch.tokens)])[0]
        return out

    def _micro_loss(self, micro: TrainBatch, losses: Any, aggregation: str) -> tuple[dict[str, Any], dict[str, Any]]:
        import torch

        cfg = self.config
        value_head = self.algorithm.value_head
        out = self.policy.forward(micro, entropy=True, values=value_head, entropy_grad=cfg.entropy_coef != 0)
        mask = micro.loss_mask.to(out.logprobs.device)
        device = out.logprobs.device
        policy, stats = losses.policy_loss(
            out.logprobs,
            micro.old_logprobs.to(device),
            micro.advantages.to(device),
            mask,
            clip_low=cfg.clip_low,
            clip_high=cfg.clip_high,
            aggregation=aggregation,
            max_tokens=cfg.max_new_tokens,
        )
        terms: dict[str, Any] = {"policy": policy}
        entropy = losses.aggregate(out.entropy, mask, aggregation, max_tokens=cfg.max_new_tokens)
        if cfg.kl_coef > 0:
            per_token = losses.kl_penalty(out.logprobs, micro.ref_logprobs.to(device), mask, estimator=cfg.kl_estimator)
            terms["kl"] = losses.aggregate(per_token, mask, aggregation, max_tokens=cfg.max_new_tokens)
        if value_head:
            terms["value"] = losses.value_loss(
                out.values,
                micro.returns.to(device),
                torch.ones_like(out.values),
                old_values=micro.old_values.to(device),
                clip_range=cfg.value_clip,
            )
        terms["total"] = losses.combine(
            policy,
            kl=terms.get("kl"),
            kl_coef=cfg.kl_coef,
            entropy=entropy,
            entropy_coef=cfg.entropy_coef,
            value=terms.get("value"),
            vf_coef=cfg.vf_coef if value_head else 0.0,
        )
        token_entropy = (out.entropy.detach() * mask).sum() / mask.sum().clamp_min(1)
        return terms, {**stats, "entropy": float(token_entropy)}


def _scalar(value: Any) -> float:
    return float(value.item()) if hasattr(value, "item") else float(value)


def _add(sums: dict[str, float], weights: dict[str, float], key: str, value: float, weight: float) -> None:
    sums[key] = sums.get(key, 0.0) + value * weight
    weights[key] = weights.get(key, 0.0) + weight


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def train(config: TrainConfig | Mapping[str, Any], **kwargs: Any) -> TrainResult:
    """Train as configured (a :class:`TrainConfig` or a mapping of its fields); see :class:`Trainer`."""
    if not isinstance(config, TrainConfig):
        config = TrainConfig.from_dict(config)
    return Trainer(config, **kwargs).train()


def _active_rows(batch: TrainBatch) -> list[int]:
    """Rows of ``batch`` with a non-zero advantage on at least one trained token."""
    nonzero = (batch.advantages * batch.loss_mask).abs().sum(dim=-1) > 0
    return [int(i) for i in nonzero.nonzero().flatten().tolist()]
