"""envgym.browser: the action grammar, the virtual clock, the accessibility tree, screenshots and
clean shutdown (close, a killed worker, Ctrl-C), on Debian's real Chromium through Playwright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from procs import descendants

from envgym.browser import AXTREE_JS, EPOCH_MS, VIRTUAL_CLOCK_JS, Action, ActionSyntaxError, parse_action

needs_browser = pytest.mark.skipif(
    not os.path.exists("/usr/bin/chromium"), reason="Debian's chromium is not installed (scripts/setup.sh installs it)"
)


# ----------------------------------------------------------------------------- grammar (no browser)
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("click(12)", Action("click", (12,))),
        ('click("12")', Action("click", (12,))),
        ("  hover( 3 ) ", Action("hover", (3,))),
        ('fill(7, "Hello, \\"world\\"")', Action("fill", (7, 'Hello, "world"'))),
        ("fill(7, 'it''s')", Action("fill", (7, "its"))),  # Python's implicit concatenation of literals
        ('fill(7, "")', Action("fill", (7, ""))),
        ('select(4, "Blue")', Action("select", (4, "Blue"))),
        ('press("Enter")', Action("press", ("Enter",))),
        ('press("Control+a")', Action("press", ("Control+a",))),
        ('press("Space")', Action("press", (" ",))),
        ("scroll(0, -120)", Action("scroll", (0, -120))),
        ("drag(3, 9)", Action("drag", (3, 9))),
        ("click_xy(40.5, 85)", Action("click_xy", (40.5, 85))),
        ("drag_xy(10, 20, 90, 20)", Action("drag_xy", (10, 20, 90, 20))),
        ("noop()", Action("noop", ())),
    ],
)
def test_parse_accepts_the_grammar(text: str, expected: Action) -> None:
    assert parse_action(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected one action"),
        ("click", "expected a call"),
        ("clik(3)", "Did you mean 'click'"),
        ("click(0)", "element ids"),
        ("click(-2)", "element ids"),
        ("click(1.5)", "element ids"),
        ("click(True)", "numbers or quoted strings"),
        ("click(1, 2)", "takes 1 argument"),
        ("click(x)", "numbers or quoted strings"),
        ("click(__import__('os'))", "numbers or quoted strings"),
        ("fill(3, 4)", "quoted text"),
        ("fill(3, text='a')", "positional"),
        ('press("Hyper+x")', "unknown modifier"),
        ('press("Enterr")', "unknown key"),
        ("scroll(1e9, 0)", "finite numbers"),
        ("click(3); click(4)", "well-formed"),
        ("click(3))", "well-formed"),
        ('fill(3, "' + "x" * 1001 + '")', "longer than 1000"),
    ],
)
def test_parse_rejects_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(ActionSyntaxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_action(text)


def test_action_prints_back_as_grammar() -> None:
    for text in ('fill(7, "a b")', "click_xy(4, 5)", "noop()", 'press("Tab")'):
        assert parse_action(str(parse_action(text))) == parse_action(text)


# ----------------------------------------------------------------------------- in a real page
_PAGE = """<!DOCTYPE html><html><body>
<div id="wrap">
  <h1>Form</h1>
  <p>Some text <span class="alink">here</span> and more.</p>
  <label for="name">Name</label><input id="name" type="text" value=" x ">
  <input id="pw" type="password" placeholder="Password">
  <textarea id="ta">a "quoted" \\ line</textarea>
  <select id="sel"><option>Red</option><option selected>Blue</option></select>
  <label><input type="checkbox" id="cb" checked>Tick</label>
  <div id="hidden" style="display:none"><button>Ghost</button></div>
  <div><div><button id="go" onclick="document.getElementById('out').textContent='clicked '+Date.now()">Go</button></div></div>
  <div id="out"></div>
  <div class="tile" style="width:10px;height:10px;background:red"></div>
  <span id="late"></span>
