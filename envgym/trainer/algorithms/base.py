"""What an algorithm is to the trainer: how advantages come from a batch of episodes, which loss
terms it adds, whether the policy needs a value head, and which settings it accepts.

The trainer (:mod:`envgym.trainer.loop`, :mod:`envgym.trainer.update`) never names an algorithm:
it asks the one chosen by ``TrainConfig.algo`` (:func:`envgym.trainer.algorithms.get_algorithm`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envgym.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from envgym.rollout.records import Trajectory
    from envgym.trainer.config import TrainConfig

__all__ = ["Advantages", "Algorithm", "Episodes"]


@dataclass
class Episodes:
    """An update's episodes, as an algorithm sees them.

    Attributes:
        trajectories: the episodes, in batch order.
        group_ids: ``[N]`` int64 tensor: the group (task) of each episode, numbered from 0.
        returns: ``[N]`` float32 tensor: each episode's total reward.
        config: the run's settings (``gamma``, ``lam``, ``step_weight``, ``reward_norm``...).
        turn_values: the value head's estimate of every turn before the update, per episode
            (computed on first call; only algorithms with a value head may call it).
    """

    trajectories: Sequence[Trajectory]
    group_ids: torch.Tensor
    returns: torch.Tensor
    config: TrainConfig
    turn_values: Callable[[], list[torch.Tensor]]


@dataclass
class Advantages:
    """An algorithm's answer: the advantage of every turn of every episode, and for value-head
    algorithms the value targets (``returns``) and the values they were computed from."""

    per_turn: list[torch.Tensor]
    returns: list[torch.Tensor] | None = None
    values: list[torch.Tensor] | None = None


class Algorithm(abc.ABC):
    """One policy-gradient algorithm.

    Class attributes:
        name: what ``TrainConfig.algo`` names it by.
        summary: one line for ``envgym train --help`` and the docs.
        value_head: the policy carries a value head, and the loss a value term (``vf_coef``).
        group_relative: advantages compare the episodes of a group: ``group_size`` must be >= 2.
        reward_norms: the ``reward_norm`` settings it supports.
        whiten: advantages are whitened over the whole batch (every rank) before the update.
        default_aggregation: the loss aggregation when ``loss_aggregation`` is not set.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    value_head: ClassVar[bool] = False
    group_relative: ClassVar[bool] = True
    reward_norms: ClassVar[tuple[str, ...]] = ("sum",)
    whiten: ClassVar[bool] = False
    default_aggregation: ClassVar[str] = "token-mean"

    @abc.abstractmethod
    def advantages(self, episodes: Episodes) -> Advantages:
        """The advantage of every turn of every episode (a 1-D tensor per episode)."""

    def validate(self, config: TrainConfig) -> None:
        """Raise :class:`ConfigError` for settings this algorithm cannot run with (the registry's
        :func:`~envgym.trainer.algorithms.check_config` has already checked ``reward_norm``)."""
        if self.group_relative and config.group_size < 2:
            raise ConfigError(
                f"algo={self.name!r} compares the episodes of a group, so group_size must be >= 2, got "
                f"{config.group_size}. Use group_size=4 or more, or algo='ppo'."
            )

    def __repr__(self) -> str:
        return f"<algorithm {self.name}>"


def episode_advantages_to_turns(episode_adv: Any, trajectories: Sequence[Trajectory]) -> list[Any]:
    """Give every turn of episode ``i`` the advantage ``episode_adv[i]``."""
    return [episode_adv[i].expand(len(t.turns)) for i, t in enumerate(trajectories)]
