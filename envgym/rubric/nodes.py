"""The rubric language's nodes: :class:`Rubric` trees (terms, sums, gates, clips, ...) and the
conditions a gate tests. Python code builds them directly; specs (mappings, YAML) go through
:mod:`envgym.rubric.spec`, which imports this module and never the other way round."""

from __future__ import annotations

import abc
import math
import numbers
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Union

from envgym.errors import ConfigError, InvalidKwargsError, suggest
from envgym.rubric.context import REWARD_CONTEXT_FIELDS, RewardContext, StepRecord

__all__ = [
    "AllOf",
    "AnyOf",
    "AtEnd",
    "Clip",
    "Compare",
    "Condition",
    "Const",
    "ContextValue",
    "Flag",
    "FunctionRubric",
    "Gate",
    "Inner",
    "Lexicographic",
    "Not",
    "Product",
    "Rubric",
    "RubricError",
    "RubricSpec",
    "Sum",
    "Term",
    "TextMatches",
    "WeightedSum",
]


class RubricError(ConfigError, InvalidKwargsError):
    """A rubric spec or rubric object is malformed or does not fit the environment.

    Derives from both :class:`~envgym.errors.ConfigError` (a bad config file) and
    :class:`~envgym.errors.InvalidKwargsError` (a bad ``make(..., reward=...)`` argument), so
    callers catching either keep working.
    """


_FLAG_FIELDS = ("success", "action_valid", "terminated", "truncated")
_NUMERIC_FIELDS = ("progress", "turn", "base_reward")
_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


RubricSpec = Union["Rubric", str, float, int, Mapping[str, Any], Callable[..., float]]


# --------------------------------------------------------------------------------------- helpers
def _number(value: Any, where: str, *, what: str = "a finite number") -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        hint = ""
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                pass
            else:
                hint = " (a string: YAML reads exponents without a dot, like 1e-3, as text; write 1.0e-3)"
        raise RubricError(f"{where}: expected {what}, got {value!r}{hint}.")
    result = float(value)
    if not math.isfinite(result):
        raise RubricError(f"{where}: expected {what}, got {value!r}. Use a finite value such as 1.0.")
    return result


def _component_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise RubricError(f"{where}: expected a component name such as 'success_reward', got {name!r}.")
    return name


# ----------------------------------------------------------------------------------------- nodes
class _Node(abc.ABC):
    """What rubrics and conditions share: children, required components and context, a spec."""

    def children(self) -> tuple[tuple[str, _Node], ...]:
        """``(label, child)`` pairs; labels form the spec path shown in errors (``sum[1]``)."""
        return ()

    def own_components(self) -> frozenset[str]:
        """Components this node itself reads (not its children)."""
        return frozenset()

    def own_needs(self) -> frozenset[str]:
        """Context fields this node itself reads (not its children)."""
        return frozenset()

    @property
    def components(self) -> frozenset[str]:
        """Every component the tree reads: the environment must emit all of them."""
        found = set(self.own_components())
        for _, child in self.children():
            found |= child.components
        return frozenset(found)

    def requirements(self) -> frozenset[str]:
        """Every context field the tree reads."""
        found = set(self.own_needs())
        for _, child in self.children():
            found |= child.requirements()
        return frozenset(found)

    def walk(self, path: str = "reward") -> Iterator[tuple[str, _Node]]:
        """Every node of the tree with its spec path, parents first."""
        yield path, self
        for label, child in self.children():
            yield from child.walk(f"{path}.{label}")

    def validate_components(
        self,
        available: Iterable[str] | None,
        *,
        context: Iterable[str] = REWARD_CONTEXT_FIELDS,
        owner: str = "the environment",
        path: str = "reward",
    ) -> _Node:
        """Check that every component read is in ``available`` and every context field in ``context``.

        Raises:
            RubricError: naming the first node that reads something the caller cannot provide.
        """
        names = None if available is None else tuple(available)
        fields = frozenset(context)
        for where, node in self.walk(path):
            if names is not None:
                for name in sorted(node.own_components()):
                    if name not in names:
                        listing = ", ".join(names) if names else "none"
                        if name.endswith((".yaml", ".yml", ".json")):
                            listing += ". To read a rubric file, pass load_rubric(path) instead of the path"
                        raise RubricError(
                            f"{where}: the rubric reads the component {name!r}, which {owner} does not emit."
                            f"{suggest(name, names)} Components it emits: {listing}. Fix the name, or add the "
                            f"wrapper that emits it (envgym.rewards.wrappers) before applying the rubric."
                        )
            missing = sorted(node.own_needs() - fields)
            if missing:
                raise RubricError(
                    f"{where}: {type(node).__name__} reads {', '.join(map(repr, missing))} from the reward context, "
                    f"which {owner} does not provide (it provides {', '.join(sorted(fields))}). Apply this rubric "
                    f"with envgym.rewards.ApplyRubric(env, rubric), which passes the episode history, truncation "
                    f"and the wrapped scalar, instead of make(..., reward=...)."
                )
        return self

    @abc.abstractmethod
    def to_spec(self) -> Any:
        """A plain, YAML-serialisable spec that :func:`build_rubric` turns back into this tree."""

    def __repr__(self) -> str:
        try:
            spec = self.to_spec()
        except RubricError:
            spec = "..."
        return f"{type(self).__name__}({spec!r})"


