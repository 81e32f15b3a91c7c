"""The in-process pool: envs in this process, the cheapest per call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from envgym.rollout.pools.base import EnvPool
from envgym.rollout.pools.host import SlotHost
from envgym.rollout.pools.records import EnvFailure, ResetRequest, StepRequest, StepResult

if TYPE_CHECKING:  # pragma: no cover
    import gymnasium

__all__ = ["InProcessPool"]


class InProcessPool(EnvPool):
    """Envs in this process, each built on its slot's first use; ``env_s`` is measured with
    ``time.perf_counter``. Different slots may be used from different threads at once."""

    backend = "inproc"

    def __init__(
        self,
        env: str | Sequence[tuple[str, Mapping[str, Any] | None]],
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        num_slots: int,
    ) -> None:
        super().__init__(env, env_kwargs, num_slots)
        self._host = SlotHost(self.envs)

    def reset(self, requests: Sequence[ResetRequest]) -> list[StepResult | EnvFailure]:
        self._check(requests, ResetRequest)
        reset = self._host.reset
        return [reset(r.slot, r.seed, r.options, r.want_sample, r.env, r.want_frame) for r in requests]

    def step(self, requests: Sequence[StepRequest]) -> list[StepResult | EnvFailure]:
        self._check(requests, StepRequest)
        step = self._host.step
        return [step(r.slot, r.action, r.want_sample, r.want_frame) for r in requests]

    def slot_env(self, slot: int) -> gymnasium.Env | None:
        self._check_slot(slot)
        return self._host.get(slot)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._host.close()
