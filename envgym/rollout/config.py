"""The settings of one rollout run: :class:`RunConfig`, validated before anything loads.

A run's configuration is plain data: it is written into the run folder's ``config.json``
(:meth:`RunConfig.to_dict`), read back to resume (:meth:`RunConfig.from_dict`), and its
:data:`IDENTITY_KEYS` decide whether a folder may be resumed with it. Each field's
``metadata["help"]`` is its documentation and the help of the CLI flag that sets it.

The runner that plays a configuration is :class:`envgym.rollout.runner.Runner`; this module
imports nothing that loads an environment or a model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from envgym.errors import ConfigError, suggest
from envgym.rollout.pools import BACKENDS
from envgym.rollout.prompting import PromptConfig
from envgym.rollout.records import json_safe
from envgym.rollout.specs import known_agent_specs, split_agent_spec
from envgym.rollout.tasks import EpisodeTask, default_tasks, parse_tasks

__all__ = ["DEFAULT_EPISODES", "IDENTITY_KEYS", "MAX_DEFAULT_ENVS", "MODES", "RunConfig"]

MODES = ("lockstep", "async")
#: RunConfig fields that decide what the episodes contain; resuming with one changed is refused.
IDENTITY_KEYS = (
    "env_id",
    "env_kwargs",
    "agent",
    "seed",
    "group_size",
    "max_turns",
    "prompt",
    "agent_options",
    "tasks",
    "agents",
)
#: Episodes of a run without a task list or an explicit count.
DEFAULT_EPISODES = 10
#: Environment instances of a run that does not set num_envs (at most; fewer when it has fewer
#: episodes): one lock-step batch covers a whole suite such as core-v1 (40 episodes).
MAX_DEFAULT_ENVS = 64


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """One rollout run. Validated on construction, before any environment or model loads.

    Each field's ``metadata["help"]`` (listed under Attributes below) is its documentation and
    the help of the ``envgym run`` / ``envgym bench run`` flag that sets it.
    """

    env_id: str | None = field(
        default=None,
        metadata=_help("Registered environment id, e.g. envgym/Sokoban-v0 (with tasks: default the first task's)."),
    )
    # None when the runner is given an agent object (its name is recorded).
    agent: str | None = field(default=None, metadata=_help(f"Agent spec: {known_agent_specs()}."))
    agent_options: Mapping[str, Any] = field(
        default_factory=dict,
        metadata=_help("Keyword arguments for the agent's constructor (temperature, max_new_tokens, ...)."),
    )
    agents: Mapping[str, str] | None = field(
        default=None,
        metadata=_help(
            "PettingZoo Parallel envs only: agent name -> agent spec for agents that do not play the agent spec "
            "(e.g. {'agent_1': 'random'}); None or empty: self-play, the agent spec plays every agent. "
            "agent_options apply to the agent spec only."
        ),
    )
    # None: DEFAULT_EPISODES, or one episode per task when tasks are given.
    episodes: int | None = field(default=None, metadata=_help("Episodes to play (a multiple of the group size)."))
    seed: int = field(default=0, metadata=_help("Environment seed of the first group; group g plays seed + g."))
    group_size: int = field(
        default=1, metadata=_help("Episodes per seed (group rollouts: GRPO samples k answers to the same task).")
    )
    env_kwargs: Mapping[str, Any] = field(default_factory=dict, metadata=_help("Keyword arguments for envgym.make."))
    max_turns: int | None = field(
        default=None,
        metadata=_help(
            "Harness turn limit per episode, an outer cap over the env's own max_turns kwarg (truncates, "
            "reason max_turns); None: the env's own."
        ),
    )
    tasks: Sequence[EpisodeTask] | None = field(
        default=None,
        metadata=_help(
            "The episodes to play, one EpisodeTask each (env id, kwargs, seed, group, member, turn limit), of "
            "any environments; None: episodes episodes of env_id from seed (envgym.rollout.tasks.default_tasks). "
            "With a list, env_kwargs, seed and group_size only describe the run (seed still seeds the agent)."
        ),
    )
    num_envs: int | None = field(
        default=None,
        metadata=_help(
            f"Environment instances (episodes played at the same time, one agent batch per turn); None: every "
            f"episode of the run at once, up to {MAX_DEFAULT_ENVS}."
        ),
    )
    backend: str = field(
        default="inproc",
        metadata=_help(
            "Where environments run: inproc (this process), process (worker pool), ray, or remote (an envgym serve "
            "server at url)."
        ),
    )
    url: str | None = field(
        default=None,
        metadata=_help("The envgym serve server of backend remote (ws://HOST:PORT); the environments run there."),
    )
    workers: int = field(default=1, metadata=_help("Worker processes or Ray actors for the process and ray backends."))
    mode: str = field(
        default="lockstep",
        metadata=_help("lockstep (one batched agent call per turn) or async (one thread per live episode)."),
    )
    max_retries: int = field(
        default=2,
        metadata=_help("Restarts of an episode after an infrastructure failure before it is recorded as failed."),
    )
    episode_timeout_s: float | None = field(
        default=None,
        metadata=_help("Seconds one episode attempt may take (checked between turns); None: no limit."),
    )
    step_timeout_s: float | None = field(
        default=None,
        metadata=_help(
            "Seconds one environment call may take on the process and ray backends (the worker is replaced); "
            "None: no limit."
        ),
    )
    agent_timeout_s: float | None = field(
        default=None,
        metadata=_help(
            "Seconds one agent call may take (the late answer is dropped and the episodes retried); None: no limit."
        ),
    )
    prompt: PromptConfig = field(
        default_factory=PromptConfig, metadata=_help("How observations become chat messages (chat agents only).")
    )
    ray_address: str | None = field(
        default=None, metadata=_help("Address of an existing Ray cluster; None starts a local one when needed.")
    )

    def __post_init__(self) -> None:
        if self.tasks is not None:
            tasks = parse_tasks(self.tasks)
            object.__setattr__(self, "tasks", tasks)
            if self.env_id is None:
                object.__setattr__(self, "env_id", tasks[0].env_id)
            if self.episodes is None:
                object.__setattr__(self, "episodes", len(tasks))
            elif self.episodes != len(tasks):
                raise ConfigError(
                    f"episodes ({self.episodes}) differs from the number of tasks ({len(tasks)}); leave episodes out "
                    f"when giving tasks."
                )
        elif self.episodes is None:
            object.__setattr__(self, "episodes", DEFAULT_EPISODES)
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ConfigError(
                f"env_id must be a registered environment id such as 'envgym/Sokoban-v0', got {self.env_id!r}."
            )
        for name in ("episodes",):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}.")
        for name in ("group_size", "num_envs", "workers"):
            value = getattr(self, name)
            if name == "num_envs" and value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}.")
        if not isinstance(self.seed, int):
            raise ConfigError(f"seed must be an integer, got {self.seed!r}.")
        if self.tasks is None and self.episodes % self.group_size:
            raise ConfigError(
                f"episodes ({self.episodes}) must be a multiple of group_size ({self.group_size}): every group "
                f"plays group_size episodes; try episodes={self.episodes - self.episodes % self.group_size or self.group_size}."
            )
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ConfigError(f"max_retries must be an integer >= 0, got {self.max_retries!r}.")
        if self.max_turns is not None and (not isinstance(self.max_turns, int) or self.max_turns < 1):
            raise ConfigError(f"max_turns must be an integer >= 1 or None, got {self.max_turns!r}.")
        for name in ("episode_timeout_s", "step_timeout_s", "agent_timeout_s"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value)):
                raise ConfigError(f"{name} must be a positive number of seconds or None, got {value!r}.")
        for name, options in (("backend", BACKENDS), ("mode", MODES)):
            value = getattr(self, name)
            if value not in options:
                raise ConfigError(
                    f"{name} must be one of {', '.join(map(repr, options))}, got {value!r}.{suggest(str(value), options)}"
                )
        if (self.backend == "remote") != (self.url is not None) or (self.url is not None and not self.url):
            raise ConfigError(
                f"url names the envgym serve server of backend 'remote' (ws://HOST:PORT): give both or neither, "
                f"got backend={self.backend!r}, url={self.url!r}."
            )
        if not isinstance(self.prompt, PromptConfig):
            raise ConfigError(f"prompt must be a PromptConfig, got {type(self.prompt).__name__}.")
        if not isinstance(self.env_kwargs, Mapping) or not isinstance(self.agent_options, Mapping):
            raise ConfigError("env_kwargs and agent_options must be mappings of keyword arguments.")
        if self.agents is not None:
            if not isinstance(self.agents, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.agents.items()
            ):
                raise ConfigError(
                    f"agents must map agent names to agent specs, e.g. {{'agent_1': 'random'}}, got {self.agents!r:.200}."
                )
            for spec_text in self.agents.values():
                split_agent_spec(spec_text)  # a typo fails before anything loads
            object.__setattr__(self, "agents", dict(self.agents) or None)
        if "seed" in self.agent_options:
            raise ConfigError("agent_options cannot set the agent's seed: it comes from the run's seed (--seed).")

    @property
    def groups(self) -> int:
        if self.tasks is not None:
            return len({t.group for t in self.tasks})
        return self.episodes // self.group_size

    def task_list(self) -> tuple[EpisodeTask, ...]:
        """Every episode's task: ``tasks``, or the default list from ``env_id``/``seed``/``group_size``."""
        if self.tasks is not None:
            return tuple(self.tasks)
        return default_tasks(
            self.env_id, episodes=self.episodes, seed=self.seed, group_size=self.group_size, env_kwargs=self.env_kwargs
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what a run folder's ``config.json`` holds)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["prompt"] = self.prompt.to_dict()
        data["env_kwargs"] = json_safe(dict(self.env_kwargs))
        data["agent_options"] = json_safe(dict(self.agent_options))
        if self.agents is None:
            del data["agents"]  # single-agent run folders keep their config.json as before
        else:
            data["agents"] = dict(self.agents)
        data["tasks"] = None if self.tasks is None else [t.to_dict() for t in self.tasks]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"unknown run setting {unknown[0]!r}.{suggest(unknown[0], known)} Known: {', '.join(sorted(known))}."
            )
        values = dict(data)
        if isinstance(values.get("prompt"), Mapping):
            values["prompt"] = PromptConfig.from_dict(values["prompt"])
        return cls(**values)


# The Attributes section of RunConfig's docstring is its fields' help, so the two never drift.
RunConfig.__doc__ = (
    (RunConfig.__doc__ or "").rstrip()
    + "\n\n    Attributes:\n"
    + "".join(f"        {f.name}: {f.metadata['help']}\n" for f in fields(RunConfig))
)
