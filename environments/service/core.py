"""The pieces every customer-service domain is made of: tools, worlds, tasks, grading.

A **domain** (:class:`Domain`) is a written policy, a set of typed tools over a database, a
generator of worlds (the database, and in dual-control domains the user's own device) and of
tasks over them, and a scripted user (:mod:`.user`). The environment (:mod:`.env`) lets an
agent talk to the user and call tools; when the agent says it is done or the user ends the call,
the episode is graded as tau2-bench grades (its ``reward_basis``):

* ``DB``: the final database (and device) equal the ones the task's gold tool calls produce from
  the same starting world: compared by the sha256 of their canonical JSON, so any sequence of
  calls that reaches the same state passes;
* ``COMMUNICATE``: every string of ``communicate_info`` appears in some message of the agent to the
  user (case-insensitive; commas in numbers ignored);
* ``ACTION``: every action of ``required_actions`` was called by the agent with those arguments
  (only the arguments named in its ``compare_args``, all when empty);
* ``POLICY``: no call matched the task's ``forbidden`` list and no write call broke a rule of the
  domain's policy (:meth:`Domain.violations`).

Each check is a reward component (1 or 0); ``task_reward`` is their product over the task's
basis, and the episode is a success when it is 1. A task is solvable by construction: its gold
calls are a real solution, and ``tests/environments/service`` replays every generated task's gold
calls through the grader.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from envgym.tools import ToolCallError, strict_parameters, validate_arguments

__all__ = [
    "AFFIRM",
    "BASIS",
    "Domain",
    "Scenario",
    "ServiceTask",
    "Tool",
    "ToolCall",
    "ToolError",
    "World",
    "canonical_hash",
    "grade",
    "normalise",
]

#: The grading criteria a task may name in its ``reward_basis``, in report order.
BASIS: tuple[str, ...] = ("DB", "COMMUNICATE", "ACTION", "POLICY")


class ToolError(Exception):
    """A tool refused a call (unknown id, wrong state, bad argument): the message goes back to the caller."""


def canonical_hash(data: Any) -> str:
    """sha256 of ``data`` as canonical JSON (sorted keys, no spaces): the state's identity."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool: by the agent (``assistant``) or, in dual-control domains, by the user.

    ``compare_args`` names the arguments that must match when the call is a required action
    (empty: all of them).
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    requestor: str = "assistant"
    compare_args: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "arguments": dict(self.arguments), "requestor": self.requestor}
        if self.compare_args:
            out["compare_args"] = list(self.compare_args)
        return out

    def matches(self, other: ToolCall) -> bool:
        """``other`` (a call made) satisfies this one (a required action)."""
        if other.name != self.name:
            return False
        keys = self.compare_args or tuple(self.arguments)
        return all(other.arguments.get(k) == self.arguments.get(k) for k in keys)


@dataclass(frozen=True)
class Tool:
    """A typed function over the world, described to the agent by a JSON schema.

    Attributes:
        name: the tool's name (what the agent writes in ``{"name": name, "arguments": {...}}``).
        description: one or two sentences for the agent.
        parameters: a JSON schema of ``type: object`` (the subset :func:`envgym.tools.validate_arguments`
            checks; objects that list ``properties`` take no other keys).
        fn: ``fn(world, **arguments) -> JSON-able result``; raises :class:`ToolError` to refuse.
        writes: the tool changes the world (a read tool never does; the grader checks policy on writes).
        side: ``"agent"`` (the agent's database) or ``"user"`` (the user's device, dual control).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., Any]
    writes: bool = False
    side: str = "agent"

    def schema(self) -> dict[str, Any]:
        """The tool as an OpenAI function schema (``info["tools"]`` holds these)."""
        parameters = strict_parameters(self.parameters)
        function = {"name": self.name, "description": self.description, "parameters": parameters}
        return {"type": "function", "function": function}

    def call(self, world: World, arguments: Any) -> Any:
        """Validate ``arguments`` and run the tool; :class:`ToolError` on bad arguments or a refusal."""
        try:
            args = validate_arguments(self.parameters, arguments, where=f"{self.name} arguments")
        except ToolCallError as err:
            raise ToolError(err.detail) from None
        return self.fn(world, **args)


@dataclass
class World:
    """The mutable state of an episode: the agent-side database and the user's device (JSON-able)."""

    db: dict[str, Any]
    device: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> World:
        """A deep copy (worlds are plain JSON data, so a marshal round trip: several times faster than deepcopy)."""
        return type(self)(marshal.loads(marshal.dumps(self.db)), marshal.loads(marshal.dumps(self.device)))

    def state_hash(self) -> str:
        return canonical_hash({"db": self.db, "device": self.device})


