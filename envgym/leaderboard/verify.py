"""Verification by replay: a bundle is ranked only after its episodes are played again here.

:func:`verify_bundle` checks, in order, and rejects the whole bundle at the first failure with a
:class:`VerificationError` whose message names the entry, seed, trial and turn:

1. the content hash: recomputed over the manifest and the episodes, it must equal the manifest's;
2. the suite: an installed suite with the bundle's suite id exists (see
   :mod:`envgym.leaderboard.suites`), its sha256, name and version equal the bundle's, and the
   suite copy in the bundle resolves to the same suite;
3. the entries: the same names in the same order as the suite; each env id is the suite's, is
   registered in this envgym, and the bundle's ``env_version`` equals the registered version;
   ``env_kwargs`` (with the split) and ``max_turns`` are the suite's;
4. the episode set: exactly one episode per (entry, seed, trial) the suite asks for (its seeds,
   trials ``0..K-1`` with ``K`` the bundle's trial count): none missing, none duplicated, none extra;
   for a multi-agent entry (a PettingZoo Parallel env id) one episode line per (entry, seed, trial,
   agent) for every agent of the env's ``possible_agents`` (the manifest entry's ``agents`` must be
   that list, each line's ``position`` the agent's place in it and its ``index`` the runner's record
   number, episode number x agents + position, the same episode number for every agent of the
   episode): an unknown agent id, a line without one, or a missing, duplicated or extra agent
   rejects the bundle;
5. every episode, replayed: ``make(env_id, **kwargs)``, ``reset(seed=seed)`` (the task id must be
   the claimed one), then each recorded action stepped in turn; the observation before each
   action (the part the bundle kept), reward, reward components, ``action_valid``,
   ``terminated`` and ``truncated`` must equal the claim (floats within ``tolerance``), the
   replay must end exactly where the claim ends, and the final success, termination reason and
   total reward must match. The suite's ``max_turns`` is applied as the harness applies it. A
   claim that the agent stopped at its own token budget (``truncated_by: token_budget``) is
   accepted on the turn it names: it only cuts the agent's own episode short;
6. every joint episode of a multi-agent entry, replayed: ``make_parallel(env_id, **kwargs)``,
   ``reset(seed=seed)`` (each agent's task id must be its claimed one), then round by round every
   live agent's recorded action for that round stepped at once; each agent's observation, reward,
   reward components, ``action_valid``, ``terminated``, ``truncated``, end, success, termination
   reason and total are checked as in 5 (the message also names the agent). An agent's record
   ends where :func:`~envgym.rollout.ending.episode_end` ends it; a harness cut (``max_turns``, a
   claimed token budget) of one agent ends every live agent at that round, as the runner does
   (:mod:`envgym.rollout.multiagent`). The records of one joint episode are scored or unscored
   together;
7. infrastructure failures (unscored episodes: ``env_error``, ``agent_error``, ``timeout``) are
   replayed up to where they stopped and then **counted as failed episodes** in the scores (and
   shown apart, as ``infra``); more than ``max_infra_fraction`` of them rejects the bundle. They
   cannot be re-run here: a bundle holds the agent's actions up to the failure, not the agent, so
   nothing can play the rest of the episode. Leaving them out of the score would let a submitter
   drop the hard tasks by marking them so; counted as failures, the mark gains nothing (a bench
   run resumes and re-runs them before a bundle is made, so honest bundles rarely carry any).

**Limits before work.** Every action's length is checked against the cap of its environment
(:func:`action_cap`: an ``max_action_chars`` class attribute the environment declares, else its
family's cap, else :attr:`VerifyConfig.max_action_chars`) before anything is stepped. Every
episode's replay is held to :attr:`VerifyConfig.episode_timeout_s` and the whole bundle to
:attr:`VerifyConfig.budget_s` of wall-clock time and :attr:`VerifyConfig.cpu_budget_s` of CPU
time: over a limit, the episode fails verification and the bundle is rejected (the submitter's
episodes pay for their waits, not the board). In this process the limits are checked between
steps; replays that may block (sandboxed or browser environments, see :func:`needs_isolation`,
and every parallel replay) run in child processes, each in its own process group, which the
verifier kills whole when a limit passes.

**The verifier's own failures** (an environment that cannot be made here: a browser that does
not launch, a sandbox backend or optional dependency missing; a replay process that does not
start) raise :class:`VerifierUnavailable`, never :class:`VerificationError`: the bundle was not
judged, and a server answers ``503`` and asks for a retry later.

Scores (:mod:`envgym.leaderboard.scores`) are computed from the replayed values, never from the
claimed ones.

**Environments that cannot be replayed step by step** (none in envgym yet: an environment whose
transitions depend on something outside the seed, such as a live website). Such an environment
sets the class attribute ``replayable = False`` and defines
``regrade_episode(record: dict) -> dict`` on its unwrapped class: called after ``reset(seed=...)``
with the bundle's episode record (which may carry a ``final_state`` the environment itself
produced), it returns ``{"success": bool, "total_reward": float}`` graded from that final state
by the environment's own checker. The leaderboard then compares those with the claim instead of
stepping the actions.
"""

from __future__ import annotations

import functools
import json
import math
import multiprocessing
import os
import resource
import signal
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from envgym.core import TerminationReason
from envgym.errors import ConfigError, EnvgymError, NotAvailableError, UnknownEnvError
from envgym.leaderboard.bundle import (
    Bundle,
    BundleError,
    canonical_json,
    describe,
    episode_key,
    read_bundle,
    record_key,
)
from envgym.leaderboard.scores import EpisodeOutcome, Scores, compute_scores
from envgym.leaderboard.suites import (
    find_suite,
    installed_suites,
    max_trials,
    parse_suite_copy,
    suite_is_sandboxed,
)
from envgym.registration import make, make_parallel, spec
from envgym.rollout.ending import TOKEN_BUDGET, EpisodeEnd, episode_end
from envgym.rollout.multiagent import possible_agents
from envgym.rollout.records import json_safe, recordable_observation

if TYPE_CHECKING:  # pragma: no cover
    from envgym.bench.suite import Suite

__all__ = [
    "DEFAULT_MAX_ACTION_CHARS",
    "FAMILY_ACTION_CAPS",
    "ISOLATED_ENV_PREFIXES",
    "VerificationError",
    "Verified",
    "VerifierUnavailable",
    "VerifyConfig",
    "action_cap",
    "needs_isolation",
    "replay_episode",
    "suite_is_sandboxed",
    "verify_bundle",
]

INFRA_REASONS = frozenset({"env_error", "agent_error", "timeout"})
_CUT_MARK = "\u2026 ["

#: The action cap of environments that declare none and whose family has none (characters).
DEFAULT_MAX_ACTION_CHARS = 16 * 1024
#: Action caps per env id prefix (characters): shell commands may write whole files.
FAMILY_ACTION_CAPS: Mapping[str, int] = {"envgym/SWE": 128 * 1024}
#: Env id prefixes whose replay may block (sandboxed commands, a browser): replayed in a child
#: process that the verifier can kill, even with ``workers=1``.
ISOLATED_ENV_PREFIXES = ("envgym/SWE", "envgym/MiniWoB", "envgym/GUIGrounding", "envgym/WebShop-Browser")
#: Seconds a child replay process is given past a limit before it is killed (its own check,
#: between steps, reports first when it can).
_KILL_GRACE_S = 2.0
#: Seconds a child replay process may take to start and make its first environment.
_START_TIMEOUT_S = 120.0


