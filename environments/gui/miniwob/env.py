"""envgym/MiniWoB-<task>-v0: the MiniWoB++ tasks of the ``miniwob`` package, in Chromium via Playwright."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import logging
import random
import re
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from envgym.browser import (
    AXTREE_JS,
    VIRTUAL_CLOCK_JS,
    Action,
    ActionError,
    ActionSyntaxError,
    PageActor,
    Tab,
    parse_action,
    require_browser,
)
from envgym.browser.actions import choose_option_then
from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import InvalidKwargsError, MissingDependencyError, check_choice, suggest
from envgym.spaces import MAX_TEXT_LENGTH, Text

__all__ = ["ACTION_SETS", "MINIWOB_TASK_SIZE", "MiniWoBEnv", "html_dir", "task_names"]

logger = logging.getLogger(__name__)

#: The task area of every MiniWoB page (CSS pixels): the screenshot and the coordinate space.
MINIWOB_TASK_SIZE = (160, 210)
#: ``"all"``: every action of :mod:`envgym.browser.actions`; ``"click"``: ``click(id)`` only;
#: ``"click_text"``: ``click("name")`` only, an element named by its text.
ACTION_SETS = ("all", "click", "click_text")
#: A tree line's id and, when it has one, its name (a JSON string).
_TREE_LINE = re.compile(r'^\s*\[(\d+)\] \S+(?: ("(?:[^"\\]|\\.)*"))?')
_CLICK_TEXT = re.compile(r"^\s*click\s*\((.*)\)\s*$", re.DOTALL)
#: Elements of MiniWoB's own harness that are not part of the task (left out of the tree).
_HARNESS_IDS = ("reward-display", "sync-task-cover", "click-canvas", "query", "attention-canvas")
#: task -> whether its page leaves timers running after its load (filled at the first load).
_LOAD_TIMERS: dict[str, bool] = {}
#: Virtual time a page gets at reset to become ready (MiniWoB's WOB_TASK_READY), in 50 ms slices.
_READY_SLICES = 200
#: Real ms a read sent together with a click waits for the click's release (its pointerup) before it reads anyway.
_CLICK_WAIT_MS = 2000
#: Roles of the elements a click opens a native popup on (the popup, not the page, may get the mouse-up).
_POPUP_ROLES = frozenset({"combobox", "listbox", "option"})

#: Hide the cover MiniWoB puts over the task when an episode ends (its next start hides it too).
_UNCOVER_JS = "() => { const c = document.getElementById('sync-task-cover'); if (c) c.style.display = 'none'; }"

# One round trip per reset: start a seeded episode through MiniWoB's own JavaScript.
_START_JS = """(o) => {
  if (o.fast) {
    if (core.EP_TIMER !== null) core.endEpisode(0, false, 'envgym reset');
    window.__envgymClock.reset();
    const active = document.activeElement;
    if (active && active !== document.body && active.blur) active.blur();
  }
  window.__envgymAX.reset();
  Math.seedrandom(o.seed);
  core.setDataMode(o.mode);
  core.EPISODE_MAX_TIME = o.maxTime;
  core.startEpisodeReal();
  let n = 0;
  while (!WOB_TASK_READY && n < o.slices) { window.__envgymClock.advance(50); n++; }
  const u = core.getUtterance();
  return {ready: !!WOB_TASK_READY, utterance: (u && typeof u === 'object') ? u.utterance : u,
          fields: (u && typeof u === 'object') ? (u.fields || null) : null};
}"""

# One round trip per step: let virtual time pass, read MiniWoB's globals and the tree. Real frames
# (o.flush) run first when one could still change the page (a hover to move, a listener of frame
# events: envgym.browser.clock), or always (o.force: the SETTLE_FRAMES tasks).
_READ_JS = """async (o) => {
  // sent together with a click (o.ups: the count of real mouse releases once it is done): wait for it
  const late = o.ups ? !(await window.__envgymClock.afterUps(o.ups, o.upsWait)) : false;
  if (o.flush && (o.force || window.__envgymClock.framePending())) await window.__envgymClock.frame(o.flush);
  if (o.ms > 0) window.__envgymClock.advance(o.ms);
  // the images the page added (icons of a menu): until one loads it has no size, and the layout depends on when
  const images = await window.__envgymClock.imagesLoaded(o.upsWait);
  const snap = window.__envgymAX.snapshot({skipIds: o.skip, boxes: o.boxes});
  return {done: !!WOB_DONE_GLOBAL, reward: Number(WOB_REWARD_GLOBAL) || 0, raw: Number(WOB_RAW_REWARD_GLOBAL) || 0,
          reason: WOB_REWARD_REASON === null || WOB_REWARD_REASON === undefined ? null : String(WOB_REWARD_REASON),
          tree: snap.text, nodes: snap.nodes, rects: snap.rects, dom: o.dom ? window.__envgymDOM() : null,
          ups: window.__envgymClock.ups(), late: late, images: images,
          still: o.shots ? document.getAnimations().length === 0 && !window.scrollX && !window.scrollY : null};
}"""

# A click on an option of a closed <select> (chosen by its text, no mouse) and the read after it.
_CHOOSE_READ_JS = choose_option_then(_READ_JS)

# Screenshots never show the caret (Playwright's screenshots hide it for the capture; this keeps it
# hidden, so a capture needs no style put in and taken out: Tab.screenshot(still=True)).
_NO_CARET_JS = """
document.addEventListener('DOMContentLoaded', () => {
  const style = document.createElement('style');
  style.textContent = '* { caret-color: transparent !important; }';
  (document.head || document.documentElement).appendChild(style);
});
"""

# A reset's one round trip: start the episode, then read the page as a step does (no time, no frame).
_START_READ_JS = f"""async (o) => {{
  // sent together with the move to (0, 0) that parks the pointer: wait for it
  const parked = o.park ? await window.__envgymClock.afterPointerAt(0, 0, o.upsWait) : true;
  const started = ({_START_JS})(o);
  started.parked = parked;
  const state = await ({_READ_JS})(o);
  state.started = started;
  return state;
}}"""

# Images that the page's style sheets name (icons swapped in on hover or when a panel opens) are
# loaded once at page load and kept: otherwise they arrive a moment after the element shows, and
# the element's size (so the tree and what a click hits) would depend on that moment.
_PRELOAD_JS = """async () => {
  const urls = new Set();
  for (const sheet of Array.from(document.styleSheets)) {
    let rules;
    try { rules = sheet.cssRules; } catch (e) { continue; }
    const base = sheet.href || location.href;
    for (const rule of Array.from(rules || [])) {
      for (const m of (rule.cssText || '').matchAll(/url\\(["']?([^"')]+)["']?\\)/g)) {
        if (!m[1].startsWith('data:')) urls.add(new URL(m[1], base).href);
      }
    }
  }
  const kept = window.__envgymPreloaded = [];
  await Promise.all(Array.from(urls).map((u) => new Promise((resolve) => {
    const img = new Image(); kept.push(img);
    img.onload = img.onerror = () => resolve(true);
    img.src = u;
  })));
  return urls.size;
}"""

# A compact DOM text of the task area (tags, ids, classes, types, values, text), for obs["dom"].
_DOM_JS = r"""
(() => {
  if (window.__envgymDOM) return;
  const KEEP = ['id', 'class', 'type', 'name', 'value', 'placeholder', 'href', 'title', 'alt', 'role',
                'aria-label', 'for', 'fill', 'stroke', 'data-type', 'style'];
  function ser(el, depth, out) {
    if (['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE'].includes(el.tagName.toUpperCase())) return;
    if (['reward-display', 'sync-task-cover', 'click-canvas', 'attention-canvas'].includes(el.id)) return;
    const tag = el.tagName.toLowerCase();
    let attrs = '';
    for (const a of KEEP) {
      const v = a === 'value' && 'value' in el && typeof el.value === 'string' ? el.value : el.getAttribute(a);
      if (v !== null && v !== '') attrs += ' ' + a + '=' + JSON.stringify(String(v).slice(0, 120));
    }
    if (el.checked) attrs += ' checked';
    const pad = '  '.repeat(depth);
    const kids = Array.from(el.childNodes).filter((c) => c.nodeType === 1 || (c.nodeType === 3 && /\S/.test(c.data)));
    if (kids.length === 1 && kids[0].nodeType === 3) {
      out.push(pad + '<' + tag + attrs + '>' + kids[0].data.replace(/\s+/g, ' ').trim().slice(0, 200) + '</' + tag + '>');
      return;
    }
    out.push(pad + '<' + tag + attrs + '>');
    for (const c of kids) {
      if (c.nodeType === 1) ser(c, depth + 1, out);
      else out.push(pad + '  ' + c.data.replace(/\s+/g, ' ').trim().slice(0, 200));
    }
  }
  Object.defineProperty(window, '__envgymDOM', {
    value: () => { const out = []; const w = document.getElementById('wrap') || document.body; ser(w, 0, out); return out.join('\n'); },
    enumerable: false,
  });
})();
"""


def html_dir() -> Path:
    """The ``miniwob`` package's task pages (``<dir>/miniwob/<task>.html``), without importing the package."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("miniwob", "gui", "the MiniWoB++ environments")
    return Path(next(iter(spec.submodule_search_locations))) / "html"


