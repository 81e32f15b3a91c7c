"""The served pool (backend ``"remote"``): every slot's env lives in an ``envgym serve`` server.

Slot ``s`` holds one WebSocket session with the server (:class:`envgym.remote.session.Session`),
opened on the slot's first reset (and again after it was lost, or when the slot changes env kind).
A call sends every request first and then reads the answers, so the server steps a whole batch at
the same time, as the process pool's workers do.

Failures follow the pool rules (:mod:`envgym.rollout.pools`): nothing raises for the env's or the
server's sake. A server that cannot be reached, goes away, or does not answer within the message
timeout fails the request with ``EnvFailure(worker_lost=True)`` (kind ``"timeout"`` for a timeout,
else ``"env_error"``); the slot's session is gone, so a later ``step`` without a ``reset`` fails the
same way, and the runner restarts the episode, which opens a new session. The server's own typed
errors (``ENV_CRASHED``, ``STEP_TIMEOUT``, ...) become failures with the server's message.

``want_sample`` asks the server for the env's ``sample_action`` (``"sample": true``), drawn with a
generator seeded from the reset seed as the process and Ray pools seed theirs: a remote run
samples what they sample. ``slot_env`` is always ``None``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from envgym.errors import ConfigError, EnvgymError
from envgym.remote.errors import RemoteError
from envgym.remote.session import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MESSAGE_TIMEOUT_S,
    Session,
    base_urls,
    check_served,
    wire_kwargs,
    wire_number,
)
from envgym.rollout.pools.base import EnvPool
from envgym.rollout.pools.records import EnvFailure, ResetRequest, StepRequest, StepResult
from envgym.serve import codec

__all__ = ["ServedPool"]

#: Server error codes (and the client's own) that mean a call ran out of time.
_TIMEOUT_CODES = frozenset({"TIMEOUT", "STEP_TIMEOUT"})


class ServedPool(EnvPool):
    """Envs served by ``envgym serve`` at ``url``, one session per slot.

    Args:
        env: the environment id, or ``(env_id, env_kwargs)`` pairs (see :class:`EnvPool`); every
            id must be a single-agent id the server serves (checked here, with "did you mean").
        env_kwargs: keyword arguments of every env (plain JSON data: they travel with the reset).
        num_slots: number of slots.
        url: the server's base URL (``ws://127.0.0.1:8000``).
        step_timeout_s: seconds to wait for each answer (``None``: the client's default,
            :data:`~envgym.remote.session.DEFAULT_MESSAGE_TIMEOUT_S`).
        connect_timeout_s: seconds to open a session.

    Raises:
        ConfigError: a bad URL, kwargs that are not plain data, or a Parallel id.
        UnknownRemoteEnvError: an id the server does not serve.
        ServerLostError: the server cannot be reached (nothing to play on).
    """

    backend = "remote"

    def __init__(
        self,
        env: str | Sequence[tuple[str, Mapping[str, Any] | None]],
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        num_slots: int,
        url: str,
        step_timeout_s: float | None = None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> None:
        super().__init__(env, env_kwargs, num_slots)
        base_urls(url)  # a malformed URL fails before anything is asked of the server
        self.url = url
        self._wire_kwargs = [wire_kwargs(kwargs, env_id) for env_id, kwargs in self.envs]
        for env_id, _ in self.envs:
            if check_served(url, env_id, timeout_s=connect_timeout_s) != "single":
                raise ConfigError(
                    f"env pools hold single-agent environments, and the server at {url} serves {env_id!r} as a "
                    "PettingZoo Parallel environment."
                )
        self._options = {
            "connect_timeout_s": connect_timeout_s,
            "message_timeout_s": step_timeout_s if step_timeout_s is not None else DEFAULT_MESSAGE_TIMEOUT_S,
        }
        self._sessions: list[Session | None] = [None] * num_slots
        self._kinds = [0] * num_slots
        # slot -> why its session (and the episode in it) is gone; cleared by a reset.
        self._lost: dict[int, str] = {}
        self._lock = threading.Lock()  # guards close() against calls in flight

    # ------------------------------------------------------------------ the calls
    def reset(self, requests: Sequence[ResetRequest]) -> list[StepResult | EnvFailure]:
        self._check(requests, ResetRequest)
        results: list[Any] = [None] * len(requests)
        sent: list[tuple[int, Session, float]] = []
        for i, r in enumerate(requests):
            self._lost.pop(r.slot, None)
            try:
                session, fresh = self._session(r.slot, r.env)
                data: dict[str, Any] = {}
                if r.seed is not None:
                    data["seed"] = r.seed
                if r.options:
                    data["options"] = codec.encode_obs(dict(r.options))
                if fresh and self._wire_kwargs[r.env]:
                    data["env_kwargs"] = self._wire_kwargs[r.env]
                if r.want_sample:
                    data["sample"] = True
                t0 = time.perf_counter()
                session.send({"type": "reset", "data": data})
            except (RemoteError, codec.CodecError) as err:
                results[i] = self._failure(r.slot, err)
                continue
            sent.append((i, session, t0))
        self._collect("reset", requests, sent, results)
        return results

    def step(self, requests: Sequence[StepRequest]) -> list[StepResult | EnvFailure]:
        self._check(requests, StepRequest)
        results: list[Any] = [None] * len(requests)
        sent: list[tuple[int, Session, float]] = []
        for i, r in enumerate(requests):
            session = self._sessions[r.slot]
            if session is None or session.closed:
                why = self._lost.get(r.slot, "it was never reset")
                results[i] = EnvFailure(
                    "env_error", f"slot {r.slot} has no live session ({why}); reset the slot.", True
                )
                continue
            try:
                action = codec.encode_action(r.action)
            except codec.CodecError:
                action = repr(r.action)  # text envs judge any value an invalid step (as in-process)
            t0 = time.perf_counter()
            try:
                data = {"action": action, "sample": True} if r.want_sample else {"action": action}
                session.send({"type": "step", "data": data})
            except RemoteError as err:
                results[i] = self._failure(r.slot, err)
                continue
            sent.append((i, session, t0))
        self._collect("step", requests, sent, results)
        return results

    def _collect(
        self, kind: str, requests: Sequence[Any], sent: list[tuple[int, Session, float]], results: list[Any]
    ) -> None:
        """Read the answer of every sent request into ``results`` (then a frame where one is asked for)."""
        framed: list[tuple[int, Session]] = []
        for i, session, t0 in sent:
            r = requests[i]
            env_id = self.envs[self._kinds[r.slot]][0]
            try:
                data = session.receive("observation", f"{kind} {env_id} (slot {r.slot})")
                env_s = time.perf_counter() - t0
                results[i] = _result(data, kind, env_s)
            except (RemoteError, codec.CodecError, RecursionError) as err:
                results[i] = self._failure(r.slot, err)
                continue
            if r.want_frame and self.envs[self._kinds[r.slot]][1].get("render_mode") == "rgb_array":
                framed.append((i, session))
        for i, session in framed:
            results[i].frame = _frame(session)

    def _session(self, slot: int, kind: int) -> tuple[Session, bool]:
        """The slot's live session for env kind ``kind`` (a new one when it has none, it was lost,
        or it plays another kind), and whether it is new (its first reset carries the kwargs)."""
        session = self._sessions[slot]
        if session is not None and not session.closed and self._kinds[slot] == kind:
            return session, False
        if session is not None:
            session.close()
        self._sessions[slot] = None
        self._kinds[slot] = kind
        if self._closed:
            raise EnvgymError(f"{self!r} was closed during the call.")
        session = Session(self.url, self.envs[kind][0], **self._options)
        self._sessions[slot] = session
        return session, True

    def _failure(self, slot: int, err: Exception) -> EnvFailure:
        session = self._sessions[slot]
        lost = session is None or session.closed
        if lost:
            self._lost[slot] = str(err)
        code = getattr(err, "code", "")
        failure_kind = "timeout" if code in _TIMEOUT_CODES else "env_error"
        return EnvFailure(failure_kind, f"{type(err).__name__}: {err}", lost)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions, self._sessions = self._sessions, [None] * self.num_slots
        for session in sessions:
            if session is not None:
                session.close()

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", url={self.url!r})"


def _result(data: Any, kind: str, env_s: float) -> StepResult:
    payload = data.get("observation") if isinstance(data, dict) else None
    if not isinstance(payload, dict):
        raise RemoteError(f"the server's {kind} answer has no observation: {data!r:.200}.", code="PROTOCOL_ERROR")
    observation = codec.decode_obs(payload.get("obs"))
    info = codec.decode_info(payload.get("info") or {})
    sampled = payload.get("sampled_action")
    sampled = sampled if isinstance(sampled, str) else None
    if kind == "reset":
        return StepResult(observation, 0.0, False, False, info, env_s, sampled)
    reward = wire_number(data.get("reward"), kind)
    ended = (bool(payload.get("terminated")), bool(payload.get("truncated")))
    return StepResult(observation, reward, *ended, info, env_s, sampled)


def _frame(session: Session) -> Any:
    """The served env's ``rgb_array`` render, or ``None`` (a frame that fails costs the frame only)."""
    try:
        data = session.request({"type": "render"}, "render", "render")
    except RemoteError:
        return None
    frame = codec.decode_obs(data.get("render", data.get("frame")) if isinstance(data, dict) else data)
    shape = getattr(frame, "shape", None)
    if getattr(frame, "dtype", None) != "uint8" or shape is None or len(shape) != 3 or shape[2] != 3:
        return None
    return frame