class Rubric(_Node):
    """Base class of rubric nodes: ``rubric(components, context) -> float``.

    Operators build trees: ``a + b`` (:class:`Sum`), ``a - b``, ``-a``, ``2.0 * a``
    (:class:`WeightedSum`), ``a * b`` (:class:`Product`), and ``a >= 0`` (a :class:`Compare`
    condition for :class:`Gate`). Numbers and component names are accepted wherever a rubric is.
    """

    @abc.abstractmethod
    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        """The scalar reward of one step."""

    def priorities(self, components: Mapping[str, float], context: RewardContext) -> tuple[float, ...]:
        """The priority tuple (highest first); a one-element tuple except for :class:`Lexicographic`."""
        return (float(self(components, context)),)

    # operator sugar -------------------------------------------------------------------------
    def __add__(self, other: RubricSpec) -> Rubric:
        return Sum(self, other)

    def __radd__(self, other: RubricSpec) -> Rubric:
        return Sum(other, self)

    def __sub__(self, other: RubricSpec) -> Rubric:
        return Sum(self, WeightedSum([(_coerce(other, "reward"), -1.0)]))

    def __rsub__(self, other: RubricSpec) -> Rubric:
        return Sum(other, WeightedSum([(self, -1.0)]))

    def __neg__(self) -> Rubric:
        return WeightedSum([(self, -1.0)])

    def __mul__(self, other: RubricSpec) -> Rubric:
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            return WeightedSum([(self, _number(other, "weight"))])
        return Product(self, other)

    def __rmul__(self, other: RubricSpec) -> Rubric:
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            return WeightedSum([(self, _number(other, "weight"))])
        return Product(other, self)

    def __lt__(self, value: float) -> Condition:
        return Compare(self, "<", value)

    def __le__(self, value: float) -> Condition:
        return Compare(self, "<=", value)

    def __gt__(self, value: float) -> Condition:
        return Compare(self, ">", value)

    def __ge__(self, value: float) -> Condition:
        return Compare(self, ">=", value)

    # Comparisons build conditions, so rubrics are compared by identity and stay hashable.
    __hash__ = object.__hash__


