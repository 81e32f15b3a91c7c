"""Rollouts: the agent protocol, the prompting layer, the runners and the run records.

Names load on first use, so ``from envgym.rollout import Agent`` does not import the runner,
the worker pools or the run-folder code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "Agent": "agent",
    "AgentInput": "agent",
    "AgentOutput": "agent",
    "Policy": "agent",
    "PolicyAgent": "agent",
    "RandomAgent": "agent",
    "check_agent": "checks",
    "EnvFailure": "pools",
    "EnvPool": "pools",
    "make_pool": "pools",
    "Conversation": "prompting",
    "ParsedReply": "prompting",
    "PromptConfig": "prompting",
    "Trajectory": "records",
    "Turn": "records",
    "RunFolder": "rundir",
    "export_parquet": "rundir",
    "load_run": "rundir",
    "load_trajectories": "rundir",
    "RunConfig": "runner",
    "RunResult": "runner",
    "Runner": "runner",
    "run": "runner",
    "run_episodes": "runner",
    "AGENT_KINDS": "specs",
    "known_agent_specs": "specs",
    "make_agent": "specs",
    "summarize": "summary",
}
#: Older name of :class:`Trajectory` (what ``run_episodes`` returned before the run records).
_ALIASES = {"EpisodeResult": "Trajectory"}

__all__ = sorted([*_LAZY, *_ALIASES])

if TYPE_CHECKING:  # pragma: no cover
    from envgym.rollout.agent import Agent, AgentInput, AgentOutput, Policy, PolicyAgent, RandomAgent  # noqa: F401
    from envgym.rollout.checks import check_agent  # noqa: F401
    from envgym.rollout.pools import EnvFailure, EnvPool, make_pool  # noqa: F401
    from envgym.rollout.prompting import Conversation, ParsedReply, PromptConfig  # noqa: F401
    from envgym.rollout.records import Trajectory, Turn  # noqa: F401
    from envgym.rollout.rundir import RunFolder, export_parquet, load_run, load_trajectories  # noqa: F401
    from envgym.rollout.runner import RunConfig, Runner, RunResult, run, run_episodes  # noqa: F401
    from envgym.rollout.specs import AGENT_KINDS, known_agent_specs, make_agent  # noqa: F401
    from envgym.rollout.summary import summarize  # noqa: F401

    EpisodeResult = Trajectory


def __getattr__(name: str) -> Any:
    target = _ALIASES.get(name, name)
    module = _LAZY.get(target)
    if module is None:
        raise AttributeError(f"module 'envgym.rollout' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"envgym.rollout.{module}"), target)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
