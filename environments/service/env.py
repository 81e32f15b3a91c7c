"""The customer-service environment: an agent, a user, tools over a database, and a written policy.

``gymnasium.make("envgym/Service-Retail-v0")`` (also ``-Travel``, ``-Telecom``): see
:class:`ServiceEnv`.
"""

from __future__ import annotations

import inspect
import json
import random
import zlib
from collections.abc import Iterable
from typing import Any, ClassVar

from envgym.environments.service.catalog import domain_class
from envgym.environments.service.core import (
    AFFIRM,
    REFUSE,
    Domain,
    ServiceTask,
    ToolCall,
    ToolError,
    World,
    grade,
)
from envgym.environments.service.user import STOP, AgentFromSpec, LLMUser, ReplayUser, ScriptedUser

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import EnvgymError, InvalidKwargsError
from envgym.tools import ToolCallError, loads_strict, tool_calls_from, tool_schemas, tools_card

__all__ = ["BASIS_COMPONENTS", "DONE_WORDS", "TEST_MODULUS", "ServiceEnv", "validate_tasks"]

#: A task whose content fingerprint is 0 modulo this is a ``test`` task, else ``train``.
TEST_MODULUS = 5
#: Draws per reset while looking for a task of the episode's split.
MAX_DRAWS = 200
#: Words that end the episode when they are the whole action.
DONE_WORDS = ("done", STOP.lower(), "###done###")
#: Diagnostic components (weight 0 by default: the reward is ``task_reward``).
DIAGNOSTIC = ("db_reward", "communicate_reward", "action_reward", "policy_reward")
#: The component of each grading criterion a task's ``reward_basis`` may name.
BASIS_COMPONENTS: dict[str, str] = {
    "DB": "db_reward",
    "COMMUNICATE": "communicate_reward",
    "ACTION": "action_reward",
    "POLICY": "policy_reward",
}


