"""The envs of some slots, wherever they live: in this process, a worker process or a Ray actor."""

from __future__ import annotations

import logging
import pickle
import random
import sys
import time
import traceback as traceback_module
from collections.abc import Mapping, Sequence
from typing import Any

from envgym import registration
from envgym.errors import ConfigError, UnknownEnvError
from envgym.rollout.pools.records import EnvFailure, StepResult, describe

logger = logging.getLogger("envgym.rollout.pools")

__all__ = ["EnvKey", "SlotHost", "env_list", "host_blob", "picklable"]


#: One kind of environment a pool can hold: ``(env_id, env_kwargs)``.
EnvKey = tuple[str, dict[str, Any]]


def env_list(
    env: str | Sequence[tuple[str, Mapping[str, Any] | None]], env_kwargs: Mapping[str, Any] | None
) -> list[EnvKey]:
    """The pool's env kinds from :func:`make_pool`'s first two arguments.

    ``env`` is one env id (with ``env_kwargs``), or a sequence of ``(env_id, env_kwargs)`` pairs
    (then ``env_kwargs`` must be ``None``): a :class:`ResetRequest` picks one by index (``env``).
    """
    if isinstance(env, str):
        return [(env, dict(env_kwargs or {}))]
    if env_kwargs is not None:
        raise ConfigError("give env_kwargs inside each (env_id, env_kwargs) pair when the pool holds several envs.")
    kinds: list[EnvKey] = []
    for item in env:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise ConfigError(f"each env of a pool must be an (env_id, env_kwargs) pair, got {item!r}.")
        kinds.append((item[0], dict(item[1] or {})))
    if not kinds:
        raise ConfigError("a pool needs at least one env: give an env id or a non-empty list of (env_id, env_kwargs).")
    return kinds


