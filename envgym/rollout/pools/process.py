"""The worker-process pool: envs in forkserver (or spawned) worker processes."""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import select
import signal
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from multiprocessing.connection import wait
from typing import Any

from envgym.errors import ConfigError, suggest
from envgym.rollout.pools.base import DEFAULT_START_TIMEOUT_S
from envgym.rollout.pools.host import SlotHost, picklable
from envgym.rollout.pools.records import EnvFailure, describe
from envgym.rollout.pools.remote import RemotePool

logger = logging.getLogger("envgym.rollout.pools")

__all__ = ["ProcessPool"]


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
        host = SlotHost.from_blob(blob)
    except Exception as err:  # noqa: BLE001 - reported to the parent, which fails the requests
        try:
            conn.send(("boot_error", describe(err)))
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
                conn.send(("error", f"the worker could not read the requests: {describe(err)}"))
                continue
            kind, requests = message
            if kind == "close":
                break
            results = host.handle(kind, requests)
            try:
                payload = pickle.dumps(("ok", results), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - find the result that does not pickle and fail only it
                payload = pickle.dumps(("ok", picklable(results, requests, host)), protocol=pickle.HIGHEST_PROTOCOL)
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


class ProcessPool(RemotePool):
    """Envs in ``workers`` worker processes (slot ``s`` on worker ``s % workers``).

    Workers start when the pool is made and build their envs lazily. ``step_timeout_s`` is a
    budget *per request*: a worker with ``k`` requests in a call has ``k * step_timeout_s``
    seconds to answer. A worker's start-up is not counted against it (``start_timeout_s`` bounds
    that). :meth:`worker_pids` gives the workers' process ids.

    Args:
        env: the environment id, or ``(env_id, env_kwargs)`` pairs (see :class:`EnvPool`).
        env_kwargs: keyword arguments of every env (picklable; a callable reward must be defined
            at module level); ``None`` when ``env`` lists pairs.
        num_slots: number of slots.
        workers: number of worker processes (at most ``num_slots`` are started).
        step_timeout_s: seconds per request before a silent worker is killed (``None``: wait).
        start_timeout_s: seconds a new worker may take to start and import the env.
        start_method: ``"forkserver"`` (default where available) or ``"spawn"``.
    """

    backend = "process"

    def __init__(
        self,
        env: str | Sequence[tuple[str, Mapping[str, Any] | None]],
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        num_slots: int,
        workers: int = 1,
        step_timeout_s: float | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        start_method: str | None = None,
    ) -> None:
        super().__init__(
            env,
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
                        out[w] = [EnvFailure("env_error", f"could not read the worker's reply: {describe(err)}")] * len(
                            batches[w]
                        )
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
