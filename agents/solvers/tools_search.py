"""Researcher for envgym/Tools-Search-*: parses the question's chain, then looks each hop up.

It reads only what any agent reads: the question (``info["task"]["question"]``, or the
``Question:`` line of the first observation) and the tool results. The questions are written in
a small template language (a frame such as ``In what year was X founded?`` or ``Name X.`` around
nested phrases such as ``the founder of X``), which it parses honestly from the text, innermost
phrase last: the start is an entity's name. Then:

* hop 1: ``search`` for the start's name; when the result titled exactly so has the needed
  fact in its snippet, that is enough, else it ``open``s the article;
* every later hop: ``open`` the entity the previous article named (articles name entities by
  their exact titles), and read the relation or the fact asked from its text;
* ``answer`` with the last entity's name or the fact.

A lookup it cannot read (an article without the expected sentence, an unknown title) falls back
to a search for the name and the best result's article; if that fails too it answers what it has.
"""

from __future__ import annotations

import json
import re
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "parse_question"]

#: The question frames: (pattern, what is asked of the last entity).
_FRAMES = (
    (re.compile(r"^In what year was (.+) founded\?$"), "founded"),
    (re.compile(r"^In what year was (.+) born\?$"), "born"),
    (re.compile(r"^In what year was (.+) released\?$"), "released"),
    (re.compile(r"^What is the population of (.+)\?$"), "population"),
    (re.compile(r"^What is the official language of (.+)\?$"), "language"),
    (re.compile(r"^How many kilometres long is (.+)\?$"), "length"),
    (re.compile(r"^Name (.+)\.$"), "name"),
)
#: The nested phrases: (pattern, relation).
_PHRASES = (
    (re.compile(r"^the company that makes (.+)$"), "maker"),
    (re.compile(r"^the founder of (.+)$"), "founder"),
    (re.compile(r"^the city where (.+) is headquartered$"), "headquarters"),
    (re.compile(r"^the city where (.+) was born$"), "birthplace"),
    (re.compile(r"^the university where (.+) studied$"), "university"),
    (re.compile(r"^the city where (.+) is located$"), "university_city"),
    (re.compile(r"^the country of (.+)$"), "country"),
    (re.compile(r"^the river that flows through (.+)$"), "river"),
    (re.compile(r"^the capital of (.+)$"), "capital"),
    (re.compile(r"^the country where (.+) rises$"), "source"),
)
#: How an article states each relation and fact.
_READ = {
    "maker": re.compile(r" made by (.+?)\. It was released"),
    "founder": re.compile(r" founded in \d+ by (.+?)\. It is headquartered"),
    "headquarters": re.compile(r"It is headquartered in (.+?)\."),
    "birthplace": re.compile(r"\(born \d+ in (.+?)\)"),
    "university": re.compile(r" studied at (.+?)\."),
    "university_city": re.compile(r" is a university in (.+?), founded in"),
    "country": re.compile(r" is a city in (.+?)\. It lies on"),
    "river": re.compile(r"It lies on the (.+?)\. It was founded"),
    "capital": re.compile(r"Its capital is (.+?)\. The official"),
    "source": re.compile(r" rises in (.+?)\. It is"),
    "founded": re.compile(r"founded in (\d+)"),
    "born": re.compile(r"\(born (\d+)"),
    "released": re.compile(r"released in (\d+)"),
    "population": re.compile(r"population of ([\d,]+)\."),
    "language": re.compile(r"The official language is (.+?)\."),
    "length": re.compile(r"It is (\d+) kilometres long"),
}
_QUESTION = re.compile(r"^Question: (.+)$", re.MULTILINE)
_RESULT = re.compile(r"^\d+\. (.+?): (.*)$", re.MULTILINE)


def parse_question(text: str) -> tuple[str, list[str], str] | None:
    """(start name, relations from the start outwards, what is asked), or None if unreadable."""
    text = text.strip()
    for frame, asked in _FRAMES:
        m = frame.match(text)
        if m is None:
            continue
        phrase, relations = m.group(1), []
        while True:
            for pattern, relation in _PHRASES:
                inner = pattern.match(phrase)
                if inner is not None:
                    relations.append(relation)
                    phrase = inner.group(1)
                    break
            else:
                break
        start = phrase.removeprefix("the ")
        return start, relations[::-1], asked
    return None


def _call(name: str, **arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments})


class Solver(Policy):
    """Looks up the question's chain hop by hop (see the module docstring)."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self._plan: list[str] = []  # relations still to follow, then the fact asked (or nothing for a name)
        self._asked = "name"
        self._current = ""  # the entity whose article is wanted next
        self._stage = ""  # what the last call was: "search", "open", "fallback"
        self._question = ""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        question = (info.get("task") or {}).get("question")
        if question is None:
            found = _QUESTION.findall(observation)
            question = found[-1] if found else ""
        if int(info.get("turn", 0)) == 0 or question != self._question:
            return self._start(question)
        want = self._plan[0] if self._plan else None
        if want is None:
            return _call("answer", text=self._current)
        value = self._read(observation, want)
        if value is None:
            if self._stage == "search":
                self._stage = "open"
                return _call("open", title=self._current)
            if self._stage == "open":  # the title did not open: search for the name, open the best hit
                self._stage = "fallback"
                return _call("search", query=self._current)
            if self._stage == "fallback":
                hits = _RESULT.findall(observation)
                if hits:
                    self._current = hits[0][0]
                    self._stage = "open"
                    return _call("open", title=self._current)
            return _call("answer", text=self._current)
        self._plan.pop(0)
        if not self._plan and want == self._asked:
            return _call("answer", text=value)
        self._current = value
        if not self._plan:  # a name was asked: the last relation named it
            return _call("answer", text=value)
        self._stage = "open"
        return _call("open", title=value)

    def _start(self, question: str) -> str:
        self._question = question
        parsed = parse_question(question)
        if parsed is None:
            return _call("answer", text="unknown")
        start, relations, asked = parsed
        self._current, self._asked = start, asked
        self._plan = relations + ([] if asked == "name" else [asked])
        self._stage = "search"
        return _call("search", query=start)

    def _read(self, observation: str, want: str) -> str | None:
        """The value of ``want`` for the current entity, from a search result or an article."""
        pattern = _READ[want]
        if observation.startswith("Tool result (search)"):
            for title, snippet in _RESULT.findall(observation):
                if title.lower() == self._current.lower():
                    m = pattern.search(snippet.removesuffix("..."))  # a cut word must not pass for a whole one
                    return m.group(1) if m else None
            return None
        if observation.startswith("Tool result (open)"):
            head, _, body = observation.partition("\n")
            if head.removeprefix("Tool result (open): ").lower() != self._current.lower():
                return None
            m = pattern.search(body)
            return m.group(1) if m else None
        return None
