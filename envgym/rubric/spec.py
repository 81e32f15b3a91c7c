"""Rubric specs: build a :class:`~envgym.rubric.nodes.Rubric` from a dict or YAML
(:func:`build_rubric`, :func:`load_rubric`) and write one back (:func:`dump_rubric`). The grammar
is documented in :mod:`envgym.rubric`."""

from __future__ import annotations

import importlib
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envgym.errors import suggest
from envgym.rubric.context import REWARD_CONTEXT_FIELDS
from envgym.rubric.nodes import (
    _COMPARISONS,
    _FLAG_FIELDS,
    AllOf,
    AnyOf,
    AtEnd,
    Clip,
    Compare,
    Condition,
    Const,
    ContextValue,
    Flag,
    FunctionRubric,
    Gate,
    Inner,
    Lexicographic,
    Not,
    Product,
    Rubric,
    RubricError,
    RubricSpec,
    Sum,
    Term,
    TextMatches,
    WeightedSum,
    _coerce,
    _coerce_condition,
    _component_name,
    _number,
)


def _check_options(spec: Mapping[str, Any], op: str, allowed: Sequence[str], path: str) -> None:
    for key in spec:
        if key != op and key not in allowed:
            valid = ", ".join(map(repr, allowed)) if allowed else "none"
            raise RubricError(
                f"{path}: unknown option {key!r} for {op!r}.{suggest(str(key), allowed)} Options of {op!r}: {valid}."
            )


def _spec_list(value: Any, path: str, what: str = "specs") -> list[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise RubricError(f"{path}: expected a non-empty list of {what}, got {value!r}.")
    return list(value)


def _b_term(spec: Mapping[str, Any], path: str) -> Rubric:
    return Term(_component_name(spec["term"], f"{path}.term"))


def _b_const(spec: Mapping[str, Any], path: str) -> Rubric:
    return Const(_number(spec["const"], f"{path}.const"))


def _b_inner(spec: Mapping[str, Any], path: str) -> Rubric:
    if spec["inner"] not in (True, None, {}):
        raise RubricError(f"{path}.inner: expected `inner: true`, got {spec['inner']!r}.")
    return Inner()


def _b_context(spec: Mapping[str, Any], path: str) -> Rubric:
    field = spec["context"]
    if field in _FLAG_FIELDS:
        raise RubricError(
            f"{path}.context: {field!r} is a yes/no flag, not a number; use it as a gate condition "
            f"({{gate: {{context: {field}}}, then: ...}})."
        )
    try:
        return ContextValue(field, default=_number(spec.get("default", 0.0), f"{path}.default"))
    except RubricError as err:
        raise RubricError(f"{path}.{err}") from None


def _b_sum(spec: Mapping[str, Any], path: str) -> Rubric:
    items = _spec_list(spec["sum"], f"{path}.sum")
    return Sum(*(_build(s, f"{path}.sum[{i}]") for i, s in enumerate(items)))


def _b_product(spec: Mapping[str, Any], path: str) -> Rubric:
    items = _spec_list(spec["product"], f"{path}.product")
    return Product(*(_build(s, f"{path}.product[{i}]") for i, s in enumerate(items)))


def _b_weighted_sum(spec: Mapping[str, Any], path: str) -> Rubric:
    body = spec["weighted_sum"]
    where = f"{path}.weighted_sum"
    rest = spec.get("rest")
    pairs: list[tuple[RubricSpec, float]] = []
    if isinstance(body, Mapping):
        if not body:
            raise RubricError(f"{where}: expected at least one weighted component, got an empty mapping.")
        for name, weight in body.items():
            pairs.append((_component_name(name, f"{where}.{name}"), _number(weight, f"{where}.{name}")))
    else:
        for i, item in enumerate(_spec_list(body, where, "{rubric: spec, weight: number} items")):
            at = f"{where}[{i}]"
            if not isinstance(item, Mapping) or set(item) != {"rubric", "weight"}:
                raise RubricError(f"{at}: expected {{rubric: spec, weight: number}}, got {item!r}.")
            pairs.append((_build(item["rubric"], f"{at}.rubric"), _number(item["weight"], f"{at}.weight")))
    return WeightedSum(pairs, rest=None if rest is None else _number(rest, f"{path}.rest"))


def _b_clip(spec: Mapping[str, Any], path: str) -> Rubric:
    low = spec.get("min")
    high = spec.get("max")
    if low is None and high is None:
        raise RubricError(f"{path}: expected at least one of min/max next to clip, got neither.")
    low_value = None if low is None else _number(low, f"{path}.min")
    high_value = None if high is None else _number(high, f"{path}.max")
    if low_value is not None and high_value is not None and low_value > high_value:
        raise RubricError(f"{path}: min must not exceed max, got min={low!r} and max={high!r}.")
    return Clip(_build(spec["clip"], f"{path}.clip"), low=low_value, high=high_value)


def _b_gate(spec: Mapping[str, Any], path: str) -> Rubric:
    if "then" not in spec:
        raise RubricError(f"{path}: a gate needs `then:` (the reward when the condition holds), got none.")
    return Gate(
        build_condition(spec["gate"], path=f"{path}.gate"),
        then=_build(spec["then"], f"{path}.then"),
        otherwise=_build(spec.get("else", 0.0), f"{path}.else"),
    )


def _b_lexicographic(spec: Mapping[str, Any], path: str) -> Rubric:
    items = _spec_list(spec["lexicographic"], f"{path}.lexicographic", "objectives")
    epsilon = _number(spec.get("epsilon", 1e-3), f"{path}.epsilon")
    if not 0.0 < epsilon < 1.0:
        raise RubricError(f"{path}.epsilon: expected a number in (0, 1), got {spec.get('epsilon')!r}.")
    return Lexicographic([_build(s, f"{path}.lexicographic[{i}]") for i, s in enumerate(items)], epsilon=epsilon)


def _b_at_end(spec: Mapping[str, Any], path: str) -> Rubric:
    try:
        return AtEnd(_build(spec["at_end"], f"{path}.at_end"))
    except RubricError as err:
        if str(err).startswith(path):
            raise
        raise RubricError(f"{path}.{err}") from None


def _b_function(spec: Mapping[str, Any], path: str) -> Rubric:
    target = spec["function"]
    where = f"{path}.function"
    if not isinstance(target, str) or ":" not in target:
        raise RubricError(f"{where}: expected 'package.module:function', got {target!r}.")
    module_name, _, attribute = target.partition(":")
    try:
        fn: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError) as err:
        raise RubricError(
            f"{where}: cannot import {target!r}: {err}. Check the module path and function name."
        ) from err
    names = spec.get("components", ())
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise RubricError(f"{path}.components: expected a list of component names, got {names!r}.")
    return FunctionRubric(fn, components=[_component_name(n, f"{path}.components") for n in names])


