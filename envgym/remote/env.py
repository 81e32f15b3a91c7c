"""Served environments as local ones: :class:`RemoteEnv` (a ``gymnasium.Env``) and
:class:`RemoteParallelEnv` (a PettingZoo ``ParallelEnv``), each one WebSocket session.

Spaces, metadata and reward components are rebuilt from the server's ``GET /<id>/spec``; every
``reset``/``step`` is one round trip. The env's own keyword arguments travel with the first reset
of a session (``env_kwargs``), so the served env is built with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

import gymnasium
from gymnasium.spaces import Space, Text
from pettingzoo.utils.env import ParallelEnv

from envgym.errors import ConfigError
from envgym.remote.errors import RemoteError, RemoteResetNeededError, ServerLostError
from envgym.remote.session import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MESSAGE_TIMEOUT_S,
    Session,
    check_served,
    fetch_json,
    quote_id,
    wire_kwargs,
    wire_number,
)
from envgym.serve import codec

__all__ = ["REMOTE_ID", "RemoteEnv", "RemoteParallelEnv", "make", "served_spec"]

#: The Gymnasium id of :class:`RemoteEnv`: ``gymnasium.make(REMOTE_ID, url=..., env_id=...)``.
REMOTE_ID = "envgym/Remote-v0"
_KINDS = {"single": "single", "gymnasium": "single", "parallel": "parallel"}


def served_spec(url: str, env_id: str, *, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> dict[str, Any]:
    """The server's spec of ``env_id`` (``GET /<id>/spec``): kind, spaces, agents, reward components.

    Raises:
        UnknownRemoteEnvError: the server does not serve ``env_id`` (with the closest served ids).
        ServerLostError: the server cannot be reached.
    """
    if not isinstance(env_id, str) or not env_id:
        raise ConfigError(f"env_id must be an id the server serves, such as 'envgym/Wordle-v0', got {env_id!r}.")
    try:
        data = fetch_json(url, f"/{quote_id(env_id)}/spec", timeout_s=timeout_s)
    except RemoteError as err:
        if err.code != "HTTP_404":
            raise
        check_served(url, env_id, timeout_s=timeout_s)  # raises with "did you mean" when it is not served
        raise
    if not isinstance(data, dict):
        raise RemoteError(f"GET /{env_id}/spec: expected a JSON object, got {data!r:.200}.", code="PROTOCOL_ERROR")
    return data


def _kind(spec: Mapping[str, Any], env_id: str) -> str:
    kind = _KINDS.get(str(spec.get("kind", "single")))
    if kind is None:
        raise RemoteError(
            f"{env_id!r} is served as a {spec.get('kind')!r} environment; envgym.remote plays single-agent and "
            "PettingZoo Parallel ids.",
            code="UNSUPPORTED_KIND",
        )
    return kind


def _space(value: Any, what: str, env_id: str) -> Space[Any]:
    try:
        return codec.decode_space(value)
    except (codec.CodecError, RecursionError) as err:  # a hostile server's nesting too
        raise RemoteError(f"{env_id}: the server's {what} cannot be rebuilt: {err}", code="PROTOCOL_ERROR") from err


def _encode_action(action: Any, space: Space[Any]) -> Any:
    try:
        return codec.encode_action(action)
    except codec.CodecError:
        if isinstance(space, Text):
            # A text env judges any value an invalid step (docs/serving.md): one JSON cannot carry
            # (bytes, an object) travels as its repr, and the env answers with its usual feedback.
            return repr(action)
        raise


class _Remote:
    """What the single-agent and the Parallel client share: the session, kwargs, render, state."""

    _session: Session | None

    def _setup(
        self,
        url: str,
        env_id: str,
        env_kwargs: Mapping[str, Any],
        spec: Mapping[str, Any],
        *,
        render_mode: str | None,
        connect_timeout_s: float,
        message_timeout_s: float | None,
        max_message_bytes: int,
    ) -> None:
        self.url = url
        self.env_id = env_id
        self.render_mode = render_mode
        self.server_spec = dict(spec)
        metadata = spec.get("metadata")
        # A live connection does not pickle: the contract checker's pickle test does not apply.
        self.metadata = {**(metadata if isinstance(metadata, dict) else {}), "picklable": False}
        components = spec.get("reward_components")
        if isinstance(components, list) and all(isinstance(c, str) for c in components):
            self.reward_components = tuple(components)
        self._env_kwargs = wire_kwargs(env_kwargs, env_id)
        if render_mode is not None:
            self._env_kwargs["render_mode"] = render_mode
        self._session_options = {
            "connect_timeout_s": connect_timeout_s,
            "message_timeout_s": message_timeout_s,
            "max_message_bytes": max_message_bytes,
        }
        self._init_kwargs = {
            "url": url,
            "env_id": env_id,
            "render_mode": render_mode,
            **self._session_options,
            **dict(env_kwargs),
        }
        self._session = None
        self._kwargs_sent = False
        self._episode = False  # a reset answered on the current session
        self._connect()

    def _connect(self) -> Session:
        if self._session is None or self._session.closed:
            self._session = Session(self.url, self.env_id, **self._session_options)
            self._kwargs_sent = False
            self._episode = False
        return self._session

    def _reset_message(self, seed: int | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if seed is not None:
            data["seed"] = int(seed)
        if options:
            data["options"] = codec.encode_obs(dict(options))
        if not self._kwargs_sent and self._env_kwargs:
            data["env_kwargs"] = self._env_kwargs
        return {"type": "reset", "data": data}

    def _reset(self, seed: int | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """One reset round trip (reconnecting first when the session was lost): the observation payload."""
        session = self._connect()
        data = session.request(self._reset_message(seed, options), "observation", f"reset {self.env_id}")
        self._kwargs_sent = True
        self._episode = True
        return _payload(data, f"reset {self.env_id}")

    def _step(self, message: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        session = self._session
        if session is None or session.closed or not self._episode:
            if session is not None and session.closed and self._kwargs_sent:
                raise ServerLostError(
                    f"step {self.env_id}: the session with {self.url} was lost; reset to start a new episode."
                )
            raise RemoteResetNeededError(
                f"step {self.env_id}: call reset() before step() (a served env needs an episode first).",
                code="NOT_RESET",
            )
        data = session.request(message, "observation", f"step {self.env_id}")
        return _payload(data, f"step {self.env_id}"), data.get("reward")

    def render(self) -> Any:
        """The served env's ``render()``: text, or an image array (``None`` without a render mode)."""
        if self.render_mode is None:
            return None
        session = self._connect()
        data = session.request({"type": "render"}, "render", f"render {self.env_id}")
        frame = data.get("render", data.get("frame")) if isinstance(data, dict) else data
        return codec.decode_obs(frame)

    def remote_state(self) -> dict[str, Any]:
        """The session's state on the server: ``env_id``, ``episode_id``, ``step_count``, ``seed``, ``done``."""
        session = self._connect()
        return dict(session.request({"type": "state"}, "state", f"state {self.env_id}") or {})

    def close(self) -> None:
        """Close the session (the server closes its env at once). Calling it again does nothing."""
        session, self._session = getattr(self, "_session", None), None
        self._episode = False
        if session is not None:
            session.close()

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError(
            f"a {type(self).__name__} holds a live connection and does not pickle; send its arguments "
            f"instead: envgym.remote.make(**{self._init_kwargs!r})."
        )


