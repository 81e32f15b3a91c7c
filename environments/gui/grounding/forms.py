"""Generated web forms for the GUI grounding tasks: a seed gives one HTML page and one target.

:func:`generate_form` draws, from a ``random.Random``, a form page (a heading, labelled text
fields, a drop-down, check boxes, a radio group, a table of rows with repeated buttons, links and
action buttons, in one of several layouts, sizes and colour schemes) and the element the
instruction names. Every element that can be a target carries a ``data-gid`` attribute, the key of
its :class:`Element` record; the renderer (:mod:`envgym.environments.gui.grounding.render`) reads
each one's box from the page Chromium laid out.

The vocabularies are split: every list of words is cut into a train part and a test part (every
fourth word is a test word), and a form of one split draws all of its words from its own part, so
no test target's name occurs in any train form (``tests/environments/gui/test_gui_grounding.py``
proves it over hundreds of seeds).
"""

from __future__ import annotations

import html
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "TARGET_ROLES",
    "TEMPLATES",
    "Element",
    "Form",
    "describe_target",
    "generate_form",
    "name_element",
    "split_words",
]

# -- vocabularies (each list is split into train and test words by split_words) -------------------
# fmt: off
_TITLES = (
    "Create account", "Shipping address", "Contact us", "Newsletter", "Book a table", "Flight search",
    "Payment details", "Profile settings", "Event sign-up", "Support ticket", "Library card", "Car rental",
    "Job application", "Hotel booking", "Feedback survey", "Gym membership", "Pet registration",
    "Course enrolment", "Volunteer form", "Conference pass",
)
_FIELDS = (
    "First name", "Last name", "Email", "Phone", "Street", "City", "Postcode", "Country", "Company",
    "Username", "Password", "Birthday", "Website", "Card number", "Expiry", "Promo code", "Guests",
    "Arrival", "Departure", "Comment", "Nickname", "Department", "Employee ID", "Licence number",
    "Emergency contact", "Middle name", "Apartment", "Region", "Tax number", "Referral code",
    "Seat number", "Pet name",
)
_SELECTS = (
    "Language", "Currency", "Time zone", "Title", "Size", "Colour", "Plan", "Payment method",
    "Delivery speed", "Room type", "Cabin class", "Meal", "Difficulty", "Team", "Frequency", "Format",
)
_CHECKS = (
    "Remember me", "Subscribe to updates", "I accept the terms", "Send me a receipt", "Gift wrap",
    "Keep me signed in", "Share my location", "Email notifications", "SMS alerts", "Dark mode",
    "Large print", "Wheelchair access", "Vegetarian meal", "Travel insurance", "Express checkout",
    "Public profile",
)
_RADIOS = (
    "Morning", "Afternoon", "Evening", "Weekly", "Monthly", "Yearly", "Small", "Medium", "Large",
    "Standard", "Premium", "Basic", "Economy", "Business", "Window", "Aisle",
)
_BUTTONS = (
    "Submit", "Save", "Continue", "Next", "Sign up", "Register", "Apply", "Confirm", "Send",
    "Book now", "Search", "Update", "Finish", "Pay now", "Join", "Proceed",
)
_SECONDARY = ("Cancel", "Back", "Reset", "Clear", "Skip", "Close", "Discard", "Later")
_LINKS = (
    "Forgot password?", "Terms of service", "Privacy policy", "Help", "Contact support", "Sign in instead",
    "View all plans", "Learn more", "Change language", "Accessibility", "Cookie settings", "FAQ",
    "Shipping rates", "Return policy", "Site map", "Careers",
)
_ROW_ITEMS = (
    "Notebook", "Backpack", "Headphones", "Desk lamp", "Water bottle", "Umbrella", "Keyboard", "Sunglasses",
    "Coffee mug", "Running shoes", "Wallet", "Phone case", "Scarf", "Alarm clock", "Tea kettle", "Pillow",
)
_ROW_ACTIONS = ("Edit", "Remove", "Details", "Open", "Copy", "Share", "Archive", "Rename")
_SECTIONS = ("Personal details", "Preferences", "Options", "Account", "Extras", "Your items", "Delivery", "Billing")
# fmt: on

