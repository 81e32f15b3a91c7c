"""The multi-agent checkers: :func:`check_aec_env`, :func:`check_parallel_env` and their named checks.

Each checker runs PettingZoo's own API and seed tests, then the envgym text contract *per agent*
(see :mod:`envgym.multiagent`), one function per check, in order: PettingZoo's tests, step before
reset, the spaces and infos after reset, seeded determinism over scripted rollouts, bad-input
fuzzing, a run of invalid moves ending the game, and ``close()`` twice. Each check appends its name
to the :class:`~envgym.testing.common.CheckReport` or raises :class:`envgym.errors.EnvContractError`.
"""

from __future__ import annotations

import contextlib
import io
import math
import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

from envgym.core import TerminationReason
from envgym.errors import ResetNeededError
from envgym.registration import make_aec, make_parallel
from envgym.spaces import Text
from envgym.testing.common import (
    BAD_ACTIONS,
    CheckReport,
    check_close_twice,
    check_info,
    fail,
    roll_action,
    same_values,
    state_text,
)

__all__ = [
    "check_aec_bad_inputs",
    "check_aec_determinism",
    "check_aec_env",
    "check_aec_invalid_run",
    "check_aec_pettingzoo",
    "check_aec_reset_info",
    "check_aec_step_before_reset",
    "check_agent_step",
    "check_parallel_bad_inputs",
    "check_parallel_determinism",
    "check_parallel_env",
    "check_parallel_invalid_run",
    "check_parallel_pettingzoo",
    "check_parallel_reset_info",
    "check_parallel_step_before_reset",
]

#: Warnings of PettingZoo's API test that every text environment triggers by design.
_TEXT_ENV_WARNINGS: tuple[str, ...] = (
    "Observation is not a NumPy array",
    "Observation space for each agent probably should be",
    "Action space for each agent probably should be",
)
#: Where a multi-agent env keeps its whole state as text (see :func:`~envgym.testing.common.state_text`).
_STATE_ATTRS = ("state_text", "_observe")
#: Termination reasons a run of invalid moves may end with.
_INVALID_RUN_REASONS = frozenset({TerminationReason.INVALID_LIMIT.value, TerminationReason.MAX_TURNS.value})


# ---------------------------------------------------------------------- shared helpers
def _run_pettingzoo(check: str, env_id: str, fn: Callable[[], Any]) -> None:
    """Run a PettingZoo test quietly; its failures and unexpected warnings are contract errors."""
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        try:
            fn()
        except Exception as err:
            raise fail(check, f"{env_id}: PettingZoo's {check} failed: {err!r}") from err
    unexpected = sorted({str(w.message) for w in caught if not any(s in str(w.message) for s in _TEXT_ENV_WARNINGS)})
    if unexpected:
        raise fail(check, f"{env_id}: PettingZoo's {check} warned: {'; '.join(unexpected)}")


def _factory(env: Any, kind: str, make_kwargs: Mapping[str, Any] | None) -> tuple[str, Callable[[], Any]]:
    """(id, factory of fresh instances) for an instance, a zero-argument constructor or a registered id."""
    if isinstance(env, str):
        env_id = env
        kwargs = dict(make_kwargs or {})
        maker = make_aec if kind == "aec" else make_parallel
        return env_id, lambda: maker(env_id, **kwargs)
    if isinstance(env, type) or (callable(env) and not hasattr(env, "possible_agents")):
        name = getattr(env, "__name__", type(env).__name__)
        return name, env
    base = env.unwrapped
    cls = type(base)
    kwargs = dict(getattr(base, "_init_kwargs", {}) or {})
    return str(base), lambda: cls(**kwargs)


