"""Contributed reward components: not used by envgym's own environments, benchmarks or trainer;
tested, but no stable API is promised.

* :mod:`~envgym.contrib.rewards.info_gain`: IGPO turn-level information gain
  (:class:`InfoGainHook`, filled by a scorer that a trainer provides from its policy's
  answer probabilities; :class:`InfoGainQuery`, :func:`information_gain`,
  :func:`answer_probability`). ``envgym.rewards.InfoGainHook`` and the other old names still load
  these.
"""

from __future__ import annotations

from envgym.contrib.rewards.info_gain import InfoGainHook, InfoGainQuery, Scorer, answer_probability, information_gain

__all__ = ["InfoGainHook", "InfoGainQuery", "Scorer", "answer_probability", "information_gain"]
