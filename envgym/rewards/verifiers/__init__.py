"""Verifiers: check an agent's answer against a reference and return a structured result.

Every verifier has ``verify(candidate, reference=None) -> VerifierResult`` (also callable);
the reference given at construction is the default. Results carry a status (``passed``,
``failed``, ``timeout``, ``error``), a score in [0, 1], a short detail and, where something
ran, an output excerpt. ``infrastructure=True`` marks failures that say nothing about the
answer (a judge backend that is down, a sandbox that could not start): report them apart, never
as a silent zero.

=====================  ====================================================================
:class:`ExactMatch`    the text equals the reference (after stripping surrounding whitespace)
:class:`NormalizedMatch`  equal after Unicode, case, punctuation, article and space normalisation
:class:`NumericMatch`  a number within absolute/relative tolerance (fractions, ``1,234``,
                       ``\\boxed{}``, scientific notation)
:class:`RegexMatch`    the text matches a regular expression (full match by default)
:class:`JsonSchemaMatch`  the text is JSON valid under a schema (a documented subset of JSON
                       Schema, checked when the verifier is built; no extra dependency)
:class:`UnitTests`     test code run against the candidate code in a subprocess sandbox
:class:`LLMJudge`      an LLM judge through a pluggable :class:`JudgeBackend` (off by default)
=====================  ====================================================================

A reference may be a list of acceptable answers for the match verifiers: any one passes.
:func:`build_verifier` builds any of them from config by kind name.

Modules: :mod:`~envgym.rewards.verifiers.base` (the contract), :mod:`~envgym.rewards.verifiers.matches`,
:mod:`~envgym.rewards.verifiers.json_schema`, :mod:`~envgym.rewards.verifiers.unit_tests`,
:mod:`~envgym.rewards.verifiers.judge` and :mod:`~envgym.rewards.verifiers.spec` (by name).
"""

from __future__ import annotations

from envgym.rewards.verifiers.base import Verifier, VerifierResult
from envgym.rewards.verifiers.json_schema import JsonSchemaMatch
from envgym.rewards.verifiers.judge import JudgeBackend, LLMJudge, OpenAICompatibleBackend
from envgym.rewards.verifiers.matches import (
    ExactMatch,
    NormalizedMatch,
    NumericMatch,
    RegexMatch,
    normalize_answer,
    parse_number,
)
from envgym.rewards.verifiers.spec import VERIFIER_KINDS, build_verifier
from envgym.rewards.verifiers.unit_tests import UnitTests

__all__ = [
    "VERIFIER_KINDS",
    "ExactMatch",
    "JsonSchemaMatch",
    "JudgeBackend",
    "LLMJudge",
    "NormalizedMatch",
    "NumericMatch",
    "OpenAICompatibleBackend",
    "RegexMatch",
    "UnitTests",
    "Verifier",
    "VerifierResult",
    "build_verifier",
    "normalize_answer",
    "parse_number",
]