</div>
<script>
  window.fired = [];
  setTimeout(() => { document.getElementById('late').textContent = 'late'; window.fired.push('t500'); }, 500);
  let n = 0; const iv = setInterval(() => { n++; window.fired.push('i' + n); if (n === 3) clearInterval(iv); }, 100);
  requestAnimationFrame((t) => window.fired.push('raf'));
</script>
</body></html>"""


@pytest.fixture
def page(tmp_path: Path):
    pytest.importorskip("playwright")
    from envgym.browser import Tab

    path = tmp_path / "page.html"
    path.write_text(_PAGE)
    tab = Tab(viewport=(400, 400), init_scripts=(VIRTUAL_CLOCK_JS, AXTREE_JS))
    try:
        p = tab.open()
        p.goto(path.as_uri())
        yield tab
    finally:
        tab.close()


@needs_browser
def test_virtual_clock_moves_only_when_advanced(page) -> None:
    p = page.page
    assert p.evaluate("Date.now()") == EPOCH_MS
    time.sleep(0.3)  # wall-clock time does not reach the page
    assert p.evaluate("[Date.now(), new Date().getTime(), performance.now(), window.fired.length]") == [
        EPOCH_MS,
        EPOCH_MS,
        0,
        0,
    ]
    assert p.evaluate("window.__envgymClock.advance(250)") == 3  # raf (16 ms), interval at 100 and 200
    assert p.evaluate("window.fired") == ["raf", "i1", "i2"]
    p.evaluate("window.__envgymClock.advance(300)")  # to 550: i3 at 300 (then cleared), t500
    assert p.evaluate("window.fired") == ["raf", "i1", "i2", "i3", "t500"]
    assert p.evaluate(f"[Date.now() - {EPOCH_MS}, window.__envgymClock.pending()]") == [550, 0]
    p.evaluate("setTimeout(() => window.fired.push('x'), 10); window.__envgymClock.reset()")
    assert p.evaluate("[Date.now(), window.__envgymClock.pending()]") == [EPOCH_MS, 0]  # reset drops timers


@needs_browser
def test_axtree_text_ids_and_properties(page) -> None:
    p = page.page
    text = p.evaluate("window.__envgymAX.snapshot({}).text")
    lines = text.splitlines()
    assert lines[0] == '[1] heading "Form"'
    assert lines[1:5] == [
        "[2] paragraph",
        '  StaticText "Some text"',
        '  [3] generic "here", class="alink"',  # text-only elements get an id; loose text does not
        '  StaticText "and more."',
    ]
    assert '[5] textbox "Name", value=" x "' in lines  # verbatim value, label as name
    assert '[6] textbox "Password", type="password", value=""' in lines
    assert '[7] textbox, multiline, value="a \\"quoted\\" \\\\ line"' in lines  # JSON escapes
    assert '[8] combobox, value="Blue"' in lines and '  [10] option "Blue", selected' in lines
    assert '[11] label "Tick"' in lines and '  [12] checkbox "Tick", checked' in lines
    assert "Ghost" not in text  # hidden subtrees are left out
    assert '[13] button "Go"' in lines  # wrappers dropped: at depth 0
    assert '[14] generic, class="tile"' in lines  # a childless box keeps a line
    # ids are kept for known elements; new ones get new numbers
    p.evaluate("window.__envgymClock.advance(600)")
    again = p.evaluate("window.__envgymAX.snapshot({}).text").splitlines()
    assert again[: len(lines)] == lines and again[-1] == '[15] generic "late"'
    nodes = p.evaluate("window.__envgymAX.snapshot({boxes: true}).nodes")
    tile = next(n for n in nodes if n["id"] == 14)
    assert tile["box"][2:] == [10, 10]


@needs_browser
@pytest.mark.parametrize("through", ["playwright", "devtools"])
def test_page_actor_runs_actions_and_refuses_impossible_ones(page, through: str) -> None:
    from envgym.browser import ActionError, PageActor

    p = page.page
    # its page scripts through Playwright's evaluate (the default) or the tab's one DevTools call
    actor = PageActor(p, 400, 400, evaluate=page.evaluate if through == "devtools" else None)
    p.evaluate("window.__envgymAX.snapshot({})")
    actor.run(parse_action("click(13)"))
    assert p.evaluate("document.getElementById('out').textContent") == f"clicked {EPOCH_MS}"
    actor.run(parse_action('fill(5, "Ada")'))
    assert p.evaluate("document.getElementById('name').value") == "Ada"
    actor.run(parse_action('press("Backspace")'))
    assert p.evaluate("document.getElementById('name').value") == "Ad"
    actor.run(parse_action('select(8, "red")'))  # case-insensitive fallback
    assert p.evaluate("document.getElementById('sel').value") == "Red"
    actor.run(parse_action("click(12)"))
    assert p.evaluate("document.getElementById('cb').checked") is False
    for bad, message in [
        ("click(99)", "no element"),
        ('fill(13, "x")', "not a text field"),
        ('select(5, "x")', "not a list"),
        ('select(8, "Green")', "no option 'Green'"),
        ("click_xy(400, 10)", "outside the screen"),
    ]:
        with pytest.raises(ActionError, match=message):
            actor.run(parse_action(bad))
    # fill: a date field takes its value as a whole; a field that cannot be filled is refused untouched
    p.evaluate("""document.getElementById('out').innerHTML = '<input id="day" type="date">'
                  + '<input id="off" disabled value="v"><span id="ed" contenteditable="true">old</span>'""")
    p.evaluate("window.__envgymAX.snapshot({})")  # ids for the new elements
    ids = p.evaluate("(n) => Array.from({length: n}, (_, i) => (window.__envgymAX.element(i) || {}).id)", 40)
    day, off, editable = ids.index("day"), ids.index("off"), ids.index("ed")
    actor.run(parse_action(f'fill({day}, "2024-02-29")'))
    assert p.evaluate("[document.getElementById('day').value, document.activeElement.id]") == ["2024-02-29", "day"]
    for bad, message in [
        (f'fill({day}, "someday")', "not a valid value for the date field"),
        (f'fill({off}, "x")', "is disabled"),
        ('fill(99, "x")', "no element"),
    ]:
        with pytest.raises(ActionError, match=message):
            actor.run(parse_action(bad))
    assert p.evaluate("[document.getElementById('day').value, document.getElementById('off').value]") == [
        "2024-02-29",
        "v",
    ]
    actor.run(parse_action(f'fill({editable}, "new")'))  # contenteditable: its text selected, then typed over
    assert p.evaluate("document.getElementById('ed').textContent") == "new"


@needs_browser
def test_type_text_gives_the_page_the_events_of_playwrights_keyboard_type(page) -> None:
    """Every printable ASCII character (twice: a key pressed again), typed by Playwright's
    keyboard.type and by Tab.type_text (all key events sent at once): the page sees the same events
    with the same properties in the same order, and the same text; other text goes to Playwright."""
    from envgym.browser.tab import key_events

    p = page.page
    p.evaluate("""() => {
      window.seen = [];
      const keep = (e) => window.seen.push([e.type, e.key, e.code, e.keyCode, e.which, e.charCode, e.location,
                                            e.repeat, e.shiftKey, e.ctrlKey, e.isTrusted, e.data, e.inputType,
                                            e.target.id]);
      for (const type of ['keydown', 'keypress', 'beforeinput', 'input', 'keyup']) document.addEventListener(type, keep, true);
    }""")
    text = "".join(chr(c) for c in range(32, 127)) * 2
    typed = {}
    for how, type_text in [("playwright", p.keyboard.type), ("tab", page.type_text)]:
        p.evaluate(
            "() => { window.seen.length = 0; const ta = document.getElementById('ta'); ta.value = ''; ta.focus(); }"
        )
        type_text(text)
        typed[how] = p.evaluate("() => [window.seen, document.getElementById('ta').value]")
    assert typed["tab"] == typed["playwright"] and typed["tab"][1] == text
    assert len(typed["tab"][0]) == 5 * len(text)  # keydown, keypress, beforeinput, input, keyup
    assert key_events("caf\u00e9") is None and key_events("a\n") is None and key_events("") == []
    p.evaluate("() => { window.seen.length = 0; document.getElementById('ta').value = ''; }")
    page.type_text("\u00e9t\u00e9")  # not printable ASCII: Playwright types it (inserted as text)
    assert p.evaluate("() => document.getElementById('ta').value") == "\u00e9t\u00e9"


@needs_browser
def test_evaluate_is_one_devtools_call_with_json_in_and_out(page) -> None:
    from envgym.browser.tab import PageScriptError

    assert page.evaluate("(o) => [o.a + 1, o.s.toUpperCase(), null]", {"a": 41, "s": "x\u2028y"}) == [
        42,
        "X\u2028Y",
        None,
    ]
    assert page.evaluate("async () => { await null; return document.title; }") == page.page.title()
    with pytest.raises(PageScriptError, match="boom"):
        page.evaluate("() => { throw new Error('boom'); }")


@needs_browser
def test_a_frame_is_pending_only_when_one_could_change_the_page(page) -> None:
    """No frame to wait for after a click that leaves the element under the pointer in place on a
    page without frame-event listeners; one when the click removes it (the hover moves at the next
    frame) or when the page listens to scroll events."""
    p = page.page
    pending = "() => window.__envgymClock.framePending()"
    assert page.evaluate(pending) is False  # no real pointer over the page yet
    box = p.locator("#go").bounding_box()
    p.mouse.click(box["x"] + 3, box["y"] + 3)
    assert p.locator("#out").text_content().startswith("clicked") and page.evaluate(pending) is False
    # what is under the pointer changed: Chromium moves the hover at the next frame (removed and
    # asked in one task, so that no frame runs in between)
    assert page.evaluate(
        "() => { document.getElementById('go').remove(); return window.__envgymClock.framePending(); }"
    )
    p.mouse.move(box["x"] + 3, box["y"] + 3)  # the hover follows (a real mouse event): settled again
    assert page.evaluate(pending) is False
    p.evaluate("window.onscroll = () => {}")
    assert page.evaluate(pending) is True  # scroll events are dispatched with frames


@needs_browser
def test_click_then_evaluate_reads_after_the_click(page) -> None:
    """The click and the script are sent together; the script waits for the click's mouse-up and the
    end of its task, so it sees what the click's handlers did, every time."""
    p = page.page
    box = p.locator("#go").bounding_box()
    read = """async (n) => { const ok = await window.__envgymClock.afterUps(n, 2000);
                             return [ok, window.__envgymClock.ups(), document.getElementById('out').textContent]; }"""
    for n in range(1, 6):
        p.evaluate("document.getElementById('out').textContent = ''")
        ok, ups, text = page.click_then_evaluate(box["x"] + 3, box["y"] + 3, read, n)
        assert (ok, ups, text) == (True, n, f"clicked {EPOCH_MS}")
    assert page.evaluate(read, 99)[0] is False  # no such mouse-up: the wait gives up after its time


