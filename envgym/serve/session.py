"""One client session of ``envgym serve``: its env, its episode, and the messages it answers.

A :class:`Session` turns a decoded message (``{"type": "reset" | "step" | "state" | "render",
"data": {...}}``) into the reply of docs/serving.md, or raises :class:`ServeError` with the
protocol's error code. It knows nothing of sockets: the ASGI app (:mod:`envgym.serve.app`) feeds
it WebSocket frames and HTTP bodies alike. Its env is built on the first ``reset`` (and rebuilt
when a ``reset`` names another id or other kwargs), and every call to it runs on the session's
own :class:`~envgym.serve._worker.Worker` thread under the per-call time limit.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import math
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from envgym.errors import ConfigError, EnvgymError, InvalidKwargsError, NotAvailableError, suggest
from envgym.serve._worker import Worker
from envgym.serve.codec import CodecError, decode_action, encode_info, encode_obs

__all__ = ["ErrorCode", "ServeError", "ServedEnv", "Session"]

log = logging.getLogger("envgym.serve")


class ErrorCode(enum.StrEnum):
    """The ``code`` of an error message (docs/serving.md)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    UNKNOWN_ENV = "UNKNOWN_ENV"
    BAD_KWARGS = "BAD_KWARGS"
    BAD_ACTION = "BAD_ACTION"
    NOT_RESET = "NOT_RESET"
    ENV_CRASHED = "ENV_CRASHED"
    STEP_TIMEOUT = "STEP_TIMEOUT"
    IDLE_TIMEOUT = "IDLE_TIMEOUT"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    MESSAGE_TOO_BIG = "MESSAGE_TOO_BIG"
    SERVER_STOPPING = "SERVER_STOPPING"


#: Codes after which the server closes the session.
CLOSING = frozenset(
    {
        ErrorCode.STEP_TIMEOUT,
        ErrorCode.IDLE_TIMEOUT,
        ErrorCode.CAPACITY_REACHED,
        ErrorCode.MESSAGE_TOO_BIG,
        ErrorCode.SERVER_STOPPING,
    }
)
_RETRYABLE = frozenset(
    {ErrorCode.ENV_CRASHED, ErrorCode.STEP_TIMEOUT, ErrorCode.CAPACITY_REACHED, ErrorCode.SERVER_STOPPING}
)
#: Longest exception text an ENV_CRASHED message quotes.
_CRASH_TEXT = 500


