"""One envgym episode played by chat replies: what the SkyRL and verl adapters share.

A trainer's rollout loop owns the model, the chat history and the token ids; envgym owns the
episode. :class:`ChatEpisode` is the envgym side, exactly as the rollout harness plays it:

* the first prompt is envgym's system message and the first observation as a user message
  (:class:`~envgym.rollout.PromptConfig` renders both, as for any chat agent);
* each reply is parsed as the harness parses it (the last ``<action>...</action>`` block, else
  the cleaned reply), stepped, and answered with the next observation as one user message;
* a malformed reply is an invalid step with feedback (the env's own rule), never an error;
* the episode ends by the harness's rules (:func:`envgym.rollout.episode_end`): the env ended it,
  or the turn limit (``max_turns``, an outer cap over the env's own) or token budget cut it;
* the reward of each step is the env's scalar reward (its rubric); they sum to the return the
  same seed and actions give in-process, and the components are summed per episode.

Settings come as one plain mapping (a SkyRL dataset row's extras, a verl ``extra_info``, a YAML
block), read by :meth:`EpisodeSettings.from_mapping`::

    {"env_id": "envgym/Wordle-v0", "seed": 7, "env_kwargs": {}, "url": None,
     "prompt": {"show_admissible": True}, "max_turns": 8}

``url`` plays the episode on an ``envgym serve`` server through :func:`envgym.remote.make`.

Typical use::

    episode = ChatEpisode(EpisodeSettings.from_mapping(row))
    messages = episode.reset()                 # [system, user]
    while not episode.done:
        step = episode.step(model(messages))   # reward, done, the next user message
        messages += [{"role": "assistant", "content": reply}, *step.messages]
    episode.metrics()                          # episode/return, rewards/<name>/mean, ...
    episode.close()
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from envgym.errors import ConfigError, ResetNeededError, suggest
from envgym.registration import make
from envgym.remote import make as remote_make
from envgym.rewards.metrics import episode_totals, metric_key
from envgym.rollout.ending import EpisodeEnd, episode_end
from envgym.rollout.prompting import Conversation, PromptConfig

__all__ = [
    "SETTING_KEYS",
    "ChatEpisode",
    "EpisodeSettings",
    "EpisodeStep",
    "check_keys",
    "plain",
    "prompt_messages",
]

#: The keys of an episode's settings (see :meth:`EpisodeSettings.from_mapping`).
SETTING_KEYS: tuple[str, ...] = ("env_id", "seed", "env_kwargs", "url", "prompt", "max_turns", "options")


def plain(value: Any) -> Any:
    """``value`` as plain JSON-like data: mappings become dicts and sequences lists, recursively
    (OmegaConf's ``DictConfig``/``ListConfig`` from a trainer's YAML, NumPy scalars from a parquet
    row via ``.item()``)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Sequence) or type(value).__name__ in ("ListConfig", "ndarray"):
        return [plain(v) for v in value]
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    return value


