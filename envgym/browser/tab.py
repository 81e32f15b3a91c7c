"""A browser tab an environment owns: a context and a page on the worker's shared Chromium."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from envgym._imports import optional
from envgym.browser.pool import acquire_browser, give_context, release_browser, take_context

__all__ = ["PageScriptError", "Tab", "key_events", "png_to_array"]

logger = logging.getLogger(__name__)


def _us_keys() -> dict[str, tuple[str, int]]:
    """char -> (``code``, Windows key code) of the printable ASCII characters on a US keyboard:
    the keys Playwright's ``keyboard.type`` presses for them (no modifier: it sends an upper-case
    letter or a shifted symbol as its own key, with its text)."""
    keys: dict[str, tuple[str, int]] = {" ": ("Space", 32)}
    for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        keys[letter] = keys[letter.lower()] = (f"Key{letter}", ord(letter))
    for digit, shifted in zip("1234567890", "!@#$%^&*()"):
        keys[digit] = keys[shifted] = (f"Digit{digit}", ord(digit))
    for plain, shifted, code, key_code in [
        ("`", "~", "Backquote", 192), ("-", "_", "Minus", 189), ("=", "+", "Equal", 187),
        ("[", "{", "BracketLeft", 219), ("]", "}", "BracketRight", 221), ("\\", "|", "Backslash", 220),
        (";", ":", "Semicolon", 186), ("'", '"', "Quote", 222), (",", "<", "Comma", 188),
        (".", ">", "Period", 190), ("/", "?", "Slash", 191),
    ]:  # fmt: skip
        keys[plain] = keys[shifted] = (code, key_code)
    return keys


_US_KEYS = _us_keys()


def key_events(text: str) -> list[dict[str, Any]] | None:
    """The DevTools ``Input.dispatchKeyEvent`` parameters (a key down, then up, per character) with
    which Playwright's ``keyboard.type`` types ``text``, or ``None`` when a character is not printable
    ASCII (Playwright inserts those as text, or presses a named key: Enter, Tab)."""
    events: list[dict[str, Any]] = []
    for char in text:
        key = _US_KEYS.get(char)
        if key is None:
            return None
        code, key_code = key
        common = {"modifiers": 0, "windowsVirtualKeyCode": key_code, "code": code, "key": char, "location": 0}
        typed = {"commands": [], "text": char, "unmodifiedText": char, "autoRepeat": False}
        events.append({"type": "keyDown", **common, **typed, "isKeypad": False})
        events.append({"type": "keyUp", **common, "isKeypad": False})
    return events


class PageScriptError(RuntimeError):
    """A script run by :meth:`Tab.evaluate` threw in the page (the message is the page's error)."""


def png_to_array(png: bytes) -> np.ndarray:
    """Decode a PNG screenshot into an ``uint8`` array of shape (height, width, 3)."""
    image_module = optional("PIL.Image", extra="gui", purpose="browser screenshots")
    with image_module.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.uint8)


