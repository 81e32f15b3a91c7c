"""What the players of one run share: :class:`RunSession`.

A run is played by one of three players: lock-step or async for single-agent ids
(:mod:`envgym.rollout.players`), or the Parallel player for PettingZoo Parallel ids
(:mod:`envgym.rollout.multiagent`). :class:`~envgym.rollout.runner.Runner` builds one session
and hands it to the player; the session is everything they have in common:

* **the tasks**: the run's task list, the env kinds it plays (each distinct id and kwargs is one
  kind of the pool), each task's kind, episode number and harness turn limit;
* **agent calls**: one call with the run's time limit (:meth:`RunSession.ask`), and the
  batch-failure rule (:meth:`RunSession.ask_batch`: a batched call that fails is asked again one
  input at a time, so only the episode that makes the agent fail is charged with it);
* **retries and exclusion**: every failed attempt is counted per task
  (:meth:`RunSession.note_failure`); past ``max_retries`` the episode is recorded with its reason
  and left out of the scores;
* **records**: one turn appended to an episode's record (:meth:`RunSession.record_turn`, with the
  end-of-episode rules of :mod:`envgym.rollout.ending`), its screenshot, and the filing of finished
  records (:meth:`RunSession.file`: the run folder, then ``on_episode_end`` and ``on_task_end``).

Everything here is thread-safe where the async player needs it (``lock``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envgym.core import TerminationReason
from envgym.errors import StopRun
from envgym.rollout.agent import Agent, AgentInput, AgentOutput
from envgym.rollout.config import IDENTITY_KEYS, RunConfig
from envgym.rollout.ending import episode_end
from envgym.rollout.pools import StepResult
from envgym.rollout.prompting import Conversation, ParsedReply
from envgym.rollout.records import Trajectory, Turn, json_safe, keep_final_info, recordable_observation
from envgym.rollout.rundir import RunFolder
from envgym.rollout.screenshots import save_screenshot
from envgym.rollout.summary import summarize
from envgym.rollout.tasks import EpisodeTask, episode_numbers
from envgym.rollout.toolcalls import tool_results

__all__ = ["AgentFailure", "Attempt", "RunSession", "check_output"]

log = logging.getLogger(__name__)


class AgentFailure(Exception):
    """An agent call that failed for one input: ``kind`` is the :class:`TerminationReason` value
    (``agent_error``, ``timeout``) the episode's attempt fails with, ``message`` says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def check_output(output: Any) -> str | None:
    """Why ``output`` is not a usable :class:`AgentOutput`, or ``None``."""
    if not isinstance(output, AgentOutput):
        return f"expected an AgentOutput, got {type(output).__name__}: {output!r:.200}"
    if not isinstance(output.text, str):
        return f"AgentOutput.text must be a str, got {type(output.text).__name__}: {output.text!r:.200}"
    if output.token_ids is not None and output.logprobs is not None and len(output.token_ids) != len(output.logprobs):
        return f"token_ids ({len(output.token_ids)}) and logprobs ({len(output.logprobs)}) differ in length"
    return None


class Attempt:
    """One live single-agent episode attempt (``index``: the task's position in the run's list;
    ``slot``: the pool slot whose env plays it; ``kind``: the env kind of that task)."""

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