def _check_reward(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise fail("reward", f"{where}: reward must be a finite number, got {value!r}.")


def check_agent_step(env: Any, agent: str, obs: Any, reward: Any, term: Any, trunc: Any, info: Any, where: str) -> None:
    """What one agent got from a step keeps the contract: an observation in its space, finite reward, bools, full info.

    Text environments observe a ``str``; environments with other observation spaces (numeric
    views) must give a member of the agent's space.
    """
    space = env.observation_space(agent)
    if isinstance(space, Text):
        if not isinstance(obs, str) or not space.contains(obs):
            raise fail("observe", f"{where}: observation {obs!r:.100} is not a str in the observation space.")
    elif not space.contains(obs):
        raise fail("observe", f"{where}: observation {obs!r:.100} is not in the observation space {space}.")
    _check_reward(reward, where)
    if not isinstance(term, bool) or not isinstance(trunc, bool):
        raise fail("step", f"{where}: terminated/truncated must be bool, got {term!r}, {trunc!r}.")
    check_info(info, where, getattr(env.unwrapped, "reward_components", None))
    if (term or trunc) and info["termination_reason"] is None:
        raise fail("step", f"{where}: {agent} is done but info['termination_reason'] is None.")
    if not (term or trunc) and info["termination_reason"] is not None:
        raise fail("step", f"{where}: termination_reason {info['termination_reason']!r} while {agent} is live.")
    if info["success"] and not term:
        raise fail("step", f"{where}: success=True requires terminated=True.")


def _safe_step(env: Any, action: Any, where: str) -> Any:
    """``env.step(action)``; an exception becomes a contract error naming the step."""
    try:
        return env.step(action)
    except Exception as err:
        raise fail("step", f"{env}: {where}: step({action!r:.80}) raised {err!r}.") from err


def _check_same_spaces(env: Any, env_id: str, agent: str) -> None:
    if env.observation_space(agent) is not env.observation_space(agent) or env.action_space(
        agent
    ) is not env.action_space(agent):
        raise fail("spaces", f"{env_id}: the spaces of {agent} are not the same object on every call.")


def _check_step_before_reset(fresh: Any, action_of: Callable[[Any], Any], env_id: str, report: CheckReport) -> None:
    """``fresh.step(action_of(fresh))`` on a never-reset env must raise ``ResetNeededError``; closes ``fresh``."""
    try:
        fresh.step(action_of(fresh))
    except ResetNeededError:
        report.passed("step_before_reset")
    except Exception as err:
        raise fail("step_before_reset", f"{env_id}: expected ResetNeededError, got {err!r}.") from err
    else:
        raise fail("step_before_reset", f"{env_id}: step() before reset() did not raise.")
    finally:
        fresh.close()


def _check_some_valid(env_id: str, report: CheckReport) -> None:
    """A roll in which no move was valid exercised nothing: the env lists no admissible actions and
    its ``sample_action`` (or action space) proposes only invalid ones."""
    if report.steps and not report.valid_steps:
        raise fail(
            "determinism",
            f"{env_id}: none of the {report.steps} rollout moves was valid; list info['admissible_actions'] "
            "or give the env a sample_action(agent, rng) that proposes valid moves.",
        )


def _check_seeds(seeds: Sequence[int], checker: str) -> None:
    if len(seeds) < 2:
        raise ValueError(f"{checker} needs at least two seeds to compare games, got {list(seeds)!r}.")


# ---------------------------------------------------------------------- AEC
def _aec_rollout(env: Any, seed: int, max_steps: int) -> list[tuple[Any, ...]]:
    """Reset with ``seed`` and play seeded random legal moves (``None`` for dead agents)."""
    rng = random.Random(seed)
    env.reset(seed=seed)
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed + i)
    record: list[tuple[Any, ...]] = []
    for agent in env.agent_iter(max_steps):
        obs, reward, term, trunc, info = env.last()
        action = None if (term or trunc) else roll_action(env, info, rng, agent)
        record.append((agent, obs, reward, term, trunc, info, action))
        _safe_step(env, action, f"seed={seed} step {len(record) - 1} agent={agent}")
    record.append(("end", list(env.agents)))
    return record


