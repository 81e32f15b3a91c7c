"""TRL's ``GRPOTrainer`` on envgym environments, in-process or over ``envgym serve``.

TRL trains multi-turn agents through an *environment factory* (``GRPOTrainer(environment_factory=...)``):
a callable that returns an object whose public methods are the tools the model may call, whose
``reset(**row)`` returns the text appended to the row's prompt, and whose ``get_reward()`` scores
the rollout. This module builds that object for any registered single-agent text id:

* :func:`environment_factory` ``(env_id, **env_kwargs)``: one envgym env per rollout, made with
  ``envgym.make``; with ``url=`` the env runs in an ``envgym serve`` server (on this machine or
  another) through :func:`envgym.remote.make`.
* ``reset(**row)`` resets the env with the row's ``seed`` (and ``split``) and returns the first
  observation, with the valid actions when the env lists them.
* The tools. For an env whose actions are tool calls (``info["tools"]``: SWE-Tools, Service-*,
  Tools-*, MCP-v0; docs/tools.md) each of the env's tools is a tool of its own, with the env's
  name, description and parameters (``tools="auto"``, the default): the model calls
  ``execute_sql(query=...)`` and the call is one ``env.step`` of
  ``{"name": "execute_sql", "arguments": {"query": ...}}``; the env checks the arguments against
  its schema (TRL's schema, built from the method's signature, keeps the names, types, required
  parameters and enums; the env's bounds such as ``maxLength`` still hold). Every other env (and
  ``tools="act"``) has one tool, ``act(action)``: one ``env.step`` of the action text. Either
  way a call returns the next observation, or the end of the episode; a call after the end
  changes nothing and says so.
* ``get_reward()`` is the episode's return: the sum of the env's step rewards, i.e. what envgym's
  rubric gave, exactly what the harness and envgym's trainer score. An episode the env failed in
  (an exception, an infrastructure termination reason) returns ``None``: TRL leaves such a rollout
  out of the group baseline and gives it no advantage, instead of a silent zero. A rollout where
  the model stops calling ``act`` before the env ends the episode keeps the reward of the steps it
  took (``episode/finished`` below says how often that happens).
* :func:`reward_functions` gives one TRL reward function per reward component (the episode
  totals), for TRL to log as ``rewards/<name>/mean`` (the key :func:`envgym.rewards.metrics.metric_key`
  spells); pass them with weight 0, the trained reward being ``get_reward``. The first one also
  logs ``episode/success_rate``, ``episode/turns``, ``episode/unscored`` and ``episode/finished``.
* :func:`dataset` builds the training rows: a prompt, the env id, a seed and a split per episode.
  GRPO repeats each row ``num_generations`` times, so a group plays one task.
* :func:`use_tool_chat_template` gives a tokenizer whose chat template cannot render tool calls
  (SmolLM2's) the Qwen3 template that TRL ships (read from the installed ``trl`` package), which
  TRL also knows how to parse tool calls from.

Not supported: multi-agent ids (one policy and one env per rollout in TRL), observations that are
not text (images, dicts). Several calls in one turn are taken as one step each (in TRL's order),
not as one parallel step.

Example::

    from trl import GRPOConfig, GRPOTrainer
    from envgym.integrations import trl as envgym_trl

    factory = envgym_trl.environment_factory("envgym/FrozenLake-v0", max_turns=8)
    components = envgym_trl.reward_functions(factory)
    trainer = GRPOTrainer(
        model=model,
        processing_class=envgym_trl.use_tool_chat_template(tokenizer),
        train_dataset=envgym_trl.dataset("envgym/FrozenLake-v0", seeds=range(64)),
        reward_funcs=list(components),  # TRL appends get_reward to the list it is given
        args=GRPOConfig(reward_weights=[0.0] * len(components), ...),
        environment_factory=factory,
    )
    trainer.train()
    factory.close()  # TRL never closes its environments (a browser or a sandbox needs it)
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import numbers
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import envgym.remote
from envgym._imports import optional
from envgym.core import TerminationReason
from envgym.errors import ConfigError, EnvgymError, check_choice
from envgym.registration import ENV_ID, make, spec
from envgym.rewards.metrics import episode_totals

__all__ = [
    "EnvgymEnvironment",
    "EnvironmentFactory",
    "EpisodeRecord",
    "dataset",
    "environment_factory",
    "reward_functions",
    "use_tool_chat_template",
]

logger = logging.getLogger(__name__)

#: The prompt of :func:`dataset` rows; ``reset`` appends the first observation to it.
DEFAULT_INSTRUCTION = (
    "You are playing {env_id}. Play by calling the `act` tool with one action at a time, until the episode is over."
)
#: Method names of the environment class that an env's tool may not take (TRL calls ``reset`` and
#: ``get_reward`` itself; ``episode`` is a view).
RESERVED_TOOL_NAMES = frozenset({"reset", "get_reward", "episode", "act"})
#: ``tools=`` modes of :func:`environment_factory`.
TOOL_MODES = ("auto", "act")
#: Python annotations of JSON-schema types (what TRL's schema is rebuilt from).
_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict,
    "array": list,
}

#: Finished episodes a factory keeps in :attr:`EnvironmentFactory.episodes` (the newest).
DEFAULT_HISTORY = 1024


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode played by a TRL rollout, as it was scored.

    Attributes:
        env_id: the environment id.
        seed: the reset seed (the row's ``seed``).
        split: the task split.
        task_id: ``info["task"]["id"]`` at reset.
        actions: every action the model sent through ``act``, in order.
        rewards: the env's reward of each step (its rubric's output).
        reward_components: per component, the sum over the steps.
        total_reward: the sum of ``rewards``: what ``get_reward`` returned.
        success: ``info["success"]`` after the last step.
        termination_reason: how the episode ended (a :class:`~envgym.core.TerminationReason`
            value), ``None`` when the model stopped calling ``act`` before the end.
        error: the env's failure, when it failed (the episode is then not scored).
    """

    env_id: str
    seed: int | None
    split: str | None
    task_id: str
    actions: tuple[str, ...]
    rewards: tuple[float, ...]
    reward_components: dict[str, float] = field(default_factory=dict)
    total_reward: float = 0.0
    success: bool = False
    termination_reason: str | None = None
    error: str | None = None

    @property
    def scored(self) -> bool:
        """False when the env failed: TRL gets ``None`` for it, not a reward."""
        return self.error is None

    @property
    def finished(self) -> bool:
        """True when the env ended the episode (terminated or truncated)."""
        return self.termination_reason is not None


