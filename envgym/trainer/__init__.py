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

# ruff: noqa: F401  (the TYPE_CHECKING imports name the lazy exports for type checkers)
from __future__ import annotations

from typing import TYPE_CHECKING

from envgym._imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "config": ("TrainConfig",),
        "loop": ("TrainResult", "Trainer", "train"),
        "metrics": ("read_metrics",),
        "report": ("write_report",),
    },
)

if TYPE_CHECKING:  # pragma: no cover
    from envgym.trainer.config import TrainConfig
    from envgym.trainer.loop import Trainer, TrainResult, train
    from envgym.trainer.metrics import read_metrics
    from envgym.trainer.report import write_report