def _coerce(spec: Any, path: str) -> Rubric:
    """What node constructors accept in place of a rubric: a rubric, a component name, a number or
    a callable. Spec mappings (the YAML language) are :func:`envgym.rubric.build_rubric`'s."""
    if isinstance(spec, Rubric):
        return spec
    if isinstance(spec, Condition):
        raise RubricError(f"{path}: got a condition ({spec!r}) where a rubric was expected; wrap it in a gate.")
    if isinstance(spec, str):
        return Term(_component_name(spec, path))
    if isinstance(spec, bool):
        raise RubricError(f"{path}: expected a rubric (a component name, a number or a mapping), got {spec!r}.")
    if isinstance(spec, numbers.Real):
        return Const(_number(spec, path))
    if isinstance(spec, Mapping):
        raise RubricError(
            f"{path}: got a spec mapping ({dict(spec)!r}); rubric objects take rubrics, component names, numbers "
            "and callables. Build specs with envgym.rubric.build_rubric(...)."
        )
    if isinstance(spec, (list, tuple)):
        raise RubricError(
            f"{path}: a bare list is not a rubric, got {spec!r}. Say how to combine it: {{sum: [...]}}, "
            f"{{product: [...]}} or {{lexicographic: [...]}}."
        )
    if callable(spec):
        return FunctionRubric(spec)
    raise RubricError(
        f"{path}: expected a rubric (a component name, a number, a mapping or a callable), got {type(spec).__name__}."
    )


def _coerce_condition(spec: Any, path: str) -> Condition:
    """What node constructors accept in place of a condition: a condition or a context flag name."""
    if isinstance(spec, Condition):
        return spec
    if isinstance(spec, str):
        try:
            return Flag(spec)
        except RubricError as err:
            raise RubricError(f"{path}: {err}") from None
    if isinstance(spec, Mapping):
        raise RubricError(
            f"{path}: got a spec mapping ({dict(spec)!r}); pass a condition such as Term('format_reward') >= 0 or "
            "a flag name, or build specs with envgym.rubric.build_condition(...)."
        )
    raise RubricError(
        f"{path}: expected a condition such as {{component: format_reward, '>=': 0}} or "
        f"{{context: success}}, got {spec!r}."
    )


class Term(Rubric):
    """The value of one component."""

    def __init__(self, name: str) -> None:
        self.name = _component_name(name, "Term")

    def own_components(self) -> frozenset[str]:
        return frozenset((self.name,))

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        try:
            return float(components[self.name])
        except KeyError:
            raise RubricError(
                f"the rubric reads the component {self.name!r}, which this step did not emit "
                f"(emitted: {', '.join(components) or 'none'}). Validate rubrics against the environment's "
                f"reward_components before use."
            ) from None

    def to_spec(self) -> Any:
        return self.name


class Const(Rubric):
    """A constant."""

    def __init__(self, value: float) -> None:
        self.value = _number(value, "Const")

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        return self.value

    def to_spec(self) -> Any:
        return self.value


class ContextValue(Rubric):
    """A number from the reward context: ``progress``, ``turn`` or ``base_reward``.

    ``default`` stands in when the field is ``None`` (an environment without progress).
    """

    def __init__(self, field: str, *, default: float = 0.0) -> None:
        if field not in _NUMERIC_FIELDS:
            raise RubricError(
                f"context: expected one of {', '.join(map(repr, _NUMERIC_FIELDS))}, got {field!r}."
                f"{suggest(str(field), (*_NUMERIC_FIELDS, *_FLAG_FIELDS))} (Flags such as 'success' are gate "
                f"conditions, not numbers.)"
            )
        self.field = field
        self.default = _number(default, "context default")

    def own_needs(self) -> frozenset[str]:
        return frozenset((self.field,))

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        value = getattr(context, self.field, None)
        return self.default if value is None else float(value)

    def to_spec(self) -> Any:
        spec: dict[str, Any] = {"context": self.field}
        if self.default != 0.0:
            spec["default"] = self.default
        return spec


class Inner(Rubric):
    """The scalar reward of the wrapped environment (only inside reward wrappers)."""

    def own_needs(self) -> frozenset[str]:
        return frozenset(("base_reward",))

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        value = getattr(context, "base_reward", None)
        if value is None:
            raise RubricError("Inner() needs the wrapped scalar reward; use it inside a reward wrapper only.")
        return float(value)

    def to_spec(self) -> Any:
        return {"inner": True}


