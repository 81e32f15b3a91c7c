"""Text verifiers: exact, normalised, numeric (with tolerance) and regular-expression matches."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from envgym.errors import ConfigError, suggest
from envgym.rewards.verifiers.base import Verifier, VerifierResult, _clip, _fail, _pass, _references


class ExactMatch(Verifier):
    """The candidate equals the reference (``strip=True``: surrounding whitespace ignored)."""

    def __init__(self, reference: str | Sequence[str] | None = None, *, strip: bool = True) -> None:
        super().__init__(reference)
        self.strip = bool(strip)

    def _verify(self, candidate: str, reference: Any) -> VerifierResult:
        text = candidate.strip() if self.strip else candidate
        for ref in _references(reference):
            if text == (str(ref).strip() if self.strip else str(ref)):
                return _pass()
        return _fail(f"{_clip(text)!r} does not equal the reference.")


_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str, *, drop_articles: bool = True, drop_punctuation: bool = True) -> str:
    """Unicode NFKC, case-folded, punctuation and English articles removed, spaces collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if drop_punctuation:
        text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    if drop_articles:
        text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


class NormalizedMatch(Verifier):
    """Equal after :func:`normalize_answer` (``"The  Eiffel-Tower."`` matches ``"eiffel tower"``)."""

    def __init__(
        self,
        reference: str | Sequence[str] | None = None,
        *,
        drop_articles: bool = True,
        drop_punctuation: bool = True,
    ) -> None:
        super().__init__(reference)
        self.drop_articles = bool(drop_articles)
        self.drop_punctuation = bool(drop_punctuation)

    def _verify(self, candidate: str, reference: Any) -> VerifierResult:
        options = {"drop_articles": self.drop_articles, "drop_punctuation": self.drop_punctuation}
        text = normalize_answer(candidate, **options)
        if not text:
            return _fail("the answer is empty after normalisation.")
        for ref in _references(reference):
            if text == normalize_answer(str(ref), **options):
                return _pass()
        return _fail(f"{_clip(text)!r} does not match the reference after normalisation.")


_NUMBER_TOKEN = re.compile(
    r"[-+]?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:\s*/\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+))?"
)
_PLAIN_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_GROUPED_NUMBER = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?$")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")


def _parse_plain(text: str) -> float | None:
    text = text.strip()
    if _GROUPED_NUMBER.match(text):
        text = text.replace(",", "")
    if _PLAIN_NUMBER.match(text):
        value = float(text)
        return value if math.isfinite(value) else None
    return None


def parse_number(text: str) -> float | None:
    """The number written in ``text``, or ``None``.

    Accepts ``42``, ``-3.5``, ``1e-3``, ``1,234.5`` (proper thousands groups only), ``3/4``,
    ``\\frac{3}{4}``, a trailing ``%`` (not rescaled) and surrounding ``$``; anything else is
    ``None``. Infinite and NaN values are ``None``.
    """
    text = text.strip().strip("$").strip()
    text = _LATEX_FRAC.sub(r"(\1)/(\2)", text).replace("(", "").replace(")", "")
    text = text.removesuffix("%").strip()
    if "/" in text:
        numerator, _, denominator = text.partition("/")
        top, bottom = _parse_plain(numerator), _parse_plain(denominator)
        if top is None or bottom is None or bottom == 0:
            return None
        try:
            return float(Fraction(numerator.strip().replace(",", "")) / Fraction(denominator.strip().replace(",", "")))
        except (ValueError, ZeroDivisionError):
            return top / bottom
    return _parse_plain(text)


class NumericMatch(Verifier):
    """A number within tolerance: ``|x - ref| <= max(abs_tol, rel_tol * |ref|)``.

    Args:
        reference: the expected number (or a list of acceptable numbers).
        abs_tol: absolute tolerance.
        rel_tol: relative tolerance.
        extract: ``"strict"``: the whole answer must be a number; ``"last"``: the last number in
            the text (the content of the last ``\\boxed{}`` when there is one).
    """

    def __init__(
        self,
        reference: float | Sequence[float] | None = None,
        *,
        abs_tol: float = 1e-9,
        rel_tol: float = 1e-9,
        extract: str = "last",
    ) -> None:
        super().__init__(reference)
        for label, value in (("abs_tol", abs_tol), ("rel_tol", rel_tol)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"NumericMatch {label} must be a finite number >= 0, got {value!r}.")
        if extract not in ("strict", "last"):
            raise ConfigError(
                f"NumericMatch extract must be 'strict' or 'last', got {extract!r}.{suggest(str(extract), ('strict', 'last'))}"
            )
        self.abs_tol = float(abs_tol)
        self.rel_tol = float(rel_tol)
        self.extract = extract

    def read(self, candidate: str) -> float | None:
        """The number this verifier reads from ``candidate``."""
        if self.extract == "strict":
            return parse_number(candidate)
        boxed = _BOXED.findall(candidate)
        if boxed:
            return parse_number(boxed[-1])
        text = _LATEX_FRAC.sub(r"\1/\2", candidate)
        for token in reversed(_NUMBER_TOKEN.findall(text)):
            value = parse_number(token)
            if value is not None:
                return value
        return None

    def _verify(self, candidate: str, reference: Any) -> VerifierResult:
        value = self.read(candidate)
        if value is None:
            return _fail(f"no number found in {_clip(candidate)!r}.")
        for ref in _references(reference):
            expected = parse_number(ref) if isinstance(ref, str) else ref
            if isinstance(expected, bool) or not isinstance(expected, (int, float)) or not math.isfinite(expected):
                raise ConfigError(f"NumericMatch reference must be a finite number, got {ref!r}.")
            if abs(value - expected) <= max(self.abs_tol, self.rel_tol * abs(expected)):
                return _pass(f"{value!r} is within tolerance of {expected!r}.")
        return _fail(f"{value!r} is not within tolerance of the reference.")


class RegexMatch(Verifier):
    """The candidate matches a regular expression (``fullmatch`` by default, else ``search``).

    The pattern comes from the environment's config, not from the agent; candidates longer
    than ``max_length`` fail without being matched (a bound on backtracking time).
    """

    def __init__(
        self,
        pattern: str | None = None,
        *,
        full: bool = True,
        ignore_case: bool = False,
        max_length: int = 100_000,
    ) -> None:
        self.flags = re.IGNORECASE if ignore_case else 0
        self.full = bool(full)
        self.max_length = int(max_length)
        super().__init__(self._compile(pattern) if pattern is not None else None)

    def _compile(self, pattern: Any) -> re.Pattern[str]:
        if isinstance(pattern, re.Pattern):
            return pattern
        if not isinstance(pattern, str):
            raise ConfigError(f"RegexMatch: expected a regular expression string, got {pattern!r}.")
        try:
            return re.compile(pattern, self.flags)
        except re.error as err:
            raise ConfigError(f"RegexMatch: {pattern!r} is not a valid regular expression: {err}.") from err

    def _verify(self, candidate: str, reference: Any) -> VerifierResult:
        if len(candidate) > self.max_length:
            return _fail(f"the answer is {len(candidate)} characters long; the limit is {self.max_length}.")
        pattern = self._compile(reference)
        text = candidate.strip()
        matched = pattern.fullmatch(text) if self.full else pattern.search(text)
        if matched:
            return _pass()
        return _fail(f"{_clip(text)!r} does not match {pattern.pattern!r}.")