class Tab:
    """One context + page on this thread's Chromium (see :mod:`envgym.browser.pool`).

    ``open()`` takes a hold on the browser (launching it on first use, or again if it died) and
    makes a fresh context (no cookies, no cache, no storage); ``close()`` closes the context and
    drops the hold (the last hold stops the browser). Both may be called any number of times.

    Args:
        viewport: (width, height) of the page in CSS pixels.
        headless: run Chromium without a window.
        timeout_ms: default Playwright timeout of the context (navigations, waits).
        init_scripts: JavaScript sources run in every document before its own scripts.
        device_scale_factor: screenshot pixels per CSS pixel.
        reuse: on ``close()`` give the context back to the worker's idle pool and on ``open()``
            take one from it when one of the same configuration is idle (its page keeps the
            document it last showed: the user decides whether to reload). Contexts hold no
            cookies or storage between users only when ``reuse`` is false.
        linger: seconds the browser outlives its last user when this tab releases it last
            (``None``: :data:`envgym.browser.pool.LINGER_S`; 0: it stops at once).
    """

    def __init__(
        self,
        *,
        viewport: tuple[int, int] = (1000, 800),
        headless: bool = True,
        timeout_ms: int = 15_000,
        init_scripts: Sequence[str] = (),
        device_scale_factor: float = 1.0,
        reuse: bool = False,
        linger: float | None = None,
    ) -> None:
        self.viewport = (int(viewport[0]), int(viewport[1]))
        self.headless = bool(headless)
        self.timeout_ms = int(timeout_ms)
        self.init_scripts = tuple(init_scripts)
        self.device_scale_factor = float(device_scale_factor)
        self.reuse = bool(reuse)
        self.linger = linger
        self.reused = False  # the last open() took an idle context
        self.browser: Any = None
        self.context: Any = None
        self.page: Any = None
        self._cdp: Any = None  # a DevTools session on the page, made by the first evaluate()

    @property
    def is_open(self) -> bool:
        return self.page is not None and self.browser is not None and self.browser.is_connected()

    def open(self) -> Any:
        """A fresh context and page (the browser is launched or replaced if needed); returns the page."""
        self._close_context()
        if self.browser is not None and not self.browser.is_connected():
            self.browser = None  # it died: drop our hold on the dead one, take a fresh one
            release_browser(self.headless, 0)
        if self.browser is None:
            self.browser = acquire_browser(self.headless)
        self.reused = False
        if self.reuse:
            idle = take_context(self.headless, self._config())
            if idle is not None:
                self.context, self.page = idle
                self.reused = True
                return self.page
        width, height = self.viewport
        self.context = self.browser.new_context(
            viewport={"width": width, "height": height},
            device_scale_factor=self.device_scale_factor,
            locale="en-US",
            timezone_id="UTC",
            reduced_motion="reduce",
            service_workers="block",
        )
        self.context.set_default_timeout(self.timeout_ms)
        for script in self.init_scripts:
            self.context.add_init_script(script)
        self.page = self.context.new_page()
        return self.page

    def evaluate(self, function: str, arg: Any = None) -> Any:
        """Call the JavaScript ``function`` (its source: a function of one argument, may be async) with
        ``arg`` (JSON) in the page's main world and return its JSON result.

        The same as Playwright's ``page.evaluate`` for JSON in and out (it runs with a user gesture,
        awaits a returned promise), in one DevTools round trip: Playwright's own evaluate adds its
        serialisation layer and costs two to three times as much, which is most of a fast step.
        Raises :class:`PageScriptError` when the script throws.
        """
        if self._cdp is None:
            self._cdp = self.context.new_cdp_session(self.page)
        return self._result(self._cdp.send("Runtime.evaluate", self._evaluation(function, arg)))

    def click_then_evaluate(self, x: float, y: float, function: str, arg: Any = None) -> Any:
        """``page.mouse.click(x, y)`` then :meth:`evaluate`, both sent at once (one round trip less).

        The two reach the page on separate channels, so the script must itself wait for the click
        (``window.__envgymClock.afterUps``, :mod:`envgym.browser.clock`). Without the private
        Playwright parts this needs (its sync API over its async one), the two calls run one after
        the other.
        """
        return self._mouse_then_evaluate("click", x, y, function, arg)

    def move_then_evaluate(self, x: float, y: float, function: str, arg: Any = None) -> Any:
        """``page.mouse.move(x, y)`` then :meth:`evaluate`, both sent at once; the script waits for
        the move itself (``window.__envgymClock.afterPointerAt``). As :meth:`click_then_evaluate`."""
        return self._mouse_then_evaluate("move", x, y, function, arg)

    def _mouse_then_evaluate(self, kind: str, x: float, y: float, function: str, arg: Any) -> Any:
        if self._cdp is None:
            self._cdp = self.context.new_cdp_session(self.page)
        try:  # private attributes of playwright-python
            run, mouse, session = self.page._sync, self.page.mouse._impl_obj, self._cdp._impl_obj
        except AttributeError:
            getattr(self.page.mouse, kind)(x, y)
            return self.evaluate(function, arg)
        gesture = mouse.click(x, y, None, None, None) if kind == "click" else mouse.move(x, y, None)

        async def both() -> Any:
            _, reply = await asyncio.gather(
                gesture, session.send("Runtime.evaluate", self._evaluation(function, arg), None)
            )
            return reply

        return self._result(run(both()))

    def type_text(self, text: str) -> None:
        """``page.keyboard.type(text)``: the same key events (down and up per character, so keydown,
        keypress, input and keyup reach the page), all sent at once instead of one round trip each.

        They are sent in order on one DevTools session, and Chromium dispatches key events in the
        order it gets them, without merging any (as Playwright's own click sends its move, press and
        release together). Text with a character that is not printable ASCII, or without the
        private Playwright parts this needs, is typed by ``page.keyboard.type`` itself.
        """
        events = key_events(text)
        if self._cdp is None:
            self._cdp = self.context.new_cdp_session(self.page)
        try:  # private attributes of playwright-python
            run, session = self.page._sync, self._cdp._impl_obj
        except AttributeError:
            events = None
        if events is None:
            self.page.keyboard.type(text)
            return
        if not events:
            return

        async def all_keys() -> None:
            await asyncio.gather(*(session.send("Input.dispatchKeyEvent", event, None) for event in events))

        run(all_keys())

    @staticmethod
    def _evaluation(function: str, arg: Any) -> dict[str, Any]:
        return {
            "expression": f"({function})({json.dumps(arg)})",
            "returnByValue": True,
            "awaitPromise": True,
            "userGesture": True,
        }

    @staticmethod
    def _result(reply: dict[str, Any]) -> Any:
        details = reply.get("exceptionDetails")
        if details is not None:
            error = details.get("exception", {}).get("description") or details.get("text") or "an error"
            raise PageScriptError(f"a page script threw: {error}")
        return reply.get("result", {}).get("value")

    def _config(self) -> tuple[Any, ...]:
        return (self.viewport, self.timeout_ms, self.init_scripts, self.device_scale_factor)

    def screenshot(self, clip: tuple[float, float, float, float] | None = None, *, still: bool = False) -> np.ndarray:
        """The page (or the ``clip`` rectangle x, y, width, height in CSS pixels) as uint8 (H, W, 3).

        Playwright's screenshot stops CSS animations and hides the caret for the capture, then
        restores them (several round trips). ``still=True``: the caller vouches that the page runs
        no CSS animation or transition (``document.getAnimations()`` is empty), shows no caret (its
        own style hides it) and is not scrolled, and the viewport is captured in one DevTools call,
        the same pixels.
        """
        if still and clip is None:
            if self._cdp is None:
                self._cdp = self.context.new_cdp_session(self.page)
            width, height = self.viewport
            area = {"x": 0, "y": 0, "width": width, "height": height, "scale": self.device_scale_factor}
            shot = self._cdp.send(
                "Page.captureScreenshot", {"format": "png", "clip": area, "captureBeyondViewport": False}
            )
            return png_to_array(base64.b64decode(shot["data"]))
        kwargs: dict[str, Any] = {"type": "png", "animations": "disabled", "caret": "hide"}
        if clip is not None:
            kwargs["clip"] = {"x": clip[0], "y": clip[1], "width": clip[2], "height": clip[3]}
        return png_to_array(self.page.screenshot(**kwargs))

    def _close_context(self) -> None:
        if self._cdp is not None:
            session, self._cdp = self._cdp, None
            try:  # a context given back for reuse must not gather our sessions
                session.detach()
            except Exception as err:  # noqa: BLE001 - the page or browser may be gone
                logger.debug("ignored while detaching a DevTools session: %r", err)
        if self.context is not None:
            try:
                if (
                    self.reuse
                    and self.page is not None
                    and give_context(self.headless, self._config(), self.context, self.page)
                ):
                    self.context = self.page = None
                    return
                self.context.close()
            except Exception as err:  # noqa: BLE001 - the context's browser may be gone
                logger.debug("ignored while closing a context: %r", err)
        self.context = self.page = None

    def close(self) -> None:
        """Close the context and drop the hold on the browser (idempotent, never raises)."""
        self._close_context()
        if self.browser is not None:
            self.browser = None
            try:
                release_browser(self.headless, self.linger)
            except Exception as err:  # noqa: BLE001 - closing must not raise
                logger.debug("ignored while releasing the browser: %r", err)
