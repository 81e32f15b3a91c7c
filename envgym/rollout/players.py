"""The single-agent players: lock-step and async play of a run's tasks on a pool of envs.

* **lock-step** (:meth:`SingleAgentPlay.lockstep`): every turn, all live episodes go to the agent
  in one batch; the environments of the batch then step together. A finished episode's slot takes
  the next pending task at once (a slot already holding that task's env kind first).
* **async** (:meth:`SingleAgentPlay.run_async`): one thread per slot plays its episodes one after
  the other; the agent sees batches of one.

Both play through the run's :class:`~envgym.rollout.session.RunSession` (agent calls, retries,
turn records, filing), which the Parallel player (:mod:`envgym.rollout.multiagent`) shares.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from envgym._clock import utc_timestamp
from envgym.core import TerminationReason
from envgym.rollout.agent import Agent, AgentInput, AgentOutput
from envgym.rollout.ending import split_timed_out
from envgym.rollout.pools import EnvFailure, EnvPool, ResetRequest, StepRequest, StepResult
from envgym.rollout.prompting import Conversation, ParsedReply
from envgym.rollout.records import Trajectory, json_safe
from envgym.rollout.session import AgentFailure, Attempt, RunSession, check_output
from envgym.rollout.tasks import episode_id

__all__ = ["SingleAgentPlay"]

log = logging.getLogger(__name__)

#: (attempt, failure kind, message) of an attempt that failed; kind None: it did not.
Failed = tuple[Attempt, str | None, str | None]


class SingleAgentPlay:
    """Plays tasks of a run's session with one agent on one env pool (see the module docstring)."""

    def __init__(self, session: RunSession, agent: Agent, pool: EnvPool) -> None:
        self.session = session
        self.agent = agent
        self.pool = pool

    # -- episode bookkeeping ------------------------------------------------------------------
    def _new_attempt(self, index: int, slot: int) -> Attempt:
        session = self.session
        task = session.tasks[index]
        number = session.numbers[index]
        traj = Trajectory(
            episode_id=episode_id(task.tag, number),
            index=number,
            env_id=task.env_id,
            seed=task.seed,
            agent=session.agent_name,
            env_kwargs=json_safe(dict(task.env_kwargs)),
            group=task.group,
            member=task.member,
            started_at=utc_timestamp(),
        )
        return Attempt(index, slot, traj, session.task_kind[index], session.turn_limit(index))

    def _reset_request(self, live: Attempt) -> ResetRequest:
        want_sample = self.agent.wants_sample_action
        return ResetRequest(live.slot, live.traj.seed, None, want_sample, live.kind, self.session.wants_frames)

    def _started(self, live: Attempt, result: StepResult) -> None:
        live.obs = result.observation
        live.info = result.info
        live.sampled = result.sampled_action
        live.traj.task = json_safe(dict(result.info.get("task") or {}))
        live.traj.reward_components = dict.fromkeys(result.info.get("reward_components") or {}, 0.0)
        self.session.save_frame(live, result)
        live.t0 = time.perf_counter()
        self.agent.start_episode(live.traj.episode_id, live.traj.env_id, live.traj.seed, member=live.traj.member)
        if self.agent.chat:
            live.conv = Conversation(self.session.config.prompt, live.traj.env_id, result.observation, result.info)

    def _fail(self, live: Attempt, kind: str, message: str) -> bool:
        """Record a failed attempt. Returns True when the episode should be tried again."""
        live.done = True
        try:
            self.agent.end_episode(live.traj.episode_id)
        except Exception:
            log.exception("agent.end_episode failed for episode %s", live.traj.episode_id)
        retry, errors = self.session.note_failure(live.index, kind, message)
        log.warning("episode %s attempt %d: %s: %s", live.traj.episode_id, len(errors), kind, message)
        if not retry and not self.session.stop.is_set():
            traj = live.traj
            traj.termination_reason = kind
            traj.errors = errors
            traj.attempts = len(errors)
            traj.success = False
            self._finish(traj, live)
        return retry

    def _finish(self, traj: Trajectory, live: Attempt) -> None:
        traj.wall_time_s = time.perf_counter() - live.t0
        traj.finished_at = utc_timestamp()
        self.session.file(live.index, [traj], [live.index])

    def _input(self, live: Attempt) -> AgentInput:
        sample: Callable[[Any], str] | None
        env = self.pool.slot_env(live.slot)
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
    def turn(self, batch: list[Attempt]) -> list[Failed]:
        """Play one turn of every episode in ``batch``.

        Returns ``(live, failure kind, message)`` for the episodes that failed (kind ``None`` for
        the others); ended episodes are recorded here and flagged ``live.done``.
        """
        session, agent = self.session, self.agent
        failures: list[Failed] = []
        batch, timed_out = split_timed_out(batch, session.config.episode_timeout_s)
        failures.extend(timed_out)
        if not batch:
            return failures
        inputs = [self._input(live) for live in batch]
        outputs, agent_s = session.ask_batch(agent, inputs)
        stepping: list[tuple[Attempt, AgentOutput, str, ParsedReply | None, tuple[dict[str, str], ...]]] = []
        for live, output, item in zip(batch, outputs, inputs, strict=True):
            if isinstance(output, AgentFailure):
                failures.append((live, output.kind, output.message))
                continue
            problem = check_output(output)
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
        frames = session.wants_frames
        results = self.pool.step([StepRequest(live.slot, action, want, frames) for live, _, action, _, _ in stepping])
        for (live, output, action, parsed, messages), result in zip(stepping, results, strict=True):
            if isinstance(result, EnvFailure):
                failures.append((live, result.kind, result.message))
                continue
            session.record_turn(live, output, action, parsed, messages, result, agent_s)
            if live.done:
                try:
                    agent.end_episode(live.traj.episode_id)
                except Exception:
                    log.exception("agent.end_episode failed for episode %s", live.traj.episode_id)
                self._finish(live.traj, live)
        return failures

    # -- lock-step ----------------------------------------------------------------------------
    def _pick_slot(self, free: list[int], slot_kind: dict[int, int], index: int) -> int:
        """A free slot for task ``index``: the last freed one already holding its env kind, else
        the last freed one (its env is remade)."""
        kind = self.session.task_kind[index]
        if len(self.session.kinds) > 1:
            for i in range(len(free) - 1, -1, -1):
                if slot_kind.get(free[i], 0) == kind:
                    return free.pop(i)
        return free.pop()

    def lockstep(self, todo: list[int]) -> None:
        """Play the tasks at positions ``todo``, one batched agent call per turn."""
        session, pool = self.session, self.pool
        pending = collections.deque(todo)
        free = list(range(pool.num_slots - 1, -1, -1))
        slot_kind: dict[int, int] = {}  # the env kind each slot last played
        live: dict[int, Attempt] = {}
        played = {"turns": 0, "tokens": 0}  # this session's, for on_progress

        limits = [session.turn_limit(i) for i in range(len(session.tasks))]
        budgeted = all(limit is not None for limit in limits)

        def report() -> None:
            if session.on_progress is None:
                return
            # Turns still to play at most (every episode's turn limit), for the ETA.
            left = None
            if budgeted:
                left = sum(limits[i] for i in pending) + sum(
                    max(0, limits[item.index] - len(item.traj.turns)) for item in live.values()
                )
            session.progress(live=len(live), turns=played["turns"], tokens=played["tokens"], turns_left=left)

        def handle(failed: list[Failed]) -> None:
            for item, kind, message in failed:
                live.pop(item.slot, None)
                free.append(item.slot)
                if kind is not None and self._fail(item, kind, message or ""):
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
                results = pool.reset([self._reset_request(s) for s in starting])
                failed: list[Failed] = []
                for attempt, result in zip(starting, results, strict=True):
                    if isinstance(result, EnvFailure):
                        failed.append((attempt, result.kind, result.message))
                    else:
                        self._started(attempt, result)
                        live[attempt.slot] = attempt
                handle(failed)
                report()  # the new episodes are live before their first agent call
                if not live:
                    continue
            batch = [live[s] for s in sorted(live)]
            before = [(len(item.traj.turns), item.traj.completion_tokens) for item in batch]
            failed = self.turn(batch)
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
    def run_async(self, todo: list[int]) -> None:
        """Play the tasks at positions ``todo``, one thread per pool slot."""
        session, pool = self.session, self.pool
        stop = session.stop
        queue = collections.deque(todo)
        queue_lock = threading.Lock()
        crashed: list[BaseException] = []
        played = {"turns": 0, "tokens": 0, "live": 0}  # this session's, for on_progress
        progress_lock = threading.Lock()  # one on_progress call at a time, totals in order

        def report(turns: int = 0, tokens: int = 0, live: int = 0) -> None:
            with progress_lock:
                played["turns"] += turns
                played["tokens"] += tokens
                played["live"] += live
                session.progress(live=played["live"], turns=played["turns"], tokens=played["tokens"])

        def worker(slot: int) -> None:
            try:
                while not stop.is_set():
                    with queue_lock:
                        if not queue:
                            return
                        index = queue.popleft()
                    while not stop.is_set():
                        attempt = self._new_attempt(index, slot)
                        (result,) = pool.reset([self._reset_request(attempt)])
                        if isinstance(result, EnvFailure):
                            retry = self._fail(attempt, result.kind, result.message)
                            report()  # a failure past its retries is recorded (done)
                            if retry:
                                continue
                            break
                        self._started(attempt, result)
                        failure: Failed | None = None
                        report(live=1)
                        try:
                            while not attempt.done and not stop.is_set():
                                turns, tokens = len(attempt.traj.turns), attempt.traj.completion_tokens
                                failed = self.turn([attempt])
                                if failed:
                                    failure = failed[0]
                                    break
                                report(len(attempt.traj.turns) - turns, attempt.traj.completion_tokens - tokens)
                        finally:
                            report(live=-1)
                        if failure is not None and failure[1] is not None:
                            retry = self._fail(attempt, failure[1], failure[2] or "")
                            report()  # a failure past its retries is recorded (done)
                            if retry:
                                continue
                        break
            except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
                crashed.append(err)
                stop.set()

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
            stop.set()
            for thread in threads:
                thread.join(5.0)
            raise
        if crashed:
            raise crashed[0]
