"""Live progress of long work on stderr: ``envgym run``, ``envgym bench run`` and ``envgym train``.

A :class:`Progress` shows one *phase* at a time (a rollout, an optimisation, a benchmark): its
label, ``done/total`` of its unit, and, when they are fed, the live episodes, the turns played,
the agent's tokens per second, the elapsed time and an ETA. Where it goes:

* **a terminal**: one line, rewritten in place with ``\\r`` at most every ``refresh_s`` (0.2 s,
  so 5 times a second), cut to the terminal's width so it never wraps;
* **anything else** (a log file, CI): a plain line every ``interval_s`` (10 s), and a final
  line when a phase ends, so logs stay readable;
* **off**: ``enabled=False`` (``--no-progress``), or ``ENVGYM_PROGRESS=0`` in the environment.

A background thread ticks every ``tick_s`` (1 s) while a phase is under way, so the elapsed time
moves and the plain lines keep coming even while one long agent call (a model's first turn on a
CPU) holds every update back; ``tick_s=None`` turns it off (tests drive the clock by hand).

Rates (turns/s, tokens/s) are measured over the last ``window_s`` (30 s) of samples: what the
run does now, not its average since the start. The ETA divides what is left by the phase's
average rate since it started (under lock-step batching episodes end in bursts, and a short
window would make it swing between "soon" and "never"): the episodes left at the episode rate,
or, when the runner knows every episode's turn limit (``turns_left``), the turns left at the turn
rate, whichever is sooner (see :meth:`Progress.eta`).

Feeding it: ``progress.update(done=..., total=..., live=..., turns=..., tokens=..., turns_left=...)`` with the
phase's running totals (any subset; the others keep their last value). That is exactly the
keyword call :class:`envgym.rollout.Runner`'s ``on_progress`` hook makes, so ``progress.update``
can be passed as the hook. Every method is thread-safe (the runner's async mode calls back from
its episode threads). The clock is injectable, so tests need not sleep.

This module imports only the standard library: anything may use it.
"""

from __future__ import annotations

import collections
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Self, TextIO

__all__ = ["ENV_VAR", "Progress", "format_duration", "progress_enabled"]

#: ``ENVGYM_PROGRESS=0`` (or ``false``, ``no``, ``off``) turns every progress display off.
ENV_VAR = "ENVGYM_PROGRESS"
_OFF = ("0", "false", "no", "off")
_CLEAR_EOL = "\x1b[K"


def progress_enabled(flag: bool | None = None) -> bool:
    """Whether to show progress: ``flag`` when given (a ``--no-progress`` option), else not
    unless ``ENVGYM_PROGRESS`` is unset or not one of 0/false/no/off."""
    if flag is not None:
        return flag
    return os.environ.get(ENV_VAR, "1").strip().lower() not in _OFF


