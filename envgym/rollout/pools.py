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

import abc
import logging
import multiprocessing
import os
import pickle
import random
import select
import signal
import sys
import threading
import time
import traceback as traceback_module
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from envgym.errors import ConfigError, EnvgymError, MissingDependencyError, suggest

if TYPE_CHECKING:  # pragma: no cover - typing only; gymnasium is imported when an env is made
    import gymnasium

__all__ = [
    "BACKENDS",
    "EnvFailure",
    "EnvPool",
    "InProcessPool",
    "ProcessPool",
    "RayPool",
    "ResetRequest",
    "StepRequest",
    "StepResult",
    "make_pool",
]

logger = logging.getLogger(__name__)

#: The backends :func:`make_pool` accepts.
BACKENDS: tuple[str, ...] = ("inproc", "process", "ray")
#: Seconds a new worker process or Ray actor may take to start and import its environment.
DEFAULT_START_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------- records
@dataclass(frozen=True, slots=True)
class ResetRequest:
    """Reset one slot.

    Attributes:
        slot: the slot index, ``0 <= slot < num_slots``.
        seed: the episode seed passed to ``env.reset`` (``None``: unseeded).
        options: ``env.reset`` options (must be picklable for remote pools).
        want_sample: also return one action drawn by ``env.unwrapped.sample_action(rng)`` when
            the env has it (``rng`` is the slot's own, seeded from the reset seed).
    """

    slot: int
    seed: int | None
    options: dict[str, Any] | None = None
    want_sample: bool = False


@dataclass(frozen=True, slots=True)
class StepRequest:
    """Step one slot with ``action``; ``want_sample`` as in :class:`ResetRequest`."""

    slot: int
    action: str
    want_sample: bool = False


@dataclass(slots=True)
class StepResult:
    """What one reset or step gave.

    Attributes:
        observation: the observation text.
        reward: the step's reward (``0.0`` for a reset).
        terminated: the episode ended by the env's rules (``False`` for a reset).
        truncated: the episode was cut short, e.g. by a turn limit (``False`` for a reset).
        info: the env's ``info`` (picklable: remote pools send it between processes).
        env_s: seconds spent inside ``env.reset`` / ``env.step``, measured where the env lives.
        sampled_action: the action asked for by ``want_sample`` (``None`` when not asked, when
            the env has no ``sample_action``, or when the episode just ended).
    """

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    env_s: float
    sampled_action: str | None = None


@dataclass(slots=True)
class EnvFailure:
    """A reset or step that produced no result.

    Attributes:
        kind: ``"env_error"`` (the env raised, or its worker died) or ``"timeout"`` (the worker
            did not answer in time and was killed).
        message: what happened, e.g. ``"ValueError: bad board"`` or
            ``"worker 1 (pid 1234) died: exit code -9 (SIGKILL)"``.
        worker_lost: ``True`` when the slot's worker process or actor died or was killed: every
            slot of that worker lost its env state, and the runner restarts those episodes.
        traceback: the env's formatted traceback for ``env_error`` raised by the env, else ``None``.
    """

    kind: str
    message: str
    worker_lost: bool = False
    traceback: str | None = None


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


