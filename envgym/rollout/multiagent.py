"""The multi-agent rollout path: PettingZoo Parallel text environments through the same harness.

:class:`~envgym.rollout.runner.Runner` hands a run here when its environment ids are registered
as PettingZoo Parallel envs (``kind="parallel"``, e.g. ``envgym/Coop-TrustDilemma-Text-v0``).
Any Parallel env with text observations and actions keeping envgym's per-agent contract
(:mod:`envgym.multiagent`) plays; nothing here knows a particular game.

* **One batched call per round.** Every round, the live agents of every live episode go to their
  policy together: in self-play (one policy for every agent) that is *one* ``Agent.act`` call over
  ``episodes x agents`` prompts; with several policies, one call per distinct policy object.
* **Policies.** ``RunConfig.agent`` plays every agent (self-play); ``RunConfig.agents`` maps agent
  names to other specs (``{"agent_1": "random"}``); agents built from the same spec share one
  object (and its batches). ``RunConfig.agent_options`` apply to the ``agent`` spec only.
  A :class:`Runner` given agent objects (``agent=``, ``agents=``) uses those instead.
* **Records.** Each agent of each episode is one standard :class:`~.records.Trajectory` (its own
  turns, rewards, reward components, tokens, chat messages, token ids and log-probs), so
  :func:`~.summary.summarize`, bench metrics and the trainer read them unchanged. The records of
  episode number ``e`` (in a run with ``n`` agents per episode) have ``index = e * n + k`` for the
  ``k``-th agent of ``possible_agents`` and ``episode_id = "<episode id>/<agent>"``; ``seed``,
  ``group`` and ``member`` are the episode's. ``extra["multiagent"]`` holds the agent's name and
  position, the policy of every agent, and the episode's multi-agent metrics
  (:func:`episode_metrics`).
* **Episode end.** An agent's record ends when the environment terminates or truncates it
  (:func:`~.ending.episode_end` rules, per agent); the harness's turn limit or a token budget
  ending one agent's record ends the whole episode (the others are truncated at the same round,
  ``truncated_by`` as recorded), since a Parallel round needs every live agent's action.
* **Failures.** An infrastructure failure of any agent or of the environment restarts the whole
  episode (``max_retries``); after that every agent's record carries the reason and is unscored.

Environments run in this process, in lock-step (``backend="inproc"``, ``mode="lockstep"``), or in
an ``envgym serve`` server (``backend="remote"``, one :class:`~envgym.remote.RemoteParallelEnv` per
episode).
"""

from __future__ import annotations

import collections
import json
import logging
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from envgym import registration
from envgym._clock import utc_timestamp
from envgym.core import INFO_KEYS, TerminationReason
from envgym.errors import ConfigError, StopRun, suggest
from envgym.remote import make as remote_make
from envgym.rollout.agent import Agent, AgentInput
from envgym.rollout.config import MAX_DEFAULT_ENVS
from envgym.rollout.ending import split_timed_out
from envgym.rollout.pools import StepResult
from envgym.rollout.prompting import Conversation
from envgym.rollout.records import Trajectory, json_safe
from envgym.rollout.session import AgentFailure, RunSession, check_output
from envgym.rollout.specs import make_agent
from envgym.rollout.summary import summarize_multiagent
from envgym.rollout.tasks import episode_id

__all__ = ["episode_metrics", "possible_agents", "records_per_episode", "summarize_multiagent"]

log = logging.getLogger(__name__)

_AGENT_COUNTS: dict[tuple[str, str], list[str]] = {}


