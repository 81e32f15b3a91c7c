"""Any single-agent envgym id as a verifiers environment (verifiers 0.4, the ``verifiers.v1`` stack).

verifiers 0.4 splits an environment into a *taskset* (the rows), an *env* (how one row becomes
one episode) and a *harness* (the program that talks to the model). This module is one plugin
holding all three, so ``vf-eval``, prime-rl's env servers and :func:`load_environment` load it:

* :class:`EnvgymTaskset`: one row per seed of an envgym id. The row's prompt is the episode's
  first user message and its system prompt envgym's own (:class:`envgym.rollout.Conversation`
  renders both from ``env.reset(seed)``, exactly as ``envgym run`` prompts a chat model).
* :class:`EnvgymEnv`: plays one row. It resets the env with the row's seed, holds the model's
  conversation open (``agent.interaction``), and each turn parses the reply into an action with
  :meth:`Conversation.parse` (the last ``<action>...</action>`` block), steps the env and sends
  the next observation back, formatted by :meth:`Conversation.record` (valid actions, the
  format note after a reply without an action block). The episode ends where envgym's harness
  ends it (:func:`envgym.rollout.ending.episode_end`: the env ends it, or ``max_turns``).
* :class:`EnvgymChatHarness`: a tool-less chat loop run in this process, one model call per
  turn through verifiers' interception endpoint (so verifiers records every call in its trace,
  tokens included); it needs no container, no ``uv`` and no network.

Scores: the trace's reward is :data:`RETURN_REWARD`, the episode return (the sum of the step
rewards of envgym's rubric, what ``envgym run`` records as ``total_reward``); each reward
component's episode sum is a verifiers metric under the component's name, next to ``success``,
``turns``, ``invalid_actions`` and ``format_errors``; ``trace.info["envgym"]`` keeps the
termination reason and the actions played (the row's data: the env id, seed and kwargs). A
failed model call leaves the trace with its error and no return: never a score of zero.

Not envgym's: the token limits and sampling are verifiers' (``--sampling.max-tokens``,
``--env.agent.max-output-tokens``), and the model is sent no stop strings, so its whole reply
stays in verifiers' transcript; the action is read from the reply cut at the first ``</action>``
(:func:`cut_at_stop`), the action envgym's harness would take from a server that stops there.

Loading: verifiers resolves a taskset id to a top-level module (``envgym-verifiers`` ->
``envgym_verifiers``). importing this module makes that name import it in this process;
for the ``vf-eval`` command (and prime-rl, whose env servers are other processes) put
:func:`plugin_dir` on ``PYTHONPATH``, or run ``python -m envgym.integrations.verifiers`` with
``vf-eval``'s arguments::

    PYTHONPATH=$(python -c "import envgym.integrations.verifiers as m; print(m.plugin_dir())") \\
        vf-eval envgym-verifiers --env.taskset.env-id envgym/Wordle-v0 --env.taskset.num-examples 5 \\
        -m MODEL --client.base-url http://127.0.0.1:8000/v1 --client.api-key-var OPENAI_API_KEY --no-push

Multi-agent ids (PettingZoo) are refused with an error saying so; envgym's single-agent games
(``envgym/TicTacToe-v0``, ``envgym/ConnectFour-v0``) already play a built-in opponent. With
``url`` the env runs behind ``envgym serve`` (:func:`envgym.remote.make`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import envgym
from envgym import remote
from envgym.errors import ConfigError, EnvgymError, MissingDependencyError, suggest
from envgym.rollout.ending import EpisodeEnd, episode_end
from envgym.rollout.prompting import Conversation, PromptConfig
from envgym.rollout.records import json_safe

try:
    import httpx
    import verifiers.v1 as vf
    from pydantic import Field, field_validator, model_validator
    from verifiers.v1.cli.eval.main import main as vf_eval_main
    from verifiers.v1.dialects.chat import message_to_wire
    from verifiers.v1.errors import MODEL_TRANSPORT_ERROR_EXIT_CODE
except ImportError as err:  # pragma: no cover - the integrations extra is installed in CI
    raise MissingDependencyError("verifiers", "integrations", "envgym.integrations.verifiers") from err

__all__ = [
    "RETURN_REWARD",
    "TASKSET_ID",
    "EnvgymChatHarness",
    "EnvgymChatHarnessConfig",
    "EnvgymData",
    "EnvgymEnv",
    "EnvgymEnvConfig",
    "EnvgymTask",
    "EnvgymTaskset",
    "EnvgymTasksetConfig",
    "cut_at_stop",
    "load_environment",
    "main",
    "plugin_dir",
]

#: The taskset id verifiers loads this plugin by (its module name is ``envgym_verifiers``).
TASKSET_ID = "envgym-verifiers"
#: The name of the one weighted reward on every trace: the episode return.
RETURN_REWARD = "episode_return"
_MODULE_NAME = "envgym_verifiers"
#: Most rows one taskset may hold (each row resets its env once when the rows are read).
MAX_EXAMPLES = 100_000


def plugin_dir() -> str:
    """The folder holding the ``envgym_verifiers`` module: put it on ``PYTHONPATH`` so ``vf-eval``
    and prime-rl's env servers import this plugin by the id :data:`TASKSET_ID`."""
    return str(Path(__file__).resolve().parent / "verifiers_plugin")


