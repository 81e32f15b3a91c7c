"""Rendering for the grounding forms: an HTML page in Chromium -> a screenshot and its elements' boxes.

The page lives in an :class:`envgym.browser.Tab` (the worker's shared Chromium, one context per
env, device scale 1, reduced motion). :meth:`BrowserPage.render_html` loads a page, reads the box
of every ``[data-gid]`` element (``getBoundingClientRect``, in CSS pixels, which are screenshot
pixels at scale 1) and takes the screenshot as an ``H x W x 3`` uint8 array.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from envgym.browser import CHROMIUM, Tab, require_browser

__all__ = ["CHROMIUM", "BrowserPage", "check_browser"]

_BOXES_JS = """() => Array.from(document.querySelectorAll('[data-gid]')).map(e => {
    const r = e.getBoundingClientRect();
    return [e.dataset.gid, r.left, r.top, r.right, r.bottom];
})"""


def check_browser(owner: str) -> None:
    """Fail at ``make`` (before any episode) when Playwright or Chromium is missing."""
    require_browser("gui", owner)


class BrowserPage:
    """One tab of the worker's shared Chromium with a fixed viewport (opened at first use)."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self._tab = Tab(viewport=(width, height), device_scale_factor=1.0)

    def _page(self) -> Any:
        if not self._tab.is_open:
            self._tab.open()
        return self._tab.page

    def render_html(self, page_html: str) -> tuple[np.ndarray, dict[str, tuple[int, int, int, int]]]:
        """Load ``page_html``; return its screenshot and the box ``(x1, y1, x2, y2)`` of every
        ``[data-gid]`` element (whole pixels: left and top rounded down, right and bottom up)."""
        page = self._page()
        page.set_content(page_html, wait_until="load")
        boxes = {
            str(gid): (math.floor(left), math.floor(top), math.ceil(right), math.ceil(bottom))
            for gid, left, top, right, bottom in page.evaluate(_BOXES_JS)
        }
        return self._tab.screenshot(), boxes

    def close(self) -> None:
        self._tab.close()
