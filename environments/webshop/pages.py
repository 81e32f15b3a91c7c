"""The store's pages as a small state machine, shared by the text env and the web server.

A :class:`Page` is what WebShop's URL says (``/search_results/<session>/<keywords>/<page>``,
``/item_page/<session>/<asin>/<keywords>/<page>/<options>``, ...): the page kind, the search
keywords, the results page number, the product and the chosen options. :class:`Store` turns a
page into elements (text, buttons, product links, option buttons) and renders them as WebShop's
``text`` (``[SEP]``-joined), ``text_rich`` (one element a line, buttons marked) or ``html``, lists
its clickables, and applies ``search[...]`` / ``click[...]`` to get the next page.
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from dataclasses import dataclass, field, replace
from typing import Any

from envgym.environments.webshop.catalogue import Catalogue, Goal, Product
from envgym.environments.webshop.search import SearchIndex

__all__ = ["ACTION_RE", "OBSERVATION_MODES", "PRODUCT_WINDOW", "Page", "Store", "parse_action"]

#: WebShop's ``PRODUCT_WINDOW``: results shown per page.
PRODUCT_WINDOW = 10
OBSERVATION_MODES = ("text", "text_rich", "html")
#: WebShop's action pattern: ``name[argument]``.
ACTION_RE = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)

BACK = "back to search"
NEXT = "next >"
PREV = "< prev"
BUY = "buy now"
SUB_PAGES = ("description", "features", "reviews")


class ActionError(ValueError):
    """An action the current page does not accept (the message says why)."""


def parse_action(text: str) -> tuple[str, str]:
    """``("search" | "click", argument)`` or :class:`ActionError`."""
    m = ACTION_RE.match(text)
    if m is None:
        raise ActionError("expected search[<query>] or click[<button>], e.g. click[buy now].")
    return m.group(1).lower(), m.group(2).strip()


@dataclass(frozen=True, slots=True)
class Page:
    """Where the shopper is: WebShop's URL fields."""

    kind: str = "search"  #: search | results | item | sub | done
    keywords: str = ""
    page: int = 1
    results: tuple[int, ...] = ()
    product: int = -1
    options: tuple[tuple[str, str], ...] = ()  #: (axis, value), in click order
    sub: str = ""
    visited: frozenset[int] = field(default_factory=frozenset)


