"""OpenEnv both ways: OpenEnv environments in envgym's harness, envgym environments on OpenEnv's server.

**OpenEnv into envgym.** :class:`OpenEnvEnv` is a ``gymnasium.Env`` over OpenEnv's own client
(``openenv.core.GenericEnvClient(...).sync()``, one WebSocket session per env). The registry
builds it for the id ``openenv:<url>``, so ``envgym run openenv:http://127.0.0.1:8000``, a bench
suite entry ``env: openenv:http://...`` and ``envgym.make("openenv:http://...")`` play any OpenEnv
server. What crosses over:

======================  ======================================================================
OpenEnv                 envgym
======================  ======================================================================
observation dict        text observation: the field ``observation_field`` names (a string as
                        it is, anything else as JSON); without one, the ``obs`` field of an
                        envgym env served by OpenEnv (:func:`openenv_app`), else the whole
                        dict as JSON with sorted keys
action dict             from the action text: ``{action_field: text}``; ``action_field``
                        defaults to the one required field of the server's action schema
                        (``GET /schema``); with ``json_actions=True`` the text is the JSON
                        object itself
reward, done            ``reward`` (``None`` counts 0.0), ``terminated = done``; ``max_turns``
                        truncates an episode the server never ends
a refused action        an invalid step (OpenEnv's ``VALIDATION_ERROR``, or text that is not a
                        JSON object under ``json_actions``): the observation repeats with the
                        reason, ``action_valid`` is False, reward 0, the episode goes on
server or session gone  :class:`OpenEnvError` (the harness records ``env_error``, retries the
                        episode on a fresh session, and never scores it as a zero)
======================  ======================================================================

``info`` carries envgym's standard keys. ``reward_components`` is the observation's
``reward_components`` field when it has one (a dict of numbers), else ``{"reward": r}`` (OpenEnv's
server does not send an observation's ``metadata``). ``success`` is the observation's boolean
``success`` field, else (with ``success_threshold``) whether the last reward reached it, else
False. An envgym env served by OpenEnv sends its whole ``info``, and that is used as it came.

**envgym into OpenEnv.** :func:`openenv_app` builds OpenEnv's FastAPI app (``create_app``) over
an OpenEnv ``Environment`` that wraps a registered envgym env: actions ``{"action": "<text>"}``,
observations ``{"obs", "info", "terminated", "truncated"}`` with OpenEnv's ``reward`` and
``done``. :func:`serve_with_openenv` starts that server in a subprocess (the side-by-side
baseline of ``envgym serve``).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import gymnasium as gym

from envgym._imports import optional
from envgym.core import INFO_KEYS, TerminationReason, check_init_kwargs
from envgym.errors import ConfigError, EnvgymError, InvalidKwargsError, ResetNeededError, suggest
from envgym.registration import make, spec
from envgym.serve.codec import CodecError, decode_info, encode_info, encode_obs
from envgym.spaces import MAX_TEXT_LENGTH, Text

__all__ = ["OpenEnvEnv", "OpenEnvError", "OpenEnvServer", "openenv_app", "serve_with_openenv"]

log = logging.getLogger(__name__)

#: The URL schemes an OpenEnv server is reached by.
URL_SCHEMES = ("http://", "https://", "ws://", "wss://")
#: OpenEnv's error code for a frame its server could not validate (the session stays open).
_REFUSED = "VALIDATION_ERROR"
_SERVER_ERROR = re.compile(r"\(code: (?P<code>[A-Z_]+)\)\s*$")


class OpenEnvError(EnvgymError, ConnectionError):
    """The OpenEnv server or its session failed (unreachable, closed, crashed): an
    infrastructure failure, which the harness retries and reports apart from the score."""


def _http_url(url: str) -> str:
    base = url.rstrip("/")
    for ws, http in (("ws://", "http://"), ("wss://", "https://")):
        if base.startswith(ws):
            return http + base[len(ws) :]
    return base


def _as_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    return text[:MAX_TEXT_LENGTH]


def _fields(schema: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The properties of a JSON schema, each a mapping (a server's malformed schema gives none)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {str(name): value if isinstance(value, dict) else {} for name, value in properties.items()}


def _reward(value: Any, url: str) -> float:
    """OpenEnv's reward as a float (``None``: 0.0); a non-number or a non-finite one is the
    server's failure, never a score."""
    if value is None:
        return 0.0
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise OpenEnvError(f"the OpenEnv server at {url} sent the reward {value!r:.80}; expected a finite number.")
    return float(value)


