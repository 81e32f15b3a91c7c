"""Rubrics: composable maps from named reward components to the scalar reward.

An environment emits named *components* every step (``success_reward``, ``progress_reward``,
``invalid_action_reward``, ...). A rubric is a callable ``(components, context) -> float`` that
turns them into the scalar reward; the components stay visible in ``info["reward_components"]``
whatever the rubric does, so a trainer can normalise them separately and a report can show them.

Rubrics are trees of small nodes, built in code::

    from envgym.rewards import Gate, Term, Clip, Lexicographic
    rubric = Gate(Term("format_reward") >= 0, then=Term("success_reward") + 0.5 * Term("progress_reward"))

from a dict or YAML (:func:`build_rubric`, :func:`load_rubric`), or through
``gymnasium.make(id, reward=spec)``. The spec grammar: a spec is

* ``"success_reward"``: the value of that component (:class:`Term`);
* ``0.5``: a constant (:class:`Const`);
* ``{"success_reward": 1.0, "step_cost_reward": 2.0}``: component weights; components not listed
  keep weight 1 (the same meaning as ``reward={...weights...}`` in ``make``);
* a mapping with exactly one *operator* key holding its main argument, and that operator's options
  as sibling keys:

  ================  ==========================================  ===========================
  operator          main argument                               options
  ================  ==========================================  ===========================
  ``term``          a component name                            --
  ``const``         a number                                    --
  ``context``       ``progress``, ``turn`` or ``base_reward``   ``default`` (when ``None``)
  ``inner``         ``true``: the wrapped env's own scalar      --
  ``sum``           a list of specs                             --
  ``product``       a list of specs                             --
  ``weighted_sum``  ``{name: weight}`` or a list of             ``rest`` (weight of every
                    ``{rubric: spec, weight: w}``               unlisted component)
  ``clip``          a spec                                      ``min``, ``max``
  ``gate``          a condition                                 ``then`` (required), ``else``
  ``lexicographic`` a list of specs, highest priority first     ``epsilon``
  ``at_end``        a spec, summed over the episode, paid at    --
                    its last step
  ``function``      ``"package.module:callable"``               ``components``
  ================  ==========================================  ===========================

Conditions (for ``gate``) are ``{"component": name, ">=": 0}``, ``{"rubric": spec, "<": 1}``,
``{"context": "progress", ">": 0.5}``, ``{"context": "success"}`` (a flag: ``success``,
``action_valid``, ``terminated``, ``truncated``), ``{"text_matches": regex}`` (the agent's raw
text), ``{"all": [...]}``, ``{"any": [...]}`` and ``{"not": condition}``; comparisons are one of
``<  <=  >  >=  ==  !=``.

Example (YAML)::

    sum:
      - gate: {component: format_reward, ">=": 0}     # pay success only for well-formed output
        then: success_reward
      - clip: {sum: [progress_reward, step_cost_reward]}
        min: -1.0
        max: 1.0

Validation happens when a rubric is built for an environment, before any episode runs: a
component the environment does not emit, a weight that is not a finite number, an unknown
operator or option, or a rubric that needs context the caller cannot give raise
:class:`RubricError` naming the place in the spec (``reward.sum[0].gate.then``), what came and
the valid choices.

*Context.* :class:`envgym.core.TextEnv` passes a :class:`RewardContext` (the raw
action text, turn, validity, termination, success, task and progress). The reward wrappers of
:mod:`envgym.rewards.wrappers` pass a :class:`StepContext`, which adds ``truncated``,
``base_reward`` (the wrapped env's scalar) and ``history`` (the episode so far). Nodes that read
those (``at_end``, ``inner``, the ``truncated`` flag) are therefore only accepted where they are
available: in ``ApplyRubric`` and the other reward wrappers, not in ``make(id, reward=...)``.
Rubrics are pure functions of their arguments, so one rubric object can serve many environments.

This package sits below :mod:`envgym.core` (it imports only :mod:`envgym.errors`), so environments
build rubric specs without an upward import; :mod:`envgym.rewards` re-exports all of it.
"""

from __future__ import annotations

from envgym.rubric.context import (
    REWARD_CONTEXT_FIELDS,
    WRAPPER_CONTEXT_FIELDS,
    RewardContext,
    StepContext,
    StepRecord,
)
from envgym.rubric.nodes import (
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
)
from envgym.rubric.spec import OPERATORS, as_rubric, build_condition, build_rubric, dump_rubric, load_rubric

__all__ = [
    "OPERATORS",
    "REWARD_CONTEXT_FIELDS",
    "WRAPPER_CONTEXT_FIELDS",
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
    "RewardContext",
    "Rubric",
    "RubricError",
    "RubricSpec",
    "StepContext",
    "StepRecord",
    "Sum",
    "Term",
    "TextMatches",
    "WeightedSum",
    "as_rubric",
    "build_condition",
    "build_rubric",
    "dump_rubric",
    "load_rubric",
]
