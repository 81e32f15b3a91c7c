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
5. every episode, replayed: ``make(env_id, **kwargs)``, ``reset(seed=seed)`` (the task id must be
   the claimed one), then each recorded action stepped in turn; the observation before each
   action (the part the bundle kept), reward, reward components, ``action_valid``,
   ``terminated`` and ``truncated`` must equal the claim (floats within ``tolerance``), the
   replay must end exactly where the claim ends, and the final success, termination reason and
   total reward must match. The suite's ``max_turns`` is applied as the harness applies it. A
   claim that the agent stopped at its own token budget (``truncated_by: token_budget``) is
   accepted on the turn it names: it only cuts the agent's own episode short;
6. infrastructure failures (unscored episodes: ``env_error``, ``agent_error``, ``timeout``) are
   replayed up to where they stopped, then left out of the scores; more than
   ``max_infra_fraction`` of them rejects the bundle (marking hard tasks as failures of the
   infrastructure must not pay).

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

import math
import multiprocessing
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envgym.errors import ConfigError, EnvgymError, UnknownEnvError
from envgym.leaderboard.bundle import Bundle, BundleError, canonical_json, describe, episode_key, read_bundle
from envgym.leaderboard.scores import EpisodeOutcome, Scores, compute_scores
from envgym.leaderboard.suites import find_suite, installed_suites, parse_suite_copy
from envgym.registration import make, spec
from envgym.rollout.ending import TOKEN_BUDGET, EpisodeEnd, episode_end

if TYPE_CHECKING:  # pragma: no cover
    from envgym.bench.suite import Suite

__all__ = ["VerificationError", "Verified", "VerifyConfig", "replay_episode", "verify_bundle"]

INFRA_REASONS = frozenset({"env_error", "agent_error", "timeout"})
_CUT_MARK = "\u2026 ["


class VerificationError(EnvgymError):
    """A bundle failed verification (tampered, edited, or not what the suite asks).

    Attributes:
        reason: the message without the location.
        entry, seed, trial, turn: where the mismatch is (``None`` where it does not apply).
    """

    def __init__(
        self,
        reason: str,
        *,
        entry: str | None = None,
        seed: int | None = None,
        trial: int | None = None,
        turn: int | None = None,
    ) -> None:
        where = []
        if entry is not None:
            where.append(f"entry {entry!r}")
        if seed is not None:
            where.append(f"seed {seed}")
        if trial is not None:
            where.append(f"trial {trial}")
        if turn is not None:
            where.append(f"turn {turn}")
        super().__init__((", ".join(where) + ": " if where else "") + reason)
        self.reason = reason
        self.entry = entry
        self.seed = seed
        self.trial = trial
        self.turn = turn

    def __reduce__(self) -> Any:  # keyword-only fields survive pickling (process pool)
        return (_rebuild, (self.reason, self.entry, self.seed, self.trial, self.turn))


def _rebuild(reason: str, entry: Any, seed: Any, trial: Any, turn: Any) -> VerificationError:
    return VerificationError(reason, entry=entry, seed=seed, trial=trial, turn=turn)


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
    """Compare each observation the bundle kept with the replayed one."""

    def __post_init__(self) -> None:
        if not isinstance(self.tolerance, (int, float)) or not 0 <= self.tolerance < 1:
            raise ConfigError(f"tolerance must be a number in [0, 1), got {self.tolerance!r}.")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"workers must be an integer >= 1, got {self.workers!r}.")
        if not isinstance(self.parallel_threshold, int) or self.parallel_threshold < 0:
            raise ConfigError(f"parallel_threshold must be an integer >= 0, got {self.parallel_threshold!r}.")
        if not isinstance(self.max_infra_fraction, (int, float)) or not 0 <= self.max_infra_fraction <= 1:
            raise ConfigError(f"max_infra_fraction must be in [0, 1], got {self.max_infra_fraction!r}.")


@dataclass
class Verified:
    """A bundle that passed verification, with its replayed outcomes and scores."""

    bundle: Bundle
    suite: Suite
    outcomes: list[EpisodeOutcome] = field(default_factory=list)
    scores: Scores | None = None


# -- one episode -----------------------------------------------------------------------------------


def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _same_observation(claimed: Any, replayed: str) -> bool:
    if not isinstance(claimed, str):
        return True  # the bundle did not keep it
    cut = claimed.rfind(_CUT_MARK)
    if cut >= 0 and claimed.endswith(" more characters cut]"):
        return replayed.startswith(claimed[:cut])
    return claimed == replayed


