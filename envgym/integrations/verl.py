"""envgym environments in verl's multi-turn rollout: an agent loop that plays one envgym episode.

verl (0.9) rolls out multi-turn trajectories with *agent loops*
(``verl.experimental.agent_loop.AgentLoopBase``): each dataset row is handed to the loop its
``agent_name`` names, which talks to the rollout server (vLLM / SGLang) in token ids and returns
the trajectory's prompt ids, response ids, response mask (1 for model tokens, 0 for environment
tokens) and, optionally, its reward. :class:`EnvgymAgentLoop` (registered as ``envgym_agent``)
is such a loop for any envgym single-agent text id:

* the row's ``extra_info["envgym"]`` holds the episode settings of
  :class:`~envgym.integrations.episode.EpisodeSettings` (``env_id``, ``seed``, ``env_kwargs``,
  ``url`` of an ``envgym serve`` server, ``prompt`` fields, ``max_turns``); defaults may sit in the
  agent-loop YAML under ``envgym:``; the turn limit defaults to
  ``rollout.multi_turn.max_assistant_turns``;
* the prompt is envgym's system message (unless the row's prompt has its own; the rest of the row's
  prompt, which verl's dataset needs non-empty, is not sent) and the first observation;
* each reply is decoded, parsed as envgym's harness parses it and stepped; the next observation is
  appended as a user message with response mask 0, through verl's own token builder;
* the trajectory's ``reward_score`` is the episode's return (the env's rubric), placed by verl on
  the last response token; ``extra_fields`` carry ``turn_scores`` (each step's reward),
  ``reward_components`` (episode totals) and ``reward_extra_info`` (``success``, ``turns``,
  ``format_ok``, ``valid_action_rate``: the same keys for every id, as verl's batching needs);
* the episode also ends when the response reaches ``rollout.response_length`` (then truncated,
  scored with the return so far).

Config (the YAML a verl user adds; :func:`agent_loop_yaml` writes it)::

    # envgym_agent_loops.yaml
    - name: envgym_agent
      _target_: envgym.integrations.verl.EnvgymAgentLoop
      envgym: {"prompt": {"show_admissible": true}}    # optional defaults

    # trainer overrides
    actor_rollout_ref.rollout.mode=async
    actor_rollout_ref.rollout.multi_turn.enable=true
    actor_rollout_ref.rollout.multi_turn.max_assistant_turns=8
    actor_rollout_ref.rollout.agent.agent_loop_config_path=envgym_agent_loops.yaml
    actor_rollout_ref.rollout.agent.default_agent_loop=envgym_agent

and the data files from :func:`dataset_rows` (``agent_name: envgym_agent`` in every row).

Importing this module needs no verl: the class is built from verl's ``AgentLoopBase`` when first
used (:func:`agent_loop_class`, or the attribute ``EnvgymAgentLoop`` that verl's worker looks up).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import uuid4

from envgym.errors import ConfigError
from envgym.integrations.episode import ChatEpisode, EpisodeSettings, check_keys, plain, prompt_messages

__all__ = [
    "AGENT_LOOP_TARGET",
    "AGENT_NAME",
    "agent_loop_class",
    "agent_loop_yaml",
    "dataset_rows",
]  # and EnvgymAgentLoop, built on first use

#: The name :class:`EnvgymAgentLoop` is registered under (a row's ``agent_name``).
AGENT_NAME = "envgym_agent"
#: What verl's agent-loop YAML names as ``_target_``.
AGENT_LOOP_TARGET = f"{__name__}.EnvgymAgentLoop"

_loop_class: type | None = None


def agent_loop_class() -> type:
    """``EnvgymAgentLoop``: verl's ``AgentLoopBase`` with :class:`_EpisodeLoop`'s methods, registered
    as ``envgym_agent``. Built on first use (also as ``envgym.integrations.verl.EnvgymAgentLoop``,
    which is how verl's worker finds it from the YAML), since verl's agent loop imports torch, Ray
    and verl's own dependencies: :func:`dataset_rows` and :func:`agent_loop_yaml` work without them.

    Raises:
        ImportError: verl or one of its dependencies is not installed (the message says what to do).
    """
    global _loop_class
    if _loop_class is None:
        try:
            from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
        except ImportError as err:
            raise ImportError(
                f"envgym.integrations.verl needs verl with its own dependencies, and importing verl failed ({err}). "
                "Install verl as its documentation says (e.g. pip install 'verl[vllm]'); envgym's setup installs "
                "verl with --no-deps, which does not bring tensordict, hydra-core or codetiming."
            ) from err
        namespace = {"__module__": __name__, "__qualname__": "EnvgymAgentLoop", "__doc__": _EpisodeLoop.__doc__}
        namespace["output_class"] = AgentLoopOutput
        _loop_class = register(AGENT_NAME)(type("EnvgymAgentLoop", (_EpisodeLoop, AgentLoopBase), namespace))
    return _loop_class


def __getattr__(name: str) -> Any:
    if name == "EnvgymAgentLoop":
        return agent_loop_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _EpisodeLoop:
    """Plays one envgym episode per dataset row in verl's rollout (see the module docstring).

    Args:
        envgym: default episode settings (from the agent-loop YAML); a row's
            ``extra_info["envgym"]`` wins over them.
        args, kwargs: what verl's ``AgentLoopWorker`` passes every agent loop.
    """

    output_class: Any  # verl's AgentLoopOutput, set when the class is built
    # Set by verl's AgentLoopBase.__init__:
    rollout_config: Any
    tokenizer: Any
    server_manager: Any
    loop: Any

    def __init__(self, *args: Any, envgym: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.defaults = plain(dict(envgym or {}))
        check_keys(self.defaults, "agent loop config")
        multi_turn = self.rollout_config.multi_turn
        self.max_assistant_turns = multi_turn.max_assistant_turns or None
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length

    def settings(self, extra_info: Any) -> EpisodeSettings:
        """The episode settings of a row: ``extra_info["envgym"]`` over the YAML's, over verl's turn limit."""
        row = extra_info.get("envgym") if isinstance(extra_info, Mapping) else None
        if row is None:
            raise ConfigError(
                "an envgym_agent row needs its episode in extra_info['envgym'], e.g. "
                "{'env_id': 'envgym/Wordle-v0', 'seed': 7}: build rows with envgym.integrations.verl.dataset_rows."
            )
        defaults = dict(self.defaults)
        defaults.setdefault("max_turns", self.max_assistant_turns)
        return EpisodeSettings.from_mapping(row, defaults=defaults)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        settings = self.settings(kwargs.get("extra_info"))
        episode = await self.loop.run_in_executor(None, ChatEpisode, settings)
        try:
            return await self._play(episode, sampling_params, kwargs)
        finally:
            await self.loop.run_in_executor(None, episode.close)

    async def _play(self, episode: ChatEpisode, sampling_params: dict[str, Any], kwargs: dict) -> Any:
        system = [m for m in plain(list(kwargs.get("raw_prompt") or [])) if m.get("role") == "system"]
        messages = prompt_messages(system, await self.loop.run_in_executor(None, episode.reset))
        prompt_ids = await self.ct_build_initial_tokens(messages)
        initial_prompt_length = len(prompt_ids)
        request_id = uuid4().hex
        response_mask: list[int] = []
        logprobs: list[float] | None = None
        turn_scores: list[float] = []
        timing = {"generate_sequences": 0.0, "tool_calls": 0.0}
        observations_sent = 0
        truncated_by_length = False
        while True:
            t0 = time.perf_counter()
            output = await self.server_manager.generate(
                request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling_params
            )
            timing["generate_sequences"] += time.perf_counter() - t0
            if output.log_probs and logprobs is None:
                logprobs = [0.0] * len(response_mask)  # earlier environment tokens carry no log-prob
            merged, response_mask, aligned = await self.ct_merge_assistant_token(
                prompt_ids, output.token_ids, response_mask, logprobs, assistant_logprobs=output.log_probs or None
            )
            prompt_ids = merged.token_ids
            if aligned is not None:
                logprobs = aligned
            reply = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            t0 = time.perf_counter()
            step = await self.loop.run_in_executor(None, episode.step, reply)
            timing["tool_calls"] += time.perf_counter() - t0
            turn_scores.append(step.reward)
            if step.done:
                break
            if len(response_mask) >= self.response_length:
                truncated_by_length = True
                break
            previous = [*messages, {"role": "assistant", "content": reply}]
            messages = [*previous, *step.messages]
            merged, mask, aligned = await self.ct_merge_context_msg(
                previous, messages, prompt_ids, response_mask, logprobs
            )
            if len(mask) >= self.response_length:
                truncated_by_length = True
                break
            prompt_ids, response_mask = merged.token_ids, mask
            observations_sent += 1
            if aligned is not None:
                logprobs = aligned

        response_ids = prompt_ids[len(prompt_ids) - len(response_mask) :]
        metrics = episode.metrics()
        info = {
            "success": metrics["episode/success_rate"],
            "turns": metrics["episode/turns"],
            "format_ok": metrics.get("episode/format_ok", 0.0),
            "valid_action_rate": metrics.get("episode/valid_action_rate", 0.0),
        }
        end = episode.end
        return self.output_class(
            prompt_ids=prompt_ids[:initial_prompt_length],
            response_ids=response_ids[: self.response_length],
            response_mask=response_mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=episode.episode_return,
            num_turns=episode.turns + observations_sent + 1,  # as verl counts: replies, env messages, the prompt
            metrics=timing,
            extra_fields={
                "turn_scores": turn_scores,
                "tool_rewards": [],
                "reward_components": episode.reward_components,
                "reward_extra_info": info,
                "envgym": {
                    "env_id": episode.settings.env_id,
                    "seed": episode.settings.seed,
                    "termination_reason": "length" if truncated_by_length else (end.reason.value if end else None),
                },
            },
        )


def agent_loop_yaml(name: str = AGENT_NAME, **defaults: Any) -> str:
    """The agent-loop YAML file verl reads (``rollout.agent.agent_loop_config_path``): one entry
    ``name`` -> :data:`AGENT_LOOP_TARGET`, with default episode settings under ``envgym`` when given
    (``agent_loop_yaml(env_kwargs={"max_turns": 6})``)."""
    check_keys(plain(defaults), "agent loop config")
    text = f"- name: {json.dumps(name)}\n  _target_: {AGENT_LOOP_TARGET}\n"
    if defaults:
        text += f"  envgym: {json.dumps(plain(defaults), sort_keys=True)}\n"  # JSON is YAML
    return text


def dataset_rows(
    env_id: str,
    seeds: Iterable[int],
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    url: str | None = None,
    agent_name: str = AGENT_NAME,
    split: str = "train",
) -> list[dict[str, Any]]:
    """The rows of a verl dataset (write them to parquet) that play ``env_id`` once per seed.

    ``prompt`` is a one-line label (verl's dataset filters on prompt length, so it cannot be empty);
    the agent loop sends envgym's own prompt instead.
    """
    rows = []
    for index, seed in enumerate(seeds):
        settings: dict[str, Any] = {"env_id": env_id, "seed": seed}
        if env_kwargs:
            settings["env_kwargs"] = dict(env_kwargs)
        if url is not None:
            settings["url"] = url
        EpisodeSettings.from_mapping(settings)  # a bad seed or kwargs fail here, not on a GPU
        rows.append(
            {
                "data_source": env_id,
                "prompt": [{"role": "user", "content": f"{env_id} seed {seed}"}],
                "agent_name": agent_name,
                "extra_info": {"index": index, "split": split, "envgym": settings},
            }
        )
    return rows