def _register_module_name() -> None:
    """Make ``import envgym_verifiers`` give this module (verifiers imports plugins by that name)."""
    sys.modules.setdefault(_MODULE_NAME, sys.modules[__name__])


# -- the rows ---------------------------------------------------------------------------------------


class EnvgymTasksetConfig(vf.TasksetConfig):
    """Which envgym episodes the rows are, under ``--env.taskset.*``."""

    env_id: str = ""
    """The envgym id every row plays (``envgym/Wordle-v0``); required."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for ``envgym.make`` (``difficulty``, ``reward_wrappers``, ...)."""
    split: str | None = None
    """Task split passed to the env as ``split=`` (``train``, ``test``); None: the env's default."""
    seeds: list[int] | None = None
    """The reset seed of each row; None: ``first_seed, first_seed + 1, ...`` (``num_examples`` of them)."""
    first_seed: int = 0
    """First seed when ``seeds`` is not given."""
    num_examples: int = Field(10, ge=1, le=MAX_EXAMPLES)
    """Rows when ``seeds`` is not given."""
    max_turns: int | None = Field(None, ge=1)
    """envgym's harness turn limit (truncates with reason ``max_turns``); None: the env's own limit."""
    url: str | None = None
    """Play the env behind ``envgym serve`` at this address (``ws://127.0.0.1:8000``) instead of in-process."""
    prompt: dict[str, Any] = Field(default_factory=dict)
    """envgym prompt settings (:class:`envgym.rollout.PromptConfig` fields: ``system_prompt``,
    ``action_tags``, ``show_admissible``, ...). History is always the full conversation."""

    @field_validator("seeds")
    @classmethod
    def _check_seeds(cls, seeds: list[int] | None) -> list[int] | None:
        if seeds is not None and not 1 <= len(seeds) <= MAX_EXAMPLES:
            raise ValueError(f"seeds must list 1 to {MAX_EXAMPLES} seeds, got {len(seeds)}")
        if seeds is not None and len(set(seeds)) != len(seeds):
            repeated = sorted({s for s in seeds if seeds.count(s) > 1})
            raise ValueError(f"seeds must be distinct (a row per seed; repeat rollouts with -r), got {repeated} twice")
        return seeds

    @model_validator(mode="after")
    def _check_env(self) -> EnvgymTasksetConfig:
        # Here, so vf-eval shows a bad id or prompt setting as a config error, before any work.
        if self.env_id and self.url is None:
            try:
                check_single_agent(self.env_id)
            except KeyError as err:  # UnknownEnvError; pydantic reports only ValueError
                raise ValueError(str(err)) from None
        self.prompt_config()
        return self

    def row_seeds(self) -> list[int]:
        """The seed of each row, in order."""
        if self.seeds is not None:
            return list(self.seeds)
        return list(range(self.first_seed, self.first_seed + self.num_examples))

    def make_kwargs(self) -> dict[str, Any]:
        """What ``envgym.make`` receives: ``env_kwargs`` plus ``split`` when it is set."""
        kwargs = dict(self.env_kwargs)
        if self.split is not None:
            kwargs["split"] = self.split
        return kwargs

    def prompt_config(self) -> PromptConfig:
        """The envgym prompt config, checked: verifiers keeps the whole conversation, so only
        ``history='full'`` can hold."""
        config = PromptConfig.from_dict(self.prompt)
        if config.history != "full":
            raise ConfigError(
                f"prompt.history={config.history!r} cannot hold under verifiers, which sends the model the "
                f"whole conversation; leave history at 'full'."
            )
        for name, knob in (
            ("max_new_tokens", "--sampling.max-tokens"),
            ("token_budget", "--env.agent.max-output-tokens"),
        ):
            if getattr(config, name) is not None:
                raise ConfigError(
                    f"prompt.{name} is not applied under verifiers, which owns the token limits: use {knob} instead."
                )
        return config