class SlotHost:
    """The envs of some slots, wherever they live (this process, a worker, a Ray actor).

    Envs are made on a slot's first use; an env that raises is closed and dropped, so the next
    reset of that slot makes a fresh one. A pool may hold several env kinds (``envs``): a reset
    names the kind, and a slot whose env is of another kind closes it and makes the named one.
    """

    __slots__ = ("_envs", "_kinds", "_rngs", "_seeds", "envs")

    def __init__(self, envs: Sequence[EnvKey]) -> None:
        self.envs = [(env_id, dict(kwargs)) for env_id, kwargs in envs]
        self._envs: dict[int, Any] = {}
        self._kinds: dict[int, int] = {}  # slot -> index into envs of its current env
        # Per-slot stream for want_sample: seeded from the reset seed so every backend samples
        # the same actions for the same episode.
        self._seeds: dict[int, int | None] = {}
        self._rngs: dict[int, random.Random] = {}

    @classmethod
    def from_blob(cls, blob: bytes) -> SlotHost:
        """Build a host in a worker from :func:`host_blob` bytes (registers the specs if needed)."""
        paths, payload = pickle.loads(blob)
        for path in paths:
            # The parent's import paths (a tests folder, a project folder) may be missing here: a
            # fork server started earlier, a Ray worker. Appended, so they never shadow the
            # worker's own modules; before the payload is opened, since env_kwargs may need them.
            if path not in sys.path:
                sys.path.append(path)
        kinds, env_specs = pickle.loads(payload)
        registration.register_envs()
        for env_spec in env_specs:
            # Ids registered at run time in the parent (plugins, tests) are unknown to a fresh
            # interpreter: the parent ships the spec, whose entry point is a string.
            try:
                registration.spec(env_spec.id)
            except UnknownEnvError:
                registration.register(env_spec)
            env_spec.load()  # import the env's module now, not inside the first timed call
        return cls(kinds)

    def get(self, slot: int) -> Any | None:
        return self._envs.get(slot)

    def drop(self, slot: int) -> None:
        """Close and forget the env of ``slot`` (the next use makes a fresh one)."""
        env = self._envs.pop(slot, None)
        self._rngs.pop(slot, None)
        if env is not None:
            try:
                env.close()
            except Exception:
                logger.debug("closing the env of slot %d failed", slot, exc_info=True)

    def _env_id(self, slot: int) -> str:
        return self.envs[self._kinds.get(slot, 0)][0]

    def _failure(self, slot: int, err: Exception) -> EnvFailure:
        logger.debug("env %s slot %d raised", self._env_id(slot), slot, exc_info=err)
        self.drop(slot)
        return EnvFailure("env_error", describe(err), False, "".join(traceback_module.format_exception(err)))

    def _sample(self, slot: int, env: Any) -> str | None:
        sampler = getattr(env.unwrapped, "sample_action", None)
        if sampler is None:
            return None
        rng = self._rngs.get(slot)
        if rng is None:
            seed = self._seeds.get(slot)
            rng = self._rngs[slot] = random.Random(None if seed is None else f"envgym.pool.sample:{seed}")
        try:
            return str(sampler(rng))
        except Exception:
            logger.warning("%s: sample_action raised; no sampled action this turn", self._env_id(slot), exc_info=True)
            return None

    def _frame(self, slot: int, env: Any) -> Any:
        """``env.render()`` when the env renders ``rgb_array`` frames (an ``H x W x 3`` uint8
        array), else ``None``; a render that fails or returns something else costs the frame only."""
        if getattr(env, "render_mode", None) != "rgb_array":
            return None
        try:
            frame = env.render()
        except Exception:
            logger.warning("%s: render() raised; no screenshot this turn", self._env_id(slot), exc_info=True)
            return None
        shape = getattr(frame, "shape", None)
        if getattr(frame, "dtype", None) != "uint8" or shape is None or len(shape) != 3 or shape[2] != 3:
            return None
        return frame

    def _env(self, slot: int) -> Any:
        env = self._envs.get(slot)
        if env is None:
            env_id, kwargs = self.envs[self._kinds.get(slot, 0)]
            env = self._envs[slot] = registration.make(env_id, **kwargs)
        return env

    def reset(
        self,
        slot: int,
        seed: int | None,
        options: dict[str, Any] | None,
        want_sample: bool,
        kind: int = 0,
        want_frame: bool = False,
    ) -> Any:
        try:
            if self._kinds.get(slot, 0) != kind:
                self.drop(slot)  # another env kind: this slot's env makes way for the named one
            self._kinds[slot] = kind
            env = self._env(slot)
            t0 = time.perf_counter()
            observation, info = env.reset(seed=seed, options=options)
            env_s = time.perf_counter() - t0
        except Exception as err:  # noqa: BLE001 - env errors become results, never raise
            return self._failure(slot, err)
        self._seeds[slot] = seed
        self._rngs.pop(slot, None)
        sampled = self._sample(slot, env) if want_sample else None
        frame = self._frame(slot, env) if want_frame else None
        return StepResult(observation, 0.0, False, False, info, env_s, sampled, frame)

    def step(self, slot: int, action: str, want_sample: bool, want_frame: bool = False) -> Any:
        try:
            env = self._env(slot)
            t0 = time.perf_counter()
            observation, reward, terminated, truncated, info = env.step(action)
            env_s = time.perf_counter() - t0
        except Exception as err:  # noqa: BLE001 - env errors become results, never raise
            return self._failure(slot, err)
        sampled = self._sample(slot, env) if want_sample and not (terminated or truncated) else None
        frame = self._frame(slot, env) if want_frame else None
        return StepResult(observation, float(reward), bool(terminated), bool(truncated), info, env_s, sampled, frame)

    def handle(self, kind: str, requests: Sequence[Any]) -> list[Any]:
        if kind == "step":
            return [self.step(r.slot, r.action, r.want_sample, r.want_frame) for r in requests]
        return [self.reset(r.slot, r.seed, r.options, r.want_sample, r.env, r.want_frame) for r in requests]

    def close(self) -> None:
        for slot in list(self._envs):
            self.drop(slot)


def host_blob(envs: Sequence[EnvKey]) -> bytes:
    """Pickle what a worker needs to build its host; raise ConfigError when it does not pickle."""
    env_specs = []
    for env_id, _ in envs:
        env_spec = registration.spec(env_id)
        if env_spec not in env_specs:
            env_specs.append(env_spec)
    try:
        payload = pickle.dumps((list(envs), env_specs), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as err:
        shown = envs[0][1] if len(envs) == 1 else [kwargs for _, kwargs in envs]
        raise ConfigError(
            f"env_kwargs must be picklable to send them to pool workers, got {shown!r} "
            f"({describe(err)}). Define callables such as a reward rubric at module level (not as a lambda "
            f"or a closure), or use backend='inproc'."
        ) from err
    # Two layers: the paths unpickle with builtins alone and are applied before the payload.
    return pickle.dumps(([p for p in sys.path if isinstance(p, str) and p], payload))


def picklable(results: list[Any], requests: Sequence[Any], host: SlotHost) -> list[Any]:
    """``results`` with each one that does not pickle replaced by an ``env_error`` failure."""
    out = []
    for result, request in zip(results, requests):
        try:
            pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:  # noqa: BLE001
            host.drop(request.slot)
            result = EnvFailure(
                "env_error",
                f"the env's result cannot be sent between processes ({describe(err)}): keep observation and info "
                f"picklable, or use backend='inproc'.",
            )
        out.append(result)
    return out