def possible_agents(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> list[str]:
    """The ``possible_agents`` of a Parallel env id (built once per id and kwargs, then cached)."""
    key = (env_id, json.dumps(json_safe(dict(env_kwargs or {})), sort_keys=True))
    found = _AGENT_COUNTS.get(key)
    if found is None:
        env = registration.make_parallel(env_id, **dict(env_kwargs or {}))
        try:
            found = [str(a) for a in env.possible_agents]
        finally:
            env.close()
        if not found:
            raise ConfigError(f"{env_id!r} has no possible_agents; a multi-agent run needs at least one agent.")
        _AGENT_COUNTS[key] = found
    return list(found)


def records_per_episode(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> int:
    """How many trajectory records one episode of ``env_id`` gives: 1 for a single-agent id, the
    number of ``possible_agents`` for a Parallel one (its records are per agent)."""
    if registration.spec(env_id).kind != "parallel":
        return 1
    return len(possible_agents(env_id, env_kwargs))


def _final_numbers(info: Mapping[str, Any]) -> dict[str, float]:
    """The environment's own scalar numbers of a final ``info`` (``mean_trust``, ...)."""
    skip = set(INFO_KEYS) | {"turn", "invalid_actions"}
    out = {}
    for key, value in info.items():
        if key in skip or key.startswith("own_") or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(float(value)):
            out[str(key)] = float(value)
    return out


def episode_metrics(records: Sequence[Trajectory], final_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The multi-agent metrics of one episode from its per-agent records.

    Keys: ``returns`` (agent -> return), ``joint_return`` (their sum), ``mean_return``,
    ``min_return``, ``max_return``, ``return_gap`` (max - min), ``rounds`` (the most turns any
    agent played), ``invalid_rounds`` (rounds in which at least one agent's action was invalid),
    ``success_agents`` (agents whose record ended in success) and ``final`` (the environment's
    own scalar numbers in the last ``info``: ``mean_trust``, ``cooperation_rate``, ...).
    """
    returns = {str(t.extra.get("multiagent", {}).get("agent_id", t.episode_id)): float(t.total_reward) for t in records}
    values = list(returns.values())
    rounds = max((t.num_turns for t in records), default=0)
    invalid = sum(1 for r in range(rounds) if any(r < t.num_turns and not t.turns[r].action_valid for t in records))
    return {
        "returns": returns,
        "joint_return": math.fsum(values),
        "mean_return": statistics.fmean(values) if values else 0.0,
        "min_return": min(values, default=0.0),
        "max_return": max(values, default=0.0),
        "return_gap": (max(values) - min(values)) if values else 0.0,
        "rounds": rounds,
        "invalid_rounds": invalid,
        "success_agents": sum(1 for t in records if t.success),
        "final": _final_numbers(final_info or {}),
    }


# ---------------------------------------------------------------------------------- the runner
class _Seat:
    """One agent of one live episode: its record and chat state (a session ``Attempt`` per agent)."""

    __slots__ = ("agent_id", "conv", "done", "index", "info", "max_turns", "obs", "policy", "sampled", "t0", "traj")

    def __init__(self, agent_id: str, traj: Trajectory, policy: Agent, max_turns: int | None) -> None:
        self.agent_id = agent_id
        self.traj = traj
        self.policy = policy
        self.max_turns = max_turns
        self.index = -1  # the task position (set by the episode)
        self.obs = ""
        self.info: dict[str, Any] = {}
        self.conv: Conversation | None = None
        self.sampled: str | None = None
        self.t0 = time.perf_counter()
        self.done = False


class _Episode:
    """One live episode attempt of a Parallel env: the env and one seat per agent."""

    def __init__(self, index: int, env: Any, seats: dict[str, _Seat]) -> None:
        self.index = index
        self.env = env
        self.seats = seats
        self.t0 = time.perf_counter()
        self.reset_s = 0.0
        self.final_info: dict[str, Any] = {}

    def live(self) -> list[_Seat]:
        return [s for s in self.seats.values() if not s.done]


class ParallelPlay:
    """Plays a run session's tasks on Parallel envs (see the module docstring)."""

    def __init__(self, session: RunSession, agent: Agent | None, agents: Mapping[str, Agent] | None) -> None:
        self.session = session
        self.config = session.config
        self._given_default = agent
        self._given = dict(agents or {})
        self._built: dict[str, Agent] = {}
        self.agent_lists = [possible_agents(env_id, kwargs) for env_id, kwargs in session.kinds]
        # Record index = episode number x stride + agent position. A run folder (``out``) holds every
        # task's records, so the stride is the most agents of any task (numbers are distinct there);
        # without one, records are filed per tag (a bench entry: one env), and each task's stride is
        # its own agent count, so an entry's records are 0 .. episodes x agents - 1.
        self._shared_stride = max(len(a) for a in self.agent_lists) if session.out is not None else None

    # -- policies -----------------------------------------------------------------------------
    def policy_name(self, agent_id: str) -> str:
        cfg = self.config
        if agent_id in self._given:
            return getattr(self._given[agent_id], "name", type(self._given[agent_id]).__name__)
        if cfg.agents and agent_id in cfg.agents:
            return str(cfg.agents[agent_id])
        return self.session.agent_name

    def policy(self, agent_id: str) -> Agent:
        """The agent object playing ``agent_id`` (built once per spec)."""
        if agent_id in self._given:
            return self._given[agent_id]
        cfg = self.config
        spec = cfg.agents.get(agent_id) if cfg.agents else None
        if spec is None:
            if self._given_default is not None:
                return self._given_default
            spec = cfg.agent or "random"
            key = f"default:{spec}"
            options = dict(cfg.agent_options)
        else:
            key, options = f"spec:{spec}", {}
            if spec == (cfg.agent or "random") and self._given_default is None:
                key, options = f"default:{spec}", dict(cfg.agent_options)
        found = self._built.get(key)
        if found is None:
            found = self._built[key] = make_agent(spec, seed=cfg.seed, **options)
            found.reset()
        return found

    def all_policies(self) -> list[Agent]:
        seen: dict[int, Agent] = {}
        for agents in self.agent_lists:
            for a in agents:
                p = self.policy(a)
                seen.setdefault(id(p), p)
        return list(seen.values())

    def close(self) -> None:
        for agent in self._built.values():
            try:
                agent.close()
            except Exception:
                log.exception("closing agent %s failed", getattr(agent, "name", agent))

    # -- records ------------------------------------------------------------------------------
    def record_numbers(self, task_position: int) -> list[int]:
        """The record indexes of task ``task_position``'s agents."""
        number = self.session.numbers[task_position]
        agents = self.agent_lists[self.session.task_kind[task_position]]
        stride = self._shared_stride or len(agents)
        return [number * stride + k for k in range(len(agents))]

    def _new_episode(self, index: int) -> _Episode:
        session = self.session
        task = session.tasks[index]
        kind = session.task_kind[index]
        env_id, kwargs = session.kinds[kind]
        number = session.numbers[index]
        base_id = episode_id(task.tag, number)
        agents = self.agent_lists[kind]
        policies = {a: self.policy_name(a) for a in agents}
        seats = {}
        for k, agent_id in enumerate(agents):
            traj = Trajectory(
                episode_id=f"{base_id}/{agent_id}",
                index=number * (self._shared_stride or len(agents)) + k,
                env_id=task.env_id,
                seed=task.seed,
                agent=policies[agent_id],
                env_kwargs=json_safe(dict(task.env_kwargs)),
                group=task.group,
                member=task.member,
                started_at=utc_timestamp(),
                extra={
                    "multiagent": {
                        "episode_id": base_id,
                        "episode_index": number,
                        "agent_id": agent_id,
                        "position": k,
                        "agents": list(agents),
                        "policies": dict(policies),
                    }
                },
            )
            seats[agent_id] = _Seat(agent_id, traj, self.policy(agent_id), session.turn_limit(index))
        cfg = self.config
        if cfg.backend == "remote":  # the env lives in an envgym serve server (a RemoteParallelEnv)
            return _Episode(index, remote_make(cfg.url, env_id, **kwargs), seats)
        return _Episode(index, registration.make_parallel(env_id, **kwargs), seats)

    def _start(self, episode: _Episode) -> None:
        """Reset the episode's env and start every agent's record (raises on a broken reset)."""
        cfg = self.config
        first = next(iter(episode.seats.values()))
        t0 = time.perf_counter()
        obs, infos = episode.env.reset(seed=first.traj.seed)
        episode.reset_s = time.perf_counter() - t0
        n = len(episode.seats)
        for k, (agent_id, seat) in enumerate(episode.seats.items()):
            if agent_id not in obs or agent_id not in infos:
                raise _EnvFailure(f"reset gave no observation or info for {agent_id!r}")
            seat.obs, seat.info = str(obs[agent_id]), dict(infos[agent_id])
            seat.traj.task = json_safe(dict(seat.info.get("task") or {}))
            seat.traj.reward_components = dict.fromkeys(seat.info.get("reward_components") or {}, 0.0)
            seat.t0 = time.perf_counter()
            member = seat.traj.member * n + k  # distinct sampling streams for the agents of one episode
            seat.policy.start_episode(seat.traj.episode_id, seat.traj.env_id, seat.traj.seed, member=member)
            if seat.policy.chat:
                seat.conv = Conversation(cfg.prompt, seat.traj.env_id, seat.obs, seat.info)

    def _input(self, episode: _Episode, seat: _Seat) -> AgentInput:
        sampler = getattr(episode.env.unwrapped, "sample_action", None)
        agent_id = seat.agent_id
        sample = (lambda rng, f=sampler, a=agent_id: f(a, rng)) if sampler is not None else None
        return AgentInput.for_turn(
            seat.traj.episode_id, seat.traj.env_id, seat.obs, seat.info, len(seat.traj.turns), seat.conv, sample
        )

    # -- one round of every live episode --------------------------------------------------------
    def _round(self, episodes: list[_Episode]) -> list[tuple[_Episode, str, str]]:
        cfg = self.config
        failures: list[tuple[_Episode, str, str]] = []
        episodes, timed_out = split_timed_out(episodes, cfg.episode_timeout_s)
        failures.extend(timed_out)
        # One batch per policy object: in self-play, every agent of every episode in one call.
        batches: dict[int, tuple[Agent, list[tuple[_Episode, _Seat, AgentInput]]]] = {}
        for ep in episodes:
            for seat in ep.live():
                batches.setdefault(id(seat.policy), (seat.policy, []))[1].append((ep, seat, self._input(ep, seat)))
        answers: dict[tuple[int, str], tuple[Any, AgentInput, float]] = {}
        for policy, items in batches.values():
            outputs, agent_s = self.session.ask_batch(policy, [item for _, _, item in items])
            for (ep, seat, item), output in zip(items, outputs, strict=True):
                answers[(id(ep), seat.agent_id)] = (output, item, agent_s)
        for ep in episodes:
            problem: tuple[str, str] | None = None
            actions: dict[str, str] = {}
            parsed_by: dict[str, Any] = {}
            for seat in ep.live():
                output, item, _ = answers[(id(ep), seat.agent_id)]
                if isinstance(output, AgentFailure):
                    problem = (output.kind, f"{seat.agent_id}: {output.message}")
                    break
                why = check_output(output)
                if why is not None:
                    problem = (TerminationReason.AGENT_ERROR.value, f"{seat.agent_id}: {why}")
                    break
                if seat.conv is not None:
                    parsed = seat.conv.parse(output.text)
                    actions[seat.agent_id], parsed_by[seat.agent_id] = parsed.action, parsed
                else:
                    actions[seat.agent_id], parsed_by[seat.agent_id] = output.text, None
            if problem is not None:
                failures.append((ep, *problem))
                continue
            t0 = time.perf_counter()
            try:
                obs, rewards, terms, truncs, infos = ep.env.step(actions)
            except (KeyboardInterrupt, StopRun):
                raise
            except Exception as err:  # noqa: BLE001 - an env crash is an env_error, the run goes on
                failures.append((ep, TerminationReason.ENV_ERROR.value, f"step raised {type(err).__name__}: {err}"))
                continue
            env_s = time.perf_counter() - t0
            for seat in ep.live():
                a = seat.agent_id
                if a not in obs or a not in infos:
                    failures.append(
                        (ep, TerminationReason.ENV_ERROR.value, f"step gave no observation or info for {a!r}")
                    )
                    break
            else:
                self._record_round(ep, actions, parsed_by, answers, obs, rewards, terms, truncs, infos, env_s)
        return failures

    def _record_round(
        self,
        ep: _Episode,
        actions: Mapping[str, str],
        parsed_by: Mapping[str, Any],
        answers: Mapping[tuple[int, str], tuple[Any, AgentInput, float]],
        obs: Mapping[str, Any],
        rewards: Mapping[str, Any],
        terms: Mapping[str, Any],
        truncs: Mapping[str, Any],
        infos: Mapping[str, Any],
        env_s: float,
    ) -> None:
        live = ep.live()
        ep.final_info = dict(infos[live[0].agent_id])
        cut: str | None = None
        for seat in live:
            a = seat.agent_id
            output, item, agent_s = answers[(id(ep), a)]
            result = StepResult(
                str(obs[a]),
                float(rewards.get(a, 0.0)),
                bool(terms.get(a, False)),
                bool(truncs.get(a, False)),
                dict(infos[a]),
                env_s,
            )
            self.session.record_turn(seat, output, actions[a], parsed_by[a], item.messages, result, agent_s)  # type: ignore[arg-type]
            if seat.done and seat.traj.extra.get("truncated_by") is not None:
                cut = seat.traj.extra["truncated_by"]
        if cut is not None:
            # A Parallel round needs every live agent: the harness's cut of one ends them all here.
            for seat in ep.live():
                turn = seat.traj.turns[-1]
                turn.truncated = True
                seat.traj.extra["truncated_by"] = cut
                seat.traj.termination_reason = TerminationReason.MAX_TURNS.value
                seat.traj.success = bool(seat.info.get("success", False))
                seat.traj.invalid_actions = int(seat.info.get("invalid_actions", 0))
                seat.traj.final_observation = seat.obs
                seat.done = True
        if not ep.live():
            self._finish_episode(ep)

    def _finish_episode(self, ep: _Episode) -> None:
        records = [s.traj for s in ep.seats.values()]
        metrics = json_safe(episode_metrics(records, ep.final_info))
        now = utc_timestamp()
        for seat in ep.seats.values():
            seat.traj.extra["multiagent"].update(metrics)
            seat.traj.wall_time_s = time.perf_counter() - seat.t0
            seat.traj.finished_at = now
            try:
                seat.policy.end_episode(seat.traj.episode_id)
            except Exception:
                log.exception("agent.end_episode failed for %s", seat.traj.episode_id)
        ep.env.close()
        self.session.file(ep.index, records, [t.index for t in records])

    def _fail(self, ep: _Episode, kind: str, message: str) -> bool:
        """Record a failed attempt of the whole episode; True when it should be played again."""
        for seat in ep.seats.values():
            seat.done = True
            try:
                seat.policy.end_episode(seat.traj.episode_id)
            except Exception:
                log.exception("agent.end_episode failed for %s", seat.traj.episode_id)
        try:
            ep.env.close()
        except Exception:
            log.exception("closing the env of a failed episode failed")
        retry, errors = self.session.note_failure(ep.index, kind, message)
        log.warning("episode %s attempt %d: %s: %s", ep.index, len(errors), kind, message)
        if not retry:
            now = utc_timestamp()
            for seat in ep.seats.values():
                traj = seat.traj
                traj.termination_reason = kind
                traj.errors = list(errors)
                traj.attempts = len(errors)
                traj.success = False
                traj.wall_time_s = time.perf_counter() - seat.t0
                traj.finished_at = now
            records = [s.traj for s in ep.seats.values()]
            self.session.file(ep.index, records, [t.index for t in records])
        return retry

    # -- lock-step ------------------------------------------------------------------------------
    def play(self, todo: list[int]) -> None:
        """Play the tasks at positions ``todo`` (episodes at once: ``num_envs``, default all, at most 64)."""
        session, cfg = self.session, self.config
        for policy in self.all_policies():
            policy.reset()
        pending = collections.deque(todo)
        slots = max(1, min(cfg.num_envs or MAX_DEFAULT_ENVS, len(todo)))
        live: list[_Episode] = []
        played = {"turns": 0, "tokens": 0}

        def report() -> None:
            session.progress(live=len(live), turns=played["turns"], tokens=played["tokens"])

        def failed(items: list[tuple[_Episode, str, str]]) -> None:
            for ep, kind, message in items:
                if ep in live:
                    live.remove(ep)
                if self._fail(ep, kind, message):
                    pending.appendleft(ep.index)

        report()
        while pending or live:
            starting: list[tuple[_Episode, str, str]] = []
            while pending and len(live) < slots:
                ep = self._new_episode(pending.popleft())
                try:
                    self._start(ep)
                except (KeyboardInterrupt, StopRun):
                    raise
                except Exception as err:  # noqa: BLE001 - an env that fails to start is an env_error
                    why = str(err) if isinstance(err, _EnvFailure) else f"{type(err).__name__}: {err}"
                    starting.append((ep, TerminationReason.ENV_ERROR.value, f"reset: {why}"))
                    continue
                live.append(ep)
            failed(starting)
            if not live:
                continue
            batch = list(live)
            seats = [s for ep in batch for s in ep.seats.values()]
            turns = sum(len(s.traj.turns) for s in seats)
            tokens = sum(s.traj.completion_tokens for s in seats)
            failures = self._round(batch)
            played["turns"] += sum(len(s.traj.turns) for s in seats) - turns
            played["tokens"] += sum(s.traj.completion_tokens for s in seats) - tokens
            failed(failures)
            live[:] = [ep for ep in live if ep.live()]
            report()


class _EnvFailure(Exception):
    """An environment that broke the Parallel contract at reset (an env_error of the episode)."""


def run_parallel(
    session: RunSession, agent: Agent | None, agents: Mapping[str, Agent] | None
) -> tuple[list[Trajectory], dict[str, Any]]:
    """:meth:`Runner.run` for Parallel env ids: play the session's tasks not yet recorded; return
    every record (in index order) and the summary."""
    cfg = session.config
    if cfg.backend not in ("inproc", "remote") or cfg.mode != "lockstep":
        raise ConfigError(
            f"PettingZoo Parallel envs run in this process (or an envgym serve server) in lock-step; got "
            f"backend={cfg.backend!r}, mode={cfg.mode!r}. Use backend='inproc' (or 'remote') and mode='lockstep' "
            "(--backend inproc --mode lockstep)."
        )
    names: set[str] = set()
    for env_id, kwargs in session.kinds:
        if kwargs.get("reward_wrappers"):
            raise ConfigError(
                f"{env_id!r}: reward wrappers apply to single-agent envs only; a Parallel env takes its reward "
                "settings as keyword arguments (e.g. reward_mode)."
            )
        names.update(possible_agents(env_id, kwargs))  # bad kwargs fail here, before any model loads
    for name in list(cfg.agents or {}) + list(agents or {}):
        if name not in names:
            raise ConfigError(
                f"agents names {name!r}, which no environment of the run has.{suggest(name, sorted(names))} "
                f"Agents: {', '.join(sorted(names))}."
            )
    session.agent_name = cfg.agent or (getattr(agent, "name", type(agent).__name__) if agent is not None else "random")
    play = ParallelPlay(session, agent, agents)
    session.open_folder()
    try:
        wanted = {n: p for p in range(len(session.tasks)) for n in play.record_numbers(p)}
        if session.folder is not None:
            session.done = {n: t for n, t in session.folder.finished.items() if n in wanted}
        todo = []
        for position in range(len(session.tasks)):
            if all(n in session.done for n in play.record_numbers(position)):
                session.done_tasks.add(position)
            else:
                todo.append(position)
                for n in play.record_numbers(position):
                    session.done.pop(n, None)  # a partly recorded episode is played again, every agent
        started = time.perf_counter()
        if any(p.chat for p in play.all_policies()) and cfg.prompt.history == "summary":
            cfg.prompt.load_summarizer()
        if todo:
            play.play(todo)
        trajectories = [session.done[n] for n in sorted(session.done)]
        summary = session.summary(trajectories, time.perf_counter() - started)
        if cfg.agents or agents:
            summary["agents"] = {a: play.policy_name(a) for a in sorted(names)}
        multi = summarize_multiagent(trajectories)
        if multi is not None:
            summary["multiagent"] = multi
        if session.env_ids != [cfg.env_id]:
            summary["env_ids"] = session.env_ids
        if session.folder is not None:
            session.folder.write_summary(summary)
    finally:
        try:
            play.close()
        finally:
            session.close_folder()
    return trajectories, summary
