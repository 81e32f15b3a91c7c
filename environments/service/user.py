"""User simulators: the deterministic scripted user (the default) and an LLM user.

The **scripted user** plays a task's :class:`~.core.Scenario` from rules, so episodes are
replayable and training needs no second model. Each reply to the agent's message is built from,
in order:

1. the domain's device actions (dual control: :meth:`ScriptedUser.device_actions`): the agent
   told the user to do something on their device; the user does it with their own tools and says
   what they see;
2. facts the agent asked for: every known fact one of whose keywords appears in the message is
   given ("My order id is #W1234.");
3. a confirmation question ("confirm", "shall I", "would you like", "do you want", "proceed",
   "yes or no", "is that correct"): the scenario's answer (``confirm``);
4. things the user does not know, when asked (a keyword of ``unknown_info``);
5. whether the user is satisfied (:meth:`ScriptedUser.satisfied`: by default, the domain's rule
   over the world and the agent's words); if so the user thanks the agent and ends the call
   (``###STOP###``);
6. otherwise the user restates their request.

The **LLM user** (:class:`LLMUser`) gives the scenario to any envgym agent (the bundled model, an
OpenAI-compatible server, a scripted fake) and sends its replies. Every user message, the opening
one included, is recorded in the env's ``info["user_reply"]`` (``None`` on steps where the user
said nothing), so a run that used an LLM user is replayed exactly by :class:`ReplayUser` from
those messages (``ServiceEnv(user_replies=[...])``): the leaderboard verifies such runs without
calling the model again. :class:`AgentFromSpec` builds the user's agent from a spec string
(``"hf:smollm2"``, ``"openai:MODEL@URL"``) on first use and pickles as the spec alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envgym.environments.service.core import Domain, ServiceTask, ToolCall, ToolError, World

from envgym.core import extract_action
from envgym.rollout.agent import AgentInput
from envgym.rollout.specs import make_agent, split_agent_spec

__all__ = [
    "CONFIRM",
    "END_TOKENS",
    "GREETING",
    "STOP",
    "AgentFromSpec",
    "LLMUser",
    "ReplayUser",
    "ScriptedUser",
    "UserReply",
    "recorded_replies",
]

#: What a user says to end the call (tau2-bench's stop token).
STOP = "###STOP###"
#: Tokens that end the call when an LLM user writes them (tau2-bench: done, transferred, out of scope).
END_TOKENS: tuple[str, ...] = (STOP, "###TRANSFER###", "###OUT-OF-SCOPE###")
#: The agent's greeting an LLM user answers with its opening message (as in tau2-bench).
GREETING = "Hi! How can I help you today?"
CONFIRM = re.compile(
    r"\b(confirm|shall i|should i|would you like|do you want|proceed|yes or no|yes/no|is that correct|is this correct|"
    r"go ahead)\b",
    re.IGNORECASE,
)


@dataclass
class UserReply:
    """What the user answered: the text, whether they ended the call, and the device calls they made."""

    text: str
    stop: bool = False
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: ``False`` when the call ended for a reason that is not the user's (a replay ran out of
    #: recorded replies): the env then ends the episode without grading it.
    graded: bool = True


class ScriptedUser:
    """The deterministic user of one task (see the module docstring).

    Domains subclass it to add device actions (:meth:`device_actions`) and their own
    :meth:`satisfied` rule; everything else reads the scenario.
    """

    def __init__(self, task: ServiceTask, domain: Domain) -> None:
        self.task = task
        self.domain = domain
        self.scenario = task.scenario
        self.given: set[str] = set()
        self.turns = 0

    def opening(self) -> str:
        """The user's first message."""
        return self.scenario.reason_for_call

    # ------------------------------------------------------------------ hooks
    def device_actions(self, message: str, world: World) -> tuple[list[ToolCall], list[str]]:
        """Device calls the agent's message asks for, made on ``world`` (dual control): the calls and
        what the user reports. None by default."""
        return [], []

    def satisfied(self, message: str, world: World) -> bool:
        """Whether the user's request is settled after the agent's ``message``.

        By default: the world already equals the task's expected final state (a change task), or,
        for a task that changes nothing, the agent told the user every ``communicate_info``.
        """
        if any(self._writes(c) for c in self.task.gold_actions):
            return world.state_hash() == self.domain.expected_world(self._start, self.task).state_hash()
        text = message.lower()
        return bool(self.task.communicate_info) and all(i.lower() in text for i in self.task.communicate_info)

    # ------------------------------------------------------------------ machinery
    _start: World

    def begin(self, start: World) -> None:
        """Called by the env at reset with the starting world (a copy is kept)."""
        self._start = start.copy()
        self.given = set()
        self.turns = 0

    def _writes(self, call: ToolCall) -> bool:
        tools = self.domain.user_tool_map() if call.requestor == "user" else self.domain.tool_map()
        tool = tools.get(call.name)
        return bool(tool and tool.writes)

    def respond(self, message: str, world: World) -> UserReply:
        """The user's reply to the agent's ``message`` (may act on ``world.device``)."""
        self.turns += 1
        text = message.lower()
        parts: list[str] = []
        calls, reports = self.device_actions(message, world)
        parts.extend(reports)
        for name, (value, keywords) in self.scenario.known_info.items():
            if any(k.lower() in text for k in keywords):
                parts.append(f"My {name.replace('_', ' ')} is {value}.")
                self.given.add(name)
        if CONFIRM.search(message):
            parts.append("Yes, please go ahead." if self.scenario.confirm else "No, please don't do that.")
        for unknown in self.scenario.unknown_info:
            if unknown.lower() in text:
                parts.append(f"Sorry, I don't know my {unknown}.")
        if not calls and self.satisfied(message, world):
            parts.append(f"Thank you, that's all I needed. {STOP}")
            return UserReply(" ".join(parts), stop=True, tool_calls=calls)
        if not parts:
            parts.append(f"I'm not sure what you mean. {self.scenario.reason_for_call}")
        return UserReply(" ".join(parts), tool_calls=calls)


