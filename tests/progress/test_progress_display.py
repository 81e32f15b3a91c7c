"""``envgym.progress.Progress``: plain periodic lines off a terminal, one rewritten line on a
terminal, rates over a sliding window, the ETA, the off switches, and thread safety. A fake
clock drives time (nothing sleeps); the background ticker is off except where it is tested."""

from __future__ import annotations

import io
import threading

import pytest

from envgym.progress import Progress, format_duration, progress_enabled


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def plain(clock: Clock, **kwargs: object) -> tuple[Progress, io.StringIO]:
    stream = io.StringIO()
    return Progress(stream, enabled=True, clock=clock, tick_s=None, **kwargs), stream  # type: ignore[arg-type]


def test_plain_stream_gets_a_line_every_interval_and_a_final_line() -> None:
    clock = Clock()
    progress, stream = plain(clock)
    progress.start("envgym/FrozenLake-v0 · random", 20)
    for second in range(1, 26):  # one episode ends every 1.25 s, 4 turns each
        clock.now = float(second)
        progress.update(done=int(second * 0.8), live=4, turns=second * 4)
    progress.finish()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    # t=10 and t=20 (interval 10 s from the start), then the final line at t=25
    assert len(lines) == 3, lines
    assert lines[0].startswith("envgym/FrozenLake-v0 · random  8/20 episodes (40%)  live 4  turns 40 (4.0/s)")
    assert "0:10" in lines[0] and "ETA 0:15" in lines[0]  # 12 left at 0.8/s
    assert lines[1].startswith("envgym/FrozenLake-v0 · random  16/20 episodes (80%)")
    assert "ETA 0:05" in lines[1]
    assert lines[2] == "envgym/FrozenLake-v0 · random  20/20 episodes (100%)  turns 100 (4.0/s)  0:25"


def test_a_short_phase_that_is_not_kept_writes_nothing_off_a_terminal() -> None:
    clock = Clock()
    progress, stream = plain(clock)
    progress.start("update 1/2: optimise", 4, unit="micro-batches")
    for done in range(1, 5):
        clock.now = done
        progress.update(done=done, total=4)
    progress.finish(keep=False)  # 4 s < the 10 s interval: nothing was written, nothing is
    assert stream.getvalue() == ""
    progress.start("update 1/2: rollout", 8)
    clock.now = 20.0
    progress.update(done=3)
    progress.finish(keep=False)  # a long phase that wrote lines gets its final one too
    lines = stream.getvalue().splitlines()
    assert [line.split("  ")[1] for line in lines] == ["3/8 episodes (38%)", "3/8 episodes (38%)"]


