"""envgym environments as SkyRL-gym text envs: train on any envgym text id with SkyRL.

Importing this module registers :class:`EnvgymTextEnv` in ``skyrl_gym``'s registry as
``"envgym"`` (:func:`register` adds more names, each with its own defaults). SkyRL's generator
then plays it like any ``BaseTextEnv``::

    env = skyrl_gym.make("envgym", env_config=cfg.environment.skyrl_gym.envgym, extras=row_extras)
    chat, _ = env.init(row_prompt)          # envgym's system message + the first observation
    while not done:
        out = env.step(llm_reply)           # observations: [next user message], reward, done, metadata
    env.get_metrics(); env.close()

What comes from where:

* ``extras`` (the dataset row's columns other than the prompt, plus the generator's
  ``max_turns``) and ``env_config`` (the YAML block ``environment.skyrl_gym.envgym``) carry the
  episode settings of :class:`~envgym.integrations.episode.EpisodeSettings`: ``env_id``, ``seed``,
  ``env_kwargs``, ``url`` (an ``envgym serve`` server), ``prompt`` (PromptConfig fields),
  ``max_turns``. A row's value wins over the config's; other columns are ignored.
* the reply is parsed as envgym's harness parses it; a malformed one is an invalid step with
  the env's feedback as the next observation, not an error;
* ``reward`` is the step's reward from the env's rubric; SkyRL puts each at the end of its turn,
  so the rewards of an episode sum to the return the same seed and actions give in-process;
* ``metadata`` has the step's ``reward_components``, the parsed ``action``, ``format_ok``,
  ``action_valid`` and, on the last step, ``termination_reason`` and ``success``;
  :meth:`EnvgymTextEnv.get_metrics` gives the episode's ``episode/return``,
  ``episode/success_rate``, ``episode/turns`` and ``rewards/<name>/mean`` (SkyRL averages them).

:func:`dataset_rows` writes the rows of a SkyRL dataset for an id and a list of seeds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from envgym.errors import ConfigError, MissingDependencyError
from envgym.integrations.episode import ChatEpisode, EpisodeSettings, check_keys, plain, prompt_messages

try:
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError as err:  # pragma: no cover - the integrations extra installs it
    raise MissingDependencyError("skyrl-gym", "integrations", "envgym.integrations.skyrl") from err

__all__ = ["ENV_CLASS", "EnvgymTextEnv", "dataset_rows", "register"]

#: The name this module registers in ``skyrl_gym`` (a dataset row's ``env_class``).
ENV_CLASS = "envgym"


class EnvgymTextEnv(BaseTextEnv):
    """An envgym single-agent text env as a SkyRL-gym ``BaseTextEnv`` (see the module docstring).

    Args:
        env_config: the env's block of SkyRL's config (``environment.skyrl_gym.<env_class>``):
            default settings, checked strictly.
        extras: the dataset row's extras: per-episode settings (``env_id``, ``seed``, ...); other
            columns are ignored. SkyRL's generator adds its ``max_turns`` here.
        defaults: settings under ``env_config`` (what :func:`register` was given).
    """

    def __init__(
        self,
        env_config: Mapping[str, Any] | None = None,
        extras: Mapping[str, Any] | None = None,
        *,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        config = {**plain(dict(defaults or {})), **plain(dict(env_config or {}))}
        self.settings = EpisodeSettings.from_mapping(extras or {}, defaults=config, strict=False)
        self.episode = ChatEpisode(self.settings)
        self.max_turns = self.settings.max_turns or 0  # BaseTextEnv's attribute; 0: the env's own limit

    def init(self, prompt: list[dict[str, Any]] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Reset the env: ``prompt`` (the dataset's, often empty) then envgym's system message, unless
        ``prompt`` has its own, and the first observation as a user message; metadata: id, seed, task."""
        messages = self.episode.reset()
        task = self.episode.info.get("task")
        meta = {"env_id": self.settings.env_id, "seed": self.settings.seed, "task": plain(_task_dict(task))}
        return prompt_messages(prompt, messages), meta

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One LLM reply: the next observation as a user message (none once done), reward, done, metadata."""
        step = self.episode.step(action)
        self.turns = self.episode.turns
        return BaseTextEnvStepOutput(
            observations=step.messages, reward=step.reward, done=step.done, metadata=step.metadata()
        )

    def get_metrics(self) -> dict[str, Any]:
        """The episode's envgym metrics (``episode/return``, ``rewards/<name>/mean``, ...)."""
        return self.episode.metrics()

    def close(self) -> None:
        self.episode.close()


def _task_dict(task: Any) -> Any:
    if task is None or isinstance(task, Mapping):
        return task
    to_dict = getattr(task, "to_dict", None)
    return to_dict() if callable(to_dict) else str(task)


def register(name: str = ENV_CLASS, **defaults: Any) -> None:
    """Register :class:`EnvgymTextEnv` in ``skyrl_gym`` as ``name`` with default settings.

    ``register("wordle", env_id="envgym/Wordle-v0", prompt={"goal_reminder": True})`` lets a dataset
    name ``env_class: wordle`` with only a ``seed`` per row (the config block and the row still win).
    Registering a name again with the same defaults does nothing; a name taken by anything else
    raises :class:`ConfigError`.
    """
    check_keys(defaults, "register() defaults")
    found = skyrl_gym.registry.get(name)
    if found is not None:
        if getattr(found.entry_point, "envgym_defaults", None) == defaults:
            return
        raise ConfigError(f"skyrl_gym already has an env named {name!r} ({found.entry_point!r}); pick another name.")

    def make_env(env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None) -> EnvgymTextEnv:
        return EnvgymTextEnv(env_config, extras, defaults=defaults)

    make_env.envgym_defaults = dict(defaults)  # type: ignore[attr-defined]
    skyrl_gym.register(id=name, entry_point=make_env)


def dataset_rows(
    env_id: str,
    seeds: Iterable[int],
    *,
    env_class: str = ENV_CLASS,
    env_kwargs: Mapping[str, Any] | None = None,
    url: str | None = None,
    data_source: str | None = None,
) -> list[dict[str, Any]]:
    """The rows of a SkyRL dataset (write them to parquet) that play ``env_id`` once per seed.

    Each row has an empty ``prompt`` (the env writes the prompt in ``init``), the ``env_class`` and
    the episode settings as columns.
    """
    rows = []
    for seed in seeds:
        EpisodeSettings(env_id=env_id, seed=seed, env_kwargs=dict(env_kwargs or {}), url=url)  # fail early
        row: dict[str, Any] = {
            "data_source": data_source or env_id,
            "prompt": [],
            "env_class": env_class,
            "env_id": env_id,
            "seed": seed,
        }
        if env_kwargs:
            row["env_kwargs"] = dict(env_kwargs)
        if url is not None:
            row["url"] = url
        rows.append(row)
    return rows


register()
