"""A training run's state between updates, and its folder.

:class:`RunState` holds what an update changes besides the weights and the optimizer: the next
fresh task seed, the horizon schedule, the difficulty ladder, the task pool and its filter. It
gives the dictionary a checkpoint stores (:meth:`RunState.state_dict`), loads a checkpoint back
(:meth:`RunState.restore`), and takes and puts back the snapshot a stop request needs to abandon
an update (:meth:`RunState.snapshot`, :meth:`RunState.put_back`).

The run folder: :func:`open_run_folder` creates or reopens it (refusing a changed configuration
when there is a checkpoint to resume), :func:`discard_after` removes the records of updates that
are played again.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgym._clock import utc_timestamp
from envgym._runfiles import write_atomic
from envgym.errors import ConfigError
from envgym.rollout.rundir import record_session
from envgym.trainer import curriculum
from envgym.trainer.checkpoint import latest_checkpoint, load_checkpoint
from envgym.trainer.config import RESUMABLE_CHANGES, TrainConfig

__all__ = [
    "CONFIG_FILE",
    "EVAL_DIR",
    "META_FILE",
    "ROLLOUTS_DIR",
    "TRAIN_SEED_STRIDE",
    "RunState",
    "discard_after",
    "open_run_folder",
]

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
META_FILE = "meta.json"
ROLLOUTS_DIR = "rollouts"
EVAL_DIR = "eval"
#: Training task seeds of run seed ``s`` start at ``s * TRAIN_SEED_STRIDE`` (runs with different
#: seeds never share tasks); evaluation always plays seeds ``0 .. eval_episodes-1`` of its split.
TRAIN_SEED_STRIDE = 1_000_000


@dataclass
class RunState:
    """What an update changes besides the weights and the optimizer.

    Attributes:
        config: the run's settings.
        next_seed: the next fresh training task seed (without a task pool).
        horizon: the turn-limit schedule (``config.horizon``), or ``None``.
        ladder: the difficulty controller (``config.difficulty``), or ``None``.
        pool: the fixed task pool (``config.task_pool``), or ``None``.
        task_filter: the pool's solved/failed filter (``config.task_filter``), or ``None``.
    """

    config: TrainConfig
    next_seed: int
    horizon: curriculum.HorizonSchedule | None = None
    ladder: curriculum.DifficultyController | None = None
    pool: curriculum.TaskPool | None = None
    task_filter: curriculum.TaskFilter | None = None

    @classmethod
    def fresh(cls, config: TrainConfig) -> RunState:
        """The state before the first update, as ``config`` asks for it."""
        state = cls(config=config, next_seed=config.seed * TRAIN_SEED_STRIDE)
        if config.horizon is not None:
            state.horizon = curriculum.HorizonSchedule([tuple(stage) for stage in config.horizon])
        if config.difficulty is not None:
            ladder = config.difficulty
            state.ladder = curriculum.DifficultyController(
                list(ladder["levels"]),
                target=tuple(ladder["target"]) if isinstance(ladder["target"], list) else float(ladder["target"]),
                window=int(ladder["window"]),
                min_episodes=int(ladder["min_episodes"]),
            )
        if config.task_pool is not None:
            base = config.seed * TRAIN_SEED_STRIDE
            state.pool = curriculum.TaskPool(list(range(base, base + config.task_pool)), seed=config.seed)
            if config.task_filter:
                state.task_filter = curriculum.TaskFilter(min_attempts=1, window=config.task_filter_groups)
        return state

    # ------------------------------------------------------------------------------ curriculum
    def max_turns(self, update: int) -> int | None:
        """The turn limit of update ``update`` (the horizon schedule's, else ``config.max_turns``)."""
        if self.horizon is not None:
            return int(self.horizon.max_turns(update - 1))
        return self.config.max_turns

    def env(self) -> tuple[str, dict[str, Any]]:
        """The env id and arguments of this update's rollouts (the difficulty ladder's level)."""
        if self.ladder is not None:
            return self.config.level_env(self.ladder.current)
        return self.config.env_id, self.config.resolved_env_kwargs

    def filter_tasks(self, update: int) -> dict[str, Any]:
        """Drop the pool tasks the filter retired, keeping at least ``groups_per_update`` active;
        returns the ``tasks/*`` metrics."""
        assert self.pool is not None and self.task_filter is not None
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

    # ------------------------------------------------------------------------------ checkpoints
    def state_dict(self, update: int) -> dict[str, Any]:
        """What a checkpoint stores besides the weights and the optimizer (``state.json``)."""
        return {
            "update": update,
            "next_seed": self.next_seed,
            "horizon": self.horizon.state_dict() if self.horizon is not None else None,
            "difficulty": self.ladder.state_dict() if self.ladder is not None else None,
            "task_pool": self.pool.state_dict() if self.pool is not None else None,
            "task_filter": self.task_filter.state_dict() if self.task_filter is not None else None,
            "config": self.config.to_dict(),
        }

    def restore(self, checkpoint: Path, *, policy: Any, optimizer: Any) -> int:
        """Load ``checkpoint`` into this state, ``policy`` and ``optimizer``; returns its update."""
        state = load_checkpoint(checkpoint, policy=policy, optimizer=optimizer)
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

    # ------------------------------------------------------------------------------ abandoning
    def snapshot(self) -> dict[str, Any]:
        """Everything an update changes besides the weights and the optimizer, RNG states
        included (taken before it, put back by :meth:`put_back` when a stop request abandons it)."""
        import torch

        snap: dict[str, Any] = copy.deepcopy(self.state_dict(0))
        snap["torch_rng"] = torch.get_rng_state()
        if torch.cuda.is_available():
            snap["cuda_rng"] = torch.cuda.get_rng_state_all()
        snap["python_rng"] = random.getstate()
        return snap

    def put_back(self, snap: dict[str, Any]) -> None:
        """Return to a :meth:`snapshot`."""
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


# ---------------------------------------------------------------------------------- the run folder
def open_run_folder(out: Path, config: TrainConfig, *, world_size: int) -> Path | None:
    """Create or reopen the run folder ``out``; refuse a changed config. Writes ``config.json``
    and records the session in ``meta.json``. Returns the checkpoint to resume from (``None``: a
    fresh start)."""
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / CONFIG_FILE
    checkpoint = latest_checkpoint(out)
    if config_path.exists():
        try:
            old = json.loads(config_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ConfigError(
                f"{config_path} is not valid JSON ({err}); remove the folder or pick another --out."
            ) from err
        if not isinstance(old, dict):
            raise ConfigError(
                f"{config_path} holds {type(old).__name__}, not a training configuration; remove the folder or pick "
                "another --out."
            )
        changes = [line for line in config.changes_from(old) if line.split(":", 1)[0] not in RESUMABLE_CHANGES]
        if changes and checkpoint is not None:
            raise ConfigError(
                f"{out} holds a training run with a different configuration ({'; '.join(changes)}). Resume it "
                "with the same settings (only updates, checkpoint_every, keep_checkpoints, tensorboard and the "
                "rollout backend may change), or train into another folder (--out)."
            )
    write_atomic(config_path, json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n", skip_unchanged=True)
    session = {
        "started_at": utc_timestamp(),
        "argv": list(sys.argv),
        "resumed_from": str(checkpoint) if checkpoint else None,
        "world_size": world_size,
    }
    record_session(out / META_FILE, session)
    return checkpoint


def discard_after(out: Path, update: int) -> None:
    """Remove the rollout and evaluation records of updates after ``update`` (they are played again)."""
    for sub in (ROLLOUTS_DIR, EVAL_DIR):
        root = out / sub
        if not root.is_dir():
            continue
        for folder in root.iterdir():
            number = folder.name.removeprefix("update-").split("-")[0]
            if number.isdigit() and int(number) > update:
                shutil.rmtree(folder, ignore_errors=True)