class VerificationError(EnvgymError):
    """A bundle failed verification (tampered, edited, or not what the suite asks).

    Attributes:
        reason: the message without the location.
        entry, seed, trial, agent, turn: where the mismatch is (``None`` where it does not apply;
            ``agent`` is the agent id in a multi-agent episode).
    """

    def __init__(
        self,
        reason: str,
        *,
        entry: str | None = None,
        seed: int | None = None,
        trial: int | None = None,
        turn: int | None = None,
        agent: str | None = None,
    ) -> None:
        where = []
        if entry is not None:
            where.append(f"entry {entry!r}")
        if seed is not None:
            where.append(f"seed {seed}")
        if trial is not None:
            where.append(f"trial {trial}")
        if agent is not None:
            where.append(f"agent {agent!r}")
        if turn is not None:
            where.append(f"turn {turn}")
        super().__init__((", ".join(where) + ": " if where else "") + reason)
        self.reason = reason
        self.entry = entry
        self.seed = seed
        self.trial = trial
        self.agent = agent
        self.turn = turn

    def __reduce__(self) -> Any:  # keyword-only fields survive pickling (process pool)
        return (_rebuild, (self.reason, self.entry, self.seed, self.trial, self.turn, self.agent))


def _rebuild(reason: str, entry: Any, seed: Any, trial: Any, turn: Any, agent: Any = None) -> VerificationError:
    return VerificationError(reason, entry=entry, seed=seed, trial=trial, turn=turn, agent=agent)


class VerifierUnavailable(EnvgymError):
    """The verifier itself cannot replay the bundle now (an environment that cannot be made here:
    a browser that does not launch, a sandbox backend or an optional dependency missing; a replay
    process that does not start). The bundle was not judged: retry later (a server answers ``503``).

    Attributes:
        retry_after_s: seconds after which a retry may succeed (a hint for ``Retry-After``).
    """

    def __init__(self, message: str, *, retry_after_s: int = 60) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> Any:
        return (_unavailable, (str(self), self.retry_after_s))


def _unavailable(message: str, retry_after_s: int) -> VerifierUnavailable:
    return VerifierUnavailable(message, retry_after_s=retry_after_s)


@dataclass(frozen=True, kw_only=True)
class VerifyConfig:
    """How strictly and how fast bundles are verified."""

    tolerance: float = 1e-9
    """Largest difference allowed between a claimed and a replayed float (relative above 1)."""
    workers: int = 1
    """Processes replaying episodes; 1 replays in this process."""
    parallel_threshold: int = 256
    """Bundles with fewer episodes than this replay in this process even when ``workers > 1``."""
    max_infra_fraction: float = 0.5
    """Largest fraction of unscored (infrastructure-failed) episodes a bundle may hold."""
    check_observations: bool = True
    """Compare each observation the bundle kept with the replayed one (a turn without one is rejected)."""
    episode_timeout_s: float = 300.0
    """Wall-clock seconds the replay of one episode (one joint episode) may take; over it, the
    episode fails verification."""
    budget_s: float = 1800.0
    """Wall-clock seconds the replay of a whole bundle may take; over it, the bundle is rejected."""
    cpu_budget_s: float | None = None
    """CPU seconds the replay of a whole bundle may use (its replay processes, or this thread);
    ``None``: the same as ``budget_s``."""
    max_action_chars: int = DEFAULT_MAX_ACTION_CHARS
    """Action cap (characters) of environments that declare none and whose family has none."""
    isolate: bool | None = None
    """Replay in killable child processes: ``None`` when needed (environments that may block,
    parallel replays), ``True`` always, ``False`` never (limits are then checked between steps only)."""
    episodes_per_entry: int | None = None
    """A spot check: replay only the first N episodes (joint episodes) of every entry, in the
    bundle's order, and score those. ``None`` (the default, and what the leaderboard uses): every
    episode. Every check that reads the bundle (hash, suite, episode set, action caps) still covers
    all of it; the result says it is partial (:attr:`Verified.spot_check`)."""

    @property
    def cpu_budget(self) -> float:
        """The CPU budget in seconds (``cpu_budget_s``, else ``budget_s``)."""
        return self.budget_s if self.cpu_budget_s is None else self.cpu_budget_s

    def __post_init__(self) -> None:
        for name in ("episode_timeout_s", "budget_s", "cpu_budget_s"):
            value = getattr(self, name)
            if name == "cpu_budget_s" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ConfigError(f"{name} must be a number of seconds > 0, got {value!r}.")
        cap = self.max_action_chars
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ConfigError(f"max_action_chars must be an integer >= 1, got {self.max_action_chars!r}.")
        if self.isolate not in (None, True, False):
            raise ConfigError(f"isolate must be true, false or null, got {self.isolate!r}.")
        if not isinstance(self.tolerance, (int, float)) or not 0 <= self.tolerance < 1:
            raise ConfigError(f"tolerance must be a number in [0, 1), got {self.tolerance!r}.")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"workers must be an integer >= 1, got {self.workers!r}.")
        if not isinstance(self.parallel_threshold, int) or self.parallel_threshold < 0:
            raise ConfigError(f"parallel_threshold must be an integer >= 0, got {self.parallel_threshold!r}.")
        if not isinstance(self.max_infra_fraction, (int, float)) or not 0 <= self.max_infra_fraction <= 1:
            raise ConfigError(f"max_infra_fraction must be in [0, 1], got {self.max_infra_fraction!r}.")
        per_entry = self.episodes_per_entry
        if per_entry is not None and (isinstance(per_entry, bool) or not isinstance(per_entry, int) or per_entry < 1):
            raise ConfigError(f"episodes_per_entry must be an integer >= 1 or None, got {per_entry!r}.")


@dataclass
class Verified:
    """A bundle that passed verification, with its replayed outcomes and scores."""

    bundle: Bundle
    suite: Suite
    outcomes: list[EpisodeOutcome] = field(default_factory=list)
    scores: Scores | None = None
    spot_check: bool = False
    """Only some episodes were replayed (:attr:`VerifyConfig.episodes_per_entry`): not a
    verification to rank by."""


# -- one episode -----------------------------------------------------------------------------------


def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _observation_mismatch(claimed: Any, replayed: Any) -> str | None:
    """Why the observation a bundle kept is not the replayed one (``None``: it is).

    A text observation may be cut (``text_cap``): its kept prefix must start the replayed text.
    A non-text one (a dict, images described) must equal the replayed one as a run records it.
    A missing one is a mismatch: a bundle keeps every observation (the viewer shows them).
    """
    if claimed is None:
        return "the bundle carries no observation for this turn; bundles keep each observation (cut to text_cap)"
    if isinstance(claimed, str):
        if not isinstance(replayed, str):
            return "the claimed observation is text but the environment shows a structured observation"
        cut = claimed.rfind(_CUT_MARK)
        if cut >= 0 and claimed.endswith(" more characters cut]"):
            same = replayed.startswith(claimed[:cut])
        else:
            same = claimed == replayed
    else:
        recorded = json_safe(recordable_observation(replayed))
        same = json.dumps(claimed, sort_keys=True) == json.dumps(recorded, sort_keys=True)
    return None if same else "the claimed observation is not the one the environment shows"


