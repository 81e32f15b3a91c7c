"""envgym/WebShop-Browser-v0: the WebShop store served over HTTP and driven in a real Chromium."""

from __future__ import annotations

import json
import random
import threading
import urllib.request
from typing import Any, ClassVar

import numpy as np
from envgym.environments.webshop.catalogue import Catalogue, Goal
from envgym.environments.webshop.env import (
    SEARCH_TEMPLATE,
    WebShopEnv,
    reward_weights,
    shared_store,
)
from envgym.environments.webshop.pages import ActionError, parse_action
from envgym.environments.webshop.server import ServerHandle, WebShopSite, start_in_thread

from envgym.browser import CHROMIUM, Tab, require_browser
from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import InvalidKwargsError, MissingDependencyError

__all__ = ["CHROMIUM", "WebShopBrowserEnv"]


_SERVERS: dict[tuple[str, str | None], ServerHandle] = {}
_LOCK = threading.Lock()


# One round trip reads what a step needs: the visible text, the clickables (every clickable on
# the site is an <a> with one of these classes), whether the search box is there, the page kind.
#: The viewport centre of an element (scrolled into view first if it is not wholly in it): where a
#: real mouse click lands, in one round trip (Playwright's own click() checks the element's
#: stability over animation frames first, 0.18 s a step on these static pages).
_CENTRE_JS = """(target) => {
  const el = typeof target === 'string' ? document.querySelector(target) : target;
  const inside = (r) => r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth;
  if (!inside(el.getBoundingClientRect())) el.scrollIntoView({block: 'center', inline: 'center'});
  const r = el.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
}"""

#: Put the query in the search box (as Playwright's fill(): the value set, an input event sent;
#: the pages run no script of their own) and give the search button's centre, as above.
_FILL_JS = (
    """(query) => {
  const box = document.querySelector('#search_input');
  box.value = query;
  box.dispatchEvent(new Event('input', {bubbles: true}));
  return ("""
    + _CENTRE_JS
    + """)('#search-button');
}"""
)

#: The first link (a button, a product, an option) whose text is the given label: its centre, as above.
_LINK_CENTRE_JS = (
    """(label) => {
  const links = [...document.querySelectorAll('a.btn, a.product-link, a.option')];
  const centre = """
    + _CENTRE_JS
    + """;
  return centre(links.find((a) => a.textContent.trim().toLowerCase() === label));
}"""
)

_READ_JS = """() => ({
    text: document.body.innerText,
    clickables: Array.from(document.querySelectorAll('a.btn, a.product-link, a.option'))
        .map(a => a.textContent.trim().toLowerCase()),
    search: document.querySelector('#search_input') !== null,
    kind: document.body.dataset.page || '',
})"""


def _site_server(catalogue: Catalogue | None, size: int, seed: int, cache_dir: str | None) -> ServerHandle:
    """One in-process server per catalogue and process (a daemon thread on a free loopback port)."""
    store = shared_store(catalogue, size=size, seed=seed, cache_dir=cache_dir)
    key = (store.catalogue.fingerprint, cache_dir)
    with _LOCK:
        handle = _SERVERS.get(key)
        if handle is None or not handle.thread.is_alive():
            handle = _SERVERS[key] = start_in_thread(WebShopSite(store, (0, store.catalogue.n_goals())))
    return handle