class FunctionRubric(Rubric):
    """Any Python callable ``(components, context) -> float`` as a rubric node.

    Args:
        fn: the callable.
        components: the components it reads (validated like any other node's).
    """

    def __init__(self, fn: Callable[[Mapping[str, float], RewardContext], float], *, components: Iterable[str] = ()):
        if not callable(fn):
            raise RubricError(f"function: expected a callable (components, context) -> float, got {fn!r}.")
        self.fn = fn
        self._components = frozenset(_component_name(c, "function.components") for c in components)

    def own_components(self) -> frozenset[str]:
        return self._components

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        return float(self.fn(components, context))

    def to_spec(self) -> Any:
        module = getattr(self.fn, "__module__", None)
        qualname = getattr(self.fn, "__qualname__", "")
        if not module or "<" in qualname:
            raise RubricError(
                f"cannot write {self.fn!r} as a spec: only module-level functions have an importable name."
            )
        spec: dict[str, Any] = {"function": f"{module}:{qualname}"}
        if self._components:
            spec["components"] = sorted(self._components)
        return spec


class Sum(Rubric):
    """The sum of its terms (``math.fsum``)."""

    def __init__(self, *terms: RubricSpec) -> None:
        if not terms:
            raise RubricError("sum: expected at least one term, got none.")
        self.terms = tuple(_coerce(t, path=f"sum[{i}]") for i, t in enumerate(terms))

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return tuple((f"sum[{i}]", t) for i, t in enumerate(self.terms))

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        return math.fsum(t(components, context) for t in self.terms)

    def to_spec(self) -> Any:
        return {"sum": [t.to_spec() for t in self.terms]}


class WeightedSum(Rubric):
    """A weighted sum of components and of sub-rubrics.

    Args:
        weights: ``{component: weight}``, or ``[(rubric_or_name, weight), ...]``.
        rest: weight of every component *not* named in ``weights`` (``None``: they are ignored).
            ``rest=1.0`` gives the meaning of ``make(id, reward={name: weight})``.
    """

    def __init__(
        self,
        weights: Mapping[str, float] | Iterable[tuple[RubricSpec, float]],
        *,
        rest: float | None = None,
    ) -> None:
        pairs = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
        if not pairs:
            raise RubricError("weighted_sum: expected at least one weighted term, got none.")
        self.leaves: dict[str, float] = {}
        self.nodes: list[tuple[Rubric, float]] = []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise RubricError(f"weighted_sum[{i}]: expected a (rubric, weight) pair, got {pair!r}.")
            term, weight = pair
            w = _number(weight, f"weighted_sum[{i}] weight")
            if isinstance(term, str):
                if term in self.leaves:
                    raise RubricError(f"weighted_sum: the component {term!r} is weighted twice; give it one weight.")
                self.leaves[term] = w
            elif isinstance(term, Term):
                self.leaves[term.name] = self.leaves.get(term.name, 0.0) + w
            else:
                self.nodes.append((_coerce(term, path=f"weighted_sum[{i}]"), w))
        self.rest = None if rest is None else _number(rest, "weighted_sum rest")

    def own_components(self) -> frozenset[str]:
        return frozenset(self.leaves)

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return tuple((f"weighted_sum[{i}]", node) for i, (node, _) in enumerate(self.nodes))

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        parts: list[float] = []
        if self.rest is None:
            for name, weight in self.leaves.items():
                try:
                    parts.append(weight * components[name])
                except KeyError:
                    Term(name)(components, context)  # raises the explanatory error
        else:
            leaves, rest = self.leaves, self.rest
            parts.extend(leaves.get(name, rest) * value for name, value in components.items())
        parts.extend(weight * node(components, context) for node, weight in self.nodes)
        return math.fsum(parts)

    def to_spec(self) -> Any:
        if not self.nodes and self.rest == 1.0:
            return dict(self.leaves)
        if not self.nodes:
            body: Any = dict(self.leaves)
        else:
            body = [{"rubric": name, "weight": w} for name, w in self.leaves.items()]
            body += [{"rubric": node.to_spec(), "weight": w} for node, w in self.nodes]
        spec: dict[str, Any] = {"weighted_sum": body}
        if self.rest is not None:
            spec["rest"] = self.rest
        return spec