class _Clock:
    """The time limits of one verification, checked between steps (cooperatively).

    ``wall_left`` and ``cpu_left`` start it part-way through a bundle's budget (a child replay
    process); ``cpu`` measures this thread (in-process) or this process (a child).
    """

    def __init__(
        self,
        config: VerifyConfig,
        *,
        wall_left: float | None = None,
        cpu_left: float | None = None,
        cpu: Callable[[], float] = time.thread_time,
    ) -> None:
        now = time.monotonic()
        self.config = config
        self.wall_deadline = now + (config.budget_s if wall_left is None else wall_left)
        self.cpu = cpu
        self.cpu_start = cpu()
        self.cpu_limit = config.cpu_budget if cpu_left is None else cpu_left
        self.episode_start = now

    def start_episode(self) -> None:
        self.episode_start = time.monotonic()

    def over(self) -> str | None:
        """Why the replay must stop now (``None``: it may go on)."""
        now = time.monotonic()
        if now - self.episode_start > self.config.episode_timeout_s:
            return _episode_over(self.config)
        if now > self.wall_deadline:
            return _budget_over(self.config)
        if self.cpu() - self.cpu_start > self.cpu_limit:
            return _cpu_over(self.config)
        return None


def _episode_over(config: VerifyConfig) -> str:
    return (
        f"the replay of this episode took more than {config.episode_timeout_s:g} s, the limit per episode "
        "(episode_timeout_s); an episode that waits out its timeouts fails verification"
    )


def _budget_over(config: VerifyConfig) -> str:
    return (
        f"the replay of the bundle took more than its budget of {config.budget_s:g} s of wall-clock time "
        "(budget_s); submit fewer or faster episodes"
    )


def _cpu_over(config: VerifyConfig) -> str:
    return (
        f"the replay of the bundle used more than its budget of {config.cpu_budget:g} s of CPU time "
        "(cpu_budget_s); submit fewer or cheaper episodes"
    )


@functools.lru_cache(maxsize=1024)
def _declared_cap(env_id: str) -> int | None:
    try:
        declared = getattr(spec(env_id).load(), "max_action_chars", None)
    except Exception:  # an env that cannot be loaded here: its family's or the default cap
        return None
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return declared
    return None


def action_cap(env_id: str, config: VerifyConfig | None = None) -> int:
    """The longest action (characters) the replay of ``env_id`` steps: the environment class's
    own ``max_action_chars`` when it declares one, else its family's in
    :data:`FAMILY_ACTION_CAPS`, else ``config.max_action_chars`` (16 KiB by default)."""
    declared = _declared_cap(env_id)
    if declared is not None:
        return declared
    for prefix, cap in FAMILY_ACTION_CAPS.items():
        if env_id.startswith(prefix):
            return cap
    return (config or VerifyConfig()).max_action_chars


def _action_too_long(action: str, cap: int | None) -> str | None:
    if cap is None or len(action) <= cap:
        return None
    return (
        f"the action is {len(action)} characters, more than the {cap} this environment accepts on replay; "
        "an agent's action this long is refused before it is stepped"
    )


def needs_isolation(env_ids: Sequence[str]) -> bool:
    """Whether replaying these environments may block (a sandboxed command, a browser), so that
    only a child process the verifier can kill keeps the time limits (see :data:`ISOLATED_ENV_PREFIXES`)."""
    return any(env_id.startswith(ISOLATED_ENV_PREFIXES) for env_id in env_ids)



#: The largest float tolerance an environment may ask for on replay (see :func:`replay_tolerance`).
MAX_ENV_TOLERANCE = 1e-3


def replay_tolerance(env: Any, config: VerifyConfig) -> float:
    """The float tolerance of a replay: ``config.tolerance``, or the environment class's own
    ``replay_tolerance`` when it declares a larger one (at most :data:`MAX_ENV_TOLERANCE`).

    An environment declares one when its numbers legitimately differ in the last bits between
    CPUs and the difference grows over an episode (a physics simulation through numpy, whose
    SIMD kernels differ between AVX-512 and AVX2 machines): its card says why and by how much."""
    declared = getattr(type(getattr(env, "unwrapped", env)), "replay_tolerance", None)
    if isinstance(declared, (int, float)) and not isinstance(declared, bool) and 0 <= declared <= MAX_ENV_TOLERANCE:
        return max(config.tolerance, float(declared))
    return config.tolerance

