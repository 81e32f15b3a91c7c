"""The training loop: roll out groups with the live policy, turn them into advantages, update.

This module orchestrates; the parts live beside it: :mod:`envgym.trainer.rollout` (which tasks
an update plays, playing them, evaluation), :mod:`envgym.trainer.update` (advantages into a
batch, the optimizer steps), :mod:`envgym.trainer.state` (task seeds, curricula, checkpoints,
the run folder) and :mod:`envgym.trainer.algorithms` (what each algorithm changes).

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

import functools
import logging
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgym._folderlock import FolderLock
from envgym.errors import ConfigError, EnvgymError, StopRun
from envgym.registration import make, make_parallel, spec
from envgym.rollout.records import Trajectory
from envgym.trainer import policy as trainer_policy  # load_policy looked up at call time (tests replace it)
from envgym.trainer import vllm_generation  # looked up at call time (tests replace VLLMGeneration)
from envgym.trainer.algorithms import Algorithm, get_algorithm
from envgym.trainer.batch import Collected, TrainBatch, collect
from envgym.trainer.checkpoint import CHECKPOINTS_DIR, remove_stale_checkpoints, save_checkpoint
from envgym.trainer.collapse import CollapseMonitor, diversity_metrics
from envgym.trainer.config import TrainConfig, recorded_config
from envgym.trainer.distributed import Distributed
from envgym.trainer.metrics import MetricsLog, episode_metrics, read_metrics
from envgym.trainer.report import write_report
from envgym.trainer.rollout import draw_task_seeds, flat_groups, light, play_evaluation, play_rollout, rollout_folder
from envgym.trainer.state import RunState, discard_after, open_run_folder
from envgym.trainer.tracking import check_trackers, plan
from envgym.trainer.update import PolicyUpdate, std

__all__ = ["TrainResult", "Trainer", "stop_on_sigint", "train"]

log = logging.getLogger(__name__)


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
        collapsed: why the collapse monitor ended the run (``collapse="stop"``), else ``None``.
    """

    out: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    start_update: int = 0
    final_update: int = 0
    checkpoint: Path | None = None
    report: Path | None = None
    stopped: bool = False
    abandoned: int | None = None
    collapsed: str | None = None


class _Abandoned(Exception):
    """A stop request arrived before the update's optimisation began: the update is dropped."""


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