class Store:
    """A catalogue, its search index and one goal: renders pages and applies actions."""

    def __init__(self, catalogue: Catalogue, index: SearchIndex) -> None:
        self.catalogue = catalogue
        self.index = index

    # ------------------------------------------------------------------ elements
    def elements(self, page: Page, goal: Goal) -> list[tuple[str, ...]]:
        """``(kind, text[, extra])`` items of the page, in reading order."""
        out: list[tuple[str, ...]] = []
        if page.kind == "search":
            out += [("text", "WebShop"), ("text", "Instruction:"), ("text", goal.instruction), ("button", "Search")]
            return out
        out += [("text", "Instruction:"), ("text", goal.instruction)]
        if page.kind == "results":
            total = len(page.results)
            out.append(("button", "Back to Search"))
            out.append(("text", f"Page {page.page} (Total results: {total})"))
            if page.page > 1:
                out.append(("button", "< Prev"))
            if page.page * PRODUCT_WINDOW < total:
                out.append(("button", "Next >"))
            start = (page.page - 1) * PRODUCT_WINDOW
            for i in page.results[start : start + PRODUCT_WINDOW]:
                p = self.catalogue.product(i)
                out.append(("link", p.asin, "visited" if i in page.visited else ""))
                out.append(("text", p.title))
                out.append(("text", p.price_text))
            return out
        product = self.catalogue.product(page.product)
        if page.kind == "item":
            chosen = dict(page.options)
            out += [("button", "Back to Search"), ("button", "< Prev")]
            for axis, values in product.options.items():
                out.append(("text", axis))
                for v in values:
                    out.append(("option", v, "clicked" if chosen.get(axis) == v else "", axis))
            out.append(("text", product.title))
            out.append(("text", f"Price: {product.price_text}"))
            out.append(("text", f"Rating: {product.rating if product.rating is not None else 'N.A.'}"))
            out += [("button", "Description"), ("button", "Features"), ("button", "Reviews"), ("button", "Buy Now")]
            return out
        if page.kind == "sub":
            out += [("button", "Back to Search"), ("button", "< Prev")]
            if page.sub == "description":
                out.append(("text", product.description))
            elif page.sub == "features":
                out += [("text", b) for b in product.bullet_points]
            else:
                if not product.reviews:
                    out.append(("text", "No reviews yet."))
                for stars, title, body in product.reviews:
                    out += [("text", title), ("text", f"{stars} out of 5 stars"), ("text", body)]
            return out
        # done
        out = [("text", "Thank you for shopping with us!"), ("text", f"Your code: {product.asin}")]
        if page.options:
            out.append(("text", "Options: " + ", ".join(v for _, v in page.options)))
        return out

    # ------------------------------------------------------------------ renderers
    def render(self, page: Page, goal: Goal, mode: str, *, session: str = "fixed_0", last_click: str = "") -> str:
        if mode == "text":
            return " [SEP] ".join(e[1] for e in self.elements(page, goal))
        if mode == "text_rich":
            lines = [f"You have clicked {last_click}."] if last_click else []
            for e in self.elements(page, goal):
                if e[0] == "text":
                    lines.append(e[1])
                elif e[0] in ("link", "option") and e[2]:
                    lines.append(f"[clicked button] {e[1]} [clicked button_]")
                else:
                    lines.append(f"[button] {e[1]} [button_]")
            return "\n".join(lines)
        return self.render_html(page, goal, session=session)

    def url(self, page: Page, session: str) -> str:
        """WebShop's URL of ``page`` (relative to the site root)."""
        q = urllib.parse.quote
        kw = q("+".join(page.keywords.split()) or "-", safe="+")
        opts = q(json.dumps(dict(page.options), separators=(",", ":")), safe="")
        if page.kind == "search":
            return f"/{q(session)}"
        if page.kind == "results":
            return f"/search_results/{q(session)}/{kw}/{page.page}"
        asin = self.catalogue.product(page.product).asin
        if page.kind == "item":
            return f"/item_page/{q(session)}/{asin}/{kw}/{page.page}/{opts}"
        if page.kind == "sub":
            return f"/item_sub_page/{q(session)}/{asin}/{kw}/{page.page}/{page.sub.capitalize()}/{opts}"
        return f"/done/{q(session)}/{asin}/{opts}"

    def render_html(self, page: Page, goal: Goal, *, session: str) -> str:
        """The page as HTML; every clickable is an ``<a class="btn">``/``product-link``/``option`` link
        to the page it leads to, the search box a GET form (what the web server serves)."""
        esc = html.escape
        body: list[str] = []
        for e in self.elements(page, goal):
            kind, text = e[0], e[1]
            if kind == "text":
                body.append(f"<p>{esc(text)}</p>")
            elif kind == "button" and text == "Search":
                body.append(
                    f'<form id="search-form" method="get" action="/search/{urllib.parse.quote(session)}">'
                    '<input id="search_input" type="text" name="q" aria-label="search">'
                    '<button class="btn" id="search-button" type="submit">Search</button></form>'
                )
            else:
                action = f"click[{text.lower()}]"
                target = self.apply(page, goal, action)[0]
                href = esc(self.url(target, session))
                cls = {"button": "btn", "link": "product-link", "option": "option btn"}[kind]
                clicked = " clicked" if len(e) > 2 and e[2] else ""
                body.append(f'<a class="{cls}{clicked}" href="{href}">{esc(text)}</a>')
        return (
            '<!DOCTYPE html><html><head><meta charset="utf-8"><title>WebShop</title></head>'
            f'<body data-page="{page.kind}">' + "\n".join(body) + "</body></html>"
        )

    # ------------------------------------------------------------------ actions
    def clickables(self, page: Page, goal: Goal) -> list[str]:
        """Lower-cased texts ``click[...]`` accepts on ``page`` (WebShop's ``clickables``)."""
        out: list[str] = []
        for e in self.elements(page, goal):
            if e[0] in ("button", "link", "option") and e[1] != "Search":
                label = e[1].lower()
                if label not in out:
                    out.append(label)
        return out

    def has_search_bar(self, page: Page) -> bool:
        return page.kind == "search"

    def apply(self, page: Page, goal: Goal, action: str) -> tuple[Page, str]:
        """``(next page, clicked text)``, or :class:`ActionError` when ``page`` has no such action."""
        name, arg = parse_action(action)
        if name == "search":
            if page.kind != "search":
                raise ActionError("there is no search bar on this page: click[back to search] first.")
            if not arg:
                raise ActionError("search needs words: search[<query>].")
            results = tuple(self.index.search(arg))
            return Page("results", keywords=arg, page=1, results=results, visited=page.visited), ""
        label = arg.lower()
        if not label:
            raise ActionError("click needs a button: click[<button text>].")
        if page.kind in ("results", "item", "sub") and label == BACK:
            return Page("search", visited=page.visited), label
        if page.kind == "results":
            n_pages = max(1, -(-len(page.results) // PRODUCT_WINDOW))
            if label == NEXT and page.page < n_pages:
                return replace(page, page=page.page + 1), label
            if label == PREV and page.page > 1:
                return replace(page, page=page.page - 1), label
            start = (page.page - 1) * PRODUCT_WINDOW
            for i in page.results[start : start + PRODUCT_WINDOW]:
                if self.catalogue.product(i).asin.lower() == label:
                    return replace(page, kind="item", product=i, options=(), visited=page.visited | {i}), label
        elif page.kind == "item":
            product = self.catalogue.product(page.product)
            if label == PREV:
                return replace(page, kind="results", options=()), label
            if label in SUB_PAGES:
                return replace(page, kind="sub", sub=label), label
            if label == BUY:
                return replace(page, kind="done"), label
            for axis, values in product.options.items():
                for v in values:
                    if v.lower() == label:
                        options = tuple((a, x) for a, x in page.options if a != axis) + ((axis, v),)
                        return replace(page, options=options), label
        elif page.kind == "sub" and label == PREV:
            return replace(page, kind="item", sub=""), label
        choices = self.clickables(page, goal)
        listed = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")
        raise ActionError(f"nothing to click called {arg!r} here; clickable: {listed or 'nothing'}.")

    def product_of(self, page: Page) -> Product:
        return self.catalogue.product(page.product)

    def state_key(self, page: Page) -> dict[str, Any]:
        return {"kind": page.kind, "keywords": page.keywords, "page": page.page, "product": page.product}
