"""Oracle for envgym/GUIGrounding-*: reads the instruction, finds the element it names in the
element list, and answers the centre of that element's box.

It reads only what any agent reads: the instruction (``info["task"]["goal"]``) and the page's
element list (``info["elements"]``, the list the text view prints: id, role, name, box); the
answer form (``click`` or ``box``) from the observation's "Answer with" line.

* a button, link, tab, text field, drop-down, check box or radio button named by its text or
  label: the first element of that role and name (an instruction names only unique ones);
* "the n-th 'X' button from the top": the n-th button named X in reading order;
* "the 'X' button in the row for 'R'": among the buttons named X, the one whose vertical centre is
  nearest the centre of the text R.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "find_target"]

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (role, re.compile(pattern))
    for role, pattern in (
        ("ordinal", r"^Click the (\w+) '(.+)' button from the top\.$"),
        ("row", r"^Click the '(.+)' button in the row for '(.+)'\.$"),
        ("button", r"^(?:Click|Press) the '(.+)' button\.$"),
        ("link", r"^Click the link '(.+)'\.$"),
        ("link", r"^Follow the '(.+)' link\.$"),
        ("textbox", r"^Click the text field labelled '(.+)'\.$"),
        ("textbox", r"^Click into the '(.+)' field\.$"),
        ("combobox", r"^(?:Open|Click) the '(.+)' drop-down(?: list)?\.$"),
        ("checkbox", r"^Tick the check box '(.+)'\.$"),
        ("checkbox", r"^Click the check box for '(.+)'\.$"),
        ("radio", r"^Choose the '(.+)' option\.$"),
        ("radio", r"^Select the radio button '(.+)'\.$"),
        ("tab", r"^(?:Click|Switch to) the '(.+)' tab\.$"),
    )
)


def _centre_y(element: Mapping[str, Any]) -> float:
    box = element["box"]
    return (box[1] + box[3]) / 2


def find_target(instruction: str, elements: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The element of ``elements`` (in reading order) that ``instruction`` names, or ``None``."""
    for role, pattern in _PATTERNS:
        match = pattern.match(instruction.strip())
        if match is None:
            continue
        if role == "ordinal":
            word, name = match.groups()
            same = [e for e in elements if e["role"] == "button" and e["name"] == name]
            rank = _ORDINALS.index(word) if word in _ORDINALS else -1
            return same[rank] if 0 <= rank < len(same) else None
        if role == "row":
            name, row = match.groups()
            labels = [e for e in elements if e["role"] == "text" and e["name"] == row]
            same = [e for e in elements if e["role"] == "button" and e["name"] == name]
            if not labels or not same:
                return None
            y = _centre_y(labels[0])
            return min(same, key=lambda e: abs(_centre_y(e) - y))
        (name,) = match.groups()
        found = [e for e in elements if e["role"] == role and e["name"] == name]
        return found[0] if found else None
    return None


class Solver(Policy):
    """Grounding oracle (see the module docstring)."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        text = observation.get("instruction", "") if isinstance(observation, Mapping) else str(observation)
        instruction = str((info.get("task") or {}).get("goal", ""))
        target = find_target(instruction, info.get("elements") or [])
        if target is None:
            return "click(0, 0)"
        x1, y1, x2, y2 = target["box"]
        if "Answer with box(" in text:
            return f"box({x1}, {y1}, {x2}, {y2})"
        return f"click({(x1 + x2) // 2}, {(y1 + y2) // 2})"
