"""A deterministic LLM-judge backend for the tests (no model, no network): a test double, kept out of
the library."""

from __future__ import annotations

import re
from collections.abc import Callable

from envgym.rewards.verifiers import normalize_answer

__all__ = ["FakeJudgeBackend"]


class FakeJudgeBackend:
    """A deterministic judge for tests and examples (no model, no network).

    By default it scores the word overlap: the fraction of the reference's normalised words that
    appear in the candidate, and answers ``SCORE: <x>``. ``rule(prompt) -> response`` replaces
    that. Every prompt is kept in :attr:`prompts`.
    """

    def __init__(self, rule: Callable[[str], str] | None = None) -> None:
        self.rule = rule
        self.prompts: list[str] = []

    def complete(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if self.rule is not None:
            return self.rule(prompt)
        reference = _section(prompt, "REFERENCE")
        candidate = _section(prompt, "CANDIDATE")
        wanted = set(normalize_answer(reference).split())
        have = set(normalize_answer(candidate).split())
        score = len(wanted & have) / len(wanted) if wanted else 0.0
        return f"The candidate covers {len(wanted & have)} of {len(wanted)} reference words.\nSCORE: {score:.3f}"


def _section(prompt: str, name: str) -> str:
    match = re.search(rf"<<<{name} (\w+)>>>\n(.*?)\n<<<END \1>>>", prompt, re.DOTALL)
    return match.group(2) if match else ""
