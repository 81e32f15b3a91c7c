"""Verifiers from config: :func:`build_verifier` builds one by kind name from a string or dict, so
a reward spec (``VerifierReward``'s ``verifier:``, see :func:`envgym.rewards.wrap_rewards`) names
its verifier instead of constructing it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envgym.errors import ConfigError, suggest
from envgym.rewards.verifiers.base import Verifier
from envgym.rewards.verifiers.json_schema import JsonSchemaMatch
from envgym.rewards.verifiers.judge import LLMJudge, OpenAICompatibleBackend
from envgym.rewards.verifiers.matches import ExactMatch, NormalizedMatch, NumericMatch, RegexMatch
from envgym.rewards.verifiers.unit_tests import UnitTests

#: Verifier kinds by config name.
VERIFIER_KINDS: dict[str, type[Verifier]] = {
    "exact": ExactMatch,
    "normalized": NormalizedMatch,
    "numeric": NumericMatch,
    "regex": RegexMatch,
    "json_schema": JsonSchemaMatch,
    "unit_tests": UnitTests,
    "llm_judge": LLMJudge,
}


def build_verifier(spec: Mapping[str, Any] | str) -> Verifier:
    """Build a verifier from config: ``"numeric"`` or ``{"numeric": {"abs_tol": 1e-6}}``.

    Kinds: ``exact``, ``normalized``, ``numeric``, ``regex``, ``json_schema``, ``unit_tests`` and
    ``llm_judge``, whose ``backend`` option is the options of an :class:`OpenAICompatibleBackend`
    (``{"llm_judge": {"backend": {"base_url": "http://localhost:8000/v1", "model": "m"}, "threshold":
    0.7}}``) or, in code, any :class:`~envgym.rewards.verifiers.judge.JudgeBackend` object. The judge
    stays off by default: without a backend it raises.
    """
    options: Any
    if isinstance(spec, str):
        kind, options = spec, {}
    elif isinstance(spec, Mapping) and len(spec) == 1:
        ((kind, options),) = spec.items()
        options = options or {}
    else:
        raise ConfigError(
            f"expected a verifier kind or {{kind: {{options}}}}, got {spec!r}. Kinds: {', '.join(VERIFIER_KINDS)}."
        )
    if kind not in VERIFIER_KINDS:
        raise ConfigError(
            f"unknown verifier kind {kind!r}.{suggest(str(kind), VERIFIER_KINDS)} Kinds: {', '.join(VERIFIER_KINDS)}."
        )
    if not isinstance(options, Mapping):
        raise ConfigError(f"{kind}: expected a mapping of options, got {options!r}.")
    if kind == "llm_judge":
        options = {**options, "backend": _judge_backend(options.get("backend"))}
    try:
        return VERIFIER_KINDS[kind](**options)
    except TypeError as err:
        raise ConfigError(f"{kind}: {err}. Check the option names.") from err


def _judge_backend(backend: Any) -> Any:
    """``llm_judge``'s ``backend`` option: the options of an OpenAI-compatible server, or an object."""
    if not isinstance(backend, Mapping):
        return backend  # None (the judge refuses it) or a backend object given in code
    try:
        return OpenAICompatibleBackend(**backend)
    except TypeError as err:
        raise ConfigError(
            f"llm_judge backend: {err}. Options: base_url, model, api_key_env, timeout, max_tokens."
        ) from err