def _check_aec_agent_now(env: Any, agent: str, info: Any, where: str) -> None:
    """The contract for ``agent`` as the env stands now (observation, cumulative reward, flags)."""
    check_agent_step(
        env,
        agent,
        env.observe(agent),
        env.unwrapped._cumulative_rewards[agent],
        env.terminations[agent],
        env.truncations[agent],
        info,
        where,
    )


def check_aec_pettingzoo(factory: Callable[[], Any], env_id: str, num_cycles: int, report: CheckReport) -> None:
    """PettingZoo's ``api_test`` and ``seed_test`` (text-specific warnings aside, any warning fails)."""
    fresh = factory()
    try:
        _run_pettingzoo("api_test", env_id, lambda: api_test(fresh, num_cycles=num_cycles))
    finally:
        fresh.close()
    report.passed("pettingzoo.api_test")
    _run_pettingzoo("seed_test", env_id, lambda: seed_test(factory, num_cycles=num_cycles))
    report.passed("pettingzoo.seed_test")


def check_aec_step_before_reset(factory: Callable[[], Any], env_id: str, report: CheckReport) -> None:
    """``step`` before ``reset`` raises a clear :class:`~envgym.errors.ResetNeededError`."""
    _check_step_before_reset(factory(), lambda _: "look", env_id, report)


def check_aec_reset_info(env: Any, env_id: str, seed: int, report: CheckReport) -> None:
    """After ``reset`` every agent has cached spaces and an observation and info keeping the contract."""
    env.reset(seed=seed)
    for agent in env.agents:
        _check_same_spaces(env, env_id, agent)
        _check_aec_agent_now(env, agent, env.infos[agent], f"{env_id} reset(seed={seed}) {agent}")
    report.passed("reset_info")


def check_aec_determinism(
    env: Any, factory: Callable[[], Any], env_id: str, seeds: Sequence[int], max_steps: int, report: CheckReport
) -> None:
    """Seeded rollouts repeat exactly on a twin, keep the contract at every step, finish, and seeds differ."""
    first = []
    for seed in seeds:
        a = _aec_rollout(env, seed, max_steps)
        twin = factory()
        try:
            b = _aec_rollout(twin, seed, max_steps)
        finally:
            twin.close()
        if len(a) != len(b):
            raise fail("determinism", f"{env_id} seed={seed}: rollouts had {len(a)} and {len(b)} steps.")
        for i, (x, y) in enumerate(zip(a, b)):
            if not same_values(x, y):
                raise fail("determinism", f"{env_id} seed={seed}: step {i} differs:\n{x!r:.400}\n{y!r:.400}")
        acted: set[str] = set()
        for i, (agent, obs, reward, term, trunc, info, _action) in enumerate(a[:-1]):
            where = f"{env_id} seed={seed} step {i} agent={agent}"
            check_agent_step(env, agent, obs, reward, term, trunc, info, where)
            report.steps += 1
            # an agent's info tells how its own previous move went
            report.valid_steps += agent in acted and info["action_valid"]
            acted.add(agent)
        if a[-1][1]:
            raise fail("termination", f"{env_id} seed={seed}: {max_steps} random legal moves did not finish the game.")
        first.append((a[0][1], a[0][5]["task"]["id"]))
    if len(set(first)) < 2 and len(seeds) >= 3:
        raise fail("determinism", f"{env_id}: seeds {list(seeds)} all gave the same task and first observation.")
    _check_some_valid(env_id, report)
    report.passed("seeded_determinism")


def check_aec_bad_inputs(env: Any, env_id: str, seed: int, report: CheckReport) -> None:
    """No value of :data:`BAD_ACTIONS` played as a move makes ``step`` raise; an invalid move keeps the state."""
    for i, bad in enumerate(BAD_ACTIONS):
        env.reset(seed=seed)
        agent = env.agent_selection
        before = state_text(env, _STATE_ATTRS)
        try:
            env.step(bad)
        except Exception as err:
            raise fail(
                "fuzz", f"{env_id}: step({bad!r:.60}) raised {err!r}; bad actions must be invalid moves."
            ) from err
        if agent not in env.infos:
            raise fail("fuzz", f"{env_id}: {agent} vanished from infos after the move {bad!r:.60}.")
        info = env.infos[agent]
        _check_aec_agent_now(env, agent, info, f"{env_id} fuzz #{i} action={bad!r:.60}")
        if not info["action_valid"] and before is not None and state_text(env, _STATE_ATTRS) != before:
            raise fail("fuzz", f"{env_id}: the invalid move {bad!r:.60} changed the state.")
    report.passed("bad_input_fuzz")