def _tool_text(value: Any) -> str:
    """An action as the env's ``step`` takes it: text as it is, anything else (a number, a JSON
    object the model passed as the argument) as JSON text."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def _seed_of(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 0:
        raise ConfigError(f"a row's 'seed' must be an integer >= 0 or None, got {value!r}.")
    return int(value)


class EnvgymEnvironment:
    """One envgym episode per TRL rollout (TRL makes one instance per concurrent rollout, and
    resets it for every new one).

    The public methods other than ``reset`` and ``get_reward`` are the tools TRL shows the model:
    :meth:`act`, or, for an env with tools, one method per env tool (the factory's
    :attr:`EnvironmentFactory.tools`; ``act`` is then absent). Everything else is private on
    purpose.
    """

    #: The factory this class belongs to (set on the subclass :class:`EnvironmentFactory` makes).
    _factory: EnvironmentFactory

    def __init__(self) -> None:
        self._env: Any = None
        self._split: str | None = None
        self._started = False
        self._begin(None, "")

    # -- TRL's protocol --------------------------------------------------------------------
    def reset(self, **row: Any) -> str:
        """Start the episode of a dataset row (its ``seed``, ``split``; other columns ignored) and
        return the first observation, which TRL appends to the row's prompt."""
        factory = self._factory
        row_env = row.get("env_id")
        if row_env is not None and row_env != factory.env_id:
            raise ConfigError(
                f"this environment factory plays {factory.env_id!r}, but the row names env_id={row_env!r}: "
                "give each id its own factory (a dict environment_factory routes rows by their 'environment')."
            )
        seed = _seed_of(row.get("seed"))
        split = row.get("split")
        if split is not None and not isinstance(split, str):
            raise ConfigError(f"a row's 'split' must be a string such as 'train' or 'test', got {split!r}.")
        split = split or factory.default_split
        try:
            observation, info = self._reset_env(seed, split)
        except Exception as err:
            if isinstance(err, EnvgymError) and not getattr(err, "retryable", False):
                raise  # bad kwargs, an unknown id: trying again cannot help
            # An infrastructure failure (a crashed env, a lost server): a fresh env gets one more try.
            logger.warning("envgym: %s failed to reset (%s); trying once more with a fresh env.", factory.env_id, err)
            self._close_env()
            observation, info = self._reset_env(seed, split)
        self._started = True
        self._begin(seed, str(info.get("task", {}).get("id", "")))
        factory._check_observation(observation)
        return "\n\n" + observation + self._actions_line(info)

    def act(self, action: str) -> str:
        """Take one action in the environment and return what happens next.

        Args:
            action: the action, in the words the environment asks for (for example one of the
                valid actions it lists).

        Returns:
            The next observation, or how the episode ended.
        """
        return self._step(_tool_text(action), "act")

    def _step(self, text: str, tool: str) -> str:
        """One ``env.step`` of ``text`` (the action a call of ``tool`` made)."""
        factory = self._factory
        if not self._started:
            return "No episode is running: nothing happened."
        if self._error is not None:
            return f"The environment failed ({self._error}); this episode is over and will not be scored."
        if self._reason is not None:
            return f"The episode is already over ({self._reason}); this action was not taken. Stop calling {tool}."
        try:
            observation, reward, terminated, truncated, info = self._env.step(text)
        except Exception as err:  # noqa: BLE001 - the env crashed: infrastructure, never a score
            logger.warning("envgym: %s failed to step (%s); the episode is not scored.", factory.env_id, err)
            self._error = f"{type(err).__name__}: {err}"
            self._close_env()
            return f"The environment failed ({self._error}); this episode is over and will not be scored."
        factory.steps += 1
        self._actions.append(text)
        self._rewards.append(float(reward))
        self._components.append(dict(info.get("reward_components", {})))
        self._success = bool(info.get("success", False))
        if terminated or truncated:
            reason = info.get("termination_reason") or ("truncated" if truncated else "terminated")
            self._reason = str(reason)
            if reason in TerminationReason._value2member_map_ and TerminationReason(reason).is_infrastructure:
                self._error = f"the environment ended the episode with {reason!r}"
        factory._check_observation(observation)
        if self._reason is None:
            return observation + self._actions_line(info)
        return f"{observation}\n\nThe episode is over ({self._reason})."

    def get_reward(self) -> float | None:
        """The episode's return (the sum of the env's step rewards); ``None`` when the env failed."""
        record = self.episode
        if self._started and not self._recorded:
            self._recorded = True
            self._factory.episodes.append(record)
        return record.total_reward if record.scored else None

    # -- views -----------------------------------------------------------------------------
    @property
    def episode(self) -> EpisodeRecord:
        """The current (or last) episode as it stands."""
        return EpisodeRecord(
            env_id=self._factory.env_id,
            seed=self._seed,
            split=self._split,
            task_id=self._task_id,
            actions=tuple(self._actions),
            rewards=tuple(self._rewards),
            reward_components=episode_totals(self._components) if self._components else dict(self._zero),
            total_reward=math.fsum(self._rewards),
            success=self._success,
            termination_reason=self._reason,
            error=self._error,
        )

    # -- helpers ---------------------------------------------------------------------------
    def _begin(self, seed: int | None, task_id: str) -> None:
        self._seed = seed
        self._task_id = task_id
        self._actions: list[str] = []
        self._rewards: list[float] = []
        self._components: list[dict[str, float]] = []
        self._zero = dict.fromkeys(self._factory.reward_components, 0.0)
        self._success = False
        self._reason: str | None = None
        self._error: str | None = None
        self._recorded = False

    def _reset_env(self, seed: int | None, split: str) -> tuple[Any, dict[str, Any]]:
        if self._env is None or split != self._split:
            self._close_env()
            self._env = self._factory._take_env(split)
            self._split = split
        observation, info = self._env.reset(seed=seed)
        return observation, info

    def _close_env(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            try:
                env.close()
            except Exception as err:  # noqa: BLE001 - closing is best effort; the env is dropped anyway
                logger.warning("envgym: closing %s failed: %s", self._factory.env_id, err)

    @staticmethod
    def _actions_line(info: Mapping[str, Any]) -> str:
        actions = info.get("admissible_actions")
        if not actions:
            return ""
        return "\n\nValid actions: " + ", ".join(str(a) for a in actions)


class EnvironmentFactory:
    """What :func:`environment_factory` returns: TRL calls it (no arguments) for each environment
    instance it needs, one per concurrent rollout.

    Attributes:
        env_id: the environment id.
        env_kwargs: keyword arguments of every env (``split`` is set per row).
        url: the ``envgym serve`` server the envs run in, or ``None`` (in this process).
        env_class: the class of the instances, named after the id (``FrozenLake_v0``): TRL logs
            ``get_reward`` as ``rewards/<class name>/mean``.
        reward_components: the env's reward component names, in its order.
        tools: the env's tools (OpenAI function schemas) given to the model as tools of their
            own; empty when the one tool is ``act``.
        episodes: the newest scored episodes (:class:`EpisodeRecord`), oldest first.
        steps: ``env.step`` calls made by all instances so far.
        instances: every instance made so far.
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any],
        *,
        url: str | None = None,
        history: int = DEFAULT_HISTORY,
        tools: str = "auto",
    ) -> None:
        if not isinstance(env_id, str) or not ENV_ID.match(env_id):
            raise ConfigError(f"env_id must be a registered id such as 'envgym/FrozenLake-v0', got {env_id!r}.")
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise ConfigError(f"history must be an integer >= 1, got {history!r}.")
        if url is None:
            found = spec(env_id)  # unknown ids fail here, with the closest ones
            if found.multi_agent:
                raise ConfigError(
                    f"{env_id!r} is a multi-agent ({found.kind}) environment; TRL's environment_factory plays one "
                    "policy per env: use a single-agent id (envgym list --kind gymnasium)."
                )
        check_choice("tools", tools, TOOL_MODES)
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self.url = url
        self.default_split: str = self.env_kwargs.pop("split", "train")
        self.episodes: deque[EpisodeRecord] = deque(maxlen=history)
        self.steps = 0
        self.instances: list[EnvgymEnvironment] = []
        # One env made and reset now: bad kwargs, a server that is not there, observations that
        # are not text, or tools that cannot be methods fail here, before any training; the env
        # then serves the first instance.
        self._spare: Any = self._make(self.default_split)
        try:
            observation, info = self._spare.reset(seed=0)
            self._check_observation(observation)
            env_tools = _env_tools(env_id, info) if tools == "auto" else []
        except BaseException:
            self._spare.close()
            raise
        self.reward_components: tuple[str, ...] = tuple(info.get("reward_components", {}))
        #: The env's tools (OpenAI function schemas) that are the model's tools, or empty: ``act``.
        self.tools: list[dict[str, Any]] = env_tools
        match = ENV_ID.match(env_id)
        assert match is not None
        name = re.sub(r"\W", "_", f"{match['name']}_v{match['version']}")
        members: dict[str, Any] = {"_factory": self, "__doc__": f"{env_id} for TRL: {EnvgymEnvironment.__doc__}"}
        if env_tools:
            members["act"] = None  # not a tool here: the env's own tools are
            members.update({t["function"]["name"]: _tool_method(t["function"]) for t in env_tools})
        self.env_class: type[EnvgymEnvironment] = type(name, (EnvgymEnvironment,), members)

    def __call__(self) -> EnvgymEnvironment:
        instance = self.env_class()
        self.instances.append(instance)
        return instance

    def __repr__(self) -> str:
        where = f", url={self.url!r}" if self.url else ""
        return f"EnvironmentFactory({self.env_id!r}{where}, instances={len(self.instances)}, steps={self.steps})"

    def close(self) -> None:
        """Close every instance's env (TRL never closes them; a browser or sandbox env needs it)."""
        for instance in self.instances:
            instance._close_env()
        if self._spare is not None:
            spare, self._spare = self._spare, None
            spare.close()

    def _take_env(self, split: str) -> Any:
        if self._spare is not None and split == self.default_split:
            env, self._spare = self._spare, None
            return env
        return self._make(split)

    def _make(self, split: str) -> Any:
        kwargs = {**self.env_kwargs, "split": split}
        if self.url is None:
            return make(self.env_id, **kwargs)
        env = envgym.remote.make(self.url, self.env_id, **kwargs)
        if isinstance(env, envgym.remote.RemoteParallelEnv):
            env.close()
            raise ConfigError(
                f"{self.env_id!r} is served as a multi-agent (parallel) environment; TRL's environment_factory plays "
                "one policy per env: serve a single-agent id."
            )
        return env

    def _check_observation(self, observation: Any) -> None:
        if not isinstance(observation, str):
            raise ConfigError(
                f"{self.env_id!r} observes {type(observation).__name__} values; TRL's environment_factory takes text "
                "observations only: use a text id (envgym list) or a text view of this env."
            )


def _env_tools(env_id: str, info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The env's tools from a reset's ``info``, checked to make methods (empty: none)."""
    listed = info.get("tools") or []
    if not isinstance(listed, list):
        raise ConfigError(f"{env_id!r} lists info['tools'] as {type(listed).__name__}, not a list of tool schemas.")
    tools = []
    for tool in listed:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(
                f"{env_id!r} has a tool named {name!r}, which cannot be a method name for TRL: "
                "use environment_factory(..., tools='act') (the model then sends the JSON call through act)."
            )
        if name in RESERVED_TOOL_NAMES or name.startswith("_"):
            raise ConfigError(
                f"{env_id!r} has a tool named {name!r}, a name the TRL environment keeps for itself "
                f"({', '.join(sorted(RESERVED_TOOL_NAMES))}, or private): use environment_factory(..., tools='act')."
            )
        tools.append({"type": "function", "function": dict(function)})
    return tools


def _annotation(schema: Any) -> Any:
    """The Python type TRL's schema builder reads back as ``schema``'s JSON type."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(kind, list):  # ["string", "null"]: the first non-null one
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "array":
        items = _annotation(schema.get("items", {}))
        return list[items] if items is not Any else list
    return _JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any


def _tool_method(function: Mapping[str, Any]) -> Callable[..., str]:
    """A method ``name(self, **arguments)`` whose signature and docstring state the tool's schema
    (TRL builds the schema it shows the model from them) and whose call is one env step of
    ``{"name": name, "arguments": arguments}``."""
    name: str = function["name"]
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())

    def call(self: EnvgymEnvironment, **arguments: Any) -> str:
        return self._step(json.dumps({"name": name, "arguments": arguments}), name)

    signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = []
    for key, schema in properties.items():
        if not isinstance(key, str) or not key.isidentifier():
            continue  # not a keyword argument; the env's own schema still names it in its errors
        annotations[key] = _annotation(schema)
        signature.append(
            inspect.Parameter(
                key,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=annotations[key],
                **({} if key in required else {"default": None}),
            )
        )
        text = " ".join(str((schema or {}).get("description") or f"the {key}").split()) or f"the {key}"
        if isinstance(schema, Mapping) and isinstance(schema.get("enum"), list):
            text += f" (choices: {json.dumps(schema['enum'])})"
        lines.append(f"    {key}: {text}")
    description = " ".join(str(function.get("description") or f"The {name} tool.").split())
    call.__name__ = call.__qualname__ = name
    call.__doc__ = description + ("\n\nArgs:\n" + "\n".join(lines) + "\n" if lines else "\n")
    call.__signature__ = inspect.Signature(signature, return_annotation=str)  # type: ignore[attr-defined]
    call.__annotations__ = {**annotations, "return": str}
    return call


def environment_factory(
    env_id: str,
    *,
    url: str | None = None,
    history: int = DEFAULT_HISTORY,
    tools: str = "auto",
    **env_kwargs: Any,
) -> EnvironmentFactory:
    """An environment factory for ``GRPOTrainer(environment_factory=...)`` playing ``env_id``.

    Args:
        env_id: a registered single-agent text id (``envgym/FrozenLake-v0``).
        url: play the env served by ``envgym serve`` at this address (``ws://HOST:PORT``)
            instead of in this process.
        history: how many scored episodes :attr:`EnvironmentFactory.episodes` keeps.
        tools: ``"auto"``: an env with tools (``info["tools"]``) gives the model each of its tools
            as a tool of its own, any other env the one tool ``act``; ``"act"``: always ``act``
            (the model writes the env's JSON call as the action).
        env_kwargs: the env's keyword arguments (``max_turns=8``, ``difficulty="easy"``);
            ``split`` is the default split of rows that do not name one.

    Raises:
        UnknownEnvError: ``env_id`` is not registered (with the closest ids).
        ConfigError: a multi-agent id, an env whose observations are not text, a bad ``url``,
            an env tool whose name cannot be a method (pass ``tools="act"``).
        InvalidKwargsError: kwargs the env refuses.
    """
    return EnvironmentFactory(env_id, env_kwargs, url=url, history=history, tools=tools)


def reward_functions(factory: EnvironmentFactory) -> list[Callable[..., list[float | None]]]:
    """One TRL reward function per reward component of ``factory``'s env: the component's
    episode total of each rollout (``None`` for rollouts of other envs and failed episodes).

    TRL names a reward function's log ``rewards/<function name>/mean``; each function is named
    after its component without the ``_reward`` suffix (``success_reward`` -> ``success``), so the
    keys are those of :func:`envgym.rewards.metrics.metric_key`. ``get_reward`` already trains on
    the env's reward, so give these weight 0 to see the components without counting them twice:
    ``GRPOConfig(reward_weights=[0.0] * len(functions))``.

    The first function also logs, through TRL's ``log_metric``, the episode metrics envgym's
    trainer logs: ``episode/success_rate``, ``episode/turns`` (actions per episode) and
    ``episode/unscored`` (episodes the env failed in) over the scored rollouts, and
    ``episode/finished``: the fraction the env ended, the rest being rollouts where the model
    stopped calling ``act`` first (they keep the reward of the steps they took).
    """
    if not isinstance(factory, EnvironmentFactory):
        raise ConfigError(
            f"expected the EnvironmentFactory that environment_factory() returned, got {type(factory).__name__}."
        )
    return [
        _component_function(factory, component, log_episodes=i == 0)
        for i, component in enumerate(factory.reward_components)
    ]


def _component_function(
    factory: EnvironmentFactory, component: str, *, log_episodes: bool
) -> Callable[..., list[float | None]]:
    env_class = factory.env_class

    def component_total(
        *, environments: list[Any] | None = None, log_metric: Callable[[str, float], None] | None = None, **_: Any
    ) -> list[float | None]:
        if environments is None:
            raise ConfigError(
                f"the reward function of {component!r} reads the rollouts' environments: pass the factory as "
                "GRPOTrainer(environment_factory=...) too."
            )
        totals: list[float | None] = []
        records: list[EpisodeRecord] = []
        for env in environments:
            if type(env) is not env_class:
                totals.append(None)
                continue
            record = env.episode
            records.append(record)
            totals.append(record.reward_components.get(component, 0.0) if record.scored else None)
        if log_episodes and log_metric is not None and records:
            _log_episodes(records, log_metric)
        return totals

    name = component.removesuffix("_reward") or component
    component_total.__name__ = component_total.__qualname__ = name
    component_total.__doc__ = f"The episode total of {factory.env_id}'s {component!r} component."
    return component_total


def _log_episodes(records: list[EpisodeRecord], log_metric: Callable[[str, float], None]) -> None:
    scored = [r for r in records if r.scored]
    log_metric("episode/unscored", float(len(records) - len(scored)))
    if scored:
        log_metric("episode/success_rate", sum(r.success for r in scored) / len(scored))
        log_metric("episode/turns", sum(len(r.actions) for r in scored) / len(scored))
        log_metric("episode/finished", sum(r.finished for r in scored) / len(scored))


def dataset(
    env_id: str,
    *,
    seeds: Iterable[int],
    split: str = "train",
    instruction: str = DEFAULT_INSTRUCTION,
) -> Any:
    """A ``datasets.Dataset`` of training rows for :func:`environment_factory`: one per seed.

    Each row is ``{"prompt": [{"role": "user", "content": instruction}], "env_id": env_id,
    "seed": seed, "split": split}``; ``reset`` appends the episode's first observation to the
    prompt. Procedural envs draw a split's tasks from its seeds, so ``split="test"`` with seeds
    ``0..N-1`` is the held-out set envgym's own trainer evaluates on.

    Args:
        env_id: the environment id.
        seeds: the episode seeds (integers >= 0, at least one).
        split: the task split of every row (one the env accepts).
        instruction: the prompt text (``{env_id}`` is replaced by the id).
    """
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds must name at least one episode seed, got none.")
    checked = [_seed_of(seed) for seed in seeds]
    if any(seed is None for seed in checked):
        raise ConfigError(f"seeds must be integers >= 0, got {seeds!r}.")
    found = spec(env_id)
    env_class = found.load()
    splits = getattr(env_class, "splits", None)
    if splits:
        check_choice("split", split, splits)
    if not isinstance(instruction, str):
        raise ConfigError(f"instruction must be a string, got {type(instruction).__name__}.")
    datasets = optional("datasets", purpose="envgym.integrations.trl.dataset")
    content = instruction.replace("{env_id}", env_id)
    return datasets.Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": content}], "env_id": env_id, "seed": seed, "split": split}
            for seed in checked
        ]
    )


def use_tool_chat_template(tokenizer: Any, *, force: bool = False) -> Any:
    """Give ``tokenizer`` a chat template that renders tool calls, when it lacks one.

    TRL's tool loop needs a template that can show tools, tool calls and tool results, and a
    parser for the model's tool calls. SmolLM2's template (envgym's bundled model and the tiny
    test model) has no tools; it uses the same ``<|im_start|>``/``<|im_end|>`` turns as Qwen, so
    it gets the Qwen3 template that TRL ships, which TRL knows how to parse (``<tool_call>``
    blocks of JSON). A template that already supports tool calling is kept unless ``force``.

    Returns:
        The same tokenizer.
    """
    utils = optional("trl.chat_template_utils", purpose="envgym.integrations.trl.use_tool_chat_template")
    if force or not utils.supports_tool_calling(tokenizer):
        logger.info("envgym: the tokenizer's chat template has no tool calling; using TRL's Qwen3 template.")
        tokenizer.chat_template = utils.qwen3_chat_template
    return tokenizer