class AgentFromSpec:
    """The agent of a spec string (``"hf:smollm2"``, ``"openai:MODEL@URL"``), built on first use.

    The spec is checked at once (an unknown kind or a malformed argument fails before any episode);
    the agent (a model, an HTTP client) is built by ``envgym.rollout.specs.make_agent`` when the
    user first speaks. It pickles as the spec alone: a copy builds its own agent, so an env with an
    LLM user ships to worker processes without its model.
    """

    def __init__(self, spec: str, *, seed: int = 0) -> None:
        split_agent_spec(spec)
        self.spec = spec.strip()
        self.seed = seed
        self._agent: Any = None

    def get(self) -> Any:
        """The agent (built the first time)."""
        if self._agent is None:
            self._agent = make_agent(self.spec, seed=self.seed)
        return self._agent

    def close(self) -> None:
        """Close the agent if it was built (harmless twice)."""
        agent, self._agent = self._agent, None
        if agent is not None and hasattr(agent, "close"):
            agent.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec, "seed": self.seed, "_agent": None}

    def __repr__(self) -> str:
        return f"AgentFromSpec({self.spec!r})"


def _agent_reply(output: Any) -> str:
    """The user's words in an agent's output: its ``text`` (an ``<action>`` block's content when
    the model wrapped its reply in one), stripped."""
    text = output.text if hasattr(output, "text") else str(output)
    return extract_action(str(text)).strip()


