"""Built-in reward components as Gymnasium wrappers, usable on any environment.

Each wrapper adds one named component to ``info["reward_components"]`` (on ``reset`` as 0.0 and
on every step) and to its ``reward_components`` attribute, and recomputes the scalar reward with
a *wrapper-level rubric* (:mod:`envgym.rubric`):

* by default the rubric is ``Inner() + Term(name)``: the wrapped environment's own scalar plus
  the new component, so stacking wrappers adds their components to whatever the environment's
  rubric gave;
* with ``rubric=spec`` the scalar is ``rubric(info["reward_components"], context)`` over *every*
  component visible at that point: the environment's and those of the wrappers below.

Either way the invariant holds on every step: ``reward == wrapper.rubric(info["reward_components"],
context)``, and the components never disappear from ``info``. :class:`ApplyRubric` only applies a
rubric (it adds no component); put it outermost to define the final scalar. The wrappers pass a
:class:`~envgym.rubric.StepContext` (with ``truncated``, the wrapped scalar and the
episode history), so history-reading rubrics such as ``at_end`` work here. When the rubric is
:class:`~envgym.rubric.Lexicographic`, the priority tuple is put in
``info["reward_priorities"]``.

Components (default names; pass ``name=`` to rename):

=========================  =====================================================================
``outcome_reward``         :class:`OutcomeReward`: ``success`` on the terminal success step,
                           ``failure`` on a terminal failure, else 0. At most once per episode.
``format_reward``          :class:`FormatReward`: 0 for well-formed output, ``invalid`` (< 0)
                           otherwise (tags present once, closed, in order, nothing outside).
``invalid_action_reward``  :class:`InvalidActionPenalty`: ``penalty`` when ``info["action_valid"]``
                           is false.
``step_cost_reward``       :class:`StepCost`: ``cost`` every step.
``shaping_reward``         :class:`ProgressShaping`: ``gamma * Phi(s') - Phi(s)`` with
                           ``Phi = scale * info["progress"]`` and ``Phi(terminal) = 0``.
``meta_reasoning_reward``  :class:`MetaReasoningReward`: RLVMR-style rewards for ``<plan>``,
                           ``<explore>``, ``<reflect>`` segments followed by useful actions.
``verifier_reward``        :class:`VerifierReward`: the score of a verifier on the agent's answer.
=========================  =====================================================================

Anti-hacking by construction: every per-step component is either non-positive (format, invalid
action, step cost), paid at most once per episode (outcome, verifier on the terminal step),
telescoping (shaping: the episode total does not depend on how the agent got there) or capped per episode and never paid for repeated or goal-echoing text (meta-reasoning).
``tests/rewards/test_rewards_wrappers.py`` checks each against adversarial policies.

Every wrapper can be named in config: :func:`wrap_rewards` (:mod:`~envgym.rewards.wrappers.spec`)
stacks them from a list of ``{name: {options}}`` specs. IGPO's information-gain hook, which needs a
trainer-provided scorer, lives in :mod:`envgym.contrib.rewards`.

Modules: :mod:`~envgym.rewards.wrappers.base` (:class:`RewardLayer`, :class:`ApplyRubric`),
:mod:`~envgym.rewards.wrappers.components` (outcome, format, invalid action, step cost),
:mod:`~envgym.rewards.wrappers.shaping`, :mod:`~envgym.rewards.wrappers.meta_reasoning`,
:mod:`~envgym.rewards.wrappers.verifier` and :mod:`~envgym.rewards.wrappers.spec`.
"""

from __future__ import annotations

from envgym.rewards.wrappers.base import ApplyRubric, RewardLayer
from envgym.rewards.wrappers.components import FormatReward, InvalidActionPenalty, OutcomeReward, StepCost
from envgym.rewards.wrappers.meta_reasoning import MetaReasoningReward
from envgym.rewards.wrappers.shaping import ProgressShaping
from envgym.rewards.wrappers.spec import REWARD_WRAPPERS, build_reward_wrapper, wrap_rewards
from envgym.rewards.wrappers.verifier import VerifierReward

__all__ = [
    "REWARD_WRAPPERS",
    "ApplyRubric",
    "FormatReward",
    "InvalidActionPenalty",
    "MetaReasoningReward",
    "OutcomeReward",
    "ProgressShaping",
    "RewardLayer",
    "StepCost",
    "VerifierReward",
    "build_reward_wrapper",
    "wrap_rewards",
]