def replay_episode(
    env: Any,
    episode: Mapping[str, Any],
    *,
    max_turns: int | None,
    config: VerifyConfig,
    action_cap: int | None = None,
    clock: _Clock | None = None,
) -> EpisodeOutcome:
    """Replay one bundle episode in ``env`` (an environment made with the entry's arguments).

    ``action_cap`` (characters; ``None``: not checked) refuses a longer action before anything is
    stepped; ``clock`` holds the replay to the time limits of ``config`` (default: this episode
    alone, from now).

    Returns the replayed outcome; raises :class:`VerificationError` at the first mismatch.
    """
    entry, seed, trial = episode_key(episode)
    tol = replay_tolerance(env, config)
    clock = clock or _Clock(config)
    clock.start_episode()

    def fail(reason: str, turn: int | None = None) -> VerificationError:
        return VerificationError(reason, entry=entry, seed=seed, trial=trial, turn=turn)

    for i, turn in enumerate(episode["turns"]):
        problem = _action_too_long(turn["action"], action_cap)
        if problem is not None:
            raise fail(problem, i)

    scored = episode["scored"]
    claimed_reason = episode["termination_reason"]
    if scored == (claimed_reason in INFRA_REASONS):
        state = "scored" if scored else "unscored"
        raise fail(f"the episode is marked {state} but ends with termination reason {claimed_reason!r}")
    obs, info = env.reset(seed=seed)
    task = info.get("task") or {}
    claimed_task = episode.get("task_id")
    if claimed_task and str(task.get("id", "")) != claimed_task:
        raise fail(f"the claimed task {claimed_task!r} is not the task of this seed ({task.get('id')!r})")

    unwrapped = getattr(env, "unwrapped", env)
    if getattr(unwrapped, "replayable", True) is False:
        return _regrade(unwrapped, episode, fail)

    turns = episode["turns"]
    rewards: list[float] = []
    components_sum: dict[str, float] = {}
    end: EpisodeEnd | None = None
    terminated = truncated = False
    for i, turn in enumerate(turns):
        if end is not None:
            raise fail(f"the replayed episode ended after turn {i - 1} but the claim has {len(turns)} turns", i)
        if config.check_observations:
            problem = _observation_mismatch(turn.get("observation"), obs)
            if problem is not None:
                raise fail(problem, i)
        over = clock.over()
        if over is not None:
            raise fail(over, i)
        obs, reward, terminated, truncated, info = env.step(turn["action"])
        reward = float(reward)
        components = {k: float(v) for k, v in (info.get("reward_components") or {}).items()}
        last = i == len(turns) - 1
        # The runner's end-of-episode rules (envgym.rollout.ending). The agent's own token budget
        # may end its episode on any turn: only the claim tells where, and only on its last turn.
        own_budget = last and scored and episode.get("truncated_by") == TOKEN_BUDGET and turn["truncated"]
        end = episode_end(
            terminated=terminated,
            truncated=truncated,
            info=info,
            turns=i + 1,
            max_turns=max_turns,
            budget_exhausted=bool(own_budget),
        )
        truncated = end.truncated if end is not None else False
        if not _close(reward, float(turn["reward"]), tol):
            raise fail(f"claimed reward {turn['reward']!r}, replayed {reward!r}", i)
        claimed_components = turn["reward_components"]
        if set(claimed_components) != set(components):
            raise fail(f"claimed reward components {sorted(claimed_components)}, replayed {sorted(components)}", i)
        for name, value in components.items():
            if not _close(value, float(claimed_components[name]), tol):
                raise fail(f"claimed {name} {claimed_components[name]!r}, replayed {value!r}", i)
        for key, value in (("action_valid", bool(info.get("action_valid", True))), ("terminated", terminated)):
            if turn[key] != value:
                raise fail(f"claimed {key}={turn[key]}, replayed {key}={value}", i)
        if turn["truncated"] != truncated:
            raise fail(f"claimed truncated={turn['truncated']}, replayed truncated={truncated}", i)
        rewards.append(reward)
        for name, value in components.items():
            components_sum[name] = components_sum.get(name, 0.0) + value

    total = math.fsum(rewards)
    if not scored:  # an infrastructure failure: its turns must be true, its end cannot be checked
        if end is not None:
            raise fail(f"the episode is claimed as {claimed_reason!r} but the replay ended normally")
        return EpisodeOutcome(entry, seed, trial, False, False, total, len(turns), claimed_reason, components_sum)
    if end is None:
        raise fail(f"the claim ends after {len(turns)} turns but the replayed episode has not ended")
    success = end.success
    reason = end.reason.value
    if episode["success"] != success:
        raise fail(f"claimed success={episode['success']}, replayed success={success}")
    if claimed_reason != reason:
        raise fail(f"claimed termination reason {claimed_reason!r}, replayed {reason!r}")
    if not _close(total, float(episode["total_reward"]), tol * max(1, len(turns))):
        raise fail(f"claimed total reward {episode['total_reward']!r}, replayed {total!r}")
    return EpisodeOutcome(entry, seed, trial, True, success, total, len(turns), reason, components_sum)


def replay_joint_episode(
    env: Any,
    records: Sequence[Mapping[str, Any]],
    *,
    agents: Sequence[str],
    max_turns: int | None,
    config: VerifyConfig,
    action_cap: int | None = None,
    clock: _Clock | None = None,
) -> list[EpisodeOutcome]:
    """Replay one joint episode of a PettingZoo Parallel env (made with the entry's arguments).

    ``action_cap`` and ``clock`` as in :func:`replay_episode`.

    ``records`` are the bundle's lines of one (entry, seed, trial), one per agent of ``agents``
    (the env's ``possible_agents``; the episode set check has made sure of that). Returns one
    replayed outcome per agent, in ``agents`` order; raises :class:`VerificationError` at the
    first mismatch, naming the agent.
    """
    entry, seed, trial = episode_key(records[0])
    tol = replay_tolerance(env, config)
    claims = {str(r["agent_id"]): r for r in records}

    def fail(reason: str, agent: str | None = None, turn: int | None = None) -> VerificationError:
        return VerificationError(reason, entry=entry, seed=seed, trial=trial, agent=agent, turn=turn)

    clock = clock or _Clock(config)
    clock.start_episode()
    for a in agents:
        for i, turn in enumerate(claims[a]["turns"]):
            problem = _action_too_long(turn["action"], action_cap)
            if problem is not None:
                raise fail(problem, a, i)
    scored = {bool(claims[a]["scored"]) for a in agents}
    if len(scored) != 1:
        shown = ", ".join(f"{a}={claims[a]['scored']}" for a in agents)
        raise fail(f"the agents' records of one episode are scored and unscored at once ({shown}); they end together")
    is_scored = scored.pop()
    for a in agents:
        claimed_reason = claims[a]["termination_reason"]
        if is_scored == (claimed_reason in INFRA_REASONS):
            state = "scored" if is_scored else "unscored"
            raise fail(f"the record is marked {state} but ends with termination reason {claimed_reason!r}", a)
    if not is_scored and len({claims[a]["termination_reason"] for a in agents}) != 1:
        reasons = ", ".join(f"{a}={claims[a]['termination_reason']!r}" for a in agents)
        raise fail(f"an infrastructure failure ends every agent's record with one reason, got {reasons}")
    if getattr(getattr(env, "unwrapped", env), "replayable", True) is False:
        raise fail(f"{type(env).__name__} sets replayable=False; multi-agent environments are verified by replay only")

    obs, infos = env.reset(seed=seed)
    for a in agents:
        if a not in obs or a not in infos:
            raise fail("reset gave no observation or info for this agent", a)
        claimed_task = claims[a].get("task_id")
        task = infos[a].get("task") or {}
        if claimed_task and str(task.get("id", "")) != claimed_task:
            raise fail(f"the claimed task {claimed_task!r} is not the task of this seed ({task.get('id')!r})", a)

    turns = {a: claims[a]["turns"] for a in agents}
    rewards: dict[str, list[float]] = {a: [] for a in agents}
    components_sum: dict[str, dict[str, float]] = {a: {} for a in agents}
    ends: dict[str, EpisodeEnd] = {}
    live = list(agents)  # agents whose replayed record has not ended
    r = 0
    while live:
        going = [a for a in live if r < len(turns[a])]
        if not going:
            break  # every live claim stops here: checked below
        if len(going) != len(live):
            stopped = next(a for a in live if a not in going)
            raise fail(
                f"the claim ends after {r} turns but the replayed episode has not ended for this agent, and "
                f"{going[0]!r} plays on; a round needs every live agent's action",
                stopped,
            )
        if config.check_observations:
            for a in live:
                problem = _observation_mismatch(turns[a][r].get("observation"), str(obs[a]))
                if problem is not None:
                    raise fail(problem, a, r)
        over = clock.over()
        if over is not None:
            raise fail(over, live[0], r)
        obs, step_rewards, terms, truncs, infos = env.step({a: turns[a][r]["action"] for a in live})
        step_ends: dict[str, EpisodeEnd | None] = {}
        cut: str | None = None
        for a in live:
            if a not in obs or a not in infos:
                raise fail("the step gave no observation or info for this agent", a, r)
            turn = turns[a][r]
            # The runner's end-of-episode rules, per agent; a token budget only on a claim's last turn.
            own_budget = (
                r == len(turns[a]) - 1
                and is_scored
                and claims[a].get("truncated_by") == TOKEN_BUDGET
                and turn["truncated"]
            )
            end = episode_end(
                terminated=bool(terms.get(a, False)),
                truncated=bool(truncs.get(a, False)),
                info=infos[a],
                turns=r + 1,
                max_turns=max_turns,
                budget_exhausted=bool(own_budget),
            )
            step_ends[a] = end
            if end is not None and end.truncated_by is not None and cut is None:
                cut = end.truncated_by
        if cut is not None:  # the harness's cut of one agent ends every live agent (envgym.rollout.multiagent)
            for a in live:
                if step_ends[a] is None:
                    success = bool(infos[a].get("success", False))
                    step_ends[a] = EpisodeEnd(TerminationReason.MAX_TURNS, success, True, cut)
        # Every agent's claim of this round is compared before failing: one changed action moves
        # the others' rewards too (shared payoffs), so the message names every agent that differs.
        mismatches = []
        for a in live:
            end = step_ends[a]
            truncated = end.truncated if end is not None else False
            problem = _turn_mismatch(
                turns[a][r], step_rewards.get(a, 0.0), bool(terms.get(a, False)), truncated, infos[a], tol
            )
            if problem is not None:
                mismatches.append((a, problem))
        if mismatches:
            first, problem = mismatches[0]
            others = [a for a, _ in mismatches[1:]]
            if others:
                problem += f" (the claims of {', '.join(map(repr, others))} differ from the replay in this turn too)"
            raise fail(problem, first, r)
        for a in live:
            end = step_ends[a]
            reward = float(step_rewards.get(a, 0.0))
            components = {k: float(v) for k, v in (infos[a].get("reward_components") or {}).items()}
            rewards[a].append(reward)
            for name, value in components.items():
                components_sum[a][name] = components_sum[a].get(name, 0.0) + value
            if end is not None:
                ends[a] = end
                if len(turns[a]) > r + 1:
                    raise fail(
                        f"the replayed episode ended after turn {r} but the claim has {len(turns[a])} turns", a, r + 1
                    )
        live = [a for a in live if a not in ends]
        r += 1

    outcomes = []
    if not is_scored:  # an infrastructure failure: the turns must be true, the end cannot be checked
        if not live:
            raise fail(
                f"the episode is claimed as {claims[agents[0]]['termination_reason']!r} but the replay ended normally"
            )
        for a in agents:
            outcomes.append(
                EpisodeOutcome(
                    entry,
                    seed,
                    trial,
                    False,
                    False,
                    math.fsum(rewards[a]),
                    len(turns[a]),
                    str(claims[a]["termination_reason"]),
                    components_sum[a],
                    a,
                )
            )
        return outcomes
    if live:
        a = live[0]
        raise fail(f"the claim ends after {len(turns[a])} turns but the replayed episode has not ended", a)
    for a in agents:
        claim, end = claims[a], ends[a]
        total = math.fsum(rewards[a])
        if claim["success"] != end.success:
            raise fail(f"claimed success={claim['success']}, replayed success={end.success}", a)
        if claim["termination_reason"] != end.reason.value:
            raise fail(f"claimed termination reason {claim['termination_reason']!r}, replayed {end.reason.value!r}", a)
        if not _close(total, float(claim["total_reward"]), tol * max(1, len(turns[a]))):
            raise fail(f"claimed total reward {claim['total_reward']!r}, replayed {total!r}", a)
        outcomes.append(
            EpisodeOutcome(
                entry, seed, trial, True, end.success, total, len(turns[a]), end.reason.value, components_sum[a], a
            )
        )
    return outcomes