def _slow_image_server(delay_s: float):
    """A real HTTP server on 127.0.0.1 whose /icon.png is a 20x10 PNG sent after ``delay_s``."""
    import io
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (20, 10), (200, 0, 0)).save(buf, format="PNG")
    png = buf.getvalue()

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(delay_s)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(png)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(png)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True  # closing does not wait for a request still sleeping
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@needs_browser
def test_images_loaded_waits_for_the_images_the_page_adds(page) -> None:
    """An <img> the page adds has no height until its file arrives (it arrives in real time): a read
    that awaits imagesLoaded sees its laid-out size; a lazy image is not waited for; the wait gives up
    (false) after its time."""
    server, very_slow = _slow_image_server(0.4), _slow_image_server(30)
    url = f"http://127.0.0.1:{server.server_address[1]}/icon.png"
    add = """(u) => { const img = document.createElement('img'); img.src = u + '?' + Math.random(); img.style.width = '20px';
                      document.body.appendChild(img); return img.getBoundingClientRect().height; }"""
    wait = """async (ms) => { const ok = await window.__envgymClock.imagesLoaded(ms);
                             return [ok, Array.from(document.images).map((i) => i.getBoundingClientRect().height)]; }"""
    try:
        assert page.evaluate(add, url) == 0  # not there yet: no height
        assert page.evaluate(wait, 5000) == [True, [10]]  # 20x10 shown 20 wide
        assert page.evaluate(add, url) == 0
        ok, heights = page.evaluate(wait, 50)  # shorter than the server's delay
        assert ok is False and heights == [10, 0]
        assert page.evaluate(wait, 5000) == [True, [10, 10]]
        lazy = """(u) => { const img = new Image(); img.loading = 'lazy'; img.id = 'lazy'; img.src = u;
                              document.body.appendChild(img); }"""
        page.evaluate(lazy, f"http://127.0.0.1:{very_slow.server_address[1]}/icon.png")
        skipped = (
            "async () => [await window.__envgymClock.imagesLoaded(5000), document.getElementById('lazy').complete]"
        )
        assert page.evaluate(skipped) == [True, False]  # not waited for (its file comes after 30 s)
    finally:
        for srv in (server, very_slow):
            srv.shutdown()
            srv.server_close()