class Product(Rubric):
    """The product of its factors (e.g. a success indicator times a quality score, as in tau-bench)."""

    def __init__(self, *factors: RubricSpec) -> None:
        if not factors:
            raise RubricError("product: expected at least one factor, got none.")
        self.factors = tuple(_coerce(f, path=f"product[{i}]") for i, f in enumerate(factors))

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return tuple((f"product[{i}]", f) for i, f in enumerate(self.factors))

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        result = 1.0
        for factor in self.factors:
            result *= factor(components, context)
        return result

    def to_spec(self) -> Any:
        return {"product": [f.to_spec() for f in self.factors]}


class Clip(Rubric):
    """Its rubric's value clipped to ``[low, high]`` (either bound may be ``None``)."""

    def __init__(self, rubric: RubricSpec, *, low: float | None = None, high: float | None = None) -> None:
        if low is None and high is None:
            raise RubricError("clip: expected at least one of min/max, got neither. Add min: or max:.")
        self.low = None if low is None else _number(low, "clip.min")
        self.high = None if high is None else _number(high, "clip.max")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise RubricError(f"clip: min must not exceed max, got min={self.low!r} and max={self.high!r}.")
        self.rubric = _coerce(rubric, path="clip")

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return (("clip", self.rubric),)

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        value = self.rubric(components, context)
        if self.low is not None and value < self.low:
            return self.low
        if self.high is not None and value > self.high:
            return self.high
        return value

    def to_spec(self) -> Any:
        spec: dict[str, Any] = {"clip": self.rubric.to_spec()}
        if self.low is not None:
            spec["min"] = self.low
        if self.high is not None:
            spec["max"] = self.high
        return spec


class Gate(Rubric):
    """``then`` when the condition holds, else ``otherwise`` (0 by default).

    Example: ``Gate(Term("format_reward") >= 0, then="success_reward")`` pays success only for
    well-formed output.
    """

    def __init__(self, when: Condition | Mapping[str, Any] | str, *, then: RubricSpec, otherwise: RubricSpec = 0.0):
        self.when = _coerce_condition(when, "gate")
        self.then = _coerce(then, path="then")
        self.otherwise = _coerce(otherwise, path="else")

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return (("gate", self.when), ("then", self.then), ("else", self.otherwise))

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        if self.when.holds(components, context):
            return self.then(components, context)
        return self.otherwise(components, context)

    def to_spec(self) -> Any:
        spec: dict[str, Any] = {"gate": self.when.to_spec(), "then": self.then.to_spec()}
        if not (isinstance(self.otherwise, Const) and self.otherwise.value == 0.0):
            spec["else"] = self.otherwise.to_spec()
        return spec


class Lexicographic(Rubric):
    """Preordered objectives: a priority tuple, plus a scalarisation for trainers that need one.

    :meth:`priorities` returns ``(o_0, o_1, ...)``, highest priority first; Python compares such
    tuples lexicographically, and the reward wrappers put the tuple in
    ``info["reward_priorities"]``. Calling the rubric returns the scalarisation
    ``sum_k epsilon**k * o_k``.

    The scalarisation orders two outcomes exactly as the tuples do when every objective is
    bounded, ``|o_k| <= M``, and distinct values of any objective differ by at least ``gap``,
    provided ``epsilon < gap / (gap + 2 * M)`` (:meth:`safe_epsilon`): the largest swing the
    lower objectives can make, ``epsilon * 2M / (1 - epsilon)`` in units of the objective above,
    then stays below one gap. With the default ``epsilon=1e-3`` that holds, for example, for
    objectives in ``[-1, 1]`` whose values differ by at least 0.01.

    Args:
        objectives: rubrics, highest priority first.
        epsilon: the scalarisation factor, ``0 < epsilon < 1``.
    """

    def __init__(self, objectives: Sequence[RubricSpec], *, epsilon: float = 1e-3) -> None:
        if isinstance(objectives, (str, bytes)) or not isinstance(objectives, Sequence) or not objectives:
            raise RubricError(f"lexicographic: expected a non-empty list of objectives, got {objectives!r}.")
        self.objectives = tuple(_coerce(o, path=f"lexicographic[{i}]") for i, o in enumerate(objectives))
        self.epsilon = _number(epsilon, "lexicographic.epsilon")
        if not 0.0 < self.epsilon < 1.0:
            raise RubricError(f"lexicographic.epsilon: expected a number in (0, 1), got {epsilon!r}.")

    @staticmethod
    def safe_epsilon(gap: float, bound: float) -> float:
        """The largest epsilon for which the scalarisation is exact: ``gap / (gap + 2 * bound)``.

        Use a value strictly below it. ``gap``: smallest difference between distinct values of an
        objective; ``bound``: largest absolute value of any objective.
        """
        gap = _number(gap, "gap")
        bound = _number(bound, "bound")
        if gap <= 0 or bound < 0:
            raise RubricError(f"safe_epsilon: expected gap > 0 and bound >= 0, got gap={gap!r}, bound={bound!r}.")
        return gap / (gap + 2.0 * bound)

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return tuple((f"lexicographic[{i}]", o) for i, o in enumerate(self.objectives))

    def priorities(self, components: Mapping[str, float], context: RewardContext) -> tuple[float, ...]:
        return tuple(float(o(components, context)) for o in self.objectives)

    def scalarise(self, priorities: Sequence[float]) -> float:
        """``sum_k epsilon**k * priorities[k]``."""
        eps = self.epsilon
        return math.fsum(value * eps**k for k, value in enumerate(priorities))

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        return self.scalarise(self.priorities(components, context))

    def to_spec(self) -> Any:
        return {"lexicographic": [o.to_spec() for o in self.objectives], "epsilon": self.epsilon}