def _turn_mismatch(
    turn: Mapping[str, Any], reward: Any, terminated: bool, truncated: bool, info: Mapping[str, Any], tol: float
) -> str | None:
    """How one agent's claimed turn differs from its replayed step (``None``: it does not)."""
    reward = float(reward)
    components = {k: float(v) for k, v in (info.get("reward_components") or {}).items()}
    if not _close(reward, float(turn["reward"]), tol):
        return f"claimed reward {turn['reward']!r}, replayed {reward!r}"
    claimed_components = turn["reward_components"]
    if set(claimed_components) != set(components):
        return f"claimed reward components {sorted(claimed_components)}, replayed {sorted(components)}"
    for name, value in components.items():
        if not _close(value, float(claimed_components[name]), tol):
            return f"claimed {name} {claimed_components[name]!r}, replayed {value!r}"
    valid = bool(info.get("action_valid", True))
    for key, value in (("action_valid", valid), ("terminated", terminated), ("truncated", truncated)):
        if turn[key] != value:
            return f"claimed {key}={turn[key]}, replayed {key}={value}"
    return None


def _regrade(unwrapped: Any, episode: Mapping[str, Any], fail: Any) -> EpisodeOutcome:
    regrade = getattr(unwrapped, "regrade_episode", None)
    if not callable(regrade):
        raise fail(f"{type(unwrapped).__name__} sets replayable=False but defines no regrade_episode(record)")
    graded = regrade(dict(episode))
    success = bool(graded["success"])
    total = float(graded["total_reward"])
    if episode["scored"]:
        if episode["success"] != success:
            raise fail(f"claimed success={episode['success']}, regraded success={success}")
        if not _close(total, float(episode["total_reward"]), 1e-9):
            raise fail(f"claimed total reward {episode['total_reward']!r}, regraded {total!r}")
    return EpisodeOutcome(
        episode["entry"],
        episode["seed"],
        episode["trial"],
        bool(episode["scored"]),
        success and bool(episode["scored"]),
        total,
        len(episode["turns"]),
        str(episode["termination_reason"]),
        {},
    )


def _unavailable_env(env_id: str, err: BaseException) -> VerifierUnavailable:
    return VerifierUnavailable(
        f"{env_id} cannot be made here to replay it ({type(err).__name__}: {err}); the verifier's environment "
        "is not ready (a browser, sandbox or optional dependency): retry later"
    )


def _replay_chunk(
    env_id: str,
    kwargs: dict[str, Any],
    max_turns: int | None,
    episodes: list[dict[str, Any]],
    config: VerifyConfig,
    clock: _Clock | None = None,
    on_start: Callable[[int], None] | None = None,
) -> list[EpisodeOutcome]:
    """Replay episodes of one entry in one environment instance (also a child-process task).

    Raises :class:`VerifierUnavailable` when the environment cannot be made here (the suite's
    own arguments: the fault is the verifier's, not the bundle's).
    """
    clock = clock or _Clock(config)
    try:
        env = make(env_id, **kwargs)
    except Exception as err:
        raise _unavailable_env(env_id, err) from err
    cap = action_cap(env_id, config)
    outcomes = []
    try:
        for k, episode in enumerate(episodes):
            if on_start is not None:
                on_start(k)
            try:
                outcomes.append(
                    replay_episode(env, episode, max_turns=max_turns, config=config, action_cap=cap, clock=clock)
                )
            except (VerificationError, VerifierUnavailable):
                raise
            except NotAvailableError as err:
                raise _unavailable_env(env_id, err) from err
            except Exception as err:  # the env broke its contract while replaying: reject, never a 500
                raise VerificationError(
                    f"the environment raised while replaying: {type(err).__name__}: {err}",
                    entry=episode["entry"],
                    seed=episode["seed"],
                    trial=episode["trial"],
                ) from err
    finally:
        env.close()
    return outcomes


