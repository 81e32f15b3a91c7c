"""The upload intake: every uploaded bundle is read, verified and stored in a bounded pool of its own.

An upload is hostile input: its replay may run for hours (a sandboxed episode that waits out its
timeouts), allocate until memory ends (a manifest claiming ``trials = 1e99``) or hold the CPU.
So the web app never verifies in the threads that serve pages. Instead:

* :class:`VerifyPool` runs at most :attr:`PoolConfig.workers` uploads at once and keeps at most
  :attr:`PoolConfig.queue` more waiting; beyond that :meth:`VerifyPool.reserve` says no and the
  app answers ``503`` with ``Retry-After`` (before it reads the body).
* Each upload runs in a **child process** (a fork of a single-threaded ``forkserver`` that has the
  leaderboard preloaded, so a child starts in milliseconds) with its own session, a memory limit
  (``RLIMIT_DATA``, see :attr:`PoolConfig.memory_mb`), a lower CPU priority and a wall-clock
  deadline (:attr:`PoolConfig.timeout_s`): past it, its whole process group is killed and the
  upload is answered ``422 over_budget``. The child reads the bundle, verifies it by replay and
  stores it in the database itself, and sends back only the answer, so a large bundle never
  enters the server's own memory. A child whose server dies kills its own process group.
* With a database that lives in the server's memory (``sqlite://``) a child cannot reach it; then
  (and with ``processes=False``) uploads run in the pool's threads, still apart from the page
  handlers, without the memory limit and with the deadline only reported, not enforced.

``RLIMIT_DATA`` rather than ``RLIMIT_AS``: browsers (Chromium, V8) reserve tens of GiB of address
space they never touch, so an address-space limit would refuse honest GUI replays; the data limit
counts the memory a process can actually write to (heap, anonymous mappings), per process.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import forkserver
from typing import TYPE_CHECKING, Any

from envgym.errors import ConfigError, EnvgymError
from envgym.leaderboard import suites as suites_module
from envgym.leaderboard import verify as verify_module
from envgym.leaderboard.bundle import BundleError, episodes_key, read_bundle
from envgym.leaderboard.suites import find_suite
from envgym.leaderboard.verify import VerificationError, VerifyConfig, verify_bundle
from envgym.registration import list_envs, register

try:
    import resource
except ImportError:  # pragma: no cover - not Unix
    resource = None  # type: ignore[assignment]

if TYPE_CHECKING:  # pragma: no cover
    from envgym.leaderboard.store import Store

__all__ = ["Answer", "PoolConfig", "Upload", "VerifyPool", "process_upload", "run_in_child", "server_context"]

#: How long a pool waits for a child to start sending its answer once it has exited.
_GRACE_S = 5.0


@dataclass(frozen=True, kw_only=True)
class PoolConfig:
    """How many uploads are verified at once, how many may wait, and what one may cost."""

    workers: int = 2
    """Uploads verified at the same time (each in its own process)."""
    queue: int = 16
    """Uploads that may wait for a free worker; beyond ``workers + queue`` uploads are answered 503."""
    timeout_s: float = 600.0
    """Wall-clock seconds one upload may take, reading, replaying and storing it (422 beyond)."""
    memory_mb: int | None = 2048
    """Writable memory (MiB) each process verifying an upload may use (``RLIMIT_DATA``); None: no limit."""
    processes: bool = True
    """Verify each upload in a child process (needed for the memory limit and to enforce the deadline)."""

    def __post_init__(self) -> None:
        for name in ("workers", "queue"):
            value = getattr(self, name)
            least = 1 if name == "workers" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"{name} must be an integer >= {least}, got {value!r}.")
        if (
            isinstance(self.timeout_s, bool)
            or not isinstance(self.timeout_s, (int, float))
            or not (0 < self.timeout_s < math.inf)
        ):
            raise ConfigError(f"timeout_s must be a positive number of seconds, got {self.timeout_s!r}.")
        if self.memory_mb is not None and (
            isinstance(self.memory_mb, bool) or not isinstance(self.memory_mb, int) or self.memory_mb < 64
        ):
            raise ConfigError(f"memory_mb must be an integer >= 64 (MiB) or None, got {self.memory_mb!r}.")


@dataclass(frozen=True, kw_only=True)
class Upload:
    """One upload to read, verify and store (what a child process receives)."""

    data: bytes
    submitter: str | None
    store_url: str
    max_unpacked_bytes: int
    verify_config: VerifyConfig
    allow_anonymous_sandboxed: bool = True
    environ: dict[str, str] = field(default_factory=dict)
    """The server's environment (``$ENVGYM_BENCHMARKS`` and the like), set in the child."""
    sys_path: tuple[str, ...] = ()
    """The server's ``sys.path``, set in the child (environments registered by the server's code
    import their modules by name)."""
    specs: tuple[Any, ...] = ()
    """The environments registered in the server (:class:`~envgym.registration.EnvSpec`), so a
    child verifies against the same registry, built-in or not."""


