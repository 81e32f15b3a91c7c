"""A tiny tool env for the agents' native tool-call tests (docs/tools.md's dialect, stdlib only).

Registered as ``envgymtest/ToolAdd-v0`` (one call per turn) and ``envgymtest/ToolAddParallel-v0``
(several calls per turn, ``info["parallel_tool_calls"]``). It lives in an importable module,
not a test file, because pools make envs again in worker processes.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from envgym import InvalidAction, Task, TextEnv, Transition
from envgym.registration import EnvSpec, register

#: The env's tools as OpenAI function schemas (what ``info["tools"]`` carries).
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers; returns their sum.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "answer",
            "description": "Give the final answer; ends the episode.",
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "integer"}},
                "required": ["value"],
                "additionalProperties": False,
            },
        },
    },
]


class ToolAddEnv(TextEnv):
    """Add two numbers with the ``add`` tool, then ``answer`` the sum.

    Observation: the question, then each tool result (``Result of add: 7``).
    Actions: a tool call ``{"name": "add", "arguments": {"a": 3, "b": 4}}`` (docs/tools.md), or a
        JSON array of calls with ``parallel``.
    Reward components: success_reward (1 for the right answer), right_call_reward (0.5 for adding
        the question's numbers), invalid_action_reward.
    Episode end: an ``answer`` call (success when right) or ``max_turns``.
    Arguments: parallel (several calls per turn), choices (``admissible_actions`` lists a few calls
        as ``<tool_call>`` blocks, for tests that decode among them).
    """

    name = "tooladd"
    default_max_turns = 4

    def __init__(self, *, parallel: bool = False, choices: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parallel = parallel
        self.choices = choices
        self.a = self.b = 0

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self.a, self.b = rng.randint(1, 9), rng.randint(1, 9)
        return Task(id=f"add-{self.a}-{self.b}", goal=f"What is {self.a} + {self.b}? Use the add tool.")

    def _observe(self) -> str:
        return f"What is {self.a} + {self.b}?"

    def _parse(self, text: str) -> list[tuple[str, dict[str, Any]]]:
        try:
            data = json.loads(text)
        except ValueError:
            raise InvalidAction("Tool error: the action is not JSON.") from None
        calls = data if isinstance(data, list) and self.parallel else [data]
        parsed = []
        for call in calls:
            if not isinstance(call, dict) or call.get("name") not in ("add", "answer"):
                raise InvalidAction(f"Tool error: unknown tool in {call!r}; the tools are add and answer.")
            arguments = call.get("arguments", {})
            needed = ("a", "b") if call["name"] == "add" else ("value",)
            if not isinstance(arguments, dict) or not all(isinstance(arguments.get(k), int) for k in needed):
                raise InvalidAction(f"Tool error ({call['name']}): arguments must be integers {', '.join(needed)}.")
            parsed.append((call["name"], arguments))
        return parsed

    def _apply(self, calls: list[tuple[str, dict[str, Any]]]) -> Transition:
        results = []
        for name, arguments in calls:
            if name == "answer":
                right = arguments["value"] == self.a + self.b
                return Transition(
                    "Right." if right else "Wrong.",
                    {"success_reward": 1.0 if right else 0.0},
                    terminated=True,
                    success=right,
                )
            results.append(f"Result of add: {arguments['a'] + arguments['b']}")
        # A little reward for adding the question's own numbers, so replies differ in return.
        right = any(sorted((arguments["a"], arguments["b"])) == sorted((self.a, self.b)) for _, arguments in calls)
        return Transition("\n".join(results), {"right_call_reward": 0.5 if right else 0.0})

    def admissible_actions(self) -> list[str]:
        if not self.choices:
            return []
        calls = [{"a": self.a, "b": self.b}, {"a": self.b, "b": self.a + 1}]
        return [f'<tool_call>\n{{"name": "add", "arguments": {json.dumps(c)}}}\n</tool_call>' for c in calls]

    def _info(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        info = super()._info(*args, **kwargs)
        info["tools"] = copy.deepcopy(TOOLS)  # callers keep and mutate infos
        info["parallel_tool_calls"] = self.parallel
        return info


SPECS = [
    EnvSpec(id="envgymtest/ToolAdd-v0", entry_point="tool_toy_envs:ToolAddEnv", family="test"),
    EnvSpec(
        id="envgymtest/ToolAddParallel-v0",
        entry_point="tool_toy_envs:ToolAddEnv",
        family="test",
        kwargs={"parallel": True},
    ),
]
for _spec in SPECS:
    register(_spec)