class EnvgymData(vf.TaskData):
    """One row: an envgym episode (id, seed, kwargs) and its first observation as the prompt."""

    env_id: str
    seed: int
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    url: str | None = None
    max_turns: int | None = None
    prompt_settings: dict[str, Any] = Field(default_factory=dict)
    """The :class:`PromptConfig` fields the row was prompted with (the env re-renders each turn with them)."""
    envgym_task: dict[str, Any] = Field(default_factory=dict)
    """``info["task"]`` of the reset (the goal, the level, ...), JSON-safe."""


class EnvgymTask(vf.Task[EnvgymData, vf.State, vf.TaskConfig]):
    """An envgym episode. Its scores are recorded by :class:`EnvgymEnv` as it plays."""

    @property
    def key(self) -> str:
        return f"{self.data.env_id}#{self.data.seed}"


class EnvgymTaskset(vf.Taskset[EnvgymTask, EnvgymTasksetConfig]):
    """The rows of one envgym id, one per seed (see :class:`EnvgymTasksetConfig`).

    Rows are built lazily: each resets its env once to render the prompt, so ``-n 5`` of a long
    list costs five resets.
    """

    def __init__(self, config: EnvgymTasksetConfig) -> None:
        super().__init__(config)
        if not config.env_id:
            raise ConfigError(
                "the envgym taskset needs an env id: set --env.taskset.env-id (e.g. envgym/Wordle-v0), or call "
                "envgym.integrations.verifiers.load_environment('envgym/Wordle-v0')."
            )
        if config.url is None:
            check_single_agent(config.env_id)
        else:
            check_single_agent_served(config.url, config.env_id)
        self.prompt_config = config.prompt_config()

    def load(self) -> Iterator[EnvgymTask]:
        config = self.config
        kwargs = config.make_kwargs()
        env = make_env(config.env_id, kwargs, config.url)
        try:
            for seed in config.row_seeds():
                observation, info = env.reset(seed=seed)
                conv = Conversation(self.prompt_config, config.env_id, _text(observation), info)
                yield EnvgymTask(
                    EnvgymData(
                        name=f"{config.env_id}#{seed}",
                        prompt=conv.messages()[-1]["content"],
                        system_prompt=conv.system or None,
                        env_id=config.env_id,
                        seed=seed,
                        env_kwargs=json_safe(kwargs),
                        url=config.url,
                        max_turns=config.max_turns,
                        prompt_settings=self.prompt_config.to_dict(),
                        envgym_task=json_safe(dict(info.get("task") or {})),
                    ),
                    config.task,
                )
        finally:
            env.close()


# -- one episode -----------------------------------------------------------------------------------


class EnvgymEnvConfig(vf.EnvConfig):
    """The envgym env's config: one seat, ``agent``, the policy under evaluation or training."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The seat (``--env.agent.*``). Its harness runs in this process, so the runtime is local."""