class ServiceEnv(TextEnv):
    """Customer service with a simulated user, tools over a database and a written policy (tau2-bench style).

    **Description.** Every episode draws a world (the domain's database, and in dual-control
    domains the user's device) and a task from the seed: a user with a reason to call, facts they
    know, and what they want. Tasks of a domain with a fixed task list (tau2-bench's, loaded by
    :func:`.tau2.load_tau2`) are played as task ``seed % len(tasks)``.

    **Observation.** At reset the domain's policy, its tools as JSON schemas and the user's
    opening message; then the result of each tool call as JSON (or ``Tool error: ...``), or the
    user's reply to a message (in dual-control domains the user may first act on their device).
    ``info["tools"]`` holds the domain's tools as OpenAI function schemas at reset and on every
    step (``info["parallel_tool_calls"]`` is true).

    **Actions.** One of (the dialect of docs/tools.md):

    * call a tool: ``{"name": "get_order_details", "arguments": {"order_id": "#W1234567"}}``, or
      several in one turn as a JSON array of such calls, run in order, each result on its own
      ``Tool result (NAME): ...`` paragraph; an unknown tool or arguments that break its schema
      are an invalid action (nothing of the turn runs) whose observation is the error;
    * write to the user: any other text not starting with ``{`` or ``[`` (or
      ``{"message": "..."}``);
    * end: ``done`` (or ``{"name": "done"}``).

    The old dialect ``{"tool": NAME, "arguments": {...}}`` (and ``{"tool": "done"}``) is still
    accepted in this release, with ``info["deprecation"]`` saying what to write instead.

    **Reward components.** Grading (:func:`.core.grade`) follows tau2-bench: ``db_reward`` (the
    final database equal to the one the gold calls give), ``communicate_reward`` (required
    information told), ``action_reward`` (required calls made), ``policy_reward`` (no policy
    violations), each 1 or 0, and ``task_reward``, their product over the task's basis; plus
    ``invalid_action_reward`` (``invalid_penalty``, default 0) and ``step_cost_reward``.

    **Reward basis.** ``task_reward``, ``invalid_action_reward`` and ``step_cost_reward``: the
    reward is their sum, and success is ``task_reward == 1``. ``task_reward`` is itself the
    product of the components in the *task's* basis (tau2-bench's ``reward_basis``: ``DB`` ->
    ``db_reward``, ``COMMUNICATE`` -> ``communicate_reward``, ``ACTION`` -> ``action_reward``,
    ``POLICY`` -> ``policy_reward``), named per episode in ``info["task_reward_basis"]``. The four
    are diagnostic for the reward (weight 0 unless ``reward=`` weighs them); those outside the
    task's basis do not count at all.

    **Episode end.** When the agent says done, when the user ends the call (``###STOP###``),
    after ``max_errors`` tool errors (failure), or at ``max_turns`` (truncated, not graded).

    **Arguments.**

    * ``domain``: ``retail``, ``travel`` or ``telecom``, or a :class:`~.core.Domain` instance (your
      own, or tau2-bench's tasks loaded by :func:`.tau2.load_tau2`).
    * ``user``: ``"scripted"`` (default: deterministic, replayable), an agent spec string
      (``"hf:smollm2"``, ``"openai:MODEL@URL"``: built on first use, see
      :class:`~.user.AgentFromSpec`) or an envgym agent object playing the user
      (:class:`~.user.LLMUser`). Every user message, the opening one included, is recorded in
      ``info["user_reply"]`` (``None`` when the user said nothing that step).
    * ``user_replies``: the recorded user messages of a run to replay exactly (the non-``None``
      ``info["user_reply"]`` of its reset and steps: :func:`.user.recorded_replies`); overrides
      ``user``.
    * ``max_errors``: tool errors after which the episode fails (tau2-bench: 10).
    * The common TextEnv arguments: ``max_turns`` (default 40), ``invalid_limit``,
      ``invalid_penalty`` (default 0: tau2-bench charges nothing), ``step_cost``, ``reward``,
      ``split`` (``train`` / ``test``: tasks partitioned by a fingerprint of their content, 1 in
      5 is a test task), ``render_mode``.

    **Version history.** ``v0``: first release; tool calls in the dialect of docs/tools.md
    (``{"name", "arguments"}``, arrays of calls), the ``{"tool": ...}`` form deprecated.
    """

    name: ClassVar[str] = "service"
    reward_components: ClassVar[tuple[str, ...]] = (
        "task_reward",
        *DIAGNOSTIC,
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis: ClassVar[tuple[str, ...]] = ("task_reward", "invalid_action_reward", "step_cost_reward")
    default_max_turns: ClassVar[int] = 40

    @classmethod
    def env_card(cls, kwargs: dict[str, Any] | None = None) -> str:
        """The environment's card, then the card of the domain named in ``kwargs["domain"]``."""
        card = inspect.getdoc(cls) or cls.__name__
        name = (kwargs or {}).get("domain")
        if not isinstance(name, str):
            return card
        domain = domain_class(name)
        tools = tools_card(tool_schemas(t.schema() for t in domain().tools()))
        return f"{card}\n\n**Domain.** {inspect.getdoc(domain) or name}\n\n{tools}"

    def __init__(
        self,
        *,
        domain: str | Domain = "retail",
        user: Any = "scripted",
        user_replies: list[str] | None = None,
        max_errors: int = 10,
        invalid_penalty: float = 0.0,
        reward: Any = None,
        **kwargs: Any,
    ) -> None:
        if reward is None:
            reward = dict.fromkeys(DIAGNOSTIC, 0.0)
        super().__init__(invalid_penalty=invalid_penalty, reward=reward, **kwargs)
        if isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 1:
            raise InvalidKwargsError(f"max_errors must be a positive integer, got {max_errors!r}.")
        self.domain: Domain = domain if isinstance(domain, Domain) else domain_class(domain)()
        self.user_agent: Any = None
        if isinstance(user, str) and user != "scripted":
            try:
                self.user_agent = AgentFromSpec(user)
            except EnvgymError as err:
                raise InvalidKwargsError(
                    f"user must be 'scripted', an agent spec such as 'hf:smollm2' or 'openai:MODEL@URL', or an envgym "
                    f"agent object; {user!r} is not a valid spec: {err}"
                ) from err
        elif user != "scripted":
            if not hasattr(user, "act"):
                raise InvalidKwargsError(
                    "user must be 'scripted', an agent spec such as 'hf:smollm2' or 'openai:MODEL@URL', or an envgym "
                    f"agent object (with act()), got {user!r}."
                )
            self.user_agent = user
        if user_replies is not None and (
            isinstance(user_replies, str)
            or not isinstance(user_replies, (list, tuple))
            or not user_replies
            or not all(isinstance(r, str) for r in user_replies)
        ):
            raise InvalidKwargsError(
                "user_replies must be a non-empty list of strings (the recorded user messages, the opening one "
                f"first), got {user_replies!r:.80}."
            )
        self.user_replies = list(user_replies) if user_replies is not None else None
        self.max_errors = max_errors
        self._tools = self.domain.tool_map()
        # One list for the whole env: every info["tools"] is this object (read it, do not mutate it).
        self.tool_schemas: list[dict[str, Any]] = tool_schemas(t.schema() for t in self._tools.values())
        self._parameters = {s["function"]["name"]: s["function"]["parameters"] for s in self.tool_schemas}
        self._deprecation: str | None = None
        self.world: World | None = None
        self.start: World | None = None
        self.service_task: ServiceTask | None = None
        self.user: Any = None
        self.messages: list[str] = []
        self.calls: list[ToolCall] = []
        self.violations: list[str] = []
        self.errors = 0
        self.transcript: list[dict[str, Any]] = []
        self._user_reply: str | None = None
        self._seed: int | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        # The seed picks the task of a domain with a fixed task list and seeds an LLM user's agent.
        self._seed = None if seed is None else int(seed)
        return super().reset(seed=seed, options=options)

    def close(self) -> None:
        if isinstance(self.user, LLMUser):
            self.user.end()
        if isinstance(self.user_agent, AgentFromSpec):  # built here: ours to close
            self.user_agent.close()
        super().close()

    # ------------------------------------------------------------------ episode
    def _draw(self, rng: random.Random) -> tuple[World, ServiceTask]:
        count = getattr(self.domain, "task_count", None)
        if callable(count):  # a fixed task list (tau2-bench's): seed i plays task i
            n = count()
            index = (self._seed if self._seed is not None else rng.randrange(n)) % n
            return self.domain.world_and_task(index)  # type: ignore[attr-defined]
        for _ in range(MAX_DRAWS):
            world = self.domain.make_world(random.Random(rng.getrandbits(64)))
            task = self.domain.make_task(world, random.Random(rng.getrandbits(64)))
            is_test = zlib.crc32(task.fingerprint().encode()) % TEST_MODULUS == 0
            if is_test == (self.split == "test"):
                return world, task
        raise RuntimeError(f"no {self.split} task in {MAX_DRAWS} draws")  # pragma: no cover - 1 in 5 is test

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        world, task = self._draw(rng)
        self.start = world
        self.world = world.copy()
        self.service_task = task
        fingerprint = task.fingerprint()
        if isinstance(self.user, LLMUser):
            self.user.end()
        if self.user_replies is not None:
            self.user = ReplayUser(task, self.domain, self.user_replies)
        elif self.user_agent is not None:
            seed = self._seed if self._seed is not None else rng.getrandbits(62)
            self.user = LLMUser(
                task, self.domain, self.user_agent, episode_id=f"user/{fingerprint[:12]}/{seed}", seed=seed
            )
        else:
            self.user = self.domain.make_user(task) or ScriptedUser(task, self.domain)
        self.user.begin(world)
        self.messages, self.calls, self.violations, self.errors = [], [], [], 0
        opening = self.user.opening()
        self._user_reply = opening
        self.transcript = [{"role": "user", "text": opening}]
        return Task(
            id=f"service/{self.domain.name}/{task.kind}/{fingerprint[:12]}",
            goal=f"Help the user of {self.domain.title} following the policy.",
            difficulty=task.kind,
            extra={"domain": self.domain.name, "kind": task.kind, "reward_basis": list(task.reward_basis)},
        )

    def _intro(self) -> str:
        schemas = "\n".join(json.dumps(s["function"], sort_keys=True) for s in self.tool_schemas)
        return (
            f"You are a customer service agent for {self.domain.title}. Follow the policy below.\n\n"
            f"# Policy\n{self.domain.policy.strip()}\n\n"
            f"# Tools (one JSON schema a line)\n{schemas}\n\n"
            "# How to act\nEach turn do one thing: call a tool with "
            '{"name": "<tool>", "arguments": {...}} (or several tools at once: a JSON array of such calls), '
            "write a message to the user (plain text), or write done when the conversation is over."
        )

    def _observe(self) -> str:
        last = self.transcript[-1] if self.transcript else {"role": "user", "text": ""}
        if last["role"] == "user":
            return f"User: {last['text']}"
        return f"Tool result ({last['name']}): {last['text']}"

    # ------------------------------------------------------------------ actions
    def _parse(self, text: str) -> tuple[str, Any]:
        if not text:
            raise InvalidAction("empty action: call a tool, write to the user, or write done.")
        if text.lower() in DONE_WORDS:
            return ("done", None)
        if text.startswith(("{", "[")):
            return self._parse_calls(text)
        return ("message", text)

    def _parse_calls(self, text: str) -> tuple[str, Any]:
        """A JSON action: tool calls (one, or an array), ``{"message": ...}`` or a JSON ``done``."""
        try:
            data = loads_strict(text)
        except ToolCallError as err:
            raise InvalidAction(str(err)) from None
        if isinstance(data, dict):
            legacy = "tool" in data and "name" not in data
            if legacy:
                self._deprecation = (
                    '{"tool": ...} calls are deprecated and will be refused in the next release; write '
                    '{"name": "<tool>", "arguments": {...}} instead (docs/tools.md).'
                )
            if data.get("tool" if legacy else "name") == "done":
                return ("done", None)
            if not legacy and "name" not in data and "function" not in data:
                message = data.get("message")
                if isinstance(message, str) and message.strip():
                    return ("message", message.strip())
                raise InvalidAction('a JSON action is {"name": ..., "arguments": {...}} or {"message": "..."}.')
        try:
            calls = tool_calls_from(data, self._parameters, parallel=True, legacy=True)
        except ToolCallError as err:
            if self._deprecation is not None and err.tool is not None:
                # An old-dialect call gets the words it always got (published bundles replay them).
                raise InvalidAction(f"{err.tool} {err.detail}") from None
            raise InvalidAction(str(err)) from None
        notes = [c.deprecation for c in calls if c.deprecation]
        if notes:
            self._deprecation = notes[0]
        return ("tools", [ToolCall(c.name, dict(c.arguments)) for c in calls])

    def _finish(self, observation: str) -> Transition:
        assert self.service_task is not None and self.start is not None and self.world is not None
        components = grade(
            self.domain, self.service_task, self.start, self.world, self.messages, self.calls, self.violations
        )
        success = components["task_reward"] == 1.0
        return Transition(observation, components, terminated=True, success=success)

    def _apply(self, action: tuple[str, Any]) -> Transition:
        assert self.world is not None
        kind, value = action
        if kind == "done":
            return self._finish("The conversation is over.")
        if kind == "tools":
            results: list[str] = []
            for call in value:
                if not self._run_call(call):
                    ended = f"{self.transcript[-1]['text']}\nToo many tool errors ({self.errors}): the episode ends."
                    return Transition("\n\n".join([*results, ended]), terminated=True)
                results.append(self._observe())
            return Transition("\n\n".join(results))
        message: str = value
        self.messages.append(message)
        self.transcript.append({"role": "assistant", "text": message})
        reply = self.user.respond(message, self.world)
        if not reply.graded:  # a replay ran out of recorded replies: not the user's words, not graded
            return Transition(reply.text, terminated=True)
        self._user_reply = reply.text
        self.transcript.append({"role": "user", "text": reply.text})
        if reply.stop:
            return self._finish(self._observe())
        return Transition(self._observe())

    def _run_call(self, call: ToolCall) -> bool:
        """Run one tool call and record its result in the transcript; False when it was the
        ``max_errors``-th tool error (the episode ends)."""
        assert self.world is not None
        before = self.world.copy() if self._tools[call.name].writes else None
        try:
            result = self.domain.run(self.world, call)
        except ToolError as err:
            self.errors += 1
            self.transcript.append({"role": "tool", "name": call.name, "text": f"Tool error: {err}"})
            return self.errors < self.max_errors
        self.calls.append(call)
        if before is not None:
            self.violations.extend(self.domain.violations(before, call, result))
            if self.domain.confirm_writes and not self._user_said_yes():
                self.violations.append(f"{call.name}: a change made without the user's explicit yes")
        self.transcript.append({"role": "tool", "name": call.name, "text": json.dumps(result, sort_keys=True)})
        return True

    def _user_said_yes(self) -> bool:
        """The user's last words (after the agent had spoken to them) were an explicit yes."""
        for i in range(len(self.transcript) - 1, 0, -1):
            entry = self.transcript[i]
            if entry["role"] == "user":
                spoke_before = any(e["role"] == "assistant" for e in self.transcript[:i])
                text = entry["text"]
                return spoke_before and bool(AFFIRM.search(text)) and not REFUSE.match(text.strip())
        return False

    def sample_action(self, rng: random.Random) -> str:
        """A random action: a tool call with arguments of the right types, a short message, or done."""
        roll = rng.random()
        if roll < 0.05:
            return "done"
        if roll < 0.35:
            return rng.choice(["Hello, how can I help you?", "Could you confirm your details?", "Anything else?"])
        tool = rng.choice(sorted(self._tools.values(), key=lambda t: t.name))
        arguments = {}
        for name, schema in tool.parameters.get("properties", {}).items():
            arguments[name] = _sample_value(schema, rng)
        return json.dumps({"name": tool.name, "arguments": arguments})

    def _info(self, components: dict[str, float], valid: bool, success: bool, reason: Any) -> dict[str, Any]:
        info = super()._info(components, valid, success, reason)
        # The user's words this step (the opening at reset; None when the agent called a tool): an
        # LLM user's messages are recorded here, so a run that used one can be replayed (user_replies=...).
        info["user_reply"], self._user_reply = self._user_reply, None
        info["tool_errors"] = self.errors
        info["tools"] = self.tool_schemas
        info["parallel_tool_calls"] = True
        if self._deprecation is not None:
            info["deprecation"], self._deprecation = self._deprecation, None
        # The components task_reward is the product of (the task's tau2-bench reward_basis, by name).
        task = self.service_task
        info["task_reward_basis"] = [BASIS_COMPONENTS[b] for b in task.reward_basis] if task is not None else []
        return info


def _sample_value(schema: dict[str, Any], rng: random.Random) -> Any:
    if "enum" in schema:
        return rng.choice(list(schema["enum"]))
    kind = schema.get("type")
    if kind == "integer":
        return rng.randint(0, 5)
    if kind == "number":
        return round(rng.uniform(0, 100), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [_sample_value(schema.get("items", {"type": "string"}), rng)]
    if kind == "object":
        return {}
    return rng.choice(["#W0000001", "user_1", "abc", "1"])


def validate_tasks(domain: str | Domain, seeds: Iterable[int], *, split: str = "test") -> list[str]:
    """Prove the tasks of ``seeds`` solvable: each task's gold calls, replayed one by one from its
    starting world, must all run (no tool error), break no policy rule of the domain, include the
    task's required actions, and grade ``task_reward == 1`` (telling the user every required fact).

    Returns one line per task that fails (empty: every task is solvable by construction). These are
    tau2-bench's annotation errors: a gold call on an id that does not exist, a gold solution that
    breaks the policy, a required action the solution never makes.
    """
    env = ServiceEnv(domain=domain, split=split)
    problems = []
    for seed in seeds:
        env.reset(seed=seed)
        task, start = env.service_task, env.start
        assert task is not None and start is not None
        world, violations, failed = start.copy(), [], None
        for call in task.gold_actions:
            before = world.copy()
            try:
                result = env.domain.run(world, call)
            except ToolError as err:
                failed = f"the gold call {call.name}({dict(call.arguments)}) fails: {err}"
                break
            tools = env.domain.user_tool_map() if call.requestor == "user" else env.domain.tool_map()
            if tools[call.name].writes:
                violations += env.domain.violations(before, call, result)
        if failed is not None:
            problems.append(f"seed {seed} ({task.kind}): {failed}")
            continue
        agent_calls = [c for c in task.gold_actions if c.requestor != "user"]
        components = grade(env.domain, task, start, world, list(task.communicate_info), agent_calls, violations)
        if components["task_reward"] != 1.0:
            broken = sorted(k for k, v in components.items() if v != 1.0)
            problems.append(f"seed {seed} ({task.kind}): the gold solution fails {', '.join(broken)} {violations}")
    env.close()
    return problems