def _replay_joint_chunk(
    env_id: str,
    kwargs: dict[str, Any],
    max_turns: int | None,
    agents: list[str],
    groups: list[list[dict[str, Any]]],
    config: VerifyConfig,
    clock: _Clock | None = None,
    on_start: Callable[[int], None] | None = None,
) -> list[EpisodeOutcome]:
    """Replay joint episodes of one multi-agent entry in one environment instance (also a
    child-process task); ``groups`` holds each episode's records in agent order."""
    clock = clock or _Clock(config)
    try:
        env = make_parallel(env_id, **kwargs)
    except Exception as err:
        raise _unavailable_env(env_id, err) from err
    cap = action_cap(env_id, config)
    outcomes: list[EpisodeOutcome] = []
    try:
        for k, records in enumerate(groups):
            if on_start is not None:
                on_start(k)
            try:
                outcomes += replay_joint_episode(
                    env, records, agents=agents, max_turns=max_turns, config=config, action_cap=cap, clock=clock
                )
            except (VerificationError, VerifierUnavailable):
                raise
            except NotAvailableError as err:
                raise _unavailable_env(env_id, err) from err
            except Exception as err:  # the env broke its contract while replaying: reject, never a 500
                raise VerificationError(
                    f"the environment raised while replaying: {type(err).__name__}: {err}",
                    entry=records[0]["entry"],
                    seed=records[0]["seed"],
                    trial=records[0]["trial"],
                ) from err
    finally:
        env.close()
    return outcomes


# -- the whole bundle ------------------------------------------------------------------------------


def _check_suite(bundle: Bundle) -> Suite:
    claimed = bundle.manifest["suite"]
    suite = find_suite(claimed["id"])
    if suite is None:
        known = sorted(s.id for s in installed_suites())
        raise VerificationError(
            f"suite {claimed['id']!r} is not installed here (installed: {', '.join(known) or 'none'}); "
            "the leaderboard ranks runs of its own suites only."
        )
    if claimed["sha256"] != suite.sha256:
        raise VerificationError(
            f"the bundle's suite {claimed['id']!r} has sha256 {claimed['sha256'][:16]}..., the installed suite file "
            f"{suite.path} has {suite.sha256[:16]}...: the run used another version of the suite."
        )
    if (claimed["name"], claimed["version"]) != (suite.name, str(suite.version)):
        raise VerificationError(
            f"the bundle names suite {claimed['name']!r} version {claimed['version']!r}, the installed "
            f"{suite.id!r} is {suite.name!r} version {suite.version}."
        )
    try:
        copy = parse_suite_copy(bundle.manifest.get("suite_spec"))
    except ConfigError as err:
        raise VerificationError(f"the suite copy in the bundle is not a valid suite ({err})") from err
    if copy.sha256 != suite.sha256 or copy.entries != suite.entries:
        raise VerificationError(f"the suite copy in the bundle differs from the installed suite {suite.id!r}")
    return suite


#: One suite entry's replay: (env id, kwargs to make it with, max_turns, entry name, the agents of
#: a multi-agent entry in ``possible_agents`` order or ``None`` for a single-agent one).
_Plan = tuple[str, dict[str, Any], int | None, str, list[str] | None]


def _replay_plan(bundle: Bundle, suite: Suite) -> list[_Plan]:
    """Per entry: what to replay it with (see :data:`_Plan`)."""
    manifest_entries = bundle.manifest["entries"]
    names = [e["name"] for e in manifest_entries]
    expected = [e.name for e in suite.entries]
    if names != expected:
        raise VerificationError(f"the bundle's entries {names} are not the suite's entries {expected} (same order)")
    plan = []
    for claimed, entry in zip(manifest_entries, suite.entries, strict=True):
        name = entry.name
        if claimed["env_id"] != entry.env:
            raise VerificationError(
                f"the bundle ran {claimed['env_id']!r}, the suite asks for {entry.env!r}", entry=name
            )
        try:
            registered = spec(entry.env)
        except UnknownEnvError as err:
            raise VerificationError(
                f"environment {entry.env!r} is not registered in this envgym ({err})", entry=name
            ) from err
        if claimed["env_version"] != registered.version:
            raise VerificationError(
                f"the bundle's environment version is {claimed['env_version']}, the registered {registered.id!r} "
                f"is version {registered.version}",
                entry=name,
            )
        kwargs = dict(claimed["env_kwargs"])
        if canonical_json(kwargs) != canonical_json(entry.env_kwargs):
            raise VerificationError(
                f"the bundle made the environment with {kwargs!r}, the suite asks for {entry.env_kwargs!r}",
                entry=name,
            )
        if claimed.get("max_turns") != entry.max_turns:
            raise VerificationError(
                f"the bundle ran with max_turns={claimed.get('max_turns')!r}, the suite asks for {entry.max_turns!r}",
                entry=name,
            )
        agents = _entry_agents(entry.env, kwargs, registered.kind, claimed, name)
        plan.append((entry.env, kwargs, entry.max_turns, name, agents))
    return plan


def _entry_agents(
    env_id: str, kwargs: dict[str, Any], kind: str, claimed: Mapping[str, Any], name: str
) -> list[str] | None:
    """The agents of a multi-agent entry (``None`` for a single-agent one); the manifest's
    ``agents`` must name them, in order."""
    listed = claimed.get("agents")
    if kind != "parallel":
        if listed is not None:
            raise VerificationError(
                f"the bundle lists agents {listed!r} for {env_id!r}, a single-agent environment", entry=name
            )
        return None
    try:
        agents = possible_agents(env_id, kwargs)
    except Exception as err:  # the suite's own arguments: the verifier's fault, not the bundle's
        raise _unavailable_env(env_id, err) from err
    if listed != agents:
        raise VerificationError(
            f"the bundle lists agents {listed!r}, the environment's agents are {agents!r}; a multi-agent entry "
            "lists its environment's possible_agents in order",
            entry=name,
        )
    return agents


def _check_trials(bundle: Bundle, suite: Suite) -> None:
    """The claimed trials within what the suite allows: checked before anything is built from them."""
    trials = bundle.manifest["trials"]
    limit = max_trials(suite)
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= limit:
        raise VerificationError(
            f"the bundle claims {trials!r:.40} trials per task; suite {suite.id!r} allows 1 to {limit}. "
            "Run the suite with --trials within that range."
        )


