"""The episode runner: N episodes over M environment instances, with any agent, on any backend.

Two modes:

* **lock-step** (default): every turn, all live episodes go to the agent in one batch, so a
  batched model makes one generation call per turn across episodes; the environments of the batch
  then step together (in parallel on the process and Ray backends).
* **async**: each of ``concurrency`` threads plays its own episodes one after the other; the
  agent sees batches of one. For agents that wait on I/O (an OpenAI-compatible server).

Four backends for the environments (:mod:`envgym.rollout.pools`): in this process (``inproc``),
a subprocess worker pool (``process``), Ray actors (``ray``) and an ``envgym serve`` server
(``remote``, at ``url``). A worker that dies, or a server that goes away, fails its episodes'
requests, and those episodes are restarted.

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

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgym import registration
from envgym.errors import ConfigError
from envgym.remote import check_served
from envgym.remote import make as remote_make
from envgym.rollout.agent import Agent
from envgym.rollout.config import DEFAULT_EPISODES, IDENTITY_KEYS, MAX_DEFAULT_ENVS, MODES, RunConfig
from envgym.rollout.multiagent import run_parallel
from envgym.rollout.players import SingleAgentPlay
from envgym.rollout.pools import make_pool
from envgym.rollout.records import Trajectory
from envgym.rollout.session import RunSession
from envgym.rollout.specs import make_agent
from envgym.rollout.tasks import EpisodeTask
from envgym.serve.images import served_url

# RunConfig and its constants live in envgym.rollout.config; they are importable from here as before.
__all__ = [
    "DEFAULT_EPISODES",
    "IDENTITY_KEYS",
    "MAX_DEFAULT_ENVS",
    "MODES",
    "EpisodeTask",
    "RunConfig",
    "RunResult",
    "Runner",
    "run",
    "run_episodes",
]

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What :meth:`Runner.run` returns: every episode (in index order) and the summary."""

    trajectories: list[Trajectory]
    summary: dict[str, Any]
    path: Path | None = None


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
        agents: agent objects for named agents of a PettingZoo Parallel env (as ``config.agents``).

    The run's shared state (tasks, env kinds, run folder, retries, records) is :attr:`session`
    (:class:`~envgym.rollout.session.RunSession`), which the player of the run uses: lock-step or
    async (:mod:`envgym.rollout.players`), or the Parallel player (:mod:`envgym.rollout.multiagent`).
    """

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
        self.session = RunSession(
            config,
            out=out,
            on_episode_end=on_episode_end,
            on_task_end=on_task_end,
            on_progress=on_progress,
            screenshots=screenshots,
        )
        self._agent = agent
        self._agents = dict(agents) if agents else None

    @property
    def tasks(self) -> tuple[EpisodeTask, ...]:
        """Every episode's task, in the run's order."""
        return self.session.tasks

    @property
    def out(self) -> Path | None:
        """The run folder (``None``: records in memory only)."""
        return self.session.out

    # -- public -----------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Play every episode not already recorded in the run folder; return all of them.

        With backend ``remote`` and ``url="docker:FAMILY"`` the run plays on a container of
        FAMILY's image (``envgym image build FAMILY``), started here and removed when it ends."""
        if self.config.backend != "remote" or not str(self.config.url).startswith("docker:"):
            return self._run()
        given = self.config
        with served_url(str(given.url)) as url:
            self.config = self.session.config = dataclasses.replace(given, url=url)
            try:
                return self._run()
            finally:
                self.config = self.session.config = given

    def _run(self) -> RunResult:
        cfg, session = self.config, self.session
        # Unknown ids fail here, before anything loads (asked of the server for backend remote).
        kinds = _kinds(cfg, session.env_ids)
        if "parallel" in kinds.values():
            if set(kinds.values()) != {"parallel"}:
                raise ConfigError(
                    f"a run plays either single-agent ids or PettingZoo Parallel ids, not both: {kinds!r}."
                )
            trajectories, summary = run_parallel(session, self._agent, self._agents)
            return RunResult(trajectories, summary, session.out)
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
        for env_id, kwargs in session.kinds:
            if cfg.backend == "remote":
                _check_remote(cfg.url, env_id, kwargs)
            else:
                registration.make(env_id, **kwargs).close()
        # Locked from here until closed: a second process writing into this folder stops here.
        session.open_folder()
        agent: Agent | None = self._agent
        try:
            if session.folder is not None:
                position = {n: i for i, n in enumerate(session.numbers)}
                session.done = {position[n]: t for n, t in session.folder.finished.items() if n in position}
                session.done_tasks = set(session.done)
            todo = [i for i in range(len(session.tasks)) if i not in session.done]
            started = time.perf_counter()
            if agent is None:
                agent = make_agent(cfg.agent or "random", seed=cfg.seed, **dict(cfg.agent_options))
            session.agent_name = cfg.agent or getattr(agent, "name", type(agent).__name__)
            if agent.chat and cfg.prompt.history == "summary":
                cfg.prompt.load_summarizer()  # a bad hook path fails before any episode runs
            if todo:
                self._play(agent, todo)
            trajectories = [session.done[i] for i in sorted(session.done)]
            summary = session.summary(trajectories, time.perf_counter() - started)
            if session.env_ids != [cfg.env_id]:
                summary["env_ids"] = session.env_ids
            if session.folder is not None:
                session.folder.write_summary(summary)
        finally:
            try:
                if self._agent is None and agent is not None:
                    agent.close()
            finally:
                session.close_folder()
        return RunResult(trajectories, summary, session.out)

    def _play(self, agent: Agent, todo: list[int]) -> None:
        cfg = self.config
        agent.reset()
        slots = max(1, min(cfg.num_envs or MAX_DEFAULT_ENVS, len(todo)))
        pool = make_pool(
            self.session.kinds,
            num_slots=slots,
            backend=cfg.backend,
            workers=cfg.workers,
            step_timeout_s=cfg.step_timeout_s,
            ray_address=cfg.ray_address,
            url=cfg.url,
        )
        try:
            play = SingleAgentPlay(self.session, agent, pool)
            if cfg.mode == "lockstep":
                play.lockstep(todo)
            else:
                play.run_async(todo)
        finally:
            pool.close()


def _kinds(cfg: RunConfig, env_ids: list[str]) -> dict[str, str]:
    """Each env id's kind (``gymnasium``, ``aec``, ``parallel``): from the registry, or from the
    server that plays them (backend ``remote``)."""
    if cfg.backend != "remote":
        return {env_id: registration.spec(env_id).kind for env_id in env_ids}
    assert cfg.url is not None  # RunConfig pairs backend remote with a url
    return {env_id: "parallel" if check_served(cfg.url, env_id) == "parallel" else "gymnasium" for env_id in env_ids}


def _check_remote(url: str | None, env_id: str, kwargs: Mapping[str, Any]) -> None:
    """One reset of ``env_id`` with ``kwargs`` on the server: refused kwargs are a usage error
    (:class:`~envgym.remote.RemoteKwargsError`), not an ``env_error`` of every episode."""
    assert url is not None
    with remote_make(url, env_id, **kwargs) as env:
        env.reset()


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
