"""The rubric language under its older path: it lives in :mod:`envgym.rubric`, below
:mod:`envgym.core`, so environments and the core build rubric specs without importing upward.
Everything is re-exported here (and from :mod:`envgym.rewards`)."""

from __future__ import annotations

from envgym import rubric as _rubric
from envgym.rubric import *

__all__ = list(_rubric.__all__)