_BUILDERS: dict[str, tuple[Callable[[Mapping[str, Any], str], Rubric], tuple[str, ...]]] = {
    "term": (_b_term, ()),
    "const": (_b_const, ()),
    "inner": (_b_inner, ()),
    "context": (_b_context, ("default",)),
    "sum": (_b_sum, ()),
    "product": (_b_product, ()),
    "weighted_sum": (_b_weighted_sum, ("rest",)),
    "clip": (_b_clip, ("min", "max")),
    "gate": (_b_gate, ("then", "else")),
    "lexicographic": (_b_lexicographic, ("epsilon",)),
    "at_end": (_b_at_end, ()),
    "function": (_b_function, ("components",)),
}
#: Operator names of the spec grammar.
OPERATORS: tuple[str, ...] = tuple(_BUILDERS)


def _build(spec: Any, path: str) -> Rubric:
    if isinstance(spec, Mapping):
        return _build_mapping(spec, path)
    return _coerce(spec, path)


def as_rubric(spec: RubricSpec, *, path: str = "reward") -> Rubric:
    """Turn a spec (rubric, component name, number, mapping, callable) into a rubric, unvalidated."""
    return _build(spec, path)


def _build_mapping(spec: Mapping[str, Any], path: str) -> Rubric:
    if not spec:
        raise RubricError(f"{path}: expected component weights or one operator ({', '.join(OPERATORS)}), got {{}}.")
    for key in spec:
        if not isinstance(key, str):
            raise RubricError(f"{path}: keys must be strings (component names or operators), got {key!r}.")
    ops = [key for key in spec if key in _BUILDERS]
    if len(ops) > 1:
        raise RubricError(
            f"{path}: one operator per mapping, got {', '.join(map(repr, ops))}. Nest them, e.g. {{sum: [...]}}."
        )
    if ops:
        op = ops[0]
        builder, options = _BUILDERS[op]
        _check_options(spec, op, options, path)
        return builder(spec, path)
    # Plain component weights: the meaning of make(id, reward={name: weight}).
    weights: dict[str, float] = {}
    for key, value in spec.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            hint = suggest(key, OPERATORS)
            raise RubricError(
                f"{path}.{key}: expected a finite number (the weight of component {key!r}) or an operator, "
                f"got {value!r}.{hint} A rubric mapping is either component weights or one operator: "
                f"{', '.join(OPERATORS)}."
            )
        weights[key] = _number(value, f"{path}.{key}", what="a finite number (a component weight)")
    return WeightedSum(weights, rest=1.0)


