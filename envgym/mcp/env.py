"""``envgym/MCP-v0``: any MCP server's tools as the actions of an envgym environment."""

from __future__ import annotations

import importlib
import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import ConfigError, EnvContractError, EnvgymError, InvalidKwargsError, suggest
from envgym.mcp.client import MAX_RESULT_CHARS, MCPConnection, describe_server, openai_tools
from envgym.spaces import MAX_TEXT_LENGTH
from envgym.tools import ToolCall, ToolCallError, parse_tool_calls, tool_error, tool_result

__all__ = ["MCP_ID", "MCPEnv", "load_tasks"]

#: The Gymnasium id: ``gymnasium.make(MCP_ID, server=..., tasks=..., verifier=...)``.
MCP_ID = "envgym/MCP-v0"
#: The largest task file read (bytes) and the most tasks kept.
MAX_TASK_FILE_BYTES = 64 << 20
MAX_TASKS = 100_000
_BASE_COMPONENTS = ("success_reward", "invalid_action_reward", "step_cost_reward")

Verifier = Callable[[Mapping[str, Any], list[dict[str, Any]], str], "float | Mapping[str, float]"]


def load_tasks(tasks: str | Path | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tasks from a list of mappings or a JSONL file, each with a unique string ``id`` and a
    ``goal`` (anything else, such as the expected ``answer``, is for the verifier only)."""
    if isinstance(tasks, (str, Path)):
        path = Path(tasks)
        if not path.is_file():
            raise InvalidKwargsError(f"tasks file {str(path)!r} does not exist; pass a JSONL file or a list of tasks.")
        size = path.stat().st_size
        if size > MAX_TASK_FILE_BYTES:
            raise InvalidKwargsError(
                f"tasks file {str(path)!r} is {size} bytes; at most {MAX_TASK_FILE_BYTES} are read."
            )
        rows: list[Any] = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise InvalidKwargsError(f"tasks file {str(path)!r} line {number} is not JSON: {err.msg}.") from None
        where = f"tasks file {str(path)!r}"
    elif isinstance(tasks, Sequence):
        rows, where = list(tasks), "tasks"
    else:
        raise InvalidKwargsError(f"tasks must be a list of {{id, goal}} mappings or a JSONL path, got {tasks!r}.")
    if not rows:
        raise InvalidKwargsError(f"{where} holds no task; each line is an object with an 'id' and a 'goal'.")
    if len(rows) > MAX_TASKS:
        raise InvalidKwargsError(f"{where} holds {len(rows)} tasks; at most {MAX_TASKS} are allowed.")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, row in enumerate(rows, 1):
        if not isinstance(row, Mapping) or not isinstance(row.get("id"), str) or not isinstance(row.get("goal"), str):
            raise InvalidKwargsError(
                f"{where}: task {number} must be an object with a string 'id' and a string 'goal', got {row!r:.200}."
            )
        if row["id"] in seen:
            raise InvalidKwargsError(f"{where}: task id {row['id']!r} appears twice; task ids must be unique.")
        seen.add(row["id"])
        out.append(dict(row))
    return out


def load_verifier(verifier: str | Verifier) -> Verifier:
    """A verifier callable, or ``"module:function"`` naming one."""
    if callable(verifier):
        return verifier
    if not isinstance(verifier, str) or verifier.count(":") != 1:
        raise InvalidKwargsError(f"verifier must be a callable or 'module:function', got {verifier!r}.")
    module_name, _, attribute = verifier.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise InvalidKwargsError(f"verifier {verifier!r}: cannot import {module_name!r}: {err}.") from err
    function = getattr(module, attribute, None)
    if not callable(function):
        names = [n for n in vars(module) if callable(getattr(module, n)) and not n.startswith("_")]
        raise InvalidKwargsError(
            f"verifier {verifier!r}: {module_name} has no function {attribute!r}.{suggest(attribute, names)}"
        )
    return function


class MCPEnv(TextEnv):
    """MCP-v0: the tools of any MCP server as actions, a task list and a verifier for the reward.

    The env opens one session with the server (the official ``mcp`` SDK's client) at the first
    ``reset`` and keeps it until ``close`` (``fresh_session=True``: a new one every episode, so
    episodes share no server state). It lists the server's tools into ``info["tools"]`` (OpenAI
    function schemas, docs/tools.md), adds the answer tool, and serves one task per episode.

    Observation: at reset the task's goal and the tool list; after a call the tool's result
    text, ``Tool result (NAME): ...`` (at most ``max_result_chars`` characters of it; a tool's
    own failure is ``Tool error (NAME): ...``, a valid step).

    Actions: one tool call per turn, ``{"name": "add", "arguments": {"a": 1, "b": 2}}``; the
    episode ends with ``{"name": "submit", "arguments": {"answer": "..."}}``. A malformed call
    (not JSON, unknown tool, arguments that break the tool's schema: :mod:`envgym.tools`) is an
    invalid step whose observation is the error, ``Tool error (NAME): ...``.

    Reward components: ``success_reward`` and whatever else the verifier returns (declared in
    ``verifier_components``), given when the answer is submitted; ``invalid_action_reward``,
    ``step_cost_reward``. The verifier is ``verifier(task, transcript, answer)`` returning a
    number (``success_reward``) or a mapping of components; ``transcript`` is the episode's
    calls (``name``, ``arguments``, ``result``, ``is_error``). Success: ``success_reward`` >= 1.

    Episode end: the answer is submitted (terminated), ``max_turns`` (truncated), or the
    ``invalid_limit``. A server that cannot be started or reached, dies, or does not answer
    within ``timeout`` raises :class:`~envgym.mcp.client.MCPServerError` (an infrastructure
    failure, never scored as a zero).

    Arguments:
        server: a stdio command line (``["python", "-m", "my_server"]``) or a streamable-HTTP
            URL (``http://127.0.0.1:8000/mcp``).
        tasks: a list of ``{"id", "goal", ...}`` mappings or a JSONL file of them; a task with a
            ``split`` field is served only in that split.
        verifier: ``"module:function"`` or a callable, ``(task, transcript, answer)`` ->
            number or mapping of reward components.
        verifier_components: the components the verifier returns besides ``success_reward``.
        answer_tool: the name of the answer tool (``submit``).
        timeout, connect_timeout: seconds for each call, and for starting the server.
        server_env: environment variables of a stdio server.
        fresh_session: a new session (a new stdio server) at every reset.
        max_result_chars: characters of a tool result kept.

    Determinism: as the server's. A stdio server with ``fresh_session=True`` starts from scratch
    every episode (``envgym.testing.check_env`` passes on the test calculator that way); a
    server that keeps state across sessions gives each episode what the last one left.

    Version history: v0 (this).
    """

    name: ClassVar[str] = "mcp"
    default_max_turns: ClassVar[int] = 30
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4, "picklable": False}

    def __init__(
        self,
        *,
        server: str | Sequence[str],
        tasks: str | Path | Sequence[Mapping[str, Any]],
        verifier: str | Verifier,
        verifier_components: Sequence[str] = (),
        answer_tool: str = "submit",
        timeout: float = 30.0,
        connect_timeout: float = 60.0,
        server_env: Mapping[str, str] | None = None,
        fresh_session: bool = False,
        max_result_chars: int = MAX_RESULT_CHARS,
        **kwargs: Any,
    ) -> None:
        if not (isinstance(server, str) and server.strip()) and not (
            isinstance(server, Sequence) and server and all(isinstance(p, str) for p in server)
        ):
            raise InvalidKwargsError(
                f"server must be a command line (['python', '-m', 'my_server']) or an http(s) URL, got {server!r}."
            )
        for label, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InvalidKwargsError(f"{label} must be a positive number of seconds, got {value!r}.")
        if (
            isinstance(max_result_chars, bool)
            or not isinstance(max_result_chars, int)
            or not (100 <= max_result_chars <= MAX_TEXT_LENGTH // 2)
        ):
            raise InvalidKwargsError(
                f"max_result_chars must be an integer from 100 to {MAX_TEXT_LENGTH // 2}, got {max_result_chars!r}."
            )
        extra = tuple(verifier_components)
        for component in extra:
            if not isinstance(component, str) or not component.endswith("_reward"):
                raise InvalidKwargsError(f"verifier_components are names ending in '_reward', got {component!r}.")
        # Instance-level: the verifier decides which components exist (TextEnv reads these).
        self.reward_components = tuple(dict.fromkeys((*_BASE_COMPONENTS, *extra)))
        self.reward_basis = self.reward_components
        super().__init__(**kwargs)
        self.server = list(server) if not isinstance(server, str) else server
        self.tasks = load_tasks(tasks)
        self.verifier = load_verifier(verifier)
        self.answer_tool = answer_tool
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.server_env = dict(server_env or {})
        self.fresh_session = bool(fresh_session)
        self.max_result_chars = int(max_result_chars)
        self._connection: MCPConnection | None = None
        self._tools: list[dict[str, Any]] = []
        self._schemas: dict[str, Mapping[str, Any]] = {}
        self._record: dict[str, Any] = {}
        self._transcript: list[dict[str, Any]] = []
        self._board = ""

    # ------------------------------------------------------------------ the session
    def _connect(self) -> None:
        if self._connection is not None and (self.fresh_session or not self._connection.alive):
            self._connection.close()
            self._connection = None
        if self._connection is None:
            self._connection = MCPConnection(
                self.server,
                timeout=self.timeout,
                connect_timeout=self.connect_timeout,
                env=self.server_env,
                max_result_chars=self.max_result_chars,
            )
            tools = openai_tools(self._connection.list_tools())
            names = {tool["function"]["name"] for tool in tools}
            if self.answer_tool in names:
                raise ConfigError(
                    f"the MCP server {describe_server(self.server)!r} has a tool named {self.answer_tool!r}, the "
                    "answer tool's name: pass answer_tool='final_answer' (or another free name)."
                )
            answer = {
                "type": "function",
                "function": {
                    "name": self.answer_tool,
                    "description": "Submit the final answer; this ends the episode.",
                    "parameters": {
                        "type": "object",
                        "properties": {"answer": {"type": "string"}},
                        "required": ["answer"],
                        "additionalProperties": False,
                    },
                },
            }
            self._tools = [*tools, answer]
            self._schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in self._tools}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._connect()
        return super().reset(seed=seed, options=options)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        super().close()

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        pool = [t for t in self.tasks if t.get("split", self.split) == self.split]
        if not pool:
            raise InvalidKwargsError(f"no task of split {self.split!r}: the tasks' splits are given by their 'split'.")
        wanted = (options or {}).get("task_id")
        if wanted is not None:
            matches = [t for t in pool if t["id"] == wanted]
            if not matches:
                raise InvalidKwargsError(
                    f"no task {wanted!r} in split {self.split!r}.{suggest(str(wanted), [t['id'] for t in pool])}"
                )
            record = matches[0]
        else:
            record = pool[rng.randrange(len(pool))]
        self._record = record
        self._transcript = []
        listing = "\n".join(
            f"- {tool['function']['name']}({', '.join(tool['function']['parameters'].get('properties', {}))}): "
            f"{tool['function']['description'][:200]}"
            for tool in self._tools
        )
        self._board = (
            'Call one tool per turn as JSON: {"name": TOOL, "arguments": {...}}. '
            f'End with {{"name": "{self.answer_tool}", "arguments": {{"answer": "..."}}}}.\nTools:\n{listing}'
        )
        return Task(id=f"mcp-{record['id']}", goal=record["goal"], split=self.split)

    def _observe(self) -> str:
        board, self._board = self._board, ""  # the tool list is shown once, at reset
        return board

    def _parse(self, text: str) -> ToolCall:
        try:
            return parse_tool_calls(text, self._schemas)[0]
        except ToolCallError as err:
            raise InvalidAction(str(err)) from None

    def _apply(self, action: ToolCall) -> Transition:
        name, arguments = action.name, dict(action.arguments)
        if name == self.answer_tool:
            return self._submit(str(arguments["answer"]))
        assert self._connection is not None
        result = self._connection.call_tool(name, arguments)
        self._transcript.append(
            {"name": name, "arguments": arguments, "result": result.text, "is_error": result.is_error}
        )
        return Transition(
            observation=tool_error(name, result.text) if result.is_error else tool_result(name, result.text)
        )

    def _submit(self, answer: str) -> Transition:
        try:
            verdict = self.verifier(dict(self._record), list(self._transcript), answer)
        except Exception as err:
            raise EnvgymError(
                f"MCP-v0: the verifier failed on task {self._record['id']!r}: {type(err).__name__}: {err}"
            ) from err
        components = {"success_reward": verdict} if isinstance(verdict, (int, float)) else verdict
        if not isinstance(components, Mapping):
            raise EnvContractError(f"MCP-v0: the verifier must return a number or a mapping, got {verdict!r:.100}.")
        rewards: dict[str, float] = {}
        for key, value in components.items():
            if key not in self.reward_components:
                raise EnvContractError(
                    f"MCP-v0: the verifier returned the component {key!r}, not declared: pass "
                    f"verifier_components=[{key!r}] (declared: {', '.join(self.reward_components)})."
                )
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise EnvContractError(f"MCP-v0: the verifier's {key!r} must be a finite number, got {value!r}.")
            rewards[key] = float(value)
        success = rewards.get("success_reward", 0.0) >= 1.0
        return Transition(observation=f"Answer submitted: {answer}", rewards=rewards, terminated=True, success=success)

    def sample_action(self, rng: random.Random) -> str:
        tool = rng.choice(self._tools)["function"] if self._tools else {"name": self.answer_tool, "parameters": {}}
        properties = tool["parameters"].get("properties", {})
        arguments = {key: _sample_value(spec, rng) for key, spec in properties.items()}
        return json.dumps({"name": tool["name"], "arguments": arguments})

    def _info(self, components: dict[str, float], valid: bool, success: bool, reason: Any) -> dict[str, Any]:
        info = super()._info(components, valid, success, reason)
        info["tools"] = [json.loads(json.dumps(tool)) for tool in self._tools]  # a copy: callers keep infos
        info["parallel_tool_calls"] = False
        return info


def _sample_value(spec: Any, rng: random.Random) -> Any:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if kind in ("integer", "number"):
        return rng.randint(0, 9)
    if kind == "boolean":
        return rng.random() < 0.5
    return rng.choice(["a", "b", "1", "answer"])