#: Colour schemes: (page background, text, primary button, primary text, border).
_SCHEMES = (
    ("#ffffff", "#1f2933", "#2563eb", "#ffffff", "#9aa5b1"),
    ("#f7f7f2", "#222222", "#16a34a", "#ffffff", "#b8b8a8"),
    ("#eef2f7", "#102a43", "#d9480f", "#ffffff", "#829ab1"),
    ("#fffaf0", "#3e2723", "#6d28d9", "#ffffff", "#bcaaa4"),
    ("#f0fdf4", "#14532d", "#0f766e", "#ffffff", "#86efac"),
    ("#1f2937", "#f3f4f6", "#f59e0b", "#111827", "#6b7280"),
)
_FONTS = ("DejaVu Sans", "Liberation Sans", "DejaVu Serif", "Liberation Serif")


def split_words(words: Sequence[str], split: str) -> tuple[str, ...]:
    """The part of ``words`` a split draws from: every fourth word (index 3, 7, ...) is a test
    word, the others train words."""
    if split == "test":
        return tuple(w for i, w in enumerate(words) if i % 4 == 3)
    return tuple(w for i, w in enumerate(words) if i % 4 != 3)


@dataclass(frozen=True, slots=True)
class Element:
    """One element of a generated form that an instruction may name.

    Attributes:
        gid: the key written in the element's ``data-gid`` attribute (``"e7"``).
        role: ``button``, ``link``, ``textbox``, ``combobox``, ``checkbox``, ``radio`` (targets), or
            ``heading`` and ``text`` (a label, a row's name: shown in element lists, never targets).
        name: its accessible name (a button's or link's text, a field's label).
        group: for repeated buttons, the text of their row (``"Backpack"``), else ``""``.
    """

    gid: str
    role: str
    name: str
    group: str = ""


@dataclass(slots=True)
class Form:
    """A generated page: its HTML, the elements that can be targets, the target and instruction.

    Attributes:
        html: the whole page (inline CSS, no scripts, no external resources).
        title: the form's heading.
        elements: the candidate targets, in page order.
        target: the ``gid`` the instruction names.
        instruction: the instruction shown to the agent.
        kind: how the instruction names the target: ``text`` (a button or link by its text),
            ``label`` (a field, drop-down, check box or radio by its label), ``ordinal`` (the n-th
            of several equal buttons, counted from the top) or ``row`` (a button by its row).
        layout: the layout drawn (``stacked``, ``inline``, ``two-column``).
    """

    html: str
    title: str
    elements: list[Element] = field(default_factory=list)
    target: str = ""
    instruction: str = ""
    kind: str = ""
    layout: str = ""


#: Roles an instruction may name (headings and static texts are context only).
TARGET_ROLES = ("button", "link", "textbox", "combobox", "checkbox", "radio")
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