class WebShopBrowserEnv(TextEnv):
    """WebShop in a real browser: the same store served over HTTP, driven by Playwright + Chromium.

    **Description.** The goals, catalogue, search, pages and reward of ``envgym/WebShop-v0``
    (see its card), but every page is fetched from the store's web server (FastAPI + uvicorn on
    127.0.0.1: the ``envgym webshop serve`` app, started in a thread of this process on a free
    port, or an existing one given by ``server_url``) and rendered by Debian's Chromium
    (``/usr/bin/chromium``; Playwright never downloads a browser). One browser per worker (the
    env instances of a thread share it: Playwright's sync API allows one driver per thread),
    launched at the first reset; a fresh browser context (no cookies, no cache) and a new server
    session per episode. ``close()`` closes the env's context, and the last env to close stops the
    browser and the Playwright driver, Chromium's processes with them; if the process dies,
    Playwright's driver takes the browser down with it (both are tested).

    **Observation.** The page's visible text (``document.body.innerText``: the same elements as
    the text env's ``text_rich`` lines, without button markers), after the score line on the done
    page. With ``render_mode="rgb_array"``, ``render()`` returns the page as an RGB ``numpy`` array
    (800 x 1000 x 3, uint8), as the MiniWoB envs do; ``envgym run --out`` records those frames.

    **Actions.** The text env's grammar, mapped to the browser: ``search[<query>]`` types the
    query into the search box and submits the form; ``click[<text>]`` clicks the link or button
    whose text is ``<text>`` (case-insensitive). ``info["admissible_actions"]`` is read from the
    page. Anything else is an invalid step with feedback (the page is unchanged).

    **Reward components.** As ``envgym/WebShop-v0`` (``webshop_reward`` and its terms), read
    from the server's record of the purchase (``GET /api/sessions/<id>``): the same action
    sequence gives the same rewards in both envs (tested).

    **Reward basis.** ``webshop_reward``, ``invalid_action_reward``, ``step_cost_reward``: the
    reward is their sum. Diagnostic (weight 0 unless ``reward=`` weighs them; in
    ``info["reward_components"]`` for analysis, not in ``info["reward_basis"]``): ``type_reward``,
    ``attribute_reward``, ``option_reward``, ``price_reward``, ``success_reward``.

    **Episode end.** As ``envgym/WebShop-v0``: ``click[buy now]`` terminates, ``max_turns``
    (default 15) truncates.

    **Arguments.** ``catalogue_size``, ``catalogue_seed``, ``catalogue``, ``cache_dir``,
    ``split`` (as the text env); ``server_url``: drive an already running store (``envgym webshop
    serve``; it must serve the same catalogue); ``headless`` (default ``True``); ``timeout_ms``: per
    navigation (default 15,000); the common ``TextEnv`` arguments (``render_mode``: ``"ansi"``,
    ``"human"`` or ``"rgb_array"``). ``screenshot=True`` (screenshots in ``info``) is refused with a
    message naming ``render_mode="rgb_array"``.

    **Version history.** v0: first release.
    """

    # The text env's name: the same seeds draw the same goals, and the oracle solver plays both.
    name: ClassVar[str] = "webshop"
    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "human", "rgb_array"],
        "render_fps": 4,
        "picklable": False,
    }
    #: The browser's viewport (width, height) in CSS pixels: ``render()`` frames are height x width x 3.
    VIEWPORT: ClassVar[tuple[int, int]] = (1000, 800)
    reward_components: ClassVar[tuple[str, ...]] = WebShopEnv.reward_components
    reward_basis: ClassVar[tuple[str, ...]] = WebShopEnv.reward_basis
    default_max_turns: ClassVar[int] = 15
    splits: ClassVar[tuple[str, ...]] = ("train", "dev", "test")

    def __init__(
        self,
        *,
        catalogue_size: int = 10_000,
        catalogue_seed: int = 0,
        catalogue: Catalogue | None = None,
        cache_dir: str | None = None,
        server_url: str | None = None,
        screenshot: bool = False,
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
            reward=reward_weights(reward),
            split=split,
            render_mode=render_mode,
        )
        if not isinstance(timeout_ms, int) or timeout_ms < 100:
            raise InvalidKwargsError(f"timeout_ms must be an integer >= 100, got {timeout_ms!r}.")
        require_browser("webshop", "envgym/WebShop-Browser-v0")  # fail at make(), before any episode
        # The goal draw is the text env's (same seeds, same goals): a text twin does the drawing.
        self._text = WebShopEnv(
            catalogue_size=catalogue_size,
            catalogue_seed=catalogue_seed,
            catalogue=catalogue,
            cache_dir=cache_dir,
            split=split,
        )
        self.catalogue = self._text.catalogue
        if server_url is None:
            self.server_url = _site_server(catalogue, catalogue_size, catalogue_seed, cache_dir).url
        else:
            self.server_url = server_url.rstrip("/")
        if screenshot:
            raise InvalidKwargsError(
                "screenshot=True (screenshots in info) was replaced by the MiniWoB envs' convention: make the "
                "env with render_mode='rgb_array' and call env.render() after reset() or step()."
            )
        if render_mode == "rgb_array":
            try:
                import PIL  # noqa: F401
            except ImportError as err:
                raise MissingDependencyError("pillow", "webshop", "WebShop-Browser-v0 screenshots") from err
        self.headless = bool(headless)
        self.timeout_ms = timeout_ms
        self.goal: Goal | None = None
        self.session = ""
        # One context on the worker's shared Chromium (envgym.browser), opened at the first reset and
        # kept for the env's later episodes (see _new_context); the last env of the worker to close
        # stops the browser at once.
        self._tab = Tab(viewport=self.VIEWPORT, headless=self.headless, timeout_ms=timeout_ms, linger=0)
        self._page: Any = None
        self._text_cache = ""
        self._clickables: list[str] = []
        self._has_search = False

    # ------------------------------------------------------------------ browser
    def _new_context(self) -> None:
        """The page for a new episode: the env's page, opened at its first episode (or again if it
        was closed or its browser died) and kept after. An episode's whole state is the server's
        session named in the URL (the pages set no cookie and keep no storage, no script runs), so
        loading the new session's URL leaves nothing of the last episode the agent can reach
        (no action goes back in the browser's history); a fresh context per episode cost 0.35 s a
        reset (470 ms against 105 ms)."""
        if not self._tab.is_open or self._page.is_closed():  # an open tab's page is self._page
            self._page = self._tab.open()

    def _api(self, method: str, path: str) -> dict[str, Any]:
        request = urllib.request.Request(self.server_url + path, method=method)
        with urllib.request.urlopen(request, timeout=self.timeout_ms / 1000) as response:
            return json.loads(response.read())

    def _read_page(self) -> str:
        state = self._page.evaluate(_READ_JS)
        self._text_cache = str(state["text"]).strip()
        self._clickables = list(dict.fromkeys(state["clickables"]))
        self._has_search = bool(state["search"])
        return str(state["kind"])

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        task = self._text._generate(rng, options)
        self.goal = self._text.goal
        assert self.goal is not None
        self.session = self._api("POST", f"/api/sessions?goal={self.goal.index}")["session"]
        self._new_context()
        self._page.goto(f"{self.server_url}/{self.session}", wait_until="domcontentloaded")
        self._read_page()
        return task

    def _intro(self) -> str:
        return ""

    def _observe(self) -> str:
        return self._text_cache

    def _parse(self, text: str) -> tuple[str, str]:
        try:
            return parse_action(text)
        except ActionError as err:
            raise InvalidAction(str(err)) from None

    def _apply(self, action: tuple[str, str]) -> Transition:
        name, arg = action
        page = self._page
        if name == "search":
            if not self._has_search:
                raise InvalidAction("there is no search bar on this page: click[back to search] first.")
            if not arg:
                raise InvalidAction("search needs words: search[<query>].")
            x, y = page.evaluate(_FILL_JS, arg)  # the query typed in, the search button's centre
            with page.expect_navigation(wait_until="domcontentloaded"):
                page.mouse.click(x, y)  # a real click on the search button
        else:
            label = arg.lower()
            if not label or label not in self._clickables:
                listed = ", ".join(self._clickables[:12]) + (", ..." if len(self._clickables) > 12 else "")
                raise InvalidAction(f"nothing to click called {arg!r} here; clickable: {listed or 'nothing'}.")
            x, y = page.evaluate(_LINK_CENTRE_JS, label)
            with page.expect_navigation(wait_until="domcontentloaded"):
                page.mouse.click(x, y)  # a real click on the first link with that text
        if self._read_page() != "done":
            return Transition(self._text_cache)
        state = self._api("GET", f"/api/sessions/{self.session}")
        components = {k: float(v) for k, v in state["components"].items()}
        return Transition(self._text_cache, components, terminated=True, success=bool(state["success"]))

    def admissible_actions(self) -> list[str]:
        clicks = [f"click[{c}]" for c in self._clickables]
        return [SEARCH_TEMPLATE, *clicks] if self._has_search else clicks

    def sample_action(self, rng: random.Random) -> str:
        actions = self.admissible_actions()
        if not actions:
            return "click[buy now]"
        action = rng.choice(actions)
        return self._text.sample_action(rng) if action == SEARCH_TEMPLATE else action

    def screenshot(self) -> np.ndarray:
        """The page as the browser shows it: uint8 (800, 1000, 3); black before the first reset."""
        if self._page is None:
            width, height = self.VIEWPORT
            return np.zeros((height, width, 3), np.uint8)
        return self._tab.screenshot()

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            return self.screenshot()
        return super().render()

    def close(self) -> None:
        super().close()
        self._tab.close()  # never raises (a dead browser or driver is already closed)
        self._page = None