@dataclass
class EpisodeScore:
    """What one episode scored, as envgym's harness records it (``Trajectory``'s fields)."""

    total_reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    invalid_actions: int = 0
    format_errors: int = 0
    success: bool = False
    end: EpisodeEnd | None = None

    def add_step(self, action: str, reward: float, info: Mapping[str, Any], format_ok: bool) -> None:
        self.actions.append(action)
        self.total_reward += float(reward)
        for key, value in (info.get("reward_components") or {}).items():
            self.reward_components[key] = self.reward_components.get(key, 0.0) + float(value)
        self.invalid_actions += not info.get("action_valid", True)
        self.format_errors += not format_ok
        self.success = bool(info.get("success", False))

    def record(self, trace: Any) -> None:
        """Put the scores on a verifiers trace: the return as the reward, the rest as metrics."""
        trace.record_reward(RETURN_REWARD, self.total_reward, 1.0)
        for key, value in self.reward_components.items():
            trace.record_metric(key, value)
        trace.record_metric("success", float(self.success))
        trace.record_metric("turns", float(len(self.actions)))
        trace.record_metric("invalid_actions", float(self.invalid_actions))
        trace.record_metric("format_errors", float(self.format_errors))
        end = self.end
        trace.info["envgym"] = {
            # No end: verifiers cut the exchange (the seat's max_turns or token limits), a harness cut.
            "termination_reason": str(end.reason) if end is not None else "max_turns",
            "truncated_by": end.truncated_by if end is not None else "verifiers_limit",
            "actions": list(self.actions),
        }


class EnvgymEnv(vf.Env[EnvgymEnvConfig]):
    """Plays one row: the envgym env steps in this process (or behind ``envgym serve``), the model
    answers each observation, and the episode ends where envgym's harness would end it."""

    async def run(self, task: EnvgymTask, agents: Any) -> None:
        data = task.data
        config = PromptConfig.from_dict(data.prompt_settings)
        # One thread per episode: envs that hold a browser page (Playwright's sync API) must be
        # called from the thread that made them.
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="envgym-verifiers")
        loop = asyncio.get_running_loop()

        async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
            return await loop.run_in_executor(worker, lambda: fn(*args, **kwargs))

        try:
            env = await call(make_env, data.env_id, data.env_kwargs, data.url)
            try:
                await self._play(task, agents, env, config, call)
            finally:
                await call(env.close)
        finally:
            worker.shutdown(wait=False)  # never block the event loop on a stuck env call

    async def _play(self, task: EnvgymTask, agents: Any, env: Any, config: PromptConfig, call: Any) -> None:
        data = task.data
        observation, info = await call(env.reset, seed=data.seed)
        conv = Conversation(config, data.env_id, _text(observation), info)
        # (The system prompt may differ on purpose: --env.taskset.system-prompt replaces it.)
        if conv.messages()[-1]["content"] != data.prompt:
            raise EnvgymError(
                f"{data.env_id!r} reset with seed {data.seed} gave another first observation than the row's prompt: "
                f"the env's reset is not deterministic for this seed (or its kwargs changed since the rows were read)."
            )
        score = EpisodeScore(reward_components=dict.fromkeys(info.get("reward_components") or {}, 0.0))
        async with agents.agent.interaction(task) as interaction:
            segment = await interaction.turn()
            while not segment.terminated:
                reply = cut_at_stop(segment.last_reply, conv.stop)
                parsed = conv.parse(reply)
                observation, reward, terminated, truncated, info = await call(env.step, parsed.action)
                score.add_step(parsed.action, reward, info, parsed.format_ok)
                conv.record(reply, parsed, _text(observation), info)
                score.end = episode_end(
                    terminated=bool(terminated),
                    truncated=bool(truncated),
                    info=info,
                    turns=len(score.actions),
                    max_turns=data.max_turns,
                    turns_exhausted=conv.turns_exhausted,
                    budget_exhausted=conv.budget_exhausted,
                )
                if score.end is not None:
                    break
                segment = await interaction.turn(conv.messages()[-1]["content"])
            if not interaction.trace.errors:
                # Before the close, so verifiers' own "rollout done" log line shows the return.
                score.record(interaction.trace)
        trace = interaction.trace
        if not trace.ok:
            # The model call or the harness failed (the error is on the trace): an infrastructure
            # failure is no score, so the trace keeps no return to be trained or ranked on.
            trace.rewards.pop(RETURN_REWARD, None)
            trace.info["envgym"] = {"termination_reason": "error", "actions": list(score.actions)}