def replay_episode(
    env: Any, episode: Mapping[str, Any], *, max_turns: int | None, config: VerifyConfig
) -> EpisodeOutcome:
    """Replay one bundle episode in ``env`` (an environment made with the entry's arguments).

    Returns the replayed outcome; raises :class:`VerificationError` at the first mismatch.
    """
    entry, seed, trial = episode_key(episode)
    tol = config.tolerance

    def fail(reason: str, turn: int | None = None) -> VerificationError:
        return VerificationError(reason, entry=entry, seed=seed, trial=trial, turn=turn)

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
        if config.check_observations and not _same_observation(turn.get("observation"), obs):
            raise fail("the claimed observation is not the one the environment shows", i)
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


def _replay_chunk(
    env_id: str, kwargs: dict[str, Any], max_turns: int | None, episodes: list[dict[str, Any]], config: VerifyConfig
) -> list[EpisodeOutcome]:
    """Replay episodes of one entry in one environment instance (also a process-pool task)."""
    entry = episodes[0]["entry"] if episodes else None
    try:
        env = make(env_id, **kwargs)
    except Exception as err:
        raise VerificationError(
            f"{env_id} cannot be made here to replay it: {type(err).__name__}: {err}", entry=entry
        ) from err
    outcomes = []
    try:
        for episode in episodes:
            try:
                outcomes.append(replay_episode(env, episode, max_turns=max_turns, config=config))
            except VerificationError:
                raise
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


def _replay_plan(bundle: Bundle, suite: Suite) -> list[tuple[str, dict[str, Any], int | None, str]]:
    """Per entry: (env id, kwargs to make it with, max_turns, entry name)."""
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
        plan.append((entry.env, kwargs, entry.max_turns, name))
    return plan


def _check_episode_set(bundle: Bundle, suite: Suite) -> None:
    trials = bundle.manifest["trials"]
    expected = {(e.name, s, t) for e in suite.entries for s in e.seeds for t in range(trials)}
    counts = Counter(episode_key(e) for e in bundle.episodes)
    duplicated = sorted(k for k, n in counts.items() if n > 1)
    missing = sorted(expected - set(counts))
    extra = sorted(set(counts) - expected)
    if duplicated:
        raise VerificationError(f"duplicated episodes: {describe(duplicated)}")
    if missing:
        raise VerificationError(f"missing episodes the suite asks for: {describe(missing)}")
    if extra:
        raise VerificationError(f"episodes the suite does not ask for: {describe(extra)}")


def verify_bundle(bundle: Bundle | str | os.PathLike[str] | bytes, config: VerifyConfig | None = None) -> Verified:
    """Verify ``bundle`` (a :class:`Bundle`, a file path or the file's bytes) by replay.

    Returns the :class:`Verified` bundle with its replayed outcomes and scores.

    Raises:
        BundleError: the bundle cannot be read (not gzip, not JSON Lines, missing fields).
        VerificationError: the bundle was read but is rejected; the message says why and where.
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
    plan = _replay_plan(bundle, suite)
    _check_episode_set(bundle, suite)
    by_entry: dict[str, list[dict[str, Any]]] = {name: [] for *_, name in plan}
    for episode in bundle.episodes:
        by_entry[episode["entry"]].append(episode)
    outcomes: list[EpisodeOutcome] = []
    if config.workers > 1 and len(bundle.episodes) >= config.parallel_threshold:
        outcomes = _replay_parallel(plan, by_entry, config)
    else:
        for env_id, kwargs, max_turns, name in plan:
            outcomes += _replay_chunk(env_id, kwargs, max_turns, by_entry[name], config)
    infra = sum(not o.scored for o in outcomes)
    if outcomes and infra / len(outcomes) > config.max_infra_fraction:
        raise VerificationError(
            f"{infra} of {len(outcomes)} episodes are infrastructure failures, more than the "
            f"{config.max_infra_fraction:.0%} allowed; re-run them (a bench run resumes) before submitting."
        )
    scores = compute_scores(outcomes, [(e.name, e.env) for e in suite.entries], trials=bundle.manifest["trials"])
    return Verified(bundle=bundle, suite=suite, outcomes=outcomes, scores=scores)


def _replay_parallel(
    plan: Sequence[tuple[str, dict[str, Any], int | None, str]],
    by_entry: Mapping[str, list[dict[str, Any]]],
    config: VerifyConfig,
) -> list[EpisodeOutcome]:
    chunk = max(8, sum(len(v) for v in by_entry.values()) // (config.workers * 4))
    jobs = []
    # spawn, not fork: the web server verifies from worker threads, and forking a threaded
    # process can copy a held lock into the child.
    with ProcessPoolExecutor(config.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for env_id, kwargs, max_turns, name in plan:
            episodes = by_entry[name]
            for start in range(0, len(episodes), chunk):
                jobs.append(
                    pool.submit(_replay_chunk, env_id, kwargs, max_turns, episodes[start : start + chunk], config)
                )
        outcomes: list[EpisodeOutcome] = []
        for job in jobs:
            outcomes += job.result()  # the first mismatch, in bundle order, is raised
    return outcomes


__all__ += ["BundleError"]
