"""MiniWoB++ pages as grounding scenes: a task page at its seeded start, its screenshot and boxes.

:class:`MiniWoBScenes` opens MiniWoB task pages through the registered ids
(``envgym.make("envgym/MiniWoB-<task>-v0", obs="dict", boxes=True, scale=...)``, the gui family's
browser env, one instance per task page, reused across episodes) and returns, for a task and a
seed, the screenshot of the page as an episode starts and the elements of its accessibility tree
with their boxes. The grounding env then names one element of those pages.

Task pages are split: every fourth page of :data:`PAGES` is a test page, the others train pages,
so a test scene never comes from a page seen in training.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from envgym.registration import make

__all__ = ["PAGES", "MiniWoBScenes", "pages"]

#: MiniWoB task pages whose start screen shows named controls (buttons, links, fields, boxes, tabs).
# fmt: off
PAGES = (
    "click-button", "click-checkboxes", "click-link", "click-option", "click-button-sequence", "click-dialog",
    "click-tab", "enter-text", "login-user", "click-dialog-2", "focus-text", "enter-password",
    "click-checkboxes-soft", "click-collapsible", "email-inbox", "click-tab-2", "social-media", "choose-list",
    "multi-layouts", "use-autocomplete", "click-checkboxes-transfer", "multi-orderings", "search-engine", "enter-date",
)
# fmt: on
_LINE = re.compile(r'^\s*\[(\d+)\] (\S+?)(?: ("(?:[^"\\]|\\.)*"))?(?:,|$)')


def pages(split: str) -> tuple[str, ...]:
    """The task pages of ``split``: every fourth page (index 3, 7, ...) is a test page."""
    keep = (lambda i: i % 4 == 3) if split == "test" else (lambda i: i % 4 != 3)
    return tuple(p for i, p in enumerate(PAGES) if keep(i))


def parse_axtree(text: str) -> list[tuple[int, str, str]]:
    """``(id, role, name)`` of every line of the gui family's accessibility-tree text that has an id."""
    nodes = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        name = json.loads(match[3]) if match[3] else ""
        nodes.append((int(match[1]), match[2], str(name)))
    return nodes


class MiniWoBScenes:
    """MiniWoB task pages at their seeded start: screenshot and boxed elements (see the module)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self._envs: dict[str, Any] = {}

    def scene(self, task: str, seed: int) -> tuple[np.ndarray, list[tuple[str, str, tuple[int, int, int, int]]]]:
        """The start of ``task``'s episode ``seed``: its screenshot and ``(role, name, box)`` of
        every element of its tree that has a box (whole screenshot pixels, ``x1, y1, x2, y2``)."""
        env = self._envs.get(task)
        if env is None:
            env = self._envs[task] = make(f"envgym/MiniWoB-{task}-v0", obs="dict", boxes=True, scale=self.scale)
        obs, info = env.reset(seed=seed)
        boxes = info.get("boxes") or {}
        elements = []
        for node_id, role, name in parse_axtree(str(obs["axtree"])):
            box = boxes.get(node_id)
            if box is None:
                continue
            x, y, w, h = (float(v) for v in box)
            elements.append((role, name, (math.floor(x), math.floor(y), math.ceil(x + w), math.ceil(y + h))))
        return np.asarray(obs["screenshot"], dtype=np.uint8), elements

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