# -- the model -------------------------------------------------------------------------------------


class EnvgymChatHarnessConfig(vf.HarnessConfig):
    """The in-process chat harness (``--env.agent.harness.*``)."""

    request_timeout_s: float = Field(600.0, gt=0)
    """Seconds one model call may take."""


class EnvgymChatHarness(vf.Harness[EnvgymChatHarnessConfig]):
    """One chat completion per turn, called from this process through verifiers' interception
    endpoint (which records it on the trace): no tools, no program to install, no container."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: Any,
        tool_interception_url: str | None = None,
    ) -> Any:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages.extend(message_to_wire(message) for message in prompt)
        # Sampling (temperature, max_tokens, ...) is the run's: the interception server applies it.
        body: dict[str, Any] = {"model": ctx.model, "messages": messages}
        timeout = httpx.Timeout(self.config.request_timeout_s, connect=30.0)
        try:
            async with httpx.AsyncClient(timeout=timeout) as client:
                response = await client.post(
                    endpoint.rstrip("/") + "/chat/completions",
                    json=body,
                    headers={"Authorization": f"Bearer {secret}"},
                )
        except httpx.HTTPError as err:
            return vf.ProgramResult(MODEL_TRANSPORT_ERROR_EXIT_CODE, "", f"model call failed: {err!r}")
        if response.status_code >= 400:
            # The interception server keeps the provider's own error for the trace; this names the call.
            return vf.ProgramResult(1, "", f"model call answered HTTP {response.status_code}: {response.text[:2000]}")
        return vf.ProgramResult(0, "", "")


# -- entry points ----------------------------------------------------------------------------------


def load_environment(
    env_id: str,
    *,
    num_examples: int = 10,
    split: str | None = None,
    seeds: Sequence[int] | None = None,
    first_seed: int = 0,
    max_turns: int | None = None,
    url: str | None = None,
    prompt: Mapping[str, Any] | None = None,
    agent: Mapping[str, Any] | None = None,
    **env_kwargs: Any,
) -> EnvgymEnv:
    """A verifiers environment (:class:`EnvgymEnv`) playing the envgym id ``env_id``.

    Args:
        env_id: a single-agent envgym id (``envgym/Wordle-v0``).
        num_examples: rows when ``seeds`` is not given (seeds ``first_seed ...``).
        split: task split passed to the env as ``split=``; None: the env's default.
        seeds: the reset seed of each row.
        first_seed: the first seed when ``seeds`` is not given.
        max_turns: envgym's harness turn limit; None: the env's own.
        url: play the env behind ``envgym serve`` at this address.
        prompt: :class:`envgym.rollout.PromptConfig` fields.
        agent: verifiers ``AgentConfig`` fields of the seat (``max_turns``, ``timeout``, ...).
        env_kwargs: keyword arguments for ``envgym.make``.

    Raises:
        UnknownEnvError: ``env_id`` is not registered (with the closest ids).
        ConfigError: ``env_id`` is multi-agent, or a setting is malformed.
    """
    if url is None:
        check_single_agent(env_id)  # UnknownEnvError (with "did you mean") before any config is built
    taskset = {
        "id": TASKSET_ID,
        "env_id": env_id,
        "env_kwargs": dict(env_kwargs),
        "split": split,
        "seeds": None if seeds is None else list(seeds),
        "first_seed": first_seed,
        "num_examples": num_examples,
        "max_turns": max_turns,
        "url": url,
        "prompt": dict(prompt or {}),
    }
    data: dict[str, Any] = {"taskset": taskset}
    if agent is not None:
        data["agent"] = dict(agent)
    try:
        config = vf.resolve_env_config(data)
    except ValueError as err:  # pydantic's ValidationError names each bad field
        raise ConfigError(f"bad verifiers settings for {env_id!r}: {err}") from err
    return vf.load_environment(config)


def main(argv: Sequence[str] | None = None) -> None:
    """``vf-eval`` with this plugin importable: ``python -m envgym.integrations.verifiers ARGS``
    takes ``vf-eval``'s own arguments (``envgym-verifiers --env.taskset.env-id ... -m MODEL ...``)."""
    vf_eval_main(list(sys.argv[1:] if argv is None else argv))