@dataclass(frozen=True)
class Scenario:
    """Who the user is and what they want (what the scripted user plays and an LLM user reads).

    Attributes:
        persona: one line of who they are and how they talk.
        reason_for_call: the user's opening message.
        known_info: facts the user knows and gives when asked: ``name -> (value, keywords)``;
            the scripted user reveals a fact when the agent's message contains one of its
            keywords (``("order id", "order number")``).
        unknown_info: things the user does not know (said when asked).
        instructions: what they want and how they behave, in words (for an LLM user and the card).
        confirm: whether the user agrees when the agent asks to confirm the action.
        extra: domain-specific settings of the scripted user (JSON-able).
    """

    persona: str
    reason_for_call: str
    known_info: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    unknown_info: tuple[str, ...] = ()
    instructions: str = ""
    confirm: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "persona": self.persona,
            "reason_for_call": self.reason_for_call,
            "known_info": {k: {"value": v, "keywords": list(kw)} for k, (v, kw) in self.known_info.items()},
            "unknown_info": list(self.unknown_info),
            "instructions": self.instructions,
            "confirm": self.confirm,
            "extra": dict(self.extra),
        }


@dataclass(frozen=True)
class ServiceTask:
    """One task of a domain over one world.

    Attributes:
        kind: the task type (``cancel_pending_order``, ``refuse_cancel_delivered``, ...).
        scenario: the user's side.
        gold_actions: tool calls that solve the task from the starting world (agent and user
            side, in order); replayed to get the expected final state.
        communicate_info: strings the agent must tell the user.
        required_actions: calls the agent must make (the ``ACTION`` basis).
        forbidden: calls the agent must not make (matched like required actions).
        reward_basis: the criteria graded (a subset of :data:`BASIS`).
        extra: anything else worth keeping with the task (JSON-able).
    """

    kind: str
    scenario: Scenario
    gold_actions: tuple[ToolCall, ...]
    communicate_info: tuple[str, ...] = ()
    required_actions: tuple[ToolCall, ...] = ()
    forbidden: tuple[ToolCall, ...] = ()
    reward_basis: tuple[str, ...] = ("DB", "COMMUNICATE", "POLICY")
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "scenario": self.scenario.as_dict(),
            "gold_actions": [a.as_dict() for a in self.gold_actions],
            "communicate_info": list(self.communicate_info),
            "required_actions": [a.as_dict() for a in self.required_actions],
            "forbidden": [a.as_dict() for a in self.forbidden],
            "reward_basis": list(self.reward_basis),
            "extra": dict(self.extra),
        }

    def fingerprint(self) -> str:
        """Identity of the task's content (splits partition tasks by it)."""
        return canonical_hash({k: v for k, v in self.as_dict().items()})


