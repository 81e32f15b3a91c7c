"""The episode runner: N episodes over M environment instances, with any agent, on any backend.

Two modes:

* **lock-step** (default): every turn, all live episodes go to the agent in one batch, so a
  batched model makes one generation call per turn across episodes; the environments of the batch
  then step together (in parallel on the process and Ray backends).
* **async**: each of ``concurrency`` threads plays its own episodes one after the other; the
  agent sees batches of one. For agents that wait on I/O (an OpenAI-compatible server).

Three backends for the environments (:mod:`envgym.rollout.pools`): in this process (``inproc``),
a subprocess worker pool (``process``) and Ray actors (``ray``). A worker that dies is replaced
and its episodes restarted.

A run plays a task list (:mod:`envgym.rollout.tasks`): one :class:`EpisodeTask` per episode,
naming its environment, seed, group and member, so episodes of different environments share one
lock-step batch. Without a list, episode ``i`` plays environment seed ``seed + i // group_size``
(``group_size`` episodes share a seed: group rollouts for GRPO). The same configuration replays
the same tasks, in any mode, on any backend, whether the run is interrupted and resumed or not.

Turn limits: the environment's own ``max_turns`` (an env kwarg) is the authoritative one; the
harness's ``max_turns`` (run-wide, or per task) is an outer cap that truncates an episode the
environment has not ended (``truncated_by="harness_max_turns"``), and the rules of when an episode
ends live in :mod:`envgym.rollout.ending`, shared with the leaderboard's replay.

Infrastructure failures (the environment raising or its worker dying, the agent raising or
returning something that is not an :class:`AgentOutput`, wall-clock limits) restart the episode
up to ``max_retries`` times; after that the episode is recorded with its reason
(``env_error``, ``agent_error``, ``timeout``) and left out of the scores (reported apart).
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from envgym import registration
from envgym._clock import utc_timestamp
from envgym.core import TerminationReason
from envgym.errors import ConfigError, StopRun, suggest
from envgym.rollout.agent import Agent, AgentInput, AgentOutput
from envgym.rollout.ending import episode_end, split_timed_out
from envgym.rollout.multiagent import run_parallel
from envgym.rollout.pools import BACKENDS, EnvFailure, EnvPool, ResetRequest, StepRequest, StepResult, make_pool
from envgym.rollout.prompting import Conversation, ParsedReply, PromptConfig
from envgym.rollout.records import Trajectory, Turn, json_safe, recordable_observation
from envgym.rollout.rundir import RunFolder
from envgym.rollout.screenshots import save_screenshot
from envgym.rollout.specs import known_agent_specs, make_agent, split_agent_spec
from envgym.rollout.summary import summarize
from envgym.rollout.tasks import EpisodeTask, default_tasks, episode_id, episode_numbers, parse_tasks

__all__ = ["EpisodeTask", "RunConfig", "RunResult", "Runner", "run", "run_episodes"]

log = logging.getLogger(__name__)

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
        metadata=_help("Where environments run: inproc (this process), process (worker pool) or ray."),
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


@dataclass
class RunResult:
    """What :meth:`Runner.run` returns: every episode (in index order) and the summary."""

    trajectories: list[Trajectory]
    summary: dict[str, Any]
    path: Path | None = None


class _Live:
    """One live episode attempt (``index``: the task's position in the run's list)."""

    __slots__ = ("conv", "done", "index", "info", "kind", "max_turns", "obs", "sampled", "shot", "slot", "t0", "traj")

    def __init__(self, index: int, slot: int, traj: Trajectory, kind: int, max_turns: int | None) -> None:
        self.index = index
        self.slot = slot
        self.traj = traj
        self.kind = kind
        self.max_turns = max_turns
        self.obs = ""
        self.info: dict[str, Any] = {}
        self.conv: Conversation | None = None
        self.t0 = time.perf_counter()
        self.sampled: str | None = None
        self.shot: str | None = None  # the recorded screenshot of the screen the agent acts on
        self.done = False


class _Failure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _check_output(output: Any) -> str | None:
    """Why ``output`` is not a usable :class:`AgentOutput`, or ``None``."""
    if not isinstance(output, AgentOutput):
        return f"expected an AgentOutput, got {type(output).__name__}: {output!r:.200}"
    if not isinstance(output.text, str):
        return f"AgentOutput.text must be a str, got {type(output.text).__name__}: {output.text!r:.200}"
    if output.token_ids is not None and output.logprobs is not None and len(output.token_ids) != len(output.logprobs):
        return f"token_ids ({len(output.token_ids)}) and logprobs ({len(output.logprobs)}) differ in length"
    return None


class Runner:
    """Runs the episodes of a :class:`RunConfig`.

    Args:
        config: the run.
        agent: an agent object; ``None`` builds one from ``config.agent`` (a spec).
        out: a run folder to write into (and resume from); ``None`` keeps records in memory only.
        on_episode_end: called with every recorded :class:`Trajectory` (from the runner's thread;
            in async mode from worker threads, one at a time).
        on_task_end: called as ``on_task_end(task, trajectory)`` with every recorded episode and
            the :class:`EpisodeTask` it played (e.g. to file it under ``task.tag``).
        on_progress: called after every turn (and once when play starts) with keyword running
            totals: ``done`` (episodes recorded, those of a resumed folder included), ``total``
            (episodes of the run), ``live`` (episodes under way), ``turns`` (turns played this
            session), ``tokens`` (completion tokens the agent produced this session, where it
            reports them) and, in lock-step mode, ``turns_left`` (the turns still to play at most,
            from every episode's turn limit; ``None`` when an episode has only the environment's
            own). :meth:`envgym.progress.Progress.update` takes exactly these.
        screenshots: ``screenshots(task)`` is the folder that receives the screenshots of the
            task's episodes (:mod:`envgym.rollout.screenshots`; the bench files them by entry);
            default: the run folder ``out``. Envs made with ``render_mode="rgb_array"`` are asked
            for a frame after every reset and step only when one of the two is set.
    """

    # What the multi-agent path (envgym.rollout.multiagent) shares with this runner.
    failure_type = _Failure
    check_output = staticmethod(_check_output)
    identity_keys = IDENTITY_KEYS
    max_default_envs = MAX_DEFAULT_ENVS

    def __init__(
        self,
        config: RunConfig,
        agent: Agent | None = None,
        *,
        out: str | Path | None = None,
        on_episode_end: Callable[[Trajectory], None] | None = None,
        on_task_end: Callable[[EpisodeTask, Trajectory], None] | None = None,
        on_progress: Callable[..., None] | None = None,
        agents: Mapping[str, Agent] | None = None,
        screenshots: Callable[[EpisodeTask], str | Path] | None = None,
    ) -> None:
        self.config = config
        self._agents = dict(agents) if agents else None
        # Where a task's screenshots go (envgym.rollout.screenshots); default: the run folder.
        self._screens = screenshots
        self.on_task_end = on_task_end
        self.on_progress = on_progress
        self.tasks = config.task_list()
        # Each distinct (env id, kwargs) is one env kind of the pool; a task plays its kind.
        keys: dict[tuple[str, str], int] = {}
        self._kinds: list[tuple[str, dict[str, Any]]] = []
        self._task_kind: list[int] = []
        for task in self.tasks:
            key = task.env_key
            if key not in keys:
                keys[key] = len(self._kinds)
                self._kinds.append((task.env_id, dict(task.env_kwargs)))
            self._task_kind.append(keys[key])
        self._numbers = episode_numbers(self.tasks, distinct=out is not None)
        self._agent = agent
        self.out = Path(out) if out is not None else None
        self.on_episode_end = on_episode_end
        self._lock = threading.Lock()
        self._errors: dict[int, list[str]] = {}
        self._done: dict[int, Trajectory] = {}
        self._folder: RunFolder | None = None
        self._stop = threading.Event()
        self._agent_name = config.agent or "agent"

    # -- public -----------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Play every episode not already recorded in the run folder; return all of them."""
        cfg = self.config
        # Unknown ids fail here, before anything loads.
        kinds = {env_id: registration.spec(env_id).kind for env_id in dict.fromkeys(e for e, _ in self._kinds)}
        if "parallel" in kinds.values():
            if set(kinds.values()) != {"parallel"}:
                raise ConfigError(
                    f"a run plays either single-agent ids or PettingZoo Parallel ids, not both: {kinds!r}."
                )
            trajectories, summary = run_parallel(self, self._agent, self._agents)
            return RunResult(trajectories, summary, self.out)
        for env_id, kind in kinds.items():
            if kind != "gymnasium":
                raise ConfigError(
                    f"{env_id!r} is a turn-based ({kind}) multi-agent environment; the runner plays single-agent ids "
                    "and PettingZoo Parallel ids."
                )
        if cfg.agents or self._agents:
            raise ConfigError("agents (one spec per agent) applies to PettingZoo Parallel envs only.")
        # Build one environment of each kind here first: bad kwargs or a missing extra are usage
        # errors, not env_errors of every episode.
        for env_id, kwargs in self._kinds:
            registration.make(env_id, **kwargs).close()
        if self.out is not None:
            # Locked from here until closed: a second process writing into this folder stops here.
            self._folder = RunFolder(self.out, cfg.to_dict(), IDENTITY_KEYS)
        agent: Agent | None = self._agent
        try:
            if self._folder is not None:
                position = {n: i for i, n in enumerate(self._numbers)}
                self._done = {position[n]: t for n, t in self._folder.finished.items() if n in position}
            todo = [i for i in range(len(self.tasks)) if i not in self._done]
            started = time.perf_counter()
            if agent is None:
                agent = self._build_agent()
            self._agent_name = cfg.agent or getattr(agent, "name", type(agent).__name__)
            if agent.chat and cfg.prompt.history == "summary":
                cfg.prompt.load_summarizer()  # a bad hook path fails before any episode runs
            if todo:
                self._play(agent, todo)
            trajectories = [self._done[i] for i in sorted(self._done)]
            summary = summarize(trajectories, time.perf_counter() - started)
            summary = {"env_id": cfg.env_id, "agent": self._agent_name, "seed": cfg.seed, **summary}
            env_ids = list(dict.fromkeys(env_id for env_id, _ in self._kinds))
            if env_ids != [cfg.env_id]:
                summary["env_ids"] = env_ids
            if self._folder is not None:
                self._folder.write_summary(summary)
        finally:
            try:
                if self._agent is None and agent is not None:
                    agent.close()
            finally:
                if self._folder is not None:
                    self._folder.close()
        return RunResult(trajectories, summary, self.out)

    def _play(self, agent: Agent, todo: list[int]) -> None:
        cfg = self.config
        agent.reset()
        slots = max(1, min(cfg.num_envs or MAX_DEFAULT_ENVS, len(todo)))
        pool = make_pool(
            self._kinds,
            num_slots=slots,
            backend=cfg.backend,
            workers=cfg.workers,
            step_timeout_s=cfg.step_timeout_s,
            ray_address=cfg.ray_address,
        )
        try:
            if cfg.mode == "lockstep":
                self._run_lockstep(agent, pool, todo)
            else:
                self._run_async(agent, pool, todo)
        finally:
            pool.close()

    # -- agent ------------------------------------------------------------------------------
    def _build_agent(self) -> Agent:
        return make_agent(self.config.agent or "random", seed=self.config.seed, **dict(self.config.agent_options))

    def _call_agent(self, agent: Agent, inputs: list[AgentInput]) -> list[AgentOutput]:
        limit = self.config.agent_timeout_s
        if limit is None:
            return agent.act(inputs)
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["out"] = agent.act(inputs)
            except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
                box["err"] = err

        thread = threading.Thread(target=target, name="envgym-agent-call", daemon=True)
        thread.start()
        thread.join(limit)
        if thread.is_alive():
            raise _Failure(TerminationReason.TIMEOUT.value, f"the agent did not answer within {limit:g} s")
        if "err" in box:
            raise box["err"]
        return box["out"]

    def _ask(self, agent: Agent, inputs: list[AgentInput]) -> list[Any]:
        """The agent's outputs for ``inputs``, or one :class:`_Failure` per input when the call
        raised, timed out or returned the wrong number of outputs."""
        try:
            outputs = self._call_agent(agent, inputs)
        except _Failure as err:
            return [err] * len(inputs)
        except (KeyboardInterrupt, StopRun):
            raise
        except Exception as err:  # noqa: BLE001 - any agent crash is an agent_error, the run goes on
            return [_Failure(TerminationReason.AGENT_ERROR.value, f"{type(err).__name__}: {err}")] * len(inputs)
        if not isinstance(outputs, Sequence) or isinstance(outputs, str) or len(outputs) != len(inputs):
            count = len(outputs) if isinstance(outputs, Sequence) else type(outputs).__name__
            message = f"the agent returned {count} outputs for {len(inputs)} inputs"
            return [_Failure(TerminationReason.AGENT_ERROR.value, message)] * len(inputs)
        return list(outputs)

    # -- episode bookkeeping ------------------------------------------------------------------
    def _new_attempt(self, index: int, slot: int) -> _Live:
        task = self.tasks[index]
        number = self._numbers[index]
        traj = Trajectory(
            episode_id=episode_id(task.tag, number),
            index=number,
            env_id=task.env_id,
            seed=task.seed,
            agent=self._agent_name,
            env_kwargs=json_safe(dict(task.env_kwargs)),
            group=task.group,
            member=task.member,
            started_at=utc_timestamp(),
        )
        return _Live(index, slot, traj, self._task_kind[index], self._turn_limit(index))

    def _turn_limit(self, index: int) -> int | None:
        """The harness turn limit of task ``index`` (``None``: only the environment's own)."""
        task = self.tasks[index]
        return task.max_turns if task.max_turns is not None else self.config.max_turns

    def _reset_request(self, live: _Live, want_sample: bool) -> ResetRequest:
        return ResetRequest(live.slot, live.traj.seed, None, want_sample, live.kind, self._wants_frames)

    @property
    def _wants_frames(self) -> bool:
        """Frames are asked of the envs only when they have somewhere to go."""
        return self._screens is not None or self._folder is not None

    def _save_frame(self, live: _Live, result: StepResult) -> None:
        """Record the screen ``result`` shows (the one the next action is taken on), if it has one."""
        if not isinstance(live, _Live):  # a multi-agent seat (envgym.rollout.multiagent): no frames
            return
        live.shot = None
        if result.frame is None:
            return
        if self._screens is not None:
            root = Path(self._screens(self.tasks[live.index]))
        elif self._folder is not None:
            root = self._folder.path
        else:
            return
        try:
            live.shot = save_screenshot(root, live.traj.episode_id, len(live.traj.turns), result.frame)
        except (OSError, ValueError, TypeError) as err:  # a lost screenshot never costs the episode
            log.warning("episode %s: screenshot not saved (%s)", live.traj.episode_id, err)

    def _started(self, agent: Agent, live: _Live, result: StepResult) -> None:
        live.obs = result.observation
        live.info = result.info
        live.sampled = result.sampled_action
        live.traj.task = json_safe(dict(result.info.get("task") or {}))
        live.traj.reward_components = dict.fromkeys(result.info.get("reward_components") or {}, 0.0)
        self._save_frame(live, result)
        live.t0 = time.perf_counter()
        agent.start_episode(live.traj.episode_id, live.traj.env_id, live.traj.seed, member=live.traj.member)
        if agent.chat:
            live.conv = Conversation(self.config.prompt, live.traj.env_id, result.observation, result.info)

    def _fail(self, agent: Agent, live: _Live, kind: str, message: str) -> bool:
        """Record a failed attempt. Returns True when the episode should be tried again."""
        live.done = True
        try:
            agent.end_episode(live.traj.episode_id)
        except Exception:
            log.exception("agent.end_episode failed for episode %s", live.traj.episode_id)
        with self._lock:
            errors = self._errors.setdefault(live.index, [])
            errors.append(f"{kind}: {message}")
            retry = len(errors) <= self.config.max_retries and not self._stop.is_set()
        log.warning("episode %s attempt %d: %s: %s", live.traj.episode_id, len(errors), kind, message)
        if not retry and not self._stop.is_set():
            traj = live.traj
            traj.termination_reason = kind
            traj.errors = list(errors)
            traj.attempts = len(errors)
            traj.success = False
            self._finish(traj, live)
        return retry

    def _finish(self, traj: Trajectory, live: _Live) -> None:
        traj.wall_time_s = time.perf_counter() - live.t0
        traj.finished_at = utc_timestamp()
        with self._lock:
            errors = self._errors.pop(live.index, [])
            if traj.scored:
                traj.errors = errors
                traj.attempts = len(errors) + 1
            self._done[live.index] = traj
            if self._folder is not None:
                self._folder.append(traj)
            if self.on_episode_end is not None:
                self.on_episode_end(traj)
            if self.on_task_end is not None:
                self.on_task_end(self.tasks[live.index], traj)

    def _input(self, pool: EnvPool, live: _Live) -> AgentInput:
        sample: Callable[[Any], str] | None
        env = pool.slot_env(live.slot)
        if env is not None:
            sample = getattr(env.unwrapped, "sample_action", None)
        elif live.sampled is not None:
            sampled = live.sampled
            sample = lambda _rng: sampled
        else:
            sample = None
        return AgentInput.for_turn(
            live.traj.episode_id, live.traj.env_id, live.obs, live.info, len(live.traj.turns), live.conv, sample
        )

    # -- one turn of a batch of live episodes ---------------------------------------------------
    def _turn(self, agent: Agent, pool: EnvPool, batch: list[_Live]) -> list[tuple[_Live, str | None, str | None]]:
        """Play one turn of every episode in ``batch``.

        Returns ``(live, failure kind, message)`` for the episodes that failed (kind ``None`` for
        the others); ended episodes are recorded here and flagged ``live.done``.
        """
        cfg = self.config
        failures: list[tuple[_Live, str | None, str | None]] = []
        batch, timed_out = split_timed_out(batch, cfg.episode_timeout_s)
        failures.extend(timed_out)
        if not batch:
            return failures
        inputs = [self._input(pool, live) for live in batch]
        t0 = time.perf_counter()
        outputs: list[Any] = self._ask(agent, inputs)
        agent_s = time.perf_counter() - t0
        if (
            len(batch) > 1
            and any(isinstance(o, _Failure) for o in outputs)
            and not all(isinstance(o, _Failure) and o.kind == TerminationReason.TIMEOUT.value for o in outputs)
        ):
            # The batched call failed as a whole: ask again one episode at a time, so only the
            # episode that makes the agent fail is charged with it.
            outputs = [self._ask(agent, [item])[0] for item in inputs]
            agent_s = time.perf_counter() - t0
        stepping: list[tuple[_Live, AgentOutput, str, ParsedReply | None, tuple[dict[str, str], ...]]] = []
        for live, output, item in zip(batch, outputs, inputs, strict=True):
            if isinstance(output, _Failure):
                failures.append((live, output.kind, output.message))
                continue
            problem = _check_output(output)
            if problem is not None:
                failures.append((live, TerminationReason.AGENT_ERROR.value, problem))
                continue
            if live.conv is not None:
                parsed = live.conv.parse(output.text)
                stepping.append((live, output, parsed.action, parsed, item.messages))
            else:
                stepping.append((live, output, output.text, None, ()))
        if not stepping:
            return failures
        want = agent.wants_sample_action
        frames = self._wants_frames
        results = pool.step([StepRequest(live.slot, action, want, frames) for live, _, action, _, _ in stepping])
        for (live, output, action, parsed, messages), result in zip(stepping, results, strict=True):
            if isinstance(result, EnvFailure):
                failures.append((live, result.kind, result.message))
                continue
            self._record_turn(live, output, action, parsed, messages, result, agent_s)
            if live.done:
                try:
                    agent.end_episode(live.traj.episode_id)
                except Exception:
                    log.exception("agent.end_episode failed for episode %s", live.traj.episode_id)
                self._finish(live.traj, live)
        return failures

    def _record_turn(
        self,
        live: _Live,
        output: AgentOutput,
        action: str,
        parsed: ParsedReply | None,
        messages: tuple[dict[str, str], ...],
        result: StepResult,
        agent_s: float,
    ) -> None:
        traj = live.traj
        info = result.info
        components = info.get("reward_components") or {}
        usage = output.extra.get("usage") if isinstance(output.extra, dict) else None
        prompt_tokens = len(output.prompt_token_ids) if output.prompt_token_ids is not None else None
        completion_tokens = len(output.token_ids) if output.token_ids is not None else None
        if isinstance(usage, Mapping):
            prompt_tokens = prompt_tokens if prompt_tokens is not None else usage.get("prompt_tokens")
            completion_tokens = completion_tokens if completion_tokens is not None else usage.get("completion_tokens")
        chat = live.conv is not None
        turn = Turn(
            index=len(traj.turns),
            observation=recordable_observation(live.obs),
            action=action,
            reward=float(result.reward),
            reward_components=dict(components),
            action_valid=bool(info.get("action_valid", True)),
            terminated=bool(result.terminated),
            truncated=bool(result.truncated),
            completion=output.text if chat else None,
            format_ok=parsed.format_ok if parsed is not None else None,
            messages=[dict(m) for m in messages] if chat else None,
            prompt_token_ids=output.prompt_token_ids,
            token_ids=output.token_ids,
            logprobs=output.logprobs,
            finish_reason=output.finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            agent_s=agent_s,
            env_s=result.env_s,
            extra=json_safe(output.extra) if output.extra else {},
            screenshot=getattr(live, "shot", None),
        )
        traj.turns.append(turn)
        traj.total_reward += turn.reward
        for key, value in components.items():
            traj.reward_components[key] = traj.reward_components.get(key, 0.0) + value
        traj.prompt_tokens += prompt_tokens or 0
        traj.completion_tokens += completion_tokens or 0
        if live.conv is not None and parsed is not None:
            live.conv.record(output.text, parsed, result.observation, info, completion_tokens)
        live.obs = result.observation
        live.info = info
        live.sampled = result.sampled_action
        self._save_frame(live, result)
        end = episode_end(
            terminated=result.terminated,
            truncated=result.truncated,
            info=info,
            turns=len(traj.turns),
            max_turns=live.max_turns,
            turns_exhausted=live.conv is not None and live.conv.turns_exhausted,
            budget_exhausted=live.conv is not None and live.conv.budget_exhausted,
        )
        if end is None:
            return
        if end.truncated_by is not None:
            turn.truncated = True
            traj.extra["truncated_by"] = end.truncated_by
        traj.success = end.success
        traj.termination_reason = str(end.reason)
        traj.invalid_actions = int(info.get("invalid_actions", sum(1 for t in traj.turns if not t.action_valid)))
        traj.final_observation = recordable_observation(result.observation)
        final_shot = getattr(live, "shot", None)
        if final_shot is not None:
            traj.extra["final_screenshot"] = final_shot
        live.done = True

    # -- lock-step ----------------------------------------------------------------------------
    def _pick_slot(self, free: list[int], slot_kind: dict[int, int], index: int) -> int:
        """A free slot for task ``index``: the last freed one already holding its env kind, else
        the last freed one (its env is remade)."""
        kind = self._task_kind[index]
        if len(self._kinds) > 1:
            for i in range(len(free) - 1, -1, -1):
                if slot_kind.get(free[i], 0) == kind:
                    return free.pop(i)
        return free.pop()

    def _run_lockstep(self, agent: Agent, pool: EnvPool, todo: list[int]) -> None:
        pending = collections.deque(todo)
        free = list(range(pool.num_slots - 1, -1, -1))
        slot_kind: dict[int, int] = {}  # the env kind each slot last played
        live: dict[int, _Live] = {}
        want = agent.wants_sample_action
        played = {"turns": 0, "tokens": 0}  # this session's, for on_progress

        limits = [self._turn_limit(i) for i in range(len(self.tasks))]
        budgeted = all(limit is not None for limit in limits)

        def report() -> None:
            if self.on_progress is not None:
                with self._lock:
                    done = len(self._done)
                # Turns still to play at most (every episode's turn limit), for the ETA.
                left = None
                if budgeted:
                    left = sum(limits[i] for i in pending) + sum(
                        max(0, limits[item.index] - len(item.traj.turns)) for item in live.values()
                    )
                self.on_progress(
                    done=done,
                    total=len(self.tasks),
                    live=len(live),
                    turns=played["turns"],
                    tokens=played["tokens"],
                    turns_left=left,
                )

        def handle(failed: list[tuple[_Live, str | None, str | None]]) -> None:
            for item, kind, message in failed:
                live.pop(item.slot, None)
                free.append(item.slot)
                if kind is not None and self._fail(agent, item, kind, message or ""):
                    pending.appendleft(item.index)

        report()
        while pending or live:
            if free and pending:
                starting = []
                while free and pending:
                    index = pending.popleft()
                    starting.append(self._new_attempt(index, self._pick_slot(free, slot_kind, index)))
                for attempt in starting:
                    slot_kind[attempt.slot] = attempt.kind
                results = pool.reset([self._reset_request(s, want) for s in starting])
                failed = []
                for attempt, result in zip(starting, results, strict=True):
                    if isinstance(result, EnvFailure):
                        failed.append((attempt, result.kind, result.message))
                    else:
                        self._started(agent, attempt, result)
                        live[attempt.slot] = attempt
                handle(failed)
                report()  # the new episodes are live before their first agent call
                if not live:
                    continue
            batch = [live[s] for s in sorted(live)]
            before = [(len(item.traj.turns), item.traj.completion_tokens) for item in batch]
            failed = self._turn(agent, pool, batch)
            for item, (turns, tokens) in zip(batch, before, strict=True):
                played["turns"] += len(item.traj.turns) - turns
                played["tokens"] += item.traj.completion_tokens - tokens
            handle(failed)
            for item in batch:
                if item.done and live.get(item.slot) is item:
                    del live[item.slot]
                    free.append(item.slot)
            report()

    # -- async --------------------------------------------------------------------------------
    def _run_async(self, agent: Agent, pool: EnvPool, todo: list[int]) -> None:
        queue = collections.deque(todo)
        queue_lock = threading.Lock()
        want = agent.wants_sample_action
        crashed: list[BaseException] = []
        played = {"turns": 0, "tokens": 0, "live": 0}  # this session's, for on_progress
        progress_lock = threading.Lock()  # one on_progress call at a time, totals in order

        def report(turns: int = 0, tokens: int = 0, live: int = 0) -> None:
            with progress_lock:
                played["turns"] += turns
                played["tokens"] += tokens
                played["live"] += live
                if self.on_progress is not None:
                    with self._lock:
                        done = len(self._done)
                    self.on_progress(
                        done=done,
                        total=len(self.tasks),
                        live=played["live"],
                        turns=played["turns"],
                        tokens=played["tokens"],
                    )

        def worker(slot: int) -> None:
            try:
                while not self._stop.is_set():
                    with queue_lock:
                        if not queue:
                            return
                        index = queue.popleft()
                    while not self._stop.is_set():
                        attempt = self._new_attempt(index, slot)
                        (result,) = pool.reset([self._reset_request(attempt, want)])
                        if isinstance(result, EnvFailure):
                            retry = self._fail(agent, attempt, result.kind, result.message)
                            report()  # a failure past its retries is recorded (done)
                            if retry:
                                continue
                            break
                        self._started(agent, attempt, result)
                        failure: tuple[_Live, str | None, str | None] | None = None
                        report(live=1)
                        try:
                            while not attempt.done and not self._stop.is_set():
                                turns, tokens = len(attempt.traj.turns), attempt.traj.completion_tokens
                                failed = self._turn(agent, pool, [attempt])
                                if failed:
                                    failure = failed[0]
                                    break
                                report(len(attempt.traj.turns) - turns, attempt.traj.completion_tokens - tokens)
                        finally:
                            report(live=-1)
                        if failure is not None and failure[1] is not None:
                            retry = self._fail(agent, attempt, failure[1], failure[2] or "")
                            report()  # a failure past its retries is recorded (done)
                            if retry:
                                continue
                        break
            except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
                crashed.append(err)
                self._stop.set()

        report()
        threads = [
            threading.Thread(target=worker, args=(slot,), name=f"envgym-episode-{slot}", daemon=True)
            for slot in range(pool.num_slots)
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.1)
        except KeyboardInterrupt:
            self._stop.set()
            for thread in threads:
                thread.join(5.0)
            raise
        if crashed:
            raise crashed[0]


def run(config: RunConfig, agent: Agent | None = None, *, out: str | Path | None = None, **hooks: Any) -> RunResult:
    """Shorthand for ``Runner(config, agent, out=out, **hooks).run()``."""
    return Runner(config, agent, out=out, **hooks).run()


def run_episodes(
    env_id: str,
    agent: Agent,
    *,
    episodes: int,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    num_envs: int | None = None,
    on_episode_end: Callable[[Trajectory], None] | None = None,
    **settings: Any,
) -> list[Trajectory]:
    """Run ``episodes`` episodes of ``env_id`` with an agent object, in this process, in memory.

    ``settings`` are further :class:`RunConfig` fields (``group_size``, ``max_turns``,
    ``backend``...). Returns the trajectories in episode order.
    """
    config = RunConfig(
        env_id=env_id,
        episodes=episodes,
        seed=seed,
        env_kwargs=dict(env_kwargs or {}),
        num_envs=num_envs,
        **settings,
    )
    return Runner(config, agent, on_episode_end=on_episode_end).run().trajectories
