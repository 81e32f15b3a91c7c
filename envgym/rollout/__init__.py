"""Rollouts: the agent protocol, the prompting layer, the runners and the run records.

Where things are: :class:`RunConfig` (``config``: one run's settings), :class:`Runner`
(``runner``: plays a config), :class:`RunSession` (``session``: what the lock-step, async and
Parallel players of one run share), the players (``players``, ``multiagent``), the task lists
(``tasks``: :func:`tasks_for`), and the records (``records``, ``rundir``).

Names load on first use, so ``from envgym.rollout import Agent`` does not import the runner,
the worker pools or the run-folder code.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports name the lazy exports for type checkers)
from __future__ import annotations

from typing import TYPE_CHECKING

from envgym._imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "agent": ("Agent", "AgentInput", "AgentOutput", "Policy", "PolicyAgent", "RandomAgent"),
        "checks": ("check_agent",),
        "config": ("RunConfig",),
        "ending": ("EpisodeEnd", "episode_end"),
        "pools": ("EnvFailure", "EnvPool", "make_pool"),
        "prompting": ("Conversation", "ParsedReply", "PromptConfig"),
        "records": ("EpisodeRecord", "Trajectory", "Turn"),
        "rundir": ("RunFolder", "export_parquet", "load_run", "load_trajectories"),
        "runner": ("RunResult", "Runner", "run", "run_episodes"),
        "session": ("RunSession",),
        "specs": ("AGENT_KINDS", "known_agent_specs", "make_agent"),
        "summary": ("summarize",),
        "tasks": ("EpisodeTask", "default_tasks", "tasks_for"),
    },
    # Older name of :class:`Trajectory` (what ``run_episodes`` returned before the run records).
    aliases={"EpisodeResult": "Trajectory"},
)

if TYPE_CHECKING:  # pragma: no cover
    from envgym.rollout.agent import Agent, AgentInput, AgentOutput, Policy, PolicyAgent, RandomAgent
    from envgym.rollout.checks import check_agent
    from envgym.rollout.config import RunConfig
    from envgym.rollout.ending import EpisodeEnd, episode_end
    from envgym.rollout.pools import EnvFailure, EnvPool, make_pool
    from envgym.rollout.prompting import Conversation, ParsedReply, PromptConfig
    from envgym.rollout.records import EpisodeRecord, Trajectory, Turn
    from envgym.rollout.rundir import RunFolder, export_parquet, load_run, load_trajectories
    from envgym.rollout.runner import Runner, RunResult, run, run_episodes
    from envgym.rollout.session import RunSession
    from envgym.rollout.specs import AGENT_KINDS, known_agent_specs, make_agent
    from envgym.rollout.summary import summarize
    from envgym.rollout.tasks import EpisodeTask, default_tasks, tasks_for

    EpisodeResult = Trajectory