def build_condition(spec: Any, *, path: str = "condition") -> Condition:
    """Build a :class:`Condition` from its spec (see the module docstring)."""
    if not isinstance(spec, Mapping):
        return _coerce_condition(spec, path)
    if not spec:
        raise RubricError(
            f"{path}: expected a condition such as {{component: format_reward, '>=': 0}} or "
            f"{{context: success}}, got {spec!r}."
        )
    keys = set(spec)
    if keys == {"all"} or keys == {"any"}:
        (key,) = keys
        items = _spec_list(spec[key], f"{path}.{key}", "conditions")
        built = [build_condition(c, path=f"{path}.{key}[{i}]") for i, c in enumerate(items)]
        return AllOf(*built) if key == "all" else AnyOf(*built)
    if keys == {"not"}:
        return Not(build_condition(spec["not"], path=f"{path}.not"))
    if "text_matches" in keys:
        _check_options(spec, "text_matches", ("ignore_case",), path)
        try:
            return TextMatches(spec["text_matches"], ignore_case=bool(spec.get("ignore_case", False)))
        except RubricError as err:
            raise RubricError(f"{path}: {err}") from None
    subjects = [k for k in ("component", "rubric", "context") if k in keys]
    if len(subjects) != 1:
        valid = "component, rubric, context, text_matches, all, any, not"
        unknown = sorted(k for k in keys if k not in _COMPARISONS)
        hint = suggest(unknown[0], valid.split(", ")) if unknown else ""
        raise RubricError(f"{path}: expected exactly one of {valid} in a condition, got {sorted(keys)!r}.{hint}")
    subject = subjects[0]
    ops = [k for k in keys if k in _COMPARISONS]
    extra = sorted(keys - {subject} - set(ops))
    if extra:
        raise RubricError(
            f"{path}: unknown key(s) {', '.join(map(repr, extra))} in a condition.{suggest(extra[0], _COMPARISONS)} "
            f"Comparisons: {' '.join(_COMPARISONS)}."
        )
    if subject == "context" and not ops:
        try:
            return Flag(spec["context"])
        except RubricError as err:
            raise RubricError(f"{path}: {err}") from None
    if len(ops) != 1:
        raise RubricError(
            f"{path}: expected exactly one comparison ({' '.join(_COMPARISONS)}) next to {subject!r}, got {sorted(ops)!r}."
        )
    op = ops[0]
    where = f"{path}.{subject}"
    if subject == "component":
        value: Rubric = Term(_component_name(spec["component"], where))
    elif subject == "rubric":
        value = _build(spec["rubric"], where)
    else:
        try:
            value = ContextValue(spec["context"])
        except RubricError as err:
            raise RubricError(f"{where}: {err}") from None
    return Compare(value, op, _number(spec[op], f"{path}.{op}"))


def build_rubric(
    spec: RubricSpec,
    *,
    components: Iterable[str] | None = None,
    context: Iterable[str] = REWARD_CONTEXT_FIELDS,
    owner: str = "the environment",
) -> Rubric:
    """Build a rubric from its spec and validate it against what the caller provides.

    Args:
        spec: a rubric, a component name, a number, a mapping (see the module docstring) or a
            callable ``(components, context) -> float``.
        components: the components the environment emits (``None``: names are not checked).
        context: the context fields the caller passes (:data:`REWARD_CONTEXT_FIELDS` for
            ``TextEnv``, :data:`WRAPPER_CONTEXT_FIELDS` for the reward wrappers).
        owner: how errors name the environment (``"SokobanEnv"``).

    Raises:
        RubricError: the spec is malformed, or reads a component or context field not provided.
    """
    rubric = _build(spec, "reward")
    rubric.validate_components(components, context=context, owner=owner)
    return rubric


def load_rubric(
    source: str | Path,
    *,
    components: Iterable[str] | None = None,
    context: Iterable[str] = REWARD_CONTEXT_FIELDS,
    owner: str = "the environment",
) -> Rubric:
    """Build a rubric from YAML: a :class:`~pathlib.Path`, a ``*.yaml``/``*.yml``/``*.json`` file name, or YAML text.

    Raises:
        RubricError: the file cannot be read, the YAML is malformed (with line and column), or the
            spec is invalid (see :func:`build_rubric`).
    """
    is_file = isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and source.strip().endswith((".yaml", ".yml", ".json"))
    )
    if is_file:
        path = Path(source)
        where = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise RubricError(f"cannot read the rubric file {where!r}: {err.strerror or err}. Check the path.") from err
    elif isinstance(source, str):
        text, where = source, "the rubric YAML"
    else:
        raise RubricError(f"load_rubric: expected YAML text or a file path, got {type(source).__name__}.")
    import yaml  # here, not at the top: the first gymnasium.make imports this module

    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        location = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise RubricError(f"malformed YAML in {where}{location}: {problem}. Fix the YAML syntax.") from err
    if spec is None:
        raise RubricError(f"{where} is empty: expected a rubric spec such as `sum: [success_reward, format_reward]`.")
    return build_rubric(spec, components=components, context=context, owner=owner)


def dump_rubric(rubric: Rubric) -> str:
    """The rubric as YAML text that :func:`load_rubric` reads back."""
    import yaml

    return str(yaml.safe_dump(rubric.to_spec(), sort_keys=False))
