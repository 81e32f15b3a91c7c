"""The single-agent checker: :func:`check_env` and the named checks it runs, in order.

:func:`check_env` runs Gymnasium's own ``check_env`` and then the envgym text-environment
contract, one function per check (as Gymnasium's env checker does): :func:`check_gymnasium_api`,
:func:`check_step_before_reset`, :func:`check_reset_info`, :func:`check_determinism`,
:func:`check_bad_inputs`, :func:`check_truncation`, :func:`check_pickle` and
:func:`envgym.testing.common.check_close_twice`. Each check appends its name to the
:class:`~envgym.testing.common.CheckReport` or raises :class:`envgym.errors.EnvContractError`.
"""

from __future__ import annotations

import itertools
import math
import pickle
import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from envgym.core import TerminationReason
from envgym.errors import ResetNeededError
from envgym.registration import make
from envgym.testing.common import (
    BAD_ACTIONS,
    CheckReport,
    check_close_twice,
    check_info,
    declared_components,
    fail,
    roll_action,
    same_values,
    state_text,
)

__all__ = [
    "check_bad_inputs",
    "check_determinism",
    "check_env",
    "check_gymnasium_api",
    "check_pickle",
    "check_reset_info",
    "check_step_before_reset",
    "check_step_result",
    "check_truncation",
    "scripted_rollout",
]