# --------------------------------------------------------------------------- the env host
class _SlotHost:
    """The envs of some slots, wherever they live (this process, a worker, a Ray actor).

    Envs are made on a slot's first use; an env that raises is closed and dropped, so the next
    reset of that slot makes a fresh one.
    """

    __slots__ = ("_envs", "_make", "_rngs", "_seeds", "env_id", "env_kwargs")

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None) -> None:
        from envgym.registration import make

        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self._make = make
        self._envs: dict[int, Any] = {}
        # Per-slot stream for want_sample: seeded from the reset seed so every backend samples
        # the same actions for the same episode.
        self._seeds: dict[int, int | None] = {}
        self._rngs: dict[int, random.Random] = {}

    @classmethod
    def from_blob(cls, blob: bytes) -> _SlotHost:
        """Build a host in a worker from :func:`_host_blob` bytes (registers the spec if needed)."""
        paths, payload = pickle.loads(blob)
        for path in paths:
            # The parent's import paths (a tests folder, a project folder) may be missing here: a
            # fork server started earlier, a Ray worker. Appended, so they never shadow the
            # worker's own modules; before the payload is opened, since env_kwargs may need them.
            if path not in sys.path:
                sys.path.append(path)
        env_id, env_spec, env_kwargs = pickle.loads(payload)
        return cls._in_worker(env_id, env_spec, env_kwargs)

    @classmethod
    def _in_worker(cls, env_id: str, env_spec: Any, env_kwargs: Mapping[str, Any] | None) -> _SlotHost:
        from envgym import registration

        registration.register_envs()
        # Ids registered at run time in the parent (plugins, tests) are unknown to a fresh
        # interpreter: the parent ships the spec, whose entry point is a string.
        if env_spec is not None and env_spec.id not in registration._single:
            registration.register(env_spec)
        if env_spec is not None:
            env_spec.load()  # import the env's module now, not inside the first timed call
        return cls(env_id, env_kwargs)

    def get(self, slot: int) -> Any | None:
        return self._envs.get(slot)

    def _drop(self, slot: int) -> None:
        env = self._envs.pop(slot, None)
        self._rngs.pop(slot, None)
        if env is not None:
            try:
                env.close()
            except Exception:
                logger.debug("closing the env of slot %d failed", slot, exc_info=True)

    def _failure(self, slot: int, err: Exception) -> EnvFailure:
        logger.debug("env %s slot %d raised", self.env_id, slot, exc_info=err)
        self._drop(slot)
        return EnvFailure("env_error", _describe(err), False, "".join(traceback_module.format_exception(err)))

    def _sample(self, slot: int, env: Any) -> str | None:
        sampler = getattr(env.unwrapped, "sample_action", None)
        if sampler is None:
            return None
        rng = self._rngs.get(slot)
        if rng is None:
            seed = self._seeds.get(slot)
            rng = self._rngs[slot] = random.Random(None if seed is None else f"envgym.pool.sample:{seed}")
        try:
            return str(sampler(rng))
        except Exception:
            logger.warning("%s: sample_action raised; no sampled action this turn", self.env_id, exc_info=True)
            return None

    def reset(self, slot: int, seed: int | None, options: dict[str, Any] | None, want_sample: bool) -> Any:
        try:
            env = self._envs.get(slot)
            if env is None:
                env = self._envs[slot] = self._make(self.env_id, **self.env_kwargs)
            t0 = time.perf_counter()
            observation, info = env.reset(seed=seed, options=options)
            env_s = time.perf_counter() - t0
        except Exception as err:  # noqa: BLE001 - env errors become results, never raise
            return self._failure(slot, err)
        self._seeds[slot] = seed
        self._rngs.pop(slot, None)
        sampled = self._sample(slot, env) if want_sample else None
        return StepResult(observation, 0.0, False, False, info, env_s, sampled)

    def step(self, slot: int, action: str, want_sample: bool) -> Any:
        env = self._envs.get(slot)
        try:
            if env is None:
                env = self._envs[slot] = self._make(self.env_id, **self.env_kwargs)
            t0 = time.perf_counter()
            observation, reward, terminated, truncated, info = env.step(action)
            env_s = time.perf_counter() - t0
        except Exception as err:  # noqa: BLE001 - env errors become results, never raise
            return self._failure(slot, err)
        sampled = self._sample(slot, env) if want_sample and not (terminated or truncated) else None
        return StepResult(observation, float(reward), bool(terminated), bool(truncated), info, env_s, sampled)

    def handle(self, kind: str, requests: Sequence[Any]) -> list[Any]:
        if kind == "step":
            return [self.step(r.slot, r.action, r.want_sample) for r in requests]
        return [self.reset(r.slot, r.seed, r.options, r.want_sample) for r in requests]

    def close(self) -> None:
        for slot in list(self._envs):
            self._drop(slot)


