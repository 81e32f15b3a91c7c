"""One Chromium per worker: launch, share, reuse, restart and stop Debian's Chromium through Playwright.

Playwright's sync API allows one driver per thread, so the browser users of a thread (the env
instances of a worker) share one Chromium, each holding a reference (:func:`acquire_browser` /
:func:`release_browser`). When the last hold is released the browser lingers for
:data:`LINGER_S` seconds (``ENVGYM_BROWSER_LINGER``; 0 stops it at once) so that envs made one
after another (an evaluation loop, the contract checker) reuse it instead of paying a launch
each; then a timer stops it by terminating Playwright's driver process, which closes Chromium
(Playwright's ``handle_sigterm``), and the driver after it. Contexts given back with :func:`give_context` are kept idle
(a few per configuration) for the next :func:`take_context` of the same thread and
configuration; they die with the browser.

A browser that died (killed, crashed) is replaced at the next :func:`acquire_browser`. At
interpreter exit every browser is stopped (``atexit``, which also runs after Ctrl-C); if the
process is killed, the driver sees its pipe close and takes Chromium down with it.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import signal
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from envgym.errors import MissingDependencyError, NotAvailableError

__all__ = [
    "CHROMIUM",
    "LAUNCH_ARGS",
    "LINGER_S",
    "acquire_browser",
    "give_context",
    "live_browsers",
    "release_browser",
    "require_browser",
    "shutdown_browsers",
    "stop_thread_browsers",
    "take_context",
]

logger = logging.getLogger(__name__)

#: The browser Playwright drives: Debian's Chromium (the project's scripts/setup.sh installs it).
#: ``ENVGYM_CHROMIUM`` overrides the path; Playwright never downloads a browser.
CHROMIUM = os.environ.get("ENVGYM_CHROMIUM", "/usr/bin/chromium")

#: Chromium flags: no sandbox (containers), no GPU, and nothing that reaches for the network
#: (the machines that run envgym may have none) or makes a headless page vary.
LAUNCH_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--disable-smooth-scrolling",
    "--font-render-hinting=none",
    "--hide-scrollbars",
)


def _linger_from_env() -> float:
    raw = os.environ.get("ENVGYM_BROWSER_LINGER", "2")
    try:
        return max(0.0, float(raw))
    except ValueError:
        logger.warning("ENVGYM_BROWSER_LINGER=%r is not a number of seconds: using 2", raw)
        return 2.0


#: Seconds an unused browser stays up for the next user of its thread.
LINGER_S = _linger_from_env()
#: Idle contexts kept per thread and configuration.
_IDLE_PER_CONFIG = 3


@dataclass
class _Entry:
    manager: Any  # playwright's context manager (its driver process is our child)
    playwright: Any
    browser: Any
    users: int = 0
    idle: dict[Hashable, list[tuple[Any, Any]]] = field(default_factory=dict)
    timer: threading.Timer | None = None
    parked: bool = False  # lingering with the thread's loop mark lifted (see _park)

    def driver_pid(self) -> int | None:
        try:  # private attributes of playwright-python; without them the browser does not linger
            return int(self.manager._client._transport._proc.pid)
        except Exception:  # noqa: BLE001
            return None


_LOCK = threading.Lock()
_BROWSERS: dict[tuple[int, bool], _Entry] = {}  # (thread id, headless) -> entry
_EXPIRED: dict[int, list[_Entry]] = {}  # thread id -> entries whose driver a timer terminated


def require_browser(extra: str, purpose: str) -> None:
    """Fail before any episode when Playwright or Chromium is missing (the message says how to fix it)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as err:
        raise MissingDependencyError("playwright", extra, purpose) from err
    if not os.path.exists(CHROMIUM):
        raise NotAvailableError(
            f"{purpose} drives Debian's Chromium at {CHROMIUM}, which is missing: install it with "
            "`apt-get install chromium` (the project's scripts/setup.sh does) or point ENVGYM_CHROMIUM at one."
        )


def _park(entry: _Entry) -> None:
    """Lift the "event loop running" mark a lingering browser leaves on its thread.

    Between calls, Playwright's sync API marks the thread's event loop as running (its dispatcher
    is suspended inside it), so ``asyncio.run`` in that thread refuses to start. While an env holds
    the browser that is Playwright's rule; while the browser only lingers for reuse, the thread
    is free, so the mark is lifted and put back (:func:`_unpark`) before Playwright runs again.
    """
    loop = getattr(entry.manager, "_loop", None)  # private attribute of playwright-python
    if loop is not None and asyncio._get_running_loop() is loop:
        asyncio._set_running_loop(None)
        entry.parked = True


def _unpark(entry: _Entry) -> None:
    if not entry.parked:
        return
    entry.parked = False
    loop = getattr(entry.manager, "_loop", None)
    if loop is not None and asyncio._get_running_loop() is None:
        asyncio._set_running_loop(loop)


def _cleanup_expired() -> None:
    """Let this thread's Playwright objects of expired browsers go (their processes are gone)."""
    with _LOCK:
        stale = _EXPIRED.pop(threading.get_ident(), [])
    for entry in stale:
        _stop_expired(entry)


def _stop_expired(entry: _Entry) -> None:
    # The driver was killed on purpose: its connection's "closed" errors are expected, not news.
    try:
        entry.manager._loop.set_exception_handler(lambda loop, context: None)
    except Exception as err:  # noqa: BLE001 - private attribute of playwright-python
        logger.debug("could not quiet the expired driver's loop: %r", err)
    _stop(entry)