# -- helpers ---------------------------------------------------------------------------------------


def check_single_agent(env_id: str) -> None:
    """Raise unless ``env_id`` is a registered single-agent id (unknown ids get "did you mean")."""
    specs = [s for s in envgym.list_envs() if s.id == env_id]
    if not specs:
        envgym.spec(env_id)  # raises UnknownEnvError with the closest ids
    if not any(s.kind == "gymnasium" for s in specs):
        single = [s.id for s in envgym.list_envs() if s.kind == "gymnasium"]
        raise ConfigError(
            f"{env_id!r} is a multi-agent (PettingZoo) environment; the verifiers adapter plays single-agent ids, "
            f"one model against the env. envgym's single-agent games play a built-in opponent "
            f"(envgym/TicTacToe-v0, envgym/ConnectFour-v0).{suggest(env_id, single)}"
        )


def check_single_agent_served(url: str, env_id: str) -> None:
    """Raise unless the ``envgym serve`` server at ``url`` serves ``env_id`` as a single-agent id."""
    if remote.check_served(url, env_id) != "single":
        raise ConfigError(
            f"the server at {url} serves {env_id!r} as a multi-agent (PettingZoo) environment; the verifiers "
            f"adapter plays single-agent ids, one model against the env."
        )


def make_env(env_id: str, kwargs: Mapping[str, Any], url: str | None) -> Any:
    """The env a row plays: ``envgym.make`` in-process, or :func:`envgym.remote.make` at ``url``."""
    if url is None:
        return envgym.make(env_id, **kwargs)
    return remote.make(url, env_id, **kwargs)


_CLOSING_TAG = re.compile(r"</\s*([A-Za-z_][A-Za-z0-9_-]*)\s*>\Z")


def cut_at_stop(reply: str, stop: Sequence[str]) -> str:
    """``reply`` as envgym's harness reads it: its chat agents send the stop strings
    (``Conversation.stop``, ``</action>``), the server ends the reply at the first one, and the
    agent puts a closing tag back when it closes an action left open. Here the model was sent no
    stop strings (verifiers keeps what it wrote), so the reply is cut the same way before parsing:
    the first action block is the action, as under envgym's harness."""
    hits = [(index, s) for s in stop if (index := reply.find(s)) >= 0]
    if not hits:
        return reply
    index, matched = min(hits)
    text = reply[:index]
    tag = _CLOSING_TAG.match(matched)
    if tag is not None:
        name = re.escape(tag[1])
        opened = [m.end() for m in re.finditer(rf"<\s*{name}\s*>", text, re.IGNORECASE)]
        closed = [m.end() for m in re.finditer(rf"<\s*/\s*{name}\s*>", text, re.IGNORECASE)]
        if opened and not (closed and closed[-1] > opened[-1]):
            text += matched
    return text


def _text(observation: Any) -> str:
    if not isinstance(observation, str):
        raise ConfigError(
            f"the verifiers adapter plays text observations; this env returned {type(observation).__name__} "
            f"(an image env: use its text view)."
        )
    return observation


# Importing this module is enough for verifiers to load the plugin by its id in this process (run
# as ``python -m``, the ``__main__`` copy leaves the name to the module imported below).
if __name__ != "__main__":
    _register_module_name()

if __name__ == "__main__":  # pragma: no cover - python -m envgym.integrations.verifiers
    from envgym.integrations.verifiers import main as _main

    with contextlib.suppress(KeyboardInterrupt):
        _main()
