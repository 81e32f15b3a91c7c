"""What the process and Ray pools share: batching per worker, per-worker locks, lost slots."""

from __future__ import annotations

import abc
import pickle
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from envgym.errors import EnvgymError
from envgym.rollout.pools.base import EnvPool
from envgym.rollout.pools.host import host_blob
from envgym.rollout.pools.records import EnvFailure, ResetRequest, StepRequest, StepResult, describe

__all__ = ["RemotePool"]


class RemotePool(EnvPool):
    """Batching, per-worker locks and lost-slot bookkeeping shared by the process and Ray pools.

    Subclasses implement :meth:`_exchange`: send each worker its batch, collect the replies, and
    turn a dead or silent worker into failures (calling :meth:`_lost`).
    """

    def __init__(
        self,
        env: str | Sequence[tuple[str, Mapping[str, Any] | None]],
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        num_slots: int,
        workers: int,
        step_timeout_s: float | None,
        start_timeout_s: float,
    ) -> None:
        super().__init__(env, env_kwargs, num_slots)
        # A worker without slots would only cost a process.
        self.workers = min(workers, num_slots)
        self.step_timeout_s = step_timeout_s
        self.start_timeout_s = start_timeout_s
        self._blob = host_blob(self.envs)
        self._locks = [threading.Lock() for _ in range(self.workers)]
        # slot -> why its env state is gone (its worker was replaced); cleared by a reset.
        self._stale: dict[int, str] = {}

    def reset(self, requests: Sequence[ResetRequest]) -> list[StepResult | EnvFailure]:
        self._check(requests, ResetRequest)
        return self._call("reset", requests)

    def step(self, requests: Sequence[StepRequest]) -> list[StepResult | EnvFailure]:
        self._check(requests, StepRequest)
        return self._call("step", requests)

    def _call(self, kind: str, requests: Sequence[Any]) -> list[Any]:
        results: list[Any] = [None] * len(requests)
        groups: dict[int, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(request.slot % self.workers, []).append(i)
        order = sorted(groups)
        # Sorted acquisition: two threads whose calls span several workers cannot deadlock.
        for w in order:
            self._locks[w].acquire()
        try:
            if self._closed:
                raise EnvgymError(f"{self!r} was closed during the call.")
            batches: dict[int, list[Any]] = {}
            for w in order:
                batch = []
                for i in groups[w]:
                    request = requests[i]
                    if kind == "reset":
                        self._stale.pop(request.slot, None)
                    else:
                        reason = self._stale.get(request.slot)
                        if reason is not None:
                            results[i] = EnvFailure(
                                "env_error",
                                f"slot {request.slot} lost its env state: {reason}; reset the slot first.",
                                True,
                            )
                            continue
                    batch.append(i)
                if batch:
                    batches[w] = [requests[i] for i in batch]
                    groups[w] = batch
            if batches:
                replies = self._exchange(kind, batches)
                for w, batch_results in replies.items():
                    for i, result in zip(groups[w], batch_results):
                        results[i] = result
        finally:
            for w in order:
                self._locks[w].release()
        return results

    def _slots_of(self, w: int) -> range:
        return range(w, self.num_slots, self.workers)

    def _lost(self, w: int, reason: str) -> None:
        """Every slot of worker ``w`` lost its env (the worker died or was killed)."""
        note = f"worker {w} was replaced after: {reason}"
        for slot in self._slots_of(w):
            self._stale[slot] = note

    def _deadline(self, start: float, count: int) -> float | None:
        if self.step_timeout_s is None:
            return None
        # The budget is per request: a worker steps its batch one env after another.
        return start + self.step_timeout_s * count

    def _timeout_message(self, w: int, who: str, count: int) -> str:
        assert self.step_timeout_s is not None
        return (
            f"worker {w} ({who}) did not answer {count} request(s) within {self.step_timeout_s * count:g} s "
            f"(step_timeout_s={self.step_timeout_s:g} per request) and was killed"
        )

    def _dumps_batches(self, kind: str, batches: Mapping[int, list[Any]]) -> dict[int, bytes]:
        # Everything is pickled before anything is sent: an unpicklable option must not leave
        # some workers with a request and others without.
        payloads = {}
        for w, batch in batches.items():
            try:
                payloads[w] = pickle.dumps((kind, batch), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as err:
                raise ValueError(
                    f"{kind} requests must be picklable to send them to pool workers, got {batch!r} ({describe(err)})."
                ) from err
        return payloads

    @abc.abstractmethod
    def _exchange(self, kind: str, batches: dict[int, list[Any]]) -> dict[int, list[Any]]:
        """Run ``batches`` (worker -> its requests) and return worker -> one result per request."""