def _payload(data: Any, where: str) -> dict[str, Any]:
    payload = data.get("observation") if isinstance(data, dict) else None
    if not isinstance(payload, dict):
        raise RemoteError(f"{where}: the server's answer has no observation: {data!r:.200}.", code="PROTOCOL_ERROR")
    return payload


def _info(value: Any, where: str) -> dict[str, Any]:
    try:
        return codec.decode_info(value if value is not None else {})
    except (codec.CodecError, RecursionError) as err:
        raise RemoteError(f"{where}: malformed info from the server: {err}", code="PROTOCOL_ERROR") from err


class RemoteEnv(_Remote, gymnasium.Env[Any, Any]):
    """A single-agent env served by ``envgym serve``, as a ``gymnasium.Env``.

    Built by :func:`make` (or ``gymnasium.make("envgym/Remote-v0", url=..., env_id=...)``). The
    observation and action spaces are the served env's; ``reward_components`` its declared
    components; ``metadata`` its metadata (with ``picklable`` false). A malformed text action is
    an invalid step, as in-process. A lost server raises :class:`ServerLostError` (retryable);
    the next ``reset`` opens a new session.

    Args:
        url: the server's base URL (``ws://127.0.0.1:8000``).
        env_id: a single-agent id the server serves.
        render_mode: the served env's render mode (sent with its kwargs).
        connect_timeout_s: seconds to open the session.
        message_timeout_s: seconds to wait for each answer (``None``: no limit).
        max_message_bytes: largest frame accepted from the server.
        env_kwargs: the served env's keyword arguments (plain JSON data).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "picklable": False}  # noqa: RUF012

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        render_mode: str | None = None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        message_timeout_s: float | None = DEFAULT_MESSAGE_TIMEOUT_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        _spec: Mapping[str, Any] | None = None,
        **env_kwargs: Any,
    ) -> None:
        spec = _spec if _spec is not None else served_spec(url, env_id, timeout_s=connect_timeout_s)
        if _kind(spec, env_id) != "single":
            raise ConfigError(
                f"{env_id!r} is a PettingZoo Parallel environment on the server at {url}: build its client with "
                f"envgym.remote.make({url!r}, {env_id!r}), which returns a RemoteParallelEnv."
            )
        self.observation_space = _space(spec.get("observation_space"), "observation space", env_id)
        self.action_space = _space(spec.get("action_space"), "action space", env_id)
        max_turns = env_kwargs.get("max_turns", spec.get("max_turns"))
        if type(max_turns) is int:
            self.max_turns = max_turns
        self._setup(
            url,
            env_id,
            env_kwargs,
            spec,
            render_mode=render_mode,
            connect_timeout_s=connect_timeout_s,
            message_timeout_s=message_timeout_s,
            max_message_bytes=max_message_bytes,
        )
        self.spec = gymnasium.envs.registration.EnvSpec(
            REMOTE_ID, entry_point=f"{__name__}:RemoteEnv", kwargs=dict(self._init_kwargs)
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        payload = self._reset(seed, options)
        where = f"reset {self.env_id}"
        return self._obs(payload.get("obs"), where), _info(payload.get("info"), where)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        message = {"type": "step", "data": {"action": _encode_action(action, self.action_space)}}
        payload, reward = self._step(message)
        where = f"step {self.env_id}"
        terminated, truncated = bool(payload.get("terminated")), bool(payload.get("truncated"))
        if terminated or truncated:
            self._episode = False
        return (
            self._obs(payload.get("obs"), where),
            wire_number(reward, where),
            terminated,
            truncated,
            _info(payload.get("info"), where),
        )

    def _obs(self, value: Any, where: str) -> Any:
        try:
            return codec.decode_obs(value, self.observation_space)
        except (codec.CodecError, RecursionError) as err:
            raise RemoteError(f"{where}: malformed observation from the server: {err}", code="PROTOCOL_ERROR") from err

    def __repr__(self) -> str:
        return f"<RemoteEnv {self.env_id!r} at {self.url}>"


class RemoteParallelEnv(_Remote, ParallelEnv[str, Any, Any]):
    """A PettingZoo Parallel env served by ``envgym serve``, as a ``pettingzoo.ParallelEnv``.

    ``possible_agents``, the per-agent spaces (the same objects on every call) and
    ``reward_components`` come from the server's spec; ``agents`` is the live agents after each
    reset and step. Same arguments, errors and session rules as :class:`RemoteEnv`.
    """

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        render_mode: str | None = None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        message_timeout_s: float | None = DEFAULT_MESSAGE_TIMEOUT_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        _spec: Mapping[str, Any] | None = None,
        **env_kwargs: Any,
    ) -> None:
        spec = _spec if _spec is not None else served_spec(url, env_id, timeout_s=connect_timeout_s)
        if _kind(spec, env_id) != "parallel":
            raise ConfigError(
                f"{env_id!r} is a single-agent environment on the server at {url}; its client is a RemoteEnv "
                f"(envgym.remote.make({url!r}, {env_id!r}))."
            )
        agents = spec.get("possible_agents", spec.get("agents"))
        if not (isinstance(agents, list) and agents and all(isinstance(a, str) for a in agents)):
            raise RemoteError(f"{env_id}: the server's spec names no agents: {agents!r:.200}.", code="PROTOCOL_ERROR")
        self.possible_agents = list(agents)
        self.agents: list[str] = []
        self.observation_spaces = self._spaces(spec, "observation", env_id)
        self.action_spaces = self._spaces(spec, "action", env_id)
        self._setup(
            url,
            env_id,
            env_kwargs,
            spec,
            render_mode=render_mode,
            connect_timeout_s=connect_timeout_s,
            message_timeout_s=message_timeout_s,
            max_message_bytes=max_message_bytes,
        )

    def _spaces(self, spec: Mapping[str, Any], what: str, env_id: str) -> dict[str, Space[Any]]:
        per_agent = spec.get(f"{what}_spaces")
        if isinstance(per_agent, dict):
            missing = [a for a in self.possible_agents if a not in per_agent]
            if missing:
                raise RemoteError(
                    f"{env_id}: the server's spec has no {what} space for {missing}.", code="PROTOCOL_ERROR"
                )
            return {a: _space(per_agent[a], f"{what} space of {a}", env_id) for a in self.possible_agents}
        shared = spec.get(f"{what}_space")
        return {a: _space(shared, f"{what} space", env_id) for a in self.possible_agents}

    def observation_space(self, agent: str) -> Space[Any]:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> Space[Any]:
        return self.action_spaces[agent]

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        return len(self.possible_agents)

    @property
    def unwrapped(self) -> RemoteParallelEnv:
        return self

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        payload = self._reset(seed, options)
        where = f"reset {self.env_id}"
        self.agents = self._live(payload, where)
        return self._per_agent_obs(payload.get("obs"), where), self._infos(payload.get("infos"), where)

    def step(self, actions: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
        if not isinstance(actions, Mapping):
            raise ConfigError(f"a Parallel step takes a dict of agent -> action, got {actions!r:.200}.")
        encoded = {str(a): _encode_action(act, self.action_spaces.get(a, Text(1))) for a, act in actions.items()}
        payload, _ = self._step({"type": "step", "data": {"actions": encoded}})
        where = f"step {self.env_id}"
        self.agents = self._live(payload, where)
        if not self.agents:
            self._episode = False
        rewards = {str(a): wire_number(r, where) for a, r in (payload.get("rewards") or {}).items()}
        terms = {str(a): bool(t) for a, t in (payload.get("terminations") or {}).items()}
        truncs = {str(a): bool(t) for a, t in (payload.get("truncations") or {}).items()}
        return (
            self._per_agent_obs(payload.get("obs"), where),
            rewards,
            terms,
            truncs,
            self._infos(payload.get("infos"), where),
        )

    def state(self) -> Any:
        raise NotImplementedError(
            "a served Parallel env exposes no global state; see remote_state() for the session's."
        )

    def _live(self, payload: Mapping[str, Any], where: str) -> list[str]:
        live = payload.get("agents")
        if not isinstance(live, list) or not all(a in self.observation_spaces for a in live):
            raise RemoteError(f"{where}: the server's live agents are malformed: {live!r:.200}.", code="PROTOCOL_ERROR")
        return list(live)

    def _per_agent_obs(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise RemoteError(f"{where}: expected observations by agent, got {value!r:.200}.", code="PROTOCOL_ERROR")
        try:
            return {a: codec.decode_obs(o, self.observation_spaces.get(a)) for a, o in value.items()}
        except (codec.CodecError, RecursionError) as err:
            raise RemoteError(f"{where}: malformed observation from the server: {err}", code="PROTOCOL_ERROR") from err

    def _infos(self, value: Any, where: str) -> dict[str, dict[str, Any]]:
        if not isinstance(value, dict):
            raise RemoteError(f"{where}: expected infos by agent, got {value!r:.200}.", code="PROTOCOL_ERROR")
        return {a: _info(i, f"{where} ({a})") for a, i in value.items()}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __str__(self) -> str:
        return f"RemoteParallelEnv({self.env_id!r} at {self.url})"

    __repr__ = __str__


def make(
    url: str,
    env_id: str,
    *,
    render_mode: str | None = None,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    message_timeout_s: float | None = DEFAULT_MESSAGE_TIMEOUT_S,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    **env_kwargs: Any,
) -> RemoteEnv | RemoteParallelEnv:
    """A client of ``env_id`` served at ``url``: a :class:`RemoteEnv` for a single-agent id, a
    :class:`RemoteParallelEnv` for a PettingZoo Parallel id (the server's spec says which).

    Args:
        url: the server's base URL, e.g. ``ws://127.0.0.1:8000`` (what ``envgym serve`` prints).
        env_id: an id the server serves.
        render_mode: the served env's render mode.
        connect_timeout_s: seconds to open the session (and to fetch the spec).
        message_timeout_s: seconds to wait for each answer (``None``: no limit).
        max_message_bytes: largest frame accepted from the server.
        env_kwargs: the served env's keyword arguments (plain JSON data).

    Raises:
        UnknownRemoteEnvError: the server does not serve ``env_id`` (with "did you mean").
        ServerLostError: the server cannot be reached.
        ConfigError: a bad URL, or ``env_kwargs`` that are not plain data.
    """
    spec = served_spec(url, env_id, timeout_s=connect_timeout_s)
    cls: Any = RemoteParallelEnv if _kind(spec, env_id) == "parallel" else RemoteEnv
    return cls(
        url,
        env_id,
        render_mode=render_mode,
        connect_timeout_s=connect_timeout_s,
        message_timeout_s=message_timeout_s,
        max_message_bytes=max_message_bytes,
        _spec=spec,
        **env_kwargs,
    )
