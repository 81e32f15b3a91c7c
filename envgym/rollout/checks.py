"""``check_agent``: does an agent keep the agent protocol?

Authors of new agents run it in their tests, as environment authors run ``check_env``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from envgym.errors import AgentContractError
from envgym.registration import make
from envgym.rollout.agent import Agent, AgentInput, AgentOutput
from envgym.rollout.prompting import Conversation, PromptConfig
from envgym.rollout.runner import RunConfig, Runner

__all__ = ["check_agent"]


def _check_outputs(agent: Agent, batch: Sequence[AgentInput], outputs: Any) -> list[AgentOutput]:
    name = getattr(agent, "name", type(agent).__name__)
    if not isinstance(outputs, list):
        raise AgentContractError(f"{name}.act must return a list, got {type(outputs).__name__}.")
    if len(outputs) != len(batch):
        raise AgentContractError(
            f"{name}.act returned {len(outputs)} outputs for {len(batch)} inputs; it must return one per input."
        )
    for i, output in enumerate(outputs):
        where = f"{name}.act output {i} (episode {batch[i].episode_id})"
        if not isinstance(output, AgentOutput):
            raise AgentContractError(f"{where} is a {type(output).__name__}, expected an AgentOutput.")
        if not isinstance(output.text, str):
            raise AgentContractError(f"{where}: text must be a str, got {type(output.text).__name__}.")
        ids, logprobs = output.token_ids, output.logprobs
        if ids is not None and not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
            raise AgentContractError(f"{where}: token_ids must be non-negative ints, got {ids[:10]!r}...")
        if logprobs is not None:
            if ids is not None and len(ids) != len(logprobs):
                raise AgentContractError(
                    f"{where}: {len(ids)} token_ids but {len(logprobs)} logprobs; they pair up one to one."
                )
            bad = [lp for lp in logprobs if not isinstance(lp, float | int) or not math.isfinite(lp) or lp > 1e-6]
            if bad:
                raise AgentContractError(f"{where}: logprobs must be finite and <= 0, got {bad[:5]!r}.")
        if output.prompt_token_ids is not None and not all(isinstance(t, int) for t in output.prompt_token_ids):
            raise AgentContractError(f"{where}: prompt_token_ids must be ints.")
        if output.finish_reason not in (None, "stop", "length"):
            raise AgentContractError(
                f"{where}: finish_reason must be 'stop', 'length' or None, got {output.finish_reason!r}."
            )
    return outputs


def check_agent(
    agent: Agent,
    env_id: str = "envgym/FrozenLake-v0",
    *,
    seed: int = 0,
    batch_size: int = 3,
    episodes: int = 3,
    max_turns: int = 6,
    batch_invariance: bool = True,
) -> None:
    """Check that ``agent`` keeps the agent protocol on ``env_id``.

    Checks: ``act`` returns a list with one :class:`AgentOutput` per input, in order; texts are
    strings; token ids are non-negative ints paired one to one with finite log-probs <= 0;
    ``finish_reason`` is ``stop``, ``length`` or ``None``; with ``batch_invariance`` an
    episode's output does not depend on which other episodes share its batch or their order
    (true of every deterministic agent and of samplers seeded per episode); a few episodes run
    through the runner without an ``agent_error``; ``reset`` and ``close`` (twice) work.

    Raises:
        AgentContractError: with what was expected and what came.
    """
    agent.reset()
    envs = [make(env_id) for _ in range(batch_size)]
    try:
        batch = []
        for i, env in enumerate(envs):
            obs, info = env.reset(seed=seed + i)
            episode_id = f"check-{i}"
            agent.start_episode(episode_id, env_id, seed + i, member=0)
            messages = Conversation(PromptConfig(), env_id, obs, info).messages() if agent.chat else ()
            sample = getattr(env.unwrapped, "sample_action", None)
            batch.append(AgentInput(episode_id, env_id, obs, info, 0, messages, sample))
        outputs = _check_outputs(agent, batch, agent.act(batch))
        if batch_invariance:
            for i, item in enumerate(reversed(batch)):  # restart so per-episode state is fresh
                agent.end_episode(item.episode_id)
            for i, env in enumerate(envs):
                agent.start_episode(f"check-{i}", env_id, seed + i, member=0)
            reordered = _check_outputs(agent, batch[::-1], agent.act(batch[::-1]))[::-1]
            for i, env in enumerate(envs):
                agent.end_episode(f"check-{i}")
                agent.start_episode(f"check-{i}", env_id, seed + i, member=0)
            alone = _check_outputs(agent, batch[:1], agent.act(batch[:1]))
            for label, other in (("the reversed batch", reordered), ("a batch of one", alone)):
                for a, b in zip(outputs, other, strict=False):
                    if (a.text, a.token_ids) != (b.text, b.token_ids):
                        raise AgentContractError(
                            f"{agent.name}: episode output changed with {label}: {a.text!r:.80} vs {b.text!r:.80}. "
                            "Seed sampling per episode (start_episode gets the seed), or pass batch_invariance=False."
                        )
        for item in batch:
            agent.end_episode(item.episode_id)
    finally:
        for env in envs:
            env.close()
    config = RunConfig(
        env_id=env_id, agent=agent.name, episodes=episodes, seed=seed, max_turns=max_turns, max_retries=0
    )
    result = Runner(config, agent).run()
    errors = [t for t in result.trajectories if not t.scored]
    if errors:
        raise AgentContractError(
            f"{agent.name}: {len(errors)} of {episodes} episodes failed in the runner: {errors[0].errors[-1]}"
        )
    agent.reset()
    agent.close()
    agent.close()
