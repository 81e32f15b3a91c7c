"""The thread that runs one session's env calls, off the event loop.

Every call to a session's env (make, reset, step, render, close) runs on that session's own
thread, one at a time and in order: a slow step then stalls no other session and can be timed
out, and envs bound to the thread that built them (Playwright's sync API) keep working. A close
queued behind a step that ran past its time runs when that step returns, on the same thread, so
it is called exactly once and never concurrently with the step. When the thread ends, the browser
it ran (one Chromium per thread, :mod:`envgym.browser.pool`) is stopped at once.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

from envgym.browser.pool import stop_thread_browsers

__all__ = ["Worker"]

_STOP = object()


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # cancelled: its caller timed out
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class Worker:
    """A daemon thread running submitted calls in order; after :meth:`stop` it stops its browser and
    runs ``on_exit``.

    Daemon, so that a call that never returns cannot keep the process alive once the server is gone.
    """

    def __init__(self, name: str, on_exit: Callable[[], None] | None = None) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._on_exit = on_exit
        self.finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(*args)`` on the thread; the future (of the running loop) gets its result."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((fn, args, loop, future))
        return future

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the thread, without waiting for it (its errors are the caller's to catch)."""
        self._jobs.put((fn, args, None, None))

    def stop(self) -> None:
        """End the thread after the calls already queued."""
        self._jobs.put(_STOP)

    def _run(self) -> None:
        try:
            while True:
                job = self._jobs.get()
                if job is _STOP:
                    return
                fn, args, loop, future = job
                try:
                    ok, value = True, fn(*args)
                except BaseException as err:  # noqa: BLE001 - handed to the awaiting coroutine, which decides
                    ok, value = False, err
                if future is not None:
                    try:
                        loop.call_soon_threadsafe(_settle, future, ok, value)
                    except RuntimeError:  # the loop is closed: the server has stopped
                        pass
        finally:
            try:
                stop_thread_browsers()  # this thread's Chromium, if an env used one: no later env can reuse it
                if self._on_exit is not None:
                    self._on_exit()
            finally:
                self.finished.set()
