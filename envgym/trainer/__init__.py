"""The RL trainer: group-relative and PPO policy optimisation of LLM agents on envgym environments.

``from envgym.trainer import TrainConfig, train`` loads nothing heavy: torch, transformers and
the loop itself load on first use of a name (so ``import envgym`` stays cheap).

Modules: :mod:`~envgym.trainer.config` (the run's settings), :mod:`~envgym.trainer.loop` (the
loop, orchestrating), :mod:`~envgym.trainer.rollout` (which tasks an update plays, playing them,
evaluation), :mod:`~envgym.trainer.update` (advantages into a batch, the optimizer steps),
:mod:`~envgym.trainer.state` (task seeds, curricula, snapshots, the run folder),
:mod:`~envgym.trainer.algorithms` (the algorithms, by name), :mod:`~envgym.trainer.batch`
(trajectories to tensors), :mod:`~envgym.trainer.policy` (model, LoRA, value head, generation),
:mod:`~envgym.trainer.advantages` and :mod:`~envgym.trainer.losses` (the pure estimators and loss
terms), :mod:`~envgym.trainer.curriculum` (horizon, difficulty ladder, task pool and filter),
:mod:`~envgym.trainer.distributed` (data parallel under ``torchrun``),
:mod:`~envgym.trainer.checkpoint`, :mod:`~envgym.trainer.metrics` and :mod:`~envgym.trainer.report`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "TrainConfig": "config",
    "Trainer": "loop",
    "TrainResult": "loop",
    "train": "loop",
    "read_metrics": "metrics",
    "write_report": "report",
}

__all__ = ["TrainConfig", "TrainResult", "Trainer", "read_metrics", "train", "write_report"]

if TYPE_CHECKING:  # pragma: no cover
    from envgym.trainer.config import TrainConfig
    from envgym.trainer.loop import Trainer, TrainResult, train
    from envgym.trainer.metrics import read_metrics
    from envgym.trainer.report import write_report


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'envgym.trainer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"envgym.trainer.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