def acquire_browser(headless: bool = True) -> Any:
    """This thread's Chromium (launched on first use, relaunched if it died); pair with :func:`release_browser`."""
    _cleanup_expired()
    key = (threading.get_ident(), bool(headless))
    with _LOCK:
        entry = _BROWSERS.get(key)
        if entry is not None and entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
    if entry is not None:
        _unpark(entry)
    if entry is None or not _connected(entry):
        users = 0
        if entry is not None:  # it died: start afresh, keeping the holds of its users
            users = entry.users
            with _LOCK:
                _BROWSERS.pop(key, None)
            _stop(entry)
        entry = _launch(bool(headless))
        entry.users = users
        with _LOCK:
            _BROWSERS[key] = entry
    entry.users += 1
    return entry.browser


def _connected(entry: _Entry) -> bool:
    try:
        return bool(entry.browser.is_connected())
    except Exception:  # noqa: BLE001 - a driver that went away
        return False


def _launch(headless: bool) -> _Entry:
    from playwright.sync_api import sync_playwright

    manager = sync_playwright()
    playwright = manager.start()
    try:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=headless, args=list(LAUNCH_ARGS))
    except Exception:
        playwright.stop()
        raise
    return _Entry(manager, playwright, browser)


def release_browser(headless: bool = True, linger: float | None = None) -> None:
    """Drop one hold on this thread's browser; after the last one it lingers ``linger`` seconds
    (default :data:`LINGER_S`; 0: it stops now), then stops."""
    key = (threading.get_ident(), bool(headless))
    with _LOCK:
        entry = _BROWSERS.get(key)
        if entry is None:
            return
        entry.users -= 1
        if entry.users > 0:
            return
        pid = entry.driver_pid()
        wait = LINGER_S if linger is None else max(0.0, float(linger))
        if wait > 0 and pid is not None and _connected(entry):
            timer = threading.Timer(wait, _expire, args=(key, entry))
            timer.daemon = True
            entry.timer = timer
            timer.start()
            _park(entry)
            return
        del _BROWSERS[key]
    _stop(entry)


def _expire(key: tuple[int, bool], entry: _Entry) -> None:
    """Timer thread: stop an unused browser by terminating its driver (Playwright objects are not thread-safe)."""
    with _LOCK:
        if _BROWSERS.get(key) is not entry or entry.users > 0 or entry.timer is None:
            return
        del _BROWSERS[key]
        entry.timer = None
        _EXPIRED.setdefault(key[0], []).append(entry)
    _terminate(entry)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _terminate(entry: _Entry, grace_s: float = 10.0) -> None:
    """Stop a browser from any thread: SIGTERM to its driver (which closes Chromium and waits for
    it), then, once Chromium is gone, SIGKILL to the driver (it would wait for its pipe otherwise);
    asyncio's child watcher of the launching thread reaps it."""
    pid = entry.driver_pid()
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while _children(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def take_context(headless: bool, config: Hashable) -> tuple[Any, Any] | None:
    """An idle (context, page) of this thread's browser made with ``config``, or ``None``."""
    key = (threading.get_ident(), bool(headless))
    with _LOCK:
        entry = _BROWSERS.get(key)
        if entry is None:
            return None
        idle = entry.idle.get(config)
        return idle.pop() if idle else None


def give_context(headless: bool, config: Hashable, context: Any, page: Any) -> bool:
    """Keep a (context, page) for reuse; ``False`` when the pool is full (the caller closes it)."""
    key = (threading.get_ident(), bool(headless))
    with _LOCK:
        entry = _BROWSERS.get(key)
        if entry is None or page.is_closed():
            return False
        idle = entry.idle.setdefault(config, [])
        if len(idle) >= _IDLE_PER_CONFIG:
            return False
        idle.append((context, page))
        return True


def live_browsers() -> int:
    """How many browsers this process holds (all threads, lingering ones included)."""
    with _LOCK:
        return len(_BROWSERS)


def shutdown_browsers() -> None:
    """Stop every browser now: this thread's through Playwright, other threads' through their driver."""
    me = threading.get_ident()
    with _LOCK:
        entries = list(_BROWSERS.items())
        _BROWSERS.clear()
        stale = _EXPIRED.pop(me, [])
    for (thread, _), entry in entries:
        if entry.timer is not None:
            entry.timer.cancel()
        if thread == me:
            _stop(entry)
        else:
            _terminate(entry)
    for entry in stale:
        _stop_expired(entry)


def stop_thread_browsers() -> None:
    """Stop this thread's browsers now, lingering or not: for a thread about to end (a served
    session's worker), whose browser no later env of the thread can reuse."""
    me = threading.get_ident()
    with _LOCK:
        mine = [key for key in _BROWSERS if key[0] == me]
        entries = [_BROWSERS.pop(key) for key in mine]
        stale = _EXPIRED.pop(me, [])
    for entry in entries:
        if entry.timer is not None:
            entry.timer.cancel()
        _stop(entry)
    for entry in stale:
        _stop_expired(entry)


def _stop(entry: _Entry) -> None:
    _unpark(entry)
    for closer in (entry.browser.close, entry.playwright.stop):
        try:
            closer()
        except Exception as err:  # noqa: BLE001 - a dead browser or driver is already what we want
            logger.debug("ignored while stopping the browser: %r", err)


atexit.register(shutdown_browsers)