@needs_browser
def test_screenshot_is_uint8_rgb(page) -> None:
    shot = page.screenshot()
    assert shot.shape == (400, 400, 3) and shot.dtype == np.uint8
    assert shot.std() > 0 and (shot == 255).all(axis=2).mean() > 0.5  # mostly white page with content


# ----------------------------------------------------------------------------- shutdown
def _alive(pids: set[int]) -> set[int]:
    """Pids that still exist (running or zombie)."""
    return {p for p in pids if Path(f"/proc/{p}").exists()}


def _wait_gone(pids: set[int], seconds: float = 20) -> set[int]:
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(pids)


def _chromium(pids: set[int]) -> set[int]:
    found = set()
    for p in _alive(pids):
        try:
            if b"chrom" in Path(f"/proc/{p}/cmdline").read_bytes():
                found.add(p)
        except OSError:
            pass
    return found


_WORKER = textwrap.dedent(
    """
    import os, sys, time
    os.environ["ENVGYM_BROWSER_LINGER"] = {linger!r}
    import envgym
    env = envgym.make("envgym/MiniWoB-click-button-v0")
    env.reset(seed=0)
    env.step("click(1)")
    print("ready", flush=True)
    how = sys.stdin.readline().strip()
    if how == "close":
        env.close()
        print("closed", flush=True)
        time.sleep(60)
    elif how == "crash":
        os._exit(3)  # no close(), no atexit handlers
    else:
        time.sleep(60)  # waits for a signal
    """
)