def task_names() -> list[str]:
    """Every task page shipped by the installed ``miniwob`` package (sorted)."""
    return sorted(p.stem for p in (html_dir() / "miniwob").glob("*.html"))


@functools.cache
def _field_extractors() -> dict[str, Any]:
    """The package's utterance -> fields extractors (``miniwob/fields.py``, plain regular expressions),
    loaded on their own: importing ``miniwob`` itself would register its Selenium envs in Gymnasium."""
    path = html_dir().parent / "fields.py"
    spec = importlib.util.spec_from_file_location("_envgym_miniwob_fields", path)
    if spec is None or spec.loader is None:  # pragma: no cover - a broken install
        return {}
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(getattr(module, "FIELD_EXTRACTORS", {}))


def _fields(task: str, utterance: str, given: Any) -> dict[str, str]:
    if isinstance(given, dict):
        return {str(k): str(v) for k, v in given.items()}
    extractor = _field_extractors().get(task)
    if extractor is None:
        return {}
    try:
        return {str(k): str(v) for k, v in extractor(utterance)}
    except (ValueError, KeyError, IndexError, AttributeError):
        return {}


class MiniWoBEnv(TextEnv):
    """A MiniWoB++ task (``miniwob`` package, MIT, Farama) in Debian's Chromium through Playwright.

    **Description.** One of the 130 MiniWoB++ task pages (click a button, tick checkboxes, fill a
    form, pick a date, drag shapes, ...; the package's FlightWoB sets are not registered: see
    ``envgym.environments.gui.EXCLUDED``), loaded from the ``miniwob`` package's own HTML files
    (``file://``; nothing leaves the machine) and run by MiniWoB's own JavaScript: each episode
    seeds ``Math.random`` (``Math.seedrandom``), calls ``core.startEpisodeReal()`` and reads
    ``WOB_DONE_GLOBAL`` / ``WOB_RAW_REWARD_GLOBAL`` after every action. Time in the page is
    virtual (``envgym.browser.clock``): it advances by ``step_ms`` per valid action and at no
    other moment, so the same seed and actions give the same episode on any machine, however
    loaded. One Chromium per worker (shared by the envs of a thread), one context per env; an
    episode starts by a fast reset of the loaded page (MiniWoB's own end-episode/start-episode
    cycle, with the virtual clock and the element ids reset) or, for the tasks where that is not
    equivalent to a freshly loaded page (``RELOAD_TASKS``, and any page that keeps timers from
    its load), by reloading the page. After an action, when a rendering frame could still change
    the page (the element under the pointer changed, so Chromium moves the hover at the next
    frame; or the page listens to scroll, resize, animation or transition events:
    ``envgym.browser.clock``), one real frame (more for the ``SETTLE_FRAMES`` tasks, always) lets
    those events run before the page is read, and the images the page's style sheets name are
    loaded with the page, so no real-time event decides what the agent sees. A click and the read
    after it go to the browser together (one round trip a step); the read waits in the page for
    the click's release (its pointerup: a disabled control gets no mouse-up). The Selenium code of
    the ``miniwob`` package is not used.

    **Observation.** ``obs="text"`` (default): one string::

        Task: Select nqp, Kd and click Submit.
        [1] label "nqp"
          [2] checkbox "nqp"
        [3] label "Kd"
          [4] checkbox "Kd", checked
        [5] button "Submit", focused

    the instruction, then the accessibility tree of the task area (``envgym.browser.axtree``:
    ``[id] role "name"`` and properties ``type="..."``, ``multiline``, ``value="..."``,
    ``checked``, ``selected``, ``focused``, ``disabled``, ``expanded``, ``class="..."``; two
    spaces of indent per depth; ``StaticText`` lines for loose text). Ids are stable for an element during an episode and never reused.
    After an invalid action the text starts with ``Invalid action ...: <why>``.
    ``obs="dict"``: ``{"goal": str, "axtree": str, "screenshot": uint8 array (210*scale,
    160*scale, 3), "last_action_error": str}`` plus ``"dom": str`` (compact HTML of the task
    area) when ``dom=True``.

    **Actions.** Text, one call, parsed strictly: ``click(id)``, ``hover(id)``, ``fill(id,
    "text")``, ``select(id, "option")``, ``press("Enter")`` (Playwright key names, modifiers
    ``Control+a``), ``scroll(dx, dy)``, ``drag(id, id)``, ``click_xy(x, y)``, ``drag_xy(x1,
    y1, x2, y2)`` (screenshot pixels) and ``noop()`` (let ``step_ms`` pass). Anything else, an
    unknown id, a hidden element or a missing option is an invalid step with feedback (the page
    is untouched and no time passes). The action set is not finite: ``admissible_actions`` is
    ``None``; ``sample_action`` proposes a random click, fill, select or key on the tree.
    ``action_set="click"`` (as BrowserGym's action subsets) allows only ``click(id)`` on an
    element of the tree: the action set is then finite, ``admissible_actions`` lists one click
    per element of the current tree in its order (what an agent choosing among candidates, or
    the random-valid-action agent, needs), and any other call is an invalid step. For the tasks
    that clicks alone solve (``click-button``, ``click-link``, ``click-tab``, ``click-option``...).
    ``action_set="click_text"`` names the element by its text instead, ``click("Tab #2")``
    (WebShop's ``click[text]``, Playwright's locators by name): the first element of the tree
    whose name is that text (exactly, else ignoring case and spacing) is clicked;
    ``admissible_actions`` lists one ``click("name")`` per distinct name of the tree (names are
    JSON strings, as the tree writes them); an unknown name is an invalid step.

    **Reward components.** ``raw_reward``: MiniWoB's raw reward of the episode (in [-1, 1],
    given when the task ends it: e.g. 1 for the right button, -1 for a wrong one, partial values
    for some tasks); ``invalid_action_reward`` (``invalid_penalty``, default 0); and
    ``step_cost_reward`` (``step_cost``, default 0). ``success``: the raw reward is positive.
    ``info["miniwob"]`` holds MiniWoB's own values: ``reward`` (time-discounted in virtual
    time), ``raw_reward``, ``reason``, ``done``. ``info["task"]`` holds ``utterance``,
    ``fields`` (MiniWoB's key/value reading of the utterance) and ``miniwob_task``.

    **Reward basis.** The reward is the sum of every component (``raw_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** Terminated when MiniWoB ends the episode (any task-defined final action, or
    ``episode_ms`` of virtual time, as MiniWoB's own timer, with raw reward -1); truncated after
    ``max_turns`` (default 10, as AgentLab's MiniWoB benchmark; tasks with long forms or many
    targets may need more: pass ``max_turns``).

    **Arguments.** ``task`` (a MiniWoB task name, e.g. ``"click-button"``); ``obs`` (``"text"``
    or ``"dict"``); ``action_set`` (``"all"``, default, ``"click"`` or ``"click_text"``); ``dom`` (add the DOM
    text to dict observations); ``boxes`` (add ``info["boxes"]``: id -> [x, y, width, height] in
    screenshot pixels); ``scale`` (screenshot pixels per CSS pixel, default 1: 160x210); ``step_ms`` (virtual time per action, default
    500); ``episode_ms`` (MiniWoB's episode time limit in virtual time, default none);
    ``reset_mode`` (``"auto"``, ``"fast"`` or ``"reload"``); ``headless``; ``split``
    (``"train"``/``"test"``: disjoint seed streams, and MiniWoB's test data mode for the
    ``-transfer`` tasks); the common ``TextEnv`` arguments; ``render_mode`` ``"rgb_array"``
    (the screenshot), ``"ansi"`` or ``"human"`` (the text).

    **Version history.** v0: first release.
    """

    name: ClassVar[str] = "miniwob"
    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "human", "rgb_array"],
        "render_fps": 4,
        "picklable": False,
    }
    reward_components: ClassVar[tuple[str, ...]] = ("raw_reward", "invalid_action_reward", "step_cost_reward")
    reward_basis: ClassVar[tuple[str, ...]] = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 10
    #: Tasks that start every episode from a freshly loaded page: a fast reset was measured not to
    #: be equivalent to a fresh load (widget state, scroll positions or running animations leak into
    #: the next episode: choose-date*, click-pie, email-inbox-reply, email-inbox-forward-nl-turk,
    #: moving-items, simon-says, social-media, stock-market, use-colorwheel*), plus the tasks of the
    #: same widgets and those the miniwob package flags for state kept across its own resets, and
    #: every task built on jQuery UI's mouse interactions (dialog, draggable, resizable, sortable,
    #: slider, spinner), whose module-level state (``mouseHandled``...) outlives a fast reset.
    #: tests/environments/gui/test_gui_miniwob.py checks fast == fresh on some of the others.
    RELOAD_TASKS: ClassVar[frozenset[str]] = frozenset(
        {
            "choose-date", "choose-date-easy", "choose-date-medium", "choose-date-nodelay", "click-pie", "click-pie-nodelay", "click-scroll-list",
            "drag-cube", "moving-items", "order-food", "phone-book", "scroll-text", "scroll-text-2",
            "search-engine", "simon-says", "social-media", "social-media-all", "social-media-some",
            "stock-market", "terminal", "use-colorwheel", "use-colorwheel-2",
            "email-inbox", "email-inbox-delete", "email-inbox-forward", "email-inbox-forward-nl",
            "email-inbox-forward-nl-turk", "email-inbox-important", "email-inbox-nl-turk",
            "email-inbox-noscroll", "email-inbox-reply", "email-inbox-star-reply",
            "click-dialog", "click-dialog-2", "drag-box", "drag-items", "drag-items-grid", "drag-sort-numbers",
            "form-sequence", "resize-textarea", "use-slider", "use-slider-2", "use-spinner",
            "form-sequence-3",  # its jQuery Selectric list keeps its state across a fast reset (issue 37)
        }
    )  # fmt: skip

    #: Tasks whose pages need more real frames to settle after an action (CSS images swapped on
    #: hover, native list boxes scrolling), found by the family's determinism checks.
    SETTLE_FRAMES: ClassVar[dict[str, int]] = {
        "social-media": 4, "social-media-all": 4, "social-media-some": 4, "click-scroll-list": 4,
    }  # fmt: skip

    def __init__(
        self,
        *,
        task: str = "click-button",
        obs: str = "text",
        action_set: str = "all",
        dom: bool = False,
        boxes: bool = False,
        scale: float = 1.0,
        step_ms: int = 500,
        episode_ms: int | None = None,
        reset_mode: str = "auto",
        headless: bool = True,
        timeout_ms: int = 15_000,
        max_turns: int | None = None,
        invalid_limit: int | None = None,
        invalid_penalty: float = 0.0,
        step_cost: float = 0.0,
        reward: Any = None,
        split: str = "train",
        render_mode: str | None = None,
    ) -> None:
        super().__init__(
            max_turns=max_turns,
            invalid_limit=invalid_limit,
            invalid_penalty=invalid_penalty,
            step_cost=step_cost,
            reward=reward,
            split=split,
            render_mode=render_mode,
        )
        check_choice("obs", obs, ("text", "dict"))
        check_choice("action_set", action_set, ACTION_SETS)
        check_choice("reset_mode", reset_mode, ("auto", "fast", "reload"))
        if not isinstance(step_ms, int) or isinstance(step_ms, bool) or not 0 <= step_ms <= 600_000:
            raise InvalidKwargsError(f"step_ms must be an integer in [0, 600000] (virtual ms), got {step_ms!r}.")
        if episode_ms is not None and (not isinstance(episode_ms, int) or episode_ms < 1):
            raise InvalidKwargsError(f"episode_ms must be a positive integer (virtual ms) or None, got {episode_ms!r}.")
        if not isinstance(scale, (int, float)) or not 0.25 <= scale <= 8:
            raise InvalidKwargsError(f"scale must be a number in [0.25, 8], got {scale!r}.")
        if not isinstance(timeout_ms, int) or timeout_ms < 100:
            raise InvalidKwargsError(f"timeout_ms must be an integer >= 100, got {timeout_ms!r}.")
        require_browser("gui", f"envgym/MiniWoB-{task}-v0")
        tasks = task_names()
        if task not in tasks:
            raise InvalidKwargsError(
                f"task must be a MiniWoB task of the installed miniwob package, got {task!r}.{suggest(task, tasks)}"
            )
        if obs == "dict" or render_mode == "rgb_array":
            try:
                import PIL  # noqa: F401
            except ImportError as err:
                raise MissingDependencyError("pillow", "gui", "MiniWoB screenshots") from err
        self.task_name = task
        self.obs_mode = obs
        self.action_set = action_set
        self.dom = bool(dom)
        self.boxes = bool(boxes)
        self.scale = float(scale)
        self.step_ms = step_ms
        self.episode_ms = episode_ms
        self.reset_mode = reset_mode
        self.url = (html_dir() / "miniwob" / f"{task}.html").as_uri()
        # real rendering frames let run after each action (scroll events, hover images loading)
        self.settle_frames = self.SETTLE_FRAMES.get(task, 1)
        width, height = MINIWOB_TASK_SIZE
        self._tab = Tab(
            viewport=(width, height),
            headless=headless,
            timeout_ms=timeout_ms,
            init_scripts=(VIRTUAL_CLOCK_JS, AXTREE_JS, _DOM_JS, _NO_CARET_JS),
            device_scale_factor=self.scale,
            reuse=True,
        )
        self._actor: PageActor | None = None
        self._state: dict[str, Any] = {}
        self._goal = ""
        self._text = ""
        self._error = ""
        self._pristine: tuple[str, dict[str, Any]] | None = None
        if obs == "dict":
            h, w = round(height * self.scale), round(width * self.scale)
            fields: dict[str, spaces.Space] = {
                "goal": Text(MAX_TEXT_LENGTH),
                "axtree": Text(MAX_TEXT_LENGTH),
                "screenshot": spaces.Box(0, 255, (h, w, 3), np.uint8),
                "last_action_error": Text(MAX_TEXT_LENGTH),
            }
            if self.dom:
                fields["dom"] = Text(MAX_TEXT_LENGTH)
            self.observation_space = spaces.Dict(fields)

    # ------------------------------------------------------------------ the page
    @property
    def page(self) -> Any:
        """The Playwright page (``None`` before the first reset and after ``close()``)."""
        return self._tab.page

    def _page(self) -> Any:
        """The env's page (its own context, or an idle one of this worker), opened if needed."""
        if not self._tab.is_open:
            page = self._tab.open()
            width, height = MINIWOB_TASK_SIZE
            self._actor = PageActor(
                page, width, height, self.scale, evaluate=self._tab.evaluate, type_text=self._tab.type_text
            )
        return self._tab.page

    def _load(self) -> None:
        page = self._page()
        page.goto(self.url, wait_until="load")
        # (the count of timers the load left: a page that keeps timers from its load, an animation
        # loop, would lose them in a fast reset)
        pending = self._tab.evaluate(
            f"async () => {{ await ({_PRELOAD_JS})(); return window.__envgymClock.pending(); }}"
        )
        _LOAD_TIMERS.setdefault(self.task_name, pending > 0)

    def _read_options(self, ms: int, flush: int) -> dict[str, Any]:
        return {
            "ms": ms,
            "flush": flush,
            "force": flush > 1,
            "skip": list(_HARNESS_IDS),
            "boxes": self.boxes,
            "dom": self.dom and self.obs_mode == "dict",
            "shots": self.obs_mode == "dict" or self.render_mode == "rgb_array",
            "upsWait": _CLICK_WAIT_MS,  # the longest real wait for a click's release or the page's images
        }

    def _read(self, ms: int, flush: int = 0) -> dict[str, Any]:
        return self._took(self._tab.evaluate(_READ_JS, self._read_options(ms, flush)))

    def _click_and_read(self, x: float, y: float, ms: int, flush: int) -> dict[str, Any]:
        """A click and the read after it, sent at once: the read waits in the page for the click's
        release (one more pointerup than the page had counted at the last read) and its task to end."""
        options = {
            **self._read_options(ms, flush),
            "ups": int(self._state.get("ups", 0)) + 1,
            "upsWait": _CLICK_WAIT_MS,
        }
        state = self._tab.click_then_evaluate(x, y, _READ_JS, options)
        self._actor.clicked(x, y)  # type: ignore[union-attr]
        if state.get("late"):
            logger.warning(
                "%s: the click's release (pointerup) did not reach the page in %d ms; read anyway",
                self.task_name,
                _CLICK_WAIT_MS,
            )
        return self._took(state)

    def _role(self, element_id: int) -> str:
        match = re.search(rf"^\s*\[{element_id}\] ([^\s,]+)", self._state.get("tree", ""), re.MULTILINE)
        return match.group(1) if match else ""

    def _took(self, state: dict[str, Any]) -> dict[str, Any]:
        """Keep a state the page returned (the tree, MiniWoB's globals, the boxes for clicks)."""
        self._state = state
        if state.get("images") is False:
            logger.warning("%s: the page's images did not load in %d ms; read anyway", self.task_name, _CLICK_WAIT_MS)
        if self._actor is not None:
            self._actor.rects = {int(r[0]): (r[1], r[2], r[3], r[4]) for r in state.pop("rects")}
        self._text = f"Task: {self._goal}\n{state['tree']}"
        return state

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        seed = f"envgym:{self.split}:{rng.getrandbits(64)}"
        if self._pristine is not None and self._pristine[0] == seed and self._tab.is_open:
            # The page has had no input and no time since it started this very episode: it is that
            # episode's first state, so there is nothing to redo (the checker's fuzzing resets a lot).
            started = self._pristine[1]
            self._error = ""
            return self._task_for(seed, started)
        page = self._page()
        same = page.url == self.url  # this task's page is loaded (by an earlier episode, or an earlier env)
        if self.reset_mode == "auto":
            fast = same and self.task_name not in self.RELOAD_TASKS and not _LOAD_TIMERS.get(self.task_name, True)
        else:
            fast = same and self.reset_mode == "fast"
        # the same pointer position at every start: parked at (0, 0), together with the start when
        # the page is kept and the pointer is known to be elsewhere (then the page sees the move)
        actor = self._actor
        assert actor is not None
        send_park = fast and actor.pointer is not None and actor.pointer != (0.0, 0.0)
        if not send_park:
            actor.park()
        if not fast:
            self._load()
        options = {
            "fast": fast,
            "seed": seed,
            "mode": "test" if self.split == "test" else "train",
            "maxTime": self.episode_ms if self.episode_ms is not None else 2**31 - 1,
            "slices": _READY_SLICES,
            **self._read_options(0, 0),
            "park": send_park,
            "upsWait": _CLICK_WAIT_MS,
        }
        if send_park:
            state = self._tab.move_then_evaluate(0, 0, _START_READ_JS, options)
            actor.parked()
        else:
            state = self._tab.evaluate(_START_READ_JS, options)
        started = state.pop("started")
        if not started.pop("parked"):
            logger.warning("%s: the move to (0, 0) did not reach the page in %d ms", self.task_name, _CLICK_WAIT_MS)
        if not started["ready"]:
            logger.warning("%s: the page did not report WOB_TASK_READY after its reset", self.task_name)
        self._goal = " ".join(str(started["utterance"] or "").split())
        self._error = ""
        self._took(state)
        self._pristine = (seed, started)
        return self._task_for(seed, started)

    def _task_for(self, seed: str, started: dict[str, Any]) -> Task:
        fields = _fields(self.task_name, self._goal, started["fields"])
        return Task(
            id=f"miniwob/{self.task_name}/{self.split}/{seed.rsplit(':', 1)[1]}",
            goal=self._goal,
            difficulty=self.task_name,
            extra={"miniwob_task": self.task_name, "utterance": self._goal, "fields": fields},
        )

    def _intro(self) -> str:
        return ""

    def _observe(self) -> str:
        return self._text

    def _parse(self, text: str) -> Any:
        if self.action_set == "click_text":
            return self._parse_click_text(text)
        try:
            action = parse_action(text)
        except ActionSyntaxError as err:
            raise InvalidAction(str(err)) from None
        if self.action_set == "click" and action.name != "click":
            example = next(iter(self._ids()), 1)
            raise InvalidAction(f"only click(id) is allowed here (action_set='click'), e.g. click({example}).")
        return action

    def _parse_click_text(self, text: str) -> Any:
        """``click("name")`` -> the click on the first element of the tree with that name."""
        named = self._named()
        example = f"click({json.dumps(named[0][1])})" if named else 'click("Submit")'
        match = _CLICK_TEXT.match(text)
        try:
            name = ast.literal_eval(match.group(1).strip()) if match else None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            name = None
        if not isinstance(name, str):
            raise InvalidAction(f"only click(\"name\") is allowed here (action_set='click_text'), e.g. {example}.")
        target = next((i for i, n in named if n == name), None)
        if target is None:
            folded = " ".join(name.split()).casefold()
            target = next((i for i, n in named if " ".join(n.split()).casefold() == folded), None)
        if target is None:
            names = list(dict.fromkeys(n for _, n in named))
            raise InvalidAction(
                f"no element of the page is named {json.dumps(name)}.{suggest(name, names)} "
                f"The named elements: {', '.join(json.dumps(n) for n in names[:20])}."
            )
        return Action("click", (target,))

    def _named(self) -> list[tuple[int, str]]:
        """``(id, name)`` of the current tree's elements that have a name, in tree order."""
        out = []
        for line in self._state.get("tree", "").splitlines():
            match = _TREE_LINE.match(line)
            if match and match.group(2):
                name = json.loads(match.group(2))
                if name.strip():
                    out.append((int(match.group(1)), name))
        return out

    def _ids(self) -> list[int]:
        """The element ids of the current tree, in its order."""
        return [
            int(line.split("]", 1)[0].strip().lstrip("["))
            for line in self._state.get("tree", "").splitlines()
            if line.strip().startswith("[")
        ]

    def admissible_actions(self) -> list[str] | None:
        """One ``click(id)`` per element of the current tree with ``action_set="click"``, one
        ``click("name")`` per distinct element name with ``"click_text"``, else ``None``."""
        if self.action_set == "click_text":
            return [f"click({json.dumps(n)})" for n in dict.fromkeys(n for _, n in self._named())]
        if self.action_set != "click":
            return None
        return [f"click({i})" for i in self._ids()]

    def _apply(self, action: Any) -> Transition:
        assert self._actor is not None
        self._pristine = None  # input or time reaches the page from here on
        # input events are dispatched synchronously, but what Chromium does with frames (scroll
        # events, hover updates) is let run before the virtual clock moves and the page is read
        flush = self.settle_frames if action.name != "noop" else 0
        point, state = None, None
        try:
            role = self._role(action.args[0]) if action.name == "click" else ""
            if role == "option" and self._actor.known_centre(action.args[0]) is None:
                # no box of its own (a closed <select>'s option): chosen and read in one call
                outcome = self._tab.evaluate(
                    _CHOOSE_READ_JS, {**self._read_options(self.step_ms, flush), "option": action.args[0]}
                )
                if "refused" in outcome:
                    raise self._actor.refusal(action.args[0], outcome["refused"])
                if "click" in outcome:
                    point = tuple(outcome["click"])
                else:
                    self._actor.chose()
                    state = self._took(outcome["value"])
            elif action.name == "click" and role not in _POPUP_ROLES:
                point = self._actor.plain_click(action)  # sent with the read below
            if point is None and state is None and action.name != "noop":
                self._actor.run(action)
        except ActionError as err:
            raise InvalidAction(str(err)) from None
        if point is not None:
            state = self._click_and_read(point[0], point[1], self.step_ms, flush)
        elif state is None:
            state = self._read(self.step_ms, flush=flush)
        if not state["done"]:
            return Transition(self._text)
        raw = float(state["raw"])
        return Transition(self._text, {"raw_reward": raw}, terminated=True, success=raw > 0)

    def sample_action(self, rng: random.Random) -> str:
        """A random action on the current tree: mostly clicks, sometimes fill/select/press/scroll.

        With ``action_set="click"``: a click on an element of the tree, uniformly.
        """
        if self.action_set == "click_text":
            actions = self.admissible_actions() or ['click("Submit")']
            return rng.choice(actions)
        ids = self._ids()
        if self.action_set == "click":
            return f"click({rng.choice(ids)})" if ids else "click(1)"
        roll = rng.random()
        if not ids or roll < 0.04:
            return rng.choice(['press("Enter")', 'press("Tab")', "scroll(0, 50)", "noop()"])
        target = rng.choice(ids)
        if roll < 0.8:
            return f"click({target})"
        if roll < 0.9:
            return f'fill({target}, "{rng.choice(["a", "hello", "42", "Submit"])}")'
        return f"hover({target})" if roll < 0.95 else f"drag({target}, {rng.choice(ids)})"

    # ------------------------------------------------------------------ gymnasium API
    def _info(self, components: dict[str, float], valid: bool, success: bool, reason: Any) -> dict[str, Any]:
        info = super()._info(components, valid, success, reason)
        if isinstance(info["task"].get("fields"), dict):
            info["task"]["fields"] = dict(info["task"]["fields"])  # callers keep and mutate infos
        state = self._state
        info["miniwob"] = {
            "reward": float(state.get("reward", 0.0)),
            "raw_reward": float(state.get("raw", 0.0)),
            "reason": state.get("reason"),
            "done": bool(state.get("done", False)),
        }
        if self.boxes and state.get("nodes") is not None:
            s = self.scale
            info["boxes"] = {n["id"]: [b * s for b in n["box"]] for n in state["nodes"]}
        return info

    def _wrap(self, text: str, valid: bool) -> Any:
        self._error = "" if valid else text.split("\n\n", 1)[0]
        if self.obs_mode == "text":
            return text
        obs = {
            "goal": self._goal,
            "axtree": self._state.get("tree", ""),
            "screenshot": self.screenshot(),
            "last_action_error": self._error,
        }
        if self.dom:
            obs["dom"] = self._state.get("dom") or ""
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        text, info = super().reset(seed=seed, options=options)
        return self._wrap(text, True), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        text, reward, terminated, truncated, info = super().step(action)
        return self._wrap(text, info["action_valid"]), reward, terminated, truncated, info

    def screenshot(self) -> np.ndarray:
        """The task area as the agent would see it: uint8 (210*scale, 160*scale, 3)."""
        if not self._tab.is_open:
            h, w = round(MINIWOB_TASK_SIZE[1] * self.scale), round(MINIWOB_TASK_SIZE[0] * self.scale)
            return np.zeros((h, w, 3), np.uint8)
        if self._state.get("done"):
            # MiniWoB covers the task with its START overlay as an episode ends: show the last screen.
            self._tab.evaluate(_UNCOVER_JS)
        # the page was read after its last change: still then (no CSS animation, not scrolled), still now
        return self._tab.screenshot(still=self._state.get("still") is True)

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            return self.screenshot()
        return super().render()

    def close(self) -> None:
        super().close()
        self._tab.close()
        self._actor = None
        self._pristine = None