class RunSession:
    """The state and the steps every player of one run shares (see the module docstring).

    Attributes:
        config: the run.
        tasks: every episode's task (:meth:`RunConfig.task_list`).
        kinds: the distinct ``(env_id, env_kwargs)`` of the tasks, in first-use order.
        task_kind: each task's position in ``kinds``.
        numbers: each task's episode number (``Trajectory.index`` of a single-agent record).
        out: the run folder, or ``None`` (records in memory only); ``folder`` is it once opened.
        done: the filed records, by the key their player files them under; ``done_tasks``: the
            task positions whose records are all filed (those of a resumed folder included).
        errors: the failed attempts of each task not yet filed.
        stop: set to end the run (a crashed async worker, Ctrl-C): nothing is retried after it.
        agent_name: the name the records carry in ``agent``.
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        out: str | Path | None = None,
        on_episode_end: Callable[[Trajectory], None] | None = None,
        on_task_end: Callable[[EpisodeTask, Trajectory], None] | None = None,
        on_progress: Callable[..., None] | None = None,
        screenshots: Callable[[EpisodeTask], str | Path] | None = None,
    ) -> None:
        self.config = config
        self.tasks = config.task_list()
        # Each distinct (env id, kwargs) is one env kind of the pool; a task plays its kind.
        keys: dict[tuple[str, str], int] = {}
        self.kinds: list[tuple[str, dict[str, Any]]] = []
        self.task_kind: list[int] = []
        for task in self.tasks:
            key = task.env_key
            if key not in keys:
                keys[key] = len(self.kinds)
                self.kinds.append((task.env_id, dict(task.env_kwargs)))
            self.task_kind.append(keys[key])
        self.numbers = episode_numbers(self.tasks, distinct=out is not None)
        self.out = Path(out) if out is not None else None
        self.on_episode_end = on_episode_end
        self.on_task_end = on_task_end
        self.on_progress = on_progress
        # Where a task's screenshots go (envgym.rollout.screenshots); default: the run folder.
        self.screenshots = screenshots
        self.lock = threading.Lock()
        self.errors: dict[int, list[str]] = {}
        self.done: dict[int, Trajectory] = {}
        self.done_tasks: set[int] = set()
        self.folder: RunFolder | None = None
        self.stop = threading.Event()
        self.agent_name = config.agent or "agent"

    # -- the tasks ------------------------------------------------------------------------------
    @property
    def env_ids(self) -> list[str]:
        """The run's env ids, in first-use order."""
        return list(dict.fromkeys(env_id for env_id, _ in self.kinds))

    def turn_limit(self, index: int) -> int | None:
        """The harness turn limit of task ``index`` (``None``: only the environment's own)."""
        task = self.tasks[index]
        return task.max_turns if task.max_turns is not None else self.config.max_turns

    def open_folder(self) -> None:
        """Open (and lock) the run folder ``out``, if the run has one; it stays locked until closed."""
        if self.out is not None:
            self.folder = RunFolder(self.out, self.config.to_dict(), IDENTITY_KEYS)

    def close_folder(self) -> None:
        if self.folder is not None:
            self.folder.close()

    def summary(self, trajectories: Sequence[Trajectory], wall_s: float) -> dict[str, Any]:
        """The run's summary (:func:`~envgym.rollout.summary.summarize` with the run's ids)."""
        # speed over what this session played: a resumed run's earlier records took other time
        played = None if self.folder is None else self.folder.appended
        summary = summarize(trajectories, wall_s, played=played)
        return {"env_id": self.config.env_id, "agent": self.agent_name, "seed": self.config.seed, **summary}

    # -- agent calls ----------------------------------------------------------------------------
    def call_agent(self, agent: Agent, inputs: list[AgentInput]) -> list[AgentOutput]:
        """``agent.act(inputs)`` within ``agent_timeout_s`` (:class:`AgentFailure` past it)."""
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
            raise AgentFailure(TerminationReason.TIMEOUT.value, f"the agent did not answer within {limit:g} s")
        if "err" in box:
            raise box["err"]
        return box["out"]

    def ask(self, agent: Agent, inputs: list[AgentInput]) -> list[Any]:
        """The agent's outputs for ``inputs``, or one :class:`AgentFailure` per input when the call
        raised, timed out or returned the wrong number of outputs."""
        try:
            outputs = self.call_agent(agent, inputs)
        except AgentFailure as err:
            return [err] * len(inputs)
        except (KeyboardInterrupt, StopRun):
            raise
        except Exception as err:  # noqa: BLE001 - any agent crash is an agent_error, the run goes on
            return [AgentFailure(TerminationReason.AGENT_ERROR.value, f"{type(err).__name__}: {err}")] * len(inputs)
        if not isinstance(outputs, Sequence) or isinstance(outputs, str) or len(outputs) != len(inputs):
            count = len(outputs) if isinstance(outputs, Sequence) else type(outputs).__name__
            message = f"the agent returned {count} outputs for {len(inputs)} inputs"
            return [AgentFailure(TerminationReason.AGENT_ERROR.value, message)] * len(inputs)
        return list(outputs)

    def ask_batch(self, agent: Agent, inputs: list[AgentInput]) -> tuple[list[Any], float]:
        """:meth:`ask`, and the seconds it took; a batched call that failed (other than by every
        input timing out) is asked again one input at a time, so only the episode that makes the
        agent fail is charged with it."""
        t0 = time.perf_counter()
        outputs = self.ask(agent, inputs)
        if (
            len(inputs) > 1
            and any(isinstance(o, AgentFailure) for o in outputs)
            and not all(isinstance(o, AgentFailure) and o.kind == TerminationReason.TIMEOUT.value for o in outputs)
        ):
            outputs = [self.ask(agent, [item])[0] for item in inputs]
        return outputs, time.perf_counter() - t0

    # -- retries and exclusion -------------------------------------------------------------------
    def note_failure(self, index: int, kind: str, message: str) -> tuple[bool, list[str]]:
        """Count a failed attempt of task ``index``: ``(retry, its failures so far)``; ``retry`` is
        False past ``max_retries`` or once the run is stopping."""
        with self.lock:
            errors = self.errors.setdefault(index, [])
            errors.append(f"{kind}: {message}")
            retry = len(errors) <= self.config.max_retries and not self.stop.is_set()
            return retry, list(errors)

    # -- records --------------------------------------------------------------------------------
    def file(self, index: int, records: Sequence[Trajectory], keys: Sequence[int]) -> None:
        """File the finished records of task ``index`` (under ``keys`` in ``done``): a scored record
        carries the failed attempts before it; each goes to the run folder, then to the hooks."""
        with self.lock:
            errors = self.errors.pop(index, [])
            for traj, key in zip(records, keys, strict=True):
                if traj.scored:
                    traj.errors = list(errors)
                    traj.attempts = len(errors) + 1
                self.done[key] = traj
                if self.folder is not None:
                    self.folder.append(traj)
                if self.on_episode_end is not None:
                    self.on_episode_end(traj)
                if self.on_task_end is not None:
                    self.on_task_end(self.tasks[index], traj)
            self.done_tasks.add(index)

    def progress(self, **totals: Any) -> None:
        """Call ``on_progress`` with ``done`` (the tasks filed), ``total`` and ``totals``."""
        if self.on_progress is not None:
            with self.lock:
                done = len(self.done_tasks)
            self.on_progress(done=done, total=len(self.tasks), **totals)

    @property
    def wants_frames(self) -> bool:
        """Frames are asked of the envs only when they have somewhere to go."""
        return self.screenshots is not None or self.folder is not None

    def save_frame(self, live: Any, result: StepResult) -> None:
        """Record the screen ``result`` shows (the one the next action is taken on), if it has one."""
        if not isinstance(live, Attempt):  # a multi-agent seat (envgym.rollout.multiagent): no frames
            return
        live.shot = None
        if result.frame is None:
            return
        if self.screenshots is not None:
            root = Path(self.screenshots(self.tasks[live.index]))
        elif self.folder is not None:
            root = self.folder.path
        else:
            return
        try:
            live.shot = save_screenshot(root, live.traj.episode_id, len(live.traj.turns), result.frame)
        except (OSError, ValueError, TypeError) as err:  # a lost screenshot never costs the episode
            log.warning("episode %s: screenshot not saved (%s)", live.traj.episode_id, err)

    def record_turn(
        self,
        live: Any,
        output: AgentOutput,
        action: str,
        parsed: ParsedReply | None,
        messages: tuple[dict[str, str], ...],
        result: StepResult,
        agent_s: float,
    ) -> None:
        """Append one turn to ``live``'s record (an :class:`Attempt`, or a multi-agent seat with the
        same fields), move it to the next observation, and end it by the rules of
        :func:`~envgym.rollout.ending.episode_end` (``live.done``)."""
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
        if parsed is not None and parsed.tool_calls:  # native tool calls: kept structured
            turn.tool_calls = [dict(call) for call in parsed.tool_calls]
            turn.tool_results = tool_results(parsed.tool_calls, result.observation, ok=turn.action_valid)
            if parsed.dropped_calls:
                turn.extra["tool_calls_dropped"] = parsed.dropped_calls
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
        self.save_frame(live, result)
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
        keep_final_info(traj, info)  # e.g. the SWE envs' model_patch
        final_shot = getattr(live, "shot", None)
        if final_shot is not None:
            traj.extra["final_screenshot"] = final_shot
        live.done = True
