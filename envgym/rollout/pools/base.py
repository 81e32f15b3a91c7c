"""The pool interface: ``num_slots`` env instances behind one batched reset/step call."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from envgym.errors import EnvgymError
from envgym.rollout.pools.host import EnvKey, env_list
from envgym.rollout.pools.records import EnvFailure, ResetRequest, StepRequest, StepResult

if TYPE_CHECKING:  # pragma: no cover - typing only; gymnasium is imported when an env is made
    import gymnasium

__all__ = ["BACKENDS", "DEFAULT_START_TIMEOUT_S", "EnvPool"]

#: The backends :func:`envgym.rollout.pools.make_pool` accepts.
BACKENDS: tuple[str, ...] = ("inproc", "process", "ray", "remote")
#: Seconds a new worker process or Ray actor may take to start and import its environment.
DEFAULT_START_TIMEOUT_S = 120.0


class EnvPool(abc.ABC):
    """``num_slots`` environment instances (made with ``envgym.make(env_id, **env_kwargs)``).

    A pool holds one env kind, or several: ``envs`` lists them as ``(env_id, env_kwargs)``
    pairs and each :class:`ResetRequest` names the one its slot plays (``env``, default 0), so
    episodes of different environments share one batch.

    Attributes:
        envs: the env kinds, ``(env_id, env_kwargs)`` pairs.
        env_id: the first kind's id (the only one of a single-kind pool).
        env_kwargs: the first kind's keyword arguments.
        num_slots: number of slots (``0 .. num_slots - 1``).
        backend: ``"inproc"``, ``"process"``, ``"ray"`` or ``"remote"``.
    """

    num_slots: int
    backend: str = ""

    def __init__(
        self,
        env: str | Sequence[tuple[str, Mapping[str, Any] | None]],
        env_kwargs: Mapping[str, Any] | None,
        num_slots: int,
    ) -> None:
        self.envs: list[EnvKey] = env_list(env, env_kwargs)
        self.env_id, self.env_kwargs = self.envs[0]
        self.num_slots = num_slots
        self._closed = False

    @abc.abstractmethod
    def reset(self, requests: Sequence[ResetRequest]) -> list[StepResult | EnvFailure]:
        """Reset the named slots; one result per request, in the same order."""

    @abc.abstractmethod
    def step(self, requests: Sequence[StepRequest]) -> list[StepResult | EnvFailure]:
        """Step the named slots; one result per request, in the same order."""

    def slot_env(self, slot: int) -> gymnasium.Env | None:
        """The live env of ``slot`` for in-process pools (``None`` before its first reset, and
        always ``None`` for remote pools)."""
        self._check_slot(slot)
        return None

    def worker_pids(self) -> list[int | None]:
        """Process id of each worker (``None`` for one not running now); empty for in-process pools."""
        return []

    @abc.abstractmethod
    def close(self) -> None:
        """Close every env and stop the workers. Calling it again does nothing."""

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        shown = repr(self.env_id) if len(self.envs) == 1 else f"{len(self.envs)} envs: {self.env_id!r}, ..."
        return f"{type(self).__name__}({shown}, num_slots={self.num_slots}, {state})"

    # ------------------------------------------------------------------ validation
    def _check_slot(self, slot: int) -> None:
        if type(slot) is not int or not 0 <= slot < self.num_slots:
            raise ValueError(
                f"slot must be an integer from 0 to {self.num_slots - 1} (num_slots={self.num_slots}), got {slot!r}."
            )

    def _check(self, requests: Sequence[Any], expected: type) -> None:
        if self._closed:
            raise EnvgymError(f"{self!r} is closed: make a new pool with envgym.rollout.pools.make_pool.")
        n = self.num_slots
        for request in requests:  # inlined: this runs on every turn of an in-process rollout
            if type(request) is not expected:
                raise ValueError(f"expected {expected.__name__} objects, got {request!r}.")
            slot = request.slot
            if type(slot) is not int or not 0 <= slot < n:
                self._check_slot(slot)
            if (
                expected is ResetRequest
                and request.env
                and not (type(request.env) is int and 0 <= request.env < len(self.envs))
            ):
                raise ValueError(
                    f"ResetRequest.env must index the pool's {len(self.envs)} env(s) (0 to {len(self.envs) - 1}), "
                    f"got {request.env!r}."
                )
        if len(requests) > 1 and len({r.slot for r in requests}) != len(requests):
            slots = [r.slot for r in requests]
            dupes = sorted({s for s in slots if slots.count(s) > 1})
            raise ValueError(
                f"the requests of one call must name distinct slots, got slots {slots!r} (repeated: {dupes})."
            )