class _Builder:
    """Accumulates the page's HTML and its element records."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.elements: list[Element] = []

    def gid(self, role: str, name: str, group: str = "") -> str:
        gid = f"e{len(self.elements) + 1}"
        self.elements.append(Element(gid, role, name, group))
        return gid


def generate_form(rng: random.Random, split: str, *, width: int, height: int) -> Form:
    """Draw one form page and its target from ``rng`` (all words from ``split``'s part)."""
    words = {
        name: split_words(pool, split)
        for name, pool in (
            ("titles", _TITLES), ("fields", _FIELDS), ("selects", _SELECTS), ("checks", _CHECKS),
            ("radios", _RADIOS), ("buttons", _BUTTONS), ("secondary", _SECONDARY), ("links", _LINKS),
            ("rows", _ROW_ITEMS), ("row_actions", _ROW_ACTIONS), ("sections", _SECTIONS),
        )
    }  # fmt: skip
    bg, fg, primary, primary_fg, border = rng.choice(_SCHEMES)
    font = rng.choice(_FONTS)
    size = rng.choice((12, 13, 14, 15))
    layout = rng.choice(("stacked", "inline", "two-column"))
    pad = rng.choice((4, 6, 8))
    title = rng.choice(words["titles"])
    b = _Builder()

    n_fields = rng.randint(2, 4 if layout != "two-column" else 6)
    fields_ = rng.sample(words["fields"], n_fields)
    selects = rng.sample(words["selects"], rng.randint(0, 1))
    checks = rng.sample(words["checks"], rng.randint(1, 2))
    use_radios = rng.random() < 0.5
    radios = rng.sample(words["radios"], 3) if use_radios else []
    use_rows = rng.random() < 0.55
    rows = rng.sample(words["rows"], rng.randint(2, 3)) if use_rows else []
    row_actions = rng.sample(words["row_actions"], rng.randint(1, 2)) if use_rows else []
    links = rng.sample(words["links"], rng.randint(1, 2))
    buttons = [rng.choice(words["buttons"])]
    if rng.random() < 0.7:
        buttons.append(rng.choice(words["secondary"]))
    rng.shuffle(buttons)

    def field_html(label: str, kind: str) -> str:
        gid = b.gid("textbox" if kind == "input" else "combobox", label)
        fid = f"f-{gid}"
        if kind == "input":
            control = f"<input id='{fid}' data-gid='{gid}' type='text' style='width:{rng.randint(110, 190)}px'>"
        else:
            options = "".join(f"<option>{_esc(o)}</option>" for o in ("Choose...", "One", "Two"))
            control = f"<select id='{fid}' data-gid='{gid}'>{options}</select>"
        label_html = f"<label for='{fid}' data-gid='{b.gid('text', label)}'>{_esc(label)}</label>"
        if layout == "inline":
            return f"<div class='row inline'>{label_html}{control}</div>"
        return f"<div class='row'>{label_html}<br>{control}</div>"

    body: list[str] = [f"<h2 data-gid='{b.gid('heading', title)}'>{_esc(title)}</h2>"]
    field_html_parts = [field_html(f, "input") for f in fields_] + [field_html(s, "select") for s in selects]
    if layout == "two-column":
        half = (len(field_html_parts) + 1) // 2
        body.append(
            "<div class='cols'><div>" + "".join(field_html_parts[:half]) + "</div><div>"
            + "".join(field_html_parts[half:]) + "</div></div>"
        )  # fmt: skip
    else:
        body.extend(field_html_parts)
    if radios:
        legend = rng.choice(words["sections"])
        items = []
        for option in radios:
            gid = b.gid("radio", option, legend)
            items.append(f"<label class='opt'><input type='radio' name='r' data-gid='{gid}'> {_esc(option)}</label>")
        legend_html = f"<span class='legend' data-gid='{b.gid('text', legend + ':')}'>{_esc(legend)}:</span>"
        body.append(f"<div class='row'>{legend_html} {''.join(items)}</div>")
    for check in checks:
        gid = b.gid("checkbox", check)
        body.append(f"<div class='row'><label><input type='checkbox' data-gid='{gid}'> {_esc(check)}</label></div>")
    if rows:
        cells = []
        for item in rows:
            actions = "".join(
                f"<button class='small' data-gid='{b.gid('button', action, item)}'>{_esc(action)}</button>"
                for action in row_actions
            )
            cells.append(f"<tr><td data-gid='{b.gid('text', item)}'>{_esc(item)}</td><td>{actions}</td></tr>")
        body.append(f"<table>{''.join(cells)}</table>")
    link_html = " &middot; ".join(f"<a href='#' data-gid='{b.gid('link', text)}'>{_esc(text)}</a>" for text in links)
    button_html = "".join(
        f"<button class='{'primary' if text in words['buttons'] else 'secondary'}' "
        f"data-gid='{b.gid('button', text)}'>{_esc(text)}</button>"
        for text in buttons
    )
    if rng.random() < 0.5:
        body.append(f"<div class='row actions'>{button_html}</div><div class='row'>{link_html}</div>")
    else:
        body.append(f"<div class='row'>{link_html}</div><div class='row actions'>{button_html}</div>")

    margin = rng.randint(8, 40)
    css = (
        f"html,body{{margin:0;width:{width}px;height:{height}px;overflow:hidden;background:{bg};color:{fg};"
        f"font-family:'{font}';font-size:{size}px}}"
        f"main{{margin:{rng.randint(6, 18)}px {margin}px}}"
        f"h2{{margin:0 0 {pad + 2}px 0;font-size:{size + 6}px}}"
        f".row{{margin:{pad}px 0}} .inline label{{display:inline-block;width:{rng.randint(90, 130)}px}}"
        f".cols{{display:flex;gap:{rng.randint(16, 48)}px}}"
        f"input[type=text],select{{font:inherit;padding:2px 4px;border:1px solid {border};background:#fff;color:#111}}"
        f"button{{font:inherit;margin-right:{pad + 2}px;padding:{pad // 2 + 2}px {pad + 6}px;border-radius:"
        f"{rng.choice((0, 3, 8))}px;border:1px solid {border}}}"
        f"button.primary{{background:{primary};color:{primary_fg};border-color:{primary}}}"
        f"button.small{{padding:1px 6px;margin-right:4px;font-size:{size - 1}px}}"
        f"a{{color:{primary}}} .opt{{margin-right:10px}} .legend{{margin-right:6px}}"
        f"table{{border-collapse:collapse}} td{{padding:2px 10px 2px 0}}"
    )
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{css}</style></head>"
        f"<body><main>{''.join(body)}</main></body></html>"
    )
    return Form(html=page, title=title, elements=b.elements, layout=layout)


