"""The LLM user (any envgym agent or agent spec plays the customer), its recording and exact replay.

The LLM is faked (a scripted agent, and a real HTTP server on loopback speaking the OpenAI chat
API with a fake model): a real model cannot run in CI's time, and the fakes exercise everything
on envgym's side (prompts, roles, seeding, recording, replay, pickling).
"""

from __future__ import annotations

import json
import pickle
import random
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import pytest
from envgym.environments.service.env import ServiceEnv
from envgym.environments.service.tau2 import load_tau2
from envgym.environments.service.user import GREETING, STOP, AgentFromSpec, LLMUser, recorded_replies
from openai_server import FakeOpenAIServer

from envgym.errors import ConfigError, InvalidKwargsError
from envgym.rollout.agent import Agent, AgentInput, AgentOutput
from envgym.testing import check_env

WORDS = ("sure", "maybe", "I think so", "not sure", "hmm")


class FakeCustomer(Agent):
    """A stand-in for an LLM playing the customer: opens with the scenario's reason, answers
    with a word drawn from an RNG seeded by the episode seed, and ends the call on a goodbye."""

    name = "fake-customer"
    chat = True

    def __init__(self) -> None:
        self.rngs: dict[str, random.Random] = {}
        self.started: list[tuple[str, str, int | None]] = []
        self.ended: list[str] = []
        self.inputs: list[AgentInput] = []

    def start_episode(self, episode_id: str, env_id: str, seed: int | None, *, member: int = 0) -> None:
        self.started.append((episode_id, env_id, seed))
        self.rngs[episode_id] = random.Random(seed)

    def end_episode(self, episode_id: str) -> None:
        self.ended.append(episode_id)

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        out = []
        for item in batch:
            self.inputs.append(item)
            last = item.messages[-1]["content"]
            if last == GREETING:
                why = next(
                    line for line in item.messages[0]["content"].splitlines() if line.startswith("Why you call:")
                )
                text = why.removeprefix("Why you call: ")
            elif "bye" in last.lower():
                text = f"Thanks, bye. {STOP}"
            else:
                text = f"{self.rngs[item.episode_id].choice(WORDS)} (turn {item.turn})"
            out.append(AgentOutput(f"  {text}\n"))
        return out


def play(env: Any, seed: int, actions: int = 14) -> list[tuple[Any, ...]]:
    """The agent side: a seeded mix of tool calls and messages, then a goodbye; every step's record."""
    obs, info = env.reset(seed=seed)
    steps: list[tuple[Any, ...]] = [(obs, info.get("user_reply"))]
    rng = random.Random(seed)
    for i in range(actions):
        action = env.unwrapped.sample_action(rng) if i % 3 else "Hello! Could you tell me your email and order id?"
        if i == actions - 1:
            action = "Thank you, goodbye!"
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append(
            (obs, reward, terminated, truncated, info["reward_components"], info["success"], info["user_reply"])
        )
        if terminated or truncated:
            break
    return steps