def format_duration(seconds: float | None) -> str:
    """``m:ss`` or ``h:mm:ss`` (``?`` for an unknown or endless duration)."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "?"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _rate(value: float) -> str:
    if value >= 10:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 1 else f"{value:.2f}"


class Progress:
    """A one-line progress display of the current phase (see the module docstring).

    Args:
        stream: where to write (default ``sys.stderr``, looked up when writing).
        enabled: ``False`` shows nothing; ``None`` follows ``ENVGYM_PROGRESS``.
        tty: whether ``stream`` is a terminal; ``None`` asks ``stream.isatty()``.
        clock: seconds from an arbitrary start (``time.monotonic``; tests pass a fake).
        refresh_s: terminal: the least time between two renderings of the line.
        interval_s: not a terminal: the time between two plain lines.
        window_s: the span the rates are measured over.
        width: terminal width; ``None`` asks the terminal each time.
        tick_s: how often the background thread redraws between updates (``None``: no thread).
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        enabled: bool | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        refresh_s: float = 0.2,
        interval_s: float = 10.0,
        window_s: float = 30.0,
        width: int | None = None,
        tick_s: float | None = 1.0,
    ) -> None:
        self._stream = stream
        self.enabled = progress_enabled(enabled)
        self._tty = tty
        self._clock = clock
        self.refresh_s = refresh_s
        self.interval_s = interval_s
        self.window_s = window_s
        self._width = width
        self._lock = threading.RLock()
        self._shown = False  # a terminal line is on screen (to clear before other output)
        self._active = False
        self.label = ""
        self.unit = "episodes"
        self.total: int | None = None
        self.done = 0
        self.live: int | None = None
        self.turns: int | None = None
        #: Upper bound of the turns still to play (every episode's turn limit), when known.
        self.turns_left: int | None = None
        self.tokens: int | None = None
        self.note = ""
        self._start_done = 0
        self._t0 = 0.0
        self._last_out = 0.0
        self._printed = 0  # plain lines written in this phase
        self._samples: collections.deque[tuple[float, int, int, int]] = collections.deque()
        self.tick_s = tick_s
        self._ticker: threading.Thread | None = None
        self._closed = threading.Event()

    # ------------------------------------------------------------------------------ output
    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    @property
    def tty(self) -> bool:
        if self._tty is not None:
            return self._tty
        try:
            return bool(self.stream.isatty())
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            return False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream must not fail the run
            pass

    def _columns(self) -> int:
        if self._width is not None:
            return self._width
        return shutil.get_terminal_size((100, 24)).columns

    # ------------------------------------------------------------------------------ phases
    def start(self, label: str, total: int | None = None, *, unit: str = "episodes", done: int = 0) -> None:
        """Begin a phase (ending the one before without a final line); ``done`` of ``total``
        are already done (a resumed run): the rates and the ETA count only what comes after."""
        with self._lock:
            if self._active:
                self._end(keep=False)
            now = self._clock()
            self.label, self.unit, self.total, self.done = label, unit, total, done
            self.live = self.turns = self.tokens = self.turns_left = None
            self.note = ""
            self._start_done = done
            self._t0 = self._last_out = now
            self._printed = 0
            self._samples.clear()
            self._samples.append((now, done, 0, 0))
            self._active = True
            if self.enabled and self.tty:
                self._render(now)
            if self.enabled and self.tick_s is not None and self._ticker is None and not self._closed.is_set():
                self._ticker = threading.Thread(target=self._tick_loop, name="envgym-progress", daemon=True)
                self._ticker.start()

    def update(
        self,
        *,
        done: int | None = None,
        total: int | None = None,
        live: int | None = None,
        turns: int | None = None,
        tokens: int | None = None,
        turns_left: int | None = None,
        note: str | None = None,
        advance: int = 0,
    ) -> None:
        """Set the phase's running totals (the ones given) and show them when it is time.
        ``advance`` adds to ``done``. Also the runner's ``on_progress`` hook."""
        with self._lock:
            if not self._active:
                self.start(self.label or "progress", total)
            if done is not None:
                self.done = done
            self.done += advance
            if total is not None:
                self.total = total
            if live is not None:
                self.live = live
            if turns is not None:
                self.turns = turns
            if tokens is not None:
                self.tokens = tokens
            if turns_left is not None:
                self.turns_left = turns_left
            if note is not None:
                self.note = note
            now = self._clock()
            self._samples.append((now, self.done, self.turns or 0, self.tokens or 0))
            while len(self._samples) > 2 and self._samples[1][0] <= now - self.window_s:
                self._samples.popleft()
            self._show(now)

    def _show(self, now: float) -> None:
        """Draw the line (terminal) or write a plain one, when it is time."""
        if not self.enabled:
            return
        if self.tty:
            if now - self._last_out >= self.refresh_s:
                self._render(now)
        elif now - self._last_out >= self.interval_s:
            self._write(self.line(now) + "\n")
            self._last_out = now
            self._printed += 1

    def tick(self) -> None:
        """Redraw if it is time, without new numbers (the elapsed time and the ETA move on)."""
        with self._lock:
            if self._active:
                self._show(self._clock())

    def _tick_loop(self) -> None:
        assert self.tick_s is not None
        while not self._closed.wait(self.tick_s):
            self.tick()

    def close(self) -> None:
        """End the phase under way (without a final line) and stop the background thread."""
        self.finish(keep=False)
        self._closed.set()

    def finish(self, *, keep: bool = True) -> None:
        """End the phase. ``keep``: leave its final line (terminal) / always write one (plain).
        Without ``keep`` a terminal line is erased, and a plain final line is written only when
        the phase already wrote periodic ones (a short phase stays silent)."""
        with self._lock:
            if self._active:
                self._end(keep=keep)

    def clear(self) -> None:
        """Erase the terminal line (call before printing something else on the same stream);
        the next update draws it again."""
        with self._lock:
            if self._shown:
                self._write("\r" + _CLEAR_EOL)
                self._shown = False
                self._last_out = -float("inf")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish(keep=exc[0] is None)
        self.close()

    def _end(self, *, keep: bool) -> None:
        self._active = False
        if not self.enabled:
            return
        now = self._clock()
        if self.tty:
            if keep:
                self._render(now)
                self._write("\n")
                self._shown = False
            else:
                self.clear()
        elif keep or self._printed:
            self._write(self.line(now, final=True) + "\n")

    def _render(self, now: float) -> None:
        text = self.line(now)
        room = max(10, self._columns() - 1)
        if len(text) > room:
            text = text[: room - 1] + "…"
        self._write("\r" + text + _CLEAR_EOL)
        self._shown = True
        self._last_out = now

    # ------------------------------------------------------------------------------ numbers
    def rate(self, what: str, now: float | None = None) -> float | None:
        """Per-second rate of ``done``, ``turns`` or ``tokens`` over the sliding window (``None``
        until the window spans a second)."""
        column = {"done": 1, "turns": 2, "tokens": 3}[what]
        with self._lock:
            if len(self._samples) < 2:
                return None
            first, last = self._samples[0], self._samples[-1]
            end = last[0] if now is None else max(now, last[0])
            span = end - first[0]
            if span < 1.0:
                return None
            return (last[column] - first[column]) / span

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the phase's average rate so far (``None`` while unknown): what is left
        of the episodes at their rate, or, when the runner knows every episode's turn limit, what
        is left of that turn budget at the turn rate, whichever is sooner. Both over-estimate, in
        different runs: lock-step episodes tend to end together near the end (few episodes done
        until then), while episodes that end before their limit leave turns of the budget unplayed.
        """
        with self._lock:
            if self.total is None:
                return None
            left = self.total - self.done
            if left <= 0:
                return 0.0
            elapsed = (self._clock() if now is None else now) - self._t0
            if elapsed <= 0:
                return None
            finished = self.done - self._start_done
            estimates = []
            if finished > 0:
                estimates.append(left * elapsed / finished)
            if self.turns_left is not None and self.turns:
                estimates.append(self.turns_left * elapsed / self.turns)
            return min(estimates) if estimates else None

    def line(self, now: float | None = None, *, final: bool = False) -> str:
        """The text shown for the current phase."""
        with self._lock:
            now = self._clock() if now is None else now
            parts = [self.label] if self.label else []
            if self.total is not None:
                share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
                parts.append(f"{self.done}/{self.total} {self.unit}{share}")
            elif self.unit:  # no unit and no total: a phase with nothing to count (loading)
                parts.append(f"{self.done} {self.unit}")
            if self.live is not None and not final:
                parts.append(f"live {self.live}")
            elapsed = now - self._t0
            if self.turns is not None:
                # a final line gives the phase's average rate, a live one the sliding window's
                turns_rate = (self.turns / elapsed if elapsed > 0 else None) if final else self.rate("turns", now)
                parts.append(f"turns {self.turns}" + (f" ({_rate(turns_rate)}/s)" if turns_rate is not None else ""))
            if self.tokens:
                if final:
                    parts.append(f"{self.tokens} tokens" + (f" ({_rate(self.tokens / elapsed)}/s)" if elapsed else ""))
                else:
                    token_rate = self.rate("tokens", now)
                    parts.append(f"{_rate(token_rate)} tok/s" if token_rate is not None else f"{self.tokens} tokens")
            if self.note:
                parts.append(self.note)
            parts.append(format_duration(elapsed))
            if not final and self.total is not None:
                parts.append(f"ETA {format_duration(self.eta(now))}")
            return "  ".join(parts)
