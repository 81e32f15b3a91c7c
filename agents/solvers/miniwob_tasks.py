"""Per-task plans of the MiniWoB solver (``agents/solvers/miniwob.py``).

Each plan is a function ``plan(ctx) -> action`` called once per turn with the current page
(:class:`Ctx`: the parsed accessibility tree, the utterance, MiniWoB's ``fields``, and a ``mem``
dict that lives for the episode). It reads the page again every turn, so it never needs to know
how the previous action went beyond what the page shows (and what it wrote to ``mem``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envgym.agents.solvers.miniwob_tree import Node, Tree

__all__ = ["PLANS", "Ctx", "Unsolvable"]


class Unsolvable(RuntimeError):
    """The page does not hold what the plan needs (a different layout than documented)."""


@dataclass
class Ctx:
    tree: Tree
    utterance: str
    fields: dict[str, Any]
    mem: dict[str, Any] = field(default_factory=dict)
    turn: int = 0
    #: id -> [x, y, w, h] in screenshot pixels (``info["boxes"]``, envs made with ``boxes=True``)
    boxes: dict[str, list[float]] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# action text


def q(text: str) -> str:
    """A string argument of the action grammar (JSON string escapes)."""
    return json.dumps(text, ensure_ascii=False)


def click(node: Node) -> str:
    return f"click({node.id})"


def fill(node: Node, text: str) -> str:
    return f"fill({node.id}, {q(text)})"


def select(node: Node, option: str) -> str:
    return f"select({node.id}, {q(option)})"


def hover(node: Node) -> str:
    return f"hover({node.id})"


def press(key: str) -> str:
    return f"press({q(key)})"


# ---------------------------------------------------------------------------------------------
# page helpers

_TEXTBOX = ("textbox", "searchbox", "textarea", "input", "spinbutton", "password", "date", "time")
_STATIC = ("statictext", "text", "#text", "inlinetextbox", "linebreak")


def quoted(utterance: str) -> list[str]:
    return re.findall(r'"([^"]*)"', utterance)


def buttons(ctx: Ctx) -> list[Node]:
    return [n for n in ctx.tree.nodes if n.id is not None and n.role.lower() == "button"]


def button_named(ctx: Ctx, name: str, *, casefold: bool = False) -> Node:
    for n in buttons(ctx):
        if n.name.strip() == name or (casefold and n.name.strip().lower() == name.lower()):
            return n
    # a clickable element of another role (a div used as a button)
    for n in ctx.tree.named(name):
        if n.role.lower() not in _STATIC:
            return n
    raise Unsolvable(f"no button {name!r}")


def textboxes(ctx: Ctx) -> list[Node]:
    out = []
    for n in ctx.tree.nodes:
        if n.id is None:
            continue
        role = n.role.lower()
        if role in _TEXTBOX or (role == "combobox" and not any(c.role.lower() == "option" for c in n.walk())):
            out.append(n)
    return out


def is_multiline(n: Node) -> bool:
    return n.role.lower() == "textarea" or bool(n.prop("multiline")) or n.prop("tag") == "textarea"


def checkboxes(ctx: Ctx) -> list[Node]:
    return [n for n in ctx.tree.with_role("checkbox") if n.id is not None]


def radios(ctx: Ctx) -> list[Node]:
    return [n for n in ctx.tree.with_role("radio", "radiobutton") if n.id is not None]


def element_named(ctx: Ctx, name: str) -> Node | None:
    """The innermost element with an id and exactly this text (not a bare text run)."""
    found = [n for n in ctx.tree.named(name) if n.role.lower() not in _STATIC]
    if not found:
        found = ctx.tree.named(name)
    return found[0] if found else None


def ordinal(word: str) -> int:
    """'1st' -> 0, '2nd' -> 1, '10th' -> 9."""
    m = re.match(r"(\d+)", word)
    if m is None:
        raise Unsolvable(f"not an ordinal: {word!r}")
    return int(m.group(1)) - 1


def need(m: re.Match[str] | None, what: str) -> re.Match[str]:
    if m is None:
        raise Unsolvable(f"utterance not understood ({what})")
    return m


def submit(ctx: Ctx, *names: str) -> str:
    for name in names or ("Submit",):
        for n in buttons(ctx):
            if n.name.strip().lower() == name.lower():
                return click(n)
    for name in names or ("Submit",):
        el = element_named(ctx, name)
        if el is not None:
            return click(el)
    raise Unsolvable(f"no submit button among {names}")


def fill_then_submit(ctx: Ctx, pairs: list[tuple[Node, str]], *submit_names: str) -> str:
    for box, text in pairs:
        if box.value != text:
            return fill(box, text)
    return submit(ctx, *submit_names)


# ---------------------------------------------------------------------------------------------
# plans

PLANS: dict[str, Callable[[Ctx], str]] = {}


def plan(*names: str) -> Callable[[Callable[[Ctx], str]], Callable[[Ctx], str]]:
    def deco(fn: Callable[[Ctx], str]) -> Callable[[Ctx], str]:
        for name in names:
            PLANS[name] = fn
        return fn

    return deco


@plan("click-button", "unicode-test")
def _click_button(ctx: Ctx) -> str:
    target = need(re.search(r'Click on the "(.*)" button', ctx.utterance), "button").group(1)
    return click(button_named(ctx, target))


def _inside(box: list[float], x: float, y: float) -> bool:
    return box[0] <= x < box[0] + box[2] and box[1] <= y < box[1] + box[3]


def click_uncovered(ctx: Ctx, target: Node, above: list[Node]) -> str:
    """Click ``target`` where none of ``above`` (elements painted over it) covers it: its centre
    when free (``click(id)``), else the free point of its box nearest the centre (``click_xy``).
    Without boxes in ``info`` (an env made without ``boxes=True``) it clicks the centre."""
    box = ctx.boxes.get(str(target.id))
    covers = [ctx.boxes[str(n.id)] for n in above if str(n.id) in ctx.boxes]
    if box is None or not covers:
        return click(target)
    x0, y0, w, h = box
    cx, cy = x0 + w / 2, y0 + h / 2
    if not any(_inside(c, cx, cy) for c in covers):
        return click(target)
    points = [(x0 + 1 + i * (w - 2) / 20, y0 + 1 + j * (h - 2) / 20) for i in range(21) for j in range(21)]
    free = [(x, y) for x, y in points if not any(_inside(c, x, y) for c in covers)]
    if not free:
        raise Unsolvable("the target is covered everywhere")
    x, y = min(free, key=lambda p: (p[0] - cx) ** 2 + (p[1] - cy) ** 2)
    return f"click_xy({round(x)}, {round(y)})"


def _one_two(ctx: Ctx, which: str) -> str:
    one, two = button_named(ctx, "ONE"), button_named(ctx, "TWO")
    # both are absolutely placed, TWO after ONE in the document: TWO paints over ONE
    return click_uncovered(ctx, one, [two]) if which == "ONE" else click(two)


@plan("click-button-sequence")
def _click_button_sequence(ctx: Ctx) -> str:
    done = ctx.mem.setdefault("done", 0)
    ctx.mem["done"] = done + 1
    return _one_two(ctx, "ONE" if done == 0 else "TWO")


@plan("click-test")
def _click_test(ctx: Ctx) -> str:
    return click(button_named(ctx, "Click Me!"))


@plan("click-test-2", "click-test-transfer")
def _click_test_2(ctx: Ctx) -> str:
    target = need(re.search(r"Click button (ONE|TWO)", ctx.utterance), "button").group(1)
    return _one_two(ctx, target)


def _toggle_to(ctx: Ctx, wanted: set[str], boxes: list[Node]) -> str | None:
    for box in boxes:
        want = box.name.strip() in wanted
        if want != box.checked:
            return click(box)
    return None


@plan("click-checkboxes", "click-checkboxes-large", "click-checkboxes-transfer")
def _click_checkboxes(ctx: Ctx) -> str:
    body = need(re.match(r"Select (.*) and click Submit\.?$", ctx.utterance), "checkboxes").group(1)
    wanted = set() if body == "nothing" else {w.strip() for w in body.split(",")}
    return _toggle_to(ctx, wanted, checkboxes(ctx)) or submit(ctx)


@plan("click-option")
def _click_option(ctx: Ctx) -> str:
    target = need(re.match(r"Select (.*) and click Submit", ctx.utterance), "option").group(1).strip()
    for r in radios(ctx):
        if r.name.strip() == target:
            return submit(ctx) if r.checked else click(r)
    raise Unsolvable(f"no radio {target!r}")


@plan("click-collapsible", "click-collapsible-nodelay")
def _click_collapsible(ctx: Ctx) -> str:
    if ctx.mem.get("opened"):
        return submit(ctx)
    for n in ctx.tree.nodes:
        if n.id is not None and re.match(r"Section #\d+$", n.name.strip()) and n.role.lower() not in _STATIC:
            ctx.mem["opened"] = True
            return click(n)
    raise Unsolvable("no section header")


def _section_headers(ctx: Ctx, pattern: str) -> list[Node]:
    out = []
    for n in ctx.tree.nodes:
        header = n.id is not None and re.match(pattern, n.name.strip()) and n.role.lower() not in _STATIC
        if header and not any(a in out for a in n.ancestors()):
            out.append(n)
    return out


def _find_then_open(ctx: Ctx, target: str, header_pattern: str) -> str:
    """Click ``target`` when it shows, else open the next section/tab not opened yet."""
    el = element_named(ctx, target)
    if el is not None:
        return click(el)
    tried = ctx.mem.setdefault("tried", [])
    for h in _section_headers(ctx, header_pattern):
        key = h.name.strip()
        if key not in tried:
            tried.append(key)
            return click(h)
    raise Unsolvable(f"{target!r} not found in any section")


@plan("click-collapsible-2", "click-collapsible-2-nodelay")
def _click_collapsible_2(ctx: Ctx) -> str:
    target = need(re.search(r'click on the link "(.*)"', ctx.utterance), "link").group(1)
    return _find_then_open(ctx, target, r"Section #\d+$")


@plan("click-tab-2", "click-tab-2-easy", "click-tab-2-medium", "click-tab-2-hard")
def _click_tab_2(ctx: Ctx) -> str:
    target = need(re.search(r'click on the link "(.*)"', ctx.utterance), "link").group(1)
    el = element_named(ctx, target)
    if el is not None:
        return click(el)
    tabs = [n for n in ctx.tree.nodes if n.id is not None and n.role.lower() in ("tab", "link")]
    tabs = [n for n in tabs if re.match(r"(Tab #)?\d+$", n.name.strip())]
    tried = ctx.mem.setdefault("tried", [])
    for t in tabs:
        if t.name.strip() not in tried and not t.selected:
            tried.append(t.name.strip())
            return click(t)
    for t in tabs:
        if t.name.strip() not in tried:
            tried.append(t.name.strip())
            return click(t)
    raise Unsolvable(f"{target!r} not found in any tab")


@plan("click-tab")
def _click_tab(ctx: Ctx) -> str:
    target = need(re.search(r"Click on (Tab #\d+)", ctx.utterance), "tab").group(1)
    el = element_named(ctx, target)
    if el is None:
        raise Unsolvable(f"no tab {target!r}")
    return click(el)


@plan("click-dialog")
def _click_dialog(ctx: Ctx) -> str:
    return click(_dialog_close(ctx))


def _dialog_close(ctx: Ctx) -> Node:
    for n in buttons(ctx):
        if n.name.strip().lower() in ("close", "x", "\u00d7"):
            return n
    raise Unsolvable("no dialog close button")


@plan("click-dialog-2")
def _click_dialog_2(ctx: Ctx) -> str:
    target = need(re.search(r'labeled "(.*)"', ctx.utterance), "dialog button").group(1)
    if target == "x":
        return click(_dialog_close(ctx))
    return click(button_named(ctx, target))


@plan("click-link")
def _click_link(ctx: Ctx) -> str:
    target = need(re.search(r'Click on the link "(.*)"', ctx.utterance), "link").group(1)
    el = element_named(ctx, target)
    if el is None:
        raise Unsolvable(f"no link {target!r}")
    return click(el)


@plan("click-widget")
def _click_widget(ctx: Ctx) -> str:
    kind = need(re.search(r'Click on a "(\w+)" widget', ctx.utterance), "widget").group(1)
    for n in ctx.tree.nodes:
        if n.id is None:
            continue
        role = n.role.lower()
        if kind == "button" and role == "button":
            return click(n)
        if kind == "checkbox" and role == "checkbox":
            return click(n)
        if kind == "radio" and role in ("radio", "radiobutton"):
            return click(n)
        if kind == "textarea" and n in textboxes(ctx) and is_multiline(n):
            return click(n)
        if kind == "text" and n in textboxes(ctx) and not is_multiline(n):
            return click(n)
    raise Unsolvable(f"no {kind} widget")


@plan("enter-text", "enter-text-dynamic")
def _enter_text(ctx: Ctx) -> str:
    text = need(re.search(r'Enter "(.*)" into the text field', ctx.utterance), "text").group(1)
    return fill_then_submit(ctx, [(textboxes(ctx)[0], text)])


@plan("enter-text-2")
def _enter_text_2(ctx: Ctx) -> str:
    m = need(re.search(r'Type "(.*)" in all (upper|lower) case', ctx.utterance), "text")
    text = m.group(1).upper() if m.group(2) == "upper" else m.group(1).lower()
    return fill_then_submit(ctx, [(textboxes(ctx)[0], text)])


@plan("enter-password")
def _enter_password(ctx: Ctx) -> str:
    pw = need(re.search(r'Enter the password "(.*)" into both', ctx.utterance), "password").group(1)
    boxes = textboxes(ctx)
    return fill_then_submit(ctx, [(boxes[0], pw), (boxes[1], pw)])


@plan("focus-text")
def _focus_text(ctx: Ctx) -> str:
    return click(textboxes(ctx)[0])


@plan("focus-text-2")
def _focus_text_2(ctx: Ctx) -> str:
    pos = need(re.search(r"Focus into the (\d+\w\w) input", ctx.utterance), "position").group(1)
    return click(textboxes(ctx)[ordinal(pos)])


def _login(ctx: Ctx) -> list[tuple[Node, str]]:
    m = need(re.search(r'username "(.*)" and the password "(.*)" into', ctx.utterance), "login")
    boxes = textboxes(ctx)
    return [(boxes[0], m.group(1)), (boxes[1], m.group(2))]


@plan("login-user")
def _login_user(ctx: Ctx) -> str:
    return fill_then_submit(ctx, _login(ctx), "Login", "Log in")


@plan("login-user-popup")
def _login_user_popup(ctx: Ctx) -> str:
    if any("Exit to home page" in n.name for n in ctx.tree.nodes):
        return click(button_named(ctx, "Cancel"))
    return fill_then_submit(ctx, _login(ctx), "OK", "Login")


@plan("enter-date")
def _enter_date(ctx: Ctx) -> str:
    m = need(re.search(r"Enter (\d\d)/(\d\d)/(\d{4}) as the date", ctx.utterance), "date")
    iso = f"{m.group(3)}-{m.group(1)}-{m.group(2)}"
    return fill_then_submit(ctx, [(textboxes(ctx)[0], iso)])


@plan("enter-time")
def _enter_time(ctx: Ctx) -> str:
    m = need(re.search(r"Enter (\d{1,2}):(\d\d)[\s\u202f]*([AP]M) as the time", ctx.utterance), "time")
    hour = int(m.group(1)) % 12 + (12 if m.group(3) == "PM" else 0)
    return fill_then_submit(ctx, [(textboxes(ctx)[0], f"{hour:02d}:{m.group(2)}")])


def _select_box(ctx: Ctx) -> Node:
    for n in ctx.tree.nodes:
        if n.id is not None and n.role.lower() in ("combobox", "listbox", "select"):
            return n
    raise Unsolvable("no select")


def _selected_option(box: Node) -> str | None:
    for c in box.walk():
        if c.role.lower() in ("option", "menuitem", "menulistoption") and c.selected:
            return c.name.strip()
    v = box.value
    return v or None


@plan("choose-list")
def _choose_list(ctx: Ctx) -> str:
    target = need(re.match(r"Select (.*) from the list and click Submit", ctx.utterance), "item").group(1)
    box = _select_box(ctx)
    if _selected_option(box) != target and not ctx.mem.get("selected"):
        ctx.mem["selected"] = True
        return select(box, target)
    return submit(ctx)


@plan("find-word")
def _find_word(ctx: Ctx) -> str:
    pos = need(re.search(r"Find the (\d+\w\w) word", ctx.utterance), "position").group(1)
    box = textboxes(ctx)[0]
    # the paragraph: the longest text before the textbox
    texts = [n for n in ctx.tree.nodes if n.index < box.index and n.name.strip()]
    para = max(texts, key=lambda n: len(n.name))
    words = para.name.split()
    word = re.sub(r"[^a-zA-Z]", "", words[ordinal(pos)])
    return fill_then_submit(ctx, [(box, word)])


def _table_value(ctx: Ctx, key: str) -> str:
    for n in ctx.tree.nodes:
        if n.name.strip() == key and n.role.lower() in ("cell", "gridcell", "td", "rowheader", "columnheader"):
            row = n.parent
            cells = [c for c in (row.children if row else []) if c is not n]
            if cells:
                return cells[-1].text().strip()
    # no table roles: the text after the key
    seq = [n for n in ctx.tree.nodes if n.name.strip()]
    for i, n in enumerate(seq):
        if n.name.strip() == key and i + 1 < len(seq):
            return seq[i + 1].name.strip()
    raise Unsolvable(f"no table row {key!r}")


@plan("read-table")
def _read_table(ctx: Ctx) -> str:
    key = need(re.search(r"Enter the value of (.*) into the text field", ctx.utterance), "key").group(1)
    return fill_then_submit(ctx, [(textboxes(ctx)[0], _table_value(ctx, key))])


@plan("read-table-2")
def _read_table_2(ctx: Ctx) -> str:
    boxes = textboxes(ctx)
    pairs = []
    for box in boxes[:2]:
        label = _label_of(ctx, box)
        key = label.rstrip(":").strip()
        pairs.append((box, _table_value(ctx, key)))
    return fill_then_submit(ctx, pairs)


def _label_of(ctx: Ctx, box: Node) -> str:
    """The text that labels ``box``: its accessible name, else the nearest text before it."""
    if box.name.strip():
        return box.name.strip()
    for n in reversed(ctx.tree.nodes[: box.index]):
        if n.name.strip() and n.role.lower() not in _TEXTBOX:
            return n.name.strip()
    raise Unsolvable("unlabelled textbox")


_ARITH = re.compile(r"^(-?\d+)\s*([-+x*])\s*(-?\d+)\s*=\s*$")
_ALGEBRA = re.compile(r"^(x|-?\d+)\s*([-+])\s*(x|-?\d+)\s*=\s*(-?\d+)$")


@plan("simple-arithmetic")
def _simple_arithmetic(ctx: Ctx) -> str:
    for n in ctx.tree.nodes:
        m = _ARITH.match(n.name.strip() + " ") or _ARITH.match(n.name.strip())
        if m:
            a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
            ans = a + b if op == "+" else a - b if op == "-" else a * b
            return fill_then_submit(ctx, [(textboxes(ctx)[0], str(ans))])
    raise Unsolvable("no arithmetic problem")


@plan("simple-algebra")
def _simple_algebra(ctx: Ctx) -> str:
    for n in ctx.tree.nodes:
        m = _ALGEBRA.match(n.name.strip())
        if m:
            left, op, right, total = m.group(1), m.group(2), m.group(3), int(m.group(4))
            if left == "x":
                ans = total - int(right) if op == "+" else total + int(right)
            else:
                ans = total - int(left) if op == "+" else int(left) - total
            return fill_then_submit(ctx, [(textboxes(ctx)[0], str(ans))])
    raise Unsolvable("no equation")


@plan("odd-or-even")
def _odd_or_even(ctx: Ctx) -> str:
    """Each row reads: an Odd button, the number, an Even button (page order)."""
    done = ctx.mem.setdefault("done", 0)
    rows = []
    odd: Node | None = None
    number: int | None = None
    for n in ctx.tree.nodes:
        name = n.name.strip()
        if n.role.lower() == "button" and name == "Odd":
            odd, number = n, None
        elif n.role.lower() == "button" and name == "Even":
            if odd is not None and number is not None:
                rows.append((number, odd, n))
            odd, number = None, None
        elif odd is not None and number is None and re.fullmatch(r"-?\d+", name):
            number = int(name)
    if done < len(rows):
        ctx.mem["done"] = done + 1
        number, odd_button, even_button = rows[done]
        return click(odd_button if number % 2 else even_button)
    return submit(ctx)


@plan("text-transform")
def _text_transform(ctx: Ctx) -> str:
    box = textboxes(ctx)[0]
    chars = []
    for n in ctx.tree.nodes[: box.index]:
        s = n.name.strip()
        if len(s) == 1 and not n.children:
            chars.append(s)
        elif s and chars and len(s) != 1:
            chars = []  # not the captcha (another text before it)
    if not chars:
        raise Unsolvable("no captcha text")
    return fill_then_submit(ctx, [(box, "".join(chars))])


@plan("copy-paste")
def _copy_paste(ctx: Ctx) -> str:
    boxes = textboxes(ctx)
    source = next((b for b in boxes if is_multiline(b)), None) or max(boxes, key=lambda b: len(b.value))
    target = next(b for b in boxes if b is not source)
    if ctx.mem.get("text") is None:
        ctx.mem["text"] = source.value
    return fill_then_submit(ctx, [(target, ctx.mem["text"])])


@plan("copy-paste-2")
def _copy_paste_2(ctx: Ctx) -> str:
    pos = need(re.search(r"from the (\d\w\w) text area", ctx.utterance), "position").group(1)
    boxes = textboxes(ctx)
    areas = [b for b in boxes if is_multiline(b)]
    if len(areas) != 3:
        areas = boxes[:3]
    target = next(b for b in boxes if b not in areas)
    if ctx.mem.get("text") is None:
        ctx.mem["text"] = areas[ordinal(pos)].value
    return fill_then_submit(ctx, [(target, ctx.mem["text"])])


def _common_depth(a: Node, b: Node) -> int:
    """Depth of the deepest node that holds both (-1: none, they sit in different top-level lines)."""
    anc_a = [a, *a.ancestors()]
    for n in [b, *b.ancestors()]:
        if n in anc_a:
            return n.depth
    return -1


@plan("multi-layouts", "multi-orderings")
def _multi_layouts(ctx: Ctx) -> str:
    m = need(re.search(r"Search for (\S+) movies directed by (.+) from year (\d+)", ctx.utterance), "movie")
    wanted = {"genre": m.group(1), "director": m.group(2), "year": m.group(3)}
    boxes = textboxes(ctx)
    labels: dict[str, Node] = {}
    for n in ctx.tree.nodes:
        if n in boxes:
            continue
        s = n.name.strip().lower()
        if not s or len(s) > 20:
            continue
        kind = (
            "genre"
            if "genre" in s
            else "director"
            if ("director" in s or s.startswith("name"))
            else "year"
            if ("year" in s or "date" in s)
            else None
        )
        if kind and kind not in labels:
            labels[kind] = n
    pairs = []
    used: set[int] = set()
    for kind, label in labels.items():
        best = max(
            (b for b in boxes if id(b) not in used),
            key=lambda b: (_common_depth(label, b), -abs(b.index - label.index), b.index < label.index),
        )
        used.add(id(best))
        pairs.append((best, wanted[kind]))
    if len(pairs) != 3:
        raise Unsolvable("movie form not understood")
    pairs.sort(key=lambda p: p[0].index)
    return fill_then_submit(ctx, pairs, "Submit", "Search", "Go!")


@plan("form-sequence-2")
def _form_sequence_2(ctx: Ctx) -> str:
    m = need(
        re.search(
            r'Check the (\d\w\w) radio button and enter the number "(-?\d+)" into the (\d\w\w) textbox', ctx.utterance
        ),
        "form",
    )
    radio = radios(ctx)[ordinal(m.group(1))]
    if not radio.checked:
        return click(radio)
    box = textboxes(ctx)[ordinal(m.group(3))]
    return fill_then_submit(ctx, [(box, m.group(2))])


@plan("search-engine")
def _search_engine(ctx: Ctx) -> str:
    m = need(
        re.search(r'enter "(.*)" and press "Search", then find and click the (\d+)\w\w search result', ctx.utterance),
        "search",
    )
    term, rank = m.group(1), int(m.group(2)) - 1
    box = textboxes(ctx)[0]
    stage = ctx.mem.get("stage", 0)
    if stage == 0:
        if box.value != term:
            return fill(box, term)
        ctx.mem["stage"] = 1
        return submit(ctx, "Search")
    page = rank // 3 + 1
    if stage == 1 and page > 1:
        link = next(
            (
                n
                for n in ctx.tree.nodes
                if n.id is not None and n.name.strip() == str(page) and n.role.lower() != "statictext"
            ),
            None,
        )
        if link is None:
            raise Unsolvable("no page link")
        ctx.mem["stage"] = 2
        return click(link)
    # the result titles: the links before the pagination that are not page controls
    links = [n for n in ctx.tree.with_role("link") if n.id is not None]
    results = [n for n in links if not re.fullmatch(r"\d+|<|>|First|Last|Previous|Next|\u00ab|\u00bb", n.name.strip())]
    if len(results) < 3:
        raise Unsolvable("results not shown")
    return click(results[rank % 3])


@plan("phone-book")
def _phone_book(ctx: Ctx) -> str:
    m = need(
        re.search(r"Find (.+) in the contact book and click on their (phone|email|address)", ctx.utterance), "contact"
    )
    person, prop = m.group(1), m.group(2)
    heading = next((n for n in ctx.tree.nodes if n.role.lower() in ("heading", "h2") and n.name.strip()), None)
    if heading is not None and heading.name.strip() == person:
        labels = {"phone": "Phone:", "email": "Email:", "address": "Address:"}
        seen = False
        for n in ctx.tree.nodes[heading.index :]:
            if n.name.strip() == labels[prop]:
                seen = True
            elif seen and n.id is not None and n.role.lower() == "link":
                return click(n)
        raise Unsolvable("no property link")
    nxt = next(
        (
            n
            for n in ctx.tree.nodes
            if n.id is not None and n.name.strip() in (">", "Next") and n.role.lower() != "statictext"
        ),
        None,
    )
    if nxt is None:
        raise Unsolvable("no next page")
    return click(nxt)


@plan("use-autocomplete", "use-autocomplete-nodelay")
def _use_autocomplete(ctx: Ctx) -> str:
    m = need(re.search(r'starts with "(.*?)"(?: and ends with "(.*?)")?', ctx.utterance), "autocomplete")
    start, end = m.group(1), m.group(2) or ""
    box = textboxes(ctx)[0]
    if ctx.mem.get("picked") and box.value.startswith(start) and box.value.endswith(end):
        return submit(ctx)
    # the suggestion menu (not the widget's live "status" region, which repeats the last choice)
    items = [
        n
        for n in ctx.tree.nodes
        if n.id is not None
        and n.name.strip()
        and n.index > box.index
        and n.role.lower() not in _TEXTBOX
        and not any(a.role.lower() == "status" for a in [n, *n.ancestors()])
    ]
    for n in items:
        s = n.name.strip()
        if s.startswith(start) and s.endswith(end):
            ctx.mem["picked"] = True
            return click(n)
    if box.value != start:
        return fill(box, start)
    # the suggestions have not shown yet (the widget's delay): type again
    ctx.mem["waits"] = ctx.mem.get("waits", 0) + 1
    if ctx.mem["waits"] > 6:
        raise Unsolvable("no suggestion")
    return fill(box, start)


@plan("choose-date", "choose-date-easy", "choose-date-medium", "choose-date-nodelay")
def _choose_date(ctx: Ctx) -> str:
    m = need(re.search(r"Select (\d\d)/(\d\d)/(\d{4}) as the date", ctx.utterance), "date")
    month, day, year = int(m.group(1)), int(m.group(2)), int(m.group(3))
    box = textboxes(ctx)[0]
    if box.value == m.group(0)[7:17]:
        return submit(ctx)
    months = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ]
    shown = None
    for n in ctx.tree.nodes:
        mm = re.fullmatch(r"(" + "|".join(months) + r")\s*(\d{4})", n.text().strip()) or re.fullmatch(
            r"(" + "|".join(months) + r")", n.name.strip()
        )
        if mm:
            shown_year = int(mm.group(2)) if mm.lastindex and mm.lastindex >= 2 else year
            if mm.lastindex == 1:
                y = next(
                    (
                        int(x.name)
                        for x in ctx.tree.nodes[n.index + 1 : n.index + 4]
                        if re.fullmatch(r"\d{4}", x.name.strip())
                    ),
                    year,
                )
                shown_year = y
            shown = (shown_year, months.index(mm.group(1)) + 1)
            break
    if shown is None:
        return click(box)  # open the calendar
    if shown != (year, month):
        direction = "Prev" if shown > (year, month) else "Next"
        ctl = next((n for n in ctx.tree.nodes if n.id is not None and n.name.strip() == direction), None)
        if ctl is None:
            raise Unsolvable("no calendar navigation")
        return click(ctl)
    cell = next(
        (
            n
            for n in ctx.tree.nodes
            if n.id is not None and n.name.strip() == str(day) and n.role.lower() in ("link", "cell", "gridcell", "a")
        ),
        None,
    )
    if cell is None:
        cell = element_named(ctx, str(day))
    if cell is None:
        raise Unsolvable("no day cell")
    return click(cell)


@plan("click-menu")
def _click_menu(ctx: Ctx) -> str:
    path = need(re.match(r"Select (.+)$", ctx.utterance), "menu").group(1).split(">")
    # the deepest item of the path that shows
    for depth in range(len(path) - 1, -1, -1):
        el = element_named(ctx, path[depth].strip())
        if el is None:
            continue
        if depth == len(path) - 1:
            return click(el)
        hovers = ctx.mem.setdefault("hovers", {})
        hovers[path[depth]] = hovers.get(path[depth], 0) + 1
        if hovers[path[depth]] > 4:
            raise Unsolvable("submenu does not open")
        return hover(el)
    raise Unsolvable("menu item not found")


@plan("terminal")
def _terminal(ctx: Ctx) -> str:
    m = re.search(r"extension \.(\S+?)\.?$", ctx.utterance)
    ext = m.group(1) if m else ""
    box = textboxes(ctx)
    if not box:
        raise Unsolvable("no terminal input")
    stage = ctx.mem.get("stage", 0)
    if stage == 0:
        ctx.mem["stage"] = 1
        return fill(box[-1], "ls")
    if stage == 1:
        ctx.mem["stage"] = 2
        return press("Enter")
    # the listing: the output line after "ls"
    files: list[str] = []
    after_ls = False
    for n in ctx.tree.nodes:
        if "command" in _classes(n):
            after_ls = n.name.strip() == "ls"
        elif after_ls and "output" in _classes(n):
            files = n.name.split()
            after_ls = False
    if stage == 2:
        # MiniWoB checks the extension with indexOf (its first occurrence must end the name):
        # "shark.sh" does not count as ending with "sh", so prefer names where it does
        ranked = sorted(files, key=lambda f: not (ext and f.find(ext) + len(ext) == len(f)))
        for f in ranked:
            if (ext and f.endswith("." + ext)) or (not ext and "." not in f):
                ctx.mem["stage"] = 3
                return fill(box[-1], f"rm {f}")
        raise Unsolvable("no file to delete")
    return press("Enter")


def _classes(n: Node) -> set[str]:
    c = n.prop("class")
    return set(c.split()) if isinstance(c, str) else set()


_SOCIAL_MENU = {"Share via DM", "Copy link to Tweet", "Embed Tweet", "Mute", "Block", "Report"}


@plan("social-media")
def _social_media(ctx: Ctx) -> str:
    m = need(re.search(r'For the user (\S+), click on the "(.+)" button', ctx.utterance), "social")
    user, action = m.group(1), m.group(2)
    # the posts: from a "name" node to the next one
    posts: list[list[Node]] = []
    for n in ctx.tree.nodes:
        if "name" in _classes(n):
            posts.append([])
        if posts:
            posts[-1].append(n)
    for post in posts:
        if not any("username" in _classes(n) and n.name.strip() == user for n in post):
            continue
        if action in ("Reply", "Retweet", "Like"):
            for n in post:
                if action.lower() in _classes(n):
                    return click(n)
        for n in post:  # the "more" menu, when open
            text = n.name.strip()
            item = text and (text == action or text.startswith(action + " @")) and n.id is not None
            if item and not _classes(n) & {"username", "body"}:
                return click(n)
        for n in post:
            if "more" in _classes(n):
                return click(n)
    raise Unsolvable(f"no post by {user}")


@plan("navigate-tree")
def _navigate_tree(ctx: Ctx) -> str:
    target = need(re.search(r'named "(.*)"', ctx.utterance), "tree").group(1)
    for n in ctx.tree.nodes:
        if n.id is not None and n.name.strip() == target and _classes(n) & {"file", "folder"}:
            return click(n)
    tried = ctx.mem.setdefault("tried", [])
    for n in ctx.tree.nodes:
        if n.id is None or n.id in tried:
            continue
        if "hitarea" in _classes(n) and "expandable-hitarea" in _classes(n):
            tried.append(n.id)
            return click(n)
    raise Unsolvable(f"{target!r} not in the tree")


@plan("guess-number")
def _guess_number(ctx: Ctx) -> str:
    lo, hi = ctx.mem.setdefault("range", [0, 9])
    box = textboxes(ctx)[0]
    last = ctx.mem.get("guess")
    page = " ".join(n.name for n in ctx.tree.nodes if n.name)
    for m in re.finditer(r"The number is (higher|lower) than\s*(-?\d+)", page):
        if last is not None and int(m.group(2)) == last and ctx.mem.get("seen") != last:
            ctx.mem["seen"] = last
            if m.group(1) == "higher":
                lo = last + 1
            else:
                hi = last - 1
            ctx.mem["range"] = [lo, hi]
            break
    guess = (lo + hi) // 2
    if box.value != str(guess) or last != guess:
        ctx.mem["guess"] = guess
        ctx.mem["submitted"] = False
        return fill(box, str(guess))
    return submit(ctx)


_EMAIL = re.compile(
    r"Find the email by (?P<by>.+?) and (?:reply to them with the text \"(?P<reply>.*)\"|forward that email to (?P<to>.+?)\.$"
    r"|click the (?P<icon>trash|star) icon)"
)


@plan(
    "email-inbox",
    "email-inbox-delete",
    "email-inbox-forward",
    "email-inbox-important",
    "email-inbox-noscroll",
    "email-inbox-reply",
    "email-inbox-star-reply",
)
def _email_inbox(ctx: Ctx) -> str:
    m = need(_EMAIL.search(ctx.utterance), "email")
    by = m.group("by")
    nodes = ctx.tree.nodes
    threads = [n for n in nodes if "email-thread" in _classes(n)]
    if threads:  # the inbox
        for t in threads:
            if any("email-sender" in _classes(c) and c.name.strip() == by for c in t.walk()):
                if m.group("icon"):
                    target = next(c for c in t.walk() if m.group("icon") in _classes(c))
                else:
                    target = next(c for c in t.walk() if "email-sender" in _classes(c))
                # a thread low in the scrolling inbox can be clipped (a click there does
                # nothing): after a click that changed nothing, scroll the inbox and click again
                tries = ctx.mem.setdefault("tries", {})
                n = tries[target.id] = tries.get(target.id, 0) + 1
                if n in (2, 5):
                    ctx.mem["scroll"] = True
                    return hover(threads[0])
                if ctx.mem.pop("scroll", False):
                    tries[target.id] = n
                    return "scroll(0, 100)"
                return click(target)
        raise Unsolvable(f"no email by {by}")
    labels = [n for n in nodes if n.role.lower() == "label" and n.name.strip() == "to:"]
    if labels:  # the reply or forward form: fill, then the send icon (the second icon before "to:")
        boxes = textboxes(ctx)
        if m.group("reply") is not None:
            box = next(b for b in boxes if is_multiline(b))
            text = m.group("reply")
        else:
            box = next(b for b in boxes if not is_multiline(b))
            text = m.group("to")
        if box.value != text:
            return fill(box, text)
        icons = [
            n
            for n in nodes[: labels[0].index]
            if n.id is not None and not n.name and n.role.lower() == "generic" and not n.children
        ]
        if len(icons) < 2:
            raise Unsolvable("no send icon")
        return click(icons[-1])
    # the open email
    if m.group("icon"):
        return click(next(n for n in nodes if m.group("icon") in _classes(n)))
    word = "Reply" if m.group("reply") is not None else "Forward"
    return click(next(n for n in nodes if n.id is not None and n.name.strip() == word))