def infos_of(steps: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [{"user_reply": s[-1]} for s in steps]


def test_an_agent_object_plays_the_user_and_a_replay_is_identical() -> None:
    customer = FakeCustomer()
    env = gymnasium.make("envgym/Service-Retail-v0", user=customer)
    recorded = play(env, seed=5)
    scenario = env.unwrapped.service_task.scenario
    assert recorded[0][1] == scenario.reason_for_call and recorded[0][0].endswith(f"User: {scenario.reason_for_call}")
    replies = recorded_replies(infos_of(recorded))
    assert len(replies) >= 3 and replies[-1] == f"Thanks, bye. {STOP}" and recorded[-1][2]  # the user ended the call
    assert all(r == r.strip() for r in replies)
    # steps where the agent called a tool record no user reply
    assert any(s[-1] is None for s in recorded[1:]) and any(s[-1] is not None for s in recorded[1:])
    # the agent saw the scenario as a system message and the conversation with the roles turned
    last = customer.inputs[-1]
    assert last.messages[0]["role"] == "system" and "Persona:" in last.messages[0]["content"]
    assert [m["role"] for m in last.messages[1:4]] == ["user", "assistant", "user"]
    assert last.messages[1]["content"] == GREETING and last.messages[2]["content"] == replies[0]
    assert "Conversation so far:" in last.observation and last.env_id == "service-user"
    assert customer.started[0][1:] == ("service-user", 5)

    replay = gymnasium.make("envgym/Service-Retail-v0", user_replies=replies)
    assert play(replay, seed=5) == recorded
    # the same run again with the LLM user: its seeded choices are the same too
    assert play(gymnasium.make("envgym/Service-Retail-v0", user=FakeCustomer()), seed=5) == recorded


def test_the_scripted_user_is_replayed_exactly_too() -> None:
    recorded = play(gymnasium.make("envgym/Service-Retail-v0"), seed=11)
    replies = recorded_replies(infos_of(recorded))
    assert replies[0] == recorded[0][1]
    assert play(gymnasium.make("envgym/Service-Retail-v0", user_replies=replies), seed=11) == recorded


def test_a_replay_that_runs_out_of_replies_ends_ungraded() -> None:
    env = ServiceEnv(domain="retail", user_replies=["Hi, I need help with an order.", "It is #W0000001."])
    obs, info = env.reset(seed=0)
    assert (
        obs.endswith("User: Hi, I need help with an order.") and info["user_reply"] == "Hi, I need help with an order."
    )
    obs, *_ = env.step("Which order?")
    assert obs == "User: It is #W0000001."
    obs, reward, terminated, _, info = env.step("Anything else?")
    assert terminated and not info["success"] and reward == 0.0 and info["user_reply"] is None
    assert obs.startswith("[replay] the recording has no user reply left (2 messages)")


def test_the_user_agent_is_started_and_ended_per_episode() -> None:
    customer = FakeCustomer()
    env = ServiceEnv(domain="retail", user=customer)
    env.reset(seed=1)
    env.reset(seed=2)
    env.close()
    assert [s[2] for s in customer.started] == [1, 2]
    assert customer.ended == [customer.started[0][0], customer.started[1][0]]
    assert customer.started[0][0] != customer.started[1][0]


def test_user_arguments_are_checked_at_construction() -> None:
    with pytest.raises(InvalidKwargsError, match="'gpt-4' is not a valid spec.*Known agents"):
        ServiceEnv(user="gpt-4")
    with pytest.raises(InvalidKwargsError, match="agent object \\(with act\\(\\)\\), got 5"):
        ServiceEnv(user=5)
    env = ServiceEnv(user="openai:no-url")  # the kind is checked now, its argument when the agent is built
    with pytest.raises(ConfigError, match="openai agent spec is MODEL@URL"):
        env.reset(seed=0)
    for bad in ([], "hello", [1, 2]):
        with pytest.raises(InvalidKwargsError, match="user_replies must be a non-empty list of strings"):
            ServiceEnv(user_replies=bad)


def test_a_spec_string_builds_the_user_lazily_and_pickles_as_the_spec() -> None:
    env = ServiceEnv(domain="retail", user="hf:smollm2")  # no model is loaded until the user speaks
    assert isinstance(env.user_agent, AgentFromSpec) and env.user_agent._agent is None
    clone = pickle.loads(pickle.dumps(env))
    assert clone.user_agent.spec == "hf:smollm2" and clone.user_agent._agent is None


def test_an_openai_compatible_server_plays_the_user() -> None:
    def reply(messages: list[dict[str, Any]]) -> str:
        if messages[-1]["content"] == GREETING:
            return "Hello, I have a question about my order."
        if "bye" in messages[-1]["content"].lower():
            return f"Bye! {STOP}"
        return f"You said {len(messages[-1]['content'])} characters."

    with FakeOpenAIServer(action=reply) as server:
        spec = f"openai:fake-user@{server.url}"
        env = gymnasium.make("envgym/Service-Retail-v0", user=spec)
        obs, info = env.reset(seed=3)
        assert info["user_reply"] == "Hello, I have a question about my order."  # the <action> tags are removed
        obs, *_ = env.step("What is your email?")
        assert obs == "User: You said 19 characters."
        body = server.requests[-1]
        assert body["model"] == "fake-user" and body["messages"][0]["role"] == "system"
        assert [m["role"] for m in body["messages"][1:]] == ["user", "assistant", "user"]
        obs, _, terminated, _, info = env.step(json.dumps({"tool": "list_all_product_types", "arguments": {}}))
        assert info["user_reply"] is None and not terminated
        obs, _, terminated, _, info = env.step("Goodbye!")
        assert terminated and obs == f"User: Bye! {STOP}" and "task_reward" in info["reward_components"]
        env.close()
        # the contract checker (determinism, bad input, pickling mid-episode) with the spec-built user
        report = check_env("envgym/Service-Retail-v0", seeds=(0, 1), steps=8, make_kwargs={"user": spec})
        assert "pickle_roundtrip" in report.checks


def test_an_llm_user_plays_a_loaded_tau2_task() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixture's NL_ASSERTION criterion (tested in test_tau2.py)
        domain = load_tau2(Path(__file__).parent / "fixtures" / "tau2", "retail")
    customer = FakeCustomer()
    env = ServiceEnv(domain=domain, user=customer)
    _, info = env.reset(seed=1)
    system = customer.inputs[0].messages[0]["content"]
    assert "Why you call: I received order #W4000202" in system
    assert "Reason for the call: You received order #W4000202 and want to return the desk lamp" in system
    assert "email: omar.field7@example.com" in system
    assert isinstance(env.user, LLMUser) and info["user_reply"].startswith("I received order #W4000202")
