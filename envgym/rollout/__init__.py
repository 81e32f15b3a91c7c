"""Rollouts: the agent protocol and the episode runners."""

from envgym.rollout.agent import Agent, AgentInput, AgentOutput, Policy, PolicyAgent, RandomAgent
from envgym.rollout.runner import EpisodeResult, run_episodes

__all__ = [
    "Agent",
    "AgentInput",
    "AgentOutput",
    "EpisodeResult",
    "Policy",
    "PolicyAgent",
    "RandomAgent",
    "run_episodes",
]