def check_aec_invalid_run(env: Any, env_id: str, seed: int, max_steps: int, report: CheckReport) -> None:
    """A run of invalid moves ends the game (``invalid_limit`` or ``max_turns``), never runs forever."""
    env.reset(seed=seed)
    reasons: dict[str, Any] = {}
    for agent in env.agent_iter(max_steps):
        _, _, term, trunc, info = env.last()
        if term or trunc:
            reasons[agent] = info["termination_reason"]
        env.step(None if (term or trunc) else "")
    if env.agents:
        raise fail("invalid_run", f"{env_id}: {max_steps} invalid moves did not end the game.")
    if not _INVALID_RUN_REASONS & set(reasons.values()):
        raise fail("invalid_run", f"{env_id}: a run of invalid moves ended with reasons {reasons!r}.")
    report.passed("invalid_run_ends")


def check_aec_env(
    env: Any,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    max_steps: int = 2_000,
    num_cycles: int = 200,
    fuzz: bool = True,
    pettingzoo_checks: bool = True,
    make_kwargs: Mapping[str, Any] | None = None,
) -> CheckReport:
    """Check a PettingZoo AEC text environment against PettingZoo's tests and the envgym contract.

    Args:
        env: an ``AECEnv``, a zero-argument constructor, or an id for :func:`envgym.make_aec`.
        seeds: reset seeds of the determinism checks (at least two).
        max_steps: agent steps per scripted rollout (and bound of the invalid-run check).
        num_cycles: cycles of PettingZoo's ``api_test`` and ``seed_test``.
        fuzz: also play every value of :data:`envgym.testing.BAD_ACTIONS` as a move.
        pettingzoo_checks: run ``pettingzoo.test.api_test`` and ``seed_test`` first.
        make_kwargs: kwargs for ``make_aec`` when ``env`` is an id.

    Returns:
        A :class:`envgym.testing.CheckReport`; raises :class:`envgym.errors.EnvContractError`.
    """
    env_id, factory = _factory(env, "aec", make_kwargs)
    _check_seeds(seeds, "check_aec_env")
    report = CheckReport(env_id)
    if pettingzoo_checks:
        check_aec_pettingzoo(factory, env_id, num_cycles, report)
    check_aec_step_before_reset(factory, env_id, report)
    env = factory()
    check_aec_reset_info(env, env_id, seeds[0], report)
    check_aec_determinism(env, factory, env_id, seeds, max_steps, report)
    if fuzz:
        check_aec_bad_inputs(env, env_id, seeds[0], report)
    check_aec_invalid_run(env, env_id, seeds[0], max_steps, report)
    check_close_twice(env, env_id, report)
    return report