class AtEnd(Rubric):
    """Delayed reward: its rubric summed over the whole episode, paid at the episode's last step.

    Turns any dense rubric into a sparse, trajectory-level one (an outcome-only ablation of a
    process reward) without changing the environment. Reads the episode history, so it is only
    accepted inside reward wrappers (``ApplyRubric``).
    """

    def __init__(self, rubric: RubricSpec) -> None:
        self.rubric = _coerce(rubric, path="at_end")
        if "history" in self.rubric.requirements():
            raise RubricError("at_end: its rubric must not read the history itself (nested at_end); flatten it.")

    def own_needs(self) -> frozenset[str]:
        return frozenset(("history", "truncated"))

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return (("at_end", self.rubric),)

    def __call__(self, components: Mapping[str, float], context: RewardContext) -> float:
        if not (context.terminated or getattr(context, "truncated", False)):
            return 0.0
        history: Sequence[StepRecord] = getattr(context, "history", ())
        past = [self.rubric(record.components, record.context) for record in history]
        return math.fsum([*past, self.rubric(components, context)])

    def to_spec(self) -> Any:
        return {"at_end": self.rubric.to_spec()}


# ------------------------------------------------------------------------------------ conditions
class Condition(_Node):
    """A yes/no test of one step, for :class:`Gate`. Combine with ``&``, ``|`` and ``~``."""

    @abc.abstractmethod
    def holds(self, components: Mapping[str, float], context: RewardContext) -> bool:
        """Whether the condition holds for this step."""

    def __and__(self, other: Condition) -> Condition:
        return AllOf(self, other)

    def __or__(self, other: Condition) -> Condition:
        return AnyOf(self, other)

    def __invert__(self) -> Condition:
        return Not(self)

    def __bool__(self) -> bool:
        raise TypeError(
            "a rubric condition is evaluated per step, not by `if`: pass it to Gate(when=...), "
            "or call condition.holds(components, context)."
        )


class Compare(Condition):
    """``rubric <op> value`` with op one of ``< <= > >= == !=``."""

    def __init__(self, rubric: RubricSpec, op: str, value: float) -> None:
        if op not in _COMPARISONS:
            raise RubricError(f"comparison: expected one of {' '.join(_COMPARISONS)}, got {op!r}.")
        self.rubric = _coerce(rubric, path="rubric")
        self.op = op
        self.value = _number(value, f"comparison {op!r}")
        self._test = _COMPARISONS[op]

    def children(self) -> tuple[tuple[str, _Node], ...]:
        label = (
            "component"
            if isinstance(self.rubric, Term)
            else "context"
            if isinstance(self.rubric, ContextValue)
            else "rubric"
        )
        return ((label, self.rubric),)

    def holds(self, components: Mapping[str, float], context: RewardContext) -> bool:
        return self._test(self.rubric(components, context), self.value)

    def to_spec(self) -> Any:
        if isinstance(self.rubric, Term):
            return {"component": self.rubric.name, self.op: self.value}
        if isinstance(self.rubric, ContextValue) and self.rubric.default == 0.0:
            return {"context": self.rubric.field, self.op: self.value}
        return {"rubric": self.rubric.to_spec(), self.op: self.value}


