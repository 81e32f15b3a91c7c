"""The verifier contract: :class:`Verifier` (``verify(candidate, reference=None)``) and the
structured :class:`VerifierResult` every verifier returns."""

from __future__ import annotations

import abc
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from envgym.errors import ConfigError

Status = Literal["passed", "failed", "timeout", "error"]


@dataclass(frozen=True, slots=True)
class VerifierResult:
    """The outcome of one verification.

    Attributes:
        status: ``passed``, ``failed``, ``timeout`` (the candidate ran too long) or ``error``.
        score: in [0, 1]; 1 for a pass, the fraction of passed tests for :class:`UnitTests`, the
            judge's score for :class:`LLMJudge`.
        detail: one or two sentences saying why.
        output: an excerpt of what the candidate printed (sandboxed verifiers only).
        tests_passed: tests that passed (:class:`UnitTests`).
        tests_total: tests that ran (:class:`UnitTests`).
        duration_s: wall time of the verification.
        infrastructure: the verification itself failed (not the candidate).
    """

    status: Status
    score: float
    detail: str = ""
    output: str = ""
    tests_passed: int | None = None
    tests_total: int | None = None
    duration_s: float = 0.0
    infrastructure: bool = False

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (for ``info`` and trajectories)."""
        return asdict(self)


def _pass(detail: str = "") -> VerifierResult:
    return VerifierResult("passed", 1.0, detail)


def _fail(detail: str) -> VerifierResult:
    return VerifierResult("failed", 0.0, detail)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Verifier(abc.ABC):
    """Base class: ``verify(candidate, reference=None) -> VerifierResult``."""

    def __init__(self, reference: Any = None) -> None:
        self.reference = reference

    @abc.abstractmethod
    def _verify(self, candidate: str, reference: Any) -> VerifierResult:
        """Check a text candidate against a (non-``None``) reference."""

    def verify(self, candidate: Any, reference: Any = None) -> VerifierResult:
        """Check ``candidate``; ``reference`` overrides the one given at construction."""
        ref = self.reference if reference is None else reference
        if ref is None:
            raise ConfigError(
                f"{type(self).__name__}: no reference to check against; pass reference= to the constructor or to verify()."
            )
        if not isinstance(candidate, str):
            return _fail(f"expected the answer as text, got {type(candidate).__name__}.")
        started = time.perf_counter()
        result = self._verify(candidate, ref)
        if result.duration_s == 0.0:
            result = VerifierResult(**{**asdict(result), "duration_s": time.perf_counter() - started})
        return result

    __call__ = verify


def _references(reference: Any) -> list[Any]:
    if isinstance(reference, (list, tuple)):
        if not reference:
            raise ConfigError("the list of acceptable answers is empty; give at least one reference.")
        return list(reference)
    return [reference]
