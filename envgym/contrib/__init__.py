"""Contributed code: useful pieces that envgym's own environments, agents, benchmarks and trainer do
not use. Each subpackage is tested, but no stable API is promised: names may change or go between
releases without a deprecation period.

* :mod:`envgym.contrib.rewards`: reward components that need something envgym does not provide
  (IGPO's information gain needs a trainer-side scorer).
"""

from __future__ import annotations