class Flag(Condition):
    """A boolean of the context: ``success``, ``action_valid``, ``terminated`` or ``truncated``."""

    def __init__(self, field: str) -> None:
        if field not in _FLAG_FIELDS:
            raise RubricError(
                f"context flag: expected one of {', '.join(map(repr, _FLAG_FIELDS))}, got {field!r}."
                f"{suggest(field, (*_FLAG_FIELDS, *_NUMERIC_FIELDS))} Numbers (progress, turn) need a comparison, "
                f"e.g. {{context: progress, '>=': 0.5}}."
            )
        self.field = field

    def own_needs(self) -> frozenset[str]:
        return frozenset((self.field,))

    def holds(self, components: Mapping[str, float], context: RewardContext) -> bool:
        return bool(getattr(context, self.field, False))

    def to_spec(self) -> Any:
        return {"context": self.field}


class TextMatches(Condition):
    """The agent's raw text (before action extraction) matches a regular expression (``re.search``)."""

    def __init__(self, pattern: str, *, ignore_case: bool = False) -> None:
        if not isinstance(pattern, str):
            raise RubricError(f"text_matches: expected a regular expression string, got {pattern!r}.")
        try:
            self.regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as err:
            raise RubricError(f"text_matches: {pattern!r} is not a valid regular expression: {err}.") from err
        self.pattern = pattern
        self.ignore_case = bool(ignore_case)

    def own_needs(self) -> frozenset[str]:
        return frozenset(("action_text",))

    def holds(self, components: Mapping[str, float], context: RewardContext) -> bool:
        return self.regex.search(context.action_text) is not None

    def to_spec(self) -> Any:
        spec: dict[str, Any] = {"text_matches": self.pattern}
        if self.ignore_case:
            spec["ignore_case"] = True
        return spec


class AllOf(Condition):
    """Every condition holds."""

    def __init__(self, *conditions: Condition | Mapping[str, Any] | str) -> None:
        if not conditions:
            raise RubricError("all: expected at least one condition, got none.")
        self.conditions = tuple(
            _coerce_condition(c, f"all[{i}]") for i, c in enumerate(conditions)
        )

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return tuple((f"all[{i}]", c) for i, c in enumerate(self.conditions))

    def holds(self, components: Mapping[str, float], context: RewardContext) -> bool:
        return all(c.holds(components, context) for c in self.conditions)

    def to_spec(self) -> Any:
        return {"all": [c.to_spec() for c in self.conditions]}


class AnyOf(Condition):
    """At least one condition holds."""

    def __init__(self, *conditions: Condition | Mapping[str, Any] | str) -> None:
        if not conditions:
            raise RubricError("any: expected at least one condition, got none.")
        self.conditions = tuple(
            _coerce_condition(c, f"any[{i}]") for i, c in enumerate(conditions)
        )

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return tuple((f"any[{i}]", c) for i, c in enumerate(self.conditions))

    def holds(self, components: Mapping[str, float], context: RewardContext) -> bool:
        return any(c.holds(components, context) for c in self.conditions)

    def to_spec(self) -> Any:
        return {"any": [c.to_spec() for c in self.conditions]}


class Not(Condition):
    """The condition does not hold."""

    def __init__(self, condition: Condition | Mapping[str, Any] | str) -> None:
        self.condition = _coerce_condition(condition, "not")

    def children(self) -> tuple[tuple[str, _Node], ...]:
        return (("not", self.condition),)

    def holds(self, components: Mapping[str, float], context: RewardContext) -> bool:
        return not self.condition.holds(components, context)

    def to_spec(self) -> Any:
        return {"not": self.condition.to_spec()}