def scripted_rollout(env: Any, seed: int, steps: int, *, action_seed: int = 0) -> list[tuple[Any, ...]]:
    """Reset with ``seed`` and play ``steps`` seeded valid actions (see :func:`~envgym.testing.common.roll_action`).

    Returns every transition: ``("reset", obs, info)`` first, then ``(action, obs, reward,
    terminated, truncated, info)`` per step, until the episode ends or ``steps`` were played.
    """
    rng = random.Random(action_seed)
    obs, info = env.reset(seed=seed)
    record: list[tuple[Any, ...]] = [("reset", obs, info)]
    env.action_space.seed(action_seed)
    for _ in range(steps):
        action = roll_action(env, info, rng)
        obs, reward, terminated, truncated, info = env.step(action)
        record.append((action, obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return record


def _observation_ok(env: Any, obs: Any) -> bool:
    """``obs`` is in the observation space; a :class:`~envgym.spaces.Text` space also needs a ``str``.

    Text environments must return ``str`` (Gymnasium's ``Text.contains`` alone would accept other
    values); environments with other spaces (a ``Box`` of numbers) are checked by ``contains``.
    """
    if isinstance(env.observation_space, gymnasium.spaces.Text) and not isinstance(obs, str):
        return False
    return bool(env.observation_space.contains(obs))


def check_step_result(env: Any, result: Any, where: str) -> None:
    """One ``step`` result keeps the contract: a 5-tuple of an observation in the space (text for
    Text spaces), finite reward, bools and a full info."""
    if not (isinstance(result, tuple) and len(result) == 5):
        raise fail("step", f"{where}: step must return a 5-tuple, got {result!r:.200}.")
    obs, reward, terminated, truncated, info = result
    if not _observation_ok(env, obs):
        raise fail(
            "step", f"{where}: observation {obs!r:.100} is not in the observation space {env.observation_space}."
        )
    if not isinstance(reward, float) or not math.isfinite(reward):
        raise fail("step", f"{where}: reward must be a finite float, got {reward!r}.")
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise fail("step", f"{where}: terminated/truncated must be bool, got {terminated!r}, {truncated!r}.")
    check_info(info, where, declared_components(env))
    if (terminated or truncated) and info["termination_reason"] is None:
        raise fail("step", f"{where}: the episode ended but info['termination_reason'] is None.")
    if not (terminated or truncated) and info["termination_reason"] is not None:
        raise fail("step", f"{where}: termination_reason {info['termination_reason']!r} on a non-final step.")
    if info["success"] and not terminated:
        raise fail("step", f"{where}: success=True requires terminated=True.")


def _comparable(transition: tuple[Any, ...]) -> tuple[Any, ...]:
    """A transition without wall-clock fields (RecordEpisodeStatistics' ``episode.t``), to compare
    with :func:`~envgym.testing.common.same_values`."""
    info = transition[-1]
    if isinstance(info, dict) and isinstance(info.get("episode"), dict) and "t" in info["episode"]:
        info = {**info, "episode": {k: v for k, v in info["episode"].items() if k != "t"}}
        transition = (*transition[:-1], info)
    return transition


def check_gymnasium_api(factory: Callable[[], Any], env_id: str, report: CheckReport) -> None:
    """Gymnasium's own ``check_env`` on a fresh instance; its warnings are contract failures here."""
    fresh = factory()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # Two pieces of advice for RL agents, not contract breaches: an env whose actions have units
            # (coopetition's contributions in [0, endowment]) keeps its reference's Box, and unbounded
            # Box observations are Gymnasium's own convention for unbounded quantities (MuJoCo's).
            warnings.filterwarnings("ignore", message=r".*recommend using a symmetric and normalized space")
            warnings.filterwarnings("ignore", message=r".*Box observation space (minimum|maximum) value is")
            gymnasium_check_env(fresh.unwrapped, skip_render_check=True)
    except Exception as err:
        raise fail("gymnasium", f"{env_id}: gymnasium.utils.env_checker.check_env failed: {err}") from err
    finally:
        fresh.close()
    report.passed("gymnasium.check_env")


def check_step_before_reset(factory: Callable[[], Any], env_id: str, report: CheckReport) -> None:
    """``step`` before ``reset`` raises a clear :class:`~envgym.errors.ResetNeededError`."""
    fresh = factory()
    try:
        fresh.unwrapped.step("look")
    except (ResetNeededError, gymnasium.error.ResetNeeded):
        report.passed("step_before_reset")
    except Exception as err:
        raise fail("step_before_reset", f"{env_id}: expected ResetNeededError, got {err!r}.") from err
    else:
        raise fail("step_before_reset", f"{env_id}: step() before reset() did not raise.")
    finally:
        fresh.close()


def check_reset_info(env: Any, env_id: str, seed: int, report: CheckReport) -> None:
    """``reset`` returns an observation in the space (text for Text spaces) and an info with every standard key."""
    obs, info = env.reset(seed=seed)
    if not _observation_ok(env, obs):
        raise fail(
            "reset",
            f"{env_id}: reset observation {obs!r:.100} is not in the observation space {env.observation_space}.",
        )
    check_info(info, f"{env_id} reset(seed={seed})", declared_components(env))
    report.passed("reset_info")


def _check_roll_validity(env_id: str, seed: int, record: Sequence[tuple[Any, ...]]) -> int:
    """How many steps of a scripted rollout were valid; an action the env listed as admissible must be one."""
    valid = 0
    for before, step in itertools.pairwise(record):
        action, info = step[0], step[-1]
        listed = before[-1].get("admissible_actions") or ()
        if info["action_valid"]:
            valid += 1
        elif isinstance(action, str) and action in listed:
            raise fail(
                "determinism",
                f"{env_id} seed={seed}: {action!r:.80} was in info['admissible_actions'] but stepped as invalid "
                f"(observation {step[1]!r:.200}).",
            )
    return valid


def check_determinism(
    env: Any, factory: Callable[[], Any], env_id: str, seeds: Sequence[int], steps: int, report: CheckReport
) -> None:
    """Seeded rollouts of valid actions repeat exactly on a twin, keep the step contract, and seeds differ.

    The rollouts play admissible actions, the env's own samples or action-space samples
    (:func:`~envgym.testing.common.roll_action`): a roll of invalid guesses would leave the state
    untouched and so could not see state that leaks between episodes. A roll in which the env called
    no step valid fails for the same reason.
    """
    first_obs = []
    for seed in seeds:
        a = scripted_rollout(env, seed, steps, action_seed=seed)
        twin = factory()
        try:
            b = scripted_rollout(twin, seed, steps, action_seed=seed)
        finally:
            twin.close()  # a twin holding a browser or a sandbox must give it back
        if len(a) != len(b):
            raise fail("determinism", f"{env_id} seed={seed}: rollouts had {len(a)} and {len(b)} transitions.")
        for i, (x, y) in enumerate(zip(a, b)):
            if not same_values(_comparable(x), _comparable(y)):
                raise fail("determinism", f"{env_id} seed={seed}: transition {i} differs:\n{x!r:.400}\n{y!r:.400}")
        for i, item in enumerate(a[1:], start=1):
            check_step_result(env, item[1:], f"{env_id} seed={seed} step {i} action={item[0]!r:.60}")
            report.steps += 1
        report.valid_steps += _check_roll_validity(env_id, seed, a)
        first = a[0][1]  # a non-text observation (an array) is compared by its repr: arrays do not hash
        first_obs.append((first if isinstance(first, str) else repr(first), a[0][2]["task"]["id"]))
    if len(set(first_obs)) < 2 and len(seeds) >= 3:
        raise fail("determinism", f"{env_id}: seeds {list(seeds)} all gave the same task and first observation.")
    if report.steps and not report.valid_steps:
        raise fail(
            "determinism",
            f"{env_id}: none of the {report.steps} rollout steps was valid; list info['admissible_actions'] "
            "or give the env a sample_action(rng) that proposes valid actions.",
        )
    report.passed("seeded_determinism")


def check_bad_inputs(env: Any, env_id: str, seed: int, report: CheckReport) -> None:
    """No value of :data:`BAD_ACTIONS` makes ``step`` raise; an invalid step keeps the state.

    Each bad action is stepped from the seed's first state: after an invalid step that kept the
    state and ended nothing the env is still there, so it is reset only after a valid step or an
    episode's end (a reset of a browser or driving env costs a page load or a simulation warm-up).
    """
    fresh = False
    for i, bad in enumerate(BAD_ACTIONS):
        if not fresh:
            env.reset(seed=seed)
        before = state_text(env)
        try:
            result = env.step(bad)
        except Exception as err:
            raise fail(
                "fuzz", f"{env_id}: step({bad!r:.60}) raised {err!r}; bad actions must be invalid steps."
            ) from err
        check_step_result(env, result, f"{env_id} fuzz #{i} action={bad!r:.60}")
        if not result[4]["action_valid"] and before is not None and state_text(env) != before:
            raise fail("fuzz", f"{env_id}: the invalid action {bad!r:.60} changed the state.")
        fresh = not result[4]["action_valid"] and before is not None and not (result[2] or result[3])
    report.passed("bad_input_fuzz")


def check_truncation(env: Any, env_id: str, seed: int, report: CheckReport) -> None:
    """A run of invalid actions ends by ``max_turns`` (or ``invalid_limit``), never runs forever.

    Skipped (not reported) when the env has no integer ``max_turns``.
    """
    env.reset(seed=seed)
    limit = getattr(env.unwrapped, "max_turns", None)
    if not isinstance(limit, int):
        return
    for _ in range(limit + 1):
        *_, terminated, truncated, info = env.step("")
        if terminated or truncated:
            expected = {TerminationReason.MAX_TURNS.value, TerminationReason.INVALID_LIMIT.value}
            if info["termination_reason"] not in expected:
                raise fail("truncation", f"{env_id}: invalid steps ended with {info['termination_reason']!r}.")
            break
    else:
        raise fail("truncation", f"{env_id}: {limit + 1} invalid steps did not end the episode (max_turns={limit}).")
    report.passed("max_turns")


def check_pickle(env: Any, env_id: str, seed: int, report: CheckReport) -> None:
    """A copy pickled mid-episode continues exactly like the original (worker pools ship envs).

    Both steps are valid actions (:func:`~envgym.testing.common.roll_action`), so the copy must carry
    the state a real step changed.

    Envs that wrap an external engine opt out with ``metadata["picklable"] = False`` (not reported).
    """
    if not env.unwrapped.metadata.get("picklable", True):
        return
    rng = random.Random(seed)
    env.action_space.seed(seed)
    _, info = env.reset(seed=seed)
    *_, ended_terminated, ended_truncated, info = env.step(roll_action(env, info, rng))
    try:
        clone = pickle.loads(pickle.dumps(env))
    except Exception as err:
        raise fail(
            "pickle",
            f"{env_id}: the environment does not pickle mid-episode ({err!r}); keep state picklable "
            "or set metadata['picklable'] = False.",
        ) from err
    if ended_terminated or ended_truncated:  # the first action ended the episode: compare states
        if state_text(clone) != state_text(env):
            raise fail("pickle", f"{env_id}: a pickled copy of a finished episode has a different state.")
    else:
        action = roll_action(env, info, rng)
        if not same_values(_comparable(clone.step(action)), _comparable(env.step(action))):
            raise fail("pickle", f"{env_id}: a pickled copy stepped differently from the original.")
    clone.close()
    report.passed("pickle_roundtrip")


def _resolve(env: Any, make_kwargs: Mapping[str, Any] | None) -> tuple[Any, str, Callable[[], Any]]:
    """(instance, id, factory of fresh twins) for an instance or a registered id."""
    if isinstance(env, str):
        env_id = env
        kwargs = dict(make_kwargs or {})
        return make(env_id, **kwargs), env_id, lambda: make(env_id, **kwargs)
    env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    if env.spec is not None:
        return env, env_id, lambda: env.spec.make()
    # a twin built with the same constructor kwargs (TextEnv keeps them)
    init_kwargs = dict(getattr(env.unwrapped, "_init_kwargs", None) or {})
    return env, env_id, lambda: type(env.unwrapped)(**init_kwargs)


def check_env(
    env: Any,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    steps: int = 40,
    fuzz: bool = True,
    gymnasium_checks: bool = True,
    make_kwargs: Mapping[str, Any] | None = None,
) -> CheckReport:
    """Check a single-agent text environment (an instance or a registered id) against the contract.

    Args:
        env: a ``gymnasium.Env`` or an id for :func:`envgym.make`.
        seeds: reset seeds used for the determinism checks (at least two).
        steps: actions per scripted rollout.
        fuzz: also step every value of :data:`BAD_ACTIONS`.
        gymnasium_checks: run ``gymnasium.utils.env_checker.check_env`` first.
        make_kwargs: kwargs for ``make`` when ``env`` is an id.

    Returns:
        A :class:`CheckReport` listing the checks that passed. Raises ``EnvContractError``.
    """
    env, env_id, factory = _resolve(env, make_kwargs)
    report = CheckReport(env_id)
    if len(seeds) < 2:
        raise ValueError(f"check_env needs at least two seeds to compare tasks, got {list(seeds)!r}.")
    if gymnasium_checks:
        check_gymnasium_api(factory, env_id, report)
    check_step_before_reset(factory, env_id, report)
    check_reset_info(env, env_id, seeds[0], report)
    check_determinism(env, factory, env_id, seeds, steps, report)
    if fuzz:
        check_bad_inputs(env, env_id, seeds[0], report)
    check_truncation(env, env_id, seeds[0], report)
    check_pickle(env, env_id, seeds[-1], report)
    check_close_twice(env, env_id, report)
    return report
