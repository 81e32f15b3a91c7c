"""Shopper for envgym/WebShop-*: searches with the goal's words, picks the closest product, its
options, and buys.

It reads only what any agent reads: the instruction (``info["task"]["goal"]``, also on every
page), the page text (``text`` or ``text_rich`` mode) and ``info["admissible_actions"]``.

* Search page: ``search[<the instruction without its price clause>]``.
* Results page: every listed product (ASIN, title, price) is scored by how many of the
  instruction's content words its title holds; products whose price (or the top of their price range) is over the limit are skipped, and
  products already opened are not opened again. With nothing left on the page it turns the page.
* Item page: clicks each option value written in the instruction (the longest one where values
  overlap, so "x-large" wins over "large"), then buys. When the instruction names an option
  (after "in", "with" or "made of") that the product does not offer, it goes back and tries the
  next product, at most three times, and
  never so late that the episode would end before it buys (``info["turn"]``).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "parse_instruction", "parse_page"]

_PRICE = re.compile(r",?\s*and price lower than ([0-9.]+) dollars\s*$")
_WORD = re.compile(r"[a-z0-9]+")
# Words of an instruction that name no product property: English function words and the
# instruction's own verbs.
_STOP = frozenset(
    "a an and are as at be but by for i i'm am im if in into is it me my no not of on or such that the their then there these they this to was will with want need looking find buy would like can you search some size color flavor capacity style made".split()  # noqa: SIM905 - a word list reads best as words
)
_BUTTONS = frozenset({"back to search", "next >", "< prev", "description", "features", "reviews", "buy now"})
_ASIN = re.compile(r"^b0[0-9a-z]{8}$")
_PRICE_TEXT = re.compile(r"\$([0-9]+(?:\.[0-9]+)?)")
_MAX_TRIES = 3


def parse_instruction(goal: str) -> tuple[str, float | None]:
    """(instruction without the price clause, price limit or ``None``)."""
    m = _PRICE.search(goal)
    if m is None:
        return goal.strip(), None
    return goal[: m.start()].strip(), float(m.group(1))


class _Texts(HTMLParser):
    """The text of an ``html`` observation, one piece per element, in page order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.texts.append(data.strip())


def parse_page(observation: str) -> list[str]:
    """The page's elements in order, for ``text`` (``[SEP]``), ``text_rich`` (lines) and ``html``
    (element texts) modes."""
    if observation.lstrip().startswith("<"):
        texts = _Texts()
        texts.feed(observation)
        texts.close()
        return texts.texts[1:] if texts.texts[:1] == ["WebShop"] else texts.texts  # the <title>
    if " [SEP] " in observation:
        parts = observation.split(" [SEP] ")
    else:
        parts = observation.splitlines()
    out = []
    for part in parts:
        part = part.strip()
        for marker in ("[clicked button]", "[clicked button_]", "[button_]", "[button]"):
            part = part.replace(marker, "")
        part = part.strip()
        if part:
            out.append(part)
    return out


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _contains(haystack: str, needle: str) -> bool:
    return re.search(rf"(?<![a-z0-9-]){re.escape(needle)}(?![a-z0-9-])", haystack) is not None


class Solver(Policy):
    """WebShop shopper (see the module docstring)."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self.tried: list[str] = []
        self.clicked: set[str] = set()

    def act(self, observation: str, info: dict[str, Any]) -> str:
        goal = str(info.get("task", {}).get("goal", ""))
        query, limit = parse_instruction(goal)
        actions: list[str] = list(info.get("admissible_actions") or [])
        clicks = [a[6:-1] for a in actions if a.startswith("click[")]
        if any(a.startswith("search[") for a in actions):
            return f"search[{query}]"
        elements = parse_page(observation)
        asins = [c for c in clicks if _ASIN.match(c)]
        if asins or "next >" in clicks and "buy now" not in clicks:
            return self._results(elements, clicks, asins, query, limit)
        if "buy now" in clicks:
            return self._item(clicks, query, int(info.get("turn", 0)))
        if "< prev" in clicks:  # a sub-page
            return "click[< prev]"
        if "back to search" in clicks:
            return "click[back to search]"
        return actions[0] if actions else "click[buy now]"

    def _results(
        self, elements: list[str], clicks: list[str], asins: list[str], query: str, limit: float | None
    ) -> str:
        want = _words(query)
        best, best_score = None, -1.0
        lowered = [e.lower() for e in elements]
        for rank, asin in enumerate(asins):
            if asin in self.tried:
                continue
            try:
                at = lowered.index(asin)
            except ValueError:
                continue
            title = elements[at + 1] if at + 1 < len(elements) else ""
            price_text = elements[at + 2] if at + 2 < len(elements) else ""
            prices = [float(p) for p in _PRICE_TEXT.findall(price_text)]
            if limit is not None and prices and max(prices) > limit:
                continue
            overlap = len(want & _words(title)) / max(1, len(want))
            value = overlap - 0.001 * rank
            if value > best_score:
                best, best_score = asin, value
        if best is not None and len(self.tried) < _MAX_TRIES + 1:
            self.tried.append(best)
            self.clicked = set()
            return f"click[{best}]"
        if "next >" in clicks and len(self.tried) < _MAX_TRIES + 1:
            return "click[next >]"
        if self.tried:  # nothing better: buy the first choice again
            first = self.tried[0]
            if first in asins:
                self.tried = [first] * (_MAX_TRIES + 1)
                return f"click[{first}]"
        return "click[back to search]" if "back to search" in clicks else f"click[{asins[0]}]"

    def _item(self, clicks: list[str], query: str, turn: int) -> str:
        text = query.lower()
        values = [c for c in clicks if c not in _BUTTONS]
        matched = [v for v in values if _contains(text, v)]
        matched = [v for v in matched if not any(v != w and v in w for w in matched)]
        for v in matched:
            if v not in self.clicked:
                self.clicked.add(v)
                return f"click[{v}]"
        if len(self.tried) <= _MAX_TRIES and turn < 10 and self._missing_option(text, matched):
            return "click[< prev]"
        return "click[buy now]"

    @staticmethod
    def _missing_option(text: str, matched: list[str]) -> bool:
        """Whether the instruction names more option values than this product matched."""
        named = len(re.findall(r"\b(?:in|with|made of)\s+(?:size\s+|shoe size\s+)?[a-z0-9.\- ]+?(?=,| and |$)", text))
        return named > len(matched)