class ServeError(EnvgymError):
    """An error reply: ``code`` from :class:`ErrorCode`; ``retryable`` defaults per code."""

    def __init__(self, code: ErrorCode, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = code in _RETRYABLE if retryable is None else retryable

    @property
    def closes(self) -> bool:
        return self.code in CLOSING

    def frame(self) -> dict[str, Any]:
        return {"type": "error", "data": {"message": str(self), "code": str(self.code), "retryable": self.retryable}}


@dataclass(frozen=True, slots=True)
class ServedEnv:
    """One id a server serves: how to build it and which kwargs a client may pass.

    Attributes:
        env_id: the registered id.
        kind: ``"single"`` (a Gymnasium env) or ``"parallel"`` (a PettingZoo ParallelEnv).
        make: builds the env from keyword arguments (``envgym.make`` / ``envgym.make_parallel``).
        kwargs: the operator's kwargs (``--kwargs``), under the client's.
        params: the keyword arguments the env takes (``None``: any, its constructor checks them).
        lock_kwargs: refuse every client ``env_kwargs`` (``--lock-kwargs``).
    """

    env_id: str
    kind: str
    make: Callable[..., Any]
    kwargs: Mapping[str, Any]
    params: frozenset[str] | None
    lock_kwargs: bool = False

    def check_kwargs(self, given: Any) -> dict[str, Any]:
        """The kwargs to build with: the operator's, then the client's ``given`` (checked here, before
        any env is built)."""
        if given is None:
            return dict(self.kwargs)
        if not isinstance(given, dict):
            raise ServeError(ErrorCode.VALIDATION_ERROR, f"'env_kwargs' must be an object, got {_short(given)}.")
        if given and self.lock_kwargs:
            raise ServeError(
                ErrorCode.BAD_KWARGS,
                f"this server serves {self.env_id} with fixed arguments (--lock-kwargs): send no 'env_kwargs'.",
            )
        if self.params is not None:
            unknown = sorted(set(given) - self.params)
            if unknown:
                raise ServeError(
                    ErrorCode.BAD_KWARGS,
                    f"{self.env_id} got unknown keyword argument(s) {', '.join(map(repr, unknown))}."
                    f"{suggest(unknown[0], self.params)} Valid arguments: {', '.join(sorted(self.params))}.",
                )
        return {**self.kwargs, **given}


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _crash(where: str, err: BaseException) -> ServeError:
    text = f"{type(err).__name__}: {err}"
    if len(text) > _CRASH_TEXT:
        text = text[: _CRASH_TEXT - 3] + "..."
    retryable = not isinstance(err, NotAvailableError)  # a missing dependency stays missing
    return ServeError(ErrorCode.ENV_CRASHED, f"the environment raised in {where}: {text}", retryable=retryable)


def _number(value: Any) -> Any:
    value = float(value)
    return value if math.isfinite(value) else {"__float__": str(value)}


_RESET_FIELDS = ("seed", "options", "env_id", "env_kwargs", "episode_id", "sample")


class Session:
    """The state of one client: its env (built lazily), its episode, its worker thread.

    Args:
        served: the ids the server serves, by id.
        bound: the id the address named (``/<id>/ws``), or ``None`` for ``/ws``.
        default: the id a session at ``/ws`` plays until a ``reset`` names another.
        step_timeout: seconds a call to the env may take (``reset``, ``step``, building it).
        on_released: called (on the worker thread, or at once when the session never built an
            env) once the session's env is closed and its thread gone: the server frees its slot.
    """

    def __init__(
        self,
        served: Mapping[str, ServedEnv],
        *,
        bound: str | None,
        default: str,
        step_timeout: float,
        on_released: Callable[[], None],
    ) -> None:
        self._served = served
        self._bound = bound
        self.env_id = bound or default
        self._step_timeout = step_timeout
        self._on_released = on_released
        self._worker: Worker | None = None
        self._env: Any = None  # the env the event loop may use (None: build one at the next reset)
        self._handle: Any = None  # the env the worker thread owns (see _build_now / _close_now)
        self._built_with: dict[str, Any] | None = None
        self.episode_id: str | None = None
        self.step_count = 0
        self.seed: int | None = None
        self.done = False
        self._in_episode = False
        # "sample": true asks for the env's sample_action(rng) in the reply, rng seeded from the
        # reset seed as envgym's worker pools seed it (so a remote run samples what they sample).
        self._want_sample = False
        self._sample_rng: random.Random | None = None
        self.busy = False
        self.closed = False
        self.last_active = time.monotonic()

    # -- messages -------------------------------------------------------------------------------
    async def handle(self, message: Any) -> dict[str, Any]:
        """The reply to one decoded message; raises :class:`ServeError` for an error reply."""
        if not isinstance(message, dict):
            raise ServeError(ErrorCode.VALIDATION_ERROR, f"a message must be a JSON object, got {_short(message)}.")
        kind = message.get("type")
        if not isinstance(kind, str):
            raise ServeError(
                ErrorCode.VALIDATION_ERROR, f"a message needs a string 'type', got {_short(message.get('type'))}."
            )
        unknown = set(message) - {"type", "data"}
        if unknown:
            raise ServeError(
                ErrorCode.VALIDATION_ERROR,
                f"unknown field(s) {', '.join(map(repr, sorted(unknown)))} in a message: expected 'type' and 'data'.",
            )
        data = message.get("data", {})
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ServeError(ErrorCode.VALIDATION_ERROR, f"'data' must be an object, got {_short(data)}.")
        if kind == "step":
            return await self.step(data)
        if kind == "reset":
            return await self.reset(data)
        if kind == "state":
            return {"type": "state", "data": self.state()}
        if kind == "render":
            return await self.render()
        raise ServeError(
            ErrorCode.UNKNOWN_TYPE,
            f"unknown message type {kind!r}.{suggest(kind, _TYPES)} Expected one of: {', '.join(_TYPES)}.",
        )

    def state(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "episode_id": self.episode_id,
            "step_count": self.step_count,
            "seed": self.seed,
            "done": self.done,
        }

    async def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(data) - set(_RESET_FIELDS))
        if unknown:
            raise ServeError(
                ErrorCode.VALIDATION_ERROR,
                f"unknown reset field {unknown[0]!r}.{suggest(unknown[0], _RESET_FIELDS)} "
                f"Expected: {', '.join(_RESET_FIELDS)}.",
            )
        seed = data.get("seed")
        if seed is not None and (type(seed) is not int or seed < 0):
            raise ServeError(ErrorCode.VALIDATION_ERROR, f"'seed' must be a non-negative integer, got {_short(seed)}.")
        options = data.get("options")
        if options is not None and not isinstance(options, dict):
            raise ServeError(ErrorCode.VALIDATION_ERROR, f"'options' must be an object, got {_short(options)}.")
        episode_id = data.get("episode_id")
        if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > 255):
            raise ServeError(
                ErrorCode.VALIDATION_ERROR,
                f"'episode_id' must be a string of at most 255 characters, got {_short(episode_id)}.",
            )
        env_id = data.get("env_id")
        if env_id is None:
            env_id = self.env_id
        elif not isinstance(env_id, str):
            raise ServeError(ErrorCode.VALIDATION_ERROR, f"'env_id' must be a string, got {_short(env_id)}.")
        served = self._served.get(env_id)
        if served is None:
            raise ServeError(
                ErrorCode.UNKNOWN_ENV,
                f"this server does not serve {env_id!r}.{suggest(env_id, self._served)} "
                f"Served: {', '.join(self._served)}.",
            )
        if self._bound is not None and env_id != self._bound:
            raise ServeError(
                ErrorCode.VALIDATION_ERROR,
                f"this session plays {self._bound} (its address names it): connect to /{env_id}/ws, or to /ws "
                "to choose the id in 'reset'.",
            )
        given = data.get("env_kwargs")
        kwargs = served.check_kwargs(given)
        if self._env is None or env_id != self.env_id or (given is not None and kwargs != self._built_with):
            self._close_env()
            self.env_id = env_id
            await self._build(served, kwargs)
        self._in_episode = False
        self.done = False
        self.seed = seed
        self._want_sample, self._sample_rng = data.get("sample") is True, None
        self.episode_id = episode_id or uuid.uuid4().hex
        self.step_count = 0
        reply = await self._call(self._reset_env, seed, options, where="reset")
        self._in_episode = not self.done
        return reply

    async def step(self, data: dict[str, Any]) -> dict[str, Any]:
        if self._env is None or not self._in_episode:
            why = "the episode has ended" if self.done else "no episode is running"
            raise ServeError(ErrorCode.NOT_RESET, f"step before reset: {why}; send a 'reset' first.")
        served = self._served[self.env_id]
        key = "actions" if served.kind == "parallel" else "action"
        self._want_sample = data.get("sample") is True
        if set(data) - {"sample"} != {key}:
            raise ServeError(
                ErrorCode.VALIDATION_ERROR,
                f"a step of {self.env_id} takes {{{key!r}: ...}}, got the field(s) {sorted(data)}.",
            )
        if served.kind == "parallel":
            action = self._decode_joint(data[key])
        else:
            try:
                action = decode_action(data[key], self._env.action_space)
            except (CodecError, RecursionError) as err:
                raise ServeError(ErrorCode.BAD_ACTION, f"cannot decode the action: {err}") from None
        return await self._call(self._step_env, action, where="step")

    async def render(self) -> dict[str, Any]:
        if self._env is None:
            raise ServeError(ErrorCode.NOT_RESET, "render before reset: send a 'reset' first.")
        return await self._call(self._render_env, where="render")

    # -- the env, on the worker thread ------------------------------------------------------------
    async def _build(self, served: ServedEnv, kwargs: dict[str, Any]) -> None:
        if self._worker is None:
            self._worker = Worker(f"envgym-serve-{uuid.uuid4().hex[:8]}", on_exit=self._released)
        future = self._worker.submit(self._build_now, served.make, kwargs)
        try:
            self._env = await self._wait(future, "building the env")
        except ServeError:
            raise
        except (InvalidKwargsError, ConfigError, TypeError, ValueError) as err:
            raise ServeError(ErrorCode.BAD_KWARGS, f"{served.env_id} refused its arguments: {err}") from None
        except Exception as err:  # noqa: BLE001 - any failure of the env is its error reply
            raise _crash("its constructor", err) from None
        self._built_with = kwargs

    async def _call(self, fn: Callable[..., dict[str, Any]], *args: Any, where: str) -> dict[str, Any]:
        assert self._worker is not None
        try:
            return await self._wait(self._worker.submit(fn, self._env, *args), where)
        except ServeError:
            raise
        except Exception as err:  # noqa: BLE001 - any failure of the env is its error reply
            self._in_episode = False
            self._close_env()  # the next reset rebuilds it
            raise _crash(where, err) from None

    async def _wait(self, future: asyncio.Future[Any], where: str) -> Any:
        # One timer on the call's own future (lighter than asyncio.wait_for's wrapper per step): at
        # the limit the future fails here, and the worker's late result is dropped.
        timer = asyncio.get_running_loop().call_later(self._step_timeout, _expire, future)
        try:
            return await future
        except _Expired:
            raise ServeError(
                ErrorCode.STEP_TIMEOUT,
                f"{where} ran past the server's limit of {self._step_timeout:g} s: the session is closed.",
            ) from None
        finally:
            timer.cancel()

    def _reset_env(self, env: Any, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
        served = self._served[self.env_id]
        if served.kind == "parallel":
            obs, infos = env.reset(seed=seed, options=options)
            return self._joint_reply(env, obs, {a: None for a in obs}, {}, {}, infos, reset=True)
        obs, info = env.reset(seed=seed, options=options)
        return self._sampled(env, self._reply(obs, None, False, False, info))

    def _step_env(self, env: Any, action: Any) -> dict[str, Any]:
        self.step_count += 1
        if self._served[self.env_id].kind == "parallel":
            obs, rewards, terminations, truncations, infos = env.step(action)
            return self._joint_reply(env, obs, rewards, terminations, truncations, infos, reset=False)
        obs, reward, terminated, truncated, info = env.step(action)
        return self._sampled(env, self._reply(obs, reward, bool(terminated), bool(truncated), info))

    def _sampled(self, env: Any, reply: dict[str, Any]) -> dict[str, Any]:
        """``reply`` with the ``sampled_action`` a ``"sample": true`` message asked for (single-agent)."""
        sampler = getattr(env.unwrapped, "sample_action", None)
        if self._want_sample and sampler is not None and not reply["data"]["done"]:
            if self._sample_rng is None:
                self._sample_rng = random.Random(None if self.seed is None else f"envgym.pool.sample:{self.seed}")
            try:
                reply["data"]["observation"]["sampled_action"] = str(sampler(self._sample_rng))
            except Exception:  # a failed sample costs the sample only
                log.warning("%s: sample_action raised; no sampled action this turn", self.env_id, exc_info=True)
        return reply

    def _render_env(self, env: Any) -> dict[str, Any]:
        return {"type": "render", "data": {"render": encode_obs(env.render())}}

    def _reply(self, obs: Any, reward: Any, terminated: bool, truncated: bool, info: Any) -> dict[str, Any]:
        done = terminated or truncated
        if done:
            self._in_episode = False
            self.done = True
        return {
            "type": "observation",
            "data": {
                "observation": {
                    "obs": encode_obs(obs),
                    "info": encode_info(info),
                    "terminated": terminated,
                    "truncated": truncated,
                    "env_id": self.env_id,
                    "episode_id": self.episode_id,
                    "step": self.step_count,
                },
                "reward": None if reward is None else _number(reward),
                "done": done,
            },
        }

    def _joint_reply(
        self,
        env: Any,
        obs: Mapping[str, Any],
        rewards: Mapping[str, Any],
        terminations: Mapping[str, Any],
        truncations: Mapping[str, Any],
        infos: Mapping[str, Any],
        *,
        reset: bool,
    ) -> dict[str, Any]:
        agents = list(env.agents)
        done = not agents
        if done:
            self._in_episode = False
            self.done = True
        return {
            "type": "observation",
            "data": {
                "observation": {
                    "obs": {str(a): encode_obs(o) for a, o in obs.items()},
                    "rewards": None if reset else {str(a): _number(r) for a, r in rewards.items()},
                    "terminations": {str(a): bool(t) for a, t in terminations.items()},
                    "truncations": {str(a): bool(t) for a, t in truncations.items()},
                    "infos": {str(a): encode_info(i) for a, i in infos.items()},
                    "agents": [str(a) for a in agents],
                    "env_id": self.env_id,
                    "episode_id": self.episode_id,
                    "step": self.step_count,
                },
                "reward": None,
                "done": done,
            },
        }

    def _decode_joint(self, actions: Any) -> dict[str, Any]:
        if not isinstance(actions, dict):
            raise ServeError(
                ErrorCode.BAD_ACTION, f"'actions' must be an object keyed by agent, got {_short(actions)}."
            )
        live = [str(a) for a in self._env.agents]
        unknown = sorted(set(actions) - set(live))
        if unknown:
            raise ServeError(
                ErrorCode.BAD_ACTION,
                f"no live agent {unknown[0]!r}.{suggest(unknown[0], live)} Live agents: {', '.join(live)}.",
            )
        missing = [a for a in live if a not in actions]
        if missing:
            raise ServeError(ErrorCode.BAD_ACTION, f"every live agent acts each step: missing {', '.join(missing)}.")
        by_name = {str(a): a for a in self._env.agents}
        decoded = {}
        for name, value in actions.items():
            agent = by_name[name]
            try:
                decoded[agent] = decode_action(value, self._env.action_space(agent))
            except (CodecError, RecursionError) as err:
                raise ServeError(ErrorCode.BAD_ACTION, f"cannot decode the action of {name}: {err}") from None
        return decoded

    # -- the end ----------------------------------------------------------------------------------
    def _close_env(self) -> None:
        """Make the env unusable here and queue its ``close`` on its thread, after any call still
        running there (a build that timed out included: it is closed once it is made)."""
        self._env, self._built_with = None, None
        if self._worker is not None:
            self._worker.post(self._close_now)

    # Only these two touch ``_handle``, and only on the worker thread: the env is closed exactly once.
    def _build_now(self, make: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        self._close_now()
        self._handle = make(**kwargs)
        return self._handle

    def _close_now(self) -> None:
        env, self._handle = self._handle, None
        if env is not None:
            _close_quietly(env)

    def close(self) -> None:
        """End the session: close its env (on its thread, after any call still running) and stop
        the thread. Idempotent; returns at once."""
        if self.closed:
            return
        self.closed = True
        self._in_episode = False
        self._close_env()
        if self._worker is not None:
            self._worker.stop()
        else:
            self._released()

    @property
    def worker(self) -> Worker | None:
        return self._worker

    def _released(self) -> None:
        self._on_released()


_TYPES = ("reset", "step", "state", "render", "close")


class _Expired(Exception):
    """A call ran past the step limit (set on its future by the timer)."""


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(_Expired())


def _close_quietly(env: Any) -> None:
    try:
        env.close()
    except Exception:  # the session is gone either way; the operator sees why in the log
        log.exception("closing an environment raised")


def accepted_params(cls: Any, *, single: bool) -> frozenset[str] | None:
    """The keyword arguments an env class takes, or ``None`` when it takes any (``**kwargs`` without
    envgym's own check): a client's ``env_kwargs`` are checked against them before a build."""
    params = getattr(cls, "_init_params", None)
    if params is None:
        try:
            signature = inspect.signature(cls)
        except (TypeError, ValueError):
            return None
        if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            return None
        params = {p.name for p in signature.parameters.values() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    extra = {"reward_wrappers"} if single else set()
    return frozenset(params) | extra
