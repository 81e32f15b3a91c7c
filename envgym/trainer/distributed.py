"""Data-parallel training under ``torchrun``: which rank this is, and the few collectives the loop needs.

``torchrun --nproc_per_node=N -m envgym.cli train ...`` starts ``N`` copies of the trainer with
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` set.
:meth:`Distributed.from_env` reads them and joins the process group: NCCL when the policy runs on
CUDA (each rank on GPU ``LOCAL_RANK``), Gloo on the CPU. Without ``WORLD_SIZE > 1`` it returns a
single-process stand-in whose collectives return their input, so the loop has one code path.

What the ranks share (see :mod:`envgym.trainer.loop`): every rank keeps the same task seeds,
curricula and task pool (decisions are taken from gathered outcomes, identically everywhere), rolls
out its own contiguous share of each round's groups, computes advantages on its own groups (a group
never spans ranks), and steps the same optimizer on all-reduced gradients, so the weights stay
identical. Rank 0 alone writes ``metrics.jsonl``, checkpoints and ``report.md`` and runs the
held-out evaluation; the metrics it writes are reduced over every rank.

The collectives here are objects (``all_gather_object``) or a handful of floats; they carry
per-episode summaries and loss sums, never weights or token tensors (gradients travel through
``DistributedDataParallel``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from envgym.errors import ConfigError

__all__ = ["Distributed", "world_from_env"]

log = logging.getLogger(__name__)


def world_from_env() -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` from torchrun's environment variables (``(0, 1, 0)`` outside it)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError as err:
        raise ConfigError(f"RANK, WORLD_SIZE and LOCAL_RANK must be integers (set by torchrun): {err}") from err
    if world < 1 or not 0 <= rank < world:
        raise ConfigError(f"bad torchrun environment: RANK={rank}, WORLD_SIZE={world}.")
    return rank, world, local


class Distributed:
    """The ranks of a training run and their collectives (a no-op stand-in for one process).

    Attributes:
        rank: this process's rank (0 .. world_size-1).
        world_size: number of processes.
        local_rank: the rank on this machine (its GPU index on CUDA).
        backend: ``"gloo"``, ``"nccl"`` or ``None`` (one process).
    """

    def __init__(self, rank: int = 0, world_size: int = 1, local_rank: int = 0, backend: str | None = None) -> None:
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.backend = backend
        self._owned = False
        self._device: Any = None

    # ------------------------------------------------------------------------------ setup
    @classmethod
    def from_env(cls, device: str = "auto") -> Distributed:
        """Join torchrun's process group when ``WORLD_SIZE > 1`` (``device`` is the config's)."""
        rank, world, local = world_from_env()
        if world == 1:
            return cls()
        import torch
        import torch.distributed as dist

        if device not in ("auto", "cpu", "cuda"):
            raise ConfigError(
                f"device={device!r} under torchrun would put every rank on the same device; use device='auto' "
                "(each rank takes GPU LOCAL_RANK), 'cuda' or 'cpu'."
            )
        cuda = device != "cpu" and torch.cuda.is_available()
        if device == "cuda" and not cuda:
            raise ConfigError("device='cuda' but CUDA is not available here; use device='auto' or 'cpu'.")
        if cuda:
            if local >= torch.cuda.device_count():
                raise ConfigError(
                    f"LOCAL_RANK={local} but this machine has {torch.cuda.device_count()} GPU(s); start at most that "
                    "many processes per node (--nproc_per_node)."
                )
            torch.cuda.set_device(local)
        backend = "nccl" if cuda else "gloo"
        out = cls(rank, world, local, backend)
        if not dist.is_initialized():
            for name in ("MASTER_ADDR", "MASTER_PORT"):
                if name not in os.environ:
                    raise ConfigError(
                        f"WORLD_SIZE={world} but {name} is not set; start data-parallel training with torchrun "
                        "(torchrun --nproc_per_node=N -m envgym.cli train ...)."
                    )
            dist.init_process_group(backend=backend, rank=rank, world_size=world)
            out._owned = True
        elif dist.get_world_size() != world or dist.get_rank() != rank:
            raise ConfigError("the initialised process group does not match RANK / WORLD_SIZE.")
        out._device = torch.device("cuda", local) if cuda else torch.device("cpu")
        log.info("data-parallel rank %d of %d (%s)", rank, world, backend)
        return out

    def close(self) -> None:
        """Leave the process group if :meth:`from_env` joined it."""
        if self._owned:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            self._owned = False

    @property
    def active(self) -> bool:
        """True with more than one process."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on rank 0 (the one that writes files)."""
        return self.rank == 0

    def share(self, count: int) -> tuple[int, int]:
        """``(start, stop)`` of this rank's contiguous share of ``count`` items split evenly."""
        per, extra = divmod(count, self.world_size)
        start = self.rank * per + min(self.rank, extra)
        return start, start + per + (1 if self.rank < extra else 0)

    # ------------------------------------------------------------------------------ collectives
    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` (picklable), in rank order, on every rank."""
        if not self.active:
            return [value]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, value)
        return out

    def broadcast(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank."""
        if not self.active:
            return value
        import torch.distributed as dist

        box = [value if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def _reduce(self, values: Sequence[float], op: str) -> list[float]:
        if not self.active:
            return [float(v) for v in values]
        import torch
        import torch.distributed as dist

        tensor = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self._device)
        dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
        return [float(v) for v in tensor.cpu().tolist()]

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over the ranks."""
        return self._reduce(values, "SUM")

    def max(self, values: Sequence[float]) -> list[float]:
        """Element-wise maxima over the ranks."""
        return self._reduce(values, "MAX")

    def min(self, values: Sequence[float]) -> list[float]:
        """Element-wise minima over the ranks."""
        return self._reduce(values, "MIN")

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on any."""
        return self.max([1.0 if flag else 0.0])[0] > 0

    def barrier(self) -> None:
        if self.active:
            import torch.distributed as dist

            dist.barrier()