def check_keys(data: Any, where: str = "settings") -> None:
    """Raise :class:`ConfigError` unless ``data`` is a mapping whose keys are all :data:`SETTING_KEYS`."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"envgym {where} must be a mapping with keys {list(SETTING_KEYS)}, got {data!r}.")
    for key in data:
        if key not in SETTING_KEYS:
            raise ConfigError(
                f"unknown envgym {where} key {key!r}; known keys: {', '.join(SETTING_KEYS)}."
                f"{suggest(str(key), SETTING_KEYS)}"
            )


@dataclass(frozen=True, kw_only=True)
class EpisodeSettings:
    """What one episode plays.

    Attributes:
        env_id: a registered single-agent text id, e.g. ``envgym/Wordle-v0``.
        seed: the reset seed (the task); ``None`` lets the env choose.
        env_kwargs: the env's keyword arguments.
        url: an ``envgym serve`` server (``ws://HOST:P``) to play on; ``None``: in-process.
        prompt: :class:`~envgym.rollout.PromptConfig` fields (the system prompt, action tags,
            ``show_admissible``, ``max_turns``, ...); ``history`` is ignored, since the trainer keeps
            the chat history.
        max_turns: the trainer's turn limit (an outer cap over the env's own); ``None``: the env's.
        options: the ``options`` of ``env.reset``.
    """

    env_id: str
    seed: int | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    url: str | None = None
    prompt: PromptConfig = field(default_factory=PromptConfig)
    max_turns: int | None = None
    options: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ConfigError(f"env_id must be a registered id such as 'envgym/Wordle-v0', got {self.env_id!r}.")
        for name in ("seed", "max_turns"):
            value = getattr(self, name)
            low = 0 if name == "seed" else 1
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise ConfigError(f"{name} must be an integer >= {low} or None, got {value!r}.")
        if not isinstance(self.env_kwargs, Mapping):
            raise ConfigError(f"env_kwargs must be a mapping of keyword arguments, got {self.env_kwargs!r}.")
        if self.options is not None and not isinstance(self.options, Mapping):
            raise ConfigError(f"options must be a mapping or None, got {self.options!r}.")
        if self.url is not None and (not isinstance(self.url, str) or not self.url):
            raise ConfigError(f"url must be an envgym serve address such as 'ws://127.0.0.1:8000', got {self.url!r}.")
        if not isinstance(self.prompt, PromptConfig):
            raise ConfigError(f"prompt must be a PromptConfig, got {self.prompt!r}.")

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], *, defaults: Mapping[str, Any] | None = None, strict: bool = True
    ) -> EpisodeSettings:
        """Settings from ``data`` over ``defaults`` (both plain mappings with :data:`SETTING_KEYS`).

        Args:
            data: the per-episode values (a dataset row).
            defaults: values ``data`` leaves out (a trainer's YAML block for the env).
            strict: refuse keys that are not settings. SkyRL hands an env every column of its
                dataset row (``reward_spec``, ``data_source``, ...), so it reads rows with
                ``strict=False``, which still refuses a near-miss of a setting (``seeds``); config
                blocks are always read strictly.

        Raises:
            ConfigError: an unknown key (with the closest one), a missing ``env_id``, a bad value.
        """
        merged: dict[str, Any] = {}
        for where, source, check in (("config", defaults or {}, True), ("settings", data, strict)):
            if check:
                check_keys(source, where)
            elif not isinstance(source, Mapping):
                raise ConfigError(f"envgym {where} must be a mapping with keys {list(SETTING_KEYS)}, got {source!r}.")
            else:  # other columns pass, but a near-miss of a setting ('seeds') is a typo, not a column
                for key in source:
                    close = difflib.get_close_matches(str(key), SETTING_KEYS, n=1, cutoff=0.8)
                    if key not in SETTING_KEYS and close:
                        raise ConfigError(f"envgym {where}: unknown key {key!r}. Did you mean {close[0]!r}?")
            merged.update((key, plain(value)) for key, value in source.items() if key in SETTING_KEYS)
        if merged.get("env_id") is None:
            raise ConfigError(
                "no env_id: put the envgym id in the dataset row or the env config, e.g. "
                "{'env_id': 'envgym/Wordle-v0', 'seed': 7}."
            )
        prompt = merged.pop("prompt", None) or {}
        if not isinstance(prompt, (Mapping, PromptConfig)):
            raise ConfigError(f"prompt must be a mapping of PromptConfig fields, got {prompt!r}.")
        config = prompt if isinstance(prompt, PromptConfig) else PromptConfig.from_dict(prompt)
        merged = {k: v for k, v in merged.items() if v is not None or k in ("seed", "url", "max_turns")}
        return cls(prompt=config, **merged)


@dataclass(frozen=True)
class EpisodeStep:
    """What one reply did.

    Attributes:
        messages: the next user message (a one-item list), or ``[]`` when the episode ended.
        reward: the env's reward for this step.
        done: whether the episode ended.
        action: the parsed action that was stepped.
        format_ok: whether the reply had a complete action block.
        info: the env's ``info`` of this step.
        end: how the episode ended, once it has.
    """

    messages: list[dict[str, str]]
    reward: float
    done: bool
    action: str
    format_ok: bool
    info: dict[str, Any]
    end: EpisodeEnd | None = None

    def metadata(self) -> dict[str, Any]:
        """The step as plain data for a trainer's logs: reward components, action, validity, end."""
        info = self.info
        out: dict[str, Any] = {
            "action": self.action,
            "format_ok": self.format_ok,
            "action_valid": bool(info.get("action_valid", True)),
            "reward_components": {k: float(v) for k, v in dict(info.get("reward_components") or {}).items()},
        }
        if self.end is not None:
            out["termination_reason"] = self.end.reason.value
            out["success"] = self.end.success
            if self.end.truncated_by is not None:
                out["truncated_by"] = self.end.truncated_by
        return out


def prompt_messages(prefix: Sequence[Mapping[str, Any]] | None, episode_messages: list[dict[str, str]]) -> list[dict]:
    """The first prompt: a trainer's dataset prompt (``prefix``, often empty) followed by the episode's
    messages; when ``prefix`` brings its own system message, envgym's is left out."""
    head = [dict(m) for m in plain(list(prefix or []))]
    for message in head:
        if not isinstance(message, dict) or "role" not in message:
            raise ConfigError(f"each prompt message must be a mapping with a 'role', got {message!r}.")
    if any(m["role"] == "system" for m in head):
        episode_messages = [m for m in episode_messages if m["role"] != "system"]
    return head + episode_messages


class ChatEpisode:
    """One episode of an envgym text env played by chat replies (see the module docstring).

    The env is made at construction (bad ids and kwargs fail there) and closed by :meth:`close`.
    """

    def __init__(self, settings: EpisodeSettings) -> None:
        self.settings = settings
        kwargs = dict(settings.env_kwargs)
        if settings.url is None:
            self.env = make(settings.env_id, **kwargs)
        else:
            self.env = remote_make(settings.url, settings.env_id, **kwargs)
        # The trainer keeps the chat history; envgym renders only the newest user message.
        self.prompt = dataclasses.replace(settings.prompt, history="none")
        self.conversation: Conversation | None = None
        self.end: EpisodeEnd | None = None
        self.turns = 0
        self.episode_return = 0.0
        self._components: list[dict[str, float]] = []
        self._format_ok: list[bool] = []
        self._valid: list[bool] = []
        self.observation: str | None = None
        self.info: dict[str, Any] = {}
        self._closed = False

    @property
    def done(self) -> bool:
        """Whether the episode has ended (or not started)."""
        return self.conversation is None or self.end is not None

    def reset(self) -> list[dict[str, str]]:
        """Start the episode: the system message (when the prompt has one) and the first observation."""
        obs, info = self.env.reset(seed=self.settings.seed, options=plain(self.settings.options))
        if not isinstance(obs, str):
            raise ConfigError(
                f"{self.settings.env_id} observes {type(obs).__name__}, not text: the chat adapters play text envs "
                "only (a GUI env's text view, e.g. an '-A11y' preset, works)."
            )
        self.conversation = Conversation(self.prompt, self.settings.env_id, obs, info)
        self.end = None
        self.turns = 0
        self.episode_return = 0.0
        self._components, self._format_ok, self._valid = [], [], []
        self.observation, self.info = obs, dict(info)
        return [dict(m) for m in self.conversation.messages()]

    def step(self, reply: str, *, completion_tokens: int | None = None) -> EpisodeStep:
        """Play one reply: parse it, step the env, and say what came back.

        Raises:
            ResetNeededError: the episode has not started, or has ended.
        """
        conv = self.conversation
        if conv is None or self.end is not None:
            raise ResetNeededError(f"{self.settings.env_id}: step() before reset() or after the episode ended.")
        parsed = conv.parse(str(reply))
        obs, reward, terminated, truncated, info = self.env.step(parsed.action)
        reward = float(reward)
        if not math.isfinite(reward):
            raise ConfigError(f"{self.settings.env_id} returned a non-finite reward {reward!r}.")
        self.turns += 1
        self.episode_return += reward
        self._components.append(dict(info.get("reward_components") or {}))
        self._format_ok.append(parsed.format_ok)
        self._valid.append(bool(info.get("action_valid", True)))
        conv.record(str(reply), parsed, str(obs), info, completion_tokens=completion_tokens)
        self.observation, self.info = str(obs), dict(info)
        self.end = episode_end(
            terminated=bool(terminated),
            truncated=bool(truncated),
            info=info,
            turns=self.turns,
            max_turns=self.settings.max_turns,
            turns_exhausted=conv.turns_exhausted,
            budget_exhausted=conv.budget_exhausted,
        )
        messages = [] if self.end is not None else [dict(conv.messages()[-1])]
        return EpisodeStep(messages, reward, self.end is not None, parsed.action, parsed.format_ok, self.info, self.end)

    @property
    def reward_components(self) -> dict[str, float]:
        """Each reward component summed over the episode so far."""
        return episode_totals(self._components)

    @property
    def success(self) -> bool:
        """``info["success"]`` of the latest step."""
        return bool(self.info.get("success", False))

    def metrics(self) -> dict[str, float]:
        """The episode's numbers under envgym's metric keys (a trainer averages them over episodes):
        ``episode/return``, ``episode/success_rate``, ``episode/turns``, ``episode/format_ok``,
        ``episode/valid_action_rate`` and ``rewards/<name>/mean`` per component."""
        out = {
            "episode/return": self.episode_return,
            "episode/success_rate": 1.0 if self.success else 0.0,
            "episode/turns": float(self.turns),
        }
        if self.turns:
            out["episode/format_ok"] = sum(self._format_ok) / self.turns
            out["episode/valid_action_rate"] = sum(self._valid) / self.turns
        for name, total in sorted(self.reward_components.items()):
            out[metric_key(name)] = total
        return out

    def close(self) -> None:
        """Close the env (a browser page, a sandbox, a server session); calling it again does nothing."""
        if not self._closed:
            self._closed = True
            self.env.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f" at {self.settings.url}" if self.settings.url else ""
        return f"ChatEpisode({self.settings.env_id!r}{where}, seed={self.settings.seed}, turns={self.turns})"
