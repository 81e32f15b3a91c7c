"""The Ray pool: envs in Ray actors, on this machine or a cluster."""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from envgym._imports import optional
from envgym.rollout.pools.base import DEFAULT_START_TIMEOUT_S
from envgym.rollout.pools.host import SlotHost, picklable
from envgym.rollout.pools.records import EnvFailure
from envgym.rollout.pools.remote import RemotePool

logger = logging.getLogger("envgym.rollout.pools")

__all__ = ["RayPool"]


_ray_lock = threading.Lock()
_ray_owned_users = 0  # pools using a Ray instance that a pool started


def _import_ray() -> Any:
    return optional("ray", purpose="The Ray environment pool (backend='ray')")


class _RayHostActor:
    """The body of a Ray actor: one :class:`SlotHost` (wrapped with ``ray.remote`` at run time)."""

    def __init__(self, blob: bytes) -> None:
        self.host = SlotHost.from_blob(blob)

    def call(self, kind: str, requests: list[Any]) -> list[Any]:
        results = self.host.handle(kind, requests)
        try:
            # Ray would fail the whole call on one result it cannot serialise; fail only that one.
            pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001
            results = picklable(results, requests, self.host)
        return results

    def pid(self) -> int:
        return os.getpid()


class RayPool(RemotePool):
    """Envs in ``workers`` Ray actors (slot ``s`` on actor ``s % workers``), batched like
    :class:`ProcessPool` and with the same failure rules.

    Ray is initialised on the first call if it is not already: ``ray.init(address=ray_address)``
    when an address is given, else a local instance (``num_cpus=max(workers, cpu count)``, no
    dashboard, worker logs not forwarded). A Ray instance the pool started is shut down when the
    last pool using it closes; a Ray the user started is left running.

    Args:
        ray_address: address of a running Ray cluster (``None``: the current one, or a local one).
        actor_options: options for ``ray.remote`` on each actor (default ``{"num_cpus": 1}``).
        Others as for :class:`ProcessPool`.
    """

    backend = "ray"

    def __init__(
        self,
        env: str | Sequence[tuple[str, Mapping[str, Any] | None]],
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        num_slots: int,
        workers: int = 1,
        step_timeout_s: float | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        ray_address: str | None = None,
        actor_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._ray = _import_ray()  # fail now, with the install command, not on the first call
        super().__init__(
            env,
            env_kwargs,
            num_slots=num_slots,
            workers=workers,
            step_timeout_s=step_timeout_s,
            start_timeout_s=start_timeout_s,
        )
        self.ray_address = ray_address
        self.actor_options = {"num_cpus": 1, **dict(actor_options or {}), "max_restarts": 0}
        self._owns_ray = False
        self._ray_ready = False
        self._actor_cls: Any = None
        self._actors: list[Any] = [None] * self.workers
        self._ready_refs: list[Any] = [None] * self.workers
        self._pids: list[int | None] = [None] * self.workers
        self._init_lock = threading.Lock()

    def _ensure_ray(self) -> None:
        global _ray_owned_users
        if self._ray_ready:
            return
        with self._init_lock:
            if self._ray_ready:
                return
            ray = self._ray
            with _ray_lock:
                if not ray.is_initialized():
                    if self.ray_address is not None:
                        ray.init(address=self.ray_address, ignore_reinit_error=True)
                    else:
                        ray.init(
                            num_cpus=max(self.workers, os.cpu_count() or 1),
                            include_dashboard=False,
                            log_to_driver=False,
                            ignore_reinit_error=True,
                        )
                    _ray_owned_users = 1
                    self._owns_ray = True
                elif _ray_owned_users > 0:
                    # A Ray that another pool started: share it, and its shutdown.
                    _ray_owned_users += 1
                    self._owns_ray = True
            self._actor_cls = ray.remote(**self.actor_options)(_RayHostActor)
            self._ray_ready = True

    def _start(self, w: int) -> None:
        actor = self._actor_cls.remote(self._blob)
        self._actors[w] = actor
        self._ready_refs[w] = actor.pid.remote()
        self._pids[w] = None

    def _kill(self, w: int) -> None:
        actor = self._actors[w]
        self._actors[w] = self._ready_refs[w] = self._pids[w] = None
        if actor is not None:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:
                logger.debug("ray.kill failed", exc_info=True)

    def _replace(self, w: int, reason: str, *, restart: bool = True) -> None:
        logger.warning("envgym Ray pool %s: %s; replacing the actor", self.env_id, reason)
        self._kill(w)
        self._lost(w, reason)
        if restart and not self._closed:
            self._start(w)

    def _who(self, w: int) -> str:
        pid = self._pids[w]
        return f"Ray actor, pid {pid}" if pid is not None else "Ray actor"

    def worker_pids(self) -> list[int | None]:
        """Process id of each actor (``None`` until it answered its first call)."""
        return list(self._pids)

    def actors(self) -> list[Any]:
        """The Ray actor handle of each worker (``None`` for one not running now)."""
        return list(self._actors)

    @staticmethod
    def _short(err: BaseException) -> str:
        text = str(err).strip().splitlines()
        first = text[0] if text else ""
        return f"{type(err).__name__}: {first[:300]}"

    def _await_ready(self, ws: Sequence[int]) -> dict[int, str]:
        ray = self._ray
        failed: dict[int, str] = {}
        for w in ws:
            if self._actors[w] is None:
                self._start(w)
        waiting = {self._ready_refs[w]: w for w in ws if self._pids[w] is None}
        if not waiting:
            return failed
        ready, not_ready = ray.wait(list(waiting), num_returns=len(waiting), timeout=self.start_timeout_s)
        for ref in ready:
            w = waiting[ref]
            try:
                self._pids[w] = ray.get(ref)
            except Exception as err:  # noqa: BLE001 - actor construction failed or the actor died
                failed[w] = f"worker {w} (Ray actor) could not start: {self._short(err)}"
                self._replace(w, failed[w], restart=False)
        for ref in not_ready:
            w = waiting[ref]
            failed[w] = (
                f"worker {w} (Ray actor) did not start within {self.start_timeout_s:g} s "
                f"(does the cluster have the resources {self.actor_options}?)"
            )
            self._replace(w, failed[w], restart=False)
        return failed

    def _exchange(self, kind: str, batches: dict[int, list[Any]]) -> dict[int, list[Any]]:
        self._ensure_ray()
        ray = self._ray
        self._dumps_batches(kind, batches)  # the same "must be picklable" error as the process pool
        out: dict[int, list[Any]] = {}

        def fail(w: int, failure_kind: str, message: str) -> None:
            out[w] = [EnvFailure(failure_kind, message, True) for _ in batches[w]]

        for w, message in self._await_ready(list(batches)).items():
            fail(w, "env_error", message)
        start = time.monotonic()
        pending: dict[Any, tuple[int, float | None]] = {}
        for w, batch in batches.items():
            if w not in out:
                pending[self._actors[w].call.remote(kind, batch)] = (w, self._deadline(start, len(batch)))
        try:
            while pending:
                deadlines = [d for _, d in pending.values() if d is not None]
                timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
                for ref in ready:
                    w, _ = pending.pop(ref)
                    try:
                        out[w] = ray.get(ref)
                    except ray.exceptions.RayActorError as err:
                        message = f"worker {w} ({self._who(w)}) died: {self._short(err)}"
                        fail(w, "env_error", message)
                        self._replace(w, message)
                    except Exception as err:  # noqa: BLE001 - e.g. a result Ray could not serialise
                        out[w] = [EnvFailure("env_error", f"the Ray actor's call failed: {self._short(err)}")] * len(
                            batches[w]
                        )
                now = time.monotonic()
                for ref, (w, deadline) in list(pending.items()):
                    if deadline is not None and deadline <= now:
                        del pending[ref]
                        message = self._timeout_message(w, self._who(w), len(batches[w]))
                        fail(w, "timeout", message)
                        self._replace(w, message)
        except BaseException:
            for w, _ in pending.values():
                self._kill(w)
                self._lost(w, f"worker {w} was interrupted during a call")
            raise
        return out

    def close(self) -> None:
        global _ray_owned_users
        if self._closed:
            return
        self._closed = True
        held = [lock.acquire(timeout=1.0) for lock in self._locks]
        try:
            if self._ray_ready:
                for w in range(self.workers):
                    self._kill(w)
                if self._owns_ray:
                    with _ray_lock:
                        _ray_owned_users -= 1
                        if _ray_owned_users == 0 and self._ray.is_initialized():
                            self._ray.shutdown()
        finally:
            for lock, got in zip(self._locks, held):
                if got:
                    lock.release()