def _host_blob(env_id: str, env_kwargs: Mapping[str, Any] | None) -> bytes:
    """Pickle what a worker needs to build its host; raise ConfigError when it does not pickle."""
    from envgym import registration

    env_spec = registration.spec(env_id)
    try:
        payload = pickle.dumps((env_id, env_spec, dict(env_kwargs or {})), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as err:
        raise ConfigError(
            f"env_kwargs must be picklable to send them to pool workers, got {dict(env_kwargs or {})!r} "
            f"({_describe(err)}). Define callables such as a reward rubric at module level (not as a lambda "
            f"or a closure), or use backend='inproc'."
        ) from err
    # Two layers: the paths unpickle with builtins alone and are applied before the payload.
    return pickle.dumps(([p for p in sys.path if isinstance(p, str) and p], payload))


# --------------------------------------------------------------------------- the interface
class EnvPool(abc.ABC):
    """``num_slots`` environment instances of one env id (made with ``envgym.make(env_id, **env_kwargs)``).

    Attributes:
        env_id: the environment id.
        env_kwargs: keyword arguments of every env.
        num_slots: number of slots (``0 .. num_slots - 1``).
        backend: ``"inproc"``, ``"process"`` or ``"ray"``.
    """

    num_slots: int
    backend: str = ""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None, num_slots: int) -> None:
        self.env_id = env_id
        self.env_kwargs: dict[str, Any] = dict(env_kwargs or {})
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
        return f"{type(self).__name__}({self.env_id!r}, num_slots={self.num_slots}, {state})"

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
        if len(requests) > 1 and len({r.slot for r in requests}) != len(requests):
            slots = [r.slot for r in requests]
            dupes = sorted({s for s in slots if slots.count(s) > 1})
            raise ValueError(
                f"the requests of one call must name distinct slots, got slots {slots!r} (repeated: {dupes})."
            )


# --------------------------------------------------------------------------- in-process
class InProcessPool(EnvPool):
    """Envs in this process, each built on its slot's first use; ``env_s`` is measured with
    ``time.perf_counter``. Different slots may be used from different threads at once."""

    backend = "inproc"

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None, *, num_slots: int) -> None:
        super().__init__(env_id, env_kwargs, num_slots)
        self._host = _SlotHost(env_id, self.env_kwargs)

    def reset(self, requests: Sequence[ResetRequest]) -> list[StepResult | EnvFailure]:
        self._check(requests, ResetRequest)
        reset = self._host.reset
        return [reset(r.slot, r.seed, r.options, r.want_sample) for r in requests]

    def step(self, requests: Sequence[StepRequest]) -> list[StepResult | EnvFailure]:
        self._check(requests, StepRequest)
        step = self._host.step
        return [step(r.slot, r.action, r.want_sample) for r in requests]

    def slot_env(self, slot: int) -> gymnasium.Env | None:
        self._check_slot(slot)
        return self._host.get(slot)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._host.close()