def server_context() -> dict[str, Any]:
    """The ``environ``, ``sys_path`` and ``specs`` of an :class:`Upload` made in this process."""
    return {"environ": dict(os.environ), "sys_path": tuple(sys.path), "specs": tuple(list_envs())}


@dataclass
class Answer:
    """The HTTP answer to an upload: status, JSON body, extra headers, and a line for the log."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] | None = None
    note: str | None = None


def _refusal(status: int, error: str, reason: str, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, {"error": error, "reason": reason}, headers)


def _sandboxed(suite: Any) -> bool:
    """Whether replaying ``suite`` runs agent commands in a sandbox (the suites' own check)."""
    check = getattr(suites_module, "suite_is_sandboxed", None) or getattr(verify_module, "suite_is_sandboxed", None)
    if check is not None:
        return bool(check(suite))
    # An envgym without the check: the SWE family is the one whose replay runs shell commands.
    return any(str(getattr(entry, "env", "")).startswith("envgym/SWE") for entry in getattr(suite, "entries", ()))


def _withdrawn() -> Answer:
    # Neither the id nor anything stored is given: the entry stays where the moderators put it.
    return _refusal(
        409,
        "withdrawn",
        "a bundle with this content was taken off this board by its moderators; uploading it again does not "
        "restore it. Ask the board's admin if you think this is a mistake.",
    )


def _duplicate(stored: dict[str, Any], reason: str, content_hash: str | None = None) -> Answer:
    """409 for another bundle of the same run; the same bundle (``content_hash``, when the upload's
    hash is sound) stored by a concurrent upload between this one's checks is the 200 of a re-upload."""
    if content_hash is not None and stored.get("content_hash") == content_hash:
        return _existing(stored)
    if stored.get("hidden"):
        return _withdrawn()
    return _refusal(409, "duplicate", reason)


def _episodes_key(bundle: Any) -> str | None:
    """The bundle's :func:`episodes_key`; ``None`` when it names no suite or agent (the replay
    rejects such a bundle with the reason)."""
    try:
        return episodes_key(bundle.suite_id, str(bundle.manifest["agent"]["spec"]), bundle.episodes)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _existing(stored: dict[str, Any]) -> Answer:
    if stored.get("hidden"):
        return _withdrawn()
    return Answer(200, {"status": "exists", "submission": stored})


def process_upload(upload: Upload, store: Store) -> Answer:
    """Read, verify and store one upload; every outcome is an :class:`Answer`, never an exception
    (except a :class:`MemoryError`, which the caller answers)."""
    try:
        bundle = read_bundle(upload.data, max_bytes=upload.max_unpacked_bytes)
    except BundleError as err:
        status = getattr(err, "status", 400)
        return _refusal(status, "too_large" if status == 413 else "malformed", str(err))
    sound_hash = bundle.content_hash if bundle.recompute_hash() == bundle.content_hash else None
    if sound_hash is not None:
        existing = store.find(sound_hash)
        if existing is not None:
            return _existing(existing)
    # The same episodes under another name (or text cap): refused before the replay they would cost.
    from envgym.leaderboard.store import DuplicateEpisodes  # the store's module: SQLAlchemy is loaded

    key = _episodes_key(bundle)
    twin = store.find_episodes(key) if key is not None else None
    if twin is not None:
        return _duplicate(twin, str(DuplicateEpisodes(twin)), sound_hash)
    if upload.submitter is None and not upload.allow_anonymous_sandboxed:
        try:
            suite = find_suite(bundle.suite_id)
        except (KeyError, TypeError):
            suite = None  # no suite id: verification rejects it below
        if suite is not None and _sandboxed(suite):
            return _refusal(
                403,
                "sandboxed_suite",
                f"suite {suite.id!r} replays agent commands in a sandbox, and this board takes such bundles only "
                "with a token: send 'Authorization: Bearer <token>' (ask the board's admin for one).",
            )
    try:
        verified = verify_bundle(bundle, upload.verify_config)
    except VerificationError as err:
        return _refusal(422, "rejected", str(err))
    except BundleError as err:
        status = getattr(err, "status", 400)
        return _refusal(status, "too_large" if status == 413 else "malformed", str(err))
    except Exception as err:
        unavailable = _verifier_unavailable()
        if unavailable is not None and isinstance(err, unavailable):
            retry = max(1, int(getattr(err, "retry_after_s", 60) or 60))
            return _refusal(
                503,
                "verifier_unavailable",
                f"the verifier could not run here ({err}); this is the board's fault, not the bundle's: retry in "
                f"{retry} s.",
                {"Retry-After": str(retry)},
            )
        raise
    size = len(upload.data)
    try:
        stored, created = store.add(verified, bundle_size=size, submitter=upload.submitter)
    except DuplicateEpisodes as err:  # stored by another upload while this one was replayed
        return _duplicate(err.existing, str(err), sound_hash)
    if not created:
        return _existing(stored)
    note = f"submission {stored['id']} ({stored['agent_name']!r}) from {upload.submitter or 'anonymous'}: stored"
    return Answer(201, {"status": "created", "submission": stored}, note=note)


def _verifier_unavailable() -> type[BaseException] | None:
    found = getattr(verify_module, "VerifierUnavailable", None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _over_memory(limit_mb: int | None) -> Answer:
    return _refusal(
        413,
        "too_large",
        f"verifying this bundle needed more than the {limit_mb} MiB of memory this server gives one upload; "
        "submit a smaller bundle (fewer or shorter episodes).",
    )


def _over_time(timeout_s: float) -> Answer:
    return _refusal(
        422,
        "over_budget",
        f"verifying this bundle took longer than the {timeout_s:g} s this server gives one upload, so it was "
        "stopped; episodes that wait out their timeouts cost the submitter. Submit fewer or faster episodes.",
    )


# -- the child process ------------------------------------------------------------------------------


def _lifeline(conn: Any) -> None:
    """In the child: when the server's end of ``conn`` closes (the server died), kill the group."""
    try:
        conn.recv()  # the server never sends: this returns only by EOF
    except (EOFError, OSError):
        pass
    except Exception:  # noqa: BLE001 - anything else also means the server is gone
        pass
    os.killpg(0, signal.SIGKILL)


def _child(conn: Any, upload: Upload, memory_mb: int | None) -> None:
    """The body of one upload's process: limits first, then the upload, then one answer on ``conn``."""
    from envgym.leaderboard.store import Store  # SQLAlchemy: loaded by the child (and the forkserver)

    os.setsid()  # a process group of its own: the deadline kills it and everything it started
    try:
        os.nice(10)  # page handlers keep the CPU first
    except OSError:
        pass
    if resource is not None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mb is not None and resource is not None:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    os.environ.clear()
    os.environ.update(upload.environ)
    if upload.sys_path:
        sys.path[:] = list(upload.sys_path)
    if upload.specs:
        for spec in upload.specs:
            try:
                register(spec)
            except EnvgymError:
                pass  # the same id registered differently here: the child's own wins
    threading.Thread(target=_lifeline, args=(conn,), daemon=True).start()
    try:
        with Store(upload.store_url, create=False) as store:
            answer = process_upload(upload, store)
    except MemoryError:
        answer = _over_memory(memory_mb)
    except BaseException as err:  # noqa: BLE001 - the answer names it; the traceback goes to the log
        traceback.print_exc()
        answer = _refusal(500, "internal", f"verification failed inside the server ({type(err).__name__}).")
    conn.send(answer)
    conn.close()


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:  # pragma: no cover - not Linux
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # The forkserver imports these once; each child is a fork of it, already warm.
    context.set_forkserver_preload(["envgym.leaderboard.intake", "envgym.leaderboard.store"])
    return context


def run_in_child(upload: Upload, config: PoolConfig, on_start: Callable[[Any], None] | None = None) -> Answer:
    """Run one upload in a child process under ``config``'s limits and deadline."""
    context = _context()
    ours, theirs = context.Pipe(duplex=True)
    process = context.Process(
        target=_child, args=(theirs, upload, config.memory_mb), name="envgym-verify", daemon=False
    )
    deadline = time.monotonic() + config.timeout_s
    process.start()
    theirs.close()
    if on_start is not None:
        on_start(process)
    answer: Answer | None = None
    try:
        if ours.poll(max(0.0, deadline - time.monotonic())):
            try:
                answer = ours.recv()
            except (EOFError, OSError):
                answer = None  # it died before answering
            else:
                if not isinstance(answer, Answer):
                    answer = None
            if answer is None:
                process.join(_GRACE_S)
                code = process.exitcode
                died = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                if code == -signal.SIGKILL and config.memory_mb is not None:
                    answer = _over_memory(config.memory_mb)  # most likely the kernel's OOM killer
                else:
                    answer = _refusal(
                        503,
                        "verifier_failed",
                        f"the process verifying this upload ended without an answer ({died}); retry later.",
                        {"Retry-After": "60"},
                    )
        else:
            answer = _over_time(config.timeout_s)
    finally:
        _kill_group(process)
        ours.close()
    return answer


def _kill_group(process: Any) -> None:
    """Kill the child's process group (it and everything it started), then reap the child."""
    pid = process.pid
    if pid is not None:
        try:
            os.killpg(pid, signal.SIGKILL)  # the child is the leader of its own group (setsid)
        except (ProcessLookupError, PermissionError):
            pass
    process.join(_GRACE_S)


# -- the pool ----------------------------------------------------------------------------------------


class VerifyPool:
    """A bounded pool for uploads: ``workers`` at a time, ``queue`` more waiting, nothing beyond.

    Reserve a place (:meth:`reserve`) before reading an upload's body; then :meth:`submit` it (or
    :meth:`release` the place when the upload is refused before verification).
    """

    def __init__(self, config: PoolConfig, *, in_process: Callable[[Upload], Answer] | None = None) -> None:
        self.config = config
        self._in_process = in_process  # set: run uploads in the pool's threads (no child processes)
        self._executor = ThreadPoolExecutor(config.workers, thread_name_prefix="envgym-verify")
        self._lock = threading.Lock()
        self._taken = 0
        self._running: dict[int, Any] = {}
        self._durations: list[float] = []
        self._closed = False

    @property
    def capacity(self) -> int:
        return self.config.workers + self.config.queue

    @property
    def taken(self) -> int:
        """Uploads reserved, waiting or running now."""
        with self._lock:
            return self._taken

    def reserve(self) -> bool:
        """Take a place for one upload; ``False`` when the pool and its queue are full."""
        with self._lock:
            if self._closed or self._taken >= self.capacity:
                return False
            self._taken += 1
            return True

    def release(self) -> None:
        """Give back a reserved place that :meth:`submit` will not use."""
        with self._lock:
            self._taken = max(0, self._taken - 1)

    def retry_after(self) -> int:
        """Seconds after which a refused upload may find a place: the typical upload time times the
        number of uploads ahead of it per worker (1 to 600)."""
        with self._lock:
            typical = sorted(self._durations)[len(self._durations) // 2] if self._durations else 10.0
            ahead = self._taken
        return int(min(600, max(1, math.ceil(typical * (ahead / self.config.workers)))))

    def submit(self, upload: Upload) -> Future[Answer]:
        """Verify ``upload`` in the pool (its place reserved by :meth:`reserve`)."""
        return self._executor.submit(self._run, upload)

    def _run(self, upload: Upload) -> Answer:
        started = time.monotonic()
        try:
            if self._in_process is not None:
                return self._in_process(upload)
            return run_in_child(upload, self.config, on_start=self._track)
        finally:
            with self._lock:
                self._taken = max(0, self._taken - 1)
                self._running.pop(threading.get_ident(), None)
                self._durations = [*self._durations[-49:], time.monotonic() - started]

    def _track(self, process: Any) -> None:
        with self._lock:
            self._running[threading.get_ident()] = process

    def warm_up(self) -> None:
        """Start the forkserver now (about a second), so the first upload does not wait for it."""
        if self._in_process is None:
            if "forkserver" in multiprocessing.get_all_start_methods():
                _context()
                forkserver.ensure_running()

    def close(self) -> None:
        """Refuse new uploads, kill the running ones' processes, and wait for the threads."""
        with self._lock:
            self._closed = True
            running = list(self._running.values())
        for process in running:
            _kill_group(process)
        self._executor.shutdown(wait=True, cancel_futures=True)