def _start_worker(linger: str = "2") -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WORKER.format(linger=linger)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's job
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        pytest.fail(f"worker did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc


@needs_browser
def test_no_chromium_left_after_close() -> None:
    pytest.importorskip("miniwob")
    proc = _start_worker(linger="0.5")
    try:
        procs = set(descendants(proc.pid))
        chromium = _chromium(procs)
        assert chromium, "the worker runs Chromium"
        proc.stdin.write("close\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "closed"
        assert _wait_gone(procs) == set()  # the browser (after its 0.5 s linger) and the driver: gone, reaped
        assert proc.poll() is None  # while the worker itself goes on
    finally:
        proc.kill()
        proc.wait(timeout=30)


@needs_browser
@pytest.mark.parametrize("how", ["crash", "sigkill", "ctrl-c", "sigterm"])
def test_no_chromium_left_when_the_worker_dies(how: str) -> None:
    pytest.importorskip("miniwob")
    proc = _start_worker()
    procs = set(descendants(proc.pid))
    assert _chromium(procs)
    if how == "crash":
        proc.stdin.write("crash\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 3
    elif how == "sigkill":
        proc.kill()
        proc.wait(timeout=30)
    elif how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the whole foreground job
        assert proc.wait(timeout=30) != 0
    else:
        proc.terminate()
        proc.wait(timeout=30)
    assert _wait_gone(procs) == set()


@needs_browser
def test_envs_of_a_worker_share_one_browser_and_it_lingers_then_stops() -> None:
    pytest.importorskip("miniwob")
    import envgym
    from envgym.browser import pool

    before = set(descendants(os.getpid()))
    first = envgym.make("envgym/MiniWoB-click-button-v0")
    second = envgym.make("envgym/MiniWoB-enter-text-v0")
    try:
        first.reset(seed=0)
        second.reset(seed=0)
        new = set(descendants(os.getpid())) - before
        browsers = {p for p in _chromium(new) if b"--type=" not in Path(f"/proc/{p}/cmdline").read_bytes()}
        assert len(browsers) <= 1  # one browser per worker (none new when an earlier test's still lingers)
        first.close()
        assert second.step('fill(1, "x")')[4]["action_valid"]
    finally:
        second.close()
    assert pool.live_browsers() == 1  # lingering for the next env of this worker
    running = _chromium(set(descendants(os.getpid())))
    third = envgym.make("envgym/MiniWoB-click-button-v0")
    third.reset(seed=0)  # reuses it: no new browser process
    browsers_now = {
        p for p in _chromium(set(descendants(os.getpid()))) if b"--type=" not in Path(f"/proc/{p}/cmdline").read_bytes()
    }
    assert browsers_now <= running
    third.close()
    deadline = time.monotonic() + pool.LINGER_S + 10
    while pool.live_browsers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pool.live_browsers() == 0  # the pool's timer stopped it
    assert _wait_gone(set(descendants(os.getpid())) - before) == set()


@needs_browser
def test_after_shutdown_browsers_the_thread_can_use_playwright_itself() -> None:
    pytest.importorskip("miniwob")
    from playwright.sync_api import sync_playwright

    import envgym
    from envgym.browser import shutdown_browsers

    env = envgym.make("envgym/MiniWoB-click-button-v0")
    env.reset(seed=0)
    env.close()  # its browser lingers for the next env, and holds this thread's Playwright loop
    shutdown_browsers()
    with sync_playwright() as playwright:
        assert playwright.chromium is not None


@needs_browser
def test_a_lingering_browser_leaves_the_thread_free_for_asyncio() -> None:
    """Playwright's sync API marks its thread's event loop as running between calls; a browser that
    only lingers for reuse must not keep that mark, or ``asyncio.run`` in the thread refuses."""
    pytest.importorskip("miniwob")
    import asyncio

    import envgym
    from envgym.browser import pool

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    env = envgym.make("envgym/MiniWoB-click-button-v0")
    env.reset(seed=0)
    refused = answer()
    with pytest.raises(RuntimeError, match="running event loop"):  # held by an env: Playwright's rule
        asyncio.run(refused)
    refused.close()
    env.close()
    assert pool.live_browsers() == 1  # lingering
    assert asyncio.run(answer()) == 42
    again = envgym.make("envgym/MiniWoB-click-button-v0")
    try:
        again.reset(seed=1)  # the lingering browser, reused after asyncio used the thread
        assert again.step("click(1)")[4]["action_valid"] in (True, False)
    finally:
        again.close()
    pool.shutdown_browsers()  # stops it from this thread: Playwright's loop must be usable again
    assert pool.live_browsers() == 0
    assert asyncio.run(answer()) == 42