class Domain:
    """A customer-service domain: policy, tools, worlds, tasks and the scripted user.

    Subclasses set :attr:`name`, :attr:`title`, :attr:`policy` and implement :meth:`tools`,
    :meth:`make_world` and :meth:`make_task` (and :meth:`user_tools`, :meth:`violations`,
    :meth:`make_user` where the domain needs them).
    """

    #: Short name (``retail``): the env's ``domain=`` argument.
    name: ClassVar[str] = ""
    #: What the agent works for, in words (``an online retail store``).
    title: ClassVar[str] = ""
    #: The written policy the agent must follow (markdown).
    policy: ClassVar[str] = ""
    #: The policy asks for the user's explicit yes before any write: the env records a violation for
    #: a write call made when the user's last words were not a yes (see :data:`AFFIRM`).
    confirm_writes: ClassVar[bool] = True

    def tools(self) -> list[Tool]:
        """The agent's tools."""
        raise NotImplementedError

    def user_tools(self) -> list[Tool]:
        """The user's own tools on their device (dual control); none by default."""
        return []

    def make_world(self, rng: random.Random) -> World:
        """A fresh world (database, device) drawn from ``rng``."""
        raise NotImplementedError

    def make_task(self, world: World, rng: random.Random) -> ServiceTask:
        """A task over ``world`` (which it must not change), drawn from ``rng``."""
        raise NotImplementedError

    def make_user(self, task: ServiceTask) -> Any:
        """The scripted user of ``task``: a :class:`~.user.ScriptedUser` subclass of the domain's, or
        ``None`` (the default) for the plain :class:`~.user.ScriptedUser`."""
        return None

    def violations(self, before: World, call: ToolCall, result: Any) -> list[str]:
        """Policy rules a successful write call broke (``before``: the world before the call)."""
        return []

    # -------------------------------------------------------------- shared machinery
    def tool_map(self) -> dict[str, Tool]:
        return {t.name: t for t in self.tools()}

    def user_tool_map(self) -> dict[str, Tool]:
        return {t.name: t for t in self.user_tools()}

    def run(self, world: World, call: ToolCall) -> Any:
        """Run ``call`` on ``world`` with the tool of its side (raises :class:`ToolError`)."""
        tools = self.user_tool_map() if call.requestor == "user" else self.tool_map()
        tool = tools.get(call.name)
        if tool is None:
            raise ToolError(f"unknown tool {call.name!r}; tools: {', '.join(sorted(tools))}.")
        return tool.call(world, call.arguments)

    def expected_world(self, start: World, task: ServiceTask) -> World:
        """``start`` after the task's gold calls (a copy; ``start`` is untouched)."""
        world = start.copy()
        for call in task.gold_actions:
            self.run(world, call)
        return world


#: A user's explicit yes (what authorises the writes that follow it, until the user speaks again).
AFFIRM = re.compile(
    r"\b(yes|yeah|yep|sure|go ahead|please do|do it|confirmed?|i agree|that's right|correct)\b", re.IGNORECASE
)
#: ... unless the same words refuse.
REFUSE = re.compile(r"\b(no|don't|do not|never mind|cancel that|stop)\b", re.IGNORECASE)

_NUMBER_COMMAS = re.compile(r"(?<=\d),(?=\d{3}\b)")


def normalise(text: str) -> str:
    return _NUMBER_COMMAS.sub("", text.lower())


def grade(
    domain: Domain,
    task: ServiceTask,
    start: World,
    final: World,
    messages: Sequence[str],
    calls: Sequence[ToolCall],
    violations: Sequence[str],
) -> dict[str, float]:
    """The reward components of a finished episode (see the module docstring).

    Args:
        start: the world the episode started from (the expected state is computed from it).
        final: the world at the end.
        messages: the agent's messages to the user.
        calls: every tool call the agent made that ran (errors excluded).
        violations: policy violations recorded during the episode.
    """
    said = normalise("\n".join(messages))
    checks = {
        "DB": final.state_hash() == domain.expected_world(start, task).state_hash(),
        "COMMUNICATE": all(normalise(info) in said for info in task.communicate_info),
        "ACTION": all(any(req.matches(c) for c in calls) for req in task.required_actions),
        "POLICY": not violations and not any(f.matches(c) for f in task.forbidden for c in calls),
    }
    components = {
        "db_reward": float(checks["DB"]),
        "communicate_reward": float(checks["COMMUNICATE"]),
        "action_reward": float(checks["ACTION"]),
        "policy_reward": float(checks["POLICY"]),
    }
    components["task_reward"] = float(all(checks[b] for b in task.reward_basis))
    return components