class LLMUser:
    """A user played by an envgym agent (the bundled model, an OpenAI-compatible server, a fake).

    The agent gets the scenario as a system message and the conversation with the roles turned
    around (the service agent's messages are ``user`` turns, the simulated user's own are
    ``assistant`` turns): a chat model answers as the customer. Non-chat agents read the same as
    one text (``AgentInput.observation``). The opening message is the agent's answer to the
    greeting (:data:`GREETING`); a reply holding one of :data:`END_TOKENS` ends the call; an empty
    reply is sent as ``"..."``. The user cannot act on a device (dual-control domains need the
    scripted user's device layer).

    Args:
        task, domain: the task played.
        agent: an envgym :class:`~envgym.rollout.agent.Agent` or an :class:`AgentFromSpec`.
        episode_id: the id the agent sees for this conversation.
        seed: the episode seed given to ``agent.start_episode`` (sampling agents seed from it).
        max_new_tokens: the most tokens one reply may take.
    """

    def __init__(
        self,
        task: ServiceTask,
        domain: Domain,
        agent: Any,
        *,
        episode_id: str = "user",
        seed: int | None = None,
        max_new_tokens: int | None = 256,
    ) -> None:
        self.task = task
        self.domain = domain
        self.source = agent
        self.episode_id = episode_id
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self.history: list[tuple[str, str]] = []
        self._started_on: Any = None

    @property
    def agent(self) -> Any:
        return self.source.get() if isinstance(self.source, AgentFromSpec) else self.source

    def begin(self, start: World) -> None:
        self.history = []
        self.end()

    def end(self) -> None:
        """Tell the agent the conversation is over (called at the next reset and by ``env.close``)."""
        if self._started_on is not None and hasattr(self._started_on, "end_episode"):
            self._started_on.end_episode(self.episode_id)
        self._started_on = None

    def system_prompt(self) -> str:
        """The scenario as the user's instructions."""
        s = self.task.scenario
        facts = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, (v, _) in s.known_info.items())
        return "\n".join(
            [
                (
                    f"You are a customer talking to a customer service agent of {self.domain.title}. "
                    "Play the customer below: stay in character, write only what the customer says, "
                    "one short message at a time, and never invent facts you were not given."
                ),
                f"Persona: {s.persona}",
                f"Why you call: {s.reason_for_call}",
                f"Your instructions: {s.instructions or s.reason_for_call}",
                f"What you know (give it only when asked): {facts or 'nothing special'}",
                f"What you don't know: {', '.join(s.unknown_info) or 'nothing listed'}",
                f"When asked to confirm an action, answer {'yes' if s.confirm else 'no'}.",
                f"When your request is settled (or cannot be), say goodbye and write {STOP} at the end.",
            ]
        )

    def _ask(self) -> str:
        agent = self.agent
        if agent is not self._started_on:
            if hasattr(agent, "start_episode"):
                agent.start_episode(self.episode_id, "service-user", self.seed)
            self._started_on = agent
        system = self.system_prompt()
        messages = [{"role": "system", "content": system}]
        messages += [{"role": "user" if who == "Agent" else "assistant", "content": text} for who, text in self.history]
        lines = [system, "", "Conversation so far:"]
        lines += [f"{'Agent' if who == 'Agent' else 'You'}: {text}" for who, text in self.history]
        lines.append("Your reply as the customer:")
        item = AgentInput(
            episode_id=self.episode_id,
            env_id="service-user",
            observation="\n".join(lines),
            info={"role": "service-user", "domain": self.domain.name},
            turn=sum(1 for who, _ in self.history if who == "You"),
            messages=tuple(messages),
            max_new_tokens=self.max_new_tokens,
        )
        (output,) = agent.act([item])
        reply = _agent_reply(output) or "..."
        self.history.append(("You", reply))
        return reply

    def opening(self) -> str:
        self.history.append(("Agent", GREETING))
        return self._ask()

    def respond(self, message: str, world: World) -> UserReply:
        self.history.append(("Agent", message))
        reply = self._ask()
        return UserReply(reply, stop=any(token in reply for token in END_TOKENS))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if isinstance(self.source, AgentFromSpec):  # the copy builds its own agent and starts it again
            state["_started_on"] = None
        return state


class ReplayUser:
    """Replays a recorded conversation's user messages exactly, the opening one first.

    ``replies`` are the non-``None`` ``info["user_reply"]`` of the recorded episode's reset and
    steps, in order (:func:`recorded_replies` collects them). With the same agent actions the
    replay gives the same observations, rewards and grading as the recorded run, without calling
    the model that played the user. When the agent writes more messages than were recorded (the
    run diverged), the episode ends ungraded with a message saying so.
    """

    def __init__(self, task: ServiceTask, domain: Domain, replies: Sequence[str]) -> None:
        self.task = task
        self.replies = list(replies)
        self.turns = 0

    def begin(self, start: World) -> None:
        self.turns = 0

    def opening(self) -> str:
        if not self.replies:
            raise ToolError("user_replies is empty: it needs at least the user's opening message")
        self.turns = 1
        return self.replies[0]

    def respond(self, message: str, world: World) -> UserReply:
        if self.turns >= len(self.replies):
            return UserReply(
                f"[replay] the recording has no user reply left ({len(self.replies)} messages): this run diverged "
                "from the recorded one.",
                stop=True,
                graded=False,
            )
        reply = self.replies[self.turns]
        self.turns += 1
        return UserReply(reply, stop=any(token in reply for token in END_TOKENS))


def recorded_replies(infos: Sequence[dict[str, Any]]) -> list[str]:
    """The user messages of a recorded episode (its reset ``info`` and step ``info`` dicts, in
    order): what :class:`ReplayUser` replays."""
    return [info["user_reply"] for info in infos if info.get("user_reply") is not None]
