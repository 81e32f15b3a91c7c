"""Environment pools: ``num_slots`` instances of one env id, in this process, in worker processes,
or in Ray actors, behind one batched interface.

A runner asks a pool to reset or step a batch of *slots* (one request per slot, distinct slots per
call) and gets one :class:`StepResult` or :class:`EnvFailure` per request, in order. The pool
never raises for an environment's own errors: an env that raises becomes an
``EnvFailure(kind="env_error")`` for that request, and the slot's env is rebuilt (closed, then made
again on the slot's next use) so the slot works again after a reset. Only programming errors
(a bad slot index, the same slot twice in one call, a closed pool) raise.

Backends (:func:`make_pool`):

* ``"inproc"`` (:class:`InProcessPool`): the envs live in this process and are built on first
  use of a slot. The cheapest per call (a few microseconds) and the only backend whose
  :meth:`EnvPool.slot_env` returns the live env.
* ``"process"`` (:class:`ProcessPool`): ``workers`` worker processes, slot ``s`` on worker
  ``s % workers``. Each call sends one message per worker with all of that worker's requests and
  then collects the replies, so the workers step in parallel. A worker that dies (killed,
  segfault, ``os._exit``) or does not answer within ``step_timeout_s`` per request (it is then
  killed) fails every request it had in that call with ``EnvFailure(worker_lost=True)`` and is
  replaced by a fresh process; its other slots lost their state too, so a later ``step`` on any
  of them (without a ``reset`` first) fails with ``worker_lost=True`` instead of stepping a fresh
  env. Workers ignore SIGINT (the parent handles Ctrl-C and closes the pool) and exit when the
  parent's process dies, even in the middle of a step. They are started from a fork server
  (``spawn`` where the platform has none), never forked from a parent that may run threads.
* ``"ray"`` (:class:`RayPool`): one Ray actor per worker holding its slots' envs, with the same
  batching and the same failure rules (a dead actor, ``ray.kill``, or a timed-out call). Ray is
  started on first use if it is not running, and shut down with the last pool that started it;
  a Ray the caller started is left running.
* ``"remote"`` (:class:`ServedPool`): the envs live in an ``envgym serve`` server at ``url``, one
  WebSocket session per slot; a lost server fails the requests with ``worker_lost=True`` and the
  next reset opens a new session (:mod:`envgym.rollout.pools.served`).

Every pool can be used from several threads at once as long as concurrent calls name different
slots (the runner's asynchronous mode steps single episodes from a thread pool): remote pools
hold one lock per worker connection for the length of an exchange, so calls that touch different
workers run in parallel.

Example::

    from envgym.rollout.pools import ResetRequest, StepRequest, make_pool

    with make_pool("envgym/Sokoban-v0", None, num_slots=8, backend="process", workers=2) as pool:
        first = pool.reset([ResetRequest(slot=s, seed=s) for s in range(8)])
        nxt = pool.step([StepRequest(slot=s, action="up") for s in range(8)])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from envgym import registration
from envgym.errors import ConfigError, suggest
from envgym.rollout.pools.base import BACKENDS, DEFAULT_START_TIMEOUT_S, EnvPool
from envgym.rollout.pools.host import env_list
from envgym.rollout.pools.inproc import InProcessPool
from envgym.rollout.pools.process import ProcessPool
from envgym.rollout.pools.raypool import RayPool
from envgym.rollout.pools.records import EnvFailure, ResetRequest, StepRequest, StepResult
from envgym.rollout.pools.served import ServedPool

__all__ = [
    "BACKENDS",
    "DEFAULT_START_TIMEOUT_S",
    "EnvFailure",
    "EnvPool",
    "InProcessPool",
    "ProcessPool",
    "RayPool",
    "ResetRequest",
    "ServedPool",
    "StepRequest",
    "StepResult",
    "make_pool",
]


def make_pool(
    env: str | Sequence[tuple[str, Mapping[str, Any] | None]],
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    num_slots: int,
    backend: str = "inproc",
    workers: int = 1,
    step_timeout_s: float | None = None,
    ray_address: str | None = None,
    url: str | None = None,
) -> EnvPool:
    """Make a pool of ``num_slots`` envs.

    Args:
        env: a registered single-agent environment id, or a list of ``(env_id, env_kwargs)``
            pairs: the pool then holds any of them, and each reset names one
            (:attr:`ResetRequest.env`, an index into the list), so episodes of different
            environments share one batch.
        env_kwargs: keyword arguments of every env (picklable for ``process`` and ``ray``);
            ``None`` when ``env`` is a list of pairs.
        num_slots: number of slots (>= 1).
        backend: ``"inproc"`` (this process), ``"process"`` (worker processes) or ``"ray"``.
        workers: worker processes or Ray actors (>= 1; ignored by ``inproc``).
        step_timeout_s: seconds per request before a silent worker is killed and replaced
            (``None``: no limit; ignored by ``inproc``, which cannot interrupt an env).
        ray_address: the Ray cluster to join (``ray`` only; ``None``: the current or a local one).
        url: the ``envgym serve`` server whose envs the pool plays (``remote`` only, and required there).

    Raises:
        ConfigError: an unknown backend, ``workers`` or ``num_slots`` below 1, a bad timeout,
            unpicklable ``env_kwargs`` for a remote backend, or a multi-agent id.
        UnknownEnvError: an env id is not registered.
        MissingDependencyError: ``backend="ray"`` without Ray installed.
    """
    if backend not in BACKENDS:
        choices = ", ".join(map(repr, BACKENDS))
        raise ConfigError(f"backend must be one of {choices}, got {backend!r}.{suggest(str(backend), BACKENDS)}")
    for name, value in (("num_slots", num_slots), ("workers", workers)):
        if type(value) is not int or value < 1:
            raise ConfigError(f"{name} must be an integer >= 1, got {value!r}.")
    if step_timeout_s is not None and (
        isinstance(step_timeout_s, bool) or not isinstance(step_timeout_s, (int, float)) or not step_timeout_s > 0
    ):
        raise ConfigError(f"step_timeout_s must be a positive number of seconds or None, got {step_timeout_s!r}.")
    kinds = env_list(env, env_kwargs)
    if backend == "remote" or url is not None:
        if backend != "remote" or not url:
            raise ConfigError(
                f"backend='remote' plays envs served at url (ws://HOST:PORT, from `envgym serve`): give both, "
                f"got backend={backend!r}, url={url!r}."
            )
        return ServedPool(kinds, num_slots=num_slots, url=url, step_timeout_s=step_timeout_s)
    for env_id, _ in kinds:
        env_spec = registration.spec(env_id)  # UnknownEnvError with "did you mean" before any worker starts
        if env_spec.multi_agent:
            raise ConfigError(
                f"env pools hold single-agent environments, got the {env_spec.kind} environment {env_id!r}; "
                f"use a single-agent id (see `envgym list`)."
            )
    if backend == "inproc":
        return InProcessPool(kinds, num_slots=num_slots)
    if backend == "process":
        return ProcessPool(kinds, num_slots=num_slots, workers=workers, step_timeout_s=step_timeout_s)
    return RayPool(kinds, num_slots=num_slots, workers=workers, step_timeout_s=step_timeout_s, ray_address=ray_address)