def _check_episode_set(bundle: Bundle, suite: Suite, plan: Sequence[_Plan]) -> None:
    _check_trials(bundle, suite)  # bounds every set built below
    trials = bundle.manifest["trials"]
    agents_of = {name: agents for *_, name, agents in plan}
    expected = {
        (e.name, s, t, a)
        for e in suite.entries
        for s in e.seeds
        for t in range(trials)
        for a in (agents_of[e.name] or [None])
    }
    numbers: dict[tuple[str, int, int], int] = {}  # each joint episode's record number
    for episode in bundle.episodes:
        name, seed, trial, agent = record_key(episode)
        if name not in agents_of:
            continue  # an entry the suite lacks: reported as extra below
        agents = agents_of[name]
        where = {"entry": name, "seed": seed, "trial": trial}
        if agents is None:
            if agent is not None or "position" in episode:
                raise VerificationError(
                    f"the line names agent {agent!r} but the entry's environment is single-agent", **where
                )
            continue
        if agent is None:
            raise VerificationError(
                f"the line carries no agent_id; a multi-agent entry has one line per agent ({', '.join(agents)})",
                **where,
            )
        if agent not in agents:
            raise VerificationError(
                f"unknown agent id {agent!r}; the environment's agents are {', '.join(agents)}", agent=agent, **where
            )
        if episode.get("position") != agents.index(agent):
            raise VerificationError(
                f"the line puts the agent at position {episode.get('position')!r}, the environment's agents "
                f"have it at {agents.index(agent)}",
                agent=agent,
                **where,
            )
        # The runner numbers an agent's record episode number x agents + position.
        index = episode.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or index % len(agents) != agents.index(agent):
            raise VerificationError(
                f"the line's record index {index!r} is not that of the agent at position {agents.index(agent)} "
                f"(episode number x {len(agents)} + position)",
                agent=agent,
                **where,
            )
        first = numbers.setdefault((name, seed, trial), index // len(agents))
        if index // len(agents) != first:
            raise VerificationError(
                f"the line's record index {index} belongs to episode number {index // len(agents)}, the other "
                f"agents' lines of this episode to number {first}",
                agent=agent,
                **where,
            )

    def order(key: tuple[Any, ...]) -> tuple[Any, ...]:
        return (key[0], key[1], key[2], key[3] or "")

    counts = Counter(record_key(e) for e in bundle.episodes)
    duplicated = sorted((k for k, n in counts.items() if n > 1), key=order)
    missing = sorted(expected - set(counts), key=order)
    extra = sorted(set(counts) - expected, key=order)
    if duplicated:
        raise VerificationError(f"duplicated episodes: {describe(duplicated)}")
    if missing:
        raise VerificationError(f"missing episodes the suite asks for: {describe(missing)}")
    if extra:
        raise VerificationError(f"episodes the suite does not ask for: {describe(extra)}")
    lines = Counter(e["entry"] for e in bundle.episodes)
    for claimed in bundle.manifest["entries"]:
        if "episodes" in claimed and claimed["episodes"] != lines[claimed["name"]]:
            raise VerificationError(
                f"the manifest says the entry holds {claimed['episodes']!r:.40} episode lines, the bundle holds "
                f"{lines[claimed['name']]}",
                entry=claimed["name"],
            )


def verify_bundle(bundle: Bundle | str | os.PathLike[str] | bytes, config: VerifyConfig | None = None) -> Verified:
    """Verify ``bundle`` (a :class:`Bundle`, a file path or the file's bytes) by replay.

    Returns the :class:`Verified` bundle with its replayed outcomes and scores.

    Raises:
        BundleError: the bundle cannot be read (not gzip, not JSON Lines, missing fields, over a
            size cap of :class:`~envgym.leaderboard.bundle.BundleLimits`). A :class:`Bundle`
            built in memory is not held to those caps (:func:`read_bundle` does that).
        VerificationError: the bundle was read but is rejected; the message says why and where
            (a limit of ``config`` passed while replaying is such a rejection).
        VerifierUnavailable: the verifier cannot replay it here now (retry later).
    """
    config = config or VerifyConfig()
    if not isinstance(bundle, Bundle):
        bundle = read_bundle(bundle)
    actual = bundle.recompute_hash()
    if actual != bundle.content_hash:
        raise VerificationError(
            f"content hash mismatch: the manifest says {bundle.content_hash[:16]}..., the content hashes to "
            f"{actual[:16]}...; the bundle was edited after it was made."
        )
    suite = _check_suite(bundle)
    _check_trials(bundle, suite)
    plan = _replay_plan(bundle, suite)
    _check_episode_set(bundle, suite, plan)
    by_entry: dict[str, list[Any]] = {}
    for env_id, _kwargs, _max_turns, name, agents in plan:
        episodes = [e for e in bundle.episodes if e["entry"] == name]
        _check_action_lengths(env_id, episodes, action_cap(env_id, config))
        # A multi-agent entry replays joint episodes: each (seed, trial)'s records, in agent order.
        by_entry[name] = episodes if agents is None else _joint_episodes(episodes, agents)
    spot_check = config.episodes_per_entry is not None and any(
        len(replays) > config.episodes_per_entry for replays in by_entry.values()
    )
    if spot_check:
        by_entry = {name: replays[: config.episodes_per_entry] for name, replays in by_entry.items()}
    parallel = config.workers > 1 and len(bundle.episodes) >= config.parallel_threshold
    isolate = config.isolate
    if isolate is None:
        isolate = parallel or suite_is_sandboxed(suite) or needs_isolation([p[0] for p in plan])
    outcomes: list[EpisodeOutcome] = []
    if isolate:
        outcomes = _replay_isolated(plan, by_entry, config, config.workers if parallel else 1)
    else:
        clock = _Clock(config)
        for plan_item in plan:
            outcomes += _replay_task(plan_item, by_entry[plan_item[3]], config, clock)
    infra = sum(not o.scored for o in outcomes)
    if outcomes and infra / len(outcomes) > config.max_infra_fraction:
        raise VerificationError(
            f"{infra} of {len(outcomes)} episodes are infrastructure failures, more than the "
            f"{config.max_infra_fraction:.0%} allowed; re-run them (a bench run resumes) before submitting."
        )
    scores = compute_scores(outcomes, [(e.name, e.env) for e in suite.entries], trials=bundle.manifest["trials"])
    return Verified(bundle=bundle, suite=suite, outcomes=outcomes, scores=scores, spot_check=spot_check)


def _check_action_lengths(env_id: str, episodes: Sequence[Mapping[str, Any]], cap: int) -> None:
    """Every action of an entry within its environment's cap, before any episode is replayed."""
    for episode in episodes:
        for i, turn in enumerate(episode["turns"]):
            problem = _action_too_long(turn["action"], cap)
            if problem is not None:
                raise VerificationError(
                    f"{problem} ({env_id})",
                    entry=episode["entry"],
                    seed=episode["seed"],
                    trial=episode["trial"],
                    agent=episode.get("agent_id"),
                    turn=i,
                )


def _joint_episodes(episodes: Sequence[dict[str, Any]], agents: Sequence[str]) -> list[list[dict[str, Any]]]:
    """The records of a multi-agent entry grouped by (seed, trial), in bundle order, each group in
    ``agents`` order (the episode set check has made every group complete)."""
    groups: dict[tuple[int, int], dict[str, dict[str, Any]]] = {}
    for e in episodes:
        groups.setdefault((e["seed"], e["trial"]), {})[e["agent_id"]] = e
    return [[group[a] for a in agents] for group in groups.values()]


def _replay_task(
    plan_item: _Plan,
    units: list[Any],
    config: VerifyConfig,
    clock: _Clock | None = None,
    on_start: Callable[[int], None] | None = None,
) -> list[EpisodeOutcome]:
    """Replay ``units`` of one entry: its episodes, or its joint episodes for a multi-agent one."""
    env_id, kwargs, max_turns, _name, agents = plan_item
    if agents is None:
        return _replay_chunk(env_id, kwargs, max_turns, units, config, clock, on_start)
    return _replay_joint_chunk(env_id, kwargs, max_turns, agents, units, config, clock, on_start)


# -- replay in child processes the verifier can kill ---------------------------------------------------


def _unit_key(plan_item: _Plan, unit: Any) -> dict[str, Any]:
    first = unit[0] if plan_item[4] is not None else unit
    return {"entry": first["entry"], "seed": first["seed"], "trial": first["trial"]}


def _process_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` and its waited-for children (0.0 where /proc cannot tell)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _own_cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _replay_worker(conn: Any, config: VerifyConfig) -> None:
    """A child replay process: replays the tasks the parent sends until told to stop.

    It leads its own process group (``setsid``), so the parent kills it with everything it
    started (an environment's browser or sandbox) in one signal.
    """
    try:
        os.setsid()
    except OSError:
        pass
    while True:
        message = conn.recv()
        if message[0] == "stop":
            return
        _, index, plan_item, units, wall_left, cpu_left = message

        def started(k: int, index: int = index) -> None:
            conn.send(("start", index, k, _own_cpu()))

        try:
            clock = _Clock(config, wall_left=wall_left, cpu_left=cpu_left, cpu=time.process_time)
            outcomes = _replay_task(plan_item, units, config, clock, started)
        except (VerificationError, VerifierUnavailable) as err:
            conn.send(("error", index, err, _own_cpu()))
            return
        except BaseException as err:  # the verifier's own bug: never a rejection of the bundle
            conn.send(("error", index, VerifierUnavailable(f"the replay failed: {type(err).__name__}: {err}"), 0.0))
            return
        conn.send(("done", index, outcomes, _own_cpu()))


@dataclass
class _Worker:
    process: Any
    conn: Any
    task: int | None = None
    unit: int | None = None
    since: float = field(default_factory=time.monotonic)
    cpu: float = 0.0


def _kill(worker: _Worker) -> None:
    process = worker.process
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the worker leads its group: it and all it started
    except (OSError, TypeError):
        pass
    try:
        process.kill()
    except (OSError, ValueError):
        pass
    process.join(5)
    worker.conn.close()


def _replay_isolated(
    plan: Sequence[_Plan],
    by_entry: Mapping[str, list[Any]],
    config: VerifyConfig,
    processes: int,
) -> list[EpisodeOutcome]:
    """Replay in ``processes`` child processes, killing them when a time limit passes.

    Each task is a run of one entry's episodes (one environment instance); workers take tasks in
    bundle order. The parent watches each episode's wall-clock time, the bundle's wall-clock time
    and the CPU time of every worker (with what they started): past a limit (plus a short grace,
    so a worker's own check between steps reports first when it can) the workers are killed and
    the bundle is rejected, naming the episode. The first failure found is raised at once.
    """
    records = sum(len(by_entry[p[3]]) * (len(p[4]) if p[4] else 1) for p in plan)
    chunk = max(8, records // (processes * 4)) if processes > 1 else max(1, records)  # in records
    tasks: list[tuple[_Plan, list[Any]]] = []
    for plan_item in plan:
        units = by_entry[plan_item[3]]
        step = max(1, chunk // len(plan_item[4])) if plan_item[4] else chunk
        for start in range(0, len(units), step):
            tasks.append((plan_item, units[start : start + step]))
    results: list[list[EpisodeOutcome] | None] = [None] * len(tasks)
    queue = deque(range(len(tasks)))
    # spawn, not fork: the web server verifies from worker threads, and forking a threaded
    # process can copy a held lock into the child.
    context = multiprocessing.get_context("spawn")
    started = time.monotonic()
    workers: list[_Worker] = []

    def give(worker: _Worker) -> None:
        if not queue:
            worker.conn.send(("stop",))
            worker.task = None
            return
        index = queue.popleft()
        wall_left = config.budget_s - (time.monotonic() - started)
        cpu_left = config.cpu_budget - sum(w.cpu for w in workers)  # each worker's total so far
        worker.conn.send(("task", index, *tasks[index], wall_left, max(cpu_left, 0.001)))
        worker.task, worker.unit, worker.since = index, None, time.monotonic()

    try:
        for _ in range(min(processes, len(tasks))):
            parent, child = context.Pipe()
            try:
                process = context.Process(target=_replay_worker, args=(child, config), daemon=True)
                process.start()
            except OSError as err:
                raise VerifierUnavailable(f"a replay process could not be started ({err}); retry later") from err
            finally:
                child.close()
            worker = _Worker(process, parent)
            workers.append(worker)
            give(worker)
        while any(w.task is not None for w in workers):
            busy = [w for w in workers if w.task is not None]
            now = time.monotonic()
            deadlines = [started + config.budget_s + _KILL_GRACE_S]
            for w in busy:
                limit = config.episode_timeout_s if w.unit is not None else _START_TIMEOUT_S
                deadlines.append(w.since + limit + _KILL_GRACE_S)
            timeout = min(1.0, max(0.0, min(deadlines) - now))
            for conn in wait([w.conn for w in busy], timeout=timeout):
                worker = next(w for w in busy if w.conn is conn)
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    code = worker.process.exitcode
                    worker.process.join(5)
                    code = worker.process.exitcode if code is None else code
                    if worker.unit is None or worker.task is None:
                        raise VerifierUnavailable(
                            f"a replay process exited (code {code}) before it replayed anything; retry later"
                        ) from None
                    plan_item, units = tasks[worker.task]
                    raise VerificationError(
                        f"the replay process died (exit code {code}) while replaying this episode",
                        **_unit_key(plan_item, units[worker.unit]),
                    ) from None
                kind, index = message[0], message[1]
                worker.cpu = message[-1]
                if kind == "start":
                    worker.unit, worker.since = message[2], time.monotonic()
                elif kind == "done":
                    results[index] = message[2]
                    give(worker)
                else:  # "error": the first failure found rejects the bundle (or is the verifier's own)
                    raise message[2]
            now = time.monotonic()
            for w in workers:
                if w.task is not None and w.process.pid is not None:
                    w.cpu = max(w.cpu, _process_cpu(w.process.pid))
            for w in workers:
                if w.task is None:
                    continue
                plan_item, units = tasks[w.task]
                if w.unit is None and now - w.since > _START_TIMEOUT_S + _KILL_GRACE_S:
                    raise VerifierUnavailable(
                        f"a replay process did not make {plan_item[0]} within {_START_TIMEOUT_S:g} s; retry later"
                    )
                if w.unit is not None and now - w.since > config.episode_timeout_s + _KILL_GRACE_S:
                    raise VerificationError(_episode_over(config), **_unit_key(plan_item, units[w.unit]))
            if now - started > config.budget_s + _KILL_GRACE_S:
                raise VerificationError(_budget_over(config))
            if sum(w.cpu for w in workers) > config.cpu_budget + _KILL_GRACE_S:
                raise VerificationError(_cpu_over(config))
    finally:
        for w in workers:
            if w.task is None and w.process.exitcode is None:
                w.process.join(5)
            if w.process.exitcode is None:
                _kill(w)
            else:
                w.conn.close()
    outcomes: list[EpisodeOutcome] = []
    for part in results:
        outcomes += part or []
    return outcomes


__all__ += ["BundleError"]