# ---------------------------------------------------------------------- Parallel
def _parallel_actions(env: Any, infos: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    return {agent: roll_action(env, infos.get(agent), rng, agent) for agent in env.agents}


def _parallel_rollout(env: Any, seed: int, max_steps: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    obs, infos = env.reset(seed=seed)
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed + i)
    record: list[tuple[Any, ...]] = [("reset", obs, infos)]
    for _ in range(max_steps):
        if not env.agents:
            break
        actions = _parallel_actions(env, infos, rng)
        obs, rewards, terms, truncs, infos = _safe_step(env, actions, f"seed={seed} step {len(record)}")
        record.append((actions, obs, rewards, terms, truncs, infos))
    record.append(("end", list(env.agents)))
    return record


def _valid_moves(
    env_id: str, seed: int, step: int, before: Mapping[str, Any], actions: Mapping[str, Any], after: Mapping[str, Any]
) -> int:
    """How many agents' actions of one Parallel step were valid; an admissible one must be."""
    valid = 0
    for agent, action in actions.items():
        if after[agent]["action_valid"]:
            valid += 1
        elif isinstance(action, str) and action in (before.get(agent, {}).get("admissible_actions") or ()):
            raise fail(
                "determinism",
                f"{env_id} seed={seed} step {step}: {agent}'s {action!r:.80} was in its admissible_actions "
                "but stepped as invalid.",
            )
    return valid


def _check_parallel_result(env: Any, live: Sequence[str], result: Any, where: str) -> None:
    if not (isinstance(result, tuple) and len(result) == 5 and all(isinstance(d, dict) for d in result)):
        raise fail("step", f"{where}: step must return five dicts, got {result!r:.200}.")
    obs, rewards, terms, truncs, infos = result
    for agent in live:
        for label, d in (
            ("observations", obs),
            ("rewards", rewards),
            ("terminations", terms),
            ("truncations", truncs),
            ("infos", infos),
        ):
            if agent not in d:
                raise fail("step", f"{where}: {label} lacks the live agent {agent!r}.")
        check_agent_step(
            env, agent, obs[agent], rewards[agent], terms[agent], truncs[agent], infos[agent], f"{where} agent={agent}"
        )


def check_parallel_pettingzoo(factory: Callable[[], Any], env_id: str, num_cycles: int, report: CheckReport) -> None:
    """PettingZoo's ``parallel_api_test`` and ``parallel_seed_test``."""
    fresh = factory()
    try:
        _run_pettingzoo("parallel_api_test", env_id, lambda: parallel_api_test(fresh, num_cycles=num_cycles))
    finally:
        fresh.close()
    report.passed("pettingzoo.parallel_api_test")
    _run_pettingzoo("parallel_seed_test", env_id, lambda: parallel_seed_test(factory, num_cycles=num_cycles))
    report.passed("pettingzoo.parallel_seed_test")


def check_parallel_step_before_reset(factory: Callable[[], Any], env_id: str, report: CheckReport) -> None:
    """``step`` before ``reset`` raises a clear :class:`~envgym.errors.ResetNeededError`."""
    _check_step_before_reset(factory(), lambda fresh: dict.fromkeys(fresh.possible_agents, "look"), env_id, report)


def check_parallel_reset_info(env: Any, env_id: str, seed: int, report: CheckReport) -> None:
    """``reset`` gives every agent cached spaces, an observation and an info keeping the contract."""
    obs, infos = env.reset(seed=seed)
    for agent in env.agents:
        _check_same_spaces(env, env_id, agent)
        if agent not in obs or agent not in infos:
            raise fail("reset", f"{env_id}: reset() gave no observation or info for {agent!r}.")
        check_agent_step(env, agent, obs[agent], 0.0, False, False, infos[agent], f"{env_id} reset {agent}")
    report.passed("reset_info")


def check_parallel_determinism(
    env: Any, factory: Callable[[], Any], env_id: str, seeds: Sequence[int], max_steps: int, report: CheckReport
) -> None:
    """Seeded rollouts repeat exactly on a twin, keep the contract at every step, end, and seeds differ."""
    first = []
    for seed in seeds:
        a = _parallel_rollout(env, seed, max_steps)
        twin = factory()
        try:
            b = _parallel_rollout(twin, seed, max_steps)
        finally:
            twin.close()
        if len(a) != len(b):
            raise fail("determinism", f"{env_id} seed={seed}: rollouts had {len(a)} and {len(b)} steps.")
        for i, (x, y) in enumerate(zip(a, b)):
            if not same_values(x, y):
                raise fail("determinism", f"{env_id} seed={seed}: step {i} differs:\n{x!r:.400}\n{y!r:.400}")
        for i, item in enumerate(a[1:-1], start=1):
            actions = item[0]
            _check_parallel_result(env, list(actions), item[1:], f"{env_id} seed={seed} step {i}")
            report.steps += 1
            report.valid_steps += _valid_moves(env_id, seed, i, a[i - 1][-1], actions, item[-1])
        if a[-1][1]:
            raise fail("termination", f"{env_id} seed={seed}: {max_steps} random legal steps did not end the game.")
        first.append((repr(a[0][1]), a[0][2][env.possible_agents[0]]["task"]["id"]))
    if len(set(first)) < 2 and len(seeds) >= 3:
        raise fail("determinism", f"{env_id}: seeds {list(seeds)} all gave the same task and first observation.")
    _check_some_valid(env_id, report)
    report.passed("seeded_determinism")


def check_parallel_bad_inputs(env: Any, env_id: str, seed: int, report: CheckReport) -> None:
    """Every live agent sends the same value of :data:`BAD_ACTIONS` at once; nothing raises or changes."""
    for i, bad in enumerate(BAD_ACTIONS):
        env.reset(seed=seed)
        live = list(env.agents)
        before = state_text(env, _STATE_ATTRS)
        try:
            result = env.step(dict.fromkeys(live, bad))
        except Exception as err:
            raise fail("fuzz", f"{env_id}: step with {bad!r:.60} raised {err!r}; bad actions must be invalid.") from err
        _check_parallel_result(env, live, result, f"{env_id} fuzz #{i} action={bad!r:.60}")
        infos = result[4]
        if (
            all(not infos[a]["action_valid"] for a in live)
            and before is not None
            and state_text(env, _STATE_ATTRS) != before
        ):
            raise fail("fuzz", f"{env_id}: the invalid action {bad!r:.60} changed the state.")
    report.passed("bad_input_fuzz")


def check_parallel_invalid_run(env: Any, env_id: str, seed: int, max_steps: int, report: CheckReport) -> None:
    """Rounds of invalid actions end the game (``invalid_limit`` or ``max_turns``), never run forever."""
    env.reset(seed=seed)
    reasons: dict[str, Any] = {}
    for _ in range(max_steps):
        if not env.agents:
            break
        *_, terms, truncs, infos = env.step(dict.fromkeys(env.agents, ""))
        for agent in terms:
            if terms[agent] or truncs[agent]:
                reasons[agent] = infos[agent]["termination_reason"]
    if env.agents:
        raise fail("invalid_run", f"{env_id}: {max_steps} rounds of invalid actions did not end the game.")
    if not _INVALID_RUN_REASONS & set(reasons.values()):
        raise fail("invalid_run", f"{env_id}: a run of invalid actions ended with reasons {reasons!r}.")
    report.passed("invalid_run_ends")


def check_parallel_env(
    env: Any,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    max_steps: int = 1_000,
    num_cycles: int = 200,
    fuzz: bool = True,
    pettingzoo_checks: bool = True,
    make_kwargs: Mapping[str, Any] | None = None,
) -> CheckReport:
    """Check a PettingZoo Parallel text environment against PettingZoo's tests and the envgym contract.

    Same arguments and checks as :func:`check_aec_env`, with ``parallel_api_test`` and
    ``parallel_seed_test``; every live agent sends a bad action at once in the fuzzing step.
    """
    env_id, factory = _factory(env, "parallel", make_kwargs)
    _check_seeds(seeds, "check_parallel_env")
    report = CheckReport(env_id)
    if pettingzoo_checks:
        check_parallel_pettingzoo(factory, env_id, num_cycles, report)
    check_parallel_step_before_reset(factory, env_id, report)
    env = factory()
    check_parallel_reset_info(env, env_id, seeds[0], report)
    check_parallel_determinism(env, factory, env_id, seeds, max_steps, report)
    if fuzz:
        check_parallel_bad_inputs(env, env_id, seeds[0], report)
    check_parallel_invalid_run(env, env_id, seeds[0], max_steps, report)
    check_close_twice(env, env_id, report)
    return report