class OpenEnvEnv(gym.Env[str, str]):
    """An environment on an OpenEnv server, played over OpenEnv's WebSocket protocol.

    The env of the id ``openenv:<url>``. Observation: text (the module docstring gives the
    mapping). Actions: text, sent as ``{action_field: text}`` or, with ``json_actions``, as the
    JSON object the text holds.
    Reward components: the observation's ``reward_components`` field, else ``{"reward": r}``.
    Episode end: the server's ``done`` (terminated), or ``max_turns`` steps (truncated).

    Args:
        url: the server's base URL (``http://HOST:PORT``; ``ws://`` works too). OpenEnv's client
            appends ``/ws``.
        observation_field: the observation field that is the text observation (``None``: the
            ``obs`` field of an envgym env served by OpenEnv, else the whole dict as JSON).
        action_field: the action field that receives the text (``None``: the one required field
            of the server's action schema).
        json_actions: the action text is a JSON object, sent as the action (every field).
        admissible_actions: the finite action list, when you know it (shown to agents in
            ``info["admissible_actions"]``); ``None``: the ``enum`` of the action field's
            schema, if it has one.
        max_turns: steps after which an episode is truncated (``None``: only the server ends it).
        success_threshold: an episode that ends with a last reward at least this counts as a
            success (``None``: only an observation's boolean ``success`` field says so).
        split: recorded in ``info["task"]`` (OpenEnv has no task splits).
        connect_timeout_s, message_timeout_s: OpenEnv's client limits, in seconds.

    Version history: v0 (issue 34).
    """

    # a live WebSocket session does not pickle (nor does it travel to another process)
    metadata: ClassVar[dict[str, Any]] = {"render_modes": [], "picklable": False}

    def __init__(
        self,
        url: str,
        *,
        observation_field: str | None = None,
        action_field: str | None = None,
        json_actions: bool = False,
        admissible_actions: Sequence[str] | None = None,
        max_turns: int | None = None,
        success_threshold: float | None = None,
        split: str = "test",
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(URL_SCHEMES) or len(url) > 2048:
            raise InvalidKwargsError(
                f"url must be an OpenEnv server's address starting with {', '.join(URL_SCHEMES)}, got {url!r:.200}; "
                "e.g. openenv:http://127.0.0.1:8000."
            )
        if max_turns is not None and (not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1):
            raise InvalidKwargsError(f"max_turns must be an integer >= 1 or None, got {max_turns!r}.")
        if admissible_actions is not None and (
            isinstance(admissible_actions, str)
            or not all(isinstance(a, str) for a in admissible_actions)
            or not admissible_actions
        ):
            raise InvalidKwargsError(
                f"admissible_actions must be a non-empty list of action texts, got {admissible_actions!r:.200}."
            )
        for name, value in (("connect_timeout_s", connect_timeout_s), ("message_timeout_s", message_timeout_s)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 3600:
                raise InvalidKwargsError(f"{name} must be a number of seconds in (0, 3600], got {value!r}.")
        if success_threshold is not None and (
            not isinstance(success_threshold, (int, float)) or not math.isfinite(success_threshold)
        ):
            raise InvalidKwargsError(f"success_threshold must be a finite number or None, got {success_threshold!r}.")
        if json_actions and action_field is not None:
            raise InvalidKwargsError("give either action_field or json_actions=True, not both.")
        if observation_field is not None and (not isinstance(observation_field, str) or not observation_field):
            raise InvalidKwargsError(f"observation_field must be a field name or None, got {observation_field!r}.")
        if not isinstance(split, str) or not split:
            raise InvalidKwargsError(f"split must be a split name such as 'test', got {split!r}.")
        optional("openenv.core", purpose="openenv:<url> environments")
        self.url = url.rstrip("/")
        self.observation_field = observation_field
        self.json_actions = bool(json_actions)
        self.max_turns = max_turns
        self.success_threshold = success_threshold
        self.split = split
        self.connect_timeout_s = float(connect_timeout_s)
        self.message_timeout_s = float(message_timeout_s)
        self.observation_space = Text(MAX_TEXT_LENGTH)
        self.action_space = Text(MAX_TEXT_LENGTH)
        self._given_field = action_field is not None
        schema = self._action_schema()
        self.action_field = None if json_actions else self._pick_action_field(action_field, schema)
        enum = _fields(schema).get(self.action_field or "", {}).get("enum")
        self.admissible = (
            list(admissible_actions)
            if admissible_actions is not None
            else [str(a) for a in enum]
            if isinstance(enum, list) and enum
            else None
        )
        self._client: Any = None
        self._seed: int | None = None
        self._turn = 0
        self._invalid = 0
        self._done = True
        self._started = False
        self._obs = ""
        self._info: dict[str, Any] = {}

    # -- the server's action schema -------------------------------------------------------------
    def _action_schema(self) -> dict[str, Any]:
        """The action's JSON schema from ``GET /schema`` (``{}`` when the server has none)."""
        address = f"{_http_url(self.url)}/schema"
        try:
            with urllib.request.urlopen(address, timeout=self.connect_timeout_s) as response:
                body = response.read(1 << 20)
        except urllib.error.HTTPError as err:
            if err.code == 404 or self.json_actions or self._given_field:
                return {}  # reachable, without a schema: the caller named how actions are sent
            raise OpenEnvError(f"the OpenEnv server at {self.url} answered GET /schema with HTTP {err.code}.") from err
        except (OSError, ValueError) as err:
            raise OpenEnvError(f"cannot reach the OpenEnv server at {self.url}: {err}") from err
        try:
            action = json.loads(body).get("action")
        except (ValueError, AttributeError):
            action = None
        return action if isinstance(action, dict) else {}

    def _pick_action_field(self, given: str | None, schema: Mapping[str, Any]) -> str:
        fields = [name for name in _fields(schema) if name != "metadata"]
        if given is not None:
            if not isinstance(given, str) or not given:
                raise InvalidKwargsError(f"action_field must be a field name, got {given!r}.")
            if fields and given not in fields:
                raise InvalidKwargsError(
                    f"the OpenEnv server at {self.url} has no action field {given!r}.{suggest(given, fields)} "
                    f"Its action fields: {', '.join(fields)}."
                )
            return given
        listed_required = schema.get("required")
        required = [n for n in listed_required if n in fields] if isinstance(listed_required, list) else []
        candidates = required if required else fields
        if len(candidates) != 1:
            listed = ", ".join(fields) or "none (GET /schema gave no action schema)"
            raise InvalidKwargsError(
                f"cannot tell which action field of the OpenEnv server at {self.url} the action text goes into: "
                f"its action fields are {listed}. Pass action_field=NAME (-k action_field=NAME), or "
                "json_actions=true to write each action as a JSON object."
            )
        return candidates[0]

    # -- the session ----------------------------------------------------------------------------
    def _connect(self) -> Any:
        if self._client is None:
            from openenv.core import GenericEnvClient

            client = GenericEnvClient(
                base_url=self.url,
                connect_timeout_s=self.connect_timeout_s,
                message_timeout_s=self.message_timeout_s,
            ).sync()
            try:
                client.connect()
            except Exception as err:
                self._drop(client)
                raise OpenEnvError(f"cannot open a session on the OpenEnv server at {self.url}: {err}") from err
            self._client = client
        return self._client

    @staticmethod
    def _drop(client: Any) -> None:
        try:
            client.close()
        except Exception:
            log.debug("closing an OpenEnv client failed", exc_info=True)

    def _call(self, what: str, *args: Any, **kwargs: Any) -> Any:
        """``client.<what>(...)``: an answer, or the server's refusal code (``str``) for a refused
        action; anything else that fails closes the session and raises :class:`OpenEnvError`."""
        client = self._connect()
        try:
            return getattr(client, what)(*args, **kwargs)
        except RuntimeError as err:
            match = _SERVER_ERROR.search(str(err))
            if what == "step" and match is not None and match["code"] == _REFUSED:
                return _REFUSED
            failure: Exception = err
        except Exception as err:  # noqa: BLE001 - closed socket, timeout, refused connection
            failure = err
        self._client = None
        self._drop(client)
        self._done = True
        raise OpenEnvError(
            f"the OpenEnv server at {self.url} failed during {what}: {type(failure).__name__}: {failure}"
        ) from failure

    # -- gymnasium API --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; ``options`` are sent as extra reset fields (OpenEnv's server passes
        those its env's ``reset`` takes)."""
        super().reset(seed=seed)
        if options is not None and not isinstance(options, Mapping):
            raise InvalidKwargsError(f"options must be a mapping of reset fields, got {options!r:.200}.")
        fields = dict(options or {})
        if seed is not None:
            fields["seed"] = int(seed)
        result = self._call("reset", **fields)
        self._seed = seed
        self._turn = 0
        self._invalid = 0
        self._done = False
        self._started = True
        obs, info, _, _ = self._translate(result)
        self._obs, self._info = obs, info
        return obs, dict(info)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._started or self._done:
            raise ResetNeededError("call reset() before step(): the episode has not started or has ended.")
        text = action if isinstance(action, str) else str(action)
        payload, problem = self._payload(text)
        result = self._call("step", payload) if payload is not None else _REFUSED
        self._turn += 1
        if result == _REFUSED:
            self._invalid += 1
            reason = problem or f"the server refused the action {text[:200]!r} (it does not fit its action schema)"
            obs = _as_text(f"{self._obs}\n\nInvalid action: {reason}.")
            info = {
                **self._info,
                "action_valid": False,
                "reward_components": dict.fromkeys(self._info.get("reward_components") or {"reward": 0.0}, 0.0),
                "turn": self._turn,
                "invalid_actions": self._invalid,
            }
            terminated, truncated, reward = False, False, 0.0
        else:
            obs, info, terminated, truncated = self._translate(result)
            reward = _reward(result.reward, self.url)
            self._obs = obs
        if not (terminated or truncated) and self.max_turns is not None and self._turn >= self.max_turns:
            truncated = True
            info["termination_reason"] = TerminationReason.MAX_TURNS.value
        self._done = terminated or truncated
        self._info = info
        return obs, reward, terminated, truncated, dict(info)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            self._drop(client)
        self._done = True

    # -- translation ----------------------------------------------------------------------------
    def _payload(self, text: str) -> tuple[dict[str, Any] | None, str | None]:
        if not self.json_actions:
            return {self.action_field: text}, None
        try:
            value = json.loads(text)
        except ValueError as err:
            return None, f"expected the action as a JSON object, could not parse it ({err})"
        if not isinstance(value, dict):
            return None, f"expected the action as a JSON object, got {type(value).__name__}"
        return value, None

    def _task(self) -> dict[str, Any]:
        return {
            "id": f"openenv:{self.url}#seed={self._seed}",
            "goal": "",
            "split": self.split,
            "difficulty": "",
            "seed": self._seed,
        }

    def _translate(self, result: Any) -> tuple[str, dict[str, Any], bool, bool]:
        """``(text, info, terminated, truncated)`` of an OpenEnv ``StepResult``."""
        observation = result.observation if isinstance(result.observation, dict) else {}
        reward = _reward(result.reward, self.url)
        done = bool(result.done)
        served = observation.get("info")
        if isinstance(served, dict) and "obs" in observation:  # an envgym env (openenv_app, envgym serve)
            try:
                served = decode_info(served)  # arrays and non-finite floats back as they were
            except CodecError:
                log.debug("an info from %s kept as it came (not envgym's encoding)", self.url, exc_info=True)
            info = {**dict.fromkeys(INFO_KEYS), **served}
            obs_value = observation.get(self.observation_field or "obs")
            terminated = bool(observation.get("terminated", done))
            truncated = bool(observation.get("truncated", False))
            return _as_text(obs_value), info, terminated, truncated
        if self.observation_field is not None:
            if self.observation_field not in observation:
                raise OpenEnvError(
                    f"the OpenEnv server at {self.url} sent an observation without the field "
                    f"{self.observation_field!r} (observation_field); its fields: {', '.join(sorted(observation))}."
                )
            text = _as_text(observation[self.observation_field])
        else:
            text = _as_text(observation)
        components = observation.get("reward_components")
        if not (
            isinstance(components, dict)
            and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                for v in components.values()
            )
        ):
            components = {"reward": reward}
        flag = observation.get("success")
        if isinstance(flag, bool):
            success = flag
        elif self.success_threshold is not None and done:
            success = reward >= self.success_threshold
        else:
            success = False
        reason = None
        if done:
            reason = (TerminationReason.SUCCESS if success else TerminationReason.FAILURE).value
        info = {
            "task": self._task(),
            "admissible_actions": list(self.admissible) if self.admissible is not None else None,
            "action_valid": True,
            "reward_components": {str(k): float(v) for k, v in components.items()},
            "success": success,
            "termination_reason": reason,
            "turn": self._turn,
            "invalid_actions": self._invalid,
        }
        return text, info, done, False


# a misspelt argument (-k action_fild=...) is a "did you mean" error, as for every envgym env
check_init_kwargs(OpenEnvEnv, OpenEnvEnv)


# -- envgym envs on OpenEnv's server -----------------------------------------------------------------
def _served_classes() -> tuple[type, type, type]:
    """OpenEnv ``Action``/``Observation`` models and the ``Environment`` over an envgym env (built
    on first use: importing openenv-core costs seconds)."""
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    Field = optional("pydantic", purpose="openenv_app", extra="integrations").Field

    class EnvgymAction(Action):
        """One envgym action: the text the env's ``step`` takes."""

        action: str = Field(..., description="The action text")

    class EnvgymObservation(Observation):
        """An envgym observation: the env's ``obs`` (JSON) and ``info`` (JSON-safe)."""

        obs: Any = Field(default="", description="The observation (text, or encoded as in docs/serving.md)")
        info: dict[str, Any] = Field(default_factory=dict, description="The env's info")
        terminated: bool = Field(default=False, description="The episode reached a terminal state")
        truncated: bool = Field(default=False, description="The episode was cut (turn limit)")

    class EnvgymEnvironment(Environment):
        """A registered envgym env behind OpenEnv's ``Environment`` interface (one per session)."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
            super().__init__()
            self.env_id = env_id
            self._env = make(env_id, **dict(env_kwargs))
            self._state = State(episode_id=None, step_count=0)

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
            options = kwargs.get("options")
            obs, info = self._env.reset(seed=seed, options=options if isinstance(options, dict) else None)
            self._state = State(episode_id=episode_id, step_count=0, env_id=self.env_id, seed=seed)
            return EnvgymObservation(obs=encode_obs(obs), info=encode_info(info), reward=None, done=False)

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            obs, reward, terminated, truncated, info = self._env.step(action.action)
            self._state.step_count += 1
            return EnvgymObservation(
                obs=encode_obs(obs),
                info=encode_info(info),
                terminated=bool(terminated),
                truncated=bool(truncated),
                reward=float(reward),
                done=bool(terminated or truncated),
            )

        @property
        def state(self) -> Any:
            return self._state

        def close(self) -> None:
            self._env.close()

    return EnvgymAction, EnvgymObservation, EnvgymEnvironment


@functools.cache
def _classes() -> tuple[type, type, type]:
    return _served_classes()


def openenv_app(env_id: str, *, max_sessions: int = 64, **env_kwargs: Any) -> Any:
    """OpenEnv's FastAPI app (``openenv.core.env_server.http_server.create_app``) serving the
    registered envgym env ``env_id``: one env per WebSocket session, made with ``env_kwargs``.

    OpenEnv's clients play it unchanged: ``GenericEnvClient(base_url=...).sync()``, actions
    ``{"action": "<text>"}``, observations ``{"obs", "info", "terminated", "truncated"}``.

    Raises:
        UnknownEnvError: ``env_id`` is not registered (with the closest ids).
        ConfigError: ``max_sessions`` is not a positive integer, or the env refuses ``env_kwargs``
            (the env is built once here, before anything is served).
    """
    if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
        raise ConfigError(f"max_sessions must be an integer >= 1, got {max_sessions!r}.")
    if spec(env_id).kind != "gymnasium":
        raise ConfigError(f"{env_id!r} is a multi-agent environment; OpenEnv's server serves single-agent envs.")
    optional("openenv.core.env_server.http_server", purpose="openenv_app")
    try:
        make(env_id, **env_kwargs).close()
    except EnvgymError:
        raise
    except Exception as err:
        raise ConfigError(f"{env_id} rejects {env_kwargs!r}: {type(err).__name__}: {err}") from err
    from openenv.core.env_server.http_server import create_app

    action_cls, observation_cls, environment_cls = _classes()
    factory = functools.partial(environment_cls, env_id, dict(env_kwargs))
    return create_app(factory, action_cls, observation_cls, env_name=env_id, max_concurrent_envs=max_sessions)


@dataclass
class OpenEnvServer:
    """A running OpenEnv server in a subprocess (:func:`serve_with_openenv`); ``stop()`` ends it."""

    process: subprocess.Popen[bytes]
    url: str

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_with_openenv(
    env_id: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    max_sessions: int = 64,
    startup_timeout_s: float = 120.0,
    **env_kwargs: Any,
) -> OpenEnvServer:
    """Start OpenEnv's own server (uvicorn over :func:`openenv_app`) for ``env_id`` in a
    subprocess on ``host:port``; return once ``GET /health`` answers. For comparing OpenEnv's
    server with ``envgym serve`` on the same env logic.

    Raises:
        ConfigError: a bad port or kwargs that are not JSON.
        OpenEnvError: the server exited or did not answer within ``startup_timeout_s``.
    """
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ConfigError(f"port must be an integer in 1..65535, got {port!r}.")
    try:
        kwargs_json = json.dumps(env_kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"env_kwargs must be JSON to reach the server process, got {env_kwargs!r:.200}.") from err
    command = [
        sys.executable,
        "-m",
        __name__,
        env_id,
        "--host",
        host,
        "--port",
        str(port),
        "--max-sessions",
        str(max_sessions),
        "--kwargs",
        kwargs_json,
    ]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    server = OpenEnvServer(process, f"http://{host}:{port}")
    deadline = time.monotonic() + startup_timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise OpenEnvError(f"OpenEnv's server for {env_id} exited with code {process.returncode} before answering.")
        try:
            with urllib.request.urlopen(f"{server.url}/health", timeout=1.0):
                return server
        except (OSError, ValueError):
            time.sleep(0.05)  # polled against the deadline above
    server.stop()
    raise OpenEnvError(f"OpenEnv's server for {env_id} did not answer on {server.url} within {startup_timeout_s:g} s.")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m envgym.integrations.openenv ENV_ID --port P``: OpenEnv's server for an envgym env."""
    parser = argparse.ArgumentParser(prog="python -m envgym.integrations.openenv", description=main.__doc__)
    parser.add_argument("env_id")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-sessions", type=int, default=64)
    parser.add_argument("--kwargs", default="{}", help="the env's keyword arguments as a JSON object")
    args = parser.parse_args(argv)
    import uvicorn

    app = openenv_app(args.env_id, max_sessions=args.max_sessions, **json.loads(args.kwargs))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