def test_terminal_rewrites_one_line_at_most_five_times_a_second() -> None:
    clock = Clock()
    stream = Terminal()
    progress = Progress(stream, enabled=True, clock=clock, tick_s=None, width=200)
    progress.start("bench core-v1 · random", 10)
    assert stream.getvalue().count("\r") == 1  # drawn at once
    for step in range(1, 21):  # every 0.05 s for one second: at most 5 redraws
        clock.now = step * 0.05
        progress.update(done=step // 2)
    assert 4 <= stream.getvalue().count("\r") - 1 <= 5
    assert "\n" not in stream.getvalue()
    progress.finish()
    text = stream.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    assert text.rstrip("\n").split("\r")[-1].startswith("bench core-v1 · random  10/10 episodes (100%)")
    assert "\x1b[K" in text  # the rest of the previous, longer line is cleared


def test_terminal_line_is_cut_to_the_width_and_cleared_on_request() -> None:
    clock = Clock()
    stream = Terminal()
    progress = Progress(stream, enabled=True, clock=clock, tick_s=None, width=30)
    progress.start("a label that is far too long for the terminal", 10)
    drawn = stream.getvalue().split("\r")[-1].replace("\x1b[K", "")
    assert len(drawn) == 29 and drawn.endswith("…")
    progress.clear()
    assert stream.getvalue().endswith("\r\x1b[K")
    progress.finish(keep=False)
    assert "\n" not in stream.getvalue()


def test_rates_follow_the_last_window_and_eta_the_phase_average() -> None:
    clock = Clock()
    progress, _ = plain(clock, window_s=10.0)
    progress.start("x", 100, done=40)  # 40 done before this session (a resumed run)
    for second in range(1, 21):
        clock.now = float(second)
        # 100 tokens/s for 10 s, then 10 tokens/s
        tokens = 100 * min(second, 10) + 10 * max(0, second - 10)
        progress.update(done=40 + second, tokens=tokens)
    assert progress.rate("tokens") == pytest.approx(10.0)  # the window holds only the slow part
    assert progress.rate("done") == pytest.approx(1.0)
    assert progress.eta() == pytest.approx(40.0)  # 40 left at the session's 1 episode/s
    assert "10 tok/s" in progress.line()


def test_eta_unknown_until_something_is_done_and_zero_at_the_end() -> None:
    clock = Clock()
    progress, _ = plain(clock)
    progress.start("x", 8)
    clock.now = 30.0
    progress.update(live=8, turns=16)
    assert progress.eta() is None and "ETA ?" in progress.line()
    progress.update(done=8)
    assert progress.eta() == 0.0
    progress.start("y", None, unit="micro-batches")
    assert progress.eta() is None and "ETA" not in progress.line() and "0 micro-batches" in progress.line()


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 59.4, 61, 3599, 3600, 86399)] == [
        "0:00",
        "0:59",
        "1:01",
        "59:59",
        "1:00:00",
        "23:59:59",
    ]
    assert format_duration(None) == format_duration(float("inf")) == format_duration(-1) == "?"


def test_off_by_flag_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    stream = Terminal()
    progress = Progress(stream, enabled=False, clock=clock, tick_s=None)
    progress.start("x", 3)
    clock.now = 60.0
    progress.update(done=3)
    progress.finish()
    assert stream.getvalue() == ""
    monkeypatch.setenv("ENVGYM_PROGRESS", "0")
    assert not progress_enabled() and not Progress(stream).enabled
    assert progress_enabled(True)  # an explicit flag wins
    monkeypatch.setenv("ENVGYM_PROGRESS", "1")
    assert progress_enabled() and not progress_enabled(False)


def test_updates_from_many_threads_add_up() -> None:
    clock = Clock()
    progress, _ = plain(clock)
    progress.start("async", 8 * 500)

    def work() -> None:
        for _ in range(500):
            progress.update(advance=1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert progress.done == 4000


def test_ticker_writes_lines_while_no_update_comes() -> None:
    """One long agent call holds every update back: the ticker still writes the periodic line."""
    clock = Clock()
    stream = io.StringIO()
    progress = Progress(stream, enabled=True, clock=clock, tick_s=0.01, interval_s=10.0)
    written = threading.Event()
    progress.start("update 1/1: rollout", 4)
    clock.now = 12.0  # no update since the start
    for _ in range(500):
        if stream.getvalue():
            written.set()
            break
        threading.Event().wait(0.01)
    progress.close()
    assert written.is_set()
    assert stream.getvalue().startswith("update 1/1: rollout  0/4 episodes (0%)  0:12  ETA ?")


def test_eta_takes_the_sooner_of_the_episode_and_turn_budget_estimates() -> None:
    now = [100.0]
    progress = Progress(io.StringIO(), enabled=True, clock=lambda: now[0], tick_s=None)  # type: ignore[arg-type]
    progress.start("run", 40)
    now[0] = 200.0
    # Lock-step: 5 of 40 episodes done after 100 s (35 left: 700 s at that rate), but 120 of at
    # most 370 turns played (250 left: about 208 s at that rate).
    progress.update(done=5, turns=120, turns_left=250)
    assert progress.eta() == pytest.approx(250 * 100 / 120)
    # Episodes ending early make the episode estimate the sooner one.
    progress.update(done=30, turns=150, turns_left=220)
    assert progress.eta() == pytest.approx(10 * 100 / 30)
    # Without a turn budget (an environment's own limit only): episodes alone.
    progress.start("run", 10)
    now[0] = 250.0
    progress.update(done=5, turns=40)
    assert progress.eta() == pytest.approx(50.0)