class Trainer:
    """Trains a policy on an environment as configured by a :class:`TrainConfig`.

    Args:
        config: the run.
        model: a live transformers causal LM to train instead of loading ``config.model``
            (with ``tokenizer``); resuming loads the checkpoint's weights into it.
        tokenizer: the tokenizer of ``model``.
        on_update: called with every ``metrics.jsonl`` line as it is written.
        on_event: called with short progress messages (``"rollout"``, ``"update"``...).
        on_progress: called as ``on_progress(phase, update, **counts)`` while an update works:
            ``phase`` ``"rollout"`` (``"rollout refill N"`` for dynamic sampling's extra rounds) and
            ``"evaluate"`` with the runner's running totals (``done``, ``total``, ``live``,
            ``turns``, ``tokens``: see :class:`~envgym.rollout.runner.Runner`), ``"optimise"``
            with ``done`` and ``total`` micro-batches. Each phase ends when the next one starts
            or the update's ``on_update`` line comes. Only this process's share (under torchrun).

    ``config``'s ``auto`` settings are resolved here (:meth:`TrainConfig.resolve`, resuming a run
    folder's recorded values): :attr:`config` is the resolved config.
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        model: Any = None,
        tokenizer: Any = None,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        on_event: Callable[[str], None] | None = None,
        on_progress: Callable[..., None] | None = None,
    ) -> None:
        if not isinstance(config, TrainConfig):
            raise ConfigError(f"Trainer needs a TrainConfig, got {type(config).__name__}.")
        if config.auto_fields:
            config = config.resolve(recorded=recorded_config(config.out_dir))
        self.config = config
        self.algorithm: Algorithm = get_algorithm(config.algo)
        self.out = config.out_dir
        self._model = model
        self._tokenizer = tokenizer
        self.on_update = on_update
        self.on_event = on_event
        self.on_progress = on_progress
        self._stop = False
        self.dist = Distributed()
        self.policy: Any = None
        self.optimizer: Any = None
        self.generation: Any = None
        self.updater: PolicyUpdate | None = None
        #: Task seeds, curricula, task pool and filter: what an update changes besides the weights.
        self.state = RunState.fresh(config)
        self._turn_advantages: list[float] = []
        self._owner: FolderLock | None = None

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

    def _progress(self, phase: str, update: int) -> Callable[..., None] | None:
        """The hook that hands ``phase``'s running totals to ``on_progress`` (``None`` without one)."""
        return None if self.on_progress is None else functools.partial(self.on_progress, phase, update)

    # ------------------------------------------------------------------------------ setup
    def _check_envs(self) -> None:
        """Fail on a bad id or bad environment arguments before any model loads."""
        cfg = self.config
        variants = [(cfg.env_id, cfg.resolved_env_kwargs)]
        if cfg.difficulty is not None:
            variants = [cfg.level_env(level) for level in cfg.difficulty["levels"]]
        if cfg.eval_every:
            variants.append((cfg.env_id, cfg.resolved_eval_env_kwargs))
        for env_id, kwargs in variants:
            kind = spec(env_id).kind
            if kind == "parallel":
                # Self-play: every agent's turns are samples of the one policy, and every agent's
                # record is an episode of its task's group (envgym.rollout.multiagent).
                if cfg.rollout_backend != "inproc":
                    raise ConfigError(
                        f"{env_id!r} is a PettingZoo Parallel environment: its rollouts run in this process; "
                        f"set rollout_backend='inproc' (got {cfg.rollout_backend!r})."
                    )
                if kwargs.get("reward_wrappers"):
                    raise ConfigError(
                        f"{env_id!r} is a PettingZoo Parallel environment: reward wrappers apply to single-agent "
                        "envs only (give its reward settings in env_kwargs)."
                    )
                make_parallel(env_id, **kwargs).close()
                continue
            if kind != "gymnasium":
                raise ConfigError(
                    f"{env_id!r} is a turn-based ({kind}) multi-agent environment; the trainer takes single-agent "
                    "ids and PettingZoo Parallel ids (self-play)."
                )
            make(env_id, **kwargs).close()

    def _check_world(self) -> None:
        cfg, world = self.config, self.dist.world_size
        if cfg.groups_per_update % world:
            raise ConfigError(
                f"groups_per_update ({cfg.groups_per_update}) must be a multiple of the number of data-parallel "
                f"processes ({world}): every rank rolls out the same number of groups."
            )

    def _open_folder(self) -> Path | None:
        """Lock, then create or reopen the run folder; refuse a changed config. Returns the
        checkpoint to resume from (``None``: a fresh start). The lock (one writer per folder, a
        second ``envgym train --out`` on it stops here) is held until :meth:`train` returns."""
        self._owner = FolderLock(self.out, "training folder")
        remove_stale_checkpoints(self.out)  # a kill while a checkpoint was saved or retired
        return open_run_folder(self.out, self.config, world_size=self.dist.world_size)

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

    def _build(self) -> None:
        import torch

        cfg = self.config
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.policy = trainer_policy.load_policy(cfg, model=self._model, tokenizer=self._tokenizer)
        if self.dist.active:
            device = self.policy.device
            self.policy.wrap_data_parallel([device.index] if device.type == "cuda" else None)
        self.optimizer = torch.optim.AdamW(self.policy.trainable_parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        if cfg.generation_backend == "vllm":
            self.generation = vllm_generation.VLLMGeneration(self.policy, cfg)
        else:
            self.generation = self.policy.generation()
        self.updater = PolicyUpdate(cfg, self.algorithm, self.policy, self.optimizer, self.dist)

    # ------------------------------------------------------------------------------ run
    def train(self) -> TrainResult:
        """Run (or resume) the configured updates; see the module docstring."""
        self.dist = Distributed.from_env(self.config.device)
        try:
            return self._train()
        finally:
            try:
                self.dist.close()
            finally:
                if self._owner is not None:
                    self._owner.release()
                    self._owner = None

    def _train(self) -> TrainResult:
        cfg = self.config
        dist = self.dist
        self._check_world()
        if dist.is_main:  # an unknown or missing tracker fails before any model loads
            names, required = _tracker_names(cfg)
            check_trackers(names, required=required)
        self._check_envs()
        checkpoint = self._open_folder_everywhere()
        self._build()
        start = (
            self.state.restore(checkpoint, policy=self.policy, optimizer=self.optimizer)
            if checkpoint is not None
            else 0
        )
        if checkpoint is not None:
            self._event(f"resuming {self.out} from {checkpoint.name} (update {start} of {cfg.updates})")
        if dist.is_main:
            discard_after(self.out, start)
        dist.barrier()  # no rank writes rollouts before the stale ones are gone
        metrics_log = (
            MetricsLog(self.out, tensorboard=cfg.tensorboard, trackers=cfg.trackers, config=cfg.to_dict())
            if dist.is_main
            else None
        )
        if metrics_log is not None:
            # Rows past the checkpoint are played again; without one, so is everything (the
            # update-0 evaluation included, else a run killed before its first checkpoint would
            # write that row twice).
            metrics_log.truncate_after(start if checkpoint is not None else -1)
        result = TrainResult(out=self.out, start_update=start, final_update=start, checkpoint=checkpoint)
        saved_at = start if checkpoint is not None else -1

        def write(update: int, metrics: dict[str, Any]) -> None:
            row = metrics_log.write(update, metrics) if metrics_log is not None else {"update": update, **metrics}
            result.rows.append(row)
            self._emit(row)

        monitor = CollapseMonitor(patience=cfg.collapse_patience)
        warned: str | None = None
        try:
            if start == 0 and cfg.eval_every:
                write(0, self._evaluate(0))
            for update in range(start + 1, cfg.updates + 1):
                if dist.any(self._stop):
                    result.stopped = True
                    break
                snapshot = self.state.snapshot()
                try:
                    metrics = self._update(update)
                except _Abandoned:
                    self.state.put_back(snapshot)
                    if dist.is_main:
                        discard_after(self.out, update - 1)
                    result.stopped, result.abandoned = True, update
                    self._event(f"update {update} abandoned (stop requested during its rollouts)")
                    break
                if cfg.eval_every and (update % cfg.eval_every == 0 or update == cfg.updates):
                    metrics.update(self._evaluate(update))
                verdict = monitor.observe(metrics) if cfg.collapse != "off" else None
                write(update, metrics)
                result.final_update = update
                if verdict is not None and verdict != warned:
                    self._event(f"update {update}: {verdict}")
                    log.warning("update %d: %s", update, verdict)
                    warned = verdict
                    if cfg.collapse == "stop":
                        result.stopped, result.collapsed = True, verdict
                        break
                if (cfg.checkpoint_every and update % cfg.checkpoint_every == 0) or update == cfg.updates:
                    result.checkpoint = self._save(update)
                    saved_at = update
            if result.final_update >= cfg.updates:
                result.stopped = False  # a stop request that came with the last update stops nothing
            if saved_at != result.final_update and result.final_update > 0:
                result.checkpoint = self._save(result.final_update)
        finally:
            if metrics_log is not None:
                error = sys.exc_info()[0]
                metrics_log.close("finished" if error is None else "killed" if error is KeyboardInterrupt else "failed")
        if result.collapsed:
            self._event(f"ended after update {result.final_update} by the collapse monitor (collapse='stop')")
        elif result.stopped:
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
            state=self.state.state_dict(update),
            keep=self.config.keep_checkpoints,
        )

    def _report(self) -> Path | None:
        if not read_metrics(self.out):
            return None
        try:
            return write_report(self.out)
        except EnvgymError as err:  # a missing matplotlib must not fail a finished run
            log.warning("no report.md: %s", err)
            return None

    # ------------------------------------------------------------------------------ rollouts
    def _env(self) -> tuple[str, dict[str, Any]]:
        """The env id and arguments of this update's rollouts (the difficulty ladder's level)."""
        return self.state.env()

    def _rollout(
        self, update: int, round_: int, seeds: Sequence[int], env: tuple[str, Mapping[str, Any]], max_turns: int | None
    ) -> list[Trajectory]:
        """Play ``group_size`` episodes of each of ``seeds``, all in one harness run
        (:func:`envgym.trainer.rollout.play_rollout`)."""
        active = self.dist.active
        return play_rollout(
            self.config,
            self.generation,
            update=update,
            seeds=seeds,
            env=env,
            max_turns=max_turns,
            folder=rollout_folder(self.out, update, round_, self.dist.rank if active else None),
            # with ranks, stops are agreed at update boundaries instead
            stop=None if active else (lambda: self._stop),
            event=self._event,
            on_progress=self._progress("rollout" if round_ == 1 else f"rollout refill {round_ - 1}", update),
        )

    def _evaluate(self, update: int) -> dict[str, float]:
        """Greedy evaluation on the held-out split (rank 0 plays it; every rank gets the metrics)."""
        metrics: dict[str, float] | None = None
        if self.dist.is_main:
            metrics = play_evaluation(
                self.config,
                self.generation,
                update=update,
                max_turns=self.state.max_turns(max(update, 1)),
                out=self.out,
                event=self._event,
                on_progress=self._progress("evaluate", update),
            )
        return self.dist.broadcast(metrics)

    def _collect_groups(
        self, update: int, env: tuple[str, Mapping[str, Any]], max_turns: int | None
    ) -> tuple[list[Trajectory], list[list[Trajectory]], int, int]:
        """Roll out this rank's share of the update's groups (with ``dynamic_sampling``, in rounds
        until enough groups with reward variance are in). Returns the episodes played, the groups
        to train on, the number of rounds and the number of zero-variance groups dropped."""
        cfg = self.config
        dist = self.dist
        state = self.state
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
            seeds = draw_task_seeds(state, sum(needs), used)  # the same on every rank
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
            if state.ladder is not None:
                state.ladder.record([success for _, success in outcomes])
            if state.task_filter is not None:
                by_task: dict[int, list[bool]] = {}
                for task_seed, success in outcomes:
                    by_task.setdefault(task_seed, []).append(success)
                for task_seed, results in by_task.items():
                    state.task_filter.record(task_seed, results)
            groups: dict[int, list[Trajectory]] = {}
            for traj in trajectories:
                groups.setdefault(int(traj.seed if traj.seed is not None else -1), []).append(traj)
            if cfg.dynamic_sampling:
                dead = flat_groups(trajectories, set(groups))
                zero_variance += len(dead & set(groups))
                kept += [members for key, members in groups.items() if key not in dead]
            else:
                kept += list(groups.values())
            refill = cfg.dynamic_sampling and rounds <= cfg.max_refill_rounds
            need = max(0, share - len(kept)) if refill else 0
        return played, kept[:share], rounds, zero_variance

    # ------------------------------------------------------------------------------ one update
    def _update(self, update: int) -> dict[str, Any]:
        cfg = self.config
        dist = self.dist
        state = self.state
        t0 = time.perf_counter()
        max_turns = state.max_turns(update)
        env = state.env()
        metrics: dict[str, Any] = {}
        if max_turns is not None:
            metrics["curriculum/max_turns"] = max_turns
        if state.ladder is not None:
            metrics["curriculum/level"] = state.ladder.index
        played, kept, rounds, zero_variance = self._collect_groups(update, env, max_turns)
        if dist.any(self._stop):
            raise _Abandoned  # the rollouts are done but nothing changed yet: drop the update
        if state.task_filter is not None:
            metrics.update(state.filter_tasks(update))
        if state.pool is not None:
            metrics["tasks/active"] = len(state.pool.active)
            metrics["tasks/passes"] = state.pool.passes
        rollout_s = dist.max([time.perf_counter() - t0])[0]
        everyone = [t for part in dist.gather([light(t) for t in played]) for t in part] if dist.active else played
        metrics.update(episode_metrics(everyone))
        metrics.update(diversity_metrics(everyone))
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
        metrics["policy/advantage_std"] = std(self._turn_advantages)
        metrics.update(self._optimise(update, batch))
        self.generation.sync()
        update_s = dist.max([time.perf_counter() - t1])[0]
        metrics["perf/update_s"] = update_s
        processed = dist.sum([int(batch.attention_mask.sum().item()) * cfg.ppo_epochs])[0]
        metrics["perf/tokens_per_s"] = processed / update_s if update_s > 0 else 0.0
        return metrics

    def _make_batch(self, collected: Collected) -> TrainBatch:
        """The training batch of ``collected`` (:meth:`PolicyUpdate.make_batch`)."""
        assert self.updater is not None, "_build() first"
        batch, self._turn_advantages = self.updater.make_batch(collected)
        return batch

    def _optimise(self, update: int, batch: TrainBatch) -> dict[str, float]:
        """The update's optimizer steps (:meth:`PolicyUpdate.optimise`)."""
        assert self.updater is not None, "_build() first"
        return self.updater.optimise(update, batch, on_progress=self._progress("optimise", update))


def _tracker_names(config: TrainConfig) -> tuple[list[str], list[str]]:
    """The trackers of ``config`` and those of them that must be installed."""
    planned = plan(config.trackers, config.tensorboard)
    return [name for name, _ in planned], [name for name, required in planned if required]


def train(config: TrainConfig | Mapping[str, Any], **kwargs: Any) -> TrainResult:
    """Train as configured (a :class:`TrainConfig` or a mapping of its fields); see :class:`Trainer`."""
    if not isinstance(config, TrainConfig):
        config = TrainConfig.from_dict(config)
    return Trainer(config, **kwargs).train()