def describe_target(form: Form, visible: Sequence[Element], rng: random.Random) -> tuple[Element, str, str]:
    """Pick the target among the ``visible`` elements (in page order) and word the instruction.

    Returns ``(target, instruction, kind)``. Repeated row buttons are named by their row or by
    their rank among equal buttons (counted from the top); every other element by its text or
    label, which is unique on the page.
    """
    target = rng.choice([e for e in visible if e.role in TARGET_ROLES])
    role, name = target.role, target.name
    if role == "button" and target.group:
        same = [e for e in visible if e.role == "button" and e.name == name and e.group]
        if rng.random() < 0.5:
            rank = same.index(target)
            return target, f"Click the {_ORDINALS[rank]} '{name}' button from the top.", "ordinal"
        return target, f"Click the '{name}' button in the row for '{target.group}'.", "row"
    return target, *name_element(role, name, rng)


#: How an instruction names an element of each role by its text or label.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "button": ("Click the '{n}' button.", "Press the '{n}' button."),
    "link": ("Click the link '{n}'.", "Follow the '{n}' link."),
    "textbox": ("Click the text field labelled '{n}'.", "Click into the '{n}' field."),
    "combobox": ("Open the '{n}' drop-down.", "Click the '{n}' drop-down list."),
    "checkbox": ("Tick the check box '{n}'.", "Click the check box for '{n}'."),
    "radio": ("Choose the '{n}' option.", "Select the radio button '{n}'."),
    "tab": ("Click the '{n}' tab.", "Switch to the '{n}' tab."),
}


def name_element(role: str, name: str, rng: random.Random) -> tuple[str, str]:
    """``(instruction, kind)`` naming the element of ``role`` by its ``name`` (kind ``text`` for
    buttons, links and tabs, ``label`` for controls named by their label)."""
    kind = "text" if role in ("button", "link", "tab") else "label"
    return rng.choice(TEMPLATES[role]).format(n=name), kind
