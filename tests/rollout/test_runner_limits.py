"""Reply limits through the runner: every turn's AgentInput carries the prompt config's stop strings
and the per-reply token cap (lowered to what is left of the episode's token budget)."""

from __future__ import annotations

from collections.abc import Sequence

import runner_toy_envs  # noqa: F401 - registers envgymtest/Trap-v0

from envgym.rollout import Agent, AgentInput, AgentOutput, PromptConfig, RandomAgent, RunConfig, Runner

TRAP = "envgymtest/Trap-v0"  # guess a number in 1..6; 8 turns


class RecordingChatAgent(Agent):
    """A chat agent that records every input and always answers with ``tokens`` tokens guessing
    ``0`` (an invalid guess), so episodes only end by the turn limit or the token budget."""

    name = "recording-chat"
    chat = True

    def __init__(self, tokens: int = 7) -> None:
        self.tokens = tokens
        self.inputs: list[AgentInput] = []

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        self.inputs.extend(batch)
        ids = list(range(100, 100 + self.tokens))
        return [AgentOutput("<action>0</action>", token_ids=ids, logprobs=[-1.0] * len(ids)) for _ in batch]


class RecordingRandomAgent(RandomAgent):
    """A non-chat agent that records its inputs."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.inputs: list[AgentInput] = []

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        self.inputs.extend(batch)
        return super().act(batch)


def _by_turn(agent: RecordingChatAgent, episode: str) -> list[AgentInput]:
    return sorted((i for i in agent.inputs if i.episode_id == episode), key=lambda i: i.turn)


def test_default_prompt_sends_the_closing_action_tag_as_stop() -> None:
    agent = RecordingChatAgent()
    result = Runner(RunConfig(env_id=TRAP, episodes=2, seed=0, max_turns=3), agent).run()
    assert len(agent.inputs) == 6  # 2 episodes x 3 turns
    assert all(i.stop == ("</action>",) and i.max_new_tokens is None for i in agent.inputs)
    assert all(t.termination_reason == "max_turns" for t in result.trajectories)


def test_stop_strings_follow_the_action_tags_as_written() -> None:
    agent = RecordingChatAgent()
    prompt = PromptConfig(action_tags=("Move", "answer"))
    Runner(RunConfig(env_id=TRAP, episodes=1, seed=0, max_turns=2, prompt=prompt), agent).run()
    assert [i.stop for i in agent.inputs] == [("</Move>", "</answer>")] * 2

    for prompt in (PromptConfig(stop_at_action=False), PromptConfig(action_tags=())):
        agent = RecordingChatAgent()
        Runner(RunConfig(env_id=TRAP, episodes=1, seed=0, max_turns=2, prompt=prompt), agent).run()
        assert [i.stop for i in agent.inputs] == [(), ()]


def test_per_reply_cap_is_lowered_to_the_budget_left() -> None:
    # 7 tokens a reply, budget 25, cap 10: the turns may use 10, 10, 10, min(10, 25 - 21) = 4;
    # after the 4th reply 28 >= 25 tokens are spent and the episode is truncated by the budget.
    agent = RecordingChatAgent(tokens=7)
    prompt = PromptConfig(max_new_tokens=10, token_budget=25)
    result = Runner(RunConfig(env_id=TRAP, episodes=2, seed=0, prompt=prompt), agent).run()
    for t in result.trajectories:
        assert [i.max_new_tokens for i in _by_turn(agent, t.episode_id)] == [10, 10, 10, 4]
        assert t.extra["truncated_by"] == "token_budget" and len(t.turns) == 4

    agent = RecordingChatAgent(tokens=7)
    prompt = PromptConfig(max_new_tokens=5)
    Runner(RunConfig(env_id=TRAP, episodes=1, seed=0, max_turns=3, prompt=prompt), agent).run()
    assert [i.max_new_tokens for i in agent.inputs] == [5, 5, 5]  # no budget: the cap every turn

    agent = RecordingChatAgent(tokens=7)
    prompt = PromptConfig(token_budget=30)
    Runner(RunConfig(env_id=TRAP, episodes=1, seed=0, prompt=prompt), agent).run()
    assert [i.max_new_tokens for i in agent.inputs] == [30, 23, 16, 9, 2]  # no cap: what is left


def test_non_chat_agents_get_no_reply_limits() -> None:
    agent = RecordingRandomAgent()
    prompt = PromptConfig(max_new_tokens=10, token_budget=25)
    Runner(RunConfig(env_id=TRAP, episodes=2, seed=0, max_turns=3, prompt=prompt), agent).run()
    assert agent.inputs and all(i.stop == () and i.max_new_tokens is None for i in agent.inputs)
