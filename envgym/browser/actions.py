"""The text action grammar of browser environments: strict parsing, then execution on a page.

Actions are one call each, arguments as Python literals (ids are integers from the
accessibility tree, text in double or single quotes)::

    click(12)              click the element's centre (scrolled into view first)
    hover(12)              move the mouse over it
    fill(12, "text")       replace the text of a text field (focus, select all, type)
    select(12, "option")   choose the option of a <select> by its text (or value)
    press("Enter")         press a key on the focused element ("Tab", "ArrowDown", "Control+a", "x")
    scroll(0, 200)         scroll the element under the mouse (or the page) by dx, dy pixels
    drag(12, 15)           press on one element, move to the other, release
    click_xy(40, 85)       click at a point, in screenshot pixels
    drag_xy(10, 20, 90, 20)
    noop()                 do nothing; time passes

:func:`parse_action` raises :class:`ActionSyntaxError` (its message says what was expected) for
anything else; it never evaluates code (only literals are read, with :mod:`ast`).
:class:`PageActor` executes a parsed :class:`Action` on a Playwright page whose documents carry
:data:`envgym.browser.axtree.AXTREE_JS`; what cannot be done (no such id, a hidden element, a
select that has no such option) raises :class:`ActionError` before anything happens on the page.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envgym.errors import suggest

__all__ = [
    "ACTION_HELP",
    "SIGNATURES",
    "Action",
    "ActionError",
    "ActionSyntaxError",
    "PageActor",
    "choose_option_then",
    "parse_action",
]

#: Each action's argument kinds: "id" (int >= 1), "str", "num" (int or float).
SIGNATURES: dict[str, tuple[str, ...]] = {
    "click": ("id",),
    "hover": ("id",),
    "fill": ("id", "str"),
    "select": ("id", "str"),
    "press": ("str",),
    "scroll": ("num", "num"),
    "drag": ("id", "id"),
    "click_xy": ("num", "num"),
    "drag_xy": ("num", "num", "num", "num"),
    "noop": (),
}

#: One line per action, for prompts and error messages.
ACTION_HELP = (
    'click(id), hover(id), fill(id, "text"), select(id, "option"), press("Enter"), scroll(dx, dy), '
    "drag(id, id), click_xy(x, y), drag_xy(x1, y1, x2, y2), noop()"
)

_MODIFIERS = frozenset({"Control", "Shift", "Alt", "Meta", "ControlOrMeta"})
_NAMED_KEYS = frozenset(
    {
        "Enter", "Tab", "Backspace", "Delete", "Escape", "Space", "ArrowUp", "ArrowDown", "ArrowLeft",
        "ArrowRight", "Home", "End", "PageUp", "PageDown", "Insert",
        *(f"F{i}" for i in range(1, 13)),
    }
)  # fmt: skip
_MAX_TEXT = 1000


class ActionSyntaxError(ValueError):
    """The action text is not one call of the grammar (the message says what was expected)."""


class ActionError(ValueError):
    """A well-formed action that cannot be done on the current page (no such element, ...)."""


@dataclass(frozen=True, slots=True)
class Action:
    """A parsed action: its name and its arguments (ints, floats, strs) in grammar order."""

    name: str
    args: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(repr(a) if isinstance(a, str) else str(a) for a in self.args)})"


def _literal(node: ast.expr) -> Any:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float, str))
        and not isinstance(node.value, bool)
    ):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, (int, float))
        and not isinstance(node.operand.value, bool)
    ):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    raise ActionSyntaxError("arguments must be numbers or quoted strings")


def check_key(key: str) -> str:
    """``key`` as Playwright names it ("Enter", "Control+a", "x"), or :class:`ActionSyntaxError`."""
    parts = key.split("+") if key != "+" else ["+"]
    if not key or any(not p for p in parts):
        raise ActionSyntaxError(f'press needs a key such as "Enter", "Tab", "ArrowDown" or "Control+a", got {key!r}')
    *mods, last = parts
    bad = [m for m in mods if m not in _MODIFIERS]
    if bad:
        raise ActionSyntaxError(f"unknown modifier {bad[0]!r} in {key!r}: use {', '.join(sorted(_MODIFIERS))}")
    if last == "Space":
        last = " "
    if not (last in _NAMED_KEYS or last == " " or (len(last) == 1 and last.isprintable())):
        raise ActionSyntaxError(
            f"unknown key {last!r}: use one character or one of {', '.join(sorted(_NAMED_KEYS - {'Space'}))}"
        )
    return "+".join([*mods, last])


def parse_action(text: str) -> Action:
    """Parse one action of the grammar (see the module docstring)."""
    if not isinstance(text, str) or not text.strip():
        raise ActionSyntaxError(f'expected one action such as click(12) or fill(7, "text"); actions: {ACTION_HELP}')
    text = text.strip()
    if len(text) > _MAX_TEXT + 100:
        raise ActionSyntaxError(f"the action is {len(text)} characters long; at most {_MAX_TEXT} characters of text")
    match = re.match(r"([A-Za-z_]\w*)\s*\(", text)
    if not match:
        raise ActionSyntaxError(f"expected a call such as click(12); actions: {ACTION_HELP}")
    name = match.group(1)
    if name not in SIGNATURES:
        raise ActionSyntaxError(f"unknown action {name!r}.{suggest(name, SIGNATURES)} Actions: {ACTION_HELP}")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ActionSyntaxError(f"{text!r} is not a well-formed call; write e.g. {_example(name)}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.keywords:
        raise ActionSyntaxError(f"expected one call with positional arguments, e.g. {_example(name)}")
    kinds = SIGNATURES[name]
    if len(call.args) != len(kinds):
        raise ActionSyntaxError(
            f"{name} takes {len(kinds)} argument(s), got {len(call.args)}: write e.g. {_example(name)}"
        )
    args: list[Any] = []
    for kind, node in zip(kinds, call.args):
        value = _literal(node)
        if kind == "id":
            if isinstance(value, str) and value.strip().isdigit():
                value = int(value.strip())  # click("12") as BrowserGym writes ids
            if not isinstance(value, int) or value < 1:
                raise ActionSyntaxError(f"{name} needs element ids (the [number] of a line), got {value!r}")
        elif kind == "str":
            if not isinstance(value, str):
                raise ActionSyntaxError(f"{name} needs quoted text, got {value!r}: write e.g. {_example(name)}")
            if len(value) > _MAX_TEXT:
                raise ActionSyntaxError(f"{name}: text longer than {_MAX_TEXT} characters")
            if name == "press":
                value = check_key(value)
        else:
            if not isinstance(value, (int, float)) or not math.isfinite(value) or abs(value) > 1e6:
                raise ActionSyntaxError(f"{name} needs finite numbers, got {value!r}")
        args.append(value)
    return Action(name, tuple(args))


def _example(name: str) -> str:
    return {
        "click": "click(12)",
        "hover": "hover(12)",
        "fill": 'fill(7, "hello")',
        "select": 'select(4, "Blue")',
        "press": 'press("Enter")',
        "scroll": "scroll(0, 100)",
        "drag": "drag(3, 9)",
        "click_xy": "click_xy(40, 85)",
        "drag_xy": "drag_xy(10, 20, 90, 20)",
        "noop": "noop()",
    }[name]


# Pure JavaScript helpers run in the page (one round trip each).
_SELECT_JS = """([id, want]) => {
  const el = window.__envgymAX.element(id);
  if (!el) return {error: 'missing'};
  const sel = el.tagName === 'SELECT' ? el : (el.tagName === 'OPTION' ? el.closest('select') : null);
  if (!sel) return {error: 'notselect'};
  const options = Array.from(sel.options);
  const norm = (s) => (s || '').replace(/\\s+/g, ' ').trim();
  let hit = options.find((o) => norm(o.textContent) === norm(want)) || options.find((o) => o.value === want)
         || options.find((o) => norm(o.textContent).toLowerCase() === norm(want).toLowerCase());
  if (!hit) return {error: 'nooption', options: options.map((o) => norm(o.textContent))};
  if (sel.disabled || hit.disabled) return {error: 'disabled'};
  sel.focus();
  if (sel.multiple) { hit.selected = true; } else { sel.value = hit.value; hit.selected = true; }
  sel.dispatchEvent(new Event('input', {bubbles: true}));
  sel.dispatchEvent(new Event('change', {bubbles: true}));
  return {ok: true};
}"""


def choose_option_then(then: str) -> str:
    """JavaScript ``async (o) => ...`` that does what :meth:`PageActor.run` does for ``click(o.option)``
    when the element has no box of its own (an option of a closed ``<select>``: chosen by its text),
    then returns ``{value: await then(o)}``, all in one call. It returns ``{refused: ...}`` (see
    :meth:`PageActor.refusal`) when the click cannot be done, nothing changed but the scroll that
    :meth:`PageActor.run` does too, and ``{click: [x, y]}`` when the element is not such an option
    (the caller clicks there, as ``run`` would)."""
    return f"""async (o) => {{
  const box = window.__envgymAX.locate(o.option, '');
  if (box === null) return {{refused: 'missing'}};
  if (!box.visible) return {{refused: 'hidden'}};
  if (box.tag !== 'OPTION') return {{click: [box.x + box.w / 2, box.y + box.h / 2]}};
  const chosen = ({_SELECT_JS})([o.option, window.__envgymAX.element(o.option).textContent]);
  if (chosen.error) return {{refused: chosen.error}};
  return {{value: await ({then})(o)}};
}}"""


_FOCUS_SELECT_JS = """(id) => {
  const el = window.__envgymAX.element(id);
  if (!el) return false;
  el.focus();
  if (typeof el.select === 'function') { try { el.select(); } catch (e) {} }
  else if (el.isContentEditable) { const r = document.createRange(); r.selectNodeContents(el);
    const s = window.getSelection(); s.removeAllRanges(); s.addRange(r); }
  return document.activeElement === el;
}"""

# Inputs a keyboard cannot type into as text (Chromium's date/time pickers, sliders, colours): the
# value is set as Playwright's fill() does, then input and change fire.
_VALUE_INPUTS = frozenset({"date", "time", "datetime-local", "month", "week", "range", "color"})
_SET_VALUE_JS = """([id, value]) => {
  const el = window.__envgymAX.element(id);
  const old = el.value;
  el.value = value;
  if (el.value !== value && value !== '') { el.value = old; return false; }
  el.focus();
  el.dispatchEvent(new Event('input', {bubbles: true}));
  el.dispatchEvent(new Event('change', {bubbles: true}));
  return true;
}"""

# fill()'s page part in one call: locate the field (scrolled into view, as _centre does), then, when it
# can be filled, set its value (_SET_VALUE_JS: the _VALUE_INPUTS) or focus it and select its text.
_FILL_FOCUS_JS = f"""([id, value]) => {{
  const box = window.__envgymAX.locate(id, 'editable');
  if (box === null || !box.visible || !box.editable || box.disabled) return {{box: box}};
  if (box.tag === 'INPUT' && {json.dumps(sorted(_VALUE_INPUTS))}.includes(box.type)) {{
    return {{box: box, set: ({_SET_VALUE_JS})([id, value])}};
  }}
  return {{box: box, focused: ({_FOCUS_SELECT_JS})(id)}};
}}"""

_SCROLL_JS = """([x, y, dx, dy]) => {
  let el = document.elementFromPoint(x, y);
  while (el && el !== document.body && el !== document.documentElement) {
    const s = getComputedStyle(el);
    const canY = dy && el.scrollHeight > el.clientHeight && /(auto|scroll)/.test(s.overflowY);
    const canX = dx && el.scrollWidth > el.clientWidth && /(auto|scroll)/.test(s.overflowX);
    if (canY || canX) { el.scrollBy(dx, dy); return true; }
    el = el.parentElement;
  }
  window.scrollBy(dx, dy);
  return true;
}"""


class PageActor:
    """Executes parsed actions on a Playwright page (documents carry ``AXTREE_JS``).

    Args:
        page: the Playwright page.
        width, height: the area coordinates are valid in (CSS pixels); ``click_xy`` outside is an error.
        scale: screenshot pixels per CSS pixel (coordinates are given in screenshot pixels).
        evaluate: ``evaluate(function, arg)`` for the page scripts (default ``page.evaluate``; e.g.
            :meth:`envgym.browser.Tab.evaluate`, the same in one DevTools round trip).
        type_text: ``type_text(text)`` for ``fill`` (default ``page.keyboard.type``; e.g.
            :meth:`envgym.browser.Tab.type_text`, the same key events sent at once).
    """

    def __init__(
        self,
        page: Any,
        width: int,
        height: int,
        scale: float = 1.0,
        evaluate: Callable[[str, Any], Any] | None = None,
        type_text: Callable[[str], Any] | None = None,
    ) -> None:
        self.page = page
        #: types text into the focused element: ``page.keyboard.type``, or the same key events sent
        #: at once (:meth:`envgym.browser.Tab.type_text`)
        self.type_text = type_text if type_text is not None else page.keyboard.type
        #: runs a page script (source of a function of one JSON argument) and returns its JSON result:
        #: ``page.evaluate``, or a cheaper equivalent such as :meth:`envgym.browser.Tab.evaluate`
        self.evaluate = evaluate if evaluate is not None else page.evaluate
        self.width = width
        self.height = height
        self.scale = float(scale)
        self.mouse = (width / 2, height / 2)  # where scroll() applies
        self.pointer: tuple[float, float] | None = None  # the real pointer, when known
        #: id -> (x, y, w, h) from the latest tree snapshot, valid until the page next changes (pages
        #: under the virtual clock change only through actions): clicks skip a round trip.
        self.rects: dict[int, tuple[float, float, float, float]] = {}

    def park(self) -> None:
        """Move the pointer to (0, 0) (a fixed spot between episodes) unless it is there already."""
        if self.pointer != (0.0, 0.0):
            self.page.mouse.move(0, 0)
        self.parked()

    def parked(self) -> None:
        """The pointer is at (0, 0): :meth:`park` moved it, or a caller did."""
        self.pointer = (0.0, 0.0)
        self.mouse = (self.width / 2, self.height / 2)

    def known_centre(self, element_id: int) -> tuple[float, float] | None:
        """The element's centre from the latest tree snapshot when it is shown whole on the screen."""
        known = self.rects.get(element_id)
        if known is not None:
            x, y, w, h = known
            if w > 0 and h > 0 and x >= 0 and y >= 0 and x + w <= self.width and y + h <= self.height:
                return x + w / 2, y + h / 2
        return None

    def refusal(self, element_id: int, refused: str) -> ActionError:
        """The error :meth:`run` raises for ``click(element_id)`` refused by :func:`choose_option_then`."""
        if refused == "missing":
            return ActionError(f"there is no element [{element_id}] on the page: use an id from the tree.")
        if refused == "hidden":
            return ActionError(f"element [{element_id}] is not visible.")
        return ActionError(f"option [{element_id}] cannot be chosen ({refused}).")

    def chose(self) -> None:
        """A caller ran :func:`choose_option_then`'s choice: the known boxes are stale."""
        self.rects = {}

    def _centre(self, element_id: int, need: str = "") -> tuple[float, float, dict[str, Any]]:
        centre = self.known_centre(element_id) if not need else None
        if centre is not None:
            return centre[0], centre[1], {"tag": "", "visible": True}
        box = self.evaluate("([id, need]) => window.__envgymAX.locate(id, need)", [element_id, need])
        box = self._checked_box(element_id, box, need)
        return box["x"] + box["w"] / 2, box["y"] + box["h"] / 2, box

    def _checked_box(self, element_id: int, box: dict[str, Any] | None, need: str) -> dict[str, Any]:
        """``box`` (what ``__envgymAX.locate`` returned), or the :class:`ActionError` it means."""
        if box is None:
            raise self.refusal(element_id, "missing")
        if not box["visible"]:
            raise self.refusal(element_id, "hidden")
        if need == "editable" and not box["editable"]:
            raise ActionError(f"element [{element_id}] is not a text field: fill() types into textboxes.")
        if need == "editable" and box["disabled"]:
            raise ActionError(f"element [{element_id}] is disabled.")
        return box

    def _point(self, x: float, y: float) -> tuple[float, float]:
        cx, cy = x / self.scale, y / self.scale
        if not (0 <= cx < self.width and 0 <= cy < self.height):
            raise ActionError(
                f"({x}, {y}) is outside the screen: x in [0, {self.width * self.scale:g}), "
                f"y in [0, {self.height * self.scale:g})."
            )
        return cx, cy

    def plain_click(self, action: Action) -> tuple[float, float] | None:
        """The point ``action`` would click when it is a mouse click a caller may send itself (then
        it reports it with :meth:`clicked`), else ``None`` (:meth:`run` it). Raises
        :class:`ActionError`, the page untouched, as :meth:`run` does."""
        if action.name != "click":
            return None
        x, y, box = self._centre(action.args[0])
        return None if box["tag"] == "OPTION" else (x, y)

    def clicked(self, x: float, y: float) -> None:
        """A click sent by the caller at (x, y) (see :meth:`plain_click`) happened."""
        self.mouse = self.pointer = (x, y)
        self.rects = {}

    def run(self, action: Action) -> None:
        """Do ``action`` on the page (raises :class:`ActionError`, the page untouched, when it cannot)."""
        try:
            self._run(action)
        except ActionError:
            raise  # refused before anything happened: the page and the known boxes are unchanged
        except BaseException:
            self.rects = {}
            raise
        if action.name != "noop":
            self.rects = {}

    def _run(self, action: Action) -> None:
        page, name, args = self.page, action.name, action.args
        mouse = page.mouse
        if name == "click":
            x, y, box = self._centre(args[0])
            if box["tag"] == "OPTION":  # an option of a closed <select>: choose it
                result = self.evaluate(
                    _SELECT_JS, [args[0], self.evaluate("(id) => window.__envgymAX.element(id).textContent", args[0])]
                )
                if result.get("error"):
                    raise self.refusal(args[0], result["error"])
                return
            mouse.click(x, y)
            self.mouse = self.pointer = (x, y)
        elif name == "hover":
            x, y, _ = self._centre(args[0])
            mouse.move(x, y)
            self.mouse = self.pointer = (x, y)
        elif name == "fill":
            # one call: locate (scroll into view), then set the value or focus and select the text
            outcome = self.evaluate(_FILL_FOCUS_JS, [args[0], args[1]])
            box = self._checked_box(args[0], outcome["box"], "editable")
            if "set" in outcome:
                if not outcome["set"]:
                    raise ActionError(f"{args[1]!r} is not a valid value for the {box['type']} field [{args[0]}].")
                return
            if not outcome["focused"]:
                raise ActionError(f"element [{args[0]}] cannot take the focus.")
            if args[1]:
                self.type_text(args[1]) if len(args[1]) <= 64 else page.keyboard.insert_text(args[1])
            else:
                page.keyboard.press("Delete")
        elif name == "select":
            result = self.evaluate(_SELECT_JS, [args[0], args[1]])
            error = result.get("error")
            if error == "missing":
                raise ActionError(f"there is no element [{args[0]}] on the page: use an id from the tree.")
            if error == "notselect":
                raise ActionError(f"element [{args[0]}] is not a list (combobox/listbox): click it instead.")
            if error == "nooption":
                listed = ", ".join(repr(o) for o in result["options"][:20])
                raise ActionError(f"list [{args[0]}] has no option {args[1]!r}; options: {listed}.")
            if error == "disabled":
                raise ActionError(f"list [{args[0]}] or that option is disabled.")
        elif name == "press":
            page.keyboard.press(args[0])
        elif name == "scroll":
            self.evaluate(_SCROLL_JS, [self.mouse[0], self.mouse[1], args[0], args[1]])
        elif name == "drag":
            x1, y1, _ = self._centre(args[0])
            x2, y2, _ = self._centre(args[1])
            self._drag(x1, y1, x2, y2)
        elif name == "click_xy":
            x, y = self._point(args[0], args[1])
            mouse.click(x, y)
            self.mouse = self.pointer = (x, y)
        elif name == "drag_xy":
            x1, y1 = self._point(args[0], args[1])
            x2, y2 = self._point(args[2], args[3])
            self._drag(x1, y1, x2, y2)

    def _drag(self, x1: float, y1: float, x2: float, y2: float) -> None:
        mouse = self.page.mouse
        mouse.move(x1, y1)
        mouse.down()
        mouse.move(x2, y2, steps=5)
        mouse.up()
        self.mouse = self.pointer = (x2, y2)