# --------------------------------------------------------------------------- remote pools: shared logic
class _RemotePool(EnvPool):
    """Batching, per-worker locks and lost-slot bookkeeping shared by the process and Ray pools.

    Subclasses implement :meth:`_exchange`: send each worker its batch, collect the replies, and
    turn a dead or silent worker into failures (calling :meth:`_lost`).
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any] | None,
        *,
        num_slots: int,
        workers: int,
        step_timeout_s: float | None,
        start_timeout_s: float,
    ) -> None:
        super().__init__(env_id, env_kwargs, num_slots)
        # A worker without slots would only cost a process.
        self.workers = min(workers, num_slots)
        self.step_timeout_s = step_timeout_s
        self.start_timeout_s = start_timeout_s
        self._blob = _host_blob(env_id, self.env_kwargs)
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
                    f"{kind} requests must be picklable to send them to pool workers, got {batch!r} ({_describe(err)})."
                ) from err
        return payloads

    @abc.abstractmethod
    def _exchange(self, kind: str, batches: dict[int, list[Any]]) -> dict[int, list[Any]]:
        """Run ``batches`` (worker -> its requests) and return worker -> one result per request."""


# --------------------------------------------------------------------------- worker processes
def _worker_main(conn: Any, index: int, blob: bytes) -> None:
    """Entry point of a pool worker process: build the host, answer batches until told to stop."""
    # Ctrl-C reaches the whole foreground process group; the parent handles it and closes the
    # pool, so a worker neither dies half-way through a reply nor prints a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    exiting = threading.Event()

    def on_sigterm(signum: int, frame: Any) -> None:
        # SIGTERM (terminate(), or the parent watch below) unwinds through the finally clause,
        # so the envs are closed (a browser, a sandbox) instead of leaking.
        if not exiting.is_set():
            raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        host = _SlotHost.from_blob(blob)
    except Exception as err:  # noqa: BLE001 - reported to the parent, which fails the requests
        try:
            conn.send(("boot_error", _describe(err)))
        except OSError:
            pass
        return
    try:
        _watch_parent(conn, exiting)
        conn.send(("ready", os.getpid()))
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break  # the parent is gone: exit rather than linger as an orphan
            except Exception as err:  # noqa: BLE001 - e.g. options of a class this worker cannot import
                conn.send(("error", f"the worker could not read the requests: {_describe(err)}"))
                continue
            kind, requests = message
            if kind == "close":
                break
            results = host.handle(kind, requests)
            try:
                payload = pickle.dumps(("ok", results), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - find the result that does not pickle and fail only it
                payload = pickle.dumps(("ok", _picklable(results, requests, host)), protocol=pickle.HIGHEST_PROTOCOL)
            conn.send_bytes(payload)
    except OSError:
        pass  # the parent closed the pipe mid-reply
    finally:
        exiting.set()
        host.close()


def _watch_parent(conn: Any, exiting: threading.Event) -> None:
    """Stop this worker soon after the pool's process dies, even in the middle of a long step.

    A worker waiting for requests sees end-of-file on its pipe; this thread covers one that is
    busy in ``env.step`` when the parent is killed. It waits for the peer of the pipe to hang up
    (``POLLRDHUP``, Linux; elsewhere a change of parent pid, which suits spawned workers), then
    sends this process SIGTERM, which closes the envs, and exits hard if that does not end it.
    The parent pid alone would not do on Linux: a forkserver child's parent is the fork server,
    which lives as long as any of its children.
    """
    rdhup = getattr(select, "POLLRDHUP", None)
    parent = os.getppid()

    def watch() -> None:
        if rdhup is not None:
            poller = select.poll()
            poller.register(conn.fileno(), rdhup)
            hangup = rdhup | select.POLLHUP | select.POLLERR | select.POLLNVAL
            while not any(event & hangup for _, event in poller.poll()):
                pass
        else:  # pragma: no cover - platforms without POLLRDHUP
            while os.getppid() == parent:
                time.sleep(0.5)
        if exiting.is_set():
            return
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5.0)
        os._exit(1)

    threading.Thread(target=watch, name="envgym-pool-parent-watch", daemon=True).start()


def _picklable(results: list[Any], requests: Sequence[Any], host: _SlotHost) -> list[Any]:
    out = []
    for result, request in zip(results, requests):
        try:
            pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:  # noqa: BLE001
            host._drop(request.slot)
            result = EnvFailure(
                "env_error",
                f"the env's result cannot be sent between processes ({_describe(err)}): keep observation and info "
                f"picklable, or use backend='inproc'.",
            )
        out.append(result)
    return out


_FORKSERVER_PRELOAD = ["__main__", "gymnasium", "envgym.registration", "envgym.core"]
_preload_set = False
_preload_lock = threading.Lock()


def _context(start_method: str | None) -> Any:
    """The multiprocessing context for workers: forkserver where the platform has it, else spawn.

    Never fork: the parent may run threads (a progress bar, torch) whose locks a forked child
    would inherit held. The forkserver is started once per interpreter with gymnasium and the
    registry imported, so a worker (and a replacement after a crash) is ready in tens of
    milliseconds, against ~300 ms for a spawned interpreter (measured on 2 cores).
    """
    global _preload_set
    if start_method is None:
        start_method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    if start_method not in ("forkserver", "spawn"):
        raise ConfigError(
            f"start_method must be 'forkserver' or 'spawn' (fork is unsafe with a threaded parent), "
            f"got {start_method!r}.{suggest(str(start_method), ('forkserver', 'spawn'))}"
        )
    ctx = multiprocessing.get_context(start_method)
    if start_method == "forkserver":
        with _preload_lock:
            if not _preload_set:
                # Takes effect only if the fork server is not running yet (it starts on first use).
                ctx.set_forkserver_preload(_FORKSERVER_PRELOAD)
                _preload_set = True
    return ctx


def _exit_text(code: int | None) -> str:
    if code is None:
        return "exit code unknown"
    if code < 0:
        try:
            return f"exit code {code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exit code {code}"


def _shutdown_workers(procs: list[Any], conns: list[Any]) -> None:
    """Stop worker processes: ask politely, then kill (used by close and the finaliser)."""
    for conn in conns:
        if conn is not None:
            try:
                conn.send(("close", None))
            except (OSError, ValueError):
                pass
    deadline = time.monotonic() + 1.0
    for proc in procs:
        if proc is not None:
            proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc is not None and proc.exitcode is None:
            proc.kill()
            proc.join(2.0)
    for conn in conns:
        if conn is not None:
            conn.close()
    for proc in procs:
        if proc is not None and proc.exitcode is not None:
            proc.close()


class ProcessPool(_RemotePool):
    """Envs in ``workers`` worker processes (slot ``s`` on worker ``s % workers``).

    Workers start when the pool is made and build their envs lazily. ``step_timeout_s`` is a
    budget *per request*: a worker with ``k`` requests in a call has ``k * step_timeout_s``
    seconds to answer. A worker's start-up is not counted against it (``start_timeout_s`` bounds
    that). :meth:`worker_pids` gives the workers' process ids.

    Args:
        env_id: the environment id.
        env_kwargs: keyword arguments of every env (picklable; a callable reward must be defined
            at module level).
        num_slots: number of slots.
        workers: number of worker processes (at most ``num_slots`` are started).
        step_timeout_s: seconds per request before a silent worker is killed (``None``: wait).
        start_timeout_s: seconds a new worker may take to start and import the env.
        start_method: ``"forkserver"`` (default where available) or ``"spawn"``.
    """

    backend = "process"

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any] | None,
        *,
        num_slots: int,
        workers: int = 1,
        step_timeout_s: float | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        start_method: str | None = None,
    ) -> None:
        super().__init__(
            env_id,
            env_kwargs,
            num_slots=num_slots,
            workers=workers,
            step_timeout_s=step_timeout_s,
            start_timeout_s=start_timeout_s,
        )
        self._ctx = _context(start_method)
        self.start_method = self._ctx.get_start_method()
        self._procs: list[Any] = [None] * self.workers
        self._conns: list[Any] = [None] * self.workers
        self._ready = [False] * self.workers
        # The finaliser holds the lists, not the pool: a pool dropped without close() (or alive
        # at interpreter exit) still stops its workers.
        self._finalizer = weakref.finalize(self, _shutdown_workers, self._procs, self._conns)
        try:
            for w in range(self.workers):
                self._start(w)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ worker lifecycle
    def _start(self, w: int) -> None:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=_worker_main, args=(child_conn, w, self._blob), name=f"envgym-pool-{w}", daemon=True
        )
        blocked = self.start_method == "spawn" and hasattr(signal, "pthread_sigmask")
        if blocked:
            # A spawned child inherits the signal mask: with SIGINT blocked until the worker
            # ignores it, a Ctrl-C during its start-up cannot print a traceback from it.
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            proc.start()
        finally:
            if blocked:
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            child_conn.close()  # else the parent would never see end-of-file when the worker dies
        self._procs[w] = proc
        self._conns[w] = parent_conn
        self._ready[w] = False

    def _kill(self, w: int) -> None:
        proc, conn = self._procs[w], self._conns[w]
        self._procs[w] = self._conns[w] = None
        self._ready[w] = False
        if proc is not None:
            if proc.exitcode is None:
                proc.kill()
            proc.join(5.0)
            if proc.exitcode is not None:
                proc.close()
        if conn is not None:
            conn.close()

    def _who(self, w: int) -> str:
        proc = self._procs[w]
        return f"pid {proc.pid}" if proc is not None else "not running"

    def _death_message(self, w: int) -> str:
        proc = self._procs[w]
        if proc is None:
            return f"worker {w} died"
        proc.join(2.0)  # the exit status may arrive a moment after the pipe closes
        return f"worker {w} (pid {proc.pid}) died: {_exit_text(proc.exitcode)}"

    def _replace(self, w: int, reason: str, *, restart: bool = True) -> None:
        logger.warning("envgym pool %s: %s; replacing the worker", self.env_id, reason)
        self._kill(w)
        self._lost(w, reason)
        if restart and not self._closed:
            self._start(w)

    def worker_pids(self) -> list[int | None]:
        if self._closed:
            return [None] * self.workers
        return [proc.pid if proc is not None else None for proc in self._procs]

    # ------------------------------------------------------------------ the exchange
    def _await_ready(self, ws: Sequence[int]) -> dict[int, str]:
        """Start missing workers and wait until each of ``ws`` said ready; return worker -> failure."""
        from multiprocessing.connection import wait

        failed: dict[int, str] = {}
        for w in ws:
            if self._procs[w] is None:
                self._start(w)
        waiting = {w for w in ws if not self._ready[w]}
        deadline = time.monotonic() + self.start_timeout_s
        while waiting:
            lookup: dict[Any, int] = {}
            for w in waiting:
                lookup[self._conns[w]] = w
                lookup[self._procs[w].sentinel] = w
            ready = wait(list(lookup), max(0.0, deadline - time.monotonic()))
            for w in {lookup[obj] for obj in ready}:
                conn = self._conns[w]
                try:
                    if not conn.poll():
                        raise EOFError
                    tag, detail = conn.recv()
                except (EOFError, OSError):
                    failed[w] = self._death_message(w).replace("died", "died while starting", 1)
                    self._replace(w, failed[w], restart=False)  # restarted on its next use
                else:
                    if tag == "ready":
                        self._ready[w] = True
                    else:
                        failed[w] = f"worker {w} ({self._who(w)}) could not start: {detail}"
                        self._replace(w, failed[w], restart=False)
                waiting.discard(w)
            if waiting and time.monotonic() >= deadline:
                for w in waiting:
                    failed[w] = f"worker {w} ({self._who(w)}) did not start within {self.start_timeout_s:g} s"
                    self._replace(w, failed[w], restart=False)
                waiting.clear()
        return failed

    def _exchange(self, kind: str, batches: dict[int, list[Any]]) -> dict[int, list[Any]]:
        from multiprocessing.connection import wait

        payloads = self._dumps_batches(kind, batches)
        out: dict[int, list[Any]] = {}

        def fail(w: int, failure_kind: str, message: str) -> None:
            out[w] = [EnvFailure(failure_kind, message, True) for _ in batches[w]]

        for w, message in self._await_ready(list(batches)).items():
            fail(w, "env_error", message)
        pending: dict[int, float | None] = {}
        start = time.monotonic()
        try:
            for w, payload in payloads.items():
                if w in out:
                    continue
                # Pending from before the send: an interrupted send leaves a half-written message.
                pending[w] = self._deadline(start, len(batches[w]))
                try:
                    self._conns[w].send_bytes(payload)
                except OSError:
                    del pending[w]
                    message = self._death_message(w)
                    fail(w, "env_error", message)
                    self._replace(w, message)
            while pending:
                lookup: dict[Any, int] = {}
                for w in pending:
                    lookup[self._conns[w]] = w
                    lookup[self._procs[w].sentinel] = w
                deadlines = [d for d in pending.values() if d is not None]
                timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                for w in {lookup[obj] for obj in wait(list(lookup), timeout)}:
                    conn = self._conns[w]
                    try:
                        # A worker may exit right after its reply: read the pipe before
                        # believing the sentinel.
                        if not conn.poll():
                            raise EOFError
                        reply = conn.recv()
                    except (EOFError, OSError):
                        message = self._death_message(w)
                        fail(w, "env_error", message)
                        self._replace(w, message)
                    except Exception as err:  # noqa: BLE001 - a reply this process cannot unpickle
                        out[w] = [
                            EnvFailure("env_error", f"could not read the worker's reply: {_describe(err)}")
                        ] * len(batches[w])
                    else:
                        tag, body = reply
                        if tag == "ok" and len(body) == len(batches[w]):
                            out[w] = body
                        else:
                            out[w] = [EnvFailure("env_error", str(body))] * len(batches[w])
                    del pending[w]
                now = time.monotonic()
                for w in [w for w, d in pending.items() if d is not None and d <= now]:
                    message = self._timeout_message(w, self._who(w), len(batches[w]))
                    fail(w, "timeout", message)
                    self._replace(w, message)
                    del pending[w]
        except BaseException:
            # Interrupted (Ctrl-C) with replies outstanding: those workers' pipes are out of
            # step, so they are killed now and restarted on their next use.
            for w in pending:
                self._kill(w)
                self._lost(w, f"worker {w} was interrupted during a call")
            raise
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Wait briefly for calls in flight in other threads; the workers are stopped regardless.
        held = [lock.acquire(timeout=1.0) for lock in self._locks]
        try:
            self._finalizer()
        finally:
            for lock, got in zip(self._locks, held):
                if got:
                    lock.release()


# --------------------------------------------------------------------------- Ray actors
_ray_lock = threading.Lock()
_ray_owned_users = 0  # pools using a Ray instance that a pool started


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise MissingDependencyError("ray", "ray", "The Ray environment pool (backend='ray')") from err
    return ray


class _RayHostActor:
    """The body of a Ray actor: one :class:`_SlotHost` (wrapped with ``ray.remote`` at run time)."""

    def __init__(self, blob: bytes) -> None:
        self.host = _SlotHost.from_blob(blob)

    def call(self, kind: str, requests: list[Any]) -> list[Any]:
        results = self.host.handle(kind, requests)
        try:
            # Ray would fail the whole call on one result it cannot serialise; fail only that one.
            pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001
            results = _picklable(results, requests, self.host)
        return results

    def pid(self) -> int:
        return os.getpid()


class RayPool(_RemotePool):
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
        env_id: str,
        env_kwargs: Mapping[str, Any] | None,
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
            env_id,
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


# --------------------------------------------------------------------------- factory
def make_pool(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None,
    *,
    num_slots: int,
    backend: str = "inproc",
    workers: int = 1,
    step_timeout_s: float | None = None,
    ray_address: str | None = None,
) -> EnvPool:
    """Make a pool of ``num_slots`` envs of ``env_id``.

    Args:
        env_id: a registered single-agent environment id.
        env_kwargs: keyword arguments of every env (picklable for ``process`` and ``ray``).
        num_slots: number of slots (>= 1).
        backend: ``"inproc"`` (this process), ``"process"`` (worker processes) or ``"ray"``.
        workers: worker processes or Ray actors (>= 1; ignored by ``inproc``).
        step_timeout_s: seconds per request before a silent worker is killed and replaced
            (``None``: no limit; ignored by ``inproc``, which cannot interrupt an env).
        ray_address: the Ray cluster to join (``ray`` only; ``None``: the current or a local one).

    Raises:
        ConfigError: an unknown backend, ``workers`` or ``num_slots`` below 1, a bad timeout,
            unpicklable ``env_kwargs`` for a remote backend, or a multi-agent id.
        UnknownEnvError: ``env_id`` is not registered.
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
    from envgym import registration

    env_spec = registration.spec(env_id)  # UnknownEnvError with "did you mean" before any worker starts
    if env_spec.multi_agent:
        raise ConfigError(
            f"env pools hold single-agent environments, got the {env_spec.kind} environment {env_id!r}; "
            f"use a single-agent id (see `envgym list`)."
        )
    if backend == "inproc":
        return InProcessPool(env_id, env_kwargs, num_slots=num_slots)
    if backend == "process":
        return ProcessPool(env_id, env_kwargs, num_slots=num_slots, workers=workers, step_timeout_s=step_timeout_s)
    return RayPool(
        env_id, env_kwargs, num_slots=num_slots, workers=workers, step_timeout_s=step_timeout_s, ray_address=ray_address
    )
